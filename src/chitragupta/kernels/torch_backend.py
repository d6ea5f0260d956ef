"""torch backend: BM25 and exact top-k on any torch device (CUDA in production, the CPU in CI).

The same contract as ``chitragupta.kernels.reference.score_topk``; the formula, applied on the device at query time:

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))                  (once per index, on the host)
    norm[d]  = k1 * (1 - b + b * dl[d] / avgdl)                            (per (k1, b), on the device)
    tf'      = tf + sum_f (w_f - 1) * tf_f
    c(t, d)  = idf[t] * tf' * (k1 + 1) / (tf' + norm[d])     (0 where tf' <= 0)
    acc[q, d] = sum of c(t, d) over query q's distinct terms t, in ascending term id

Layout. The CSR arrays go to the device once per index and stay there (``device_index``: a cache keyed
on the ``Postings`` object, dropped when that object is). At query time the parameters become a table of
every posting's contribution c (one elementwise pass over the postings, cached for the last two parameter
sets, since an engine keeps one; a sweep builds one row per grid point). Queries are scored in chunks
whose dense accumulators ``acc`` (grid points, queries, n_docs) fit the free device memory
(``mem_get_info`` on CUDA, ``CPU_BUDGET_BYTES`` on the CPU). A chunk's (query, term) pairs are grouped by
the term's slot in its query (first term, second term, ...); one slot touches each (query, document) cell
at most once, so a slot is one gather from the table and one ``index_add_`` without colliding writes.
Cells are therefore summed in ascending term order on every device, deterministically, without atomics
deciding the order: identical documents get bit-identical scores (exact ties), and in float64 the sums
equal the reference's to the last bit (on the CPU; on CUDA too, where elementwise ops are IEEE).

dtype. float64 on the CPU device, so CI compares against the numpy reference exactly; float32 on CUDA
(half the memory traffic of the dense accumulators, which dominate), where scores agree with the float64
reference to about 1e-6 relative and rankings agree up to scores that float32 cannot tell apart.

Exact top-k. ``torch.topk`` neither orders ties nor chooses among documents tied at the k-th score. The
k + 1 best are fetched; where the (k+1)-th ties the k-th (and is a hit), the row is redone exactly: every
document above the k-th score, then the lowest ids among those equal to it. The k kept are then sorted by
(score descending, id ascending) with a stable sort.
"""

from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK, bm25_idf

__all__ = ["score_topk", "score_grid", "score_grid_device", "topk_rows", "contributions", "device_index",
           "DeviceIndex", "release", "default_dtype", "CPU_BUDGET_BYTES", "CUDA_MEMORY_FRACTION"]

# Working memory for one chunk on the CPU device (accumulators, gathered postings, top-k temporaries).
CPU_BUDGET_BYTES = 256 * 1024 * 1024
# Share of the free CUDA memory (plus blocks torch's allocator holds unused) one chunk may use.
CUDA_MEMORY_FRACTION = 0.5


def default_dtype(device: torch.device | str) -> torch.dtype:
    """float64 on the CPU (exact against the reference), float32 elsewhere (see the module docstring)."""
    return torch.float64 if torch.device(device).type == "cpu" else torch.float32


def _to_device(arr: np.ndarray, dtype: np.dtype, device: torch.device) -> torch.Tensor:
    """One array to the device. Read-only (memory-mapped) arrays are shared, never written, on the CPU."""
    arr = np.ascontiguousarray(arr, dtype=dtype)
    with warnings.catch_warnings():  # local: torch warns that a read-only array could be written through
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        t = torch.from_numpy(arr)
    return t.to(device)


