"""Engines kept warm across calls, answering in JSON-ready dicts: what ``chitragupta serve`` (the MCP
server) calls, and what any long-lived process can use.

    warm = WarmEngines("my-review")
    warm.search("digital twin fidelity", k=10, engine="hybrid")   # {"hits": [...], "notes": [...]}
    warm.similar("smith2020", k=10, engine="hybrid")               # papers like this one
    warm.evidence("smith2020", "fidelity"); warm.explain("fidelity", "smith2020"); warm.source("smith2020")

Every engine of the registry (``service/registry.py``) is opened on first use and kept; an engine made
of others (hybrid) is made of the ones kept here. Before each call an engine checks, cheaply, that the
workspace has not moved on (its ``changed()``: a new index generation switched in by another process,
the ledger's change stamp, ``content/parsed/``, the embedding store saved again; and the workspace's
config.toml edited) and is reopened when it did, so an answer always comes from the current index -- the
same answer ``chitragupta search`` gives at that moment. Every error a user can cause is a
``ChitraguptaError`` (one line); nothing here prints.

Threads: the calls may come from many threads at once (the MCP server's worker pool) and run side by
side. Each engine has its own lock, held only while it is opened (or reopened), so engines open once
even when the first calls arrive together, and a call to one engine never waits for another engine's
open; an open searcher is read by many threads (what its reads cache is built whole before it is shared:
``engine/search/hits.py``, ``engine/search/scoring.py``, ``enrich/search.py``). Where numba has no thread-safe
threading layer (neither TBB nor OpenMP loads: its workqueue layer aborts on concurrent kernels) the
calls run one at a time.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from chitragupta.notes import note_dicts
from chitragupta.service import registry
from chitragupta.service.request import Limits, SearchRequest

__all__ = ["WarmEngines"]


def _response(resp) -> dict:
    return {"hits": [h.to_dict() for h in resp.hits], "notes": note_dicts(resp.notes)}


def _relative(path: str | None, root: Path) -> str | None:
    """``path`` relative to the workspace folder ``root`` (``../`` where it lies outside): no reply names
    an absolute path."""
    if not path or not os.path.isabs(path):
        return path
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive (Windows): its name alone
        return Path(path).name


class WarmEngines:
    """A workspace's search engines, opened on first use and reopened when the workspace changes."""

    def __init__(self, workspace: str | Path = ".", config: str | Path | None = None, *, update: bool = True,
                 device: str | None = None):
        self._root = Path(workspace)
        self._config_arg = config
        self._update = update
        self._device = device
        self._state = threading.RLock()  # the dicts below: held for lookups and stores, never for an open
        self._engine_locks: dict[str, threading.RLock] = {}  # engine name -> held while it opens
        self._ws = None
        self._config_seen = None
        self._open: dict[str, object] = {}  # engine name -> its open searcher
        self._failed: dict[str, tuple] = {}  # engine name -> (the notes saying why not, what to watch)

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
        from chitragupta.engine.library.workspace import Workspace

        sig = self._config_signature()
        with self._state:
            if self._ws is None or sig != self._config_seen:
                self._ws = Workspace.open(self._root, self._config_arg)
                self._config_seen = sig
                self._open, self._failed = {}, {}
            return self._ws

    def _engine_lock(self, name: str) -> threading.RLock:
        with self._state:
            lock = self._engine_locks.get(name)
            if lock is None:
                lock = self._engine_locks[name] = threading.RLock()
            return lock

    def _store(self, ws, name: str, searcher) -> None:
        """Keep ``searcher`` as engine ``name``'s (unless the config changed while it opened)."""
        with self._state:
            if self._ws is ws:
                self._open[name] = searcher

    def _options(self) -> registry.OpenOptions:
        return registry.OpenOptions(update=self._update, device=self._device, warm=self)

    def searcher(self, name: str):
        """The open searcher of engine ``name``, reopened when it (or what it is made of) changed."""
        self.workspace()
        got = self._open.get(name)
        if got is not None and not got.changed():
            return got
        with self._engine_lock(name):  # one open per engine; the other threads asking wait for it
            ws = self.workspace()
            got = self._open.get(name)
            if got is None or got.changed():
                got = registry.engine(name).open(ws, self._options())
                self._store(ws, name, got)
                with self._state:
                    for other, held in list(self._open.items()):  # engines made of this one are made again
                        if other != name and _holds(held, got.__class__):
                            self._open.pop(other, None)
            return got

    def optional(self, name: str, *, fallback):
        """(engine ``name``'s searcher, []) or, when it cannot open, ``fallback()``'s (None, notes); a
        failure is not retried until what it depends on changes (the fallback's searcher says)."""
        from chitragupta.enrich.search import store_signature

        with self._engine_lock(name):
            ws = self.workspace()
            failed = self._failed.get(name)
            if failed is not None and failed[1] == store_signature(ws):
                return None, failed[0]
            got = self._open.get(name)
            if got is not None and not got.changed():
                return got, []
            searcher, notes = fallback()
            with self._state:
                if self._ws is not ws:
                    return searcher, notes
                if searcher is None:
                    self._failed[name] = (notes, store_signature(ws))
                    self._open.pop(name, None)
                else:
                    self._failed.pop(name, None)
                    self._open[name] = searcher
            return searcher, notes

    def served_units(self) -> dict[str, tuple[str, ...]]:
        """Each engine's units that this workspace can serve now (what the MCP search tool advertises): a
        unit that would hold nothing is left out -- chunks without an embedding store; passages without a
        passage in BM25's passage index (hybrid's passages also come from the embedding store's chunks)."""
        from chitragupta.enrich.search import store_signature
        from chitragupta.errors import ChitraguptaError

        try:
            passages = self.searcher("bm25").scorer.passage_index().n_passages > 0
        except ChitraguptaError:
            passages = False
        store = store_signature(self.workspace()) is not None
        has = {"passage": passages, "chunk": store}
        return {name: tuple(u for u in spec.units if has.get(u, True) or (u == "passage" and name == "hybrid" and store))
                for name, spec in registry.ENGINES.items()}

    # -- the calls ------------------------------------------------------------------------------------
    def _limits(self) -> Limits:
        return Limits.of(self.workspace().config)

    def _call(self):
        """What a call holds while it runs: nothing, or the one lock where numba's kernels may not run in
        two threads at once. (numba's thread count, each thread's own, is set by the scorer in the thread
        that scores with numba: ``engine/search/scoring.py``.)"""
        return _SERIAL if _kernels_serial() else contextlib.nullcontext()

    def search(self, query: str, k: int = 10, engine: str = registry.DEFAULT_ENGINE, unit: str | None = None,
               snippet_chars: int | None = None, filters: dict | None = None) -> dict:
        """One query's hits and notes, as ``chitragupta search --json`` gives them (notes as objects);
        ``filters``: metadata filters (``engine/search/filters.py``'s fields and value syntax)."""
        req = SearchRequest.checked(engine=engine, unit=unit, k=k, snippet_chars=snippet_chars, filters=filters)
        with self._call():
            resp = req.run_one(self.searcher(req.engine), query)
        return _response(resp)

    def similar(self, citekey: str, k: int = 10, engine: str = registry.DEFAULT_ENGINE,
                snippet_chars: int | None = None, filters: dict | None = None) -> dict:
        """The sources most like ``citekey``, as ``chitragupta similar --json`` gives them; ``filters`` as
        for ``search`` (only among the sources they allow)."""
        req = SearchRequest.checked(engine=engine, k=k, snippet_chars=snippet_chars, filters=filters)
        with self._call():
            resp = req.run_similar(self.searcher(req.engine), citekey)
        return _response(resp)

    def evidence(self, citekey: str, query: str, n: int = 2, width: int = 600) -> dict:
        """One source's passages bearing on ``query``, as ``chitragupta evidence --json`` gives them."""
        with self._call():
            r = self.searcher("bm25")
            self._limits().check_queries([query])
            resp = r.evidence(query, citekey, n=n, width=width)
            resp.notes[:0] = r.index_notes()
        return _response(resp)

    def explain(self, query: str, citekey: str) -> dict:
        """Each query term's share of ``citekey``'s BM25 score, as ``chitragupta explain --json`` gives it."""
        from chitragupta.engine.search.explain import explain

        with self._call():
            r = self.searcher("bm25")
            self._limits().check_queries([query])
            return explain(r, query, citekey).to_dict()

    def check(self, text: str, format: str | None = None, engine: str = "auto") -> dict:
        """A draft's citations checked against the library, as ``chitragupta check --json`` gives them
        (``service/check.py``); a draft longer than ``[serve]``'s max_query_chars x max_batch_queries is refused."""
        from chitragupta.errors import UsageError
        from chitragupta.service.check import check

        lim = self._limits()
        if len(text) > lim.max_query_chars * lim.max_batch_queries:
            raise UsageError(f"the draft is {len(text):,} characters long; at most {lim.max_query_chars * lim.max_batch_queries:,}"
                             " ([serve].max_query_chars x max_batch_queries)")
        with self._call():
            return check(None, text, fmt=format, engine=engine, warm=self).to_dict()

    def source(self, citekey: str) -> dict:
        """The ledger's row for ``citekey``, its paths relative to the workspace folder."""
        with self._call():
            row = self.searcher("bm25").source(citekey)
        root = self.workspace().root
        return {"citekey": row.citekey, "title": row.title, "authors": list(row.authors), "year": row.year,
                "author_names": [{"family": f, "given": g} for f, g in row.author_names], "venue": row.venue,
                "type": row.type, "doi": row.doi,
                "status": row.status, "reason": row.reason, "abstract": row.abstract, "keywords": list(row.keywords),
                "origin": _relative(row.origin, root), "source_path": _relative(row.source_path, root),
                "parsed_path": row.parsed_path}


