"""The slow truth: BM25 and exact top-k in plain numpy, one query at a time.

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    tf'(t,d) = tf(t,d) + sum_f (w_f - 1) * tf_f(t,d)
    score    = sum over distinct query terms t of idf(t) * tf' * (k1 + 1) / (tf' + k1 * (1 - b + b * dl / avgdl))

Every faster backend is tested against this one.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.topk import topk_from_dense
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, bm25_idf, length_norm

__all__ = ["score_topk", "score_dense"]


def score_dense(postings: Postings, terms: np.ndarray, params: BM25Params) -> tuple[np.ndarray, np.ndarray]:
    """Scores of one query against every document.

    Returns ``(scores, matched)``: (n_docs,) float64 and (n_docs,) bool (the document holds a query term).
    """
    idf = bm25_idf(postings.df(), postings.n_docs)
    norm = length_norm(postings.doc_len, postings.avgdl(), params.k1, params.b)
    k1p1 = params.k1 + 1.0
    scores = np.zeros(postings.n_docs, dtype=np.float64)
    matched = np.zeros(postings.n_docs, dtype=bool)
    active = params.active_fields()
    for t in terms:
        lo, hi = postings.indptr[t], postings.indptr[t + 1]
        docs = postings.indices[lo:hi]
        tf = postings.tf[lo:hi].astype(np.float64)
        for name, delta in active:
            tf = tf + delta * postings.fields[name][lo:hi].astype(np.float64)
        positive = tf > 0
        contrib = np.zeros_like(tf)
        contrib[positive] = idf[t] * tf[positive] * k1p1 / (tf[positive] + norm[docs[positive]])
        scores[docs] += contrib
        matched[docs] = True
    return scores, matched


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int) -> TopK:
    """Top-k of every query; see :class:`chitragupta.kernels.types.TopK` for the layout and tie-break."""
    out = TopK.empty(queries.n_queries, k)
    for q in range(queries.n_queries):
        terms = queries.terms[queries.indptr[q] : queries.indptr[q + 1]]
        if terms.shape[0] == 0 or postings.n_docs == 0:
            continue
        scores, matched = score_dense(postings, terms, params)
        ids, vals = topk_from_dense(scores, matched & (scores > 0), k)
        out.ids[q, : ids.shape[0]] = ids
        out.scores[q, : ids.shape[0]] = vals
    return out
