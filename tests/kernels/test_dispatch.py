"""Every backend against the numpy reference, and the reference against a formula-only oracle."""

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from chitragupta.kernels import (
    BM25Params,
    Postings,
    QueryBatch,
    TopK,
    reference,
    resolve,
    score_topk,
)
from chitragupta.kernels.dispatch import BACKENDS
from chitragupta.kernels.types import bm25_idf, length_norm

from helpers import CASES, best_of_dense, random_postings, random_queries
from oracle import bm25, same_ranking


def to_docs(p: Postings):
    """The postings as token lists, for the oracle: term t repeated tf times, padded to doc_len."""
    docs = {i: [] for i in range(p.n_docs)}
    for t in range(p.n_terms):
        for j in range(p.indptr[t], p.indptr[t + 1]):
            docs[int(p.indices[j])] += [f"t{t}"] * int(p.tf[j])
    for d, toks in docs.items():
        toks += ["pad"] * (int(p.doc_len[d]) - len(toks))
    return docs


def assert_same_topk(a: TopK, b: TopK, exact=True):
    assert a.ids.shape == b.ids.shape
    if exact:
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.scores, b.scores)
    else:
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5)




@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("k", [1, 10, 40, 100, 5000])
@pytest.mark.parametrize("params", [BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=3.0, b=1.0)])
def test_numba_equals_reference(case, k, params):
    p = random_postings(**case)
    q = random_queries(case["seed"], p.n_terms, 60)
    want = reference.score_topk(p, q, params, k)
    got = score_topk(p, q, params, k, backend="numba")
    assert_same_topk(got, want)


def test_reference_equals_oracle_tie_aware():
    p = random_postings(5, 150, 25, density=0.2, ties=True)
    docs = to_docs(p)
    keys = {d: f"{d:05d}" for d in docs}  # zero-padded so key order is id order
    oracle_docs = {keys[d]: toks for d, toks in docs.items()}
    rng = np.random.default_rng(9)
    for _ in range(40):
        terms = rng.choice(p.n_terms, rng.integers(1, 5))
        for params in (BM25Params(), BM25Params(k1=1.2, b=0.3)):
            top = reference.score_topk(p, QueryBatch.from_lists([terms]), params, 10)
            got = [(keys[int(d)], float(s)) for d, s in zip(top.ids[0], top.scores[0]) if d >= 0]
            want = bm25(oracle_docs, [f"t{t}" for t in terms], params.k1, params.b)
            assert same_ranking(got, want, 10, rel=1e-9), (got, want[:10])


def test_ties_break_by_id_and_rows_are_sorted():
    p = random_postings(3, 200, 30, density=0.3, ties=True)
    q = random_queries(3, p.n_terms, 100)
    for backend in ("numba", "numpy"):
        top = score_topk(p, q, BM25Params(), 50, backend=backend)
        saw_tie = False
        for ids, scores in zip(top.ids, top.scores):
            n = int((ids >= 0).sum())
            for i in range(n - 1):
                assert scores[i] > scores[i + 1] or (scores[i] == scores[i + 1] and ids[i] < ids[i + 1])
                saw_tie |= scores[i] == scores[i + 1]
            assert (ids[n:] == -1).all() and np.isneginf(scores[n:]).all()
        assert saw_tie  # the corpus really has ties, so the check above tested the tie-break


