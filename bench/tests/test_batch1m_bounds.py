"""``python -m bench batch1m --parts bounds``: what block-max bounds could prune, counted by a numba pass
(``bench.batch1m.block_coverage``) -- checked here against the same counts taken by plain numpy."""

from __future__ import annotations

import numpy as np
import pytest
from bench.batch1m import block_coverage
from chitragupta.kernels import reference
from chitragupta.kernels.types import (
    BM25Params,
    Postings,
    QueryBatch,
    bm25_idf,
    length_norm,
)


def small_corpus(seed, n_docs=700, n_terms=60):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_terms + 1)
    weights /= weights.sum()
    dense = np.zeros((n_terms, n_docs), dtype=np.int32)
    for d in range(n_docs):
        np.add.at(dense[:, d], rng.choice(n_terms, int(rng.integers(2, 30)), p=weights), 1)
    t, d = np.nonzero(dense)  # row-major: term by term, documents ascending
    tf = dense[t, d]
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=n_terms), out=indptr[1:])
    title = (tf * rng.random(tf.shape[0])).astype(np.int32)
    return Postings(indptr, d.astype(np.int32), tf, dense.sum(axis=0).astype(np.int32), {"title": title})


def numpy_coverage(p, q, theta, idf, norm, params, blocks):
    """The counts ``block_coverage`` returns, by numpy: one query at a time, every posting's contribution."""
    margin = 1.0 + 1e-9
    out = np.zeros((q.n_queries, 2 + 4 * len(blocks)), dtype=np.int64)
    for i in range(q.n_queries):
        terms = q.terms[q.indptr[i]:q.indptr[i + 1]]
        th = theta[i] / margin
        per_term = []
        for t in terms:
            s, e = p.indptr[t], p.indptr[t + 1]
            f = p.tf[s:e].astype(np.float64)
            for name, delta in params.active_fields():
                f = f + delta * p.fields[name][s:e]
            docs = p.indices[s:e]
            c = np.where(f > 0.0, idf[t] * f * (params.k1 + 1.0) / (f + norm[docs]), 0.0)
            per_term.append((docs, c))
        out[i, 0] = sum(docs.size for docs, _ in per_term)

        def essential(ub, counts):
            order = np.argsort(ub, kind="stable")
            s, ne = 0.0, 0
            while ne < len(ub) and (s + ub[order[ne]]) * margin < th:
                s += ub[order[ne]]
                ne += 1
            return int(counts[order[ne:]].sum()), ne, order

        g = np.array([c.max(initial=0.0) for _, c in per_term])
        sizes = np.array([docs.size for docs, _ in per_term])
        ess_g, ne, order = essential(g, sizes)
        out[i, -1] = ess_g + (sizes[order[ne - 1]] if 0 < ne < len(g) else 0)
        for j, b in enumerate(blocks):
            nb = -(-p.n_docs // b)
            bm = np.zeros((len(per_term), nb))
            cnt = np.zeros((len(per_term), nb), dtype=np.int64)
            for r, (docs, c) in enumerate(per_term):
                np.maximum.at(bm[r], docs // b, c)
                np.add.at(cnt[r], docs // b, 1)
            reach = bm.sum(axis=0) * margin >= th
            out[i, 1 + 4 * j] = cnt[:, reach].sum()
            out[i, 2 + 4 * j] = reach.sum()
            out[i, 3 + 4 * j] = ess_g
            out[i, 4 + 4 * j] = sum(essential(bm[:, x], cnt[:, x])[0] for x in range(nb))
    return out


@pytest.mark.parametrize("params", [BM25Params(), BM25Params(k1=2.0, b=1.0),
                                    BM25Params(k1=1.2, b=0.5, field_weights=(("title", 3.0),))])
def test_block_coverage_counts_what_numpy_counts(params):
    p = small_corpus(5)
    rng = np.random.default_rng(6)
    q = QueryBatch.from_lists([rng.choice(p.n_terms, int(rng.integers(1, 8)), replace=False) for _ in range(40)])
    idf = bm25_idf(p.df(), p.n_docs)
    norm = length_norm(p.doc_len, p.avgdl(), params.k1, params.b)
    blocks = [16, 64, 256]
    for k in (1, 10):
        top = reference.score_topk(p, q, params, k)
        theta = np.where(np.isfinite(top.scores[:, k - 1]), top.scores[:, k - 1], 0.0)
        got = block_coverage(p, q, theta, idf, norm, params, blocks)
        want = numpy_coverage(p, q, theta, idf, norm, params, blocks)
        np.testing.assert_array_equal(got, want)
        # not a vacuous check: some block or term is pruned, and nothing beyond a query's postings is read
        assert (got[:, 1] < got[:, 0]).any() and (got[:, 4] < got[:, 0]).any()
        assert (got[:, 1:] <= got[:, :1]).all()
    # theta 0: every block reaches it, every term is essential
    got = block_coverage(p, q, np.zeros(q.n_queries), idf, norm, params, blocks)
    for j in range(len(blocks)):
        assert (got[:, 1 + 4 * j] == got[:, 0]).all() and (got[:, 4 + 4 * j] == got[:, 0]).all()


def test_block_sizes_must_nest():
    p = small_corpus(7, n_docs=50, n_terms=10)
    q = QueryBatch.from_lists([np.array([0, 1])])
    params = BM25Params()
    with pytest.raises(ValueError, match="multiples"):
        block_coverage(p, q, np.zeros(1), bm25_idf(p.df(), p.n_docs),
                       length_norm(p.doc_len, p.avgdl(), params.k1, params.b), params, [16, 24])
