"""Exact top-k with MaxScore pruning for dense queries over large corpora (numba), tile by tile.

Used by ``chitragupta.kernels.cpu.score_topk`` for the queries its tiled path would take (corpora over
``_TILED_MIN_DOCS`` documents, many postings per query) when k is small next to the corpus. The answer
is the exhaustive one to the last bit: same ids, same scores, same tie-break.

The bound. ``ub[t]`` is the largest contribution ``idf * tf' * (k1 + 1) / (tf' + norm)`` of any posting
of term t -- computed at query time for the (k1, b, field weights) in use, by ``term_bounds``, the same
expression over the term's postings, so nothing is stored in the index for it; the caller may keep the
array and pass it again (entries < 0: not computed yet), and a term's bound is then computed once. It is
well below the bound that needs no pass, ``idf * (k1 + 1)`` (bench/RESULTS.md has the figures). Sort a query's terms by ub
ascending; ``pre[i]`` is the sum of the i smallest. With ``thr`` the heap's k-th score (0 until k hits are held), the ``ne`` terms with
``pre[ne] < thr`` are *non-essential*: a document holding none of the others scores at most pre[ne] and
can never enter the heap -- a document scoring exactly thr could still win its tie by id, hence strict.

Per tile of documents (the first one ``first_tile`` wide, so that thr is high before pruning starts):

- ``ne == 0`` (the heap is not full yet, or thr is low): every term is added into the tile's
  accumulator in ascending term id -- the reference's order, so these sums are exact -- and the tile's
  hits are offered to the heap (``chitragupta.kernels._tiles._tile_add`` / ``_tile_offer``, the unpruned tiled path).
- ``ne == n_terms``: no document from here on can reach thr; the query is done.
- otherwise the essential terms are added into the accumulator; a document is a candidate only if its
  essential partial plus the bound of the non-essential terms still reaches thr. The non-essential term
  with the largest bound is marked in a bitmap first (with each document's posting position), so the
  candidate test can use it at once: a document without it needs ``thr - pre[ne - 1]``, one with it
  gets its exact contribution. The remaining non-essential terms, largest bound first, add into the
  surviving candidates (a pass over the term's postings in the tile testing a candidate bitmap, or, when
  the candidates are few, a probe per candidate from an interpolated and prefetched guess) and cut them
  against the remaining bound.
  A survivor is then scored from scratch -- every query term, ascending id, found by galloping
  forward in its postings -- so its score has the reference's bits, and offered to the heap.

Cutting uses the partial sums (another order of addition than the reference's), so every bound is
inflated by ``MARGIN`` (1e-9 relative, far above the ~n * 1e-16 rounding of a sum of n terms) and thr
deflated by it: a document whose exact score reaches thr is never cut. Pruning skips work, never changes
the answer; ``tests/kernels/test_dispatch.py`` checks the ids and scores bit for bit against the reference.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from chitragupta.kernels._intrinsics import prefetch
from chitragupta.kernels.types import N_COUNTERS
from chitragupta.kernels._tiles import (_STREAM_AHEAD, NO_TABLE, _contrib, _contrib_dl, _drain, _lower_bound, _push,
                                        _tile_add, _tile_offer)

__all__ = ["topk_maxscore", "term_bounds", "MARGIN", "MAX_TILE", "N_COUNTERS"]

MARGIN = 1.0 + 1e-9
MAX_TILE = 65536  # widest tile: ``_mark``'s offsets are 16 bits
# counters[c] per thread chunk: see kernels.types.N_COUNTERS


@njit(cache=True, error_model="numpy", inline="always")
def _gallop(a, lo, hi, x):
    """First position in a[lo:hi] (ascending) whose value is >= x, or hi: doubling steps, then bisection."""
    step = 1
    p = lo
    while p < hi and a[p] < x:
        lo = p + 1
        p = lo + step
        step <<= 1
    if p > hi:
        p = hi
    return _lower_bound(a, lo, p, x)


@njit(cache=True, error_model="numpy", inline="always")
def _seek(a, s, e, x, guess):
    """First position in a[s:e] (ascending) whose value is >= x, or e, searched outwards from ``guess``.

    Postings spread roughly evenly over document ids, so a guess interpolated from the tile's share of
    the remaining ids lands near the tile's end and a few steps find it (a bisection over the whole
    remaining list read ~20 lines far apart per term and tile)."""
    if e <= s:
        return s
    if guess >= e:
        guess = e - 1
    if guess < s:
        guess = s
    if a[guess] < x:
        return _gallop(a, guess + 1, e, x)
    hi = guess  # a[hi] >= x: the answer is in [s, hi]
    step = 1
    p = guess - 1
    while p >= s and a[p] >= x:
        hi = p
        p = hi - step
        step <<= 1
    return _lower_bound(a, max(p + 1, s), hi, x)


_AHEAD = 16  # postings ahead the essential adds prefetch dlc[d]: sparse terms miss cache on every gather


@njit(cache=True, error_model="numpy")
def _ess_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, e, lo, acc):
    """``chitragupta.kernels._tiles._tile_add`` (the same expression, the same bits) prefetching the documents'
    lengths _AHEAD postings ahead."""
    if d1 != 0.0 or d2 != 0.0:
        _tile_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, ntab, NO_TABLE, s, e, lo, acc)
        return
    stop = max(s, e - _AHEAD)
    for p in range(np.uint64(s), np.uint64(stop)):  # unsigned: no negative-index test on every read
        prefetch(dlc, indices[p + np.uint64(_AHEAD)])
        d = indices[p]
        f = np.float64(tf[p])
        if f > 0.0:
            acc[np.uint64(d - lo)] += w * f * k1p1 / (f + ntab[np.uint64(dlc[np.uint64(d)])])
    _tile_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, ntab, NO_TABLE, stop, e, lo, acc)


@njit(cache=True, error_model="numpy")
def _mark(indices, s, e, lo, pres, posmap):
    """Bitmap of the tile's documents in postings s:e, and each one's posting position as an offset from s
    (below the tile's width, at most ``MAX_TILE``: 16 bits, a quarter of the cache lines a full position
    would dirty). Unsigned positions: numba's negative-index test is not paid on every read or write."""
    us = np.uint64(s)
    for p in range(us, np.uint64(e)):
        prefetch(indices, p + _STREAM_AHEAD)
        i = np.uint64(indices[p] - lo)
        pres[i >> np.uint64(6)] |= np.uint64(1) << (i & np.uint64(63))
        posmap[i] = p - us


