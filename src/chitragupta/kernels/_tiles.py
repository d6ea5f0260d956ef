"""The numba pieces both CPU top-k paths share (``chitragupta.kernels.cpu``, the table and tiled paths, and
``chitragupta.kernels._maxscore``, the pruned one): the bounded heap with the engine's tie-break (score
descending, then id ascending), one posting's BM25 contribution -- the one expression every numba path
computes, so every path adds the same bits -- and a tile's add and offer.

They live here, below both, so that neither scorer imports the other.

Every scoring kernel (here, ``cpu`` and ``_maxscore``) compiles with ``error_model="numpy"``: numba's
default checks every float division for a zero divisor (to raise ZeroDivisionError), a compare and branch
on each posting that also keeps the loops scalar-serial. No divisor there can be zero -- a contribution
divides by tf' + norm[d] only when tf' > 0, and norm >= 0 -- so the quotients, and every score, have the
same bits; only the check is gone (1M documents, k = 100, one thread: ~7% less kernel time).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from chitragupta.kernels._intrinsics import max64, prefetch


@njit(cache=True, error_model="numpy", inline="always")
def _worse(s_a, i_a, s_b, i_b):
    """True when hit a ranks below hit b: lower score, or equal score and larger id."""
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@njit(cache=True, error_model="numpy")
def _sift_down(hs, hi, pos, size):
    # Min-heap on rank: the root is the worst hit kept so far.
    while True:
        left = 2 * pos + 1
        if left >= size:
            return
        child = left
        right = left + 1
        if right < size and _worse(hs[right], hi[right], hs[left], hi[left]):
            child = right
        if _worse(hs[child], hi[child], hs[pos], hi[pos]):
            hs[pos], hs[child] = hs[child], hs[pos]
            hi[pos], hi[child] = hi[child], hi[pos]
            pos = child
        else:
            return


@njit(cache=True, error_model="numpy")
def _sift_up(hs, hi, pos):
    while pos > 0:
        parent = (pos - 1) // 2
        if _worse(hs[pos], hi[pos], hs[parent], hi[parent]):
            hs[pos], hs[parent] = hs[parent], hs[pos]
            hi[pos], hi[parent] = hi[parent], hi[pos]
            pos = parent
        else:
            return


@njit(cache=True, error_model="numpy", inline="always")
def _push(hs, hi, size, k, s, d):
    """Offer hit (s, d) to the bounded heap of size entries; returns the new size (exact tie-break)."""
    if size < k:
        hs[size] = s
        hi[size] = d
        _sift_up(hs, hi, size)
        return size + 1
    if s > hs[0] or (s == hs[0] and d < hi[0]):
        hs[0] = s
        hi[0] = d
        _sift_down(hs, hi, 0, size)
    return size


@njit(cache=True, error_model="numpy", inline="always")
def _drain(hs, hi, size, out_ids, out_scores):
    """Pop the heap's size hits worst-first into out[:size], so the row reads best first; returns size."""
    n = size
    while size > 0:
        size -= 1
        out_scores[size] = hs[0]
        out_ids[size] = hi[0]
        hs[0] = hs[size]
        hi[0] = hi[size]
        _sift_down(hs, hi, 0, size)
    return n


_BLOCK = 64  # the accumulators' blocks: the span ``max64`` takes


@njit(cache=True, error_model="numpy", inline="always")
def _span_max(acc, b0, b1):
    """max(0, max of acc[b0:b1]); a full block of _BLOCK by ``_intrinsics.max64`` (SIMD)."""
    if b1 - b0 == _BLOCK:
        return max64(acc, b0)
    m = 0.0
    for d in range(b0, b1):
        m = max(m, acc[d])
    return m


@njit(cache=True, error_model="numpy", inline="always")
def _tf_weighted(tf, f1, d1, f2, d2, p):
    """tf' of posting p: its count plus the weighted field counts (d1, d2 zero when no field is weighted)."""
    f = np.float64(tf[p])
    if d1 != 0.0:
        f += d1 * f1[p]
    if d2 != 0.0:
        f += d2 * f2[p]
    return f


