"""BM25 search over a workspace: ``BM25Searcher`` (also importable as ``Retriever``).

    r = BM25Searcher.open("my-workspace")             # or Retriever.open(...)
    resp = r.search("digital twin fidelity", k=10)      # SearchResponse: .hits, .notes
    many = r.search_many(["q1", "q2"], k=100)          # the batched path, with hits
    ranked = r.rank_many(["q1", "q2"], k=100)          # arrays only (Ranked)

Three parts, each its own module: ``engine/search/scoring.py`` (the indexes, the backend, a batch of queries to
a ``Ranked``), ``engine/search/hits.py`` (ids to citable hits: titles, snippets, passages, evidence), and this
searcher, which opens them, knows when the workspace moved on (``changed``), and says what holds for every
query (``index_notes``). The request fields and their defaults are ``engine/search/searcher.py``'s, the same for
every engine. Library code never prints; notes come back with the results.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from chitragupta.engine.library.config import Config
from chitragupta.engine.search.filters import per_query
from chitragupta.engine.search.hits import HitBuilder
from chitragupta.engine.index.manage import OpenedIndex, current_generation, open_current, stamp
from chitragupta.engine.index.source import FLAG_BAD_SIDECAR, FLAG_TEXT_MISSING
from chitragupta.engine.search.query import QueryPlan
from chitragupta.notes import Note
from chitragupta.engine.search.results import Ranked, SearchResponse, SearchResult
from chitragupta.engine.search.scoring import BM25Scorer, check_backend
from chitragupta.engine.search.searcher import Searcher, check_k, check_max_per_source
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import UsageError
from chitragupta.kernels.dispatch import Backend

__all__ = ["BM25Searcher", "Retriever", "Ranked", "check_k"]


def near_citekeys(key: str, table, limit: int = 5) -> str:
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


class BM25Searcher(Searcher):
    """BM25 over a workspace's documents (``unit="document"``) or its sidecar paragraphs
    (``unit="passage"``). Create with :meth:`open`."""

    NAME = "bm25"
    UNITS = ("document", "passage")

    def __init__(self, ws: Workspace, opened: OpenedIndex, *, backend: str | None = None, update: bool = True,
                 device: str | None = None):
        self.workspace = ws
        self.scorer = BM25Scorer(ws, opened, backend=backend, update=update, device=device)
        self.hits = HitBuilder(self.scorer)
        self._seen: dict | None = None  # the workspace's stamp when opened (``changed``)
        self._ledger_conn: tuple | None = None  # (file identity, Ledger) that ``changed`` asks
        self._stamp_lock = threading.Lock()  # ``changed`` from a warm server's worker threads

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             update: bool = True, backend: str | None = None, device: str | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> "BM25Searcher":
        """Open a workspace for search, bringing its index up to date unless ``update`` is False.
        ``backend`` and ``device`` override ``[retrieval].backend`` and ``[retrieval].device``."""
        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        if backend is not None:
            check_backend(backend)
        seen = stamp(ws)  # before the open: a change while it runs shows as changed() afterwards
        r = cls(ws, open_current(ws, update=update, progress=progress), backend=backend, update=update, device=device)
        r._seen = seen
        return r

    # -- what the scorer holds ----------------------------------------------------------------------
    @property
    def index(self):
        """The document index."""
        return self.scorer.index

    def passage_index(self):
        """The passage index, opened on first use."""
        return self.scorer.passage_index()

    @property
    def params(self):
        """The document unit's ``BM25Params`` (k1, b, field weights; a caller may set others)."""
        return self.scorer.params

    @params.setter
    def params(self, value) -> None:
        self.scorer.params = value

    @property
    def passage_params(self):
        return self.scorer.passage_params

    @passage_params.setter
    def passage_params(self, value) -> None:
        self.scorer.passage_params = value

    @property
    def backend(self) -> Backend:
        """The backend batches are scored on (``[retrieval].backend`` resolved: numba, numpy or torch)."""
        return self.scorer.backend

    def checked_index(self, unit: str = "document"):
        """``unit``'s index once it has passed the checks a numba kernel needs, rebuilt first (with a
        note) when it fails them; for callers that hand its arrays to a kernel."""
        return self.scorer.checked_index(self.check_unit(unit))

    def expander(self):
        """The acronym expander, or None when expansion is switched off."""
        return self.scorer.expander()

    def changed(self) -> bool:
        """Whether the workspace moved on since this retriever opened: the ledger's change stamp or
        ``content/parsed/`` changed, or another process switched in a new generation of an index it
        holds (``chitragupta index``). A long-lived caller (the MCP server) opens a new retriever then.
        Cheap: one small read per index and the ledger's change counter."""
        if self._seen is None:
            return True  # the stamp could not be trusted when opened (a change within the last 2 s)
        held = [(unit, opened.index) for unit, opened in self.scorer.opened.items()]
        if any(getattr(index, "path", None) is None or current_generation(self.workspace, unit) != index.path.name
               for unit, index in held):
            return True
        try:
            with self._stamp_lock:
                return stamp(self.workspace, self._stamp_ledger()) != self._seen
        except Exception:  # the ledger cannot be read now: let the reopen say why
            return True

    def _stamp_ledger(self):
        """A read-only connection to the ledger kept for ``changed`` (each statement sees the latest
        commit), opened again when the file is replaced (another inode)."""
        from chitragupta.engine.library.ledger import Ledger

        st = os.stat(self.workspace.ledger_path)
        ident = (st.st_ino, st.st_dev)
        held = self._ledger_conn
        if held is None or held[0] != ident:
            if held is not None:
                held[1].close()
            self._ledger_conn = held = (ident, Ledger(self.workspace.ledger_path, create=False, shared=True))
        return held[1]

    # -- notes that hold for every query ------------------------------------------------------------
    def index_notes(self, unit: str | None = None) -> list[Note]:
        """Notes about an index itself: title-only sources, sidecars, a rebuilt or stale cache."""
        if self.check_unit(unit) == "passage":
            return self._passage_notes()
        notes = list(self.scorer.opened["document"].notes)
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
        from chitragupta.engine.index.passage import FLAG_IMPORTED

        pidx = self.passage_index()
        notes = list(self.scorer.opened["passage"].notes)
        floor = self.workspace.config.retrieval.min_passage_tokens
        flags = np.asarray(pidx.flags)
        none = np.bincount(np.asarray(pidx.p_doc), minlength=len(pidx.citekeys)) == 0
        imported = int(np.count_nonzero(flags & FLAG_IMPORTED))
        without = [pidx.citekeys[int(i)] for i in np.flatnonzero(none & ((flags & FLAG_IMPORTED) == 0))]
        bad = pidx.keys_with_flag(FLAG_BAD_SIDECAR)
        if pidx.n_passages == 0:
            why = (f"no source has a paragraph of {floor} indexed words or more ([retrieval].min_passage_tokens)"
                   if not imported or without else "its texts are imported (`chitragupta import`), and an "
                   "imported text is not split into passages; search the document unit")
            notes.append(Note("no-passages", f"the passage unit has nothing to search: {why}"))
        if imported and (pidx.n_passages or without):
            notes.append(Note("no-passage", f"{imported} imported source(s) are not split into passages and cannot "
                                            "be returned by the passage unit"))
        if without and pidx.n_passages:
            notes.append(Note("no-passage", f"{len(without)} source(s) have no paragraph of {floor} indexed words or "
                                            "more (or no parsed text) and cannot be returned by the passage unit: "
                                            f"{_names(without)}"))
        if bad:
            notes.append(Note("sidecar", f"{len(bad)} source(s) have a sidecar that is not valid and were "
                                         f"skipped by the passage unit: {_names(bad)}"))
        return notes

    # -- ranking ------------------------------------------------------------------------------------
    def plan(self, queries: Sequence[str], unit: str = "document") -> QueryPlan:
        """``queries`` tokenized, expanded and looked up once against ``unit``'s index."""
        return self.scorer.plan(queries, self.check_unit(unit))

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str | None = None,
                  max_per_source: int | None = None, filters=None, syntax: bool | str | None = None) -> Ranked:
        """Tokenize and score a batch: the fast path (no snippets, no titles; notes on demand).
        ``filters``: metadata filters (``engine/search/searcher.py``), a mask before top-k; their notes are the
        Ranked's ``filter_notes``. ``syntax``: how the query syntax is read (``engine.search.constraints``;
        None: ``[retrieval].query_syntax``, strict).

        For passages, ``[retrieval].max_passages_per_source`` (or ``max_per_source``) is applied to the
        fully ranked list, so a dominant source's excess promotes another source's passage rather than
        shortening the list. An index found damaged while scoring is rebuilt once, with a note.
        """
        k = check_k(k)
        unit = self.check_unit(unit)
        cap = check_max_per_source(max_per_source)
        if unit == "passage" and cap is None:
            cap = self.workspace.config.retrieval.max_passages_per_source
        queries = list(queries)
        return self.scorer.rank(queries, k, unit, cap, per_query(filters, len(queries)), syntax)

    def rank_similar(self, citekey: str, k: int = 10, *, filters=None) -> Ranked:
        """The ``k`` sources most like ``citekey`` by BM25 over its most distinctive terms (``engine.similar``),
        never ``citekey`` itself, only among the sources ``filters`` (a ``Filters``, or None) allow;
        UsageError naming the closest citekeys for an unknown one."""
        from chitragupta.engine.search.similar import rank_like

        k = check_k(k)
        doc = self.doc_id(citekey)
        allowed, notes = None, None
        if filters is not None:
            got, notes = self.scorer.filtered("document", [filters], None)
            allowed = got[0]
        ranked = rank_like(self.scorer, doc, k, self.title(citekey), allowed)
        ranked.filter_notes = notes
        return ranked

    # -- citable hits ---------------------------------------------------------------------------------
    def responses(self, ranked: Ranked, *, snippet_chars: int | None = None) -> list[SearchResponse]:
        """``ranked`` (from ``rank_many``) as citable hits with a ``snippet_chars`` snippet (None: the
        configured width, 0: none); a passage's carries its page and item number."""
        return self.hits.responses(ranked, self.snippet_width(snippet_chars))

    def doc_hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        """Document ``doc_id`` as a citable hit (``HitBuilder.doc_hit``)."""
        return self.hits.doc_hit(doc_id, score, terms, width)

    def passage_hit(self, u: int, score: float, cache: dict | None = None, terms: list[str] = (),
                    width: int | None = None) -> SearchResult:
        """Passage ``u`` as a citable hit (``HitBuilder.passage_hit``); ``cache`` keeps the items read."""
        return self.hits.passage_hit(u, score, {} if cache is None else cache, terms, width)

    def evidence(self, query: str, citekey: str, *, n: int = 2, width: int = 600) -> SearchResponse:
        """The passages of one document that bear on ``query``: up to ``n`` windows of ``width``
        characters from the same text the index read (nothing of its reference list), chosen by the
        shared window chooser; a window in a table is widened to the whole table. Each hit's score is
        the number of distinct query terms its window holds. ``<citekey>#<item>`` (a passage hit's id)
        gives that passage whole, with its page."""
        key, sep, item = citekey.rpartition("#")
        if sep and item.isdigit() and self.index.doc_id(citekey) < 0:
            return self.hits.passage_evidence(self.doc_id(key), key, int(item), query)
        return self.hits.evidence(self.doc_id(citekey), citekey, query, n=n, width=width)

    # -- sources --------------------------------------------------------------------------------------
    def citekey(self, doc_id: int) -> str:
        return self.index.citekeys[int(doc_id)]

    def doc_id(self, citekey: str) -> int:
        """The document index row of ``citekey``; UsageError naming near citekeys when it has none."""
        doc_id = self.index.doc_id(citekey)
        if doc_id < 0:
            raise UsageError(f"unknown citekey {citekey!r}" + near_citekeys(citekey, self.index.citekeys))
        return doc_id

    def body(self, citekey: str):
        """The text the index read for ``citekey`` (``engine.index.source.Body``: ``.text`` after the
        reference cut, ``.page_at(offset)``, the sidecar's ``.items``); empty when it is not on disk."""
        return self.hits.body(self.doc_id(citekey))

    def title(self, citekey: str) -> str:
        """``citekey``'s title as the ledger gives it (the index's copy); UsageError for an unknown citekey."""
        return self.scorer.rows["document"][self.doc_id(citekey)][1]

    def parsed_path(self, citekey: str) -> Path | None:
        """The parsed text file of ``citekey`` (``content/parsed/<name>.txt``), or None when it has none of
        its own (no text, or a text in ``import``'s packs: ``body`` reads either)."""
        from chitragupta.engine.library.texts import is_ref

        rel = self.scorer.rows["document"][self.doc_id(citekey)][3]
        return self.workspace.root / rel if rel and not is_ref(rel) else None

    def source(self, citekey: str):
        """``citekey``'s ledger row (``chitragupta.engine.library.ledger.Row``: title, authors, year, status,
        ...); UsageError naming near citekeys when the ledger has none."""
        from chitragupta.engine.library.ledger import Ledger

        with Ledger(self.workspace.ledger_path, create=False) as ledger:
            row = ledger.get(citekey)
        if row is None:
            raise UsageError(f"unknown citekey {citekey!r}" + near_citekeys(citekey, self.index.citekeys))
        return row


Retriever = BM25Searcher  # the name it had first; both are public


