"""The public entry point: open a workspace, ``search``, ``search_many``.

    r = Retriever.open("my-workspace")
    resp = r.search("digital twin fidelity", k=10)      # SearchResponse: .hits, .notes
    many = r.search_many(["q1", "q2"], k=100)          # the batched fast path

Queries are tokenized exactly like documents (once, by ``chitragupta.engine.query.QueryPlan``), scored
by the kernels, and turned into citable hits at the edge. Library code never prints; notes come back
with the results.

Which scorer: under ``[retrieval].backend = "auto"`` a batch of at most ``FEW_QUERIES`` queries is
scored by the numpy scorer (``chitragupta.kernels.reference``: it reads only its terms' posting slices,
checks them, and needs no JIT kernels, so one query from a cold process pays for nothing else), larger
batches by the dispatch (numba, or torch on CUDA) once the index has passed its deep check. Both give
the same ids and scores to the bit (tested); once numba has run in a process, small batches use it too,
and a long-lived retriever (the MCP server) that has spent ``NUMPY_BUDGET_S`` scoring in numpy moves to
numba: at a million documents a query's common terms cost numpy tens of milliseconds, numba's pruned
kernel a few, and loading it (and checking every posting) is paid once.
A configured backend other than auto is used for everything.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from chitragupta.engine.config import Config
from chitragupta.errors import IndexDamaged, UsageError
from chitragupta.engine.expand import load_expander
from chitragupta.engine.index.manage import OpenedIndex, current_generation, open_current, rebuild, stamp
from chitragupta.engine.index.source import (FLAG_BAD_SIDECAR, FLAG_NO_SIDECAR, FLAG_NOT_PARSED, FLAG_TEXT_MISSING,
                                              load_body, sidecar_path)
from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.engine.query import QueryPlan, parse
from chitragupta.engine.ranked import Ranked
from chitragupta.engine.results import Note, SearchResponse, SearchResult
from chitragupta.engine.text.windows import choose_windows
from chitragupta.engine.workspace import Workspace
from chitragupta.kernels import BM25Params, QueryBatch, TopK
from chitragupta.kernels.dispatch import Backend, resolve, set_threads

__all__ = ["Retriever", "Ranked", "check_k", "FEW_QUERIES"]

FEW_QUERIES = 8  # under backend "auto", batches this small are scored by numpy (module docstring)
NUMPY_BUDGET_S = 1.0  # ... until a long-lived retriever has spent this long in numpy: then numba (see above)


def _near(key: str, table, limit: int = 5) -> str:
    """'; did you mean: ...' with the closest citekeys (by edit similarity, or by prefix when many)."""
    import difflib

    keys = table.to_list()
    if len(keys) <= 50_000:
        close = difflib.get_close_matches(key, keys, n=limit, cutoff=0.5)
    else:
        low = key.casefold()
        close = [k for k in keys if k.casefold().startswith(low[:4])][:limit]
    return f"; did you mean: {', '.join(close)}" if close else "; no similar citekey in the index"


def _names(keys: list[str], limit: int = 10) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def check_k(k, what: str = "k") -> int:
    """``k`` as an int, or UsageError unless it is an integer >= 1 (every engine's k, every cap)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"{what} must be an integer >= 1, got {k!r}")
    return int(k)


class Retriever:
    """BM25 over a workspace's documents (``unit="document"``) or its sidecar paragraphs
    (``unit="passage"``). Create with :meth:`open`."""

    UNITS = ("document", "passage")

    def __init__(self, ws: Workspace, opened: OpenedIndex, *, backend: str | None = None, update: bool = True,
                 device: str | None = None):
        self.workspace = ws
        self._update = update
        cfg = ws.config.retrieval
        self.params = BM25Params(k1=cfg.k1, b=cfg.b,
                                 field_weights=(("title", cfg.weight_title), ("abstract", cfg.weight_abstract)))
        self.passage_params = BM25Params(k1=cfg.k1, b=cfg.b)  # passages have no fields
        # device: where the torch backend runs ("auto" | "cpu" | "cuda"); numba and numpy ignore it
        self._backend_name = backend or cfg.backend
        self._device = device or cfg.device
        self._backend: Backend | None = None  # resolved on the first batch that needs it
        self._numpy: Backend | None = None
        self._numpy_s = 0.0  # seconds this retriever has scored in numpy (a warm server moves to numba)
        self._expansion_cache = None
        self._install("document", opened)
        self._passages: OpenedIndex | None = None
        self._passage_rows: list | None = None
        self._seen: dict | None = None  # the workspace's stamp when opened (``changed``)
        self._ledger_conn: tuple | None = None  # (file identity, Ledger) that ``changed`` asks
        self._bodies: dict = {}  # (path, its stat, its sidecar's stat) -> Body, least recently used first
        self._body_chars = 0
        self._root = str(ws.root)

    def _install(self, unit: str, opened: OpenedIndex) -> None:
        if unit == "document":
            self._opened = opened
            self.index = opened.index
            self._rows = self._aligned_rows(opened)
        else:
            self._passages = opened
            self._passage_rows = self._aligned_rows(opened)

    @staticmethod
    def _aligned_rows(opened: OpenedIndex) -> list:
        if opened.current:
            return opened.rows
        # the index and the ledger disagree: look rows up by citekey
        by_key = {r[0]: r for r in opened.rows}
        keys = opened.index.citekeys
        return [by_key.get(keys[i], (keys[i], "", "parsed", None)) for i in range(len(keys))]

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             update: bool = True, backend: str | None = None, device: str | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> "Retriever":
        """Open a workspace for search, bringing its index up to date unless ``update`` is False.
        ``backend`` and ``device`` override ``[retrieval].backend`` and ``[retrieval].device``."""
        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        if backend is not None:
            resolve_name(backend)
        seen = stamp(ws)  # before the open: a change while it runs shows as changed() afterwards
        r = cls(ws, open_current(ws, update=update, progress=progress), backend=backend, update=update, device=device)
        r._seen = seen
        return r

    def changed(self) -> bool:
        """Whether the workspace moved on since this retriever opened: the ledger's change stamp or
        ``content/parsed/`` changed, or another process switched in a new generation of an index it
        holds (``chitragupta index``). A long-lived caller (the MCP server) opens a new retriever then.
        Cheap: one small read per index and the ledger's change counter."""
        if self._seen is None:
            return True  # the stamp could not be trusted when opened (a change within the last 2 s)
        held = [("document", self.index)] + ([("passage", self._passages.index)] if self._passages else [])
        if any(getattr(index, "path", None) is None or current_generation(self.workspace, unit) != index.path.name
               for unit, index in held):
            return True
        try:
            return stamp(self.workspace, self._stamp_ledger()) != self._seen
        except Exception:  # the ledger cannot be read now: let the reopen say why
            return True

    def _stamp_ledger(self):
        """A read-only connection to the ledger kept for ``changed`` (each statement sees the latest
        commit), opened again when the file is replaced (another inode)."""
        from chitragupta.engine.corpus.ledger import Ledger

        st = os.stat(self.workspace.ledger_path)
        ident = (st.st_ino, st.st_dev)
        held = self._ledger_conn
        if held is None or held[0] != ident:
            if held is not None:
                held[1].close()
            self._ledger_conn = held = (ident, Ledger(self.workspace.ledger_path, create=False))
        return held[1]

    # -- the backend, resolved when a batch first needs it ------------------------------------------
    @property
    def backend(self) -> Backend:
        """The backend batches are scored on (``[retrieval].backend`` resolved: numba, numpy or torch)."""
        if self._backend is None:
            self._backend = resolve(self._backend_name, self._device)
            if self._backend.name == "numba":
                set_threads(self.workspace.config.retrieval.threads)
        return self._backend

    def _backend_for(self, n_queries: int) -> Backend:
        if self._backend_name == "auto" and n_queries <= FEW_QUERIES and self._numpy_s < NUMPY_BUDGET_S and (
                self._backend is None or self._backend.name != "numba"):
            if self._numpy is None:
                self._numpy = resolve(self._backend_name, self._device, job="few")  # auto's numpy
            return self._numpy
        return self.backend

    # -- the passage index, opened on first use -----------------------------------------------------
    def passage_index(self):
        if self._passages is None:
            self._install("passage", open_current(self.workspace, unit="passage", update=self._update))
        return self._passages.index

    def _index(self, unit: str):
        return self.index if unit == "document" else self.passage_index()

    def _check_unit(self, unit: str) -> str:
        if unit not in self.UNITS:
            raise UsageError(f"unknown unit {unit!r}; allowed: {', '.join(self.UNITS)}")
        return unit

    def checked_index(self, unit: str = "document"):
        """``unit``'s index once it has passed the checks a numba kernel needs (``TermIndex.check_deep``),
        rebuilt first (with a note) when it fails them; for callers that hand its arrays to a kernel."""
        index = self._index(self._check_unit(unit))
        params = self.params if unit == "document" else self.passage_params
        try:
            index.check_deep(fields=[name for name, _d in params.active_fields()])
        except IndexCorrupt as err:
            index = self._repair(unit, str(err))
        return index

    def _repair(self, unit: str, why: str):
        """The index of ``unit`` turned out damaged: rebuild it (with a note), or say how to."""
        index = self._index(unit)
        if not self._update:
            raise IndexDamaged(f"{index.where}: {why}; rebuild it with `chitragupta index --force`")
        self._install(unit, rebuild(self.workspace, why, unit=unit))
        return self._index(unit)

    # -- notes that hold for every query ------------------------------------------------------------
    def index_notes(self, unit: str = "document") -> list[Note]:
        """Notes about an index itself: title-only sources, sidecars, a rebuilt or stale cache."""
        if self._check_unit(unit) == "passage":
            return self._passage_notes()
        notes = list(self._opened.notes)
        bad = self.index.keys_with_flag(FLAG_BAD_SIDECAR)
        if bad and not any(n.kind == "sidecar" for n in notes):
            notes.append(Note("sidecar", f"{len(bad)} source(s) have a sidecar that is not valid and were indexed "
                                         f"from their .txt without the reference cut: {_names(bad)}"))
        missing = self.index.count_flag(FLAG_TEXT_MISSING)
        if missing:
            notes.append(Note("title-only", (
                f"{missing} parsed source(s) have no parsed text on disk and were ranked on their title alone; "
                "`chitragupta sync -v` names them and re-parses what it can (an imported corpus: `import` it again).")))
        return notes

    def _passage_notes(self) -> list[Note]:
        pidx = self.passage_index()
        notes = list(self._passages.notes)
        flags = np.asarray(pidx.flags)
        no_side = [pidx.citekeys[int(i)] for i in np.flatnonzero(
            (flags & FLAG_NO_SIDECAR) & ~(flags & (FLAG_TEXT_MISSING | FLAG_NOT_PARSED)))]
        bad = pidx.keys_with_flag(FLAG_BAD_SIDECAR)
        if pidx.n_passages == 0:
            notes.append(Note("no-passages", "the passage unit has nothing to search: no source has a usable "
                                             "passage sidecar (parse with [parser].backend = \"docling\" and sync)"))
        if no_side:
            notes.append(Note("no-sidecar", f"{len(no_side)} source(s) have no passage sidecar and cannot be "
                                            f"returned by the passage unit: {_names(no_side)}"))
        if bad:
            notes.append(Note("sidecar", f"{len(bad)} source(s) have a sidecar that is not valid and were "
                                         f"skipped by the passage unit: {_names(bad)}"))
        return notes

    # -- scoring ------------------------------------------------------------------------------------
    def plan(self, queries: Sequence[str], unit: str = "document") -> QueryPlan:
        """``queries`` tokenized, expanded and looked up once against ``unit``'s index."""
        return QueryPlan(queries, self._index(self._check_unit(unit)), self.expander())

    def _score(self, unit: str, batch: QueryBatch, k: int) -> TopK:
        """The top-k of a batch of term ids; ``_Rebuilt`` when the index turned out damaged on the way
        and was rebuilt (the caller plans again), IndexDamaged when it could not be."""
        from chitragupta.kernels.reference import PostingsDamaged

        index = self._index(unit)
        params = self.params if unit == "document" else self.passage_params
        backend = self._backend_for(batch.n_queries)
        try:
            if backend.name == "numpy":
                t = time.perf_counter()
                try:
                    return backend.score_topk(index.raw_postings, batch, params, k)
                finally:
                    if backend is self._numpy:
                        self._numpy_s += time.perf_counter() - t
            index.check_deep(fields=[name for name, _d in params.active_fields()])
            if backend.accepts_cached:
                return backend.score_topk(index.postings, batch, params, k, idf=index.idf_,
                                          norm=index.norm(params.k1, params.b), bounds=index.bounds(params))
            return backend.score_topk(index.postings, batch, params, k)
        except (IndexCorrupt, PostingsDamaged) as err:
            self._repair(unit, str(err))
            raise _Rebuilt from None

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str = "document",
                  max_per_source: int | None = None) -> Ranked:
        """Tokenize and score a batch: the fast path (no snippets, no titles; notes on demand).

        For passages, ``[retrieval].max_passages_per_source`` (or ``max_per_source``) is applied to the
        fully ranked list, so a dominant source's excess promotes another source's passage rather than
        shortening the list. An index found damaged while scoring is rebuilt once, with a note.
        """
        k = check_k(k)
        self._check_unit(unit)
        queries = list(queries)
        cap = None
        if unit == "passage":
            cap = self.workspace.config.retrieval.max_passages_per_source if max_per_source is None \
                else check_k(max_per_source, "max_per_source")
        try:
            return self._rank(queries, k, unit, cap)
        except _Rebuilt:
            pass
        try:
            return self._rank(queries, k, unit, cap)
        except _Rebuilt:
            raise IndexDamaged(f"{self._index(unit).where} is damaged again after a rebuild; "
                               "run `chitragupta index --force`") from None

    def _rank(self, queries: list[str], k: int, unit: str, cap: int | None) -> Ranked:
        index = self._index(unit)
        # No more hits than the unit has: a huge k (``-k 1000000000``) must not allocate (n, k) arrays.
        k = min(k, max(1, index.n_units))
        plan = QueryPlan(queries, index, self.expander())
        if unit == "document":
            return Ranked(self._score("document", plan.batch, k), queries, unit="document", table=index.citekeys,
                          plan=plan)
        top = self._capped(plan.batch, k, cap)
        units = np.where(top.ids >= 0, top.ids, 0)
        p_doc, p_item = np.asarray(index.p_doc), np.asarray(index.p_item)
        if p_doc.size:
            rows = np.where(top.ids >= 0, p_doc[units], -1).astype(np.int64)
            items = np.where(top.ids >= 0, p_item[units], -1).astype(np.int64)
        else:
            rows = items = np.full(top.ids.shape, -1, dtype=np.int64)
        return Ranked(top, queries, unit="passage", table=index.citekeys, rows=rows, items=items, plan=plan)

    def expander(self):
        """The acronym expander (``engine.expand.Expander``: ``.expand(query)``), reloaded when
        content/acronyms.toml changes; None when expansion is switched off (nothing is read then)."""
        if not self.workspace.config.retrieval.acronym_expansion:
            return None
        user = self.workspace.content / "acronyms.toml"
        try:
            stamp = user.stat().st_mtime_ns
        except OSError:
            stamp = None
        if self._expansion_cache is None or self._expansion_cache[0] != stamp:
            self._expansion_cache = (stamp, load_expander(self.workspace.content, True))
        return self._expansion_cache[1]

    def _capped(self, batch: QueryBatch, k: int, cap: int) -> TopK:
        """Top-k passages per query with at most ``cap`` per source, exact: a query whose capped list is
        short while its ranked prefix was full is ranked again deeper
        (``chitragupta.kernels.topk.cap_per_source``)."""
        from chitragupta.kernels.topk import cap_per_source

        pidx = self.passage_index()
        p_doc = np.asarray(pidx.p_doc)
        n_units = pidx.n_passages
        out = TopK.empty(batch.n_queries, k)
        todo = np.arange(batch.n_queries)
        lens = np.diff(batch.indptr)
        depth = k * cap
        while todo.size:
            sub = QueryBatch(indptr=np.concatenate(([0], np.cumsum(lens[todo]))).astype(np.int64),
                             terms=np.concatenate([batch.terms[batch.indptr[q]:batch.indptr[q + 1]] for q in todo]))
            depth = min(max(depth, k), max(n_units, 1))
            top = self._score("passage", sub, depth)
            src = p_doc[np.where(top.ids >= 0, top.ids, 0)] if p_doc.size else np.zeros_like(top.ids)
            cols, short = cap_per_source(top.ids, src, cap, k)
            got = cols >= 0
            safe = np.where(got, cols, 0)
            out.ids[todo] = np.where(got, np.take_along_axis(top.ids, safe, axis=1), -1)
            out.scores[todo] = np.where(got, np.take_along_axis(top.scores, safe, axis=1), -np.inf)
            again = short & (depth < n_units)
            out.ids[todo[again]], out.scores[todo[again]] = -1, -np.inf
            todo = todo[again]
            depth *= 4
        return out

    def citekey(self, doc_id: int) -> str:
        return self.index.citekeys[int(doc_id)]

    # -- turning ids into citable hits --------------------------------------------------------------
    def _doc(self, citekey: str) -> int:
        doc_id = self.index.doc_id(citekey)
        if doc_id < 0:
            raise UsageError(f"unknown citekey {citekey!r}" + _near(citekey, self.index.citekeys))
        return doc_id

    def body(self, citekey: str):
        """The text the index read for ``citekey`` (``engine.index.source.Body``: ``.text`` after the
        reference cut, ``.page_at(offset)``, the sidecar's ``.items``); empty when it is not on disk."""
        return self._body(self._doc(citekey))

    def title(self, citekey: str) -> str:
        """``citekey``'s title as the ledger gives it (the index's copy); UsageError for an unknown citekey."""
        return self._rows[self._doc(citekey)][1]

    def parsed_path(self, citekey: str) -> Path | None:
        """The parsed text file of ``citekey`` (``content/parsed/<name>.txt``), or None when it has none."""
        rel = self._rows[self._doc(citekey)][3]
        return self.workspace.root / rel if rel else None

    def source(self, citekey: str):
        """``citekey``'s ledger row (``chitragupta.engine.corpus.ledger.Row``: title, authors, year, status,
        ...); UsageError naming near citekeys when the ledger has none."""
        from chitragupta.engine.corpus.ledger import Ledger

        with Ledger(self.workspace.ledger_path, create=False) as ledger:
            row = ledger.get(citekey)
        if row is None:
            raise UsageError(f"unknown citekey {citekey!r}" + _near(citekey, self.index.citekeys))
        return row

    def _body(self, doc_id: int):
        _key, _title, _status, rel = self._rows[doc_id]
        if not rel or self.index.flags[doc_id] & FLAG_TEXT_MISSING:
            return load_body(None)
        return self._load_body(rel)

    _BODY_CHARS = 1 << 24  # characters of text kept (16M: scifact whole, ~300 full-text papers), least recent out

    def _load_body(self, rel: str):
        """``load_body`` of a parsed file, kept while the file and its sidecar are unchanged (size,
        mtime and inode of both, checked on every use). A warm server answers many queries from the
        same sources: the bodies it read are kept up to ``_BODY_CHARS`` characters in all."""
        path = os.path.join(self._root, rel)
        side = path[:-4] + _SIDECAR_SUFFIX if path.endswith(".txt") else str(sidecar_path(Path(path)))
        key = (rel, _stat_key(path), _stat_key(side))
        got = self._bodies.pop(key, None)
        if got is None:
            got = load_body(Path(path))
            if key[1] is None:
                return got
            self._body_chars += len(got.text)
            while self._bodies and self._body_chars > self._BODY_CHARS:
                self._body_chars -= len(self._bodies.pop(next(iter(self._bodies))).text)
        self._bodies[key] = got  # most recent last
        return got

    def doc_hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        """Document ``doc_id`` as a citable hit: its title and the ``width``-character window holding most
        of ``terms`` (0 or None: no snippet)."""
        return self._hit(doc_id, score, terms, width)

    def passage_hit(self, u: int, score: float, cache: dict | None = None) -> SearchResult:
        """Passage ``u`` as a citable hit: its whole paragraph, page and item number. ``cache`` keeps the
        sidecars read across calls."""
        return self._passage_hit(u, score, {} if cache is None else cache)

    def _hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        key, title, _status, _rel = self._rows[doc_id]
        snippet, page = "", None
        if width:
            body = self._body(doc_id)
            wins = choose_windows(body.text, terms, width, 1, stem=self.index.stem, body_start=body.front)
            if wins:
                snippet, page = wins[0].text, body.page_at(wins[0].anchor)
        return SearchResult(citekey=key, title=title, score=float(score), snippet=snippet, page=page)

    def _passage_hit(self, u: int, score: float, cache: dict) -> SearchResult:
        pidx = self.passage_index()
        d, item = int(pidx.p_doc[u]), int(pidx.p_item[u])
        key, title, _status, rel = self._passage_rows[d]
        if d not in cache:
            body = self._load_body(rel) if rel else load_body(None)
            cache[d] = body.items or ()
        items = cache[d]
        it = items[item] if item < len(items) else {"text": "", "page": None}
        return SearchResult(citekey=key, title=title, score=float(score), snippet=it["text"], page=it["page"],
                            passage=item)

    def responses(self, ranked: Ranked, *, snippet_chars: int | None = 0) -> list[SearchResponse]:
        """``ranked`` (from ``rank_many``) as citable hits: documents with a ``snippet_chars`` window (None:
        the configured width, 0: none), passages as their whole paragraph, page and item number."""
        width = self.workspace.config.retrieval.snippet_chars if snippet_chars is None else snippet_chars
        terms, notes = ranked.terms, ranked.notes
        out, cache = [], {}
        for q, query in enumerate(ranked.queries):
            ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
            if ranked.unit == "passage":
                hits = [self._passage_hit(int(u), float(s), cache) for u, s in zip(ids, scores) if u >= 0]
            else:
                hits = [self._hit(int(d), float(s), terms[q], width) for d, s in zip(ids, scores) if d >= 0]
            out.append(SearchResponse(query=query, hits=hits, notes=list(notes[q]), terms=terms[q], unit=ranked.unit))
        return out

    def search_many(self, queries: Sequence[str], k: int = 10, *, unit: str = "document",
                    snippet_chars: int | None = 0, max_per_source: int | None = None) -> list[SearchResponse]:
        """Batched search. Documents: ``snippet_chars=None`` uses the configured width, 0 (default)
        skips snippets. Passages: each hit is its whole paragraph, with its page and item number
        (``max_per_source`` as for ``rank_many``)."""
        ranked = self.rank_many(queries, k, unit=unit, max_per_source=max_per_source)
        return self.responses(ranked, snippet_chars=snippet_chars)

    def search(self, query: str, k: int = 10, *, unit: str = "document",
               snippet_chars: int | None = None) -> SearchResponse:
        """One query: hits (with snippets, or whole passages) and notes, index notes first."""
        resp = self.search_many([query], k, unit=unit, snippet_chars=snippet_chars)[0]
        resp.notes[:0] = self.index_notes(unit)
        return resp

    # -- evidence -----------------------------------------------------------------------------------
    def evidence(self, query: str, citekey: str, *, n: int = 2, width: int = 600) -> SearchResponse:
        """The passages of one document that bear on ``query``: up to ``n`` windows of ``width``
        characters from the same text the index read (nothing of its reference list), chosen by the
        shared window chooser; a window in a table is widened to the whole table. Each hit's score is
        the number of distinct query terms its window holds."""
        n = check_k(n, "n")
        width = check_k(width, "width")
        doc_id = self._doc(citekey)
        plan = self.plan([query])
        terms, notes = plan.terms[0], list(plan.notes()[0])
        body = self._body(doc_id)
        title = self._rows[doc_id][1]
        hits = [SearchResult(citekey=citekey, title=title, score=float(w.covered), snippet=w.text,
                             page=body.page_at(w.anchor))
                for w in choose_windows(body.text, terms, width, n, stem=self.index.stem,
                                        body_start=body.front)]
        if terms and not hits:
            notes.append(Note("no-window", f"{citekey} has no passage holding a query term"
                                           + (" (its text is not on disk)" if not body.text else "")))
        return SearchResponse(query=query, hits=hits, notes=notes, terms=terms, unit="evidence")


_SIDECAR_SUFFIX = sidecar_path(Path("x.txt")).name[1:]  # what replaces ".txt" in a parsed file's sidecar


def _stat_key(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class _Rebuilt(Exception):
    """An index was found damaged while scoring and has been rebuilt: rank the batch again."""


def resolve_name(backend: str) -> None:
    """UsageError unless ``backend`` names a scoring backend (checked when a retriever opens; the backend
    itself is resolved when a batch first needs it)."""
    from chitragupta.kernels.dispatch import BACKENDS

    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