def test_empty_and_unknown_queries_and_empty_corpus():
    p = random_postings(1, 50, 10)
    q = QueryBatch.from_lists([[], [3], []])
    for backend in ("numba", "numpy"):
        top = score_topk(p, q, BM25Params(), 5, backend=backend)
        assert top.counts()[0] == 0 and top.counts()[2] == 0
    empty = Postings(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    for backend in ("numba", "numpy"):
        top = score_topk(empty, QueryBatch.from_lists([[], []]), BM25Params(), 3, backend=backend)
        assert top.ids.shape == (2, 3) and (top.ids == -1).all()


def test_k_larger_than_corpus_returns_every_match():
    p = random_postings(4, 1, 5, density=1.0)
    top = score_topk(p, QueryBatch.from_lists([[0, 1]]), BM25Params(), 10, backend="numba")
    assert top.counts().tolist() == [1] and top.ids[0, 0] == 0


def test_bad_arguments():
    p = random_postings(1, 10, 5)
    q = QueryBatch.from_lists([[0]])
    with pytest.raises(ValueError, match="k must be >= 1"):
        score_topk(p, q, BM25Params(), 0)
    with pytest.raises(ValueError, match="allowed: " + ", ".join(BACKENDS)):
        resolve("gpu-please")
    with pytest.raises(ValueError, match="k1"):
        BM25Params(k1=math.nan)
    with pytest.raises(ValueError, match="b must"):
        BM25Params(b=1.5)


def test_thread_counts_do_not_change_results():
    import numba
    from chitragupta.kernels.dispatch import set_threads

    p = random_postings(2, 1000, 400, density=0.01)
    q = random_queries(2, p.n_terms, 97)
    want = reference.score_topk(p, q, BM25Params(), 10)
    before = numba.get_num_threads()
    try:
        for t in (1, 2):
            set_threads(t)
            assert_same_topk(score_topk(p, q, BM25Params(), 10, backend="numba"), want)
    finally:
        numba.set_num_threads(before)


def test_posting_table_budget_splits_the_batch_without_changing_results(monkeypatch):
    from chitragupta.kernels import cpu

    p = random_postings(2, 1000, 400, density=0.01)
    q = random_queries(2, p.n_terms, 80)
    want = score_topk(p, q, BM25Params(), 10, backend="numba")
    monkeypatch.setattr(cpu, "TABLE_BUDGET_BYTES", 8 * 40)  # a few queries per chunk
    got = score_topk(p, q, BM25Params(), 10, backend="numba")
    assert_same_topk(got, want)


def test_dense_and_sparse_accumulation_agree():
    # the same queries over a corpus padded with empty documents switch from the dense to the sparse path
    base = random_postings(6, 300, 60, density=0.2)
    pad = 20000
    padded = Postings(base.indptr, base.indices, base.tf,
                      np.concatenate([base.doc_len, np.zeros(pad, np.int32)]))
    q = random_queries(6, base.n_terms, 50)
    for p in (base, padded):
        assert_same_topk(score_topk(p, q, BM25Params(), 7, backend="numba"), reference.score_topk(p, q, BM25Params(), 7))


def test_sweep_grid_points_equal_single_scorings():
    from chitragupta.kernels.sweep import grid_of, sweep

    p = random_postings(7, 400, 90, density=0.05)
    rng = np.random.default_rng(7)
    title = np.minimum(p.tf, rng.integers(0, 3, p.nnz)).astype(np.int32)
    abstract = np.minimum(p.tf - title, rng.integers(0, 2, p.nnz)).astype(np.int32)
    p = Postings(p.indptr, p.indices, p.tf, p.doc_len, fields={"title": title, "abstract": abstract})
    q = random_queries(7, p.n_terms, 70)
    grid = grid_of([0.0, 0.9, 2.0], [0.0, 0.75, 1.0], [0.0, 1.0, 2.5], [1.0, 3.0])
    tops = sweep(p, q, grid, 8)
    ref = sweep(p, q, grid[:6], 8, backend="numpy")
    for params, top in zip(grid, tops):
        assert_same_topk(top, score_topk(p, q, params, 8, backend="numba"))
    for a, b in zip(tops[:6], ref):
        assert_same_topk(a, b)


def test_sweep_chunks_the_grid(monkeypatch):
    import chitragupta.kernels.sweep as ks

    p = random_postings(8, 300, 50, density=0.1)
    q = random_queries(8, p.n_terms, 30)
    grid = ks.grid_of([0.5, 1.5, 3.0], [0.2, 0.8])
    want = ks.sweep(p, q, grid, 5)
    monkeypatch.setattr(ks, "SWEEP_BUDGET_BYTES", 8 * 2 * p.n_docs * 2)  # one grid point per chunk
    for a, b in zip(ks.sweep(p, q, grid, 5), want):
        assert_same_topk(a, b)


@pytest.mark.parametrize("tile,density", [(64, 16), (100, 1_000_000), (37, 4)])
def test_tiled_path_equals_reference(monkeypatch, tile, density):
    """The tiled path (in production only for corpora over ``_TILED_MIN_DOCS``) brought down to small
    corpora: tiles that do not divide the corpus, every query tiled or a mix of tiled and table queries,
    ties, k beyond the corpus and field weights must all give the reference's ids and scores bit for bit.
    k = 1 and 10 keep a heap; 40 and 5000 collect past a threshold (``_COLLECT_MIN_K`` lowered to 20), 40
    with many cuts of the buffer and ties at the cut."""
    from chitragupta.kernels import cpu

    monkeypatch.setattr(cpu, "_TILE", tile)
    monkeypatch.setattr(cpu, "TILED_DENSITY", density)
    monkeypatch.setattr(cpu, "_TILED_MIN_DOCS", 0)
    monkeypatch.setattr(cpu, "_COLLECT_MIN_K", 20)
    cases = [dict(seed=7, n_docs=3000, n_terms=50, density=0.1),
             dict(seed=8, n_docs=500, n_terms=40, density=0.3, ties=True),
             dict(seed=9, n_docs=257, n_terms=30, density=0.2)]
    for case in cases:
        p = random_postings(**case)
        q = random_queries(case["seed"], p.n_terms, 40)
        for params in (BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=3.0, b=1.0)):
            for k in (1, 10, 40, 5000):
                assert_same_topk(cpu.score_topk(p, q, params, k), reference.score_topk(p, q, params, k))
        rng = np.random.default_rng(case["seed"])
        f_t = (p.tf * rng.random(p.tf.shape[0])).astype(np.int32)
        pf = Postings(p.indptr, p.indices, p.tf, p.doc_len, {"title": f_t, "abstract": p.tf - f_t})
        for fw in ((("title", 2.0),), (("title", 0.0), ("abstract", 3.0))):
            params = BM25Params(field_weights=fw)
            for k in (10, 40):
                assert_same_topk(cpu.score_topk(pf, q, params, k), reference.score_topk(pf, q, params, k))


