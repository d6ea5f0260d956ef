"""Hybrid search (BM25 + the embedding index, fused per source), the encoder's prefixes, and explain.

The fusion is checked against a plain-Python reference on random lists; the searcher against fusing
BM25's and the embedding index's own rankings by hand; explain against the search's scores and ranks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from chitragupta.enrich.hybrid import fuse

from helpers import make_workspace, random_docs, run_main, write_jsonl

# -- the fusion, against a slow reference ------------------------------------------------------------

def _reference(b_lists, d_lists, k, method, rrf_k, wb, wd):
    out = []
    for b, d in zip(b_lists, d_lists):
        score, rb, rd = {}, {}, {}
        for lst, w, ranks in ((b, wb, rb), (d, wd, rd)):
            if not lst:
                continue
            vals = [s for _i, s in lst]
            lo, hi = min(vals), max(vals)
            mean = sum(vals) / len(vals)
            sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
            for r, (i, s) in enumerate(lst, start=1):
                ranks[i] = r
                if method == "rrf":
                    c = w / (rrf_k + r)
                elif method == "zscore":
                    c = w * ((s - mean) / sd if sd > 0 else 0.0)
                else:
                    c = w * ((s - lo) / (hi - lo) if hi > lo else 1.0)
                score[i] = score.get(i, 0.0) + c
        big = 1 << 62
        order = sorted(score, key=lambda i: (-score[i], rb.get(i, big), rd.get(i, big), i))[:k]
        out.append([(i, score[i]) for i in order])
    return out


def _grid(lists, n):
    ids = np.full((len(lists), n), -1, dtype=np.int64)
    sc = np.full((len(lists), n), -np.inf)
    for q, lst in enumerate(lists):
        for j, (i, s) in enumerate(lst):
            ids[q, j], sc[q, j] = i, s
    return ids, sc


def _random_lists(rng, nq, n_ids, depth):
    out = []
    for _ in range(nq):
        m = int(rng.integers(0, depth + 1))
        ids = rng.choice(n_ids, size=min(m, n_ids), replace=False)
        scores = np.sort(rng.choice([0.5, 1.0, 1.5, 2.0, 3.25], size=ids.size))[::-1]  # ties on purpose
        out.append(list(zip(ids.tolist(), scores.tolist())))
    return out


@pytest.mark.parametrize("method", ["rrf", "minmax", "zscore"])
@pytest.mark.parametrize("seed", range(6))
def test_fuse_equals_the_reference(method, seed):
    rng = np.random.default_rng(seed)
    nq, depth, k = 25, 12, 7
    b, d = _random_lists(rng, nq, 30, depth), _random_lists(rng, nq, 30, depth)
    wb, wd = [(1.0, 1.0), (2.0, 0.5), (1.0, 0.0), (0.0, 1.0), (0.3, 1.7), (1.0, 1.0)][seed]
    rrf_k = [60.0, 0.0, 1.0, 60.0, 10.0, 2.5][seed]
    bi, bs = _grid(b, depth)
    di, ds = _grid(d, depth)
    got = fuse(bi, bs, di, ds, k, method=method, rrf_k=rrf_k, weight_bm25=wb, weight_dense=wd)
    want = _reference(b, d, k, method, rrf_k, wb, wd)
    for q in range(nq):
        n = int((got.ids[q] >= 0).sum())
        assert got.ids[q, :n].tolist() == [i for i, _ in want[q]], q
        assert np.allclose(got.scores[q, :n], [s for _, s in want[q]], rtol=1e-12, atol=0)
        assert (got.ids[q, n:] == -1).all()


def test_rrf_by_hand():
    # A: bm25 rank 1, dense rank 3; B: bm25 2; C: dense 1; D: bm25 3, dense 2
    bi = np.array([[10, 11, 13]])
    di = np.array([[12, 13, 10]])
    got = fuse(bi, np.ones((1, 3)), di, np.ones((1, 3)), 4, rrf_k=60)
    want = {10: 1 / 61 + 1 / 63, 13: 1 / 63 + 1 / 62, 11: 1 / 62, 12: 1 / 61}
    assert got.ids[0].tolist() == [10, 13, 12, 11]  # dense rank 1 (1/61) beats BM25 rank 2 (1/62)
    assert got.ids[0].tolist() == sorted(want, key=lambda i: -want[i])
    assert got.bm25_rank[0].tolist() == [1, 3, 0, 2] and got.dense_rank[0].tolist() == [3, 2, 1, 0]
    # an exact tie goes to the better BM25 rank
    tie = fuse(np.array([[1, 2]]), np.ones((1, 2)), np.array([[2, 1]]), np.ones((1, 2)), 2, rrf_k=60)
    assert tie.ids[0].tolist() == [1, 2] and tie.scores[0, 0] == tie.scores[0, 1]


def test_fuse_refuses_an_unknown_method():
    from chitragupta.errors import ConfigError

    with pytest.raises(ConfigError, match="rrf"):
        fuse(np.zeros((1, 1), np.int64), np.ones((1, 1)), np.zeros((1, 1), np.int64), np.ones((1, 1)), 1,
             method="borda")


# -- explain ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bm25_ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("explain"), random_docs(11, 120))


@pytest.mark.parametrize("weights", [(1.0, 1.0), (2.5, 1.0), (0.0, 3.0)])
def test_explain_terms_sum_to_the_search_score_and_give_its_rank(bm25_ws, weights):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.search.explain import explain

    cfg = load_config(overrides={"retrieval": {"weight_title": weights[0], "weight_abstract": weights[1],
                                               "k1": 1.2, "b": 0.6}})
    r = Retriever.open(Workspace.open(bm25_ws, cfg))
    for query in ("twin digital model", "sensor fidelity bridge water", "query index bm25 ranking"):
        resp = r.search(query, k=120, snippet_chars=0)
        assert resp.hits
        for rank, hit in enumerate(resp.hits, start=1):
            ex = explain(r, query, hit.citekey)
            assert ex.score == pytest.approx(hit.score, rel=1e-9)
            assert math.fsum(t.contribution for t in ex.terms) == pytest.approx(ex.score, rel=1e-12)
            assert ex.rank == rank and ex.hits == len(resp.hits)
            assert all(t.tf_weighted == t.tf + sum((w - 1) * t.tf_fields[f] for f, w in
                                                   (("title", weights[0]), ("abstract", weights[1])))
                       for t in ex.terms)
        miss = next(k for k in (f"d{i:04d}" for i in range(120)) if k not in {h.citekey for h in resp.hits})
        ex = explain(r, query, miss)
        assert ex.score == 0 and ex.rank is None and all(t.tf == 0 for t in ex.terms)


def test_explain_marks_expansion_terms_and_unknown_citekeys(bm25_ws):
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.search.explain import explain
    from chitragupta.errors import UsageError

    r = Retriever.open(bm25_ws)
    (r.workspace.content / "acronyms.toml").write_text('[acronyms]\nDT = "digital twin"\n')
    try:
        top = r.search("DT", k=1, snippet_chars=0)[0]
        ex = explain(r, "DT", top.citekey)
        assert {t.term: t.origin for t in ex.terms} == {"dt": "query", "digital": "expansion", "twin": "expansion"}
        assert ex.score == pytest.approx(top.score, rel=1e-9) and ex.rank == 1
    finally:
        (r.workspace.content / "acronyms.toml").unlink()
    with pytest.raises(UsageError, match="unknown citekey 'd9999'"):
        explain(r, "twin", "d9999")


def test_explain_cli_table_and_json(bm25_ws):
    p = run_main("explain", "-w", bm25_ws, "twin digital model of the", "--citekey", "d0003", "--json")
    assert p.returncode == 0, p.stderr
    ex = json.loads(p.stdout)
    assert ex["citekey"] == "d0003" and "the" in ex["dropped"] and "of" in ex["dropped"]
    assert sum(t["contribution"] for t in ex["terms"]) == pytest.approx(ex["score"])
    p = run_main("explain", "-w", bm25_ws, "twin digital model", "-c", "d0003")
    assert p.returncode == 0 and "contribution" in p.stdout and "(the sum of the contributions)" in p.stdout
    p = run_main("explain", "-w", bm25_ws, "twin", "-c", "nope")
    assert p.returncode == 1 and p.stderr.startswith("error: unknown citekey 'nope'")


# -- hybrid search over a real embedding index ------------------------------------------------------

from helpers import cli_main, corpus_records, import_records  # noqa: E402,F401  (the session's MiniLM)

QUERIES = ["digital twin of a bridge", "coral reef bleaching", "fabricated citations in language models",
           "soil nitrogen and crop yield", "measles vaccine antibody", "ion channel structure"]


@pytest.fixture(scope="module")
def hybrid_ws(tmp_path_factory, encoder) -> Path:
    root = import_records(tmp_path_factory.mktemp("hyb") / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root


def _bm25_as_configured(root: Path):
    """BM25 over ``root`` with ``[retrieval].stemmer`` set to ``[hybrid].bm25_stemmer`` (unless "same"): the
    ranking hybrid should fuse, from the workspace's own index (rebuilt for that stemmer if it differs)."""
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever

    own = root / "config.toml"
    want = load_config(own if own.exists() else None).hybrid.bm25_stemmer
    stem = {"retrieval": {"stemmer": want}} if want != "same" else None
    return Retriever.open(Workspace.open(root, load_config(own if own.exists() else None, overrides=stem)))


