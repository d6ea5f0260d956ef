"""A grid of BM25 parameters scored in one pass over the postings: ``sweep(postings, queries, grid, k)``.

For every query, each posting (t, d, tf) is read once and its contribution computed for every grid
point g at once:

    tf'_g = tf + (wt_g - 1) * tf_title + (wa_g - 1) * tf_abstract
    acc[d, g] += idf[t] * tf'_g * (k1_g + 1) / (tf'_g + k1_g * (1 - b_g + b_g * dl[d] / avgdl))

then each grid point keeps its own exact top-k (score descending, id ascending). The arithmetic is the
scorer's, term by term in the same order, so grid point g equals ``score_topk`` with ``grid[g]`` to the
last bit. Accumulators are laid out document-major (the G values of one document side by side), so the
inner loop over grid points is contiguous. The grid is split into chunks when G x n_docs accumulators
would not fit ``SWEEP_BUDGET_BYTES`` per thread.

Backends: ``"numba"`` (this module), ``"numpy"`` (the reference, one grid point at a time) and
``"torch"`` (``chitragupta.kernels.torch_backend.score_grid`` on ``device``: one upload of the postings; per block of
grid points one elementwise pass making every posting's contribution under each, then per query chunk one
gather of its postings' contributions into the block's dense accumulators, and top-k per row). ``"auto"``
is numpy for a grid too small to be worth numba's start, else numba, whatever the machine
(``chitragupta.kernels.dispatch.AUTO["grid"]``): a sweep's figures go into RESULTS.md, and float32 on CUDA
could reorder documents whose scores differ by less than float32 resolves; ask for ``"torch"`` to use a GPU.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, bm25_idf, length_norm

__all__ = ["sweep", "SWEEP_BUDGET_BYTES", "grid_of"]

SWEEP_BUDGET_BYTES = 256 * 1024 * 1024


def grid_of(k1s, bs, title=(1.0,), abstract=(1.0,)) -> list[BM25Params]:
    """The Cartesian grid, k1 slowest ... abstract weight fastest."""
    out = []
    for k1 in k1s:
        for b in bs:
            for wt in title:
                for wa in abstract:
                    fw = tuple(x for x in (("title", float(wt)), ("abstract", float(wa))) if x[1] != 1.0)
                    out.append(BM25Params(float(k1), float(b), field_weights=fw))
    return out


_SWEEP_FIELDS = ("title", "abstract")


def _field_deltas(grid: list[BM25Params]) -> tuple[np.ndarray, np.ndarray]:
    dt = np.zeros(len(grid), dtype=np.float64)
    da = np.zeros(len(grid), dtype=np.float64)
    for g, p in enumerate(grid):
        for name, delta in p.active_fields():
            if name == "title":
                dt[g] = delta
            elif name == "abstract":
                da[g] = delta
            else:
                raise ValueError(f"sweep supports the title and abstract fields, got {name!r}")
    return dt, da


SWEEP_BACKENDS = ("auto", "numba", "numpy", "torch")


def sweep(postings: Postings, queries: QueryBatch, grid: list[BM25Params], k: int,
          backend: str = "auto", device: str = "auto") -> list[TopK]:
    """One TopK per grid point, from one pass over each query's postings per grid chunk.

    ``device`` ("auto", "cpu", "cuda") says where the torch backend runs; the others ignore it.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if backend not in SWEEP_BACKENDS:
        raise ValueError(f"unknown sweep backend {backend!r}; allowed: {', '.join(SWEEP_BACKENDS)}")
    if not grid:
        return []
    from chitragupta.kernels.dispatch import backend_name

    backend = backend_name(backend, device, job="grid", work=len(grid) * queries.n_queries * postings.n_docs)
    if backend == "numpy":
        from chitragupta.kernels import reference

        return [reference.score_topk(postings, queries, p, k) for p in grid]
    if backend == "torch":
        from chitragupta.kernels.dispatch import import_torch_backend, resolve_torch_device

        _field_deltas(grid)  # the same fields, and the same error for others, as the numba path
        where = resolve_torch_device(device)
        # title then abstract: the numba kernel's order of adding field counts, so sums agree bitwise
        return import_torch_backend().score_grid(postings, queries, grid, k, where,
                                                  field_order=_SWEEP_FIELDS)
    import numba

    from chitragupta.kernels import _sweep_numba as impl

    n_q, n_docs = queries.n_queries, postings.n_docs
    outs = [TopK.empty(n_q, k) for _ in grid]
    if n_q == 0 or n_docs == 0 or queries.terms.shape[0] == 0:
        return outs
    idf = bm25_idf(postings.df(), n_docs)
    avgdl = postings.avgdl()
    dt, da = _field_deltas(grid)
    needs = (dt != 0).any(), (da != 0).any()
    empty = np.zeros(0, dtype=np.int32)
    f1 = np.ascontiguousarray(postings.fields["title"], dtype=np.int32) if needs[0] else empty
    f2 = np.ascontiguousarray(postings.fields["abstract"], dtype=np.int32) if needs[1] else empty
    threads = numba.get_num_threads()
    per_chunk = max(1, SWEEP_BUDGET_BYTES // (8 * 2 * n_docs * max(1, min(threads, n_q))))
    for g0 in range(0, len(grid), per_chunk):
        sub = grid[g0:g0 + per_chunk]
        G = len(sub)
        norms = np.empty((n_docs, G), dtype=np.float64)
        for j, p in enumerate(sub):
            norms[:, j] = length_norm(postings.doc_len, avgdl, p.k1, p.b)
        k1p1 = np.array([p.k1 + 1.0 for p in sub], dtype=np.float64)
        ids = np.full((G, n_q, k), -1, dtype=np.int64)
        scores = np.full((G, n_q, k), -np.inf, dtype=np.float64)
        n_chunks = max(1, min(n_q, threads))
        impl.sweep_kernel(postings.indptr, postings.indices, postings.tf, f1, f2,
                          np.ascontiguousarray(dt[g0:g0 + G]), np.ascontiguousarray(da[g0:g0 + G]),
                          bool(needs[0] or needs[1]), idf, norms.ravel(), k1p1,
                          queries.indptr, queries.terms, int(k), n_chunks, ids, scores)
        for j in range(G):
            outs[g0 + j] = TopK(ids=ids[j], scores=scores[j])
    return outs
