"""One-character words scored as pairs with their neighbour (issue 46, item 2): "type 2 diabetes" and "type 1
diabetes" rank differently, the pair counts are the texts' own adjacencies, and a search with pairs is the
reference scorer plus each pair's BM25 contribution, counted by hand."""

from __future__ import annotations

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import BM25Searcher, Retriever
from chitragupta.engine.text.tokenize import runs_bytes, short_pairs

from helpers import make_workspace, random_docs

PAIRS = [("type 2 diabetes", "type 1 diabetes"), ("vitamin C deficiency", "vitamin D deficiency"),
         ("IL-6 signalling in T cells", "IL-4 signalling in T cells")]
NAMED = [  # each names the other's word too, so only the pairs tell them apart
    {"_id": "t2", "title": "Insulin", "text": "In type 2 diabetes the cells resist insulin, unlike type 1."},
    {"_id": "t1", "title": "Insulin", "text": "In type 1 diabetes the cells resist insulin, unlike type 2."},
    {"_id": "vc", "title": "Deficiency", "text": "Vitamin C deficiency causes scurvy, unlike vitamin D."},
    {"_id": "vd", "title": "Deficiency", "text": "Vitamin D deficiency causes scurvy, unlike vitamin C."},
    {"_id": "i6", "title": "Cytokines", "text": "IL-6 signalling shapes T cells, unlike IL-4."},
    {"_id": "i4", "title": "Cytokines", "text": "IL-4 signalling shapes T cells, unlike IL-6."},
]


def _corpus() -> list[dict]:
    rng = np.random.default_rng(5)
    docs = random_docs(11, 60, vocab=50)
    for d in docs:  # one-character words scattered through the filler, beside all kinds of words
        words = d["text"].split()
        for _ in range(int(rng.integers(0, 4))):
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(list("12cdtx"))))
        d["text"] = " ".join(words)
    return docs + NAMED


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("pairs"), _corpus())


def _config(root, text: str):
    (root / "config.toml").write_text(text)


def test_the_three_scifact_pairs_rank_differently_and_each_finds_its_own_source(root):
    r = Retriever.open(root)
    for (a, b), (want_a, want_b) in zip(PAIRS, [("t2", "t1"), ("vc", "vd"), ("i6", "i4")]):
        got_a, got_b = r.rank_many([a], 5).keys()[0], r.rank_many([b], 5).keys()[0]
        assert got_a != got_b and got_a[0] == want_a and got_b[0] == want_b, (a, got_a, b, got_b)


def test_without_pairs_the_one_character_word_counts_for_nothing(tmp_path):
    root = make_workspace(tmp_path, _corpus())
    _config(root, "[retrieval]\nshort_word_pairs = false\n")
    r = BM25Searcher.open(root)
    for a, b in PAIRS:
        ra, rb = r.rank_many([a], 10), r.rank_many([b], 10)
        assert ra.topk.ids.tolist() == rb.topk.ids.tolist() and ra.topk.scores.tolist() == rb.topk.scores.tolist()
    notes = r.search("type 2 diabetes", 3).notes
    assert any(n.kind == "dropped" and n.text.endswith('to require "2", quote it with the words beside it: "type 2 diabetes"')
               for n in notes)
    assert not any(n.kind == "pairs" for n in notes)


def _reference_counts(records, pair) -> dict[str, int]:
    """How often ``pair``'s words stand side by side in each record's title, or in its text (never across)."""
    want = (pair[0].encode(), pair[1].encode())
    out = {}
    for d in records:
        n = 0
        for part in (d["title"], d["text"]):
            runs = runs_bytes(part)
            n += sum((runs[i], runs[i + 1]) == want for i in range(len(runs) - 1))
        if n:
            out[d["_id"]] = n
    return out


def test_pair_counts_are_the_texts_adjacencies(root, monkeypatch):
    import chitragupta.engine.search.pairs as pairs_mod
    from chitragupta.engine.search.pairs import pair_counts

    r = Retriever.open(root)
    index = r.index
    records = _corpus()
    pairs = [("type", "2"), ("2", "diabetes"), ("vitamin", "c"), ("t", "cells"), ("il", "6"), ("zzzunknown", "2")] + [
        (w, c) for w in ("twin", "model", "digital", "sensor") for c in "12cdtx"] + [
        (c, w) for w in ("twin", "model", "digital", "sensor") for c in "12cdtx"]
    counts = pair_counts(index, pairs)
    one_at_a_time = {}
    monkeypatch.setattr(pairs_mod, "_BLOCK", 3)  # words a few occurrences at a time
    for pair in pairs:
        pair_counts(index, [pair], one_at_a_time)
    grouped = pair_counts(index, pairs)  # many words, so many groups
    assert {x: [a.tolist() for a in v] for x, v in grouped.items()} == {x: [a.tolist() for a in v] for x, v in counts.items()}
    tried = 0
    for pair in pairs:
        docs, tf = counts[pair]
        got = {index.citekeys[int(d)]: int(n) for d, n in zip(docs, tf)}
        assert got == _reference_counts(records, pair), pair
        assert [x.tolist() for x in one_at_a_time[pair]] == [docs.tolist(), tf.tolist()]
        tried += bool(got)
    assert tried > 10  # the filler holds pairs, not only the named records
    assert counts[("zzzunknown", "2")][0].size == 0


