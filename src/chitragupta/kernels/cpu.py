"""numba backend: a batch of queries scored in parallel over the term-major CSR, exact top-k per query.

For a batch, each posting (t, d, tf) of the batch's distinct terms gets its contribution once:

    tf'      = tf + d1 * f1 + d2 * f2            (d = weight - 1; a zero delta is never read)
    c(t, d)  = idf[t] * tf' * (k1 + 1) / (tf' + norm[d]),    norm[d] = k1 * (1 - b + b * dl[d] / avgdl)

then, in parallel over queries, acc[d] += c(t, d) over the query's distinct terms in ascending id, and
the k best touched documents by (score desc, id asc) come out of a bounded heap. k1, b and the field
weights are applied at query time; nothing is baked into the index. The accumulation order is the
reference's, so scores agree to the last bit. Compiled with numba's on-disk cache.

Large corpora (n_docs > _TILED_MIN_DOCS): a query whose postings are many for the corpus (dense)
skips the table and is scored tile by tile instead. Documents are cut into tiles of _TILE ids; per
tile, each of the query's terms (ascending id) adds c(t, d) -- computed inline by the same expression,
so the same bits -- for its postings inside the tile (postings are ascending by document, so one cursor per term
walks the tiles in order), then the tile's hits are offered to the query's bounded heap and the tile
is zeroed while still in cache. A tile's float64 accumulator (512 KB) and norm slice stay in L2,
where a whole-corpus accumulator (8 MB at 1M documents), its per-query reset and its block-max scan
missed cache on every random add. The per-document sum is the same sum in the same term order.
A batch's terms that many of its dense queries share (``HOT_MIN_QUERIES``) have their contributions
computed once into a table (``_hot_table``, within ``TABLE_BUDGET_BYTES``, most-shared first) that the
tiles read instead of recomputing each posting: the same doubles, a third less time a posting added.

When k is small next to the corpus (k * _PRUNE_DOCS_PER_K <= n_docs) those dense queries are pruned
instead (``chitragupta.kernels._maxscore``, MaxScore over the same tiles): per tile, the terms whose summed bound
(each term's largest contribution under the params in use) cannot lift a document to the heap's k-th
score are only probed for the documents that still could, and those few are re-scored exactly. Same
ids, same scores, to the bit; at 1M documents and k = 10 it reads about a third of the postings.

A query with an ``allowed`` mask (query syntax, filters) is scored by ``_topk_masked``: the same
contributions (``_contrib``) added in the same term order, skipping the postings of disallowed documents,
and only the touched allowed documents offered to the heap -- so its hits are the unmasked ranking
restricted to the allowed set, same scores to the bit, and never a disallowed document however large k.
The queries of a batch without a mask take the paths above unchanged.
"""

from __future__ import annotations

import mmap

import numpy as np
import numba
from numba import njit, prange

from chitragupta.kernels._tiles import (_BLOCK, NO_TABLE, _contrib, _contrib_dl, _drain, _lower_bound, _push,
                                        _sift_down, _sift_up, _span_max, _tile_add, _tile_offer)
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, allowed_rows, bm25_idf, length_norm

__all__ = ["score_topk"]


@njit(cache=True, error_model="numpy")
def _offer(acc, cand, lo, hi_, k, hs, hi, size):
    """Offer ``cand[lo:hi_]`` to the bounded heap of the best k (size entries held); returns the size.
    ``_push`` written out: through it this loop was slower at large k."""
    for j in range(lo, hi_):
        d = cand[j]
        s = acc[d]
        if size < k:
            hs[size] = s
            hi[size] = d
            _sift_up(hs, hi, size)
            size += 1
        elif s > hs[0] or (s == hs[0] and d < hi[0]):
            hs[0] = s
            hi[0] = d
            _sift_down(hs, hi, 0, size)
    return size


@njit(cache=True, error_model="numpy")
def _select_into(acc, cand, m, k, hs, hi, buf, out_ids, out_scores):
    """Write the best k of ``cand[:m]`` (all with acc > 0) into the out rows, best first.

    The heap takes the first 8k candidates; its root is then a lower bound on the final k-th score, so
    the rest are first filtered against it without a branch, and only the survivors are offered.
    """
    sample = min(m, 8 * k)
    size = _offer(acc, cand, 0, sample, k, hs, hi, 0)
    if m > sample:
        if size == k:
            thr = hs[0]
            c = 0
            for j in range(sample, m):
                d = cand[j]
                buf[c] = d
                c += acc[d] >= thr
            size = _offer(acc, buf, 0, c, k, hs, hi, size)
        else:
            size = _offer(acc, cand, sample, m, k, hs, hi, size)
    return _drain(hs, hi, size, out_ids, out_scores)


