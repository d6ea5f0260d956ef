"""Open-time checks of index arrays: what the scoring kernels index with is in range.

The scoring kernels read ``indices[p]`` as a position in per-document arrays and ``indptr[t]`` as a
position in the postings without checking either (a check per posting would cost the hot loop), so an
index whose arrays were damaged on disk -- or written by someone else -- is checked once, when it is
opened, by one pass over its postings here:

    indptr      starts at 0, never decreases, ends at nnz (checked by the caller, O(terms))
    indices     every row strictly ascending, inside [0, n_docs)
    tf          > 0 everywhere
    sums        sum(tf) and sum(doc * tf) (mod 2**64), which the caller compares with sum(doc_len) and
                sum(d * doc_len[d]): a document's length is the sum of its term counts, so a changed
                count, or a posting moved to another document, shows up even when it stays in range

A field's counts (title, abstract) are checked the same way (0 <= count <= tf) with their own sums.
``first_unsorted`` checks that a string table (vocabulary, citekeys) is strictly ascending, which its
binary search assumes. Over a million postings the passes run in parallel over chunks (cut at term
boundaries); nothing is allocated per posting.

Below ``kernels.dispatch.NUMBA_FROM["check"]`` postings (``"strings"`` for a string table) the same checks
run in numpy: a small index is built and opened without numba's start, about half a second, for a pass of
a few milliseconds; the results are the same (``tests/kernels/test_integrity.py``). The numba kernels are in
``kernels._integrity_numba``.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.dispatch import compiled

__all__ = ["scan_postings", "scan_field", "first_unsorted", "weighted_sums", "scan_range_numpy", "field_range_numpy",
           "first_unsorted_python"]

_CHUNK = 1 << 20  # postings per parallel chunk (chunks are cut at term boundaries)


def _sums(indices: np.ndarray, x: np.ndarray) -> tuple[int, int]:
    """(sum of x, sum of indices * x) mod 2**64, as the kernels add them."""
    xu = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        return int(xu.sum(dtype=np.uint64)), int((indices.astype(np.uint64) * xu).sum(dtype=np.uint64))


def scan_range_numpy(indptr, indices, tf, n_docs: int, t0: int, t1: int) -> tuple[int, int, int]:
    """``_integrity_numba._scan_range`` in numpy: rows t0..t1-1, (the first bad term or -1, the sums of
    the postings before the first bad one)."""
    nnz = indices.shape[0]
    a = np.asarray(indptr[t0:t1], dtype=np.int64)
    e = np.asarray(indptr[t0 + 1:t1 + 1], dtype=np.int64)
    bad_ptr = np.flatnonzero((a < 0) | (e < a) | (e > nnz))
    stop = t0 + int(bad_ptr[0]) if bad_ptr.size else t1  # rows t0..stop-1 have sound, adjoining ranges
    p0, p1 = (int(indptr[t0]), int(indptr[stop])) if stop > t0 else (0, 0)
    d = np.asarray(indices[p0:p1], dtype=np.int64)
    f = np.asarray(tf[p0:p1])
    wrong = (d >= n_docs) | (f <= 0) | (d < 0)
    if d.shape[0] > 1:
        down = np.zeros(d.shape[0], dtype=bool)
        down[1:] = d[1:] <= d[:-1]
        starts = np.asarray(indptr[t0:stop], dtype=np.int64) - p0
        down[starts[starts < d.shape[0]]] = False  # (a row's first posting has no previous)
        wrong |= down
    first = np.flatnonzero(wrong)
    end = d.shape[0]  # the sums run to the first bad posting, as the kernel's loop adds them
    if first.size:  # the row of the first bad posting
        end = int(first[0])
        stop = t0 + int(np.searchsorted(np.asarray(indptr[t0:stop + 1]), p0 + end, side="right")) - 1
    s0, s1 = _sums(d[:end], f[:end])
    return (stop if stop < t1 else -1), s0, s1


def field_range_numpy(indices, tf, f, lo: int, hi: int) -> tuple[int, int, int]:
    """``_integrity_numba._field_range`` in numpy."""
    x = np.asarray(f[lo:hi])
    bad = np.flatnonzero((x < 0) | (x > tf[lo:hi]))
    end = int(bad[0]) if bad.size else x.shape[0]
    s0, s1 = _sums(np.asarray(indices[lo:lo + end]), x[:end])
    return (lo + end if bad.size else -1), s0, s1


def first_unsorted_python(blob, offsets) -> int:
    """``_integrity_numba._first_unsorted`` in Python (bytes compare as the kernel does)."""
    b = memoryview(np.ascontiguousarray(blob)).cast("B").tobytes()
    o = np.asarray(offsets).tolist()
    prev = b[o[0]:o[1]]
    for i in range(len(o) - 2):
        cur = b[o[i + 1]:o[i + 2]]
        if not prev < cur:
            return i
        prev = cur
    return -1

def _cuts(indptr: np.ndarray, nnz: int) -> np.ndarray:
    """Term boundaries cutting the postings into chunks of about _CHUNK."""
    n_terms = indptr.shape[0] - 1
    n = max(1, -(-nnz // _CHUNK))
    want = (np.arange(n + 1, dtype=np.int64) * nnz) // n
    cuts = np.searchsorted(indptr, want, side="left").astype(np.int64)
    cuts[0], cuts[-1] = 0, n_terms
    return np.unique(np.minimum(cuts, n_terms))


def scan_postings(indptr: np.ndarray, indices: np.ndarray, tf: np.ndarray, n_docs: int) -> tuple[int, int, int]:
    """(first bad term or -1, sum of tf, sum of doc * tf mod 2**64) of a term-major CSR whose ``indptr``
    the caller has checked (0 first, non-decreasing, nnz last, same length for ``indices`` and ``tf``)."""
    n_terms = indptr.shape[0] - 1
    if n_terms <= 0:
        return -1, 0, 0
    if not compiled("check", int(indices.shape[0])):
        return scan_range_numpy(indptr, indices, tf, n_docs, 0, n_terms)
    from chitragupta.kernels._integrity_numba import _scan_chunks, _scan_range

    if indices.shape[0] <= _CHUNK:  # one chunk: no thread pool to wake
        bad, a0, a1 = _scan_range(indptr, indices, tf, np.int64(n_docs), 0, n_terms)
        return int(bad), int(a0), int(a1)
    cuts = _cuts(indptr, int(indices.shape[0]))
    m = cuts.shape[0] - 1
    bad = np.full(m, -1, dtype=np.int64)
    s0 = np.zeros(m, dtype=np.uint64)
    s1 = np.zeros(m, dtype=np.uint64)
    _scan_chunks(indptr, indices, tf, np.int64(n_docs), cuts, bad, s0, s1)
    found = bad[bad >= 0]
    with np.errstate(over="ignore"):
        return (int(found.min()) if found.size else -1, int(s0.sum(dtype=np.uint64)), int(s1.sum(dtype=np.uint64)))



def scan_field(indices: np.ndarray, tf: np.ndarray, f: np.ndarray) -> tuple[int, int, int]:
    """(first posting whose field count is outside [0, tf] or -1, sum of f, sum of doc * f mod 2**64);
    the three arrays have the same length (the caller checks) and ``indices`` is in range."""
    n = int(f.shape[0])
    if not compiled("check", n):
        return field_range_numpy(indices, tf, f, 0, n)
    from chitragupta.kernels._integrity_numba import _field_chunks, _field_range

    if n <= _CHUNK:
        bad, a0, a1 = _field_range(indices, tf, f, 0, n)
        return int(bad), int(a0), int(a1)
    m = -(-n // _CHUNK)
    bad = np.full(m, -1, dtype=np.int64)
    s0 = np.zeros(m, dtype=np.uint64)
    s1 = np.zeros(m, dtype=np.uint64)
    _field_chunks(indices, tf, f, m, bad, s0, s1)
    found = bad[bad >= 0]
    with np.errstate(over="ignore"):
        return (int(found.min()) if found.size else -1, int(s0.sum(dtype=np.uint64)), int(s1.sum(dtype=np.uint64)))


def weighted_sums(values: np.ndarray) -> tuple[int, int]:
    """(sum of values, sum of i * values[i] mod 2**64) of a non-negative per-document array: what
    ``scan_postings`` must find for ``doc_len``."""
    v = np.asarray(values).astype(np.uint64)
    with np.errstate(over="ignore"):
        return int(v.sum(dtype=np.uint64)), int((np.arange(v.shape[0], dtype=np.uint64) * v).sum(dtype=np.uint64))


def first_unsorted(blob: np.ndarray, offsets: np.ndarray) -> int:
    """The first position i where string i is not strictly before string i + 1 (bytewise, which for
    UTF-8 is code-point order), or -1; ``offsets`` must already be checked (0 first, non-decreasing,
    the blob's length last)."""
    if offsets.shape[0] < 3:
        return -1
    if not compiled("strings", int(offsets.shape[0])):
        return first_unsorted_python(blob, offsets)
    from chitragupta.kernels._integrity_numba import _first_unsorted

    return int(_first_unsorted(blob, offsets))
