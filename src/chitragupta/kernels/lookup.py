"""Batched query tokenization and vocabulary lookup in numba: query bytes in, CSR term ids out.

The engine lowercases each query and encodes it to ASCII (every other character becomes ``?``), joins
the batch with newlines, and hands the bytes here. A token is a maximal run of ``[a-z0-9]`` -- the
tokenizer's rule; runs shorter than two characters and stopwords are never in the vocabulary, so a
lookup miss drops them. The vocabulary is a sorted string table (``blob``, ``offsets``) with an
open-addressing hash table over it (FNV-1a, linear probing, at most half full), built once when the
index is built and stored with it. Per query the found ids are sorted and de-duplicated, so the output
is exactly ``QueryBatch.from_lists`` of the queries' distinct known terms.

Acronym expansion rides along: a second table of the same shape holds the acronym keys, and
``exp_indptr``/``exp_terms`` the vocabulary ids each key adds, so a run that is a key adds its
expansion's known terms in the same pass (the de-duplication makes "never add a typed word again"
hold by construction).

Nothing here trusts the tables: a slot or offset out of range (a damaged index file) stops the lookup
with ``CORRUPT`` instead of reading outside an array.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from chitragupta.kernels.charset import IS_TOKEN_BYTE, MIN_TOKEN_CHARS
from chitragupta.kernels.hashing import FNV_OFFSET, FNV_PRIME, table_size

__all__ = ["build_table", "lookup_batch", "TableCorrupt", "NO_EXPANSION"]

_CORRUPT = -2


class TableCorrupt(ValueError):
    """A lookup table or string table holds an entry out of range (the file is damaged)."""


@njit(cache=True, inline="always")
def _fnv(buf, lo, hi):
    h = FNV_OFFSET
    for i in range(lo, hi):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
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
    """(2^m,) int32 slots holding string ids (-1 empty), at most half full."""
    slots = np.full(table_size(offsets.shape[0] - 1), -1, dtype=np.int32)
    _build(blob, offsets, slots)
    return slots


@njit(cache=True)
def _find(buf, lo, hi, blob, offsets, slots):
    """The id of ``buf[lo:hi]`` in the table, -1 when absent, _CORRUPT when an entry is out of range."""
    n_slots = slots.shape[0]
    n_strings = offsets.shape[0] - 1
    n_blob = blob.shape[0]
    mask = np.uint64(n_slots - 1)
    pos = _fnv(buf, lo, hi) & mask
    n = hi - lo
    for _probe in range(n_slots):  # a table with no empty slot (damaged) cannot loop forever
        t = slots[pos]
        if t < 0:
            return -1
        if t >= n_strings:
            return _CORRUPT
        a = offsets[t]
        e = offsets[t + 1]
        if a < 0 or e < a or e > n_blob:
            return _CORRUPT
        if e - a == n:
            same = True
            for i in range(n):
                if blob[a + i] != buf[lo + i]:
                    same = False
                    break
            if same:
                return t
        pos = (pos + np.uint64(1)) & mask
    return _CORRUPT


@njit(cache=True)
def _lookup(buf, starts, blob, offsets, slots, a_blob, a_offsets, a_slots, exp_indptr, exp_terms,
            indptr, terms):
    """Fill ``indptr``/``terms``; returns the total, -1 when ``terms`` is too small, _CORRUPT on a bad table."""
    n_q = starts.shape[0] - 1
    cap = terms.shape[0]
    n_vocab = offsets.shape[0] - 1
    expand = a_slots.shape[0] > 1
    pos = 0
    for q in range(n_q):
        first = pos
        i = starts[q]
        end = starts[q + 1]
        while i < end:
            if IS_TOKEN_BYTE[buf[i]]:
                j = i + 1
                while j < end and IS_TOKEN_BYTE[buf[j]]:
                    j += 1
                if j - i >= MIN_TOKEN_CHARS:
                    t = _find(buf, i, j, blob, offsets, slots)
                    if t == _CORRUPT:
                        return _CORRUPT
                    if t >= 0:
                        if pos >= cap:
                            return -1
                        terms[pos] = t
                        pos += 1
                    if expand:
                        a = _find(buf, i, j, a_blob, a_offsets, a_slots)
                        if a == _CORRUPT:
                            return _CORRUPT
                        if a >= 0:
                            for r in range(exp_indptr[a], exp_indptr[a + 1]):
                                x = exp_terms[r]
                                if x < 0 or x >= n_vocab:
                                    return _CORRUPT
                                if pos >= cap:
                                    return -1
                                terms[pos] = x
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


_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_I64 = np.zeros(1, dtype=np.int64)
NO_EXPANSION = (_EMPTY_U8, _EMPTY_I64, np.full(1, -1, dtype=np.int32), _EMPTY_I64, np.zeros(0, dtype=np.int64))


def lookup_batch(buf: np.ndarray, starts: np.ndarray, blob: np.ndarray, offsets: np.ndarray,
                 slots: np.ndarray, expansion=NO_EXPANSION) -> tuple[np.ndarray, np.ndarray]:
    """(indptr int64 (n_queries + 1,), terms int32) for the queries at ``buf[starts[q]:starts[q+1]]``.

    ``expansion``: ``(key_blob, key_offsets, key_slots, exp_indptr, exp_terms)``, the acronym keys as a
    table like the vocabulary's and the vocabulary ids each adds; ``NO_EXPANSION`` for none.
    Raises TableCorrupt when a table holds an entry out of range.
    """
    n_q = starts.shape[0] - 1
    if slots.shape[0] < 2 or slots.shape[0] & (slots.shape[0] - 1):
        raise TableCorrupt(f"the lookup table has {slots.shape[0]} slots, not a power of two")
    if starts.shape[0] and (starts[0] < 0 or starts[-1] > buf.shape[0]):
        raise ValueError("query starts lie outside the buffer")
    indptr = np.zeros(n_q + 1, dtype=np.int64)
    cap = buf.shape[0] // 2 + 1
    while True:
        terms = np.empty(cap, dtype=np.int64)
        total = _lookup(buf, starts, blob, offsets, slots, *expansion, indptr, terms)
        if total == _CORRUPT:
            raise TableCorrupt("the vocabulary's lookup table or string table holds an entry out of range")
        if total >= 0:
            return indptr, terms[:total].astype(np.int32)
        cap *= 2  # expansions added more terms than the query bytes can hold