@njit(cache=True, error_model="numpy")
def _block_max(acc, bmax):
    """bmax[i] = max(0, max of acc over block i of _BLOCK documents): ``_span_max`` (SIMD over a full block)."""
    n = acc.shape[0]
    for bi in range((n + _BLOCK - 1) // _BLOCK):
        bmax[bi] = _span_max(acc, bi * _BLOCK, min(bi * _BLOCK + _BLOCK, n))


@njit(cache=True, error_model="numpy")
def _block_max_of(acc, bmax, size):
    """bmax[i] = max(0, max of acc over block i of ``size`` documents): ``_block_max`` for other sizes."""
    n = acc.shape[0]
    nb = (n + size - 1) // size
    for bi in range(nb):
        m = 0.0
        for d in range(bi * size, min(bi * size + size, n)):
            m = max(m, acc[d])
        bmax[bi] = m
    return nb


# With fewer blocks than k the block bound is 0 and every hit goes to the heap (scifact's 5,183 documents
# are 81 blocks of 64): smaller blocks are taken then (down to _MIN_BLOCK documents), and when even those
# are fewer than k the hits are collected and cut instead. Measurements in RESULTS.md (2026-12-03).
_BLOCK_SPARE = 1.0
_MIN_BLOCK = 8


@njit(cache=True, error_model="numpy")
def _select_dense(acc, k, hs, hi, bmax, buf, cs, out_ids, out_scores):
    """The best k documents of a dense accumulator (hits are acc > 0), best first.

    The k-th largest block maximum is a lower bound on the k-th largest score (k blocks each hold a
    score at least that high), so only blocks reaching it are read, and only their scores reaching
    it are offered to the heap. ``bmax`` holds n_docs / _MIN_BLOCK blocks; ``cs`` n_docs scores.
    """
    n_docs = acc.shape[0]
    size_b = _BLOCK
    while size_b > _MIN_BLOCK and (n_docs + size_b - 1) // size_b < _BLOCK_SPARE * k:
        size_b //= 2
    if (n_docs + size_b - 1) // size_b < _BLOCK_SPARE * k:
        return _collect_all(acc, k, buf, cs, out_ids, out_scores)
    if size_b == _BLOCK:
        _block_max(acc, bmax)
        nb = (n_docs + _BLOCK - 1) // _BLOCK
    else:
        nb = _block_max_of(acc, bmax, size_b)
    # k-th largest block maximum, through the value heap (ids unused here).
    size = 0
    for bi in range(nb):
        v = bmax[bi]
        if not v > 0.0:
            continue
        if size < k:
            hs[size] = v
            hi[size] = bi
            _sift_up(hs, hi, size)
            size += 1
        elif v > hs[0]:
            hs[0] = v
            hi[0] = bi
            _sift_down(hs, hi, 0, size)
    thr = hs[0] if size == k else 0.0
    c = 0
    for bi in range(nb):
        if bmax[bi] >= thr and bmax[bi] > 0.0:
            lo = bi * size_b
            for d in range(lo, min(lo + size_b, n_docs)):
                buf[c] = d
                c += (acc[d] >= thr) & (acc[d] > 0.0)
    size = _offer(acc, buf, 0, c, k, hs, hi, 0)
    return _drain(hs, hi, size, out_ids, out_scores)


@njit(cache=True, error_model="numpy")
def _collect_all(acc, k, ci, cs, out_ids, out_scores):
    """Every hit of acc in ascending id, cut to the best k (``_kth_cut``) and stably sorted by score:
    for k near the corpus, where no block bound prunes and a heap would take every hit."""
    m = 0
    for d in range(acc.shape[0]):
        s = acc[d]
        cs[m] = s
        ci[m] = d
        m += s > 0.0
    if m > k:
        m, _thr = _kth_cut(cs, ci, m, k)
    order = np.argsort(-cs[:m], kind="mergesort")  # stable: ties stay in ascending id
    for j in range(m):
        out_scores[j] = cs[order[j]]
        out_ids[j] = ci[order[j]]
    return m


@njit(parallel=True, cache=True, error_model="numpy")
def _posting_table(indptr, indices, tf, f1, d1, f2, d2, idf, dlc, ntab, k1p1, uterms, toff, table):
    """BM25 contribution of every posting of the given distinct terms, computed once per batch.

    table[toff[j] + i] is the contribution of the i-th posting of term uterms[j]; 0 where tf' <= 0. The norm
    is read as ntab[dlc[d]] (``_tiles._contrib_dl``, ``_compact_norm``: norm's doubles; at 1M documents norm's
    8 MB missed cache on every read of a term's postings).
    """
    for j in prange(uterms.shape[0]):
        t = uterms[j]
        start = indptr[t]
        base = toff[j] - start
        w = idf[t]
        for p in range(start, indptr[t + 1]):
            table[base + p] = _contrib_dl(tf, f1, d1, f2, d2, dlc, ntab, w, k1p1, p, indices[p])


@njit(parallel=True, cache=True, error_model="numpy")
def _topk_from_table(indptr, indices, uterms, toff, table, q_indptr, q_slots, k, n_docs, n_chunks,
                     out_ids, out_scores):
    """Sum each query's posting contributions (terms in ascending id) and keep its best k.

    q_slots int64[:] index ``uterms``/``toff`` for each query term; rows of out_ids/out_scores arrive
    filled with -1 / -inf. A query whose postings are many for the corpus accumulates densely and
    finds its hits by a scan; otherwise the documents it touches are recorded as they are first hit.
    Both are branch-free in the inner loop and give the same hits.
    """
    n_q = q_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n_docs, dtype=np.float64)
        touched = np.empty(n_docs + 1, dtype=np.int64)
        buf = np.empty(n_docs, dtype=np.int64)
        cs = np.empty(n_docs, dtype=np.float64)
        bmax = np.empty((n_docs + _MIN_BLOCK - 1) // _MIN_BLOCK, dtype=np.float64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        lo = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo, hi_q):
            n_post = 0
            for j in range(q_indptr[q], q_indptr[q + 1]):
                u = q_slots[j]
                n_post += toff[u + 1] - toff[u]
            dense = 8 * n_post >= n_docs
            m = 0
            for j in range(q_indptr[q], q_indptr[q + 1]):
                u = q_slots[j]
                # Unsigned offsets: no negative-index wraparound test in the inner loops (as in _tile_add).
                src = np.uint64(indptr[uterms[u]])
                dst = np.uint64(toff[u])
                n_u = np.uint64(toff[u + 1] - toff[u])
                if dense:
                    for i in range(n_u):
                        acc[np.uint64(indices[src + i])] += table[dst + i]
                else:
                    for i in range(n_u):
                        d = np.uint64(indices[src + i])
                        a = acc[d]
                        s = table[dst + i]
                        touched[m] = d
                        m += (a == 0.0) & (s > 0.0)
                        acc[d] = a + s
            if dense:
                _select_dense(acc, k, hs, hi, bmax, buf, cs, out_ids[q], out_scores[q])
                acc[:] = 0.0
            else:
                _select_into(acc, touched, m, k, hs, hi, buf, out_ids[q], out_scores[q])
                for i in range(m):
                    acc[touched[i]] = 0.0


@njit(parallel=True, cache=True, error_model="numpy")
def _topk_masked(indptr, indices, tf, f1, d1, f2, d2, idf, norm, k1p1, q_indptr, q_terms, masks, mask_of, k,
                 n_chunks, out_ids, out_scores):
    """Query q (terms q_terms[q_indptr[q]:q_indptr[q + 1]], ascending ids) scored over the documents
    ``masks[mask_of[q]]`` allows only; its best k go to out row q (filled with -1 / -inf)."""
    n_docs = norm.shape[0]
    n_q = q_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n_docs, dtype=np.float64)
        touched = np.empty(n_docs, dtype=np.int64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        lo_q = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo_q, hi_q):
            allowed = masks[mask_of[q]]
            m = 0
            for j in range(q_indptr[q], q_indptr[q + 1]):
                t = q_terms[j]
                w = idf[t]
                for p in range(indptr[t], indptr[t + 1]):
                    d = indices[p]
                    if not allowed[d]:
                        continue
                    s = _contrib(tf, f1, d1, f2, d2, norm, w, k1p1, p, d)
                    a = acc[d]
                    if a == 0.0 and s > 0.0:  # first positive addend: acc only grows, so once per document
                        touched[m] = d
                        m += 1
                    acc[d] = a + s
            size = 0
            for i in range(m):
                d = touched[i]
                size = _push(hs, hi, size, k, acc[d], d)
                acc[d] = 0.0
            _drain(hs, hi, size, out_ids[q], out_scores[q])


