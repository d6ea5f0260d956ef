""""Papers like this one" (issue 30, item 4): ``similar`` on every engine, through every surface. Each engine
is checked against a slow reference: BM25 against searching the source's distinctive terms as a query
string (and the terms' weights against ``explain``), the embedding index against an exact scan of every
chunk from the mean of the source's vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import BM25Searcher
from chitragupta.errors import UsageError

from helpers import make_workspace, random_docs, run_main


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("similar"), random_docs(23, 150, vocab=60))


def test_bm25_similar_is_a_search_for_the_sources_distinctive_terms_without_the_source(ws):
    from chitragupta.engine.search.explain import explain
    from chitragupta.engine.search.similar import SIMILAR_TERMS, distinctive_terms

    r = BM25Searcher.open(ws)
    for key in ("d0000", "d0007", "d0042", "d0149"):
        doc = r.doc_id(key)
        ids, weights = distinctive_terms(r.scorer, doc)
        assert 0 < ids.size <= SIMILAR_TERMS and np.all(np.diff(weights) <= 0)
        vocab = [r.index.vocab[int(t)] for t in ids]
        # the weights are the terms' contributions to the source's own score, as explain gives them
        ex = {t.term: t.contribution for t in explain(r, " ".join(vocab), key).terms}
        assert weights.tolist() == pytest.approx([ex[v] for v in vocab], rel=1e-12)
        # no other term of the source weighs more than the lightest one taken
        all_terms = explain(r, " ".join(r.index.vocab[i] for i in range(len(r.index.vocab))), key).terms
        lighter = sorted((t.contribution for t in all_terms if t.term not in set(vocab)), reverse=True)
        assert not lighter or lighter[0] <= weights[-1]
        for k in (1, 5, 149, 10_000):
            got = r.rank_similar(key, k)
            ref = r.rank_many([" ".join(vocab)], min(k, 149) + 1)
            want = [(d, s) for d, s in zip(ref.topk.ids[0].tolist(), ref.topk.scores[0].tolist()) if d >= 0 and d != doc]
            n = int((got.topk.ids[0] >= 0).sum())
            assert list(zip(got.topk.ids[0, :n].tolist(), got.topk.scores[0, :n].tolist())) == want[:min(k, 149)]
            assert doc not in got.topk.ids[0].tolist()
        resp = r.similar(key, 5)
        assert resp.hits and all(h.citekey != key for h in resp.hits) and all(h.snippet for h in resp.hits)
        assert any(n.kind == "similar" and key in n.text for n in resp.notes)


def _small_library() -> list[dict]:
    """Seven sources whose 64 heaviest terms are each their own (100 words no other source uses, three times
    each); what they share weighs less: a topic two of them hold, and words every one of them holds."""
    docs = []
    for i in range(7):
        own = " ".join(f"w{i}x{j}" for j in range(100))
        topic = "summarization faithfulness annotators" if i in (2, 5) else f"layout parser{i % 3}"
        docs.append({"_id": f"p{i}", "title": f"paper {i}", "text": f"{own} {own} {own} {topic} study paper"})
    return docs


def test_a_small_library_finds_every_neighbour_by_the_terms_they_share(tmp_path):
    root = make_workspace(tmp_path, _small_library())
    r = BM25Searcher.open(root)
    df = np.diff(np.asarray(r.index.raw_postings.indptr))
    for i in range(7):
        key = f"p{i}"
        ranked = r.rank_similar(key, 6)
        keys = ranked.keys()[0]
        assert sorted(keys) == sorted(f"p{j}" for j in range(7) if j != i)  # all six, the source never
        assert all(df[r.index.vocab.find(t)] > 1 for t in ranked.plan.terms[0])  # only terms another holds
        assert r.rank_similar(key, 1).keys()[0] == keys[:1]  # a short list is the head of the longer one
    assert r.rank_similar("p2", 6).keys()[0][0] == "p5" and r.rank_similar("p5", 6).keys()[0][0] == "p2"
    note = [n.text for n in r.similar("p2", 3).notes if n.kind == "similar"][0]
    assert "that other sources hold too" in note and "w2x" not in note and "summarization" in note


def test_an_unknown_citekey_names_the_closest_and_a_source_without_terms_is_like_nothing(tmp_path):
    docs = random_docs(3, 20)
    docs[4]["title"], docs[4]["text"] = "", "of the and"  # nothing indexable
    root = make_workspace(tmp_path, docs)
    r = BM25Searcher.open(root)
    with pytest.raises(UsageError, match=r"unknown citekey 'd0003x'; did you mean: d0003"):
        r.similar("d0003x")
    resp = r.similar("d0004")
    assert resp.hits == [] and any("no indexed term" in n.text for n in resp.notes)
    docs[5]["title"], docs[5]["text"] = "", "zzuniquea zzuniqueb"  # terms no other source holds: like nothing
    r = BM25Searcher.open(make_workspace(tmp_path / "b", docs))
    resp = r.similar("d0005")
    assert resp.hits == [] and any("no other source holds any of its terms" in n.text for n in resp.notes)
    with pytest.raises(UsageError, match="k must be an integer >= 1"):
        r.similar("d0003", 0)


def test_similar_through_the_cli_and_the_warm_engines(ws):
    from chitragupta.service.warm import WarmEngines

    want = [h.to_dict() for h in BM25Searcher.open(ws).similar("d0010", 4).hits]
    p = run_main("similar", "-w", ws, "d0010", "-k", "4", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == want and "[note] like d0010" in p.stderr
    p = run_main("similar", "-w", ws, "d0010", "-k", "4")
    assert p.returncode == 0 and p.stdout.splitlines()[0].split()[2] == want[0]["citekey"]
    p = run_main("similar", "-w", ws, "nope")
    assert p.returncode == 1 and p.stderr.startswith("error: unknown citekey 'nope'")
    assert WarmEngines(ws).similar("d0010", k=4)["hits"] == want


# -- the embedding index and hybrid --------------------------------------------------------------------

from helpers import cli_main, corpus_records, import_records  # noqa: E402,F401  (the session's MiniLM)


@pytest.fixture(scope="module")
def dense_ws(tmp_path_factory, encoder) -> Path:
    root = import_records(tmp_path_factory.mktemp("simd") / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root


@pytest.mark.slow
@pytest.mark.parametrize("key", ["oceanlong", "mixed", "soil"])
def test_embed_similar_is_the_exact_scan_from_the_mean_of_the_sources_chunks(dense_ws, key):
    from chitragupta.enrich.search import EmbedSearcher

    e = EmbedSearcher.open(dense_ws, device="cpu")
    store = e.store
    pos = store.citekeys.index(key)
    doc = np.asarray(store.chunk_doc)
    vecs = np.asarray(store.vectors, dtype=np.float64)
    mean = vecs[doc == pos].mean(axis=0)
    scores = vecs @ (mean / np.linalg.norm(mean))
    order = sorted(range(len(doc)), key=lambda i: (-np.float32(scores[i]), i))
    cap = 1  # one hit per source, whatever [enrich].embed_max_passages_per_source says
    want, per = [], {}
    for i in order:
        if doc[i] == pos or per.get(doc[i], 0) >= cap:
            continue
        per[doc[i]] = per.get(doc[i], 0) + 1
        want.append(i)
    for k in (1, 3, 100):
        got = e.rank_similar(key, k)
        n = int((got.topk.ids[0] >= 0).sum())
        assert got.topk.ids[0, :n].tolist() == want[:k]
        assert np.allclose(got.topk.scores[0, :n], scores[want[:k]], atol=1e-5)
    hits = e.similar(key, 4).hits
    assert hits and all(h.citekey != key and h.passage is not None for h in hits)
    assert len({h.citekey for h in hits}) == len(hits)
    with pytest.raises(UsageError, match="not a source of the embedding index; did you mean: soil"):
        e.similar("soill")


def test_hybrid_similar_fuses_both_sides_and_never_returns_the_source(dense_ws):
    from chitragupta import open_searcher
    from chitragupta.enrich.hybrid import fuse

    h = open_searcher(dense_ws, "hybrid", device="cpu")
    for key in ("oceanlong", "vaccine"):
        got = h.rank_similar(key, 5)
        keys = got.keys()[0]
        assert keys and key not in keys and len(keys) == len(set(keys))
        # the reference: BM25's and the embedding index's own "like" lists, fused by hand with the same rule
        depth = max(h.workspace.config.hybrid.depth, 5)
        b = h.retriever.rank_similar(key, depth)
        d = h._dense_sources(h.dense.rank_similar(key, depth))
        cfg = h.workspace.config.hybrid
        ref = fuse(b.topk.ids.astype(np.int64), b.topk.scores, d[0], d[1], 5, method=cfg.method, rrf_k=cfg.rrf_k,
                   weight_bm25=cfg.weight_bm25, weight_dense=cfg.weight_dense, dense_aux=d[2])
        assert got.topk.ids.tolist() == ref.ids.tolist()
        resp = h.similar(key, 5)
        assert [x.citekey for x in resp.hits] == keys and any(x.snippet for x in resp.hits)


# -- filters: the hits are the unfiltered "like" list restricted to the allowed sources ------------------


def _restricted(ranked, allowed: set, k: int, key_of):
    ids, scores = ranked.topk.ids[0], ranked.topk.scores[0]
    out = [(int(i), float(s)) for i, s in zip(ids, scores) if i >= 0 and key_of(int(i)) in allowed]
    return out[:k]


def test_bm25_similar_with_filters_is_the_unfiltered_list_restricted_to_the_bit(ws, tmp_path):
    r = BM25Searcher.open(ws)
    keys = [r.index.citekeys[i] for i in range(r.index.n_docs)]
    allowed = set(keys[::3]) | {"d0007"}  # the source itself allowed: still never a hit
    full = r.rank_similar("d0007", r.index.n_docs)
    for k in (3, 10, len(allowed) + 5):  # k past the allowed set: every allowed one, nothing else
        got = r.rank_similar("d0007", k, filters=r_filters(allowed))
        n = int((got.topk.ids[0] >= 0).sum())
        pairs = [(int(i), float(s)) for i, s in zip(got.topk.ids[0, :n], got.topk.scores[0, :n])]
        assert pairs == _restricted(full, allowed - {"d0007"}, k, lambda i: keys[i])
        assert np.asarray([s for _i, s in pairs]).tobytes() == np.asarray(
            [s for _i, s in _restricted(full, allowed - {"d0007"}, k, lambda i: keys[i])]).tobytes()
    resp = r.similar("d0007", 5, filters={"year": "2000.."})  # no source has a year
    assert resp.hits == [] and any(n.kind == "filter" and "year" in n.text for n in resp.notes)
    # the CLI: --keys FILE
    f = tmp_path / "keys.txt"
    f.write_text("\n".join(sorted(allowed)) + "\n")
    p = run_main("similar", "d0007", "-w", ws, "-k", "50", "--json", "--keys", f)
    assert p.returncode == 0, p.stderr
    got_keys = [h["citekey"] for h in json.loads(p.stdout)]
    assert got_keys and set(got_keys) <= allowed - {"d0007"}


def r_filters(allowed):
    from chitragupta.engine.search.filters import Filters

    return Filters.from_dict({"keys": sorted(allowed)})


def test_embed_and_hybrid_similar_with_filters_keep_to_the_allowed_sources(dense_ws):
    from chitragupta import open_searcher
    from chitragupta.enrich.search import EmbedSearcher

    e = EmbedSearcher.open(dense_ws, device="cpu")
    keys = list(e.store.citekeys)
    allowed = set(keys[::2]) - {"oceanlong"}
    full = e.rank_similar("oceanlong", 1000)
    doc = np.asarray(e.store.chunk_doc)
    got = e.rank_similar("oceanlong", 1000, filters=r_filters(allowed))
    n = int((got.topk.ids[0] >= 0).sum())
    want = _restricted(full, allowed, 10**6, lambda i: keys[doc[i]])
    assert n and [int(i) for i in got.topk.ids[0, :n]] == [i for i, _s in want][:n]
    assert {keys[doc[int(i)]] for i in got.topk.ids[0, :n]} <= allowed
    h = open_searcher(dense_ws, "hybrid", device="cpu")
    resp = h.similar("oceanlong", 20, filters={"keys": sorted(allowed)})
    assert resp.hits and {x.citekey for x in resp.hits} <= allowed


# -- the seven real papers (issue 46, item 1): a researcher's small full-text library ---------------------

SEVEN_BIB = """
@inproceedings{lo2020s2orc, title={S2ORC: The Semantic Scholar Open Research Corpus}, year={2020}, file={2020.acl-main.447.pdf}}
@inproceedings{krishna2023longeval, title={LongEval: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization}, year={2023}, file={2023.eacl-main.121.pdf}}
@article{august2022paperplain, title={Paper Plain: Making Medical Research Papers Approachable to Healthcare Consumers with Natural Language Processing}, year={2022}, file={2203.00130v1.pdf}}
@inproceedings{shen2022multilexsum, title={Multi-LexSum: Real-World Summaries of Civil Rights Lawsuits at Multiple Granularities}, year={2022}, file={2206.10883v3.pdf}}
@inproceedings{chang2023citesee, title={CiteSee: Augmenting Citations in Scientific Papers with Persistent and Personalized Historical Context}, year={2023}, file={2302.07302v1.pdf}}
@inproceedings{shen2023beyond, title={Beyond Summarization: Designing AI Support for Real-World Expository Writing Tasks}, year={2023}, file={2304.02623v1.pdf}}
@article{lo2023papermage, title={PaperMage: A Unified Toolkit for Processing, Representing, and Manipulating Visually-Rich Scientific Documents}, year={2023}, file={papermage.pdf}}
"""


@pytest.mark.slow
@pytest.mark.shared
def test_every_one_of_the_seven_papers_has_its_six_neighbours(tmp_path):
    import shutil

    from chitragupta.engine.library.sync import sync

    from helpers import SHARED, bib_workspace_at

    ws = bib_workspace_at(tmp_path / "seven", SEVEN_BIB)
    for pdf in (SHARED / "data" / "pdfs" / "papermage").glob("*.pdf"):
        shutil.copy(pdf, ws.root / "papers" / pdf.name)
    sync(ws)
    r = BM25Searcher.open(ws.root)
    keys = [r.index.citekeys[i] for i in range(r.index.n_docs)]
    assert len(keys) == 7
    first = {}
    for key in keys:
        resp = r.similar(key, 6, snippet_chars=0)
        got = [h.citekey for h in resp.hits]
        assert sorted(got) == sorted(set(keys) - {key}), (key, got)
        first[key] = got[0]
    # the two papers on long-form summarisation find each other first
    assert first["krishna2023longeval"] == "shen2022multilexsum" and first["shen2022multilexsum"] == "krishna2023longeval"
