"""The numpy backend: BM25 and exact top-k for a batch of queries as array operations, no JIT. The truth
every compiled backend is tested against, and the scorer of every batch too small to be worth loading
them (``kernels.dispatch.compiled``).

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    tf'(t,d) = tf(t,d) + sum_f (w_f - 1) * tf_f(t,d)
    score    = sum over distinct query terms t of idf(t) * tf' * (k1 + 1) / (tf' + k1 * (1 - b + b * dl / avgdl))

A batch is a sparse product: the postings of its distinct terms are gathered once and each one's BM25
weight computed as arrays (k1, b and the field weights applied here, at query time); then, for a block of
queries, every (query, posting) pair is added into a dense (block x n_docs) score matrix by one
``np.bincount``, which adds in input order: a document's score is the sum over the query's terms in
ascending id, from 0.0, as every backend adds them, so the scores agree to the last bit. Each row's top
k comes from one partition (its k-th score) and one sort of what reaches it. Blocks keep the matrix
within ``BLOCK_BYTES`` and the pairs within ``BLOCK_POSTINGS``. (scipy's sparse product adds in the same
order, but importing ``scipy.sparse`` costs about the CPU of importing numba: this path is for the batches
that should pay for neither.)

A batch reads only what it needs: the posting slices of its terms and the lengths of the documents they
name, so one query over a memory-mapped million-document index touches a few of its pages. Nothing in a
slice is trusted: before a term's postings are used, its document ids are checked to be strictly
ascending inside [0, n_docs), its counts positive and its field counts within [0, tf] (``PostingsDamaged``
otherwise), and numpy bounds-checks every gather, so a damaged index is an error here, never a wrong read.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, allowed_rows, bm25_idf, length_norm

__all__ = ["score_topk", "score_dense", "score_pairs", "term_docs", "PostingsDamaged", "BLOCK_BYTES",
           "BLOCK_POSTINGS"]

BLOCK_BYTES = 64 << 20  # a block's dense score matrix
BLOCK_POSTINGS = 1 << 22  # (query, posting) pairs added at once (about 24 bytes each in temporaries)


class PostingsDamaged(ValueError):
    """A term's postings are not what an index holds (``term``: its id); the caller rebuilds the index."""

    def __init__(self, term: int, what: str):
        super().__init__(f"the postings of term {term} {what}")
        self.term = term


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, ascending (np.unique imports numpy.ma: tens of milliseconds of a cold
    query)."""
    a = np.sort(np.asarray(a, dtype=np.int64))
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def _ranges(lo: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The positions lo[i] .. lo[i] + lens[i] - 1 of every i, concatenated."""
    total = int(lens.sum())
    starts = np.zeros(lens.shape[0], dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(lo - starts, lens)


def _gather(postings: Postings, terms: np.ndarray, active) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The postings of ``terms`` (distinct, ascending), checked: (lens, docs int64, tf' float64, raw tf > 0);
    each term's postings are ``lens[i]`` consecutive entries, in the order of ``terms``."""
    n_terms, nnz, n_docs = postings.n_terms, postings.nnz, postings.n_docs
    if terms.size and (terms[0] < 0 or terms[-1] >= n_terms):
        t = int(terms[(terms < 0) | (terms >= n_terms)][0])
        raise PostingsDamaged(t, f"are outside the vocabulary of {n_terms} terms")
    indptr = np.asarray(postings.indptr)
    lo, hi = indptr[terms].astype(np.int64), indptr[terms + 1].astype(np.int64)
    bad = (lo < 0) | (hi < lo) | (hi > nnz)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PostingsDamaged(int(terms[i]), f"span {lo[i]}:{hi[i]}, outside the {nnz} postings")
    lens = hi - lo
    pos = _ranges(lo, lens)
    docs = np.asarray(postings.indices)[pos].astype(np.int64)
    tf_raw = np.asarray(postings.tf)[pos]
    wrong = (docs < 0) | (docs >= n_docs) | (tf_raw <= 0)
    if docs.size > 1:
        down = np.zeros(docs.size, dtype=bool)
        down[1:] = docs[1:] <= docs[:-1]
        starts = np.cumsum(lens) - lens
        down[starts[starts < docs.size]] = False  # (a term's first posting has no previous one)
        wrong |= down
    if wrong.any():
        raise PostingsDamaged(_term_at(terms, lens, wrong), f"are out of order, outside the document range "
                                                            f"(0..{n_docs - 1}) or hold a count <= 0")
    tf = tf_raw.astype(np.float64)
    for name, delta in active:
        f = np.asarray(postings.fields[name])[pos]
        off = (f < 0) | (f > tf_raw)
        if off.any():
            raise PostingsDamaged(_term_at(terms, lens, off), f"hold a {name} count outside 0..tf")
        tf = tf + delta * f.astype(np.float64)
    return lens, docs, tf, tf > 0


def _term_at(terms: np.ndarray, lens: np.ndarray, wrong: np.ndarray) -> int:
    """The term whose postings hold the first True of ``wrong``."""
    return int(terms[np.searchsorted(np.cumsum(lens), int(np.flatnonzero(wrong)[0]), side="right")])


def _weights(postings: Postings, terms: np.ndarray, params: BM25Params):
    """(lens, docs, weights, tf' > 0) of the postings of ``terms``: each one's contribution to a score,
    ``idf * tf' * (k1 + 1) / (tf' + norm)`` (0 where tf' is 0), the kernels' expression and operand order."""
    lens, docs, tf, positive = _gather(postings, terms, params.active_fields())
    idf = np.repeat(bm25_idf(lens, postings.n_docs), lens)
    norm = length_norm(np.asarray(postings.doc_len)[docs], postings.avgdl(), params.k1, params.b)
    with np.errstate(divide="ignore", invalid="ignore"):  # (tf' = 0 with k1 = 0: 0 / 0, set to 0 below)
        w = idf * tf * (params.k1 + 1.0) / (tf + norm)
    w[~positive] = 0.0
    return lens, docs, w, positive


def term_docs(postings: Postings, t: int) -> np.ndarray:
    """The ascending document ids of term ``t``'s postings, checked as a scored slice is."""
    return _gather(postings, np.asarray([int(t)], dtype=np.int64), ())[1]


def score_dense(postings: Postings, terms: np.ndarray, params: BM25Params) -> tuple[np.ndarray, np.ndarray]:
    """Scores of one query against every document.

    Returns ``(scores, matched)``: (n_docs,) float64 and (n_docs,) bool (the document holds a query term).
    """
    terms = _distinct(terms)
    _lens, docs, w, _pos = _weights(postings, terms, params)
    # docs in term order: bincount adds each document's contributions in ascending term id
    return (np.bincount(docs, weights=w, minlength=postings.n_docs),
            np.bincount(docs, minlength=postings.n_docs) > 0)


def _select(dense: np.ndarray, k: int, ids: np.ndarray, scores: np.ndarray) -> None:
    """Each row's best k of ``dense`` (hits: score > 0) by score descending, then id ascending, into the
    rows of ``ids``/``scores`` (filled with -1 / -inf)."""
    n_docs = dense.shape[1]
    kk = min(k, n_docs)
    thr = np.partition(dense, n_docs - kk, axis=1)[:, n_docs - kk] if kk < n_docs else np.zeros(dense.shape[0])
    thr = np.maximum(thr, np.nextafter(0.0, 1.0))  # every hit is > 0; the scores are never negative
    r, c = np.nonzero(dense >= thr[:, None])  # the k-th score's ties included: sorted out below
    v = dense[r, c]
    o = np.lexsort((c, -v, r))
    r, c, v = r[o], c[o], v[o]
    first = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=dense.shape[0]), out=first[1:])
    rank = np.arange(r.shape[0]) - first[r]
    keep = rank < k
    ids[r[keep], rank[keep]] = c[keep]
    scores[r[keep], rank[keep]] = v[keep]


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int, allowed=None) -> TopK:
    """Top-k of every query; see :class:`chitragupta.kernels.types.TopK` for the layout and tie-break.
    ``allowed`` (``kernels.types.allowed_rows``): per query, the only documents that may be hits."""
    masks = allowed_rows(allowed, queries.n_queries, postings.n_docs)
    out = TopK.empty(queries.n_queries, k)
    n_docs = postings.n_docs
    if queries.n_queries == 0 or n_docs == 0 or queries.terms.shape[0] == 0:
        return out
    q_terms = np.asarray(queries.terms, dtype=np.int64)
    terms = _distinct(q_terms)
    lens, docs, w, _pos = _weights(postings, terms, params)
    starts = np.zeros(terms.shape[0], dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    slot = np.searchsorted(terms, q_terms)  # each query term's place among the batch's terms
    pairs = np.zeros(slot.shape[0] + 1, dtype=np.int64)  # running count of (query, posting) pairs
    np.cumsum(lens[slot], out=pairs[1:])
    per_query = pairs[queries.indptr]
    rows_at_once = max(1, BLOCK_BYTES // (8 * n_docs))
    q0 = 0
    while q0 < queries.n_queries:
        q1 = min(queries.n_queries, q0 + rows_at_once,
                 max(q0 + 1, int(np.searchsorted(per_query, per_query[q0] + BLOCK_POSTINGS, side="right")) - 1))
        a, b = int(queries.indptr[q0]), int(queries.indptr[q1])
        s = slot[a:b]
        n = lens[s]
        row = np.repeat(np.arange(q1 - q0, dtype=np.int64) * n_docs, np.diff(queries.indptr[q0:q1 + 1]))
        pos = _ranges(starts[s], n)  # each query's terms in ascending id, each term's postings in order
        dense = np.bincount(np.repeat(row, n) + docs[pos], weights=w[pos],
                            minlength=(q1 - q0) * n_docs).reshape(q1 - q0, n_docs)
        for q in range(q0, q1):
            if masks[q] is not None:
                dense[q - q0, ~masks[q]] = 0.0
        _select(dense, k, out.ids[q0:q1], out.scores[q0:q1])
        q0 = q1
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
    terms = _distinct(np.asarray(queries.terms)[at])
    inverse = np.searchsorted(terms, np.asarray(queries.terms)[at])
    scores, held, total = (np.zeros(q.shape[0]) for _ in range(3))
    if not terms.size:
        return scores, held, total
    avgdl, k1p1, active = postings.avgdl(), params.k1 + 1.0, params.active_fields()
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(terms.size + 1))
    for j, t in enumerate(terms.tolist()):
        sel = pair[order[bounds[j]:bounds[j + 1]]]
        _lens, docs, tf, _pos = _gather(postings, np.asarray([t], dtype=np.int64), active)
        idf = bm25_idf(np.asarray([docs.size]), postings.n_docs)[0]
        np.add.at(total, sel, idf)
        pos = np.minimum(np.searchsorted(docs, d[sel]), max(docs.size - 1, 0))
        found = (docs[pos] == d[sel]) & (tf[pos] > 0) if docs.size else np.zeros(sel.size, dtype=bool)
        sel, w = sel[found], tf[pos[found]]
        norm = length_norm(np.asarray(postings.doc_len[d[sel]]), avgdl, params.k1, params.b)
        np.add.at(scores, sel, idf * w * k1p1 / (w + norm))
        np.add.at(held, sel, idf)
    return scores, held, total