@pytest.mark.parametrize("min_queries,budget_postings", [(1, 10 ** 9), (3, 400), (10 ** 9, 10 ** 9)])
def test_tiles_reading_the_batchs_table_equal_reference(monkeypatch, min_queries, budget_postings):
    """The unpruned tiles read the contributions of the terms many queries share from a table built once for
    the batch (``cpu._hot_table``): every shared term, only some (a budget that stops part-way), or none.
    Each table entry is the inline expression's double, so heap and collection paths, field weights
    included, give the reference's ids and scores bit for bit."""
    from chitragupta.kernels import cpu
    from chitragupta.kernels._tiles import NO_TABLE

    monkeypatch.setattr(cpu, "_TILE", 64)
    monkeypatch.setattr(cpu, "TILED_DENSITY", 10 ** 9)  # every query tiled
    monkeypatch.setattr(cpu, "_TILED_MIN_DOCS", 0)
    monkeypatch.setattr(cpu, "_PRUNE_DOCS_PER_K", 10 ** 9)  # no MaxScore
    monkeypatch.setattr(cpu, "_COLLECT_MIN_K", 20)
    monkeypatch.setattr(cpu, "HOT_MIN_QUERIES", min_queries)
    monkeypatch.setattr(cpu, "TABLE_BUDGET_BYTES", 8 * budget_postings)
    p = zipf_postings(seed=51, n_docs=900, n_terms=120, fields=True)
    q = zipf_queries(51, p.n_terms, 50)
    q_terms = q.terms.astype(np.int64)
    for params in (BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=2.0, b=1.0),
                   BM25Params(field_weights=(("title", 3.0),)),
                   BM25Params(k1=1.2, field_weights=(("title", 0.0), ("abstract", 2.5)))):
        idf = bm25_idf(p.df(), p.n_docs)
        norm = length_norm(p.doc_len, p.avgdl(), params.k1, params.b)
        f1, d1, f2, d2 = cpu._field_args(p, params)
        dlc, ntab = cpu._compact_norm(p, params, norm)
        table, q_shift = cpu._hot_table(p, np.diff(p.indptr), q_terms, f1, d1, f2, d2, idf, dlc, ntab, params.k1 + 1.0)
        kept = np.unique(q_terms[q_shift != NO_TABLE])
        uses = np.bincount(q_terms, minlength=p.n_terms)
        if min_queries == 1 and budget_postings == 10 ** 9:
            assert np.array_equal(kept, np.unique(q_terms))  # every term
        elif min_queries == 10 ** 9:
            assert kept.size == 0
        else:
            assert 0 < kept.size < np.count_nonzero(uses >= 3)  # the budget stopped it part-way
            assert uses[kept].min() >= uses[np.setdiff1d(np.flatnonzero(uses >= 3), kept)].max()  # most shared first
            assert table.size <= budget_postings
        # each kept term's entries are its postings' contributions, the reference's expression
        for i in np.flatnonzero(q_shift != NO_TABLE)[:40]:
            t = q_terms[i]
            for pos in range(int(p.indptr[t]), int(p.indptr[t + 1])):
                d = int(p.indices[pos])
                f = float(p.tf[pos])
                for name, delta in params.active_fields():  # the kernels' order of addition
                    f += delta * float(p.fields[name][pos])
                want = idf[t] * f * (params.k1 + 1.0) / (f + norm[d]) if f > 0 else 0.0
                assert table[pos + q_shift[i]] == want
        for k in (1, 10, 40):  # heap, then collection past a threshold
            assert_same_topk(cpu.score_topk(p, q, params, k, norm=norm), reference.score_topk(p, q, params, k))


