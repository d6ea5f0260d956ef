"""Exact top-k with the engine's tie-break: score descending, then document id ascending.

Document ids follow citekey order, so the id tie-break is the citekey tie-break. The numba kernels carry
their own heap (``chitragupta.kernels.cpu``); this module is the numpy form used by the reference and for merging.
"""

from __future__ import annotations

import numpy as np

__all__ = ["topk_from_dense", "order"]


def order(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Permutation sorting (ids, scores) by score descending, then id ascending."""
    return np.lexsort((ids, -scores))


def topk_from_dense(scores: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` documents among those where ``mask`` is true.

    scores: (n_docs,) float64; mask: (n_docs,) bool. Returns (ids int64, scores float64), at most k long.
    """
    ids = np.flatnonzero(mask).astype(np.int64)
    vals = scores[ids]
    if ids.shape[0] > k:
        # Keep everything tied with the k-th best score, then order exactly.
        kth = np.partition(vals, ids.shape[0] - k)[ids.shape[0] - k]
        keep = vals >= kth
        ids, vals = ids[keep], vals[keep]
    perm = order(ids, vals)[:k]
    return ids[perm], vals[perm]
