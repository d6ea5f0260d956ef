"""Hybrid retrieval: BM25 and the embedding index, fused per source.

    h = HybridSearcher.open("my-workspace", unit="document")   # or unit="passage"
    resp = h.search("digital twin fidelity", k=10)              # SearchResponse, as every engine returns
    fused = h.rank_many(queries, k=100)                          # Fused arrays; .run_chunks(qids) writes a run

Each list is first collapsed to one entry per source: BM25 documents already are; BM25 passages keep each
source's best passage (``max_per_source=1``); the embedding index keeps each source's best chunk. So a source
appears at most once in a fused list -- the per-source cap of hybrid search is one -- and its hit carries the
BM25 snippet (document unit: the window of the document holding most query terms; passage unit: its best
passage, page and item number), or, when BM25 did not retrieve it, the window of its best chunk.

Fusion, ``[hybrid]``: each list contributes its top ``depth`` sources (at least k).
``rrf``: score = sum of weight / (rrf_k + rank), ranks from 1 (Cormack, Clarke and Buettcher 2009).
``minmax``: score = sum of weight x (s - min) / (max - min) within each list's top ``depth`` (1 when all
are equal). A source absent from a list adds nothing. Ties: fused score, then BM25 rank, then dense rank,
then index order -- so the order is the same on every device.

When the embedding index is missing or not usable, hybrid search is BM25 alone, and says so in a note.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from chitragupta.engine.config import Config
from chitragupta.engine.results import Note, SearchResponse, SearchResult
from chitragupta.engine.search import Retriever
from chitragupta.engine.workspace import Workspace
from chitragupta.errors import ConfigError, UsageError

__all__ = ["HybridSearcher", "Fused", "fuse"]

log = logging.getLogger(__name__)

RUN_TAG = "chitragupta-hybrid"


@dataclass
class Fused:
    """A batch's fused top-k: ``ids`` (q, k) rows of the BM25 document index (-1 pads a short list),
    ``scores`` (q, k) fused scores, ``bm25_rank`` / ``dense_rank`` (q, k) the source's rank in each list
    (0: absent), ``passage`` (q, k) its best BM25 passage id (passage unit; -1 none), ``chunk`` (q, k) its
    best chunk row in the embedding store (-1 none)."""

    ids: np.ndarray
    scores: np.ndarray
    bm25_rank: np.ndarray
    dense_rank: np.ndarray
    passage: np.ndarray
    chunk: np.ndarray

    def counts(self) -> np.ndarray:
        return (self.ids >= 0).sum(axis=1)


def _contributions(ranks: np.ndarray, scores: np.ndarray, valid: np.ndarray, method: str, weight: float,
                   rrf_k: float) -> np.ndarray:
    """Each entry's share of the fused score; 0 where ``valid`` is False."""
    out = np.zeros(ranks.shape, dtype=np.float64)
    if weight == 0 or not valid.any():
        return out
    if method == "rrf":
        out[valid] = weight / (rrf_k + ranks[valid])
        return out
    s = scores.astype(np.float64)
    lo = np.where(valid, s, np.inf).min(axis=1, keepdims=True)
    hi = np.where(valid, s, -np.inf).max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        span = hi - lo
        scaled = np.where(span > 0, (s - lo) / np.where(span > 0, span, 1.0), 1.0)
    out[valid] = weight * scaled[valid]
    return out


