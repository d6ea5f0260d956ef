"""Engines kept warm across calls, answering in JSON-ready dicts: what ``chitragupta serve`` (the MCP
server) calls, and what any long-lived process can use.

    warm = WarmEngines("my-review")
    warm.search("digital twin fidelity", k=10, engine="hybrid")   # {"hits": [...], "notes": [...]}
    warm.evidence("smith2020", "fidelity"); warm.explain("fidelity", "smith2020"); warm.source("smith2020")

The BM25 retriever, the embedding store and its query encoder stay loaded. Before each call the engines
check, cheaply, that the workspace has not moved on (``Retriever.changed``: a new index generation
switched in by another process, the ledger's change stamp, ``content/parsed/``; ``EmbedSearcher.changed``:
the store saved again; the workspace's config.toml edited) and reopen what did, so an answer always
comes from the current index -- the same answer ``chitragupta search`` gives at that moment. Calls are
serialized (one lock): the engines are not meant to be shared between threads. Every error a user can
cause is a ``ChitraguptaError`` (one line); nothing here prints.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["WarmEngines", "ENGINES", "UNITS"]

ENGINES = ("bm25", "embed", "hybrid")
UNITS = ("document", "passage")


def _notes(notes) -> list[dict]:
    return [{"kind": n.kind, "text": n.text} if hasattr(n, "kind") else {"kind": "note", "text": str(n)}
            for n in notes]


def _response(resp) -> dict:
    return {"hits": [h.to_dict() for h in resp.hits], "notes": _notes(resp.notes)}


class WarmEngines:
    """A workspace's search engines, opened on first use and reopened when the workspace changes."""

    def __init__(self, workspace: str | Path = ".", config: str | Path | None = None, *, update: bool = True,
                 device: str | None = None):
        self._root = Path(workspace)
        self._config_arg = config
        self._update = update
        self._device = device
        self._lock = threading.Lock()
        self._ws = None
        self._config_seen = None
        self._bm25 = None
        self._dense = None  # (EmbedSearcher or None, notes, store signature when it failed)
        self._hybrid: dict[str, object] = {}

    # -- keeping them current ------------------------------------------------------------------------
    def _config_path(self) -> Path | None:
        if self._config_arg is not None:
            return Path(self._config_arg)
        default = self._root / "config.toml"
        return default if default.exists() else None

    def _config_signature(self):
        path = self._config_path()
        if path is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return (str(path), None)
        return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)

    def workspace(self):
        from chitragupta.engine.workspace import Workspace

        sig = self._config_signature()
        if self._ws is None or sig != self._config_seen:
            self._ws = Workspace.open(self._root, self._config_arg)
            self._config_seen = sig
            self._bm25, self._dense, self._hybrid = None, None, {}
        return self._ws

    def retriever(self):
        from chitragupta.engine.search import Retriever

        ws = self.workspace()
        if self._bm25 is None or self._bm25.changed():
            self._bm25 = Retriever.open(ws, update=self._update)
            self._hybrid = {}
        return self._bm25

    def _dense_side(self):
        """(the EmbedSearcher or None, the notes saying why not)."""
        from chitragupta.enrich.hybrid import open_dense
        from chitragupta.enrich.search import store_signature

        ws = self.workspace()
        if self._dense is not None:
            searcher, _notes_, failed_at = self._dense
            if searcher is not None and not searcher.changed():
                return searcher, _notes_
            if searcher is None and failed_at == store_signature(ws):
                return None, _notes_  # still missing or unusable as it was: do not retry the load
        searcher, notes = open_dense(ws, self._device)
        self._dense = (searcher, notes, None if searcher is not None else store_signature(ws))
        self._hybrid = {}
        return searcher, notes

    def embed(self):
        from chitragupta.enrich.search import EmbedSearcher

        searcher, _notes = self._dense_side()
        if searcher is None:  # say why, as the CLI does
            return EmbedSearcher.open(self.workspace(), device=self._device)
        return searcher

    def hybrid(self, unit: str):
        from chitragupta.enrich.hybrid import HybridSearcher

        retriever = self.retriever()
        dense, notes = self._dense_side()
        h = self._hybrid.get(unit)
        if h is None or h.retriever is not retriever or h.dense is not dense:
            h = self._hybrid[unit] = HybridSearcher(retriever, dense, unit, notes)
        return h

    # -- the calls ------------------------------------------------------------------------------------
    def search(self, query: str, k: int = 10, engine: str = "bm25", unit: str = "document",
               snippet_chars: int | None = None) -> dict:
        """One query's hits and notes, as ``chitragupta search --json`` gives them (notes as objects)."""
        from chitragupta.errors import UsageError

        if engine not in ENGINES:
            raise UsageError(f"unknown engine {engine!r}; allowed: {', '.join(ENGINES)}")
        if unit not in UNITS:
            raise UsageError(f"unknown unit {unit!r}; allowed: {', '.join(UNITS)}")
        with self._lock:
            if engine == "bm25":
                resp = self.retriever().search(query, k, unit=unit, snippet_chars=snippet_chars)
            elif engine == "hybrid":
                resp = self.hybrid(unit).search(query, k, snippet_chars=snippet_chars)
            else:
                if unit != "document":
                    raise UsageError(f"unit {unit!r} is for engine bm25 or hybrid; engine embed ranks its own "
                                     "unit, 200-word chunks (each hit names its chunk number as passage)")
                resp = self.embed().search(query, k, snippet_chars=snippet_chars)
        return _response(resp)

    def evidence(self, citekey: str, query: str, n: int = 2, width: int = 600) -> dict:
        """One source's passages bearing on ``query``, as ``chitragupta evidence --json`` gives them."""
        with self._lock:
            r = self.retriever()
            resp = r.evidence(query, citekey, n=n, width=width)
            resp.notes[:0] = r.index_notes()
        return _response(resp)

    def explain(self, query: str, citekey: str) -> dict:
        """Each query term's share of ``citekey``'s BM25 score, as ``chitragupta explain --json`` gives it."""
        from chitragupta.engine.explain import explain

        with self._lock:
            return explain(self.retriever(), query, citekey).to_dict()

    def source(self, citekey: str) -> dict:
        """The ledger's row for ``citekey``."""
        with self._lock:
            row = self.retriever().source(citekey)
        return {"citekey": row.citekey, "title": row.title, "authors": list(row.authors), "year": row.year,
                "status": row.status, "reason": row.reason, "abstract": row.abstract, "keywords": list(row.keywords),
                "origin": row.origin, "source_path": row.source_path, "parsed_path": row.parsed_path}