def _by_hand(root: Path, queries, k):
    """The shipped ``[hybrid]`` fusion (its method, rrf_k, weights, each list's top max(depth, k)) of BM25's
    ranking (stemmed as ``bm25_stemmer`` says) and the embedding index's ranking collapsed to sources (best
    chunk's score), in plain Python."""
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher

    cfg = Workspace.open(root).config.hybrid
    depth = max(cfg.depth, k)
    r = _bm25_as_configured(root)
    e = EmbedSearcher.open(root, device="cpu")
    bm_ranked = r.rank_many(queries, depth)
    bm = bm_ranked.keys()
    out = []
    for q, query in enumerate(queries):
        dense = []
        ranked = e.rank_many([query], depth * 4, max_per_source=depth)
        for row, sc in zip(ranked.topk.ids[0].tolist(), ranked.topk.scores[0].tolist()):
            if row >= 0 and e.citekey(row) not in [key for key, _ in dense]:
                dense.append((e.citekey(row), sc))
        bm_list = list(zip(bm[q], bm_ranked.topk.scores[q].tolist()))
        score, rb, rd = {}, {}, {}
        for lst, ranks, w in ((bm_list, rb, cfg.weight_bm25), (dense[:depth], rd, cfg.weight_dense)):
            vals = [v for _, v in lst]
            if not vals:
                continue
            lo, hi, mean = min(vals), max(vals), sum(vals) / len(vals)
            sd = (sum((v - mean) ** 2 for v in vals) / len(vals)) ** 0.5
            for rank, (key, v) in enumerate(lst, start=1):
                ranks[key] = rank
                if cfg.method == "rrf":
                    c = w / (cfg.rrf_k + rank)
                elif cfg.method == "zscore":
                    c = w * ((v - mean) / sd if sd > 0 else 0.0)
                else:
                    c = w * ((v - lo) / (hi - lo) if hi > lo else 1.0)
                score[key] = score.get(key, 0.0) + c
        keys = sorted(score, key=lambda c: (-score[c], rb.get(c, 1 << 30), rd.get(c, 1 << 30),
                                            r.index.doc_id(c)))
        out.append([(c, score[c]) for c in keys[:k]])
    return out