_SERIAL = threading.Lock()
_KERNELS_SERIAL: list[bool] = []  # [whether the calls run one at a time], decided once


def _kernels_serial() -> bool:
    """Whether numba lacks a thread-safe threading layer here (``NUMBA_THREADING_LAYER=workqueue``, or
    neither TBB nor OpenMP loads), so that two threads must not run its parallel kernels at once."""
    if not _KERNELS_SERIAL:
        import importlib.util

        layer = os.environ.get("NUMBA_THREADING_LAYER", "default").lower()
        if importlib.util.find_spec("numba") is None:
            serial = False  # no numba kernels at all
        elif layer == "workqueue":
            serial = True
        else:
            serial = True
            for pool in ("tbb", "omp") if layer in ("default", "safe", "threadsafe") else (layer,):
                try:
                    importlib.import_module(f"numba.np.ufunc.{pool}pool")
                    serial = False
                    break
                except ImportError:  # numba not installed, or the layer's library missing
                    continue
        _KERNELS_SERIAL.append(serial)
    return _KERNELS_SERIAL[0]


def _holds(searcher, cls) -> bool:
    """Whether ``searcher`` is made of a searcher of class ``cls`` (hybrid holds a BM25 and an embed one)."""
    return any(isinstance(part, cls) for part in (getattr(searcher, "retriever", None), getattr(searcher, "dense", None)))