class DeviceIndex:
    """One index's postings resident on one device, with its query-time caches.

    indptr (n_terms + 1,) int64, indices (nnz,) int32, tf (nnz,) int32, doc_len (n_docs,) float64 on the
    device; ``df`` (n_terms,) int64 stays on the host too, to plan chunks without reading the device.
    Field counts are uploaded on first use (a field weight of 1 never reads its counts).
    """

    def __init__(self, postings: Postings, device: torch.device):
        self.device = device
        self.n_docs = postings.n_docs
        self.n_terms = postings.n_terms
        self.nnz = postings.nnz
        self.df = np.diff(np.asarray(postings.indptr, dtype=np.int64))
        self.avgdl = postings.avgdl()
        self.indptr = _to_device(postings.indptr, np.int64, device)
        self.indices = _to_device(postings.indices, np.int32, device)
        self.tf = _to_device(postings.tf, np.int32, device)
        self.doc_len = _to_device(postings.doc_len, np.float64, device)
        self._idf_host = bm25_idf(self.df, self.n_docs)  # numpy's log1p, the reference's exact values
        self._idf: dict[torch.dtype, torch.Tensor] = {}
        self.df_dev = torch.diff(self.indptr)
        self._fields: dict[str, tuple[np.ndarray, torch.Tensor]] = {}
        self._norms: dict[tuple[float, float, torch.dtype], torch.Tensor] = {}
        self._tables: dict[tuple, tuple[tuple[torch.Tensor, ...], torch.Tensor]] = {}

    def idf(self, dtype: torch.dtype) -> torch.Tensor:
        """(n_terms,) idf on the device in ``dtype``."""
        got = self._idf.get(dtype)
        if got is None:
            got = self._idf[dtype] = torch.from_numpy(self._idf_host).to(self.device, dtype)
        return got

    def norm(self, k1: float, b: float, dtype: torch.dtype) -> torch.Tensor:
        """(n_docs,) ``k1 * (1 - b + b * dl / avgdl)``, computed in float64 on the device (the reference's
        operations in its order, so bit-equal on the CPU), then cast to ``dtype``; cached per (k1, b)."""
        key = (float(k1), float(b), dtype)
        got = self._norms.get(key)
        if got is None:
            if len(self._norms) > 32:
                self._norms.clear()
            got = (k1 * (1.0 - b + b * (self.doc_len / self.avgdl))).to(dtype)
            self._norms[key] = got
        return got

    def field(self, postings: Postings, name: str) -> torch.Tensor:
        """(nnz,) int32 counts of field ``name``; re-uploaded if the index's array was replaced."""
        arr = postings.fields.get(name)
        if arr is None:
            raise ValueError(f"the index has no {name!r} field counts; fields: {', '.join(postings.fields) or 'none'}")
        got = self._fields.get(name)
        if got is None or got[0] is not arr:
            got = self._fields[name] = (arr, _to_device(arr, np.int32, self.device))
        return got[1]

    def table(self, params: BM25Params, names: tuple[str, ...], fields: list[torch.Tensor],
              dtype: torch.dtype, budget: int) -> torch.Tensor:
        """(1, nnz) contribution of every posting under ``params``, cached for the last few parameter sets
        (an engine scores with one set, so after the first call a query only gathers from it)."""
        key = (float(params.k1), float(params.b), names, tuple(dict(params.active_fields()).get(n, 0.0)
                                                                for n in names), dtype)
        got = self._tables.get(key)
        if got is not None and all(a is b for a, b in zip(got[0], fields)):
            return got[1]
        table = contributions(self, [params], names, fields, dtype, budget)
        if len(self._tables) >= 2:  # each is index-sized: keep few
            self._tables.pop(next(iter(self._tables)))
        self._tables[key] = (tuple(fields), table)
        return table

    def nbytes(self) -> int:
        """Bytes held on the device by the postings (not counting caches)."""
        ts = [self.indptr, self.indices, self.tf, self.doc_len] + [t for _, t in self._fields.values()]
        return sum(t.numel() * t.element_size() for t in ts)


_CACHE: dict[tuple[int, str], tuple[weakref.ref, DeviceIndex]] = {}


