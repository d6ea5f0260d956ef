"""Hybrid retrieval: BM25 and the embedding index, fused per source.

    h = HybridSearcher.open("my-workspace", unit="document")   # or unit="passage"
    resp = h.search("digital twin fidelity", k=10)              # SearchResponse, as every engine returns
    ranked = h.rank_many(queries, k=100)                         # Ranked, as every engine returns

Each list is first collapsed to one entry per source: BM25 documents already are; BM25 passages keep each
source's best passage (``max_per_source=1``); the embedding index keeps each source's best chunk. So a source
appears at most once in a fused list -- the per-source cap of hybrid search is one -- and its hit carries the
BM25 snippet (document unit: the window of the document holding most query terms; passage unit: its best
passage, page and item number), or, when BM25 did not retrieve it, the window of its best chunk.

Fusion, ``[hybrid]``: each list contributes its top ``depth`` sources (at least k).
``rrf``: score = sum of weight / (rrf_k + rank), ranks from 1 (Cormack, Clarke and Buettcher 2009).
``minmax``: score = sum of weight x (s - min) / (max - min) within each list's top ``depth`` (1 when all
are equal). ``zscore``: score = sum of weight x (s - mean) / (standard deviation) within each list's top
``depth`` (0 when all are equal). A source absent from a list adds nothing. Ties: fused score, then BM25
rank, then dense rank, then index order -- so the order is the same on every device. The shipped fusion
(``[hybrid]`` in defaults.toml) was chosen on training queries by ``python -m bench fusion``.

BM25's side, ``[hybrid].bm25_stemmer``: "same" fuses the workspace's document (or passage) index; a
stemmer other than ``[retrieval].stemmer`` (the shipped "english", chosen by ``python -m bench fusion`` as
the rest) fuses hybrid's own BM25 index, built with that stemmer in ``content/index/hybrid-stem-<name>/``
beside the plain one (``bm25_workspace``): the same index machinery builds it (``chitragupta index`` once
an embedding store exists, else the first hybrid search) and refreshes it when the ledger or a parsed file
changes, under the same workspace lock, and its settings are recorded in its manifest like the plain one's. BM25 search itself keeps ``[retrieval].stemmer``. The notes name the
BM25 fused, and so does a run file's tag (``chitragupta-hybrid-bm25-<stemmer>``).

When the embedding index is missing or not usable, hybrid search is BM25 alone -- BM25 search itself,
on the workspace's index, whatever ``bm25_stemmer`` says -- and says so in a note.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from chitragupta.engine.library.config import FUSION_METHODS, Config
from chitragupta.notes import Note
from chitragupta.engine.search.results import Ranked, SearchResponse, SearchResult
from chitragupta.engine.search.bm25 import BM25Searcher
from chitragupta.engine.search.searcher import Searcher, check_k, check_max_per_source
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import ConfigError, UsageError
from chitragupta.kernels.types import TopK

__all__ = ["HybridSearcher", "Fused", "fuse", "open_dense", "bm25_workspace", "open_bm25", "bm25_stemmer",
           "own_index_to_build", "run_tag"]

log = logging.getLogger(__name__)

RUN_TAG = "chitragupta-hybrid"
OWN_INDEX_PREFIX = "hybrid-stem-"  # content/index/<this><stemmer>/: hybrid's own BM25 index


def bm25_stemmer(config: Config) -> str:
    """The stemmer of hybrid's BM25 side: ``[hybrid].bm25_stemmer``, "same" read as ``[retrieval].stemmer``."""
    want = config.hybrid.bm25_stemmer
    return config.retrieval.stemmer if want == "same" else want


@dataclass
class _OwnIndexWorkspace(Workspace):
    """The workspace seen by hybrid's BM25 side when it has its own index: the same folder, ledger, lock
    and parsed files, the configuration with ``[retrieval].stemmer`` set to hybrid's, and the index
    folders under ``content/index/<index_name>/`` (so it never replaces the plain index, nor is replaced)."""

    index_name: str = ""

    @property
    def index_dir(self) -> Path:
        return self.content / "index" / self.index_name


def bm25_workspace(ws: Workspace) -> Workspace:
    """The workspace whose BM25 index hybrid fuses: ``ws`` itself when ``[hybrid].bm25_stemmer`` is "same"
    or ``[retrieval].stemmer`` already, else a view of it with hybrid's stemmer and its own index folder."""
    stem = bm25_stemmer(ws.config)
    if stem == ws.config.retrieval.stemmer:
        return ws
    cfg = dataclasses.replace(ws.config, retrieval=dataclasses.replace(ws.config.retrieval, stemmer=stem))
    return _OwnIndexWorkspace(root=ws.root, config=cfg, index_name=OWN_INDEX_PREFIX + stem)