@njit(cache=True, error_model="numpy")
def _unmark(indices, s, e, lo, pres):
    """Clear what ``_mark`` set for postings s:e: one run of words, from the first document's to the last's
    (the postings ascend), rather than a write per posting -- the words between hold no other marks."""
    if e > s:
        pres[(indices[s] - lo) >> 6:((indices[e - 1] - lo) >> 6) + 1] = 0


@njit(cache=True, error_model="numpy")
def _extract(indices, s, e, lo, acc, cand, cval, m, need_with, need_without, pres):
    """Move the essential partials of postings s:e's documents out of the accumulator (zeroing it, so a
    second visit of the same document sees 0) into cand/cval when they reach their need: need_with for
    documents holding the marked term, need_without for the others. Branch-free appends; returns m.

    Every index is unsigned: with a signed append position numba tests each write for a negative index,
    and the loop spilled registers -- twice the time (1M documents, k = 10: 27% of the kernel -> 18%)."""
    um = np.uint64(m)
    for p in range(np.uint64(s), np.uint64(e)):
        i = np.uint64(indices[p] - lo)
        v = acc[i]
        acc[i] = 0.0
        has = (pres[i >> np.uint64(6)] >> (i & np.uint64(63))) & np.uint64(1)
        need = need_with if has else need_without
        cand[um] = i
        cval[um] = v
        um += np.uint64((v >= need) & (v > 0.0))
    return np.int64(um)


