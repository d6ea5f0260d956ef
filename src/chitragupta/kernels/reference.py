"""The numpy backend: BM25 and exact top-k in plain numpy, one query at a time. The truth every faster
backend is tested against, and the scorer of a single interactive query (no JIT to load).

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    tf'(t,d) = tf(t,d) + sum_f (w_f - 1) * tf_f(t,d)
    score    = sum over distinct query terms t of idf(t) * tf' * (k1 + 1) / (tf' + k1 * (1 - b + b * dl / avgdl))

A query reads only what it needs: the posting slices of its terms, their idf, and the length norm of
the documents those slices name -- so one query over a memory-mapped million-document index touches a
few of its pages, not every array. The arithmetic is element for element what the numba kernels do
(same expression, same operand order, terms added in ascending id from 0.0), so the scores agree to the
last bit.

Nothing in a slice is trusted: before a term's postings are used, its document ids are checked to be
strictly ascending inside [0, n_docs), its counts positive and its field counts within [0, tf]
(``PostingsDamaged`` otherwise). numpy bounds-checks every gather as well, so a damaged index is an
error here, never a wrong read -- which is why this path needs no open-time pass over all postings.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.topk import topk_from_dense
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, allowed_rows, bm25_idf, length_norm

__all__ = ["score_topk", "score_dense", "score_pairs", "term_docs", "PostingsDamaged"]


class PostingsDamaged(ValueError):
    """A term's postings are not what an index holds (``term``: its id); the caller rebuilds the index."""

    def __init__(self, term: int, what: str):
        super().__init__(f"the postings of term {term} {what}")
        self.term = term


def _slice(postings: Postings, t: int, active) -> tuple[np.ndarray, np.ndarray]:
    """Term t's (documents, weighted tf as float64), checked."""
    n_terms = postings.n_terms
    if not 0 <= t < n_terms:
        raise PostingsDamaged(t, f"are outside the vocabulary of {n_terms} terms")
    lo, hi = int(postings.indptr[t]), int(postings.indptr[t + 1])
    if not 0 <= lo <= hi <= postings.nnz:
        raise PostingsDamaged(t, f"span {lo}:{hi}, outside the {postings.nnz} postings")
    docs = np.asarray(postings.indices[lo:hi])
    tf_raw = np.asarray(postings.tf[lo:hi])
    if docs.size and (docs[0] < 0 or docs[-1] >= postings.n_docs or (tf_raw <= 0).any()
                      or (docs.size > 1 and (docs[1:] <= docs[:-1]).any())):
        raise PostingsDamaged(t, f"are out of order, outside the document range (0..{postings.n_docs - 1}) "
                                 "or hold a count <= 0")
    tf = tf_raw.astype(np.float64)
    for name, delta in active:
        f = np.asarray(postings.fields[name][lo:hi])
        if (f < 0).any() or (f > tf_raw).any():
            raise PostingsDamaged(t, f"hold a {name} count outside 0..tf")
        tf = tf + delta * f.astype(np.float64)
    return docs, tf


def term_docs(postings: Postings, t: int) -> np.ndarray:
    """The ascending document ids of term ``t``'s postings, checked as a scored slice is."""
    docs, _tf = _slice(postings, int(t), ())
    return docs.astype(np.int64)


def _add_query(postings: Postings, terms: np.ndarray, params: BM25Params, avgdl: float,
               acc: np.ndarray, matched: np.ndarray) -> None:
    """acc[d] += each term's contribution (terms in the order given), matched[d] set for every posting."""
    n = postings.n_docs
    k1p1 = params.k1 + 1.0
    active = params.active_fields()
    for t in terms.tolist():
        docs, tf = _slice(postings, int(t), active)
        if not docs.size:
            continue
        idf = bm25_idf(np.asarray([docs.size]), n)[0]
        norm = length_norm(np.asarray(postings.doc_len[docs]), avgdl, params.k1, params.b)
        matched[docs] = True
        positive = tf > 0
        if not positive.all():  # a field weight below 1 can take tf' to 0: no contribution
            docs, tf, norm = docs[positive], tf[positive], norm[positive]
        acc[docs] += idf * tf * k1p1 / (tf + norm)