@njit(cache=True, error_model="numpy", inline="always")
def _contrib(tf, f1, d1, f2, d2, norm, w, k1p1, p, d):
    """The BM25 contribution of posting p (document d), 0 where tf' <= 0: the one expression every
    numba path computes, so every path adds the same bits."""
    f = _tf_weighted(tf, f1, d1, f2, d2, p)
    if f > 0.0:
        return w * f * k1p1 / (f + norm[np.uint64(d)])
    return 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, p, d):
    """``_contrib`` with the document's norm read as ntab[dlc[d]] (``cpu._compact_norm``: the same double as
    norm[d], so the same bits) -- 2 bytes a document to bring into cache instead of 8. MaxScore's
    candidate and survivor look-ups hit documents at random: norm's 8 MB miss on every one, the tile's
    length codes are in cache from its essential adds (1M documents, k = 10: ~10% of the kernel)."""
    f = _tf_weighted(tf, f1, d1, f2, d2, p)
    if f > 0.0:
        return w * f * k1p1 / (f + ntab[np.uint64(dlc[np.uint64(d)])])
    return 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _lower_bound(a, lo, hi, x):
    """First position in a[lo:hi] (ascending) whose value is >= x, or hi."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


# Postings ahead a tile's add prefetches its postings: a term's run in a tile is a few thousand postings, and
# the hardware prefetcher, trained anew at each run's start, left misses that a hint this far ahead covers
# (1M documents, k = 100: ~4% of the kernel). An address past the array's end is harmless: nothing is read.
_STREAM_AHEAD = np.uint64(96)


# A term's ``shift`` when its contributions are not in the batch's table (``cpu._hot_table``).
NO_TABLE = -(1 << 62)


@njit(cache=True, error_model="numpy")
def _tile_add(indices, tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, table, shift, s, e, lo, acc):
    """acc[d - lo] += c(t, d) for the postings s:e of one term (all inside the tile starting at lo).

    c is ``_contrib``, the expression ``cpu._posting_table`` writes, so every addend has the same bits.
    With ``shift`` != NO_TABLE, c of posting p was computed once for the batch into table[p + shift]
    (``cpu._hot_table``) and is read from there: a term many queries of the batch share is then not
    recomputed by each (a stored addend is 0.0 where tf' <= 0; adding it leaves acc's bits, acc >= +0.0).
    Otherwise a document's norm is read as ntab[dlc[d]] (``_contrib_dl``; ``cpu._compact_norm``: the same
    doubles as norm[d], from a 16-bit length a document and a table a length -- a quarter of norm's bytes).
    """
    # Unsigned indices drop numba's negative-index wraparound test from the hot loop; d - lo >= 0 here.
    if shift != NO_TABLE:
        us = np.uint64(s)
        ut = np.uint64(s + shift)
        for i in range(np.uint64(0), np.uint64(e - s)):
            prefetch(indices, us + i + _STREAM_AHEAD)
            prefetch(table, ut + i + _STREAM_AHEAD)
            acc[np.uint64(indices[us + i] - lo)] += table[ut + i]
    elif d1 == 0.0 and d2 == 0.0:
        # The common unweighted case: no field counts read, one predictable branch.
        for p in range(np.uint64(s), np.uint64(e)):
            prefetch(indices, p + _STREAM_AHEAD)
            prefetch(tf, p + _STREAM_AHEAD)
            d = indices[p]
            f = np.float64(tf[p])
            if f > 0.0:
                acc[np.uint64(d - lo)] += w * f * k1p1 / (f + ntab[np.uint64(dlc[np.uint64(d)])])
    else:
        for p in range(np.uint64(s), np.uint64(e)):
            d = indices[p]
            acc[np.uint64(d - lo)] += _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, p, d)  # 0.0 where tf' <= 0


@njit(cache=True, error_model="numpy")
def _tile_offer(acc, n, lo, k, hs, hi, size):
    """Offer the hits (acc > 0) of acc[:n] (documents lo + i) to the bounded heap, zeroing acc[:n].

    Documents must arrive in ascending id across the calls for one heap (every caller walks its tiles in
    order). Then, once k hits are held, a new document ranks above the heap's root only by a strictly
    higher score: on a tie its id is larger than every id kept. So the filter is strict (acc > root,
    acc > 0 before the heap is full) and exact: a block tied with the root everywhere -- common when
    many documents share a length and a term set -- is not scanned. One maximum per block of _BLOCK
    (``_span_max``: SIMD) decides whether any of it can enter; then the block is zeroed while it is in L1.
    """
    thr = hs[0] if size == k else 0.0
    for b0 in range(0, n, _BLOCK):
        b1 = min(b0 + _BLOCK, n)
        if not _span_max(acc, b0, b1) > thr:
            acc[b0:b1] = 0.0
            continue
        for d in range(b0, b1):
            s = acc[d]
            if s > thr:
                doc = d + lo
                if size < k:
                    hs[size] = s
                    hi[size] = doc
                    _sift_up(hs, hi, size)
                    size += 1
                    if size == k:
                        thr = hs[0]
                else:  # s > hs[0]: enters (the strict filter above is the exact test here)
                    hs[0] = s
                    hi[0] = doc
                    _sift_down(hs, hi, 0, size)
                    thr = hs[0]
        acc[b0:b1] = 0.0
    return size
