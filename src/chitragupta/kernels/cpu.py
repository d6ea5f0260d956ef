"""numba backend: a batch of queries scored in parallel over the term-major CSR, exact top-k per query.

For a batch, each posting (t, d, tf) of the batch's distinct terms gets its contribution once:

    tf'      = tf + d1 * f1 + d2 * f2            (d = weight - 1; a zero delta is never read)
    c(t, d)  = idf[t] * tf' * (k1 + 1) / (tf' + norm[d]),    norm[d] = k1 * (1 - b + b * dl[d] / avgdl)

then, in parallel over queries, acc[d] += c(t, d) over the query's distinct terms in ascending id, and
the k best touched documents by (score desc, id asc) come out of a bounded heap. k1, b and the field
weights are applied at query time; nothing is baked into the index. The accumulation order is the
reference's, so scores agree to the last bit. Compiled with numba's on-disk cache.

A query with an ``allowed`` mask (query syntax, filters) is scored by ``_topk_masked``: the same
contributions (``_contrib``) added in the same term order, skipping the postings of disallowed documents,
and only the touched allowed documents offered to the heap -- so its hits are the unmasked ranking
restricted to the allowed set, same scores to the bit, and never a disallowed document however large k.
The queries of a batch without a mask take the path above unchanged.

Every kernel here compiles with ``error_model="numpy"``: numba's default checks every float division for a
zero divisor (to raise ZeroDivisionError), a compare and branch on each posting that also keeps the loops
scalar-serial. No divisor here can be zero -- a contribution divides by tf' + norm[d] only when tf' > 0,
and norm >= 0 -- so the quotients, and every score, have the same bits; only the check is gone.
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange

from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, allowed_rows, bm25_idf, length_norm

__all__ = ["score_topk"]


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


_BLOCK = 64  # the accumulators' blocks


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
def _block_max_of(acc, bmax, size):
    """bmax[i] = max(0, max of acc over block i of ``size`` documents); returns the number of blocks."""
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
def _posting_table(indptr, indices, tf, f1, d1, f2, d2, idf, norm, k1p1, uterms, toff, table):
    """BM25 contribution of every posting of the given distinct terms, computed once per batch.

    table[toff[j] + i] is the contribution of the i-th posting of term uterms[j]; 0 where tf' <= 0.
    """
    for j in prange(uterms.shape[0]):
        t = uterms[j]
        start = indptr[t]
        base = toff[j] - start
        w = idf[t]
        for p in range(start, indptr[t + 1]):
            table[base + p] = _contrib(tf, f1, d1, f2, d2, norm, w, k1p1, p, indices[p])


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
                # Unsigned offsets: no negative-index wraparound test in the inner loops.
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


def _score_allowed(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, allowed, idf,
                   norm) -> TopK:
    """``score_topk`` with masks: the unmasked queries as ever, the masked ones by ``_topk_masked``."""
    masks = allowed_rows(allowed, queries.n_queries, postings.n_docs)
    out = TopK.empty(queries.n_queries, k)
    held = np.fromiter((m is not None for m in masks), dtype=bool, count=len(masks))
    free = np.flatnonzero(~held)
    if free.size:
        got = score_topk(postings, _sub_batch(queries, free), params, k, idf=idf, norm=norm)
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


# Largest posting table built at once; a bigger batch is scored in query chunks.
TABLE_BUDGET_BYTES = 256 * 1024 * 1024


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               *, idf: np.ndarray | None = None, norm: np.ndarray | None = None,
               allowed=None) -> TopK:
    """Top-k of every query, in parallel over queries. Same contract as ``chitragupta.kernels.reference.score_topk``.

    The contribution of each posting of the batch's distinct terms is computed once per batch (k1, b
    and field weights applied here, at query time), then every query sums its terms' contributions in
    ascending term order -- the reference's order, so scores agree to the last bit.
    ``idf`` and ``norm`` may be passed precomputed (the engine caches them per index and (k1, b)).
    ``allowed`` (``kernels.types.allowed_rows``): per query, the only documents that may be hits
    (``_topk_masked``; the module docstring).
    """
    if allowed is not None:
        return _score_allowed(postings, queries, params, k, allowed, idf, norm)
    out = TopK.empty(queries.n_queries, k)
    if queries.n_queries == 0 or postings.n_docs == 0 or queries.terms.shape[0] == 0:
        return out
    idf, norm = _idf_norm(postings, params, idf, norm)
    f1, d1, f2, d2 = _field_args(postings, params)
    _score_table(postings, queries, params, k, idf, norm, f1, d1, f2, d2, np.diff(postings.indptr), out.ids,
                 out.scores)
    return out


def _score_table(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, idf, norm, f1, d1, f2, d2,
                 df, out_ids, out_scores) -> None:
    """The posting-table path: rows of out_ids/out_scores (filled with -1 / -inf) get each query's top k."""
    budget = TABLE_BUDGET_BYTES // 8
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
        _posting_table(postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2, idf, norm,
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
