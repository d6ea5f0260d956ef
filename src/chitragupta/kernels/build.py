"""The index build's array passes in numpy: each counting sort a stable ``argsort`` (by 16-bit digits:
``stable_order``), each tally a ``bincount``. Arguments named ``nxt``, ``cur`` and the counts are updated in
place. ``tests/kernels/test_build.py`` holds each pass against a plain numpy reference.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tally", "spread", "split_by_range", "place", "place_ranked", "count_terms", "count_terms_ranked",
           "rows_sorted", "align", "map_count", "map_ids", "count_ids", "fill_positions", "remap"]


def stable_order(keys: np.ndarray, n: int) -> np.ndarray:  # (not a pass: not in __all__)
    """``np.argsort(keys, kind="stable")`` of integer keys in ``0 .. n - 1``: sorted by 16-bit digits, for
    which numpy's stable sort is a radix sort (one pass below 2**16 keys, two below 2**32), about ten
    times faster than the merge sort it runs on wider integers."""
    if n <= 1 << 16:
        return np.argsort(np.asarray(keys).astype(np.uint16), kind="stable")
    if n <= 1 << 32:
        keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        return order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(keys, kind="stable")


def _add_counts(acc: np.ndarray, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
    """acc[k] += 1 (or += weights) for each key k (all in range)."""
    if not keys.shape[0]:
        return
    if weights is None:
        acc += np.bincount(keys, minlength=acc.shape[0]).astype(acc.dtype, copy=False)
    else:
        np.add.at(acc, keys, weights.astype(acc.dtype, copy=False))


def tally(u, t, c, per_id, per_unit):
    """per_id[t] += 1 and per_unit[u] += c for each triple."""
    _add_counts(per_id, np.asarray(t, dtype=np.int64))
    _add_counts(per_unit, np.asarray(u, dtype=np.int64), np.asarray(c))


def spread(rank, per_id, per_term):
    """per_term[rank[p]] += per_id[p] for every provisional id p with postings; returns -1, or the first
    p with postings and no term (the ids before it are counted)."""
    p = np.flatnonzero(per_id)
    r = rank[p]
    bad = np.flatnonzero(r < 0)
    stop = int(bad[0]) if bad.size else p.shape[0]
    _add_counts(per_term, r[:stop].astype(np.int64), per_id[p[:stop]])
    return int(p[stop]) if bad.size else -1


def _dest(keys: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stable order of ``keys`` (0 <= key < len(nxt)) and each sorted item's slot: ``nxt[key]`` plus
    its rank among the items of its key; ``nxt`` advances past them."""
    order = stable_order(keys, nxt.shape[0])
    ks = keys[order]
    counts = np.bincount(keys, minlength=nxt.shape[0])
    first = np.zeros(nxt.shape[0], dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    dest = nxt[ks] + (np.arange(keys.shape[0], dtype=np.int64) - first[ks])
    nxt += counts.astype(nxt.dtype, copy=False)
    return order, dest


def split_by_range(u, t, c, rank, range_of, n_ranges):
    """The triples (``u``, ``rank[t]``, ``c``) as (n, 3) int32 records grouped by ``range_of[rank[t]]``,
    stable, and the groups' starts (n_ranges + 1)."""
    r = rank[t]
    k = range_of[r].astype(np.int64)
    order = stable_order(k, n_ranges)
    rec = np.empty((u.shape[0], 3), dtype=np.int32)
    rec[:, 0] = u[order]
    rec[:, 1] = r[order]
    rec[:, 2] = c[order]
    cuts = np.zeros(n_ranges + 1, dtype=np.int64)
    np.cumsum(np.bincount(k, minlength=n_ranges)[:n_ranges], out=cuts[1:])
    return rec, cuts


def place(u, r, c, t0, nxt, indices, out):
    """Triples with final term ids ``r`` into term-major slots from ``nxt[r - t0]`` (which advances)."""
    if not u.shape[0]:
        return
    order, dest = _dest(np.asarray(r, dtype=np.int64) - t0, nxt)
    indices[dest] = u[order]
    out[dest] = c[order]


def place_ranked(u, t, c, rank, t0, nxt, indices, out):
    """``place`` of provisional ids ``t`` (``rank`` gives the final ones)."""
    place(u, rank[t], c, t0, nxt, indices, out)


def count_terms(r, t0, counts):
    """counts[x - t0] += 1 for each final term id x of ``r``."""
    _add_counts(counts, np.asarray(r, dtype=np.int64) - t0)


def count_terms_ranked(t, rank, t0, counts):
    """``count_terms`` of provisional ids ``t``."""
    count_terms(rank[t], t0, counts)


def rows_sorted(indptr, indices):
    """True when every row's indices strictly ascend."""
    a, b = int(indptr[0]), int(indptr[-1])
    if b - a < 2:
        return True
    down = np.flatnonzero(indices[a + 1:b] <= indices[a:b - 1]) + a + 1  # p with indices[p] <= indices[p - 1]
    if not down.size:
        return True
    starts = np.asarray(indptr[:-1])
    # a drop at p counts unless p starts its row: p is some row's start (rows may be empty)
    at = np.searchsorted(starts, down)
    return bool(np.all((at < starts.shape[0]) & (starts[np.minimum(at, starts.shape[0] - 1)] == down)))


def align(indptr, indices, f_indptr, f_indices, f_counts, t0, t1, out):
    """Rows ``t0..t1``: out[p] = the field's count of the main posting p's pair; returns -1, or the first
    field entry whose pair the main postings do not hold."""
    p0, p1 = int(indptr[t0]), int(indptr[t1])
    q0, q1 = int(f_indptr[t0]), int(f_indptr[t1])
    if q1 <= q0:
        return -1
    rows = np.repeat(np.arange(t0, t1, dtype=np.int64), np.diff(indptr[t0:t1 + 1]))
    f_rows = np.repeat(np.arange(t0, t1, dtype=np.int64), np.diff(f_indptr[t0:t1 + 1]))
    keys = (rows << 32) | indices[p0:p1].astype(np.int64)
    f_keys = (f_rows << 32) | f_indices[q0:q1].astype(np.int64)
    at = np.searchsorted(keys, f_keys)
    ok = at < keys.shape[0]
    ok[ok] = keys[at[ok]] == f_keys[ok]
    if not ok.all():
        bad = int(np.argmin(ok))
        out[p0 + at[:bad]] = f_counts[q0:q0 + bad]
        return q0 + bad
    out[p0 + at] = f_counts[q0:q1]
    return -1


def map_ids(ids, table, brk):
    """``ids`` mapped through ``table`` (``brk`` stays), int32."""
    ids = np.asarray(ids)
    at = ids == brk
    if not at.any():  # (a stream's ids: no break, one gather)
        return table[ids].astype(np.int32)
    out = ids.astype(np.int32)
    if -table.shape[0] <= brk < table.shape[0]:  # (the breaks' gathered entries replaced by the breaks)
        np.copyto(out, table[ids], casting="unsafe", where=~at)
    else:
        keep = ~at
        out[keep] = table[ids[keep]]
    return out


def map_count(ids, table, brk, per_term):
    """``map_ids``, and each mapped id below ``per_term``'s length counted in it."""
    out = map_ids(ids, table, brk)
    # (a negative break stays out of range in ``out``: nothing to leave out)
    count_ids(out if brk < 0 else out[np.asarray(ids) != brk], per_term)
    return out


def remap(ids, table, brk):
    """``map_ids`` in place."""
    at = ids == brk
    if not at.any():
        ids[...] = table[ids]
    elif -table.shape[0] <= brk < table.shape[0]:
        np.copyto(ids, table[ids], casting="unsafe", where=~at)
    else:
        keep = ~at
        ids[keep] = table[ids[keep]]


def count_ids(ids, per_term):
    """per_term[x] += 1 for each id x of ``ids`` in range."""
    x = np.asarray(ids, dtype=np.int64)
    if x.shape[0] and int(x.min()) >= 0 and int(x.max()) < per_term.shape[0]:
        _add_counts(per_term, x)
    else:
        _add_counts(per_term, x[(x >= 0) & (x < per_term.shape[0])])


def fill_positions(seq, ptr, t0, t1, cur, out):
    """Terms ``t0..t1``'s occurrences in the documents of ``seq`` (``ptr`` from 0): each one's offset in
    its document at ``out[cur[id - t0]]`` (``cur`` advances)."""
    a, b = int(ptr[0]), int(ptr[-1])
    x = np.asarray(seq[a:b], dtype=np.int64)
    within = np.arange(a, b, dtype=np.int64) - np.repeat(ptr[:-1], np.diff(ptr))
    keep = (x >= t0) & (x < t1)
    if not keep.any():
        return
    order, dest = _dest(x[keep] - t0, cur)
    out[dest] = within[keep][order]