def zipf_postings(seed, n_docs, n_terms, ties=False, fields=False):
    """A corpus whose term frequencies follow a Zipf law, as real text does: a few terms in most
    documents (low idf, what MaxScore skips), many in a handful. ``ties`` repeats a quarter of the
    documents, so equal scores must break by id."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_terms + 1) ** 1.1
    weights /= weights.sum()
    rows, cols = [], []
    for d in range(n_docs):
        toks = rng.choice(n_terms, int(rng.integers(3, 60)), p=weights)
        rows.append(toks)
        cols.append(np.full(toks.shape[0], d))
    if ties:
        for d in range(n_docs // 4):
            rows.append(rows[d])
            cols.append(np.full(rows[d].shape[0], n_docs + d))
    n_all = n_docs + (n_docs // 4 if ties else 0)
    m = sp.coo_matrix((np.ones(sum(r.shape[0] for r in rows), np.int32), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n_terms, n_all)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    doc_len = np.asarray(m.sum(axis=0)).ravel().astype(np.int32)
    tf = m.data.astype(np.int32)
    extra = {}
    if fields:
        title = (tf * rng.random(tf.shape[0])).astype(np.int32)
        extra = {"title": title, "abstract": ((tf - title) * rng.random(tf.shape[0])).astype(np.int32)}
    return Postings(m.indptr.astype(np.int64), m.indices.astype(np.int32), tf, doc_len, extra)


def zipf_queries(seed, n_terms, n_queries, max_len=12):
    """Queries mixing common and rare terms (half drawn from the 20 most common), some empty."""
    rng = np.random.default_rng(seed + 7)
    out = []
    for _ in range(n_queries):
        n = int(rng.integers(0, max_len))
        common = rng.integers(0, min(20, n_terms), n // 2)
        out.append(np.concatenate([common, rng.integers(0, n_terms, n - n // 2)]))
    return QueryBatch.from_lists(out)


@pytest.mark.parametrize("tile,first", [(64, 256), (37, 37), (100, 30)])
def test_pruned_path_equals_reference(monkeypatch, tile, first):
    """MaxScore pruning (kernels/_maxscore.py; in production over ``_TILED_MIN_DOCS`` documents for small
    k) brought down to small corpora: it must skip work -- the counters say it pruned tiles and read
    fewer postings than an exhaustive pass -- and still give the reference's ids and scores bit for bit, ties, every (k1, b)
    corner and field weights included."""
    from chitragupta.kernels import cpu
    from chitragupta.kernels._maxscore import N_COUNTERS

    monkeypatch.setattr(cpu, "_TILED_MIN_DOCS", 0)
    monkeypatch.setattr(cpu, "_TILE", 50)
    monkeypatch.setattr(cpu, "TILED_DENSITY", 10 ** 9)  # every query tiled
    monkeypatch.setattr(cpu, "_PRUNE_DOCS_PER_K", 1)
    monkeypatch.setattr(cpu, "_PRUNE_TILE", tile)
    monkeypatch.setattr(cpu, "_PRUNE_FIRST_TILE", first)
    total = np.zeros(N_COUNTERS, dtype=np.int64)
    exhaustive = 0  # postings an unpruned pass reads
    for case in (dict(seed=11, n_docs=2500, n_terms=400), dict(seed=12, n_docs=900, n_terms=120, ties=True),
                 dict(seed=13, n_docs=1200, n_terms=300, fields=True)):
        p = zipf_postings(**case)
        q = zipf_queries(case["seed"], p.n_terms, 60)
        grid = [BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=3.0, b=1.0), BM25Params(k1=0.4, b=0.2)]
        if case.get("fields"):
            grid += [BM25Params(field_weights=(("title", 3.0),)),
                     BM25Params(k1=1.2, field_weights=(("title", 0.0), ("abstract", 2.5)))]
        for params in grid:
            kept = np.full(p.n_terms, -1.0)  # the caller's bounds, reused across k (as the engine does)
            for k in (1, 3, 10, 40):
                got = cpu.score_topk(p, q, params, k, counters=total, bounds=kept if k > 1 else None)
                assert_same_topk(got, reference.score_topk(p, q, params, k))
                exhaustive += int(np.diff(p.indptr)[q.terms].sum())
            asked = np.unique(q.terms)
            assert (kept[asked] >= 0).all() and (np.delete(kept, asked) == -1.0).all()  # filled only where asked
    full, pruned, stopped, read, streamed, probes = total.tolist()
    assert pruned > 0 and full > 0
    assert read < 0.8 * exhaustive, (read, exhaustive)  # it really skipped postings
    # a posting is read in full, streamed past the candidate bitmap, or skipped: never counted twice
    assert streamed > 0 and probes > 0 and read + streamed <= exhaustive, (read, streamed, exhaustive)


def test_probe_add_finds_each_candidate_where_a_search_does():
    """``_probe_add`` searches each candidate outwards from an interpolated guess (and prefetches ahead):
    spread and clumped postings, candidates before, between and past them, a single posting, an empty
    range -- the same contributions at the same slots as a plain search of each candidate."""
    from chitragupta.kernels._maxscore import _probe_add
    from chitragupta.kernels._tiles import _contrib

    rng = np.random.default_rng(41)
    empty = np.zeros(0, dtype=np.int32)
    for trial in range(60):
        lo = int(rng.integers(0, 1000))
        width = int(rng.integers(1, 3000))
        n_post = int(rng.integers(0, min(width, 400) + 1))
        if trial % 3 == 0:  # clumped: most postings in a narrow band
            docs = np.unique(np.concatenate([rng.integers(0, max(1, width // 20), n_post),
                                             rng.integers(0, width, max(1, n_post // 10))]))[:n_post]
        else:
            docs = np.sort(rng.choice(width, n_post, replace=False))
        pad = int(rng.integers(0, 5))  # postings of other tiles around the range
        indices = np.concatenate([np.arange(lo - pad, lo) if lo >= pad else np.zeros(0), docs + lo,
                                  lo + width + np.arange(pad)]).astype(np.int32)
        s, e = pad if lo >= pad else 0, (pad if lo >= pad else 0) + docs.size
        tf = rng.integers(1, 5, indices.size).astype(np.int32)
        # the compact norm (``cpu._compact_norm``): a length code a document, a norm a code
        ntab = rng.uniform(0.2, 3.0, 50)
        dlc = rng.integers(0, 50, lo + width + pad + 1).astype(np.uint16)
        norm = ntab[dlc]
        cand = np.unique(rng.integers(0, width, int(rng.integers(0, 200)))).astype(np.int64)
        got = np.zeros(width)
        _probe_add(indices, tf, empty, 0.0, empty, 0.0, dlc, ntab, 1.7, 2.2, s, e, lo, got, cand, cand.size)
        want = np.zeros(width)
        for i in cand:
            p = s + int(np.searchsorted(indices[s:e], lo + i))
            if p < e and indices[p] == lo + i:
                want[i] += _contrib.py_func(tf, empty, 0.0, empty, 0.0, norm, 1.7, 2.2, p, lo + i)
        assert np.array_equal(got, want), trial


def test_compact_norm_is_norm_and_falls_back_where_lengths_do_not_fit(monkeypatch):
    """The tiled and MaxScore adds read a document's norm as ntab[dlc[d]] (``cpu._compact_norm``): 16-bit
    lengths and a table the same doubles as norm; a document past 65,535 words, or a norm that is not this
    index's for these params, takes the identity form. Either way the tiles and MaxScore give the
    reference's ids and scores bit for bit."""
    from chitragupta.kernels import cpu

    monkeypatch.setattr(cpu, "_TILED_MIN_DOCS", 0)
    monkeypatch.setattr(cpu, "_TILE", 50)
    monkeypatch.setattr(cpu, "TILED_DENSITY", 10 ** 9)
    p = zipf_postings(seed=31, n_docs=700, n_terms=150)
    long = Postings(p.indptr, p.indices, p.tf, p.doc_len.copy(), p.fields)
    long.doc_len[5] = 70_000  # one very long document: lengths no longer fit 16 bits
    q = zipf_queries(31, p.n_terms, 40)
    for postings, wide in ((p, False), (long, True)):
        for params in (BM25Params(), BM25Params(k1=2.0, b=1.0), BM25Params(k1=0.0, b=0.0)):
            norm = length_norm(postings.doc_len, postings.avgdl(), params.k1, params.b)
            dlc, ntab = cpu._compact_norm(postings, params, norm)
            assert dlc.dtype == (np.uint32 if wide else np.uint16)
            assert np.array_equal(ntab[dlc], norm)
            other = length_norm(postings.doc_len, postings.avgdl(), params.k1 + 0.5, params.b)
            assert cpu._compact_norm(postings, params, other)[0].dtype == np.uint32  # not this params' norm
            for k, prune in ((3, 1), (10, 10 ** 9)):  # MaxScore, then the plain tiles
                monkeypatch.setattr(cpu, "_PRUNE_DOCS_PER_K", prune)
                assert_same_topk(cpu.score_topk(postings, q, params, k, norm=norm),
                                 reference.score_topk(postings, q, params, k))