@pytest.mark.slow
@pytest.mark.enrich
def test_hybrid_equals_the_shipped_fusion_of_the_two_rankings_by_hand(hybrid_ws):
    from chitragupta.enrich.hybrid import HybridSearcher

    h = HybridSearcher.open(hybrid_ws, device="cpu")
    hr = h.rank_many(QUERIES, 5)
    want = _by_hand(hybrid_ws, QUERIES, 5)
    assert hr.keys() == [[c for c, _ in w] for w in want]
    for q, w in enumerate(want):
        # by hand each query is encoded alone, by hybrid in a batch: float32 sums in another order
        assert np.allclose(hr.topk.scores[q, :len(w)], [s for _, s in w], rtol=1e-5, atol=1e-6)
    # every source at most once, and the fused list is never shorter than either list's distinct sources
    assert all(len(set(keys)) == len(keys) for keys in hr.keys())


@pytest.mark.enrich
def test_hybrid_hits_are_citable_with_the_bm25_snippet(hybrid_ws):
    from chitragupta.enrich.hybrid import HybridSearcher

    h = HybridSearcher.open(hybrid_ws, device="cpu")
    resp = h.search("digital twin of a bridge", k=3, snippet_chars=120)
    assert resp.hits[0].citekey == "bridge" and resp.hits[0].title == "A study of bridge"
    bm = _bm25_as_configured(hybrid_ws).search("digital twin of a bridge", k=7, snippet_chars=120)
    snippet = {x.citekey: x.snippet for x in bm.hits}
    for hit in resp.hits:
        if hit.citekey in snippet:  # BM25 retrieved it: BM25's window
            assert hit.snippet == snippet[hit.citekey]
        else:  # the embedding side alone found it: its best chunk's window
            assert hit.snippet and len(hit.snippet) <= 120
    notes = " ".join(n.text for n in resp.notes)
    cfg = h.workspace.config.hybrid
    assert f"fusion {cfg.method}" + (f" (k={cfg.rrf_k:g})" if cfg.method == "rrf" else "") + \
           f", weights bm25 {cfg.weight_bm25:g} / dense {cfg.weight_dense:g}, depth {cfg.depth}" in notes
    assert "BM25 unit document" in notes


