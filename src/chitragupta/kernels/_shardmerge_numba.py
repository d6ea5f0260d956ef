"""The numba k-way merge of ``chitragupta.kernels.shardmerge``: sorted top-k rows of several shards into one."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def kway(ids, scores, out_ids, out_scores):
    """ids, scores: (shards, n_queries, width), each row sorted by score descending then id ascending, padding
    (id < 0) last; out_ids, out_scores: (n_queries, k), filled with the k best of every query's rows by the
    same order (left as they are past the last hit)."""
    n_parts, nq, width = ids.shape
    k = out_ids.shape[1]
    for q in prange(nq):
        pos = np.zeros(n_parts, dtype=np.int64)
        for r in range(k):
            best = -1
            b_id = 0
            b_sc = 0.0
            for s in range(n_parts):
                p = pos[s]
                if p < width:
                    d = ids[s, q, p]
                    if d >= 0:
                        sc = scores[s, q, p]
                        if best < 0 or sc > b_sc or (sc == b_sc and d < b_id):
                            best = s
                            b_id = d
                            b_sc = sc
            if best < 0:
                break
            out_ids[q, r] = b_id
            out_scores[q, r] = b_sc
            pos[best] += 1