def device_index(postings: Postings, device: str | torch.device = "cpu") -> DeviceIndex:
    """The device copy of ``postings``, uploaded on first use and kept while ``postings`` lives."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    key = (id(postings), str(dev))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is postings:
        return hit[1]
    handle = DeviceIndex(postings, dev)
    _CACHE[key] = (weakref.ref(postings), handle)
    # Free the device memory with the index: the cache must not keep a dropped index resident.
    weakref.finalize(postings, _CACHE.pop, key, None)
    return handle


def release(postings: Postings | None = None) -> None:
    """Drop the device copies of ``postings`` (of every index when None)."""
    for key in [k for k in _CACHE if postings is None or k[0] == id(postings)]:
        _CACHE.pop(key, None)


# -- planning ---------------------------------------------------------------------------------------------

def _budget_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int((free + cached) * CUDA_MEMORY_FRACTION)
    return int(CPU_BUDGET_BYTES)


@dataclass(frozen=True)
class _Plan:
    """Chunk sizes: ``g_chunk`` grid points and query chunks ``q_bounds`` (host int64, ascending)."""

    g_chunk: int
    q_bounds: np.ndarray
    fix_rows: int


def _plan(ix: DeviceIndex, queries: QueryBatch, n_grid: int, itemsize: int, budget: int) -> _Plan:
    """Split the budget: 1/2 for the dense accumulators (queries first, then grid points), 1/8 for the
    grid points' contribution tables (at least one, index-sized), 1/8 for one slot's expanded postings,
    1/4 for the exact-boundary temporaries.

    One slot holds at most one term per query, so a chunk's largest slot has at most the sum over its
    queries of their largest term's postings: that sum is what a chunk keeps within its share.
    """
    n_q = queries.n_queries
    row = max(1, ix.n_docs) * itemsize
    rows = max(1, (budget // 2) // row)
    q_max = max(1, min(n_q, rows))
    g_chunk = max(1, min(n_grid, rows // q_max, (budget // 8) // max(1, ix.nnz * itemsize)))
    # per expanded posting: ~6 int64 vectors, and its contribution under each grid point of the chunk
    p_max = max(1, (budget // 8) // (48 + g_chunk * itemsize))
    widest = np.zeros(n_q, dtype=np.int64)
    nonempty = np.flatnonzero(np.diff(queries.indptr) > 0)
    if nonempty.shape[0]:
        widest[nonempty] = np.maximum.reduceat(ix.df[queries.terms], queries.indptr[:-1][nonempty])
    cum = np.zeros(n_q + 1, dtype=np.int64)
    np.cumsum(widest, out=cum[1:])
    bounds = [0]
    while bounds[-1] < n_q:
        q0 = bounds[-1]
        end = int(np.searchsorted(cum, cum[q0] + p_max, side="right")) - 1
        bounds.append(min(n_q, max(q0 + 1, end), q0 + q_max))
    fix_rows = max(1, (budget // 4) // (max(1, ix.n_docs) * (itemsize + 8)))
    return _Plan(g_chunk, np.asarray(bounds, dtype=np.int64), fix_rows)


def _slot_groups(queries: QueryBatch, q0: int, q1: int, df: np.ndarray):
    """A chunk's (query, term) pairs ordered by slot (the term's place in its query), then query.

    Returns host arrays: terms (pairs,) int64, qloc (pairs,) int64 (query index within the chunk),
    group bounds (slots + 1,) int64 into those, and each group's total postings (slots,) int64.
    """
    lo, hi = int(queries.indptr[q0]), int(queries.indptr[q1])
    terms = queries.terms[lo:hi].astype(np.int64)
    lengths = np.diff(queries.indptr[q0:q1 + 1]).astype(np.int64)
    qloc = np.repeat(np.arange(q1 - q0, dtype=np.int64), lengths)
    slot = np.arange(hi - lo, dtype=np.int64) - (queries.indptr[q0:q1][qloc] - lo)
    perm = np.argsort(slot, kind="stable")
    terms, qloc, slot = terms[perm], qloc[perm], slot[perm]
    n_slots = int(lengths.max()) if lengths.size else 0
    bounds = np.searchsorted(slot, np.arange(n_slots + 1), side="left").astype(np.int64)
    post = np.zeros(terms.shape[0] + 1, dtype=np.int64)
    np.cumsum(df[terms], out=post[1:])
    return terms, qloc, bounds, post[bounds[1:]] - post[bounds[:-1]]


# -- scoring ----------------------------------------------------------------------------------------------

def contributions(ix: DeviceIndex, grid: list[BM25Params], names: tuple[str, ...], fields: list[torch.Tensor],
                  dtype: torch.dtype, budget: int) -> torch.Tensor:
    """(G, nnz) BM25 contribution of every posting under every grid point, in ``dtype``:

        tf' = tf + sum_f d_f * tf_f   (in ``names`` order);   c = idf[t] * tf' * (k1 + 1) / (tf' + norm[d])

    with c = 0 where tf' <= 0; the reference's operations in its order. Built in slices of the postings
    so the temporaries stay within a quarter of ``budget``.
    """
    dev, G = ix.device, len(grid)
    out = torch.empty((G, ix.nnz), dtype=dtype, device=dev)
    if ix.nnz == 0:
        return out
    norms = torch.stack([ix.norm(p.k1, p.b, dtype) for p in grid])
    k1p1 = torch.tensor([p.k1 + 1.0 for p in grid], dtype=torch.float64).to(dev, dtype)[:, None]
    deltas = torch.tensor([[dict(p.active_fields()).get(n, 0.0) for n in names] for p in grid],
                          dtype=torch.float64).reshape(G, len(names)).to(dev, dtype)
    idf = torch.repeat_interleave(ix.idf(dtype), ix.df_dev, output_size=ix.nnz)  # idf of each posting's term
    itemsize = out.element_size()
    step = max(1, (budget // 4) // (6 * G * itemsize + 16))
    zero = torch.zeros((), dtype=dtype, device=dev)
    for lo in range(0, ix.nnz, step):
        hi = min(ix.nnz, lo + step)
        tf = ix.tf[lo:hi].to(dtype)
        for f, counts in enumerate(fields):  # the reference's order: tf + d1 * f1, then + d2 * f2
            tf = tf + deltas[:, f:f + 1] * counts[lo:hi].to(dtype)
        c = (idf[lo:hi] * tf) * k1p1 / (tf + norms[:, ix.indices[lo:hi].to(torch.int64)])
        out[:, lo:hi] = torch.where(tf > 0, c, zero)  # (G, slice): k1p1 is (G, 1)
    return out


def _accumulate(ix: DeviceIndex, acc: torch.Tensor, table: torch.Tensor, terms: torch.Tensor,
                qloc: torch.Tensor, total: int) -> None:
    """Add one slot's contributions into ``acc`` (G, Q * n_docs).

    table (G, nnz) in acc's dtype; terms, qloc (pairs,) int64 on the device, no query twice (so no cell is
    written twice: the add is deterministic); ``total`` their postings (a host int: no sync here).
    """
    dev = acc.device
    starts = ix.indptr[terms]
    lens = ix.indptr[terms + 1] - starts
    # The i-th expanded posting of pair p sits at starts[p] + (i - first[p]) in the CSR arrays, and its
    # cell is qloc[p] * n_docs + doc: per-pair parts are expanded directly, the work being per posting.
    shift = torch.repeat_interleave(starts - (torch.cumsum(lens, 0) - lens), lens, output_size=total)
    pos = torch.arange(total, device=dev) + shift
    cell = torch.repeat_interleave(qloc * ix.n_docs, lens, output_size=total) + ix.indices[pos]
    acc.index_add_(1, cell, table[:, pos])


def _order(ids: torch.Tensor, vals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by score descending, then id ascending: by id, then a stable sort by score."""
    ids, perm = torch.sort(ids, dim=1)
    vals = torch.gather(vals, 1, perm)
    vals, perm = torch.sort(vals, dim=1, descending=True, stable=True)
    return torch.gather(ids, 1, perm), vals


