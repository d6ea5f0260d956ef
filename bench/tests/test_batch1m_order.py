"""``python -m bench batch1m --parts bounds --orders ...``: block coverage under a simulated document order
(``bench.batch1m.block_coverage``'s ``rank``) is the coverage of the index renumbered by that order --
checked against an index actually rebuilt in the new order."""

from __future__ import annotations

import numpy as np
import pytest
from bench.batch1m import ORDERS, block_coverage, doc_order
from chitragupta.kernels import reference
from chitragupta.kernels.types import (
    BM25Params,
    Postings,
    QueryBatch,
    bm25_idf,
    length_norm,
)


def corpus(seed, n_docs=600, n_terms=50):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_terms + 1)
    weights /= weights.sum()
    dense = np.zeros((n_terms, n_docs), dtype=np.int32)
    for d in range(n_docs):
        np.add.at(dense[:, d], rng.choice(n_terms, int(rng.integers(2, 40)), p=weights), 1)
    return dense, (dense * rng.random(dense.shape)).astype(np.int32)


def postings_of(dense, title):
    t, d = np.nonzero(dense)  # term by term, documents ascending
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=dense.shape[0]), out=indptr[1:])
    return Postings(indptr, d.astype(np.int32), dense[t, d], dense.sum(axis=0).astype(np.int32),
                    {"title": title[t, d]})


@pytest.mark.parametrize("params", [BM25Params(), BM25Params(k1=1.2, b=0.5, field_weights=(("title", 3.0),))])
def test_a_simulated_order_counts_what_the_renumbered_index_counts(params):
    dense, title = corpus(11)
    p = postings_of(dense, title)
    rank = doc_order(p, "length")
    moved = np.empty_like(dense)
    moved[:, rank] = dense  # document d becomes document rank[d]
    moved_title = np.empty_like(title)
    moved_title[:, rank] = title
    p2 = postings_of(moved, moved_title)
    assert np.array_equal(np.diff(p2.doc_len) >= 0, np.ones(p.n_docs - 1, dtype=bool))  # by length now
    rng = np.random.default_rng(12)
    q = QueryBatch.from_lists([rng.choice(p.n_terms, int(rng.integers(1, 7)), replace=False) for _ in range(30)])
    idf = bm25_idf(p.df(), p.n_docs)
    blocks = [8, 32, 128]
    for k in (1, 10):
        top = reference.score_topk(p, q, params, k)
        theta = np.where(np.isfinite(top.scores[:, k - 1]), top.scores[:, k - 1], 0.0)
        got = block_coverage(p, q, theta, idf, length_norm(p.doc_len, p.avgdl(), params.k1, params.b), params,
                             blocks, rank=rank)
        want = block_coverage(p2, q, theta, idf, length_norm(p2.doc_len, p2.avgdl(), params.k1, params.b),
                              params, blocks)
        np.testing.assert_array_equal(got, want)
        same = block_coverage(p, q, theta, idf, length_norm(p.doc_len, p.avgdl(), params.k1, params.b), params,
                              blocks)
        assert not np.array_equal(got, same)  # the order changes what the blocks hold


def test_length_order_breaks_ties_by_id_and_unknown_orders_fail():
    p = Postings(np.array([0, 4], dtype=np.int64), np.arange(4, dtype=np.int32), np.ones(4, dtype=np.int32),
                 np.array([3, 1, 3, 1], dtype=np.int32))
    assert doc_order(p, "length").tolist() == [2, 0, 3, 1]
    assert doc_order(p, "id").tolist() == [0, 1, 2, 3]
    assert set(ORDERS) == {"id", "length"}
    with pytest.raises(ValueError, match="unknown document order"):
        doc_order(p, "random")
    with pytest.raises(ValueError, match="permutation"):
        block_coverage(p, QueryBatch.from_lists([np.array([0])]), np.zeros(1), np.ones(1), np.ones(4),
                       BM25Params(), [2], rank=np.array([0, 0, 1, 2]))