@pytest.mark.enrich
def test_hybrid_without_an_embedding_index_is_bm25_alone_with_a_note(tmp_path, encoder):
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.enrich.hybrid import HybridSearcher

    root = import_records(tmp_path / "ws", corpus_records())
    h = HybridSearcher.open(root, device="cpu")
    resp = h.search("coral reef ocean heat", k=4, snippet_chars=0)
    assert any("hybrid search is BM25 alone" in n.text and "enrich --stages embed" in n.text for n in resp.notes)
    bm = Retriever.open(root).search("coral reef ocean heat", k=4, snippet_chars=0)
    assert [x.citekey for x in resp.hits] == [x.citekey for x in bm.hits]


@pytest.mark.slow
@pytest.mark.enrich
@pytest.mark.parametrize("packed", [True, False], ids=["packed", "files"])
def test_hybrid_over_a_partial_embedding_index_is_bm25_alone_with_its_coverage(tmp_path, encoder, packed):
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.enrich.hybrid import HybridSearcher

    recs = corpus_records()
    root = import_records(tmp_path / "ws", recs, packed=packed)
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    full = HybridSearcher.open(root, device="cpu")
    assert full.dense is not None  # every source encoded: fused
    assert not any("BM25 alone" in n.text for n in full.search("coral reef", k=3).notes)
    import_records(root, recs + [{"_id": "late", "title": "A late addition", "text": "coral reef bleaching " * 30}],
            packed=packed)
    h = HybridSearcher.open(root, device="cpu")
    resp = h.search("coral reef bleaching", k=3)
    n = len(recs)
    note = next(x.text for x in resp.notes if "BM25 alone" in x.text)
    assert f"holds {n} of {n + 1} parsed sources" in note and "enrich --stages embed" in note
    bm = Retriever.open(root).search("coral reef bleaching", k=3)
    assert [x.citekey for x in resp.hits] == [x.citekey for x in bm.hits] and "late" in [x.citekey for x in resp.hits]
    if packed:
        return  # (a packed text is never edited in place; the empty-file case is the per-file layout's)
    # an empty parsed file is nothing the embed stage could encode: it does not make the index partial
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace

    ws = Workspace.open(root)
    with Ledger(ws.ledger_path) as led:
        (ws.root / led.get("late").parsed_path).write_text("")
    assert HybridSearcher.open(root, device="cpu").dense is not None


def h_method() -> str:
    from chitragupta.engine.library.config import load_config

    return load_config(None).hybrid.method


def h_stemmer() -> str:
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.hybrid import bm25_stemmer

    return bm25_stemmer(load_config(None))