# Bytes of masks handed to ``_topk_masked`` at once (a batch of many masked queries goes in groups).
MASK_BUDGET_BYTES = 256 * 1024 * 1024


def _sub_batch(queries: QueryBatch, rows: np.ndarray) -> QueryBatch:
    """The queries ``rows`` of a batch, as a batch of their own."""
    lens = np.diff(queries.indptr)[rows]
    q_indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lens, out=q_indptr[1:])
    pos = np.arange(int(q_indptr[-1]), dtype=np.int64) + np.repeat(queries.indptr[rows] - q_indptr[:-1], lens)
    return QueryBatch(indptr=q_indptr, terms=queries.terms[pos])


def _score_allowed(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, allowed, idf, norm,
                   bounds, counters) -> TopK:
    """``score_topk`` with masks: the unmasked queries as ever, the masked ones by ``_topk_masked``."""
    masks = allowed_rows(allowed, queries.n_queries, postings.n_docs)
    out = TopK.empty(queries.n_queries, k)
    held = np.fromiter((m is not None for m in masks), dtype=bool, count=len(masks))
    free = np.flatnonzero(~held)
    if free.size:
        got = score_topk(postings, _sub_batch(queries, free), params, k, idf=idf, norm=norm, bounds=bounds,
                         counters=counters)
        out.ids[free] = got.ids
        out.scores[free] = got.scores
    rows = np.flatnonzero(held)
    if not rows.size or postings.n_docs == 0:
        return out
    idf, norm = _idf_norm(postings, params, idf, norm)
    f1, d1, f2, d2 = _field_args(postings, params)
    per_group = max(1, MASK_BUDGET_BYTES // max(1, postings.n_docs))
    start = 0
    while start < rows.size:
        # a group of masked queries whose distinct masks fit the budget (a mask shared by many is held once)
        slot: dict[int, int] = {}
        group = []
        while start < rows.size and (len(slot) < per_group or id(masks[rows[start]]) in slot):
            q = int(rows[start])
            slot.setdefault(id(masks[q]), len(slot))
            group.append(q)
            start += 1
        stack = np.empty((len(slot), postings.n_docs), dtype=np.bool_)
        mask_of = np.empty(len(group), dtype=np.int64)
        for i, q in enumerate(group):
            mask_of[i] = slot[id(masks[q])]
            stack[mask_of[i]] = masks[q]
        group_rows = np.asarray(group, dtype=np.int64)
        sub = _sub_batch(queries, group_rows)
        ids = np.full((len(group), k), -1, dtype=np.int64)
        scores = np.full((len(group), k), -np.inf, dtype=np.float64)
        n_chunks = max(1, min(len(group), numba.get_num_threads()))
        _topk_masked(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm,
                     float(params.k1 + 1.0), sub.indptr, sub.terms.astype(np.int64), stack, mask_of, int(k),
                     n_chunks, ids, scores)
        out.ids[group_rows] = ids
        out.scores[group_rows] = scores
    return out


# The constants below were chosen by measurement; the figures are in bench/RESULTS.md ("kernel constants").
_TILE = 65536  # documents a tile: its float64 accumulator and norm slice stay in a 2 MB L2
_TILED_MIN_DOCS = 262144  # below this the whole accumulator fits L2 and the table path is faster
TILED_DENSITY = 32  # tiles for a query with postings * this >= n_docs (a slot visit is cheaper than a posting)
# MaxScore when k * this <= n_docs: with larger k the threshold stays low and the unpruned tiles are
# faster (1M documents, 5,000 stress queries, one thread: k = 10 pruned 7.7 s against tiles 9.5 s; k = 100
# pruned 10.6 s against tiles 9.1 s, CPU seconds; 4096 before, which sent k <= 244 to MaxScore at 1M)
_PRUNE_DOCS_PER_K = 16384
_PRUNE_TILE = 32768  # MaxScore's tiles (documents)
_PRUNE_FIRST_TILE = 32768  # its first tile, which raises the threshold before pruning starts
_COLLECT_MIN_K = 512  # from this k the unpruned tiles collect past a threshold instead of keeping a heap
CHUNKS_PER_THREAD = 8  # dense queries' chunks per thread, scheduled dynamically


@njit(cache=True, error_model="numpy", inline="always")
def _tile_terms(indptr, indices, tf, f1, d1, f2, d2, idf, dlc, ntab, k1p1, table, q_shift, q_terms, a, nt, cur, lo,
                end_d, acc):
    """Add the query's terms q_terms[a:a + nt] (ascending id) into the tile [lo, end_d); each term's
    cursor cur[j] moves forward to the tile's end, found by binary search. q_shift[a + j] places term j's
    contributions in ``table`` (``_hot_table``), or is NO_TABLE."""
    for j in range(nt):
        t = q_terms[a + j]
        s = cur[j]
        e = _lower_bound(indices, s, indptr[t + 1], end_d)
        cur[j] = e
        if e > s:
            _tile_add(indices, tf, f1, d1, f2, d2, dlc, ntab, idf[t], k1p1, table, q_shift[a + j], s, e, lo, acc)


@njit(parallel=True, cache=True, error_model="numpy")
def _topk_tiled(indptr, indices, tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, table, q_shift, q_indptr, q_terms,
                rows, k, tile, max_terms, n_chunks, out_ids, out_scores):
    """Dense queries scored tile by tile (see the module docstring); the terms the batch's queries share most
    are read from its table (q_shift, ``_hot_table``), the others computed inline.

    Query i's terms are q_terms[q_indptr[i]:q_indptr[i + 1]] (ascending ids: the reference's order),
    its result goes to row rows[i] of out_ids/out_scores (filled with -1 / -inf). Per tile and term
    the postings inside the tile are found from a cursor that only moves forward, by binary search.
    """
    n_docs = norm.shape[0]
    n_q = q_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(tile, dtype=np.float64)
        cur = np.empty(max(max_terms, 1), dtype=np.int64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        lo_q = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo_q, hi_q):
            a = q_indptr[q]
            nt = q_indptr[q + 1] - a
            for j in range(nt):
                cur[j] = indptr[q_terms[a + j]]
            size = 0
            for lo in range(0, n_docs, tile):
                end_d = min(lo + tile, n_docs)
                _tile_terms(indptr, indices, tf, f1, d1, f2, d2, idf, dlc, ntab, k1p1, table, q_shift, q_terms, a, nt,
                            cur, lo, end_d, acc)
                size = _tile_offer(acc, end_d - lo, lo, k, hs, hi, size)
            _drain(hs, hi, size, out_ids[rows[q]], out_scores[rows[q]])


@njit(cache=True, error_model="numpy")
def _tile_collect(acc, n, lo, thr, cs, ci, m):
    """Append the hits of acc[:n] (documents lo + i) scoring >= thr to cs/ci from m, in ascending id,
    zeroing acc[:n] block by block; returns the new m. A block whose maximum is below thr is skipped."""
    for b0 in range(0, n, _BLOCK):
        b1 = min(b0 + _BLOCK, n)
        mx = _span_max(acc, b0, b1)
        if not mx > 0.0:
            continue
        if mx >= thr:
            for d in range(b0, b1):
                s = acc[d]
                cs[m] = s
                ci[m] = d + lo
                m += (s >= thr) & (s > 0.0)
        acc[b0:b1] = 0.0
    return m


@njit(cache=True, error_model="numpy")
def _kth_cut(cs, ci, m, k):
    """Cut m > k candidates (in ascending id) to the best k, order kept: thr is the k-th largest score;
    every candidate above it stays, and of those at it the smallest ids (the first) fill the rest -- a
    later document scoring thr would lose its tie to them. Returns (k, thr)."""
    thr = np.partition(cs[:m], m - k)[m - k]
    room = k
    for j in range(m):
        room -= cs[j] > thr
    n = 0
    for j in range(m):
        s = cs[j]
        keep = s > thr or (s == thr and room > 0)
        room -= s == thr and room > 0
        cs[n] = s
        ci[n] = ci[j]
        n += keep
    return n, thr


@njit(parallel=True, cache=True, error_model="numpy")
def _topk_tiled_collect(indptr, indices, tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, table, q_shift, q_indptr,
                        q_terms, rows, k, tile, max_terms, n_chunks, out_ids, out_scores):
    """``_topk_tiled`` for large k: no heap. Hits reaching a threshold are collected per tile in ascending
    id; once the buffer holds 4k, it is cut to its best k (``_kth_cut``) and the threshold becomes their
    k-th score, a lower bound on the final one. The buffer never holds more than 4k plus a tile. The
    last cut leaves the k best by (score desc, id asc), which a stable sort on score puts in that order."""
    n_docs = norm.shape[0]
    n_q = q_indptr.shape[0] - 1
    cap = 4 * k
    for c in prange(n_chunks):
        acc = np.zeros(tile, dtype=np.float64)
        cur = np.empty(max(max_terms, 1), dtype=np.int64)
        cs = np.empty(cap + tile, dtype=np.float64)
        ci = np.empty(cap + tile, dtype=np.int64)
        lo_q = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo_q, hi_q):
            a = q_indptr[q]
            nt = q_indptr[q + 1] - a
            for j in range(nt):
                cur[j] = indptr[q_terms[a + j]]
            m = 0
            thr = 0.0
            for lo in range(0, n_docs, tile):
                end_d = min(lo + tile, n_docs)
                _tile_terms(indptr, indices, tf, f1, d1, f2, d2, idf, dlc, ntab, k1p1, table, q_shift, q_terms, a, nt,
                            cur, lo, end_d, acc)
                m = _tile_collect(acc, end_d - lo, lo, thr, cs, ci, m)
                if m >= cap:
                    m, thr = _kth_cut(cs, ci, m, k)
            if m > k:
                m, thr = _kth_cut(cs, ci, m, k)
            order = np.argsort(-cs[:m], kind="mergesort")  # stable: ties stay in ascending id
            row = rows[q]
            for j in range(m):
                out_scores[row, j] = cs[order[j]]
                out_ids[row, j] = ci[order[j]]