@njit(cache=True, error_model="numpy")
def _marked_cut(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, lo, pres, posmap, cand, cval, m, bound, thr_lo):
    """Add the marked term's contribution (its postings start at s; ``_mark``) to the candidates cand[:m] that
    hold it and keep those whose partial + bound reaches thr_lo; returns how many.

    The marked postings' tf lines are far apart and not in cache: all are prefetched first, so their misses
    overlap. Unweighted, the loop is branch-free (half the candidates hold the term, at random): every
    candidate reads a tf -- its own, or tf[0] -- and adds the contribution or +0.0, which leaves a
    positive partial's bits (1M documents, k = 10: this step 11% of the kernel -> 6%). One loop for both
    cases, through ``_contrib_dl``, measured slower (1.46-1.60 -> 1.60-1.65 s, 2,000 queries, one thread)."""
    for j in range(np.uint64(0), np.uint64(m)):
        i = np.uint64(cand[j])
        if (pres[i >> np.uint64(6)] >> (i & np.uint64(63))) & np.uint64(1):
            prefetch(tf, s + np.int64(posmap[i]))
    n = np.uint64(0)
    if d1 == 0.0 and d2 == 0.0:
        for j in range(np.uint64(0), np.uint64(m)):
            d = lo + cand[j]
            i = np.uint64(cand[j])
            has = (pres[i >> np.uint64(6)] >> (i & np.uint64(63))) & np.uint64(1)
            f = np.float64(tf[np.uint64(s + np.int64(posmap[i])) if has else np.uint64(0)])
            c = w * f * k1p1 / (f + ntab[np.uint64(dlc[np.uint64(d)])])
            v = cval[j] + (c if has and f > 0.0 else 0.0)
            cand[n] = i
            cval[n] = v
            n += np.uint64(v + bound >= thr_lo)
    else:
        for j in range(np.uint64(0), np.uint64(m)):
            d = lo + cand[j]
            i = np.uint64(cand[j])
            v = cval[j]
            if (pres[i >> np.uint64(6)] >> (i & np.uint64(63))) & np.uint64(1):
                v += _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s + np.int64(posmap[i]), d)
            cand[n] = i
            cval[n] = v
            n += np.uint64(v + bound >= thr_lo)
    return np.int64(n)


@njit(cache=True, error_model="numpy")
def _stream_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, e, lo, acc, bits):
    """acc += contribution for the postings s:e whose document is a candidate (bit set)."""
    for p in range(np.uint64(s), np.uint64(e)):
        prefetch(indices, p + _STREAM_AHEAD)
        d = indices[p]
        i = np.uint64(d - lo)
        if (bits[i >> np.uint64(6)] >> (i & np.uint64(63))) & np.uint64(1):
            acc[i] += _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, p, d)


_PROBE_AHEAD = 8  # candidates ahead whose postings' lines (indices and tf) ``_probe_add`` prefetches


@njit(cache=True, error_model="numpy")
def _probe_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, e, lo, acc, cand, m):
    """acc += contribution for the candidates cand[:m] (ascending) found in postings s:e.

    A non-essential term's postings are long and not in cache, and a gallop from the last hit waits on
    one miss after another. Each candidate is instead searched outwards from where the postings' even
    spread over ids puts it (``_seek``: the same answer, the first position >= the document), and that
    line (and tf's, read on a hit) is prefetched _PROBE_AHEAD candidates before. A hint only: positions found
    never change."""
    if e <= s:
        return
    d_s = np.float64(indices[s])
    slope = (e - s) / (np.float64(indices[e - 1]) - d_s + 1.0)
    for j in range(min(m, _PROBE_AHEAD)):
        g = s + np.int64((lo + cand[j] - d_s) * slope)
        prefetch(indices, g)
        prefetch(tf, g)
    p = s
    for j in range(m):
        if j + _PROBE_AHEAD < m:
            g = s + np.int64((lo + cand[j + _PROBE_AHEAD] - d_s) * slope)
            prefetch(indices, g)
            prefetch(tf, g)
        i = cand[j]
        d = lo + i
        p = _seek(indices, p, e, d, max(p, s + np.int64((d - d_s) * slope)))
        if p >= e:
            return
        if indices[p] == d:
            acc[i] += _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, p, d)


