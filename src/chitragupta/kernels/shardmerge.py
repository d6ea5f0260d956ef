"""Merging the top-k of document shards into the top-k of the whole index, exactly.

Each shard's rows are its k best documents by (score descending, then id ascending), ids already global
(the shard's first document id added). That order is total, so the whole index's k best documents are,
within each shard, a prefix of that shard's list: sorting the shards' lists together by the same key and
keeping the first k is the one-process top-k, ties included, with the same padding (id -1, score -inf)
where a query has fewer hits. The merge is one numpy sort of all the candidates on both keys.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.types import TopK

__all__ = ["merge_topk", "offset_ids", "stack_rows"]


def offset_ids(top: TopK, start: int) -> TopK:
    """``top`` with every real id moved up by ``start`` (a shard's local ids made global)."""
    ids = np.where(top.ids >= 0, top.ids + int(start), -1).astype(np.int64)
    return TopK(ids, np.asarray(top.scores, dtype=np.float64))


def merge_topk(parts: list[TopK], k: int) -> TopK:
    """The best ``k`` per row of the shards' ``parts`` (each (n_queries, k_i), global ids, rows ordered by
    score descending then id ascending, padding last, no id in two parts) by the same order; padded like
    ``TopK.empty``."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not parts:
        raise ValueError("no shard to merge")
    nq = parts[0].ids.shape[0]
    if any(p.ids.shape[0] != nq or p.scores.shape != p.ids.shape for p in parts):
        raise ValueError("the shards' top-k have different numbers of queries")
    out = TopK.empty(nq, k)
    width = max(p.ids.shape[1] for p in parts)
    if nq == 0 or width == 0:
        return out
    ids = np.concatenate([p.ids for p in parts], axis=1).astype(np.int64, copy=False)
    scores = np.concatenate([p.scores for p in parts], axis=1).astype(np.float64, copy=False)
    real = ids >= 0
    key_score = np.where(real, -scores, np.inf)  # padding sorts last
    key_id = np.where(real, ids, np.iinfo(np.int64).max)
    order = np.lexsort((key_id, key_score), axis=-1)[:, :k]
    got_real = np.take_along_axis(real, order, axis=1)
    w = order.shape[1]
    out.ids[:, :w] = np.where(got_real, np.take_along_axis(ids, order, axis=1), -1)
    out.scores[:, :w] = np.where(got_real, np.take_along_axis(scores, order, axis=1), -np.inf)
    return out


def stack_rows(parts: list[TopK], k: int) -> TopK:
    """Query blocks' top-k one under the other (blocks in query order), each padded to ``k`` columns."""
    out = TopK.empty(sum(p.ids.shape[0] for p in parts), k)
    row = 0
    for p in parts:
        n, w = p.ids.shape
        out.ids[row:row + n, :w] = p.ids
        out.scores[row:row + n, :w] = p.scores
        row += n
    return out