_EMPTY_I32 = np.zeros(0, dtype=np.int32)


def _idf_norm(postings: Postings, params: BM25Params, idf, norm):
    """The caller's cached ``idf`` and length ``norm``, or both computed here when it keeps none."""
    if idf is None:
        idf = bm25_idf(postings.df(), postings.n_docs)
    if norm is None:
        norm = length_norm(postings.doc_len, postings.avgdl(), params.k1, params.b)
    return idf, norm


def _field_args(postings: Postings, params: BM25Params):
    active = params.active_fields()
    if len(active) > 2:
        raise ValueError(f"the numba backend supports at most 2 weighted fields, got {len(active)}")
    args = []
    for name, delta in active:
        args += [np.ascontiguousarray(postings.fields[name], dtype=np.int32), float(delta)]
    while len(args) < 4:
        args += [_EMPTY_I32, 0.0]
    return args


_COMPACT: list = []  # the last few (norm, doc_len, dlc, ntab), newest last: one per index and (k1, b) in use
_COMPACT_KEPT = 4


def _compact_norm(postings: Postings, params: BM25Params, norm: np.ndarray):
    """(dlc, ntab) with ntab[dlc[d]] == norm[d], bit for bit: each document's length as 16 bits and the norm of
    each length -- the tiled and MaxScore adds read 2 bytes a document instead of norm's 8 (1M documents: 2 MB
    against 8 MB to bring into cache, tile by tile, for every query). ``length_norm`` is elementwise, so the
    table built over the lengths 0..max holds the very doubles norm holds; that is checked, and a corpus whose
    lengths do not fit 16 bits (or a norm from elsewhere) gets the identity form (arange, norm): the same
    values, read through one more index. Kept for the last few norm arrays (the engine keeps one per index and
    (k1, b)), so a batch pays the check once."""
    for entry in _COMPACT:
        if entry[0] is norm and entry[1] is postings.doc_len:
            return entry[2], entry[3]
    dl = np.asarray(postings.doc_len)
    dlc = ntab = None
    if dl.size and int(dl.min()) >= 0 and int(dl.max()) < 65536:
        dlc = dl.astype(np.uint16)
        ntab = length_norm(np.arange(int(dl.max()) + 1, dtype=np.int64), postings.avgdl(), params.k1, params.b)
        if not np.array_equal(ntab[dlc], norm):
            dlc = None
    if dlc is None:
        dlc, ntab = np.arange(norm.shape[0], dtype=np.uint32), norm
    _COMPACT.append((norm, postings.doc_len, dlc, ntab))
    del _COMPACT[:-_COMPACT_KEPT]
    return dlc, ntab