@pytest.mark.enrich
def test_hybrid_cli_single_and_batch(hybrid_ws, tmp_path):
    p = run_main("search", "-w", hybrid_ws, "--engine", "hybrid", "digital twin of a bridge", "-k", "3", "--json")
    assert p.returncode == 0, p.stderr
    hits = json.loads(p.stdout)
    assert [h["citekey"] for h in hits][0] == "bridge" and len(hits) == 3
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": f"q{i}", "text": t} for i, t in enumerate(QUERIES)])
    run = tmp_path / "hyb.trec"
    p = run_main("search", "-w", hybrid_ws, "--engine", "hybrid", "--queries", q, "--run", run, "-k", "4")
    assert p.returncode == 0, p.stderr
    assert "engine hybrid" in p.stderr and f"fusion {h_method()}" in p.stderr
    lines = [x.split() for x in run.read_text().splitlines()]
    want = _by_hand(hybrid_ws, QUERIES, 4)
    assert [(x[0], x[2]) for x in lines] == [(f"q{i}", c) for i, w in enumerate(want) for c, _ in w]
    stem = h_stemmer()
    assert all(x[5] == f"chitragupta-hybrid-bm25-{stem}" for x in lines)
    assert f"BM25 stemmer {stem}" in p.stderr


@pytest.mark.enrich
def test_hybrid_passage_unit_without_sidecars_is_the_dense_side_with_notes(hybrid_ws):
    from chitragupta.enrich.hybrid import HybridSearcher

    h = HybridSearcher.open(hybrid_ws, unit="passage", device="cpu")
    resp = h.search("coral reef bleaching", k=3, snippet_chars=100)
    assert any(n.kind == "no-passages" for n in resp.notes)
    assert resp.hits and all(hit.snippet and hit.passage is not None for hit in resp.hits)


# -- prefixes for e5/bge-style models ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.enrich
def test_query_and_passage_prefixes(encoder, tmp_path, capsys):
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import load_encoder, recipe

    enc = load_encoder(load_config(overrides={"enrich": {"query_prefix": "query: ",
                                                         "passage_prefix": "passage: "}}).enrich, "cpu")
    assert enc is not encoder
    assert np.allclose(enc.encode_queries(["coral reefs"]), encoder.encode(["query: coral reefs"]), atol=1e-6)
    assert np.allclose(enc.encode(["coral reefs"]), encoder.encode(["passage: coral reefs"]), atol=1e-6)
    assert "passage_prefix" not in recipe(encoder) and recipe(enc)["passage_prefix"] == "passage: "
    # a passage prefix changes every vector: the store is rebuilt, not mixed
    root = import_records(tmp_path / "ws", corpus_records()[:2])
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    capsys.readouterr()
    (root / "config.toml").write_text('[enrich]\npassage_prefix = "passage: "\n')
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    assert "rebuilt from scratch" in capsys.readouterr().out


