"""Batched query tokenization and vocabulary lookup in numba: query bytes in, CSR term ids out.

The engine lowercases each query and encodes it to ASCII (every other character becomes ``?``), joins
the batch with newlines, and hands the bytes here. A token is a maximal run of ``[a-z0-9]`` -- the
tokenizer's rule; runs shorter than two characters and stopwords are never in the vocabulary, so a
lookup miss drops them. The vocabulary is a sorted string table (``blob``, ``offsets``); an
open-addressing hash table over it is built once per index (FNV-1a, linear probing). Per query the
found ids are sorted and de-duplicated, so the output is exactly ``QueryBatch.from_lists`` of the
queries' distinct known terms.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["build_table", "lookup_batch"]

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True, inline="always")
def _fnv(buf, lo, hi):
    h = _FNV_OFFSET
    for i in range(lo, hi):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return h


@njit(cache=True)
def _build(blob, offsets, slots):
    mask = np.uint64(slots.shape[0] - 1)
    for t in range(offsets.shape[0] - 1):
        pos = _fnv(blob, offsets[t], offsets[t + 1]) & mask
        while slots[pos] >= 0:
            pos = (pos + np.uint64(1)) & mask
        slots[pos] = t


def build_table(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(2^m,) int64 slots holding term ids (-1 empty), at most half full."""
    n = offsets.shape[0] - 1
    size = 1
    while size < 2 * max(n, 1):
        size <<= 1
    slots = np.full(size, -1, dtype=np.int64)
    _build(blob, offsets, slots)
    return slots


@njit(cache=True)
def _find(buf, lo, hi, blob, offsets, slots):
    mask = np.uint64(slots.shape[0] - 1)
    pos = _fnv(buf, lo, hi) & mask
    n = hi - lo
    while True:
        t = slots[pos]
        if t < 0:
            return -1
        a = offsets[t]
        if offsets[t + 1] - a == n:
            same = True
            for i in range(n):
                if blob[a + i] != buf[lo + i]:
                    same = False
                    break
            if same:
                return t
        pos = (pos + np.uint64(1)) & mask


@njit(cache=True)
def _lookup(buf, starts, blob, offsets, slots, indptr, terms):
    n_q = starts.shape[0] - 1
    pos = 0
    for q in range(n_q):
        first = pos
        i = starts[q]
        end = starts[q + 1]
        while i < end:
            c = buf[i]
            if (97 <= c <= 122) or (48 <= c <= 57):
                j = i + 1
                while j < end:
                    c2 = buf[j]
                    if (97 <= c2 <= 122) or (48 <= c2 <= 57):
                        j += 1
                    else:
                        break
                if j - i >= 2:
                    t = _find(buf, i, j, blob, offsets, slots)
                    if t >= 0:
                        terms[pos] = t
                        pos += 1
                i = j
            else:
                i += 1
        # sort this query's ids and drop repeats
        if pos - first > 1:
            terms[first:pos] = np.sort(terms[first:pos])
            w = first + 1
            for r in range(first + 1, pos):
                if terms[r] != terms[w - 1]:
                    terms[w] = terms[r]
                    w += 1
            pos = w
        indptr[q + 1] = pos
    return pos


def lookup_batch(buf: np.ndarray, starts: np.ndarray, blob: np.ndarray, offsets: np.ndarray,
                 slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indptr int64 (n_queries + 1,), terms int32) for the queries at ``buf[starts[q]:starts[q+1]]``."""
    n_q = starts.shape[0] - 1
    indptr = np.zeros(n_q + 1, dtype=np.int64)
    terms = np.empty(buf.shape[0] // 2 + 1, dtype=np.int64)
    total = _lookup(buf, starts, blob, offsets, slots, indptr, terms)
    return indptr, terms[:total].astype(np.int32)