# Largest posting table built at once; a bigger batch is scored in query chunks.
TABLE_BUDGET_BYTES = 256 * 1024 * 1024


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               *, idf: np.ndarray | None = None, norm: np.ndarray | None = None,
               bounds: np.ndarray | None = None, counters: np.ndarray | None = None, allowed=None) -> TopK:
    """Top-k of every query, in parallel over queries. Same contract as ``chitragupta.kernels.reference.score_topk``.

    The contribution of each posting of the batch's distinct terms is computed once per batch (k1, b
    and field weights applied here, at query time), then every query sums its terms' contributions in
    ascending term order -- the reference's order, so scores agree to the last bit. Over more than
    _TILED_MIN_DOCS documents, the dense queries are scored by tiles instead (``_topk_tiled``, same sums).
    ``idf`` and ``norm`` may be passed precomputed (the engine caches them per index and (k1, b)).
    When k is small next to the corpus those dense queries are pruned (``chitragupta.kernels._maxscore``: MaxScore,
    exact). Pruning needs each query term's largest contribution under these params: ``bounds``, a
    float64 array of n_terms kept by the caller for one (k1, b, field weights) and filled with -1, gets
    them filled in as queries need them (the engine keeps one per index and params); without it they
    are computed for this call. ``counters``, an int64 array of ``chitragupta.kernels._maxscore.N_COUNTERS``, then
    receives the pruning's counts (full tiles, pruned tiles, queries stopped early, postings read in full,
    postings streamed past the candidate bitmap, galloping probes).
    ``allowed`` (``kernels.types.allowed_rows``): per query, the only documents that may be hits
    (``_topk_masked``; the module docstring).
    """
    if allowed is not None:
        return _score_allowed(postings, queries, params, k, allowed, idf, norm, bounds, counters)
    out = TopK.empty(queries.n_queries, k)
    if queries.n_queries == 0 or postings.n_docs == 0 or queries.terms.shape[0] == 0:
        return out
    idf, norm = _idf_norm(postings, params, idf, norm)
    f1, d1, f2, d2 = _field_args(postings, params)
    df = np.diff(postings.indptr)
    tile = int(_TILE)
    if postings.n_docs <= max(tile, _TILED_MIN_DOCS):
        _score_table(postings, queries, params, k, idf, norm, f1, d1, f2, d2, df, out.ids, out.scores)
        return out
    term_cum = np.zeros(queries.terms.shape[0] + 1, dtype=np.int64)
    np.cumsum(df[queries.terms], out=term_cum[1:])
    n_post = np.diff(term_cum[queries.indptr])  # postings of each query
    tiled = TILED_DENSITY * n_post >= postings.n_docs
    rows = np.flatnonzero(tiled).astype(np.int64)
    if rows.size:
        lens = np.diff(queries.indptr)[rows]
        q_indptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lens, out=q_indptr[1:])
        starts = queries.indptr[rows]
        # The rows' term slices, concatenated: position i of the result reads starts[q] + (i - q_indptr[q]).
        pos = np.arange(int(q_indptr[-1]), dtype=np.int64) + np.repeat(starts - q_indptr[:-1], lens)
        q_terms = queries.terms[pos].astype(np.int64)
        # Chunks handed out one at a time as threads free up (numba's dynamic schedule), several per thread: a
        # thread the host descheduled, or a chunk of heavy queries, no longer sets the batch's wall alone.
        n_chunks = max(1, min(rows.size, numba.get_num_threads() * CHUNKS_PER_THREAD))
        with numba.parallel_chunksize(1):
            _score_tiled(postings, params, k, idf, norm, f1, d1, f2, d2, df, q_indptr, q_terms, rows, lens, tile,
                         n_chunks, bounds, counters, out)
    if rows.size < queries.n_queries:
        rest = np.flatnonzero(~tiled)
        lens = np.diff(queries.indptr)[rest]
        q_indptr = np.zeros(rest.size + 1, dtype=np.int64)
        np.cumsum(lens, out=q_indptr[1:])
        pos = np.arange(int(q_indptr[-1]), dtype=np.int64) + np.repeat(queries.indptr[rest] - q_indptr[:-1], lens)
        sub = QueryBatch(indptr=q_indptr, terms=queries.terms[pos])
        ids = np.full((rest.size, k), -1, dtype=np.int64)
        scores = np.full((rest.size, k), -np.inf, dtype=np.float64)
        _score_table(postings, sub, params, k, idf, norm, f1, d1, f2, d2, df, ids, scores)
        out.ids[rest] = ids
        out.scores[rest] = scores
    return out


