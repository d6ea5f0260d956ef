"""Per-source caps on ranked lists (the engine's tie-break: score descending, then document id ascending;
document ids follow citekey order, so the id tie-break is the citekey tie-break). The scorers select their
own top k (``kernels.reference``, ``kernels.cpu``)."""

from __future__ import annotations

import numpy as np

__all__ = ["cap_per_source"]


def cap_per_source(ids: np.ndarray, source: np.ndarray, cap: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``cap`` entries of each source in every row of a ranked list, then the first ``k``.

    ids: (q, n) int64 ranked best first, -1 padding at the end of a row; source: (q, n) the source of
    each entry (read only where ids >= 0). Returns ``(cols, short)``: cols (q, k) int64, the positions in
    the input row of the kept entries in rank order (-1 padding), and short (q,) bool, rows whose kept
    list has fewer than k entries although the input row was full -- a deeper list could fill them.
    Vectorised over the batch: a stable sort by (row, source, position) numbers each entry within its
    source, and a cumulative count numbers the kept ones within their row.
    """
    ids = np.asarray(ids)
    nq, n = ids.shape
    cols = np.full((nq, k), -1, dtype=np.int64)
    valid = ids >= 0
    rows, pos = np.nonzero(valid)  # row-major: rank order within each row
    if rows.size == 0:
        return cols, np.zeros(nq, dtype=bool)
    src = np.asarray(source)[rows, pos].astype(np.int64)
    order = np.lexsort((pos, src, rows))
    r_s, s_s = rows[order], src[order]
    start = np.ones(order.size, dtype=bool)
    start[1:] = (r_s[1:] != r_s[:-1]) | (s_s[1:] != s_s[:-1])
    first = np.flatnonzero(start)
    within = np.arange(order.size) - np.repeat(first, np.diff(np.append(first, order.size)))
    keep = np.empty(order.size, dtype=bool)
    keep[order] = within < cap
    kr, kp = rows[keep], pos[keep]
    # rank of each kept entry within its row
    row_start = np.searchsorted(kr, np.arange(nq))
    rank = np.arange(kr.size) - row_start[kr]
    take = rank < k
    cols[kr[take], rank[take]] = kp[take]
    kept = np.bincount(kr, minlength=nq)
    short = (kept < k) & valid[:, -1] if n else np.zeros(nq, dtype=bool)
    return cols, short
