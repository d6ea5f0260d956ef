"""numba backend: a batch of queries scored in parallel over the term-major CSR, exact top-k per query.

Per query q, over its distinct terms t (ascending id) and t's postings (t, d, tf):

    tf'      = tf + d1 * f1 + d2 * f2            (d = weight - 1; a zero delta is never read)
    acc[d]  += idf[t] * tf' * (k1 + 1) / (tf' + norm[d]),    norm[d] = k1 * (1 - b + b * dl[d] / avgdl)

then the k best touched documents by (score desc, id asc) through a bounded heap. The accumulation order
is the reference's, so scores agree to the last bit. Compiled with numba's on-disk cache.
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange

from kernels.types import BM25Params, Postings, QueryBatch, TopK, bm25_idf, length_norm

__all__ = ["score_topk", "warmup"]


@njit(cache=True, inline="always")
def _worse(s_a, i_a, s_b, i_b):
    """True when hit a ranks below hit b: lower score, or equal score and larger id."""
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@njit(cache=True)
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


@njit(cache=True)
def _sift_up(hs, hi, pos):
    while pos > 0:
        parent = (pos - 1) // 2
        if _worse(hs[pos], hi[pos], hs[parent], hi[parent]):
            hs[pos], hs[parent] = hs[parent], hs[pos]
            hi[pos], hi[parent] = hi[parent], hi[pos]
            pos = parent
        else:
            return


@njit(cache=True)
def _select_into(acc, touched, m, k, hs, hi, out_ids, out_scores):
    """Write the best k of ``touched[:m]`` (positive scores only) into out rows, best first."""
    size = 0
    for j in range(m):
        d = touched[j]
        s = acc[d]
        if not s > 0.0:
            continue
        if size < k:
            hs[size] = s
            hi[size] = d
            _sift_up(hs, hi, size)
            size += 1
        elif _worse(hs[0], hi[0], s, d):
            hs[0] = s
            hi[0] = d
            _sift_down(hs, hi, 0, size)
    # Pop worst-first into the tail of the output row.
    n = size
    while size > 0:
        size -= 1
        out_scores[size] = hs[0]
        out_ids[size] = hi[0]
        hs[0] = hs[size]
        hi[0] = hi[size]
        _sift_down(hs, hi, 0, size)
    return n


@njit(parallel=True, cache=True)
def _score_topk_kernel(indptr, indices, tf, f1, d1, f2, d2, idf, norm, k1p1,
                       q_indptr, q_terms, k, n_chunks, out_ids, out_scores):
    """Fill out_ids/out_scores (n_queries, k); rows arrive pre-filled with -1 / -inf.

    indptr int64[:], indices int32[:], tf int32[:], f1/f2 int32[:] (read only when d1/d2 != 0),
    idf float64[:], norm float64[:], q_indptr int64[:], q_terms int32[:].
    """
    n_docs = norm.shape[0]
    n_q = q_indptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n_docs, dtype=np.float64)
        stamp = np.zeros(n_docs, dtype=np.int64)
        touched = np.empty(n_docs, dtype=np.int64)
        hs = np.empty(k, dtype=np.float64)
        hi = np.empty(k, dtype=np.int64)
        lo = (c * n_q) // n_chunks
        hi_q = ((c + 1) * n_q) // n_chunks
        for q in range(lo, hi_q):
            m = 0
            tag = q + 1
            for j in range(q_indptr[q], q_indptr[q + 1]):
                t = q_terms[j]
                w = idf[t]
                for p in range(indptr[t], indptr[t + 1]):
                    d = indices[p]
                    f = np.float64(tf[p])
                    if d1 != 0.0:
                        f += d1 * f1[p]
                    if d2 != 0.0:
                        f += d2 * f2[p]
                    if stamp[d] != tag:
                        stamp[d] = tag
                        acc[d] = 0.0
                        touched[m] = d
                        m += 1
                    if f > 0.0:
                        acc[d] += w * f * k1p1 / (f + norm[d])
            _select_into(acc, touched, m, k, hs, hi, out_ids[q], out_scores[q])


_EMPTY_I32 = np.zeros(0, dtype=np.int32)


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


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               *, idf: np.ndarray | None = None, norm: np.ndarray | None = None) -> TopK:
    """Top-k of every query, in parallel over queries. Same contract as ``kernels.reference.score_topk``.

    ``idf`` and ``norm`` may be passed precomputed (the engine caches them per index and (k1, b)).
    """
    out = TopK.empty(queries.n_queries, k)
    if queries.n_queries == 0 or postings.n_docs == 0:
        return out
    if idf is None:
        idf = bm25_idf(postings.df(), postings.n_docs)
    if norm is None:
        norm = length_norm(postings.doc_len, postings.avgdl(), params.k1, params.b)
    f1, d1, f2, d2 = _field_args(postings, params)
    n_chunks = max(1, min(queries.n_queries, numba.get_num_threads()))
    _score_topk_kernel(
        postings.indptr, postings.indices, postings.tf, f1, d1, f2, d2,
        idf, norm, float(params.k1 + 1.0),
        queries.indptr, queries.terms, int(k), n_chunks, out.ids, out.scores,
    )
    return out


def warmup() -> None:
    """Compile (or load from numba's cache) the kernel on a tiny input: an explicit call, never on import."""
    p = Postings(
        indptr=np.array([0, 1], dtype=np.int64), indices=np.array([0], dtype=np.int32),
        tf=np.array([1], dtype=np.int32), doc_len=np.array([1], dtype=np.int32),
    )
    q = QueryBatch(indptr=np.array([0, 1], dtype=np.int64), terms=np.array([0], dtype=np.int32))
    score_topk(p, q, BM25Params(), 1)
