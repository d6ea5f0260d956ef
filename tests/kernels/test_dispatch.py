"""Every backend against the numpy reference, and the reference against a formula-only oracle."""

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pytest
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




@pytest.mark.slow
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