def test_term_bounds_are_each_terms_largest_contribution():
    """The pruning's bound is the largest contribution of any of the term's postings under the params in
    use -- the kernels' own expression, so the same bits as numpy computing it posting by posting."""
    from chitragupta.kernels._maxscore import term_bounds
    from chitragupta.kernels.cpu import _field_args

    p = zipf_postings(seed=21, n_docs=700, n_terms=90, fields=True)
    terms = np.arange(p.n_terms, dtype=np.int64)
    doc_of = p.indices.astype(np.int64)
    for params in (BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=2.0, b=1.0),
                   BM25Params(k1=1.2, field_weights=(("title", 0.0), ("abstract", 2.5)))):
        idf = bm25_idf(p.df(), p.n_docs)
        norm = length_norm(p.doc_len, p.avgdl(), params.k1, params.b)
        f = p.tf.astype(np.float64)
        for name, delta in params.active_fields():
            f = f + delta * p.fields[name]
        term_of = np.repeat(np.arange(p.n_terms), np.diff(p.indptr))
        c = np.where(f > 0, idf[term_of] * f * (params.k1 + 1.0) / (f + norm[doc_of]), 0.0)
        want = np.zeros(p.n_terms)
        np.maximum.at(want, term_of, c)
        got = np.full(p.n_terms, -1.0)
        term_bounds(p.indptr, p.indices, p.tf, *_field_args(p, params), idf, norm, float(params.k1 + 1.0), terms, got)
        np.testing.assert_array_equal(got, want)