@pytest.mark.enrich
def test_hybrid_passage_unit_carries_the_best_bm25_passage(tmp_path, encoder):
    """With sidecars: each source once, its hit BM25's best passage of it (whole paragraph, page, item)."""
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.text.sidecar import dump_sidecar, join_items
    from chitragupta.enrich.hybrid import HybridSearcher

    from helpers import PAPERS

    root = make_workspace(tmp_path, [{"_id": k, "title": items[0]["text"], "text": join_items(items)}
                                     for k, items in PAPERS.items()])
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 5\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for key, items in PAPERS.items():
            (w.root / led.get(key).parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    assert cli_main("enrich", "-w", w.root, "--stages", "embed", "--device", "cpu") == 0
    query = "digital twin bridge deck strain"
    best = {}
    for hit in Retriever.open(w).search(query, k=10, unit="passage"):
        best.setdefault(hit.citekey, hit)
    resp = HybridSearcher.open(w, unit="passage", device="cpu").search(query, k=3)
    keys = [h.citekey for h in resp.hits]
    assert len(keys) == len(set(keys)) and keys[0] == "alpha2020twin"
    assert resp.hits[0].passage is not None and resp.hits[0].page is not None and "alpha2020twin" in best
    for hit in resp.hits:
        if hit.citekey in best:
            b = best[hit.citekey]
            assert (hit.snippet, hit.page, hit.passage) == (b.snippet, b.page, b.passage)


# -- hybrid's BM25 side with a stemmer of its own ([hybrid].bm25_stemmer) ---------------------------

STEM_RECORDS = [{"_id": f"s{i:02d}", "title": t, "text": x} for i, (t, x) in enumerate([
    ("Running models", "runner runs running models of river flows and modelled floods"),
    ("A run of the model", "we run the model once and model the river"),
    ("Connected graphs", "connections connecting connected nodes in graphs"),
    ("Graph connection", "a graph with one connection and a node"),
    ("Flooding rivers", "floods flooded the rivers after rains raining"),
    ("River flood", "the river flood and the rain"),
    ("Nodes", "node nodes noded"),
    ("Unrelated", "coral reef ocean heat"),
])]
STEM_QUERIES = ["running models", "connected graphs", "flooded rivers raining", "nodes"]


def _stem_ws(tmp: Path, name: str, config: str, records=STEM_RECORDS) -> Path:
    root = make_workspace(tmp / name, records)
    (root / "config.toml").write_text(config)
    return root


def test_bm25_stemmer_gives_hybrid_its_own_index_beside_the_plain_one(tmp_path):
    from chitragupta.engine.index.manage import current_generation
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.hybrid import open_bm25

    root = _stem_ws(tmp_path, "a", '[retrieval]\nstemmer = "none"\n[hybrid]\nbm25_stemmer = "english"\n')
    ref = _stem_ws(tmp_path, "b", '[retrieval]\nstemmer = "english"\n')  # the same texts, stemmed as its own
    plain = BM25Searcher.open(root).rank_many(STEM_QUERIES, 5)
    gen = current_generation(Workspace.open(root))
    side = open_bm25(Workspace.open(root))  # what hybrid search fuses when it has an embedding side
    got = side.rank_many(STEM_QUERIES, 5)
    want = BM25Searcher.open(ref).rank_many(STEM_QUERIES, 5)
    assert got.keys() == want.keys() and np.allclose(got.topk.scores, want.topk.scores, rtol=1e-12)
    assert got.keys() != plain.keys()  # stemming changes these rankings, so the check above can fail
    # BM25 search keeps the workspace's own index, untouched; hybrid's sits in its own folder
    assert current_generation(Workspace.open(root)) == gen
    assert BM25Searcher.open(root).rank_many(STEM_QUERIES, 5).keys() == plain.keys()
    assert (root / "content" / "index" / "hybrid-stem-english" / "doc" / "CURRENT").is_file()
    assert side.search("running models", k=3).hits[0].snippet

    # refreshed as the plain one is: a source imported later is in hybrid's index at the next open
    from chitragupta.engine.library.sync import import_jsonl

    more = STEM_RECORDS + [{"_id": "late", "title": "Runners", "text": "runner running runs"}]
    import_jsonl(Workspace.open(root), write_jsonl(tmp_path / "more.jsonl", more))
    assert side.changed()
    again = open_bm25(Workspace.open(root)).rank_many(["runs"], 10).keys()[0]
    assert "late" in again and "s00" in again  # "runs" finds "running" and "runner" only when stemmed


def test_hybrid_without_an_embedding_index_is_bm25_search_and_builds_no_second_index(tmp_path):
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.hybrid import HybridSearcher

    root = _stem_ws(tmp_path, "a", '[retrieval]\nstemmer = "none"\n[hybrid]\nbm25_stemmer = "english"\n')
    h = HybridSearcher.open(root)
    assert h.rank_many(STEM_QUERIES, 5).keys() == BM25Searcher.open(root).rank_many(STEM_QUERIES, 5).keys()
    assert not (root / "content" / "index" / "hybrid-stem-english").exists()
    notes = " ".join(n.text for n in h.search("running models", k=3).notes)
    assert "hybrid search is BM25 alone" in notes and "BM25 stemmer none (the workspace's index)" in notes
    assert h.rank_many(["nodes"], 3).tag == "chitragupta-hybrid-bm25-none"


@pytest.mark.slow
@pytest.mark.enrich
def test_hybrid_fuses_its_own_stemmed_bm25_and_says_so(tmp_path, encoder):
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.hybrid import HybridSearcher

    recs = corpus_records() + STEM_RECORDS
    root = import_records(tmp_path / "ws", recs, '[retrieval]\nstemmer = "none"\n[hybrid]\nbm25_stemmer = "english"\n')
    ref = import_records(tmp_path / "ref", recs, '[retrieval]\nstemmer = "english"\n')
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    h = HybridSearcher.open(root, device="cpu")
    assert h.dense is not None
    assert h.retriever.rank_many(STEM_QUERIES, 5).keys() == BM25Searcher.open(ref).rank_many(STEM_QUERIES, 5).keys()
    resp = h.search("running models", k=3)
    notes = " ".join(n.text for n in resp.notes)
    assert "BM25 stemmer english (hybrid's own index, content/index/hybrid-stem-english)" in notes
    assert h.rank_many(STEM_QUERIES, 3).tag == "chitragupta-hybrid-bm25-english"
    p = run_main("search", "-w", root, "--engine", "hybrid", "running models", "-k", "3")
    assert p.returncode == 0 and "BM25 stemmer english (hybrid's own index" in p.stderr, p.stderr


def test_bm25_stemmer_same_or_equal_fuses_the_workspace_index(tmp_path):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.hybrid import HybridSearcher, bm25_stemmer, bm25_workspace

    root = _stem_ws(tmp_path, "a", "")
    for retrieval, hybrid, stem in (("none", "same", "none"), ("english", "same", "english"),
                                    ("english", "english", "english")):
        cfg = load_config(overrides={"retrieval": {"stemmer": retrieval}, "hybrid": {"bm25_stemmer": hybrid}})
        ws = Workspace.open(root, cfg)
        assert bm25_stemmer(cfg) == stem and bm25_workspace(ws) is ws
        h = HybridSearcher.open(ws)
        assert f"BM25 stemmer {stem} (the workspace's index)" in " ".join(n.text for n in h.index_notes())
    assert [p.name for p in (root / "content" / "index").iterdir() if p.name.startswith("hybrid-")] == []
    cfg = load_config(overrides={"retrieval": {"stemmer": "english"}, "hybrid": {"bm25_stemmer": "none"}})
    own = bm25_workspace(Workspace.open(root, cfg))
    assert own.config.retrieval.stemmer == "none" and own.index_dir == root.resolve() / "content/index/hybrid-stem-none"


def test_bm25_stemmer_refuses_an_unknown_stemmer():
    from chitragupta.engine.library.config import load_config
    from chitragupta.errors import ConfigError

    with pytest.raises(ConfigError, match=r'\[hybrid\] bm25_stemmer = .klingon. is not allowed; allowed: "same"'):
        load_config(overrides={"hybrid": {"bm25_stemmer": "klingon"}})
    assert load_config(overrides={"hybrid": {"bm25_stemmer": "porter"}}).hybrid.bm25_stemmer == "porter"


def test_index_builds_hybrids_own_index_once_an_embedding_store_exists(tmp_path):
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.embed import model_slug
    from chitragupta.enrich.store import store_folder

    root = _stem_ws(tmp_path, "a", '[retrieval]\nstemmer = "none"\n[hybrid]\nbm25_stemmer = "english"\n')
    own = root / "content" / "index" / "hybrid-stem-english" / "doc"
    p = run_main("index", "-w", root)
    assert p.returncode == 0, p.stderr
    assert "hybrid's BM25 index" not in p.stdout and not own.exists()  # no embedding store: BM25 users pay nothing
    ws = Workspace.open(root)
    folder = store_folder(ws.content, model_slug(ws.config.enrich.embed_model))
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")  # only its presence is read here
    p = run_main("index", "-w", root)
    assert p.returncode == 0, p.stderr
    assert "index: hybrid's BM25 index (stemmer english) built in" in p.stdout and (own / "CURRENT").is_file()
    p = run_main("index", "-w", root)
    assert "index: hybrid's BM25 index (stemmer english) up to date" in p.stdout