def fuse(bm25_ids: np.ndarray, bm25_scores: np.ndarray, dense_ids: np.ndarray, dense_scores: np.ndarray,
         k: int, *, method: str = "rrf", rrf_k: float = 60.0, weight_bm25: float = 1.0,
         weight_dense: float = 1.0, bm25_aux: np.ndarray | None = None,
         dense_aux: np.ndarray | None = None) -> Fused:
    """Fuse two ranked lists per query, vectorised over the batch.

    ``*_ids`` (q, n) are source ids in one id space, best first, -1 padding, each source at most once
    per row; ``*_scores`` their scores (used by ``minmax``); ``*_aux`` (q, n) a value carried to the
    output for the entries of that list (the best passage, the best chunk)."""
    if method not in ("rrf", "minmax"):
        raise ConfigError(f"[hybrid] method = {method!r} is not allowed; allowed: \"rrf\", \"minmax\"")
    nq = bm25_ids.shape[0]
    if dense_ids.shape[0] != nq:
        raise ValueError("fuse: the two lists disagree in the number of queries")
    vb, vd = bm25_ids >= 0, dense_ids >= 0
    ranks_b = np.broadcast_to(np.arange(1, bm25_ids.shape[1] + 1, dtype=np.float64), bm25_ids.shape)
    ranks_d = np.broadcast_to(np.arange(1, dense_ids.shape[1] + 1, dtype=np.float64), dense_ids.shape)
    cb = _contributions(ranks_b, bm25_scores, vb, method, weight_bm25, rrf_k)
    cd = _contributions(ranks_d, dense_scores, vd, method, weight_dense, rrf_k)

    qb, pb = np.nonzero(vb)
    qd, pd = np.nonzero(vd)
    q_all = np.concatenate([qb, qd]).astype(np.int64)
    id_all = np.concatenate([bm25_ids[qb, pb], dense_ids[qd, pd]]).astype(np.int64)
    n_ids = int(id_all.max()) + 1 if id_all.size else 1
    keys, inv = np.unique(q_all * n_ids + id_all, return_inverse=True)
    score = np.bincount(inv, weights=np.concatenate([cb[qb, pb], cd[qd, pd]]), minlength=keys.size)
    nb = qb.size
    rank_b = np.zeros(keys.size, dtype=np.int64)
    rank_d = np.zeros(keys.size, dtype=np.int64)
    rank_b[inv[:nb]] = pb + 1  # each source once per list and query: no collisions
    rank_d[inv[nb:]] = pd + 1
    aux_b = np.full(keys.size, -1, dtype=np.int64)
    aux_d = np.full(keys.size, -1, dtype=np.int64)
    if bm25_aux is not None:
        aux_b[inv[:nb]] = bm25_aux[qb, pb]
    if dense_aux is not None:
        aux_d[inv[nb:]] = dense_aux[qd, pd]
    q_of, id_of = keys // n_ids, keys % n_ids
    big = np.iinfo(np.int64).max
    order = np.lexsort((id_of, np.where(rank_d > 0, rank_d, big), np.where(rank_b > 0, rank_b, big), -score, q_of))
    q_sorted = q_of[order]
    first = np.searchsorted(q_sorted, np.arange(nq))
    pos = np.arange(order.size) - first[q_sorted]
    keep = pos < k
    sel, qs, ps = order[keep], q_sorted[keep], pos[keep]

    def grid(values, fill, dtype):
        out = np.full((nq, k), fill, dtype=dtype)
        out[qs, ps] = values
        return out

    return Fused(ids=grid(id_of[sel], -1, np.int64), scores=grid(score[sel], -np.inf, np.float64),
                 bm25_rank=grid(rank_b[sel], 0, np.int64), dense_rank=grid(rank_d[sel], 0, np.int64),
                 passage=grid(aux_b[sel], -1, np.int64), chunk=grid(aux_d[sel], -1, np.int64))


