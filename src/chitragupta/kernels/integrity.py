"""Open-time checks of index arrays: what the scoring and lookup kernels index with is in range.

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
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["scan_postings", "scan_field", "first_unsorted", "weighted_sums"]

_CHUNK = 1 << 20  # postings per parallel chunk (chunks are cut at term boundaries)


@njit(cache=True)
def _scan_range(indptr, indices, tf, n_docs, t0, t1):
    """Rows t0..t1-1: (the first bad term or -1, sum of tf, sum of doc * tf) over the rows before it."""
    nnz = indices.shape[0]
    a0 = np.uint64(0)
    a1 = np.uint64(0)
    for t in range(t0, t1):
        a = indptr[t]
        e = indptr[t + 1]
        if a < 0 or e < a or e > nnz:
            return t, a0, a1
        prev = np.int64(-1)
        for p in range(a, e):
            d = np.int64(indices[p])
            f = tf[p]
            if d <= prev or d >= n_docs or f <= 0:
                return t, a0, a1
            prev = d
            a0 += np.uint64(f)
            a1 += np.uint64(d) * np.uint64(f)
    return -1, a0, a1


@njit(cache=True, parallel=True)
def _scan_chunks(indptr, indices, tf, n_docs, cuts, bad, s0, s1):
    for c in prange(cuts.shape[0] - 1):
        bad[c], s0[c], s1[c] = _scan_range(indptr, indices, tf, n_docs, cuts[c], cuts[c + 1])


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


@njit(cache=True)
def _field_range(indices, tf, f, lo, hi):
    a0 = np.uint64(0)
    a1 = np.uint64(0)
    for p in range(lo, hi):
        x = f[p]
        if x < 0 or x > tf[p]:
            return p, a0, a1
        a0 += np.uint64(x)
        a1 += np.uint64(indices[p]) * np.uint64(x)
    return -1, a0, a1


@njit(cache=True, parallel=True)
def _field_chunks(indices, tf, f, n_chunks, bad, s0, s1):
    n = f.shape[0]
    for c in prange(n_chunks):
        bad[c], s0[c], s1[c] = _field_range(indices, tf, f, n * c // n_chunks, n * (c + 1) // n_chunks)


def scan_field(indices: np.ndarray, tf: np.ndarray, f: np.ndarray) -> tuple[int, int, int]:
    """(first posting whose field count is outside [0, tf] or -1, sum of f, sum of doc * f mod 2**64);
    the three arrays have the same length (the caller checks) and ``indices`` is in range."""
    n = int(f.shape[0])
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


@njit(cache=True)
def _first_unsorted(blob, offsets):
    for i in range(offsets.shape[0] - 2):
        a = offsets[i]
        b = offsets[i + 1]
        c = offsets[i + 2]
        la = b - a
        lb = c - b
        n = la if la < lb else lb
        less = la < lb  # a proper prefix sorts first
        for j in range(n):
            x = blob[a + j]
            y = blob[b + j]
            if x != y:
                less = x < y
                break
        if not less:
            return i
    return -1


def first_unsorted(blob: np.ndarray, offsets: np.ndarray) -> int:
    """The first position i where string i is not strictly before string i + 1 (bytewise, which for
    UTF-8 is code-point order), or -1; ``offsets`` must already be checked (0 first, non-decreasing,
    the blob's length last)."""
    if offsets.shape[0] < 3:
        return -1
    return int(_first_unsorted(blob, offsets))
