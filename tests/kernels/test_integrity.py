"""kernels.integrity's numpy forms (a small index's checks) against the numba
kernels: the same first bad term or posting and the same sums, on sound and damaged arrays."""

import numpy as np
import pytest
from chitragupta.kernels import _integrity_numba as nb
from chitragupta.kernels import integrity


def _postings(seed: int, n_terms: int = 60, n_docs: int = 200):
    rng = np.random.default_rng(seed)
    rows = [np.sort(rng.choice(n_docs, size=int(rng.integers(0, 30)), replace=False)) for _ in range(n_terms)]
    rows[-1] = rows[-2] = np.zeros(0, dtype=np.int64)  # (empty rows at the end)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.concatenate(rows).astype(np.int32)
    tf = rng.integers(1, 2**31 - 1, size=indices.size).astype(np.int32)  # (large: the sums wrap)
    return rng, indptr, indices, tf, n_docs


DAMAGE = [None, "order", "repeat", "range", "negative", "count", "indptr", "first"]


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scan_range_numpy_is_the_kernel(damage, seed):
    rng, indptr, indices, tf, n_docs = _postings(seed)
    t = int(rng.choice([i for i in range(indptr.shape[0] - 1) if indptr[i + 1] - indptr[i] >= 2]))
    p = int(indptr[t])
    if damage == "order":
        indices[p], indices[p + 1] = indices[p + 1], indices[p]
    elif damage == "repeat":
        indices[p + 1] = indices[p]
    elif damage == "range":
        indices[p + 1] = n_docs
    elif damage == "negative":
        indices[p] = -1
    elif damage == "count":
        tf[p + 1] = 0
    elif damage == "indptr":
        indptr[t + 1] = indptr[t] - 1
    elif damage == "first":
        indices[0] = n_docs + 5
    for t0, t1 in ((0, indptr.shape[0] - 1), (3, 40), (t, t + 1), (5, 5)):
        want = nb._scan_range(indptr, indices, tf, np.int64(n_docs), t0, t1)
        got = integrity.scan_range_numpy(indptr, indices, tf, n_docs, t0, t1)
        assert got == tuple(int(x) for x in want)
    if damage is None:
        assert integrity.scan_range_numpy(indptr, indices, tf, n_docs, 0, indptr.shape[0] - 1)[0] == -1


@pytest.mark.parametrize("damage", [None, "above", "below"])
def test_field_range_numpy_is_the_kernel(damage):
    rng, indptr, indices, tf, n_docs = _postings(7)
    f = np.minimum(tf, rng.integers(0, 2**31 - 1, size=tf.size)).astype(np.int32)
    if damage == "above":
        f[17] = tf[17] + 1
    elif damage == "below":
        f[40] = -1
    for lo, hi in ((0, f.size), (10, 50), (0, 0)):
        want = nb._field_range(indices, tf, f, lo, hi)
        assert integrity.field_range_numpy(indices, tf, f, lo, hi) == tuple(int(x) for x in want)


@pytest.mark.parametrize("strings", [[b"a", b"ab", b"b", b"ba"], [b"a", b"a"], [b"ab", b"a"], [b"", b"a", b"b"],
                                     [b"caf\xc3\xa9", b"cafe"], [b"x", b"y", b"z", b"y"], [b"", b""]])
def test_first_unsorted_python_is_the_kernel(strings):
    blob = np.frombuffer(b"".join(strings), dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in strings]))).astype(np.int64)
    assert integrity.first_unsorted_python(blob, offsets) == int(nb._first_unsorted(blob, offsets))


@pytest.mark.parametrize("damage", [None, "order", "field"])
def test_the_public_checks_give_the_same_answer_below_and_past_the_threshold(monkeypatch, damage):
    """``scan_postings``, ``scan_field`` and ``first_unsorted`` run numpy below ``NUMBA_FROM`` and numba past
    it (``kernels.dispatch.compiled``: by size alone, never by what the process imported): the same answers."""
    from chitragupta.kernels import dispatch

    rng, indptr, indices, tf, n_docs = _postings(11)
    f = np.minimum(tf, rng.integers(0, 2**31 - 1, size=tf.size)).astype(np.int32)
    if damage == "order":
        t = int(np.flatnonzero(np.diff(indptr) >= 2)[0])
        indices[indptr[t]], indices[indptr[t] + 1] = indices[indptr[t] + 1], indices[indptr[t]]
    elif damage == "field":
        f[9] = tf[9] + 1
    words = [b"a", b"ab", b"b", b"ba", b"b"] if damage else [b"a", b"ab", b"b"]
    blob = np.frombuffer(b"".join(words), dtype=np.uint8)
    offsets = np.concatenate(([0], np.cumsum([len(w) for w in words]))).astype(np.int64)
    got = []
    for work in (10 ** 12, 0):  # numpy, then numba
        for job in ("check", "strings"):
            unit, kernel, _w, _c = dispatch.NUMBA_FROM[job]
            monkeypatch.setitem(dispatch.NUMBA_FROM, job, (unit, kernel, work, work))
        got.append((integrity.scan_postings(indptr, indices, tf, n_docs), integrity.scan_field(indices, tf, f),
                    integrity.first_unsorted(blob, offsets)))
    assert got[0] == got[1]
    assert (got[0][0][0] >= 0) == (damage == "order") and (got[0][1][0] >= 0) == (damage == "field")
