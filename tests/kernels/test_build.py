"""kernels.build: each pass against plain numpy (stable argsort, searchsorted keys, boolean masks), on random
triples, ranges with empty terms, and edge sizes, with the arguments it updates in place."""

import numpy as np
import pytest
from chitragupta.engine.index import csr
from chitragupta.kernels import build


@pytest.fixture
def kb():
    return build


def _triples(rng, n, n_units, n_prov):
    u = np.sort(rng.integers(0, n_units, n)).astype(np.int32)  # unit order, as a build's chunks come
    t = rng.integers(0, n_prov, n).astype(np.int32)
    c = rng.integers(1, 9, n).astype(np.int32)
    return u, t, c


@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_split_by_range_is_the_stable_sort_by_range(n, kb):
    rng = np.random.default_rng(n)
    n_prov, n_terms = 60, 50
    rank = np.concatenate(([-1] * 10, rng.permutation(n_terms))).astype(np.int64)
    u, t, c = _triples(rng, n, 100, n_prov)
    t = np.maximum(t, 10).astype(np.int32)  # (a dropped run never reaches the triples)
    edges = np.array([0, 3, 3, 20, 49, 50])  # an empty range too
    range_of = np.repeat(np.arange(edges.shape[0] - 1, dtype=np.int32), np.diff(edges))
    rec, cuts = kb.split_by_range(u, t, c, rank, range_of, edges.shape[0] - 1)
    r = rank[t]
    which = np.searchsorted(edges, r, side="right") - 1
    order = np.argsort(which, kind="stable")
    assert np.array_equal(rec, np.stack([u[order], r[order], c[order]], axis=1))
    assert np.array_equal(cuts, np.searchsorted(which[order], np.arange(edges.shape[0])))
    # the records are the build's record layout
    assert rec.view(csr._RECORD).reshape(-1).itemsize == 12


@pytest.mark.parametrize("n", [0, 3, 4000])
def test_place_is_the_stable_sort_by_term(n, kb):
    rng = np.random.default_rng(n + 1)
    t0, t1 = 5, 40
    u, _t, c = _triples(rng, n, 300, 1)
    r = rng.integers(t0, t1, n).astype(np.int32)
    counts = np.bincount(r - t0, minlength=t1 - t0)
    got = np.zeros(t1 - t0, dtype=np.int64)
    kb.count_terms(r, t0, got)
    assert np.array_equal(got, counts)
    indptr = np.concatenate(([0], np.cumsum(counts)))
    indices, out = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    nxt = indptr[:-1].copy()
    kb.place(u, r, c, t0, nxt, indices, out)
    order = np.argsort(r, kind="stable")
    assert np.array_equal(indices, u[order]) and np.array_equal(out, c[order])
    assert np.array_equal(nxt, indptr[1:])
    # the same through provisional ids
    rank = np.concatenate(([-1, -1], rng.permutation(np.arange(t0, t1)))).astype(np.int64)
    inv = np.full(t1, -1)
    inv[rank[2:]] = np.arange(2, rank.shape[0])
    t = inv[r].astype(np.int32)
    indices2, out2 = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    kb.place_ranked(u, t, c, rank, t0, indptr[:-1].copy(), indices2, out2)
    assert np.array_equal(indices2, indices) and np.array_equal(out2, out)
    got = np.zeros(t1 - t0, dtype=np.int64)
    kb.count_terms_ranked(t, rank, t0, got)
    assert np.array_equal(got, counts)


def _csr(rng, n_terms, n_units, density):
    m = rng.random((n_terms, n_units)) < density
    indptr = np.concatenate(([0], np.cumsum(m.sum(axis=1)))).astype(np.int64)
    indices = np.nonzero(m)[1].astype(np.int32)
    return m, indptr, indices