def score_dense(postings: Postings, terms: np.ndarray, params: BM25Params) -> tuple[np.ndarray, np.ndarray]:
    """Scores of one query against every document.

    Returns ``(scores, matched)``: (n_docs,) float64 and (n_docs,) bool (the document holds a query term).
    """
    scores = np.zeros(postings.n_docs, dtype=np.float64)
    matched = np.zeros(postings.n_docs, dtype=bool)
    _add_query(postings, np.asarray(terms), params, postings.avgdl(), scores, matched)
    return scores, matched


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, allowed=None) -> TopK:
    """Top-k of every query; see :class:`chitragupta.kernels.types.TopK` for the layout and tie-break.
    ``allowed`` (``kernels.types.allowed_rows``): per query, the only documents that may be hits."""
    masks = allowed_rows(allowed, queries.n_queries, postings.n_docs)
    out = TopK.empty(queries.n_queries, k)
    if queries.n_queries == 0 or postings.n_docs == 0 or queries.terms.shape[0] == 0:
        return out
    avgdl = postings.avgdl()
    scores = np.zeros(postings.n_docs, dtype=np.float64)
    matched = np.zeros(postings.n_docs, dtype=bool)
    for q in range(queries.n_queries):
        terms = queries.terms[queries.indptr[q] : queries.indptr[q + 1]]
        if terms.shape[0] == 0:
            continue
        _add_query(postings, terms, params, avgdl, scores, matched)
        hit = matched & (scores > 0)
        if masks[q] is not None:
            hit &= masks[q]
        ids, vals = topk_from_dense(scores, hit, k)
        out.ids[q, : ids.shape[0]] = ids
        out.scores[q, : ids.shape[0]] = vals
        if q + 1 < queries.n_queries:
            scores.fill(0.0)
            matched.fill(False)
    return out


def score_pairs(postings: Postings, queries: QueryBatch, q: np.ndarray, d: np.ndarray,
                params: BM25Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BM25 scores of the pairs (query ``q[i]`` of ``queries``, document ``d[i]``), by ``score_dense``'s
    arithmetic (equal to rounding: a pair's terms are added in another order); each posting slice is read
    and checked once for the whole batch. Returns (scores, the idf of the query's terms the document
    holds, the idf of all the query's terms), each (n_pairs,) float64."""
    q, d = np.asarray(q, dtype=np.int64), np.asarray(d, dtype=np.int64)
    lens = np.diff(queries.indptr)[q]
    pair = np.repeat(np.arange(q.shape[0]), lens)
    at = np.repeat(queries.indptr[q] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    terms, inverse = np.unique(np.asarray(queries.terms)[at], return_inverse=True)
    scores, held, total = (np.zeros(q.shape[0]) for _ in range(3))
    if not terms.size:
        return scores, held, total
    avgdl, k1p1, active = postings.avgdl(), params.k1 + 1.0, params.active_fields()
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(terms.size + 1))
    for j, t in enumerate(terms.tolist()):
        sel = pair[order[bounds[j]:bounds[j + 1]]]
        docs, tf = _slice(postings, int(t), active)
        idf = bm25_idf(np.asarray([docs.size]), postings.n_docs)[0]
        np.add.at(total, sel, idf)
        pos = np.minimum(np.searchsorted(docs, d[sel]), max(docs.size - 1, 0))
        found = (docs[pos] == d[sel]) & (tf[pos] > 0) if docs.size else np.zeros(sel.size, dtype=bool)
        sel, w = sel[found], tf[pos[found]]
        norm = length_norm(np.asarray(postings.doc_len[d[sel]]), avgdl, params.k1, params.b)
        np.add.at(scores, sel, idf * w * k1p1 / (w + norm))
        np.add.at(held, sel, idf)
    return scores, held, total