class HybridSearcher:
    """BM25 (``unit`` "document" or "passage") fused with the embedding index. Create with :meth:`open`."""

    def __init__(self, retriever: Retriever, dense, unit: str, dense_notes: list[Note]):
        self.retriever = retriever
        self.workspace: Workspace = retriever.workspace
        self.dense = dense  # an EmbedSearcher, or None: BM25 alone (dense_notes say why)
        self.unit = unit
        self._dense_notes = dense_notes
        self._store_to_doc: np.ndarray | None = None
        self._pdoc_to_doc: np.ndarray | None = None
        cfg = self.workspace.config.hybrid
        if cfg.weight_bm25 == 0 and cfg.weight_dense == 0:
            raise ConfigError(f"{self.workspace.config.source}: [hybrid] weight_bm25 and weight_dense are both 0; "
                              "allowed: at least one above 0")

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             unit: str = "document", update: bool = True, backend: str | None = None,
             device: str | None = None, progress=None) -> "HybridSearcher":
        """Open BM25 (brought up to date unless ``update`` is False) and the embedding index for
        ``[enrich].embed_model``. A missing or unusable embedding index is not an error: the searcher
        then ranks by BM25 alone, with a note naming the command that builds it. ``device`` is the
        embedding side's (``[enrich].device``); ``backend`` BM25's."""
        from chitragupta.enrich.search import EmbedSearcher
        from chitragupta.errors import MissingExtra

        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        if unit not in Retriever.UNITS:
            raise UsageError(f"unknown unit {unit!r}; allowed: {', '.join(Retriever.UNITS)}")
        retriever = Retriever.open(ws, update=update, backend=backend, progress=progress)
        notes: list[Note] = []
        try:
            dense = EmbedSearcher.open(ws, device=device)
        except (UsageError, MissingExtra) as err:
            dense = None
            notes.append(Note("hybrid", f"hybrid search is BM25 alone: {err}"))
        return cls(retriever, dense, unit, notes)

    # -- notes --------------------------------------------------------------------------------------
    def index_notes(self) -> list[Note]:
        notes = list(self.retriever.index_notes(self.unit))
        notes += self._dense_notes
        if self.dense is not None:
            notes += self.dense.index_notes()
            stale = self._stale_sources()
            if stale:
                notes.append(Note("hybrid", f"{stale} source(s) in the embedding index are not in the BM25 index "
                                            "and are ranked by BM25's side only if at all; run `chitragupta enrich "
                                            "--stages embed`"))
        cfg = self.workspace.config.hybrid
        notes.append(Note("hybrid", f"fusion {cfg.method}" + (f" (k={cfg.rrf_k:g})" if cfg.method == "rrf" else "")
                          + f", weights bm25 {cfg.weight_bm25:g} / dense {cfg.weight_dense:g}, depth {cfg.depth}, "
                            f"BM25 unit {self.unit}"))
        return notes

    def _stale_sources(self) -> int:
        s2d = self._store_map()
        return int(np.count_nonzero((s2d < 0) & self.dense._live)) if s2d.size else 0

    # -- id spaces: everything is a row of the BM25 document index -----------------------------------
    def _store_map(self) -> np.ndarray:
        """Embedding store document position -> BM25 document row (-1: not in the index)."""
        if self._store_to_doc is None:
            table = self.retriever.index.citekeys
            self._store_to_doc = np.asarray(table.find_many(self.dense.store.citekeys), dtype=np.int64)
        return self._store_to_doc

    def _pdoc_map(self) -> np.ndarray:
        """Passage index document row -> BM25 document row."""
        if self._pdoc_to_doc is None:
            pidx = self.retriever.passage_index()
            keys = pidx.citekeys.strings_at(np.arange(len(pidx.citekeys))).tolist()
            self._pdoc_to_doc = np.asarray(self.retriever.index.citekeys.find_many(keys), dtype=np.int64)
        return self._pdoc_to_doc

    # -- ranking ------------------------------------------------------------------------------------
    def _bm25(self, queries: list[str], depth: int):
        """(ids, scores, passage ids or None, Ranked) of BM25's top ``depth`` sources per query."""
        if self.unit == "document":
            ranked = self.retriever.rank_many(queries, depth)
            return ranked.topk.ids.astype(np.int64), ranked.topk.scores, None, ranked
        ranked = self.retriever.rank_many(queries, depth, unit="passage", max_per_source=1)
        units = ranked.topk.ids.astype(np.int64)
        pidx = self.retriever.passage_index()
        docs = np.full(units.shape, -1, dtype=np.int64)
        valid = units >= 0
        docs[valid] = self._pdoc_map()[np.asarray(pidx.p_doc)[units[valid]]]
        return docs, ranked.topk.scores, units, ranked

    def _dense(self, queries: list[str], depth: int):
        """(ids, scores, chunk rows) of the embedding index's top ``depth`` sources per query."""
        nq = len(queries)
        ids = np.full((nq, depth), -1, dtype=np.int64)
        scores = np.full((nq, depth), -np.inf, dtype=np.float64)
        rows = np.full((nq, depth), -1, dtype=np.int64)
        if self.dense is None or not nq:
            return ids, scores, rows
        ranked = self.dense.rank_many(queries, depth, max_per_source=1)
        s2d = self._store_map()
        chunk_doc = np.asarray(self.dense.store.chunk_doc, dtype=np.int64)
        for q, hits in enumerate(ranked):
            if not hits:
                continue
            r = np.fromiter((h[0] for h in hits), dtype=np.int64, count=len(hits))
            d = s2d[chunk_doc[r]]
            keep = d >= 0
            n = int(keep.sum())
            ids[q, :n], rows[q, :n] = d[keep], r[keep]
            scores[q, :n] = np.fromiter((h[1] for h in hits), dtype=np.float64, count=len(hits))[keep]
        return ids, scores, rows

    def rank_many(self, queries: Sequence[str], k: int = 10) -> "HybridRanked":
        """Fuse BM25's and the embedding index's top ``max(depth, k)`` sources per query; keep k."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise UsageError(f"k must be an integer >= 1, got {k!r}")
        queries = list(queries)
        cfg = self.workspace.config.hybrid
        k = int(min(k, max(1, self.retriever.index.n_docs)))
        depth = max(int(cfg.depth), k)
        b_ids, b_scores, b_aux, ranked = self._bm25(queries, depth)
        d_ids, d_scores, d_rows = self._dense(queries, depth)
        weight_dense = cfg.weight_dense if self.dense is not None else 0.0
        weight_bm25 = cfg.weight_bm25 if self.dense is not None else 1.0  # BM25 alone: its own order
        fused = fuse(b_ids, b_scores, d_ids, d_scores, k, method=cfg.method, rrf_k=cfg.rrf_k,
                     weight_bm25=weight_bm25, weight_dense=weight_dense, bm25_aux=b_aux, dense_aux=d_rows)
        return HybridRanked(fused, queries, self, ranked)

    # -- citable hits -------------------------------------------------------------------------------
    def _hit(self, fused: Fused, q: int, j: int, terms: list[str], width: int, cache: dict,
             query: str) -> SearchResult:
        doc, score = int(fused.ids[q, j]), float(fused.scores[q, j])
        r = self.retriever
        if self.unit == "passage" and fused.passage[q, j] >= 0:
            return r.passage_hit(int(fused.passage[q, j]), score, cache)
        if self.unit == "document" and fused.bm25_rank[q, j] > 0:
            return r.doc_hit(doc, score, terms, width)
        hit = r.doc_hit(doc, score, terms, width if self.unit == "document" else 0)
        row = int(fused.chunk[q, j])
        if not hit.snippet and row >= 0 and width:
            # BM25 did not retrieve it (no query term, or below its depth): quote the chunk that did
            hit = SearchResult(citekey=hit.citekey, title=hit.title, score=score,
                               snippet=self.dense.snippet(row, query, width), page=None,
                               passage=int(self.dense.store.chunk_no[row]) if self.unit == "passage" else None)
        return hit

    def search_many(self, queries: Sequence[str], k: int = 10, *,
                    snippet_chars: int | None = None) -> list[SearchResponse]:
        """Batched hybrid search with citable hits; ``snippet_chars`` as for BM25 (None: configured)."""
        width = self.workspace.config.retrieval.snippet_chars if snippet_chars is None else int(snippet_chars)
        if width < 0:
            raise UsageError(f"snippet_chars must be >= 0, got {snippet_chars!r}")
        hr = self.rank_many(queries, k)
        terms, notes = hr.ranked.terms, hr.ranked.notes
        out, cache = [], {}
        for q, query in enumerate(hr.queries):
            n = int((hr.fused.ids[q] >= 0).sum())
            hits = [self._hit(hr.fused, q, j, terms[q], width, cache, query) for j in range(n)]
            out.append(SearchResponse(query=query, hits=hits, notes=list(notes[q]), terms=terms[q], unit=hr.unit))
        return out

    def search(self, query: str, k: int = 10, *, snippet_chars: int | None = None) -> SearchResponse:
        """One query: fused hits with snippets, and the notes (index notes first)."""
        resp = self.search_many([query], k, snippet_chars=snippet_chars)[0]
        resp.notes[:0] = self.index_notes()
        return resp


class HybridRanked:
    """A batch's fused ranking (``fused``), the BM25 side's ``Ranked`` (terms, notes), and run writing."""

    def __init__(self, fused: Fused, queries: list[str], searcher: HybridSearcher, ranked):
        self.fused, self.queries, self.searcher, self.ranked = fused, queries, searcher, ranked
        self.unit = f"hybrid-{searcher.unit}"

    def keys(self) -> list[list[str]]:
        """Every query's fused sources as citekeys, best first."""
        table = self.searcher.retriever.index.citekeys
        return [table.strings_at(row[row >= 0]).tolist() for row in self.fused.ids]

    def run_chunks(self, qids: Sequence[str], *, fmt: str = "trec", tag: str = RUN_TAG):
        """The batch as a run file (TREC or JSON lines): one line per fused source, docid the citekey."""
        from chitragupta.engine.trec import run_chunks

        if len(qids) != len(self.queries):
            raise UsageError(f"{len(qids)} query ids for {len(self.queries)} queries")
        ids = self.fused.ids
        mask = ids >= 0
        return run_chunks(qids, mask.sum(axis=1), ids[mask], self.fused.scores[mask],
                          self.searcher.retriever.index.citekeys, None, fmt=fmt, tag=tag)
