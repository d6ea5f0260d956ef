"""The one registry of search engines: each engine's name, the units it ranks, how it opens, and what
the CLI, the MCP server and ``chitragupta.open_searcher`` say of it.

    spec = engine("hybrid")                      # EngineSpec; UsageError naming the engines otherwise
    searcher = spec.open(ws, OpenOptions(device="cpu"))
    names()                                      # ("bm25", "embed", "hybrid")

This module is the only place the engine names are written as a collection (``_BUILTIN``); everything
else -- the CLI's ``--engine`` choices and help, the MCP tool's ``engine`` enum, the warm cache, the
checks of a request -- reads them from here. A new engine is one ``EngineSpec`` (``register`` takes one
at run time too: the tests register a deliberately slow engine that way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from chitragupta.errors import UsageError

__all__ = ["EngineSpec", "OpenOptions", "ENGINES", "register", "unregister", "engine", "names", "all_units",
           "DEFAULT_ENGINE"]


@dataclass(frozen=True)
class OpenOptions:
    """How a searcher is opened: ``update`` brings the BM25 index up to date first; ``backend`` is BM25's
    scoring backend (``[retrieval].backend``), ``device`` where torch runs (None: the config's);
    ``progress`` a ``(done, total)`` callback for an index build; ``warm`` the ``WarmEngines`` opening it,
    if any, so that an engine made of others (hybrid) reuses the ones already open."""

    update: bool = True
    backend: str | None = None
    device: str | None = None
    progress: Callable[[int, int | None], None] | None = None
    warm: object | None = field(default=None, compare=False)


@dataclass(frozen=True)
class EngineSpec:
    """One engine: ``open(workspace, OpenOptions) -> Searcher``; ``units`` it ranks, its default first;
    ``help`` for ``--engine``; ``backend``: whether BM25's ``--backend`` applies; ``needs``: the extra it
    needs, if any (said in help); ``table_scores``: whether a person reads its scores in the CLI's table
    (hybrid's fused z-sums, often negative, are not: the table shows the rank alone; JSON and runs keep
    every score)."""

    name: str
    open: Callable
    units: tuple[str, ...]
    help: str
    backend: bool = False
    needs: str | None = None
    table_scores: bool = True


def _open_bm25(ws, opts: OpenOptions):
    from chitragupta.engine.search.bm25 import BM25Searcher

    return BM25Searcher.open(ws, update=opts.update, backend=opts.backend, device=opts.device, progress=opts.progress)


def _open_embed(ws, opts: OpenOptions):
    from chitragupta.enrich.search import EmbedSearcher

    return EmbedSearcher.open(ws, device=opts.device)


def _open_hybrid(ws, opts: OpenOptions):
    from chitragupta.enrich.hybrid import HybridSearcher, coverage_note, open_bm25, open_dense
    from chitragupta.enrich.search import store_signature

    if opts.warm is None:
        return HybridSearcher.open(ws, update=opts.update, backend=opts.backend, device=opts.device,
                                   progress=opts.progress)
    # kept warm: the BM25 and embedding engines the warm cache already holds are the two sides (BM25's
    # own searcher unless [hybrid].bm25_stemmer gives hybrid an index of its own)
    dense, notes = opts.warm.optional("embed", fallback=lambda: open_dense(ws, opts.device))
    fused = dense is not None and coverage_note(ws, dense) is None
    bm25 = open_bm25(ws, lambda: opts.warm.searcher("bm25"), fused=fused, update=opts.update,
                     backend=opts.backend, progress=opts.progress)
    return HybridSearcher(bm25, dense, "document", notes, None if dense is not None else store_signature(ws))


_BUILTIN = (
    EngineSpec("bm25", _open_bm25, ("document", "passage"), "BM25 (default)", backend=True),
    EngineSpec("embed", _open_embed, ("chunk",),
               "the embedding index `chitragupta enrich --stages embed` builds (ranks chunks, citekey#n)",
               needs="enrich"),
    EngineSpec("hybrid", _open_hybrid, ("document", "passage"),
               "BM25 and the embedding index fused per source ([hybrid] in the config; BM25 alone, with a note, "
               "when the embedding index is missing)", backend=True, needs="enrich", table_scores=False),
)

ENGINES: dict[str, EngineSpec] = {spec.name: spec for spec in _BUILTIN}
DEFAULT_ENGINE = _BUILTIN[0].name


def register(spec: EngineSpec) -> None:
    """Add (or replace) an engine: every surface offers it from then on."""
    ENGINES[spec.name] = spec


def unregister(name: str) -> None:
    """Remove an engine ``register`` added (the built-in ones stay)."""
    if name in {s.name for s in _BUILTIN}:
        raise UsageError(f"engine {name!r} is built in and cannot be removed")
    ENGINES.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(ENGINES)


def engine(name: str) -> EngineSpec:
    """The engine called ``name``; UsageError naming the engines there are."""
    spec = ENGINES.get(name) if isinstance(name, str) else None
    if spec is None:
        raise UsageError(f"unknown engine {name!r}; allowed: {', '.join(ENGINES)}")
    return spec


def all_units() -> tuple[str, ...]:
    """Every unit some engine ranks, in the order the engines name them."""
    seen: dict[str, None] = {}
    for spec in ENGINES.values():
        seen.update(dict.fromkeys(spec.units))
    return tuple(seen)