def test_align_matches_the_key_search_and_finds_a_stray_pair(kb):
    rng = np.random.default_rng(3)
    m, indptr, indices = _csr(rng, 30, 40, 0.3)
    fm = m & (rng.random(m.shape) < 0.5)
    f_indptr = np.concatenate(([0], np.cumsum(fm.sum(axis=1)))).astype(np.int64)
    f_indices = np.nonzero(fm)[1].astype(np.int32)
    f_counts = rng.integers(1, 5, f_indices.shape[0]).astype(np.int32)
    out = np.zeros(indices.shape[0], dtype=np.int32)
    assert kb.align(indptr, indices, f_indptr, f_indices, f_counts, 0, 30, out) == -1
    rows = np.repeat(np.arange(30), np.diff(indptr))
    f_rows = np.repeat(np.arange(30), np.diff(f_indptr))
    want = np.zeros_like(out)
    want[np.searchsorted(rows * 40 + indices, f_rows * 40 + f_indices)] = f_counts
    assert np.array_equal(out, want)
    for block in (1, 7, 1 << 23):  # csr._align's blocks of terms give the same
        csr._ALIGN_BLOCK, keep = block, csr._ALIGN_BLOCK
        try:
            assert np.array_equal(csr._align(indptr, indices, f_indptr, f_indices, f_counts, "title"), want)
        finally:
            csr._ALIGN_BLOCK = keep
    # a field pair the main postings lack
    stray = np.argwhere(~m)[0]
    bad = fm.copy()
    bad[stray[0], stray[1]] = True
    b_indptr = np.concatenate(([0], np.cumsum(bad.sum(axis=1)))).astype(np.int64)
    b_indices = np.nonzero(bad)[1].astype(np.int32)
    assert kb.align(indptr, indices, b_indptr, b_indices, np.ones_like(b_indices), 0, 30, out) >= 0
    with pytest.raises(AssertionError, match="counts a token"):
        csr._align(indptr, indices, b_indptr, b_indices, np.ones_like(b_indices), "title")


def test_rows_sorted(kb):
    indptr = np.array([0, 2, 2, 5], dtype=np.int64)
    assert kb.rows_sorted(indptr, np.array([1, 4, 0, 2, 9], dtype=np.int32))
    assert kb.rows_sorted(indptr, np.array([4, 9, 0, 2, 3], dtype=np.int32))  # (rows apart: not compared)
    assert not kb.rows_sorted(indptr, np.array([1, 4, 0, 2, 2], dtype=np.int32))  # a repeated unit
    assert not kb.rows_sorted(indptr, np.array([4, 1, 0, 2, 3], dtype=np.int32))


def test_mapping_and_counting_ids(kb):
    rng = np.random.default_rng(5)
    n_terms, n_dropped = 20, 4
    ids = rng.integers(-1, 30, 2000).astype(np.int32)  # -1: SEQ_BREAK
    table = rng.integers(0, n_terms + n_dropped, 30).astype(np.int32)
    keep = ids != csr.SEQ_BREAK
    want = ids.copy()
    want[keep] = table[ids[keep]]
    assert np.array_equal(kb.map_ids(ids, table, csr.SEQ_BREAK), want)
    per_term = np.zeros(n_terms, dtype=np.int64)
    assert np.array_equal(kb.map_count(ids, table, csr.SEQ_BREAK, per_term), want)
    assert np.array_equal(per_term, np.bincount(want[(want >= 0) & (want < n_terms)], minlength=n_terms))
    again = np.zeros(n_terms, dtype=np.int64)
    kb.count_ids(want, again)
    assert np.array_equal(again, per_term)
    inplace = ids.copy()
    kb.remap(inplace, table.astype(np.int64), csr.SEQ_BREAK)
    assert np.array_equal(inplace, want)


