"""A block of documents' runs to provisional ids, and the ids to counted triples, in numba.

The engine hands over the block's text as one byte buffer: each piece (a title, a body, an abstract)
lowercased, encoded to ASCII and translated so that every byte outside ``[a-z0-9]`` is a space
(``kernels.charset.SEPARATE``), the pieces joined by a space; the first piece is the seed runs (the
never-indexed runs, ``DROPPED_RUNS``), which take ids ``0 .. n_dropped - 1``. A run's id is the number of
distinct runs seen before its first occurrence -- what ``Accumulator``'s dictionary hands out -- found
through an open-addressing hash table (FNV-1a, linear probing, at most half full) over a pool of the
distinct runs, each followed by a space, so the pool past the seeds *is* the block's vocabulary as the
engine writes it. The table and the pool are arrays the caller keeps between calls (a block is handed
over in pieces of bounded size); a call returns them, grown where it had to.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["new_table", "runs_to_ids", "count_pieces"]

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_SPACE = 32


def new_table(cap: int = 1 << 16, pool_bytes: int = 1 << 20):
    """An empty table: (slots int32 all -1, pool uint8, key offsets int64 (koff[0] = 0), keys 0, pool used 0)."""
    koff = np.zeros(1024, dtype=np.int64)
    return np.full(cap, -1, dtype=np.int32), np.empty(pool_bytes, dtype=np.uint8), koff, 0, 0


@njit(cache=True)
def _grow_slots(slots, pool, koff, n_keys):
    cap = slots.shape[0] * 2
    out = np.full(cap, -1, dtype=np.int32)
    mask = np.uint64(cap - 1)
    for k in range(n_keys):
        h = _FNV_OFFSET
        for i in range(koff[k], koff[k + 1] - 1):
            h = (h ^ np.uint64(pool[i])) * _FNV_PRIME
        pos = h & mask
        while out[pos] >= 0:
            pos = (pos + np.uint64(1)) & mask
        out[pos] = k
    return out


@njit(cache=True)
def runs_to_ids(buf, seg_ends, slots, pool, koff, n_keys, used):
    """The ids of the runs of ``buf`` (uint8, runs separated by spaces) in order, and per piece (ending
    at ``seg_ends``, ascending) how many runs it holds. Returns (ids int32, runs per piece int64, slots,
    pool, koff, n_keys, used)."""
    n = buf.shape[0]
    ids = np.empty(n // 2 + 1, dtype=np.int32)
    seg_n = np.zeros(seg_ends.shape[0], dtype=np.int64)
    mask = np.uint64(slots.shape[0] - 1)
    out = 0
    i = 0
    for s in range(seg_ends.shape[0]):
        end = seg_ends[s]
        start_out = out
        while i < end:
            while i < end and buf[i] == _SPACE:
                i += 1
            if i >= end:
                break
            j = i
            h = _FNV_OFFSET
            while j < end and buf[j] != _SPACE:
                h = (h ^ np.uint64(buf[j])) * _FNV_PRIME
                j += 1
            ln = j - i
            pos = h & mask
            while True:
                k = slots[pos]
                if k < 0:
                    # a new run: its bytes and a space to the pool, the next id to it
                    if used + ln + 1 > pool.shape[0]:
                        bigger = np.empty(max(2 * pool.shape[0], used + ln + 1), dtype=np.uint8)
                        bigger[:used] = pool[:used]
                        pool = bigger
                    pool[used:used + ln] = buf[i:j]
                    pool[used + ln] = _SPACE
                    used += ln + 1
                    if n_keys + 2 > koff.shape[0]:
                        more = np.empty(2 * koff.shape[0], dtype=np.int64)
                        more[:n_keys + 1] = koff[:n_keys + 1]
                        koff = more
                    koff[n_keys + 1] = used
                    slots[pos] = n_keys
                    k = n_keys
                    n_keys += 1
                    if 2 * n_keys > slots.shape[0]:
                        slots = _grow_slots(slots, pool, koff, n_keys)
                        mask = np.uint64(slots.shape[0] - 1)
                    break
                a = koff[k]
                if koff[k + 1] - 1 - a == ln:
                    same = True
                    for x in range(ln):
                        if pool[a + x] != buf[i + x]:
                            same = False
                            break
                    if same:
                        break
                pos = (pos + np.uint64(1)) & mask
            ids[out] = k
            out += 1
            i = j
        seg_n[s] = out - start_out
        i = end
    return ids[:out], seg_n, slots, pool, koff, n_keys, used


@njit(cache=True)
def count_pieces(ids, seg_n, seg_unit, seg_kind, n_keys, keep_from, positions, seq_break):
    """Counted triples and the positions of a run of pieces, in unit order (a unit's pieces adjacent).

    ``seg_kind`` per piece: 0 a title (the main stream, the title stream and the positions, then a
    ``seq_break``), 1 a body piece (the main stream and the positions), 2 an abstract (its stream
    alone), -1 skipped (the seeds). Per stream: (unit, id, count) sorted by unit then id, ids below
    ``keep_from`` left out. Returns the three streams' arrays (main, title, abstract), the positions'
    ids (int32) and, per unit that has pieces, its unit and where its ids start."""
    n_seg = seg_n.shape[0]
    first = np.zeros(n_seg + 1, dtype=np.int64)
    for s in range(n_seg):
        first[s + 1] = first[s] + seg_n[s]
    total = first[n_seg]
    counts = np.zeros(n_keys, dtype=np.int64)
    touched = np.empty(max(total, 1), dtype=np.int32)
    tu = np.empty((3, max(total, 1)), dtype=np.int32)
    tt = np.empty((3, max(total, 1)), dtype=np.int32)
    tc = np.empty((3, max(total, 1)), dtype=np.int32)
    n_out = np.zeros(3, dtype=np.int64)
    seq = np.empty(total + n_seg if positions else 0, dtype=np.int32)
    seq_units = np.empty(n_seg, dtype=np.int64)
    seq_starts = np.empty(n_seg, dtype=np.int64)
    n_seq = 0
    n_units = 0
    i32 = np.int64(2147483647)
    s = 0
    while s < n_seg:
        u = seg_unit[s]
        e = s
        while e < n_seg and seg_unit[e] == u:
            e += 1
        if seg_kind[s] >= 0:
            if positions:
                seq_units[n_units] = u
                seq_starts[n_units] = n_seq
                for p in range(s, e):
                    if seg_kind[p] == 0 or seg_kind[p] == 1:
                        for r in range(first[p], first[p + 1]):
                            seq[n_seq] = ids[r]
                            n_seq += 1
                    if seg_kind[p] == 0:
                        seq[n_seq] = seq_break
                        n_seq += 1
            n_units += 1
            for stream in range(3):
                nt = 0
                for p in range(s, e):
                    kind = seg_kind[p]
                    if stream == 0:
                        take = kind == 0 or kind == 1
                    elif stream == 1:
                        take = kind == 0
                    else:
                        take = kind == 2
                    if not take:
                        continue
                    for r in range(first[p], first[p + 1]):
                        t = ids[r]
                        if t >= keep_from:
                            if counts[t] == 0:
                                touched[nt] = t
                                nt += 1
                            counts[t] += 1
                if nt:
                    order = np.sort(touched[:nt])
                    o = n_out[stream]
                    for t in order:
                        tu[stream, o] = u
                        tt[stream, o] = t
                        tc[stream, o] = min(counts[t], i32)
                        counts[t] = 0
                        o += 1
                    n_out[stream] = o
        s = e
    return (tu[0, :n_out[0]].copy(), tt[0, :n_out[0]].copy(), tc[0, :n_out[0]].copy(),
            tu[1, :n_out[1]].copy(), tt[1, :n_out[1]].copy(), tc[1, :n_out[1]].copy(),
            tu[2, :n_out[2]].copy(), tt[2, :n_out[2]].copy(), tc[2, :n_out[2]].copy(),
            seq[:n_seq].copy(), seq_units[:n_units].copy(), seq_starts[:n_units].copy())