def own_index_to_build(ws: Workspace) -> Workspace | None:
    """What ``chitragupta index`` builds beside the document index for hybrid search: hybrid's own BM25
    workspace (``bm25_workspace``) when it differs from ``ws`` and the embedding store hybrid fuses exists;
    else None (BM25-only users pay for no second index; a hybrid search builds it on first use anyway)."""
    from chitragupta.enrich.search import store_signature

    own = bm25_workspace(ws)
    return own if own is not ws and store_signature(ws) is not None else None


def open_bm25(ws: Workspace, plain=None, *, fused: bool = True, update: bool = True, backend: str | None = None,
              progress=None) -> BM25Searcher:
    """Hybrid's BM25 side: the workspace's own BM25 searcher (``plain()``, a callable giving one already
    open, or a new one) when hybrid fuses the plain index, or fuses nothing (``fused`` False: no usable
    embedding index, so hybrid search is BM25 search, and no second index is built for it); else a
    searcher over hybrid's own index, built or brought up to date as the plain one is (unless ``update``
    is False)."""
    own = bm25_workspace(ws) if fused else ws
    if own is ws and plain is not None:
        return plain()
    return BM25Searcher.open(own, update=update, backend=backend, progress=progress)


def run_tag(retriever: BM25Searcher) -> str:
    """A run file's tag for hybrid: which BM25 it fused (``chitragupta-hybrid-bm25-english``)."""
    return f"{RUN_TAG}-bm25-{retriever.workspace.config.retrieval.stemmer}"


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
    if method == "zscore":
        n = np.maximum(valid.sum(axis=1, keepdims=True), 1)
        mean = np.where(valid, s, 0.0).sum(axis=1, keepdims=True) / n
        with np.errstate(invalid="ignore", over="ignore"):
            sd = np.sqrt(np.where(valid, (s - mean) ** 2, 0.0).sum(axis=1, keepdims=True) / n)
            scaled = np.where(sd > 0, (s - mean) / np.where(sd > 0, sd, 1.0), 0.0)
        out[valid] = weight * scaled[valid]
        return out
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
    if method not in FUSION_METHODS:
        raise ConfigError(f"[hybrid] method = {method!r} is not allowed; allowed: "
                          + ", ".join(f'"{m}"' for m in FUSION_METHODS))
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