@njit(cache=True, error_model="numpy")
def _cut(acc, bits, cand, m, bound, thr_lo):
    """Keep the candidates whose partial + bound reaches thr_lo; the others' slot and bit are cleared."""
    n = np.uint64(0)
    for j in range(np.uint64(0), np.uint64(m)):
        i = np.uint64(cand[j])
        keep = acc[i] + bound >= thr_lo
        cand[n] = i
        n += np.uint64(keep)
        acc[i] *= keep
        bits[i >> np.uint64(6)] &= ~(np.uint64(1 - keep) << (i & np.uint64(63)))
    return np.int64(n)


@njit(cache=True, error_model="numpy")
def _pruned_tile(indptr, indices, tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, terms, nt, order, rank, pre, ne,
                 cur, send, pc, lo, thr, k, hs, hi, size, acc, bits, pres, posmap, cand, cval, counters):
    """One tile with ne non-essential terms (0 < ne < nt); returns the heap's size."""
    thr_lo = thr / MARGIN
    read = 0
    for j in range(nt):  # essential terms, ascending id
        if rank[j] >= ne and send[j] > cur[j]:
            t = terms[j]
            _ess_add(indices, tf, f1, d1, f2, d2, dlc, ntab, idf[t], k1p1, cur[j], send[j], lo, acc)
            read += send[j] - cur[j]
    jt = order[ne - 1]  # the non-essential term with the largest bound
    _mark(indices, cur[jt], send[jt], lo, pres, posmap)
    read += send[jt] - cur[jt]
    counters[3] += read
    m = 0
    for j in range(nt):
        if rank[j] >= ne:
            m = _extract(indices, cur[j], send[j], lo, acc, cand, cval, m, thr_lo - pre[ne], thr_lo - pre[ne - 1], pres)
    n = _marked_cut(tf, f1, d1, f2, d2, dlc, ntab, idf[terms[jt]], k1p1, cur[jt], lo, pres, posmap, cand, cval, m,
                    pre[ne - 1], thr_lo)
    _unmark(indices, cur[jt], send[jt], lo, pres)
    m = n
    for j in range(m):
        i = cand[j]
        acc[i] = cval[j]
        bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    r = ne - 2
    while r >= 0 and m > 0:  # the other non-essential terms, largest bound first
        j = order[r]
        s = cur[j]
        e = send[j]
        if e > s:
            w = idf[terms[j]]
            if 16 * m < e - s:
                counters[5] += m
                cand[:m].sort()
                _probe_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, e, lo, acc, cand, m)
            else:
                counters[4] += e - s
                _stream_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, s, e, lo, acc, bits)
        m = _cut(acc, bits, cand, m, pre[r], thr_lo)
        r -= 1
    if m > 0:  # survivors: exact scores, every term in ascending id, documents ascending
        counters[5] += m * nt
        cand[:m].sort()
        for j in range(nt):
            pc[j] = cur[j]
        for jj in range(m):
            i = cand[jj]
            acc[i] = 0.0
            bits[i >> 6] = 0
            d = lo + i
            sc = 0.0
            for j in range(nt):
                p = _gallop(indices, pc[j], send[j], d)
                pc[j] = p
                if p < send[j] and indices[p] == d:
                    sc += _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, idf[terms[j]], k1p1, p, d)
            if sc > 0.0:
                size = _push(hs, hi, size, k, sc, d)
    return size