def test_a_search_with_pairs_is_the_reference_plus_each_pairs_contribution(root):
    from chitragupta.engine.search.explain import explain
    from chitragupta.kernels.reference import score_dense
    from chitragupta.kernels.types import bm25_idf

    r = BM25Searcher.open(root)
    p, params = r.index.raw_postings, r.params
    records = {d["_id"]: d for d in _corpus()}
    queries = [a for pr in PAIRS for a in pr] + ["twin 1 model", "c sensor d digital", "twin"]
    ranked = r.rank_many(queries, 8)
    for q, text in enumerate(queries):
        plan = r.scorer.plan([text])
        scores, matched = score_dense(p, plan.batch.terms, params)
        for pair in short_pairs(text):
            counts = _reference_counts(records.values(), pair)
            idf = bm25_idf(np.asarray([len(counts)]), p.n_docs)[0]
            for key, tf in counts.items():
                d = r.index.citekeys.find(key)
                norm = params.k1 * (1 - params.b + params.b * float(p.doc_len[d]) / p.avgdl())
                scores[d] += idf * tf * (params.k1 + 1) / (tf + norm)
        hit = np.flatnonzero(matched & (scores > 0))
        order = hit[np.lexsort((hit, -scores[hit]))][:8]
        n = int((ranked.topk.ids[q] >= 0).sum())
        assert ranked.topk.ids[q, :n].tolist() == order.tolist(), text
        assert np.allclose(ranked.topk.scores[q, :n], scores[order], rtol=1e-12)
        if n:  # explain gives the top hit's score to the bit, the pairs among its terms
            ex = explain(r, text, r.index.citekeys[int(ranked.topk.ids[q, 0])])
            assert ex.score == ranked.topk.scores[q, 0] and ex.rank == 1
            assert [t.term for t in ex.terms if t.origin == "pair"] == [" ".join(x) for x in sorted(short_pairs(text))]
    notes = r.search("type 2 diabetes", 3).notes
    assert [n.text for n in notes if n.kind == "pairs"] == [
        'one-character words scored with the word beside them: "type 2", "2 diabetes"']
    assert not any(n.kind == "dropped" for n in notes)
    notes = r.search("e.g. a t test of type 2", 3).notes  # one-character words no pair carries: named, with the quote
    assert [n.text for n in notes if n.kind == "dropped"] == [
        'query words not indexed (stopwords or shorter than 2 characters): e, g, a, t, of; '
        'to require "t", quote it with the words beside it: "a t test"']


def test_a_large_batch_pairs_the_same_rows_as_single_queries(root):
    r = Retriever.open(root)
    many = ([a for pr in PAIRS for a in pr] + ["twin model", "e.g. twin", "x"]) * 4
    big = r.rank_many(many, 6)
    for q, text in enumerate(many[:9]):
        one = r.rank_many([text], 6)
        assert big.topk.ids[q].tolist() == one.topk.ids[0].tolist()
        assert big.topk.scores[q].tobytes() == one.topk.scores[0].tobytes()


def test_an_index_without_positions_names_the_word_and_the_quoted_form(tmp_path):
    root = make_workspace(tmp_path, _corpus())
    _config(root, "[retrieval]\npositions = false\n")
    r = BM25Searcher.open(root)
    off = r.rank_many(["type 2 diabetes", "type 1 diabetes"], 10)
    assert off.topk.ids[0].tolist() == off.topk.ids[1].tolist()
    notes = r.search("type 2 diabetes", 3).notes
    assert any(n.kind == "dropped" and '"type 2 diabetes"' in n.text for n in notes)
    # and a quoted phrase is what works: it holds "type 2" and not "type 1" in place
    assert r.rank_many(['"type 2 diabetes"'], 10).keys()[0] == ["t2"]


def test_a_sweep_ranks_the_pairs_as_search_does_at_every_point(root):
    from chitragupta.engine.evaluation.sweep import sweep_values
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.kernels.sweep import grid_of

    queries = [(f"q{i}", t) for i, t in enumerate([a for pr in PAIRS for a in pr] + ["twin 1 model", "c sensor"])]
    qrels = {"q0": {"t2": 1}, "q1": {"t1": 1}, "q2": {"vc": 1}, "q3": {"vd": 1}, "q4": {"i6": 1}, "q5": {"i4": 1},
             "q6": {"d0003": 1, "d0010": 1}, "q7": {"d0020": 1}}
    grid = grid_of([0.5, 1.5], [0.3, 0.75])
    r = Retriever.open(root)
    got = sweep_values(r, queries, qrels, grid, "MRR@10", k=10)
    for point, value in zip(grid, got):
        cfg = load_config(overrides={"retrieval": {"k1": point.k1, "b": point.b}})
        one = Retriever.open(Workspace.open(root, cfg))
        keys = one.rank_many([t for _q, t in queries], 10).keys()
        rr = [next((1 / (i + 1) for i, key in enumerate(ks) if key in qrels[q]), 0.0) for (q, _t), ks in zip(queries, keys)]
        assert value == pytest.approx(sum(rr) / len(rr), abs=1e-12), point


def test_the_numpy_and_numba_backends_rank_the_pairs_alike_to_the_bit(root):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace

    queries = [a for pr in PAIRS for a in pr] + ["twin 1 model", "c sensor d digital", "1 twin", "x c 2 t", "twin"]
    got = {}
    for backend in ("numpy", "numba"):
        r = Retriever.open(Workspace.open(root, load_config(overrides={"retrieval": {"backend": backend}})))
        got[backend] = r.rank_many(queries, 7).topk
    assert got["numpy"].ids.tolist() == got["numba"].ids.tolist()
    assert got["numpy"].scores.tobytes() == got["numba"].scores.tobytes()