class HybridSearcher(Searcher):
    """BM25 (``unit`` "document" or "passage") fused with the embedding index. Create with :meth:`open`,
    or from an open ``BM25Searcher`` (``open_bm25``: the one ``[hybrid].bm25_stemmer`` names) and
    ``EmbedSearcher`` (None: BM25 alone, ``dense_notes`` saying why).
    ``unit`` is the default of calls that give none; every call may name the other."""

    NAME = "hybrid"
    UNITS = BM25Searcher.UNITS

    def __init__(self, retriever: BM25Searcher, dense, unit: str = "document", dense_notes: list[Note] | None = None,
                 dense_failed_at: tuple | None = None):
        self.retriever = retriever
        self.workspace: Workspace = retriever.workspace
        self.dense = dense  # an EmbedSearcher, or None: BM25 alone (dense_notes say why)
        self.unit = self.check_unit(unit)
        self._dense_notes = list(dense_notes or [])
        self._dense_failed_at = dense_failed_at  # the store's signature when opening it failed
        if dense is not None:
            partial = coverage_note(self.workspace, dense)
            if partial is not None:  # a partial index would rank the sources it lacks below BM25's order
                self.dense = None
                self._dense_notes.append(partial)
        self._store_to_doc: tuple | None = None
        self._pdoc_to_doc: tuple | None = None
        cfg = self.workspace.config.hybrid
        if cfg.weight_bm25 == 0 and cfg.weight_dense == 0:
            raise ConfigError(f"{self.workspace.config.source}: [hybrid] weight_bm25 and weight_dense are both 0; "
                              "allowed: at least one above 0")

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             unit: str = "document", update: bool = True, backend: str | None = None,
             device: str | None = None, progress=None) -> "HybridSearcher":
        """Open hybrid's BM25 side (``open_bm25``: the workspace's index, or hybrid's own for a
        ``[hybrid].bm25_stemmer`` of its own; brought up to date unless ``update`` is False) and the embedding index for
        ``[enrich].embed_model``. A missing or unusable embedding index is not an error: the searcher
        then ranks by BM25 alone, with a note naming the command that builds it. ``device`` is the
        embedding side's (``[enrich].device``); ``backend`` BM25's."""
        from chitragupta.enrich.search import store_signature

        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        cls.check_unit(cls, unit)
        dense, notes = open_dense(ws, device)
        if dense is not None and (partial := coverage_note(ws, dense)) is not None:
            dense, notes = None, notes + [partial]
        retriever = open_bm25(ws, fused=dense is not None, update=update, backend=backend, progress=progress)
        return cls(retriever, dense, unit, notes, None if dense is not None else store_signature(ws))

    def changed(self) -> bool:
        """Whether either side moved on since this searcher opened: BM25's workspace, the embedding
        store saved again, or a store that could not be opened then has appeared or changed since."""
        from chitragupta.enrich.search import store_signature

        if self.retriever.changed():
            return True
        if self.dense is not None:
            return self.dense.changed()
        return store_signature(self.workspace) != self._dense_failed_at

    def _unit(self, unit: str | None) -> str:
        return self.unit if unit is None else self.check_unit(unit)

    # -- notes --------------------------------------------------------------------------------------
    def index_notes(self, unit: str | None = None) -> list[Note]:
        unit = self._unit(unit)
        notes = list(self.retriever.index_notes(unit))
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
                            f"BM25 unit {unit}, {self.bm25_label()}"))
        return notes

    def bm25_label(self) -> str:
        """Which BM25 is fused: its stemmer, and whether it is hybrid's own index or the workspace's."""
        ws = self.retriever.workspace
        stem = ws.config.retrieval.stemmer
        where = (f"hybrid's own index, content/index/{ws.index_name}" if isinstance(ws, _OwnIndexWorkspace)
                 else "the workspace's index")
        return f"BM25 stemmer {stem} ({where})"

    def _stale_sources(self) -> int:
        s2d = self._store_map()
        return int(np.count_nonzero((s2d < 0) & self.dense._live)) if s2d.size else 0

    # -- id spaces: everything is a row of the BM25 document index -----------------------------------
    def _store_map(self) -> np.ndarray:
        """Embedding store document position -> BM25 document row (-1: not in the index)."""
        index, store = self.retriever.index, self.dense.store
        if self._store_to_doc is None or self._store_to_doc[0] is not index or self._store_to_doc[1] is not store:
            self._store_to_doc = (index, store, np.asarray(index.citekeys.find_many(store.citekeys), dtype=np.int64))
        return self._store_to_doc[2]

    def _pdoc_map(self) -> np.ndarray:
        """Passage index document row -> BM25 document row."""
        index, pidx = self.retriever.index, self.retriever.passage_index()
        if self._pdoc_to_doc is None or self._pdoc_to_doc[0] is not index or self._pdoc_to_doc[1] is not pidx:
            keys = pidx.citekeys.strings_at(np.arange(len(pidx.citekeys))).tolist()
            self._pdoc_to_doc = (index, pidx, np.asarray(index.citekeys.find_many(keys), dtype=np.int64))
        return self._pdoc_to_doc[2]

    # -- ranking ------------------------------------------------------------------------------------
    def _bm25(self, queries: list[str], depth: int, unit: str, filters=None, syntax=None):
        """(ids, scores, passage ids or None, Ranked) of BM25's top ``depth`` sources per query."""
        if unit == "document":
            ranked = self.retriever.rank_many(queries, depth, filters=filters, syntax=syntax)
            return ranked.topk.ids.astype(np.int64), ranked.topk.scores, None, ranked
        ranked = self.retriever.rank_many(queries, depth, unit="passage", max_per_source=1, filters=filters,
                                          syntax=syntax)
        units = ranked.topk.ids.astype(np.int64)
        valid = units >= 0
        docs = np.where(valid, self._pdoc_map()[np.where(valid, ranked.rows, 0)] if valid.any() else -1, -1)
        return docs, ranked.topk.scores, units, ranked

    def _dense(self, queries: list[str], depth: int, filters=None):
        """(ids, scores, chunk rows) of the embedding index's top ``depth`` sources per query."""
        nq = len(queries)
        if self.dense is None or not nq:
            return (np.full((nq, depth), -1, dtype=np.int64), np.full((nq, depth), -np.inf),
                    np.full((nq, depth), -1, dtype=np.int64))
        return self._dense_sources(self.dense.rank_many(queries, depth, max_per_source=1, filters=filters))

    def _dense_sources(self, ranked: Ranked):
        """(ids, scores, chunk rows) of an embedding ``Ranked`` with one chunk per source, in BM25 rows."""
        rows, chunks, scores = ranked.rows, ranked.topk.ids, ranked.topk.scores
        valid = chunks >= 0
        docs = np.where(valid, self._store_map()[np.where(valid, rows, 0)], -1)
        keep = docs >= 0  # sources the BM25 index lacks drop out; the rest move up, in order
        order = np.argsort(~keep, axis=1, kind="stable")
        keep_sorted = np.take_along_axis(keep, order, 1)
        ids = np.where(keep_sorted, np.take_along_axis(docs, order, 1), -1)
        out_scores = np.where(keep_sorted, np.take_along_axis(scores, order, 1), -np.inf)
        out_rows = np.where(keep_sorted, np.take_along_axis(chunks, order, 1), -1)
        return ids, out_scores, out_rows

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str | None = None,
                  max_per_source: int | None = None, filters=None, syntax: bool | str | None = None) -> Ranked:
        """Fuse BM25's and the embedding index's top ``max(depth, k)`` sources per query; keep k.
        ``topk.ids`` are rows of the BM25 document index; ``columns`` hold each source's rank in either
        list (0: absent), its best BM25 passage and its best chunk (-1: none). A fused list holds each
        source once, so any ``max_per_source`` (checked as every engine checks it) is met. ``filters``
        (as BM25's) are applied on both sides, each before its top-k; the notes are BM25's."""
        from chitragupta.engine.search.filters import per_query

        k = check_k(k)
        check_max_per_source(max_per_source)
        unit = self._unit(unit)
        queries = list(queries)
        fl = per_query(filters, len(queries))
        cfg = self.workspace.config.hybrid
        k = int(min(k, max(1, self.retriever.index.n_docs)))
        depth = max(int(cfg.depth), k)
        b_ids, b_scores, b_aux, ranked = self._bm25(queries, depth, unit, fl, syntax)
        dense = self._dense(queries, depth, fl)
        out = self._fused(queries, k, unit, (b_ids, b_scores, b_aux), ranked.plan, dense, self.dense is not None)
        out.filter_notes = getattr(ranked, "filter_notes", None)
        return out

    def _fused(self, queries: list[str], k: int, unit: str, bm25: tuple, plan, dense: tuple, with_dense: bool) -> Ranked:
        """The two sides' (ids, scores, aux) fused per source under ``[hybrid]`` (BM25 alone, in its own
        order, without a dense side), as a ``Ranked``."""
        cfg = self.workspace.config.hybrid
        weight_dense = cfg.weight_dense if with_dense else 0.0
        weight_bm25 = cfg.weight_bm25 if with_dense else 1.0  # BM25 alone: its own order
        fused = fuse(bm25[0], bm25[1], dense[0], dense[1], k, method=cfg.method, rrf_k=cfg.rrf_k,
                     weight_bm25=weight_bm25, weight_dense=weight_dense, bm25_aux=bm25[2], dense_aux=dense[2])
        return Ranked(TopK(fused.ids, fused.scores), queries, unit=unit, engine=self.NAME,
                      table=self.retriever.index.citekeys, plan=plan, tag=run_tag(self.retriever),
                      columns={"bm25_rank": fused.bm25_rank, "dense_rank": fused.dense_rank,
                               "passage": fused.passage, "chunk": fused.chunk})

    def rank_similar(self, citekey: str, k: int = 10, *, filters=None) -> Ranked:
        """The sources most like ``citekey`` by BM25 (its distinctive terms) and by the embedding index (the
        mean of its chunk vectors), fused per source as a query's lists are; never ``citekey`` itself; both
        sides only among the sources ``filters`` allow. A source the embedding index lacks is ranked by BM25
        alone."""
        k = check_k(k)
        k = int(min(k, max(1, self.retriever.index.n_docs - 1)))
        depth = max(int(self.workspace.config.hybrid.depth), k)
        ranked = self.retriever.rank_similar(citekey, depth, filters=filters)
        bm25 = (ranked.topk.ids.astype(np.int64), ranked.topk.scores, None)
        with_dense = self.dense is not None
        dense = (np.full((1, depth), -1, dtype=np.int64), np.full((1, depth), -np.inf),
                 np.full((1, depth), -1, dtype=np.int64))
        if with_dense:
            try:
                dense = self._dense_sources(self.dense.rank_similar(citekey, depth, filters=filters))
            except UsageError:  # not in the embedding index (yet): BM25's list alone
                with_dense = False
        out = self._fused(ranked.queries, k, "document", bm25, ranked.plan, dense, with_dense)
        out.filter_notes = ranked.filter_notes
        return out

    # -- citable hits -------------------------------------------------------------------------------
    def _hit(self, ranked: Ranked, q: int, j: int, terms: list[str], width: int, cache: dict,
             dense_terms: list[str]) -> SearchResult:
        doc, score = int(ranked.topk.ids[q, j]), float(ranked.topk.scores[q, j])
        cols = ranked.columns
        passage = int(cols["passage"][q, j])
        r = self.retriever
        by_passage = ranked.unit == "passage"
        if by_passage and passage >= 0:
            return r.passage_hit(passage, score, cache, terms, width)
        if not by_passage and cols["bm25_rank"][q, j] > 0:
            return r.doc_hit(doc, score, terms, width)
        hit = r.doc_hit(doc, score, terms, 0 if by_passage else width)
        row = int(cols["chunk"][q, j])
        if not hit.snippet and row >= 0 and width:
            # BM25 did not retrieve it (no query term, or below its depth): quote the chunk that did
            hit = SearchResult(citekey=hit.citekey, title=hit.title, score=score,
                               snippet=self.dense.snippet(row, dense_terms, width), page=None,
                               passage=int(self.dense.store.chunk_no[row]) if by_passage else None)
        return hit

    def responses(self, ranked: Ranked, *, snippet_chars: int | None = None) -> list[SearchResponse]:
        """``ranked`` (from ``rank_many``) as citable hits; ``snippet_chars`` as for BM25 (None: configured)."""
        width = self.snippet_width(snippet_chars)
        terms, notes = ranked.terms, ranked.notes
        out, cache = [], {}
        for q, query in enumerate(ranked.queries):
            n = int((ranked.topk.ids[q] >= 0).sum())
            dense_terms = self.dense.query_terms(query) if self.dense is not None and width and n else []
            hits = [self._hit(ranked, q, j, terms[q], width, cache, dense_terms) for j in range(n)]
            out.append(SearchResponse(query=query, hits=hits, notes=list(notes[q]), terms=terms[q], unit=ranked.unit))
        return out