# A term's contributions go into the batch's table (``_hot_table``) when at least this many of the batch's tiled
# queries hold it: writing one costs ~5 ns (page faults included) and each read of it instead of the inline
# expression saves ~0.6 ns (1M documents, one thread).
HOT_MIN_QUERIES = 16


def _hot_table(postings: Postings, df: np.ndarray, q_terms: np.ndarray, f1, d1, f2, d2, idf, dlc, ntab, k1p1: float):
    """(table, q_shift): the contributions (``_posting_table``: the one expression) of the terms the tiled
    queries q_terms share most, computed once for the batch; q_shift[i] (aligned with q_terms) is the offset
    with table[p + q_shift[i]] = posting p's contribution, or ``_tiles.NO_TABLE`` for a term left out.

    A term is kept when at least HOT_MIN_QUERIES queries hold it, most-shared first, while the table stays within
    TABLE_BUDGET_BYTES (a 20,000-query batch over 1M documents: 219 terms in 256 MB carry 82% of the postings
    its queries read). One query, or a batch of unrelated ones, builds nothing and pays nothing."""
    q_shift = np.full(q_terms.shape[0], NO_TABLE, dtype=np.int64)
    if q_terms.shape[0] < HOT_MIN_QUERIES:  # no term can be held by that many queries
        return _NO_TABLE_ARRAY, q_shift
    uses = np.bincount(q_terms, minlength=postings.n_terms)
    hot = np.flatnonzero(uses >= HOT_MIN_QUERIES)
    hot = hot[np.argsort(-uses[hot], kind="stable")]  # most-shared first, then while the budget holds
    hot = np.sort(hot[np.cumsum(df[hot]) <= TABLE_BUDGET_BYTES // 8])
    if hot.size == 0:
        return _NO_TABLE_ARRAY, q_shift
    toff = np.zeros(hot.shape[0] + 1, dtype=np.int64)
    np.cumsum(df[hot], out=toff[1:])
    table = _anonymous_f64(int(toff[-1]))
    _posting_table(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, dlc, ntab, k1p1, hot, toff,
                   table)
    shift_of = np.full(postings.n_terms, NO_TABLE, dtype=np.int64)
    shift_of[hot] = toff[:-1] - postings.indptr[hot]
    return table, shift_of[q_terms]


_NO_TABLE_ARRAY = np.zeros(1, dtype=np.float64)


def _anonymous_f64(n: int) -> np.ndarray:
    """A writable float64 array of n in anonymous memory of ordinary 4 KB pages, unmapped with the array.

    numpy asks for transparent huge pages on large allocations; where the kernel's THP defrag is "madvise"
    (these hosts), the first touch of such pages may wait on memory compaction: the same 256 MB table took
    0.08-0.6 s to fill right after a batch, against 0.17-0.19 s every time in 4 KB pages (bench/LOG.md)."""
    buf = mmap.mmap(-1, max(n, 1) * 8)
    return np.frombuffer(buf, dtype=np.float64, count=n)


def _score_tiled(postings: Postings, params: BM25Params, k: int, idf, norm, f1, d1, f2, d2, df, q_indptr, q_terms,
                 rows, lens, tile: int, n_chunks: int, bounds, counters, out: TopK) -> None:
    """The dense queries ``rows`` (their terms q_terms[q_indptr[i]:q_indptr[i + 1]]) into their rows of ``out``:
    MaxScore when k is small next to the corpus, else the tiles (a heap, or collection past a threshold)."""
    k1p1 = float(params.k1 + 1.0)
    dlc, ntab = _compact_norm(postings, params, norm)
    if k * _PRUNE_DOCS_PER_K <= postings.n_docs:
        from chitragupta.kernels._maxscore import N_COUNTERS, term_bounds, topk_maxscore

        if bounds is None:
            bounds = np.full(postings.n_terms, -1.0)
        elif bounds.shape != (postings.n_terms,) or bounds.dtype != np.float64:
            raise ValueError(f"bounds must be float64 of shape ({postings.n_terms},), got {bounds.dtype} "
                             f"{bounds.shape}")
        need = np.unique(q_terms)
        need = need[bounds[need] < 0.0]
        if need.size:
            term_bounds(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm, k1p1, need,
                        bounds)
        per_chunk = np.zeros((n_chunks, N_COUNTERS), dtype=np.int64)
        topk_maxscore(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1,
                      q_indptr, q_terms, rows, int(k), int(_PRUNE_TILE), int(_PRUNE_FIRST_TILE), int(lens.max()),
                      n_chunks, out.ids, out.scores, per_chunk, bounds)
        if counters is not None:
            counters += per_chunk.sum(axis=0)
        return
    # The unpruned tiles read every posting of every query: the terms many queries share are read from a table
    # (MaxScore reads about a third of them, mostly of the rarer terms: a table measured slower there).
    table, q_shift = _hot_table(postings, df, q_terms, f1, d1, f2, d2, idf, dlc, ntab, k1p1)
    if k >= _COLLECT_MIN_K:
        _topk_tiled_collect(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm, dlc, ntab,
                            k1p1, table, q_shift, q_indptr, q_terms, rows, int(k), tile, int(lens.max()), n_chunks,
                            out.ids, out.scores)
    else:
        _topk_tiled(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm, dlc, ntab, k1p1, table,
                    q_shift, q_indptr, q_terms, rows, int(k), tile, int(lens.max()), n_chunks, out.ids, out.scores)


def _score_table(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, idf, norm, f1, d1, f2, d2,
                 df, out_ids, out_scores) -> None:
    """The posting-table path: rows of out_ids/out_scores (filled with -1 / -inf) get each query's top k."""
    budget = TABLE_BUDGET_BYTES // 8
    dlc, ntab = _compact_norm(postings, params, norm)
    term_cum = np.zeros(queries.terms.shape[0] + 1, dtype=np.int64)
    np.cumsum(df[queries.terms], out=term_cum[1:])
    cum_postings = term_cum[queries.indptr]
    slot_of = np.empty(postings.n_terms, dtype=np.int64)
    q0 = 0
    while q0 < queries.n_queries:
        # Grow the chunk of queries while its distinct terms' postings fit the table budget.
        q1 = _chunk_end(cum_postings, q0, budget)
        lo, hi = queries.indptr[q0], queries.indptr[q1]
        terms = queries.terms[lo:hi]
        uterms = np.sort(terms).astype(np.int64)
        if uterms.size:  # distinct (np.unique's hash path is slower than a sort here)
            uterms = uterms[np.concatenate(([True], uterms[1:] != uterms[:-1]))]
        toff = np.zeros(uterms.shape[0] + 1, dtype=np.int64)
        np.cumsum(df[uterms], out=toff[1:])
        table = np.empty(int(toff[-1]), dtype=np.float64)
        _posting_table(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, dlc, ntab,
                       float(params.k1 + 1.0), uterms, toff, table)
        slot_of[uterms] = np.arange(uterms.shape[0], dtype=np.int64)
        q_slots = slot_of[terms]
        q_indptr = (queries.indptr[q0:q1 + 1] - lo).astype(np.int64)
        n_chunks = max(1, min(q1 - q0, numba.get_num_threads()))
        _topk_from_table(postings.indptr, postings.indices, uterms, toff, table, q_indptr, q_slots, int(k),
                         postings.n_docs, n_chunks, out_ids[q0:q1], out_scores[q0:q1])
        q0 = q1


def _chunk_end(cum_postings: np.ndarray, q0: int, budget: int) -> int:
    """The end of the query chunk starting at q0 whose summed postings stay within ``budget``
    (always at least one query; summed postings bound the distinct terms' postings).
    ``cum_postings``: (n_queries + 1,) running total of each query's postings."""
    end = int(np.searchsorted(cum_postings, cum_postings[q0] + budget, side="right")) - 1
    return max(q0 + 1, end)
