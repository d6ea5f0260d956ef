"""The numba kernels of ``kernels.integrity`` (imported when a check is too large for its numpy forms,
or numba is already loaded): one pass over the postings, in parallel over chunks past one."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


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