def coverage_note(ws: Workspace, dense) -> Note | None:
    """None when the embedding index holds every parsed source that has text; else the note that says
    hybrid search is BM25 alone, with the coverage and the command that completes it.

    Fusing a partial index ranks each source it lacks by BM25's side alone, below sources both sides
    found: with 25% of scifact encoded, hybrid nDCG@10 was .4012 against BM25's .6624 (RESULTS.md).
    A parsed text that is empty (a file, or a packed reference of length 0) is not counted (the embed stage
    skips it too)."""
    from chitragupta.engine.library.texts import split_ref
    from chitragupta.engine.index.source import has_text

    lacking = 0
    for _key, rel in dense.missing:
        if not rel:
            continue
        ref = split_ref(rel)
        if ref is not None:  # a packed text (import's packs): its length is in the reference
            lacking += ref[2] > 0 and has_text(ws.root / rel)
            continue
        try:
            lacking += os.stat(ws.root / rel).st_size > 0
        except OSError:  # the parsed file is gone: the embed stage cannot encode it either
            continue
    if not lacking:
        return None
    total = dense.covered + lacking
    return Note("hybrid", f"hybrid search is BM25 alone: the embedding index holds {dense.covered} of {total} "
                          f"parsed sources ({dense.covered / total:.0%}), and fusing a partial index ranks the "
                          f"{lacking} it lacks below BM25's order; run `chitragupta enrich --stages embed` to "
                          "encode them")


def open_dense(ws: Workspace, device: str | None = None):
    """(the workspace's ``EmbedSearcher``, []), or (None, [a note saying why hybrid search is BM25 alone])
    when the embedding index is missing or unusable or the enrich extra is not installed."""
    from chitragupta.enrich.search import EmbedSearcher
    from chitragupta.errors import MissingExtra, WorkspaceError

    try:
        return EmbedSearcher.open(ws, device=device), []
    except (UsageError, MissingExtra, WorkspaceError) as err:  # WorkspaceError: the ledger cannot be read
        return None, [Note("hybrid", f"hybrid search is BM25 alone: {err}")]
