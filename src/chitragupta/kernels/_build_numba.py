"""The index build's array passes in numba: each one pass over its input, in place of numpy sorts
(``kernels.build.passes`` picks this module, or ``kernels.build_numpy`` for a small build).

What ``engine.index.csr`` did with a stable ``argsort`` (a term range's triples placed term-major, a
stream's triples split by term range) is a counting sort here: the destinations come from counts the
build already has, and records are placed in the order they arrive, so the output is the stable sort's
to the byte. The field counts are aligned with the main postings by walking the two rows together
(both ascending) instead of searching int64 keys, and the positions' ids are mapped and counted in the
same pass. ``tests/kernels/test_build.py`` holds each against the numpy it replaced.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["tally", "spread", "split_by_range", "place", "place_ranked", "count_terms", "count_terms_ranked", "rows_sorted", "align", "map_count", "map_ids", "count_ids", "fill_positions",
           "remap"]


@njit(cache=True, nogil=True)
def tally(u, t, c, per_id, per_unit):  # pragma: no cover (compiled)
    """per_id[t] += 1 and per_unit[u] += c for each triple (a stream's postings per provisional id and
    tokens per unit, counted as its chunks arrive)."""
    for i in range(u.shape[0]):
        per_id[t[i]] += 1
        per_unit[u[i]] += c[i]


@njit(cache=True, nogil=True)
def spread(rank, per_id, per_term):  # pragma: no cover (compiled)
    """per_term[rank[p]] += per_id[p] for every provisional id p; returns -1, or a p with postings and no
    term (a dropped run: never counted)."""
    for p in range(per_id.shape[0]):
        k = per_id[p]
        if k:
            r = rank[p]
            if r < 0:
                return p
            per_term[r] += k
    return -1


@njit(cache=True, nogil=True)
def split_by_range(u, t, c, rank, range_of, n_ranges):  # pragma: no cover (compiled)
    """The triples (``u``, ``rank[t]``, ``c``) as (n, 3) int32 records grouped by ``range_of[rank[t]]``,
    stable (stream order inside each range), and the groups' starts (n_ranges + 1)."""
    n = u.shape[0]
    cuts = np.zeros(n_ranges + 1, dtype=np.int64)
    for i in range(n):
        cuts[range_of[rank[t[i]]] + 1] += 1
    for k in range(n_ranges):
        cuts[k + 1] += cuts[k]
    nxt = cuts[:-1].copy()
    rec = np.empty((n, 3), dtype=np.int32)
    for i in range(n):
        r = rank[t[i]]
        k = range_of[r]
        d = nxt[k]
        rec[d, 0] = u[i]
        rec[d, 1] = r
        rec[d, 2] = c[i]
        nxt[k] = d + 1
    return rec, cuts


@njit(cache=True, nogil=True)
def place(u, r, c, t0, nxt, indices, out):  # pragma: no cover (compiled)
    """Triples with final term ids ``r`` (within the range starting at ``t0``) into term-major slots:
    each goes to ``nxt[r - t0]``, which then advances (so a term's triples keep their order)."""
    for i in range(u.shape[0]):
        k = r[i] - t0
        d = nxt[k]
        indices[d] = u[i]
        out[d] = c[i]
        nxt[k] = d + 1


@njit(cache=True, nogil=True)
def place_ranked(u, t, c, rank, t0, nxt, indices, out):  # pragma: no cover (compiled)
    """``place`` of a chunk whose terms are provisional ids (``rank`` gives the final ones)."""
    for i in range(u.shape[0]):
        k = rank[t[i]] - t0
        d = nxt[k]
        indices[d] = u[i]
        out[d] = c[i]
        nxt[k] = d + 1


@njit(cache=True, nogil=True)
def count_terms(r, t0, counts):  # pragma: no cover (compiled)
    """counts[x - t0] += 1 for each final term id x of ``r``."""
    for i in range(r.shape[0]):
        counts[r[i] - t0] += 1


@njit(cache=True, nogil=True)
def count_terms_ranked(t, rank, t0, counts):  # pragma: no cover (compiled)
    """``count_terms`` of provisional ids ``t`` (``rank`` gives the final ones)."""
    for i in range(t.shape[0]):
        counts[rank[t[i]] - t0] += 1


@njit(cache=True, nogil=True)
def rows_sorted(indptr, indices):  # pragma: no cover (compiled)
    """True when every row's indices strictly ascend (no repeated unit in a row)."""
    for t in range(indptr.shape[0] - 1):
        for p in range(indptr[t] + 1, indptr[t + 1]):
            if indices[p] <= indices[p - 1]:
                return False
    return True


@njit(cache=True, nogil=True)
def align(indptr, indices, f_indptr, f_indices, f_counts, t0, t1, out):  # pragma: no cover (compiled)
    """Rows ``t0..t1``: out[p] = the field's count of the main posting p's (term, unit) pair (rows
    ascending in both); returns -1, or the first field entry whose pair the main postings do not hold."""
    for t in range(t0, t1):
        p = indptr[t]
        e = indptr[t + 1]
        for q in range(f_indptr[t], f_indptr[t + 1]):
            d = f_indices[q]
            while p < e and indices[p] < d:
                p += 1
            if p >= e or indices[p] != d:
                return q
            out[p] = f_counts[q]
    return -1


@njit(cache=True, nogil=True)
def map_count(ids, table, brk, per_term):  # pragma: no cover (compiled)
    """``ids`` mapped through ``table`` (``brk`` stays), and each mapped id below ``per_term``'s length
    counted in it."""
    n_terms = per_term.shape[0]
    out = np.empty(ids.shape[0], dtype=np.int32)
    for i in range(ids.shape[0]):
        x = ids[i]
        if x == brk:
            out[i] = x
        else:
            y = table[x]
            out[i] = y
            if y >= 0 and y < n_terms:
                per_term[y] += 1
    return out


@njit(cache=True, nogil=True)
def map_ids(ids, table, brk):  # pragma: no cover (compiled)
    """``ids`` mapped through ``table`` (``brk`` stays), int32."""
    out = np.empty(ids.shape[0], dtype=np.int32)
    for i in range(ids.shape[0]):
        x = ids[i]
        out[i] = x if x == brk else table[x]
    return out


@njit(cache=True, nogil=True)
def remap(ids, table, brk):  # pragma: no cover (compiled)
    """``map_ids`` in place."""
    for i in range(ids.shape[0]):
        x = ids[i]
        if x != brk:
            ids[i] = table[x]


@njit(cache=True, nogil=True)
def count_ids(ids, per_term):  # pragma: no cover (compiled)
    """per_term[x] += 1 for each id x of ``ids`` in range."""
    n_terms = per_term.shape[0]
    for i in range(ids.shape[0]):
        y = ids[i]
        if y >= 0 and y < n_terms:
            per_term[y] += 1


@njit(cache=True, nogil=True)
def fill_positions(seq, ptr, t0, t1, cur, out):  # pragma: no cover (compiled)
    """Terms ``t0..t1``'s occurrences in the documents of ``seq`` (``ptr``: their starts, from 0): for
    each, its offset in its document, at ``out[cur[id - t0]]`` (``cur`` advances)."""
    for d in range(ptr.shape[0] - 1):
        lo = ptr[d]
        for j in range(lo, ptr[d + 1]):
            x = seq[j]
            if x >= t0 and x < t1:
                k = x - t0
                out[cur[k]] = j - lo
                cur[k] += 1
