"""Which words of a fixed vocabulary each of many ASCII texts holds, in numba: the citation graph's
blocking (``engine/citations/resolve.py``) over tens of thousands of reference entries.

The words are resolution's (``resolve._tokens`` on an ASCII text): the text lowercased, a hyphen
dropped together with the white space after it when a word character (``\\w``: ``[A-Za-z0-9_]``) stands
before it and one after that space (``pre-training``, ``pre- training`` -> ``pretraining``), then every
maximal run of ``[a-z0-9]`` a word. The engine joins the texts into one byte buffer (``starts``/``ends``
per piece, ``piece_row`` the row a piece belongs to; the pieces of a row follow one another) and hands
over the vocabulary as a string table (``blob``, ``offsets``) with its lookup table (``slots``:
``kernels.lookup_table.build_table``'s FNV-1a open addressing). Out come (row, word id) pairs, each pair
once, rows ascending, a row's ids in the order first met. A word longer than the longest vocabulary word
is never looked up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from chitragupta.kernels.hashing import FNV_OFFSET, FNV_PRIME

__all__ = ["vocab_pairs", "pair_overlaps", "normalised", "IS_WORD", "IS_SPACE"]

# ``\w`` and ``\s`` of Python's ``re`` on an ASCII ``str`` (the bytes 128..255 never occur: the texts are ASCII)
IS_WORD = np.zeros(256, dtype=np.bool_)
IS_WORD[np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", dtype=np.uint8)] = True
IS_SPACE = np.zeros(256, dtype=np.bool_)
IS_SPACE[np.frombuffer(b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f", dtype=np.uint8)] = True
# a byte's lowercased form when it is a word byte ``[A-Za-z0-9]``, else 0
_TOKEN = np.zeros(256, dtype=np.uint8)
for _c in b"abcdefghijklmnopqrstuvwxyz0123456789":
    _TOKEN[_c] = _c
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
    _TOKEN[_c] = _c + 32
_HYPHEN = 45


@njit(cache=True)
def _find(word, n, h, blob, offsets, slots):
    """The id of ``word[:n]`` (its FNV-1a hash ``h``) in the table, or -1."""
    mask = np.uint64(slots.shape[0] - 1)
    pos = h & mask
    for _probe in range(slots.shape[0]):
        t = slots[pos]
        if t < 0:
            return -1
        a = offsets[t]
        if offsets[t + 1] - a == n:
            same = True
            for i in range(n):
                if blob[a + i] != word[i]:
                    same = False
                    break
            if same:
                return t
        pos = (pos + np.uint64(1)) & mask
    return -1


@njit(cache=True)
def _pairs(buf, starts, ends, piece_row, blob, offsets, slots, is_word, is_space, token):
    n_words = offsets.shape[0] - 1
    longest = 0
    for t in range(n_words):
        longest = max(longest, offsets[t + 1] - offsets[t])
    word = np.empty(max(longest, 1), dtype=np.uint8)
    seen = np.full(n_words, -1, dtype=np.int64)  # the last row each word was emitted for
    cap = 1024
    rows = np.empty(cap, dtype=np.int64)
    ids = np.empty(cap, dtype=np.int32)
    out = 0
    for p in range(starts.shape[0]):
        row = piece_row[p]
        lo = starts[p]
        end = ends[p]
        n = 0  # bytes of the current word (kept while n <= longest)
        h = FNV_OFFSET
        skip = lo  # the bytes before it are a dropped hyphen and the white space after it
        for i in range(lo, end + 1):  # (``end`` itself: the last word's end)
            if i < skip:
                continue
            if i < end:
                b = buf[i]
                c = token[b]
                if c != 0:
                    if n < longest:
                        word[n] = c
                        h = (h ^ np.uint64(c)) * FNV_PRIME
                    n += 1
                    continue
                if b == _HYPHEN and i > lo and is_word[buf[i - 1]]:
                    j = i + 1
                    while j < end and is_space[buf[j]]:
                        j += 1
                    if j < end and is_word[buf[j]]:
                        skip = j  # the hyphen and the space after it dropped: what stands on either side joins
                        continue
            if 0 < n <= longest:
                t = _find(word, n, h, blob, offsets, slots)
                if t >= 0 and seen[t] != row:
                    seen[t] = row
                    if out == cap:
                        cap *= 2
                        r2 = np.empty(cap, dtype=np.int64)
                        r2[:out] = rows[:out]
                        i2 = np.empty(cap, dtype=np.int32)
                        i2[:out] = ids[:out]
                        rows, ids = r2, i2
                    rows[out] = row
                    ids[out] = t
                    out += 1
            n = 0
            h = FNV_OFFSET
    return rows[:out], ids[:out]


def vocab_pairs(buf, starts, ends, piece_row, blob, offsets, slots):
    """(rows int64, ids int32): every (row, vocabulary word) pair the pieces hold (module docstring)."""
    return _pairs(buf, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64),
                  np.asarray(piece_row, dtype=np.int64), blob, np.asarray(offsets, dtype=np.int64), slots,
                  IS_WORD, IS_SPACE, _TOKEN)


@njit(cache=True)
def _overlaps(a_indptr, a_indices, b_indptr, b_indices, r, c, width):
    out = np.zeros(r.shape[0], dtype=np.int64)
    mark = np.zeros(width, dtype=np.bool_)
    cur = -1
    for p in range(r.shape[0]):
        row = r[p]
        if row != cur:  # the row's words marked (the pairs come grouped by row: once a row)
            if cur >= 0:
                for x in range(a_indptr[cur], a_indptr[cur + 1]):
                    mark[a_indices[x]] = False
            for x in range(a_indptr[row], a_indptr[row + 1]):
                mark[a_indices[x]] = True
            cur = row
        col = c[p]
        got = 0
        for x in range(b_indptr[col], b_indptr[col + 1]):
            if mark[b_indices[x]]:
                got += 1
        out[p] = got
    return out


def pair_overlaps(a, b, r, c):
    """For each pair k, how many columns rows ``a[r[k]]`` and ``b[c[k]]`` of two CSR incidence matrices
    (0/1, no column twice in a row, the same width) share: ``a[r].multiply(b[c]).sum(axis=1)``. Fastest
    with the pairs grouped by ``r``."""
    return _overlaps(np.asarray(a.indptr, dtype=np.int64), np.asarray(a.indices, dtype=np.int64),
                     np.asarray(b.indptr, dtype=np.int64), np.asarray(b.indices, dtype=np.int64),
                     np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64), max(a.shape[1], b.shape[1], 1))


@njit(cache=True)
def _normalised(buf, starts, ends, blob, offsets, slots, is_word, is_space, token):
    total = 0
    for p in range(starts.shape[0]):
        total += ends[p] - starts[p] + 1
    out = np.empty(max(total, 1), dtype=np.uint8)
    out_ends = np.empty(starts.shape[0], dtype=np.int64)
    o = 0
    for p in range(starts.shape[0]):
        lo = starts[p]
        end = ends[p]
        begin = o  # where this piece's text starts in ``out``
        w = -1  # where the current word starts in ``out`` (-1: none)
        h = FNV_OFFSET
        skip = lo  # the bytes before it are a dropped hyphen and the white space after it
        for i in range(lo, end + 1):  # (``end`` itself: the last word's end)
            if i < skip:
                continue
            if i < end:
                b = buf[i]
                c = token[b]
                if c != 0:
                    if w < 0:
                        if o > begin:
                            out[o] = 32
                            o += 1
                        w = o
                        h = FNV_OFFSET
                    out[o] = c
                    o += 1
                    h = (h ^ np.uint64(c)) * FNV_PRIME
                    continue
                if b == _HYPHEN and i > lo and is_word[buf[i - 1]]:
                    j = i + 1
                    while j < end and is_space[buf[j]]:
                        j += 1
                    if j < end and is_word[buf[j]]:
                        skip = j
                        continue
            if w >= 0:
                if _find(out[w:o], o - w, h, blob, offsets, slots) >= 0:  # a function word: taken back
                    o = w - 1 if w > begin else w
                w = -1
        out_ends[p] = o
    return out[:o], out_ends


def normalised(buf, starts, ends, blob, offsets, slots):
    """(text uint8, ends int64): each piece's words (the module docstring's), those of the table (``blob``,
    ``offsets``, ``slots``: the function words) left out, joined by single spaces; piece ``p`` is
    ``text[ends[p - 1]:ends[p]]``."""
    return _normalised(buf, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), blob,
                       np.asarray(offsets, dtype=np.int64), slots, IS_WORD, IS_SPACE, _TOKEN)