def test_fill_positions_is_by_term_for_any_range(kb):
    from chitragupta.kernels.phrase import by_term

    rng = np.random.default_rng(8)
    n_terms = 25
    lens = rng.integers(0, 12, 40)
    ptr = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    seq = rng.integers(-1, n_terms + 3, int(ptr[-1])).astype(np.int32)
    pos, pos_ptr = by_term(seq, ptr, n_terms)
    for t0, t1 in ((0, n_terms), (0, 1), (7, 19), (24, 25)):
        got = np.empty(int(pos_ptr[t1] - pos_ptr[t0]), dtype=np.int32)
        cur = pos_ptr[t0:t1] - pos_ptr[t0]
        half = int(np.searchsorted(ptr, ptr[-1] // 2))  # in two passes of documents, as the build reads
        for d0, d1 in ((0, half), (half, 40)):
            kb.fill_positions(seq[ptr[d0]:ptr[d1]], ptr[d0:d1 + 1] - ptr[d0], t0, t1, cur, got)
        assert np.array_equal(got, pos[pos_ptr[t0]:pos_ptr[t1]])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_in_order_yields_in_order_and_holds_few(threads):
    import threading

    alive = []
    lock = threading.Lock()
    most = [0]

    def fn(k):
        with lock:
            alive.append(k)
            most[0] = max(most[0], len(alive))
        return k

    got = []
    for k in csr.in_order(fn, 9, threads):
        got.append(k)
        with lock:
            alive.remove(k)
    assert got == list(range(9))
    assert most[0] <= threads
    assert list(csr.in_order(fn, 0, threads)) == []


def test_tally_and_spread_count_what_bincount_counts(kb):
    rng = np.random.default_rng(11)
    u, t, c = _triples(rng, 3000, 70, 40)
    t = np.maximum(t, 4).astype(np.int32)  # ids 0..3: never-indexed runs, never in a triple
    per_id, per_unit = np.zeros(40, dtype=np.int64), np.zeros(70, dtype=np.int64)
    kb.tally(u, t, c, per_id, per_unit)
    assert np.array_equal(per_id, np.bincount(t, minlength=40))
    assert np.array_equal(per_unit, np.bincount(u, weights=c, minlength=70).astype(np.int64))
    rank = np.concatenate(([-1] * 4, rng.integers(0, 25, 36))).astype(np.int64)  # (stemming: ids share a term)
    per_term = np.zeros(25, dtype=np.int64)
    assert kb.spread(rank, per_id, per_term) == -1
    assert np.array_equal(per_term, np.bincount(rank[t], minlength=25))
    per_id[2] = 1  # a never-indexed run counted: said, not placed
    assert kb.spread(rank, per_id, np.zeros(25, dtype=np.int64)) == 2


def test_the_accumulators_tally_is_every_chunk_it_holds():
    """Chunks from flushes, reused counts and merged blocks: the tally equals a count of them all."""
    acc = csr.Accumulator(fields=("title",))
    for unit, words in enumerate(["alpha beta beta gamma", "beta delta", "", "gamma gamma alpha zeta"]):
        acc.add_runs(unit, [w.encode() for w in words.split()])
        acc.streams[""].flush()  # (a chunk per unit)
    ids = acc.provisional_ids(["alpha", "omega"])
    acc.add_counts(np.array([5, 5]), ids, np.array([2, 7]))
    acc.add_runs(6, [b"beta", b"beta"])
    st = acc.streams[""]
    st.flush()
    u = np.concatenate([ch[0] for ch in st.chunks])
    t = np.concatenate([ch[1] for ch in st.chunks])
    c = np.concatenate([ch[2] for ch in st.chunks])
    assert np.array_equal(st.tally.per_id[:len(acc.vocab)], np.bincount(t, minlength=len(acc.vocab)))
    assert np.array_equal(st.tally.per_unit[:7], np.bincount(u, weights=c, minlength=7))
    vocab, arrays = acc.finish(7)
    assert arrays["doc_len"].tolist() == [4, 2, 0, 4, 0, 9, 2]
    assert np.diff(arrays["indptr"]).tolist() == [3, 3, 1, 2, 1, 1]  # alpha (two provisional ids) beta delta ...
    assert vocab == ["alpha", "beta", "delta", "gamma", "omega", "zeta"]


@pytest.mark.parametrize("case", ["ascending", "unsorted", "wide counts", "empty"])
def test_a_spilled_chunk_reads_back_as_written(tmp_path, case):
    rng = np.random.default_rng(13)
    n = 0 if case == "empty" else 5000
    u, t, c = _triples(rng, n, 300, 9000)
    if case == "unsorted":
        u = rng.permutation(u).astype(np.int32)
    if case == "wide counts":
        c[::7] = 70000
    ch = csr.ChunkFile(tmp_path / "c.i32", u, t, c)
    got = ch.load()
    for a, b in zip(got, (u, t, c)):
        assert a.dtype == np.int32 and np.array_equal(a, b)
    if case == "ascending":  # (stored compactly: the units as runs, the counts as bytes)
        assert (tmp_path / "c.i32").stat().st_size < 6 * n
    ch.discard()
    assert not (tmp_path / "c.i32").exists()