def test_seek_and_gallop_find_the_lower_bound():
    from chitragupta.kernels._maxscore import _gallop, _seek

    rng = np.random.default_rng(3)
    for _ in range(300):
        a = np.sort(rng.integers(0, 200, int(rng.integers(0, 60)))).astype(np.int32)
        s = int(rng.integers(0, a.shape[0] + 1))
        e = int(rng.integers(s, a.shape[0] + 1))
        x = int(rng.integers(-5, 210))
        want = s + int(np.searchsorted(a[s:e], x, side="left"))
        assert _gallop(a, s, e, x) == want
        for guess in (s - 3, s, (s + e) // 2, e - 1, e + 4):
            assert _seek(a, s, e, x, guess) == want


@pytest.mark.parametrize("n_docs", [1, 63, 300, 5183])
def test_dense_selection_at_every_block_size_and_the_collect_cut(n_docs):
    """``_select_dense`` picks 64-, 32-, 16- or 8-document blocks, or collects every hit, by k against
    the corpus; each must give the exact best k by (score desc, id asc), ties included."""
    from chitragupta.kernels import cpu

    rng = np.random.default_rng(n_docs)
    for k in (1, 5, 10, 40, 100, 300, 1000):
        for trial in range(6):
            acc = np.zeros(n_docs)
            hit = rng.random(n_docs) < rng.choice([0.05, 0.5, 1.0])
            acc[hit] = np.round(rng.gamma(2.0, 2.0, int(hit.sum())), 1 if trial % 2 else 6)  # coarse: ties
            hs, hi = np.empty(k), np.empty(k, np.int64)
            bmax = np.empty((n_docs + cpu._MIN_BLOCK - 1) // cpu._MIN_BLOCK)
            buf, cs = np.empty(n_docs, np.int64), np.empty(n_docs)
            ids, scores = np.full(k, -1, np.int64), np.full(k, -np.inf)
            m = cpu._select_dense(acc.copy(), k, hs, hi, bmax, buf, cs, ids, scores)
            want_ids, want_scores = best_of_dense(acc, k)
            n = want_ids.shape[0]
            assert m == n and np.array_equal(ids[:n], want_ids) and np.array_equal(scores[:n], want_scores)


def test_max64_says_what_a_loop_says():
    """The SIMD block maximum the dense selection and the tiles' offer use (``_intrinsics.max64``; here it
    compiled, so the intrinsic itself is what runs) against the loop it falls back to: zeros, ties, tiny
    and huge values, the maximum in each of the 64 places, at any start -- the same value, bit for bit."""
    from chitragupta.kernels._intrinsics import MAX64_SIMD, _loop_max64, max64
    from numba import njit

    assert MAX64_SIMD  # this host compiles it: the test below compares the intrinsic, not the loop with itself

    @njit
    def both(a, start):
        return max64(a, start), _loop_max64(a, start)

    rng = np.random.default_rng(64)
    for trial in range(400):
        scale = float(rng.choice([1e-300, 1.0, 1e300]))
        a = np.where(rng.random(200) < rng.choice([0.0, 0.02, 0.5]), np.round(rng.gamma(2.0, 2.0, 200), 1), 0.0)
        a *= scale
        start = int(rng.integers(0, 200 - 64 + 1))
        if trial % 5 == 0:
            a[start + trial % 64] = np.nextafter(a[start:start + 64].max(), np.inf)  # the maximum, in each place
        got, want = both(a, start)
        assert got == want == max(0.0, float(a[start:start + 64].max())), trial


@pytest.mark.parametrize("tile", [64, 100, 4096])
def test_tile_offer_over_ascending_tiles_keeps_ties_exact(tile):
    """``_tile_offer`` filters a full heap's blocks strictly (acc > root): exact only because tiles come in
    ascending id, so a later document tied with the root never enters. Coarse scores make many ties with
    the root in later tiles; the heap drained must be the exact best k by (score desc, id asc)."""
    from chitragupta.kernels._tiles import _drain, _tile_offer

    rng = np.random.default_rng(tile)
    n_docs = 5000
    for k in (1, 7, 100, 900):
        for trial in range(4):
            acc = np.zeros(n_docs)
            hit = rng.random(n_docs) < rng.choice([0.05, 0.5, 1.0])
            acc[hit] = np.round(rng.gamma(2.0, 2.0, int(hit.sum())), 0 if trial % 2 else 3)  # coarse: ties
            hs, hi = np.empty(k), np.empty(k, np.int64)
            size = 0
            buf = np.zeros(tile)
            for lo in range(0, n_docs, tile):
                n = min(tile, n_docs - lo)
                buf[:n] = acc[lo:lo + n]
                size = _tile_offer(buf, n, lo, k, hs, hi, size)
                assert not buf.any()  # every tile comes back zeroed
            ids, scores = np.full(k, -1, np.int64), np.full(k, -np.inf)
            m = _drain(hs, hi, size, ids, scores)
            want_ids, want_scores = best_of_dense(acc, k)
            assert m == want_ids.shape[0]
            assert np.array_equal(ids[:m], want_ids) and np.array_equal(scores[:m], want_scores)


def _numba_from(monkeypatch, job: str, work: int) -> None:
    """Make ``work`` of ``job`` the threshold where auto takes numba, whatever numba's cache holds."""
    from chitragupta.kernels import dispatch

    unit, kernel, _warm, _cold = dispatch.NUMBA_FROM[job]
    monkeypatch.setitem(dispatch.NUMBA_FROM, job, (unit, kernel, work, work))


def test_auto_means_one_thing_per_job_and_size(monkeypatch):
    """``backend_name`` is the one reading of "auto": numpy below the job's threshold; above it a batch takes
    torch only where a GPU is found, else numba, and a sweep's grid numba; any other name is itself."""
    from chitragupta.kernels import dispatch

    _numba_from(monkeypatch, "batch", 1000)
    _numba_from(monkeypatch, "grid", 1000)
    for gpu, batch in (("cpu", "numba"), ("cuda", "torch")):
        monkeypatch.setattr(dispatch, "resolve_device", lambda device, purpose, _w=gpu: _w)
        assert [dispatch.backend_name("auto", job=j, work=w) for j in ("batch", "grid") for w in (999, 1000, None)] \
            == ["numpy", batch, batch, "numpy", "numba", "numba"]
        assert {dispatch.backend_name(n, job=j, work=w) for n in ("numba", "numpy", "torch") for j in dispatch.AUTO
                for w in (1, None)} == {"numba", "numpy", "torch"}
    monkeypatch.setattr(dispatch, "resolve_device", lambda device, purpose: "cpu")
    assert resolve("auto", work=1).name == "numpy" and resolve("auto").name == "numba"
    with pytest.raises(ValueError, match="unknown job"):
        dispatch.backend_name("auto", job="sweep")
    with pytest.raises(ValueError, match="unknown job"):
        dispatch.compiled("guess", 1)


def test_the_threshold_is_higher_while_the_kernel_would_be_compiled_first(monkeypatch, tmp_path):
    """``cached`` finds a kernel's index file where numba keeps it (``NUMBA_CACHE_DIR``); without it the
    cold threshold applies, and the line saying a compile is coming is said once, before it."""
    import logging

    from chitragupta.kernels import dispatch

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(dispatch.NUMBA_FROM, "batch", ("cells", "cpu._topk_from_table", 100, 10_000))
    monkeypatch.setattr(dispatch, "_told", set())
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    dispatch.say.addHandler(handler)
    dispatch.say.setLevel(logging.INFO)
    try:
        assert not dispatch.cached("cpu._topk_from_table")
        assert not dispatch.compiled("batch", 5_000) and not said
        assert dispatch.compiled("batch", 10_000) and dispatch.compiled("batch", None)
        assert said == ["compiling the scoring kernels with numba, first run only (numba keeps them in its cache)"]
        src = Path(os.path.abspath(dispatch.__file__)).parent
        sub = tmp_path / f"{src.name}_{hashlib.sha1(str(src).encode()).hexdigest()}"
        sub.mkdir()
        (sub / "cpu._topk_from_table-205.py311.nbi").write_bytes(b"")
        assert dispatch.cached("cpu._topk_from_table") and not dispatch.cached("cpu._topk_masked")
        assert dispatch.compiled("batch", 100) and not dispatch.compiled("batch", 99)
        assert len(said) == 1
    finally:
        dispatch.say.removeHandler(handler)


def test_the_sweep_runs_auto_by_the_grids_size(monkeypatch):
    from chitragupta.kernels.sweep import grid_of, sweep

    postings = random_postings(29, n_docs=300, n_terms=40)
    queries = random_queries(29, 40, 12)
    grid = grid_of([0.9, 1.5], [0.4, 0.75])
    want = sweep(postings, queries, grid, 5, backend="numba")
    for work in (10 ** 9, 1):  # numpy, then numba
        _numba_from(monkeypatch, "grid", work)
        got = sweep(postings, queries, grid, 5, backend="auto")
        assert len(got) == len(grid) and any(t.ids.size for t in got)
        for a, b in zip(got, want):
            assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)


@pytest.mark.parametrize("k", [1, 7, 300])
def test_the_numpy_blocks_give_the_unblocked_answer(monkeypatch, k):
    """The numpy scorer cuts a batch into blocks of queries (``BLOCK_BYTES`` of score matrix, ``BLOCK_POSTINGS``
    pairs): a query a block, a few, or all, masks and field weights included, give the same ids and scores."""
    p = random_postings(5, 400, 80, density=0.1, ties=True)
    rng = np.random.default_rng(5)
    title = np.minimum(p.tf, rng.integers(0, 3, p.nnz)).astype(np.int32)
    p = Postings(p.indptr, p.indices, p.tf, p.doc_len, fields={"title": title})
    q = random_queries(5, p.n_terms, 50)
    masks = [None if i % 3 else rng.random(p.n_docs) < 0.5 for i in range(q.n_queries)]
    for params in (BM25Params(), BM25Params(k1=0.0, b=0.0, field_weights=(("title", 0.0),)),
                   BM25Params(field_weights=(("title", 3.0),))):
        want = score_topk(p, q, params, k, backend="numba", allowed=masks)
        for rows, pairs in ((1, 10 ** 9), (7, 10 ** 9), (10 ** 9, 50), (10 ** 9, 10 ** 9)):
            monkeypatch.setattr(reference, "BLOCK_BYTES", rows * 8 * p.n_docs)
            monkeypatch.setattr(reference, "BLOCK_POSTINGS", pairs)
            assert_same_topk(reference.score_topk(p, q, params, k, allowed=masks), want)


def test_the_numpy_scorer_names_the_damaged_term():
    """A damaged slice is an error naming its term, never a wrong read: out of order, out of range, a count
    of 0, a field count above tf."""
    from chitragupta.kernels.reference import PostingsDamaged

    base = random_postings(3, 60, 12, density=0.3)
    q = QueryBatch.from_lists([list(range(base.n_terms))])
    t = int(np.flatnonzero(np.diff(base.indptr) >= 2)[3])
    lo = int(base.indptr[t])
    for what in ("order", "range", "count", "field"):
        indices, tf = base.indices.copy(), base.tf.copy()
        fields = {}
        if what == "order":
            indices[lo], indices[lo + 1] = indices[lo + 1], indices[lo]
        elif what == "range":
            indices[lo + 1] = base.n_docs
        elif what == "count":
            tf[lo] = 0
        else:
            fields = {"title": np.where(np.arange(tf.size) == lo, tf + 1, 0).astype(np.int32)}
        p = Postings(base.indptr, indices, tf, base.doc_len, fields)
        params = BM25Params(field_weights=(("title", 2.0),)) if fields else BM25Params()
        with pytest.raises(PostingsDamaged) as err:
            reference.score_topk(p, q, params, 5)
        assert err.value.term == t, what
