"""Embedding search: the drop-in alternative to BM25, returning the same SearchResponse.

    s = EmbedSearcher.open("my-workspace")              # the store built by `enrich --stages embed`
    resp = s.search("digital twin fidelity", k=10)      # hits: citekey, title, cosine score, snippet
    many = s.search_many(["q1", "q2"], k=100)

A query is encoded by the store's model, and the k x ``[enrich].embed_overfetch`` most similar chunks are
fetched by exact inner product (vectors are L2-normalised, so the score is cosine similarity, higher
first; ties by chunk order). The optional cross-encoder (``[enrich].rerank_model``) reorders that list,
then each citekey is capped at ``[enrich].embed_max_passages_per_source`` chunks, *then* it is cut to k:
a dominant source's excess promotes another source's chunk instead of shortening the list, and a list
that still falls short while more chunks exist is fetched again deeper (``engine.searcher.deepen_capped``,
as BM25's passages are).

Search runs where ``[enrich].device`` resolves: FAISS on the GPU when it is "cuda" and faiss has GPU
support, else FAISS on the CPU. Both are exact, so only speed differs.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from chitragupta.engine.library.config import Config
from chitragupta.engine.search.filters import per_query
from chitragupta.errors import UsageError, WorkspaceError
from chitragupta.notes import Note
from chitragupta.engine.search.results import Ranked, SearchResponse, SearchResult
from chitragupta.engine.search.searcher import Searcher, check_k, check_max_per_source, deepen_capped
from chitragupta.engine.text.windows import fitted, normalize_ws
from chitragupta.engine.library.workspace import Workspace
from chitragupta.extras import require
from chitragupta.kernels.types import TopK

__all__ = ["EmbedSearcher", "NOT_BUILT_HINT", "store_signature"]

log = logging.getLogger(__name__)

NOT_BUILT_HINT = "run `chitragupta enrich --stages embed`"


def _signature(folder: Path) -> tuple | None:
    """What changes when the store is saved again: a save swaps in a new folder (a new inode) holding a
    new manifest."""
    try:
        st, man = os.stat(folder), os.stat(folder / "manifest.json")
    except OSError:
        return None
    return (st.st_ino, st.st_dev, man.st_ino, man.st_mtime_ns, man.st_size)


def store_signature(ws: Workspace) -> tuple | None:
    """``_signature`` of the store folder for ``[enrich].embed_model`` (None when there is none)."""
    from chitragupta.enrich.embed import model_slug
    from chitragupta.enrich.store import store_folder

    return _signature(store_folder(ws.content, model_slug(str(ws.config.enrich.embed_model).strip())))


class EmbedSearcher(Searcher):
    """Search a workspace's embedding store. Create with :meth:`open`."""

    NAME = "embed"
    UNIT = "chunk"
    UNITS = (UNIT,)

    def __init__(self, ws: Workspace, store, encoder, device: str, folder: Path, reranker=None):
        self.workspace = ws
        self.store = store
        self.encoder = encoder
        self.device = device
        self.folder = folder
        self.reranker = reranker
        self._search_fn = None
        self._model_lock = threading.Lock()  # the tokenizers and models take one thread at a time
        self._table = None
        self._seen: tuple | None = None  # (the store's signature, the workspace's stamp) when opened
        self._live, self._titles, self._notes = self._ledger_view()
        from chitragupta.engine.text.stem import get_stemmer

        self._stem = get_stemmer(ws.config.retrieval.stemmer)

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             device: str | None = None) -> "EmbedSearcher":
        """Open the store for ``[enrich].embed_model``. UsageError when it has not been built (naming the
        command that builds it) or fails its checks; MissingExtra when the enrich extra is absent."""
        from chitragupta.enrich.device import resolve_device
        from chitragupta.enrich.embed import load_query_encoder, model_slug, recipe
        from chitragupta.enrich.rerank import load_reranker
        from chitragupta.enrich.store import StoreCorrupt, load_store, store_folder

        from chitragupta.engine.index.manage import stamp

        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        require("faiss", "enrich", "embedding search")
        cfg = ws.config.enrich
        name = str(cfg.embed_model).strip()
        link = store_folder(ws.content, model_slug(name))
        try:
            folder = ws.inside_content(link)
        except WorkspaceError:  # a search writes nothing, but reads only what the workspace holds
            raise UsageError(f"the embedding index content/faiss/{link.name}/ leads outside content/ (to "
                             f"{link.resolve()}), so it is not read; move it back inside, or {NOT_BUILT_HINT} "
                             "to build one in place") from None
        seen = (_signature(folder), stamp(ws) if ws.ledger_path.exists() else None)
        if not folder.is_dir():
            raise UsageError(f"no embedding index for [enrich].embed_model = {name!r} "
                             f"(content/faiss/{folder.name}/ does not exist); {NOT_BUILT_HINT}")
        dev = resolve_device(device or cfg.device)
        enc = load_query_encoder(cfg, dev)
        try:
            store = load_store(folder, model=enc.model_name, dim=enc.dim, recipe=recipe(enc))
        except StoreCorrupt as err:
            raise UsageError(f"the embedding index in content/faiss/{folder.name}/ is not usable ({err}); "
                             f"{NOT_BUILT_HINT} to rebuild it") from err
        searcher = cls(ws, store, enc, dev, folder, load_reranker(cfg, dev))
        searcher._seen = seen
        return searcher

    def changed(self) -> bool:
        """Whether the store was rebuilt or the ledger changed since this searcher opened (a long-lived
        caller opens a new one then: hits must stay ledger rows, with their current titles)."""
        from chitragupta.engine.index.manage import stamp

        if self._seen is None or self._seen[1] is None:
            return True
        try:
            return (_signature(self.folder), stamp(self.workspace)) != self._seen
        except Exception:  # the ledger cannot be read now: let the reopen say why
            return True

    # -- the ledger: every hit must still be a ledger row ---------------------------------------------
    def _ledger_view(self) -> tuple[np.ndarray, list[str], list[Note]]:
        from chitragupta.engine.library.ledger import Ledger

        store = self.store
        titles = list(store.titles)
        live = np.ones(len(store.citekeys), dtype=bool)
        notes: list[Note] = []
        self.missing, self.covered = [], len(store.citekeys)
        if not self.workspace.ledger_path.exists():
            return live, titles, notes
        with Ledger(self.workspace.ledger_path, create=False) as ledger:
            rows = ledger.index_view()
        view = {k: (t, status) for k, t, status, _rel in rows}
        rels = {k: rel for k, _t, _status, rel in rows}
        pos = {k: i for i, k in enumerate(store.citekeys)}
        for i, k in enumerate(store.citekeys):
            if k in view:
                titles[i] = view[k][0]
            else:
                live[i] = False
        gone = int((~live).sum())
        missing = [k for k, (_t, status) in view.items() if k not in pos and status == "parsed"]
        # what hybrid search needs to tell whether the index covers the corpus: (citekey, parsed file) of
        # each parsed source the index lacks, and how many of its sources are live
        self.missing = [(k, rels[k]) for k in missing]
        self.covered = int(live.sum())
        if gone:
            notes.append(Note("index", f"{gone} source(s) in the embedding index are no longer in the ledger and "
                                       f"are never returned; {NOT_BUILT_HINT} to drop them"))
        if missing:
            notes.append(Note("index", f"{len(missing)} parsed source(s) in the ledger are not in the embedding "
                                       f"index and cannot be returned; {NOT_BUILT_HINT}"))
        return live, titles, notes

    def index_notes(self, unit: str | None = None) -> list[Note]:
        notes = list(self._notes)
        if self.reranker is not None:
            notes.append(Note("rerank", f"candidates reordered by the cross-encoder in {self.reranker.path}"))
        return notes

    # -- exact nearest chunks ------------------------------------------------------------------------
    def _searcher(self):
        """``(queries (q, dim) float32, n) -> (scores (q, n), rows (q, n))``, chosen once per device."""
        if self._search_fn is not None:
            return self._search_fn
        from chitragupta.enrich.device import faiss_gpu_available

        index = self.store.faiss_index()
        if self.device == "cuda" and faiss_gpu_available():
            faiss = require("faiss", "enrich", "embedding search")
            self._gpu_res = faiss.StandardGpuResources()
            gpu = faiss.index_cpu_to_gpu(self._gpu_res, 0, index)
            self._search_fn = lambda q, n: gpu.search(q, n)
            log.info("embedding search: faiss on the GPU")
        else:
            if self.device == "cuda":
                log.info("embedding search: faiss has no GPU support here; exact search by faiss on the CPU")
            self._search_fn = lambda q, n: index.search(q, n)
        return self._search_fn

    def key_table(self):
        """The store's citekeys as a ``StringTable`` (positions are the store's document positions)."""
        if self._table is None:
            from chitragupta.engine.index.strings import StringTable

            self._table = StringTable.from_strings(self.store.citekeys)
        return self._table

    def encode(self, queries: Sequence[str]) -> np.ndarray:
        """The queries' vectors as ``rank_many`` scores them: (q, dim) float32, L2-normalised (one thread at
        a time through the model)."""
        with self._model_lock:
            return np.ascontiguousarray(self.encoder.encode_queries(list(queries)), dtype=np.float32)

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str | None = None,
                  max_per_source: int | None = None, filters=None, syntax: bool | str | None = None) -> Ranked:
        """Per query, up to k chunks best first (``topk.ids``: chunk rows of the store): over-fetch, rerank
        if configured, cap (at ``max_per_source``, default ``[enrich].embed_max_passages_per_source``), cut;
        a capped list that falls short while more chunks exist is fetched again deeper. The query is
        encoded as written (``syntax`` is BM25's and is not read here).
        The key table is the store's citekeys; each hit's item is its chunk number."""
        self.check_unit(unit)
        k = check_k(k)
        cap = check_max_per_source(max_per_source)
        queries = list(queries)
        fl = per_query(filters, len(queries))
        masks, notes = self._filter_masks(fl)
        cfg = self.workspace.config.enrich
        if cap is None:
            cap = int(cfg.embed_max_passages_per_source)
        n_chunks = self.store.count
        top = TopK.empty(len(queries), k)
        if queries and n_chunks:
            qv = self.encode(queries)
            doc = np.asarray(self.store.chunk_doc, dtype=np.int64)

            def rank(todo: np.ndarray, depth: int):
                rows, scores = self._nearest(qv[todo], depth, [queries[q] for q in todo.tolist()],
                                             None if masks is None else [masks[q] for q in todo.tolist()])
                return rows, doc[np.where(rows >= 0, rows, 0)], scores

            top.ids[:], top.scores[:] = deepen_capped(rank, len(queries), k, cap, n_chunks,
                                                      k * int(cfg.embed_overfetch))
        hit = top.ids >= 0
        safe = np.where(hit, top.ids, 0)
        doc_rows = np.where(hit, np.asarray(self.store.chunk_doc, dtype=np.int64)[safe] if n_chunks else -1, -1)
        items = np.where(hit, np.asarray(self.store.chunk_no, dtype=np.int64)[safe] if n_chunks else -1, -1)
        ranked = Ranked(top, queries, unit=self.UNIT, table=self.key_table(), rows=doc_rows, items=items,
                        item_field="chunk", engine=self.NAME)
        ranked.filter_notes = notes
        return ranked

    # -- metadata filters: an exact scan of the allowed chunks ---------------------------------------
    def _filter_masks(self, fl: list | None):
        """(per query None or the (n_chunks,) bool mask of the chunks of the sources its filters allow,
        the filter notes per query), or (None, None) when no query is filtered. Built once per distinct
        filter for this searcher's life (a changed ledger or store opens a new searcher)."""
        if fl is None:
            return None, None
        from chitragupta.engine.library.ledger import Ledger
        from chitragupta.engine.library.metadata import Facets, facets
        from chitragupta.engine.search.filters import FacetTable

        if getattr(self, "_facet_table", None) is None:
            if self.workspace.ledger_path.exists():
                with Ledger(self.workspace.ledger_path, create=False) as ledger:
                    got = facets(ledger)
            else:  # no ledger: no source has metadata
                got = Facets([], [], [], [], [], [], [])
            self._chunk_masks = {}  # first: another thread reads it once the table is set
            self._facet_table = FacetTable(got, list(self.store.citekeys), topics=self.workspace.content / "topics.json")
        doc = np.asarray(self.store.chunk_doc, dtype=np.int64)
        masks, notes = [], []
        for f in fl:
            if f is None:
                masks.append(None)
                notes.append([])
                continue
            key = (f, self._facet_table.stamp(f))  # (a rewritten topics.json: masks made again)
            got = self._chunk_masks.get(key)
            if got is None:
                docs, missing = self._facet_table.mask(f)
                got = self._chunk_masks[key] = ((docs & self._live)[doc] if doc.size else np.zeros(0, dtype=bool),
                                              self._facet_table.notes(f, docs, missing))
            masks.append(got[0])
            notes.append(list(got[1]))
        return masks, notes

    def _masked_scan(self, q: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of the ``n`` best chunks among ``mask``'s by inner product with ``q``, exact:
        score descending, then chunk order."""
        idx = np.flatnonzero(mask)
        if not idx.size:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        s = np.asarray(self.store.vectors[idx], dtype=np.float32) @ np.asarray(q, dtype=np.float32)
        if idx.size > n:
            part = np.argpartition(-s, n - 1)[:n]
            cut = s[part].min()
            part = np.flatnonzero(s >= cut)  # every tie at the cut, so chunk order decides among them
            idx, s = idx[part], s[part]
        order = np.lexsort((idx, -s))[:n]
        return s[order], idx[order]

    def rank_similar(self, citekey: str, k: int = 10, *, filters=None) -> Ranked:
        """The ``k`` sources nearest the mean of ``citekey``'s chunk vectors (re-normalised), each by its
        nearest chunk (one hit per source: "papers like this one" names papers), ``citekey``'s own chunks
        left out, only chunks of sources ``filters`` (None or a ``Filters``) allow (an exact scan). No
        cross-encoder: there is no query text."""
        from chitragupta.engine.search.bm25 import near_citekeys

        k = check_k(k)
        cap = 1  # one hit per source
        pos = self.key_table().find_many([citekey])[0] if self.store.citekeys else -1
        if pos < 0 or not self._live[pos]:
            raise UsageError(f"{citekey!r} is not a source of the embedding index"
                             + near_citekeys(citekey, self.key_table()))
        doc = np.asarray(self.store.chunk_doc, dtype=np.int64)
        own = np.flatnonzero(doc == pos)
        title = self._titles[pos]
        masks, notes = self._filter_masks(None if filters is None else [filters])
        if masks is not None:  # the source's own chunks out with what the filters exclude
            masks = [masks[0] & (doc != pos)]
        top = TopK.empty(1, k)
        if own.size:
            mean = np.asarray(self.store.vectors[own], dtype=np.float64).mean(axis=0)
            qv = (mean / max(np.linalg.norm(mean), 1e-12)).astype(np.float32)[None, :]
            n_chunks = self.store.count

            def rank(todo: np.ndarray, depth: int):
                rows, scores = self._nearest(qv[todo], depth, None, masks)
                return rows, doc[np.where(rows >= 0, rows, 0)], scores

            # k + cap capped: the source's own chunks (at most cap of them) leave at least k others
            ids, scores = deepen_capped(rank, 1, k + cap, cap, n_chunks,
                                        (k + cap) * int(self.workspace.config.enrich.embed_overfetch))
            keep = (ids[0] >= 0) & (doc[np.where(ids[0] >= 0, ids[0], 0)] != pos)
            n = min(k, int(keep.sum()))
            top.ids[0, :n], top.scores[0, :n] = ids[0][keep][:n], scores[0][keep][:n]
        hit = top.ids >= 0
        safe = np.where(hit, top.ids, 0)
        doc_rows = np.where(hit, doc[safe] if self.store.count else -1, -1)
        items = np.where(hit, np.asarray(self.store.chunk_no, dtype=np.int64)[safe] if self.store.count else -1, -1)
        ranked = Ranked(top, [title], unit=self.UNIT, table=self.key_table(), rows=doc_rows, items=items,
                        item_field="chunk", engine=self.NAME)
        ranked.filter_notes = notes
        return ranked

    def _nearest(self, qv: np.ndarray, n: int, queries: list[str] | None,
                 allowed: list | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores), each (len(qv), n): the ``n`` nearest chunks of each query vector, live ones only,
        best first (score descending, then chunk order: the same on every device), reranked when a
        cross-encoder is configured; -1 / -inf padding. ``allowed``: per query None or a chunk mask: such
        a query is answered by an exact scan of its allowed chunks (``_masked_scan``)."""
        n_chunks = self.store.count
        if allowed is None or all(m is None for m in allowed):
            scores, rows = self._searcher()(qv, n)
        else:
            scores = np.full((len(qv), n), -np.inf, dtype=np.float32)
            rows = np.full((len(qv), n), -1, dtype=np.int64)
            plain = [i for i, m in enumerate(allowed) if m is None]
            if plain:
                s, r = self._searcher()(qv[plain], n)
                scores[plain], rows[plain] = s, r
            for i, m in enumerate(allowed):
                if m is not None:
                    s, r = self._masked_scan(qv[i], m, n)
                    scores[i, :s.size], rows[i, :r.size] = s, r
        scores, rows = np.asarray(scores, dtype=np.float32), np.asarray(rows, dtype=np.int64)
        rows = np.where(rows < n_chunks, rows, -1)
        doc = np.asarray(self.store.chunk_doc, dtype=np.int64)
        ok = rows >= 0
        ok[ok] = self._live[doc[rows[ok]]]
        order = np.lexsort((np.where(ok, rows, n_chunks), np.where(ok, -scores, np.inf)), axis=1)
        ok = np.take_along_axis(ok, order, 1)
        rows = np.where(ok, np.take_along_axis(rows, order, 1), -1)
        scores = np.where(ok, np.take_along_axis(scores, order, 1), -np.inf)
        if self.reranker is not None and queries is not None:
            for q in range(len(queries)):
                m = int((rows[q] >= 0).sum())
                if m:
                    with self._model_lock:
                        pos, s = self.reranker.order(queries[q], [self.store.chunk_text(int(x)) for x in rows[q, :m]])
                    rows[q, :m], scores[q, :m] = rows[q, :m][pos], s
        return rows, scores

    def citekey(self, row: int) -> str:
        return self.store.citekeys[int(self.store.chunk_doc[row])]

    # -- citable hits --------------------------------------------------------------------------------
    def query_terms(self, query: str) -> list[str]:
        """The words of ``query`` a snippet window looks for (worked out once per query, not per hit)."""
        from chitragupta.engine.text.tokenize import query_terms

        return query_terms(query)[0]

    def snippet(self, row: int, terms: list[str], width: int) -> str:
        """The chunk's text, whitespace-normalised; when wider than ``width``, the window of that width in
        the chunk holding the most of ``terms`` (the shared window chooser), else its first words."""
        text = self.store.chunk_text(row)
        flat = normalize_ws(text)
        return flat if len(flat) <= width else fitted(text, terms, width, self._stem)

    def _hit(self, row: int, score: float, terms: list[str], width: int) -> SearchResult:
        d = int(self.store.chunk_doc[row])
        return SearchResult(citekey=self.store.citekeys[d], title=self._titles[d], score=score,
                            snippet=self.snippet(row, terms, width) if width else "",
                            passage=int(self.store.chunk_no[row]))

    def responses(self, ranked: Ranked, *, snippet_chars: int | None = None) -> list[SearchResponse]:
        """``ranked`` (from ``rank_many``) as citable hits; ``snippet_chars=None`` uses
        ``[retrieval].snippet_chars``, 0 skips snippets. A hit's ``passage`` is its chunk number."""
        width = self.snippet_width(snippet_chars)
        out = []
        for q, query in enumerate(ranked.queries):
            ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
            terms = self.query_terms(query) if width and (ids >= 0).any() else []
            hits = [self._hit(int(r), float(s), terms, width) for r, s in zip(ids, scores) if r >= 0]
            out.append(SearchResponse(query=query, hits=hits, notes=[], unit=self.UNIT))
        return out