def _exact_boundary(acc: torch.Tensor, rows: torch.Tensor, kth: torch.Tensor, kk: int,
                    block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact top-kk of ``acc[rows]``: every document above the row's k-th score ``kth`` (fewer
    than kk), then the lowest ids among those equal to it. Returns ids (R, kk) int64, ascending, and
    their scores; ``block`` rows are copied out at a time."""
    out_ids, out_vals = [], []
    for r0 in range(0, rows.shape[0], block):
        r = rows[r0:r0 + block]
        a = acc.index_select(0, r)
        t = kth[r0:r0 + block, None]
        above = a > t
        need = kk - above.sum(1, dtype=torch.int32)
        tied = a == t
        take = above | (tied & (torch.cumsum(tied, 1, dtype=torch.int32) <= need[:, None]))
        # exactly kk per row: fewer than kk lie above the k-th score, at least the rest are tied with it
        ids = torch.nonzero(take)[:, 1].view(r.shape[0], kk)
        out_ids.append(ids)
        out_vals.append(torch.gather(a, 1, ids))
    return torch.cat(out_ids), torch.cat(out_vals)


def topk_rows(acc: torch.Tensor, kk: int, fix_block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-kk of every row of ``acc`` (R, n_docs), kk <= n_docs.

    Returns ids (R, kk) int64 and scores (R, kk) in acc's dtype, sorted by (score desc, id asc); cells
    that are not hits (score <= 0) come back as id -1, score -inf.
    """
    n = acc.shape[1]
    fetch = min(kk + 1, n)
    vals, ids = torch.topk(acc, fetch, dim=1, largest=True, sorted=True)
    if fetch > kk:
        kth = vals[:, kk - 1]
        crossed = (vals[:, kk] == kth) & (kth > 0)
        vals, ids = vals[:, :kk].contiguous(), ids[:, :kk].contiguous()
        rows = torch.nonzero(crossed)[:, 0]
        if rows.shape[0]:
            ids[rows], vals[rows] = _exact_boundary(acc, rows, kth[rows], kk, fix_block)
    ids, vals = _order(ids, vals)
    hit = vals > 0
    ids = torch.where(hit, ids, torch.full((), -1, dtype=ids.dtype, device=ids.device))
    vals = torch.where(hit, vals, torch.full((), -math.inf, dtype=vals.dtype, device=vals.device))
    return ids, vals


def _field_order(grid: list[BM25Params], order: tuple[str, ...] | None) -> tuple[str, ...]:
    """The weighted fields some grid point reads, in ``order`` or else by first appearance."""
    names: list[str] = []
    for p in grid:
        for name, _delta in p.active_fields():
            if name not in names:
                names.append(name)
    if order is None:
        return tuple(names)
    missing = [n for n in names if n not in order]
    if missing:
        raise ValueError(f"field(s) {', '.join(missing)} are not in the field order {order}")
    return tuple(n for n in order if n in names)


