"""The service layer: the one place every surface -- the CLI, the MCP server, the Python API -- goes
through to reach an engine.

    from chitragupta import open_searcher
    s = open_searcher("my-review", engine="hybrid")       # any engine of the registry
    resp = s.search("digital twin fidelity", k=10)         # the same calls on every engine

``registry`` (the engines: name, units, how to open), ``request`` (a search request's fields, defaults
and checks, once), ``warm`` (engines kept open for a long-lived caller), ``citations`` (the citation graph's
questions), and the use cases that write a workspace, each returning a report the surfaces print:
``library`` (``sync``, ``import_corpus``), ``index`` (``build``: the indexes and the references under one
lock), ``enrich`` (``enrich``: the optional stages). Layers: the service sits above
``enrich`` and ``engine`` and below ``cli``. Names load on first use: importing it is instant.
"""

from __future__ import annotations

import importlib

__all__ = ["open_searcher", "SearchRequest", "WarmEngines", "EngineSpec", "OpenOptions", "register", "engine",
           "names", "Searcher", "citation_graph"]

_EXPORTS = {
    "SearchRequest": "chitragupta.service.request",
    "WarmEngines": "chitragupta.service.warm",
    "EngineSpec": "chitragupta.service.registry",
    "OpenOptions": "chitragupta.service.registry",
    "register": "chitragupta.service.registry",
    "engine": "chitragupta.service.registry",
    "names": "chitragupta.service.registry",
    "Searcher": "chitragupta.engine.search.searcher",
    "citation_graph": "chitragupta.service.citations",
}


def open_searcher(workspace=".", engine: str = "bm25", *, config=None, update: bool = True,
                  backend: str | None = None, device: str | None = None, progress=None):
    """Open engine ``engine`` (a registry name: ``chitragupta.service.names()``) on a workspace (a path or
    an open ``Workspace``). ``backend`` is BM25's scoring backend, for the engines that use it."""
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.errors import UsageError
    from chitragupta.service import registry

    spec = registry.engine(engine)
    if backend is not None and not spec.backend:
        raise UsageError(f"--backend chooses BM25's scoring backend; --engine {spec.name} does not use it "
                         "(its device is [enrich].device)")
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
    return spec.open(ws, registry.OpenOptions(update=update, backend=backend, device=device, progress=progress))


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'chitragupta.service' has no attribute {name!r}")
    value = getattr(importlib.import_module(target), name)
    globals()[name] = value
    return value
