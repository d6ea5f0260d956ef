"""kernels.integrity's numpy forms (a small index's checks while numba is not loaded) against the numba
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


def test_the_public_checks_take_numba_once_it_is_loaded_or_past_a_chunk(monkeypatch):
    assert integrity._numba_now(integrity._CHUNK + 1)
    monkeypatch.delitem(__import__("sys").modules, "numba", raising=False)
    assert not integrity._numba_now(10)
    monkeypatch.setitem(__import__("sys").modules, "numba", object())
    assert integrity._numba_now(10)