def score_grid_device(postings: Postings, queries: QueryBatch, grid: list[BM25Params], k: int,
                      device: str | torch.device = "cpu", *, dtype: torch.dtype | None = None,
                      field_order: tuple[str, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of every query under every grid point, left on the device.

    Returns ids (G, n_queries, kk) int64 and scores (G, n_queries, kk) in ``dtype`` (default: see
    ``default_dtype``), kk = min(k, n_docs), padded with -1 / -inf. Weighted fields are added in
    ``field_order`` (default: first appearance in the grid, which is each point's own order when G = 1).
    """
    ix = device_index(postings, device)
    dev = ix.device
    dtype = dtype or default_dtype(dev)
    G, n_q = len(grid), queries.n_queries
    kk = max(1, min(k, ix.n_docs))
    out_ids = torch.full((G, n_q, kk), -1, dtype=torch.int64, device=dev)
    out_scores = torch.full((G, n_q, kk), -math.inf, dtype=dtype, device=dev)
    if n_q == 0 or ix.n_docs == 0 or queries.terms.shape[0] == 0:
        return out_ids, out_scores
    names = _field_order(grid, field_order)
    fields = [ix.field(postings, n) for n in names]
    itemsize = torch.empty((), dtype=dtype).element_size()
    budget = _budget_bytes(dev)
    plan = _plan(ix, queries, G, itemsize, budget)
    chunks = []  # each query chunk's slot groups, planned once for every block of grid points
    for a in range(plan.q_bounds.shape[0] - 1):
        q0, q1 = int(plan.q_bounds[a]), int(plan.q_bounds[a + 1])
        terms_h, qloc_h, bounds, totals = _slot_groups(queries, q0, q1, ix.df)
        if int(totals.sum()) > 0:  # else only empty queries or terms without postings: no hits
            chunks.append((q0, q1, torch.from_numpy(terms_h).to(dev), torch.from_numpy(qloc_h).to(dev),
                           bounds, totals))
    for g0 in range(0, G, plan.g_chunk):
        sub = grid[g0:g0 + plan.g_chunk]
        gs = len(sub)
        if G == 1:
            table = ix.table(sub[0], names, fields, dtype, budget)
        else:
            table = contributions(ix, sub, names, fields, dtype, budget)
        for q0, q1, terms_d, qloc_d, bounds, totals in chunks:
            acc = torch.zeros((gs, (q1 - q0) * ix.n_docs), dtype=dtype, device=dev)
            for s in range(bounds.shape[0] - 1):
                lo, hi = int(bounds[s]), int(bounds[s + 1])
                if hi > lo and totals[s] > 0:
                    _accumulate(ix, acc, table, terms_d[lo:hi], qloc_d[lo:hi], int(totals[s]))
            ids, vals = topk_rows(acc.view(gs * (q1 - q0), ix.n_docs), kk, plan.fix_rows)
            del acc
            out_ids[g0:g0 + gs, q0:q1] = ids.view(gs, q1 - q0, kk)
            out_scores[g0:g0 + gs, q0:q1] = vals.view(gs, q1 - q0, kk)
        del table
    return out_ids, out_scores


def _to_topk(ids: torch.Tensor, scores: torch.Tensor, k: int) -> TopK:
    """Device (n_queries, kk) results as a host TopK padded to k columns."""
    out = TopK.empty(ids.shape[0], k)
    kk = ids.shape[1]
    out.ids[:, :kk] = ids.cpu().numpy()
    out.scores[:, :kk] = scores.to(torch.float64).cpu().numpy()
    return out


def score_grid(postings: Postings, queries: QueryBatch, grid: list[BM25Params], k: int,
               device: str | torch.device = "cpu", *, dtype: torch.dtype | None = None,
               field_order: tuple[str, ...] | None = None) -> list[TopK]:
    """One host ``TopK`` per grid point (see ``score_grid_device``)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not grid:
        return []
    ids, scores = score_grid_device(postings, queries, grid, k, device, dtype=dtype, field_order=field_order)
    return [_to_topk(ids[g], scores[g], k) for g in range(len(grid))]


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None) -> TopK:
    """Top-k of every query; the contract of ``chitragupta.kernels.reference.score_topk``. ``device``: any torch
    device; ``dtype``: the scores' dtype on the device (default float64 on the CPU, float32 elsewhere)."""
    return score_grid(postings, queries, [params], k, device, dtype=dtype)[0]