@njit(parallel=True, cache=True, error_model="numpy")
def topk_maxscore(indptr, indices, tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, q_indptr, q_terms, rows, k, tile,
                  first_tile, max_terms, n_chunks, out_ids, out_scores, counters, bounds):
    """Query i (terms q_terms[q_indptr[i]:q_indptr[i + 1]], ascending ids) -> row rows[i] of out_ids /
    out_scores (filled with -1 / -inf); counters (n_chunks, N_COUNTERS) int64 accumulate per chunk;
    bounds[t] is term t's ``term_bounds`` for every query term."""
    n_docs = norm.shape[0]
    n_q = q_indptr.shape[0] - 1
    if max(tile, first_tile) > MAX_TILE:
        raise ValueError("MaxScore's tiles are at most MAX_TILE (65,536) documents wide")
    for c in prange(n_chunks):
        width = max(tile, first_tile)
        acc = np.zeros(width, dtype=np.float64)
        bits = np.zeros((width + 63) // 64, dtype=np.uint64)
        pres = np.zeros((width + 63) // 64, dtype=np.uint64)
        posmap = np.zeros(width, dtype=np.uint16)  # offsets into the marked term's tile postings
        cand = np.empty(width + 1, dtype=np.int64)
        cval = np.empty(width + 1, dtype=np.float64)
        mt = max(max_terms, 1)
        cur = np.empty(mt, dtype=np.int64)
        send = np.empty(mt, dtype=np.int64)
        pc = np.empty(mt, dtype=np.int64)
        ub = np.empty(mt, dtype=np.float64)
        rank = np.empty(mt, dtype=np.int64)
        pre = np.empty(mt + 1, dtype=np.float64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        cnt = counters[c]
        lo_q = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo_q, hi_q):
            a = q_indptr[q]
            nt = q_indptr[q + 1] - a
            terms = q_terms[a:a + nt]
            for j in range(nt):
                cur[j] = indptr[terms[j]]
                ub[j] = bounds[terms[j]]
            order = np.argsort(ub[:nt])
            pre[0] = 0.0
            for i in range(nt):
                rank[order[i]] = i
                pre[i + 1] = pre[i] + ub[order[i]]
            for i in range(nt + 1):
                pre[i] *= MARGIN
            size = 0
            lo = 0
            while lo < n_docs:
                end_d = min(lo + (first_tile if lo == 0 else tile), n_docs)
                share = (end_d - lo) / (n_docs - lo)
                for j in range(nt):
                    s = cur[j]
                    e_all = indptr[terms[j] + 1]
                    send[j] = _seek(indices, s, e_all, end_d, s + np.int64((e_all - s) * share))
                thr = hs[0] if size == k else 0.0
                thr_lo = thr / MARGIN
                ne = 0
                while ne < nt and pre[ne + 1] < thr_lo:
                    ne += 1
                if ne == nt:
                    cnt[2] += 1
                    break
                if ne == 0:
                    cnt[0] += 1
                    for j in range(nt):
                        if send[j] > cur[j]:
                            _tile_add(indices, tf, f1, d1, f2, d2, dlc, ntab, idf[terms[j]], k1p1, ntab, NO_TABLE,
                                      cur[j], send[j], lo, acc)  # no table here: ntab stands in, unread
                            cnt[3] += send[j] - cur[j]
                    size = _tile_offer(acc, end_d - lo, lo, k, hs, hi, size)
                else:
                    cnt[1] += 1
                    size = _pruned_tile(indptr, indices, tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, terms, nt,
                                        order, rank, pre, ne, cur, send, pc, lo, thr, k, hs, hi, size, acc, bits, pres,
                                        posmap, cand, cval, cnt)
                for j in range(nt):
                    cur[j] = send[j]
                lo = end_d
            _drain(hs, hi, size, out_ids[rows[q]], out_scores[rows[q]])


@njit(parallel=True, cache=True, error_model="numpy")
def term_bounds(indptr, indices, tf, f1, d1, f2, d2, idf, norm, k1p1, terms, out):
    """out[t] = the largest contribution of any posting of t (``_contrib``, the kernels' expression), for
    every t in ``terms`` (distinct); 0.0 for a term whose postings all contribute nothing."""
    for j in prange(terms.shape[0]):
        t = terms[j]
        w = idf[t]
        m = 0.0
        for p in range(np.uint64(indptr[t]), np.uint64(indptr[t + 1])):
            m = max(m, _contrib(tf, f1, d1, f2, d2, norm, w, k1p1, p, indices[p]))
        out[t] = m
