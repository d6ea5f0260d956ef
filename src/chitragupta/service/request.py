"""A search request, checked once for every surface: the CLI's ``search``, the MCP server's ``search``
tool and ``chitragupta.open_searcher(...).search`` all ask the same fields with the same defaults and
the same error texts.

    req = SearchRequest.checked(engine="hybrid", unit="passage", k=20)   # UsageError on a bad field
    resp = req.run_one(searcher, "digital twin fidelity")

A field is added here (and in ``engine/search/searcher.py``'s ``Searcher`` calls, which every engine
inherits), and reaches every surface from here.

The limits of one request (``Limits``: a query's length, k, the queries of a server's batch call) are
the workspace's ``[serve]`` keys, checked when a request runs on a searcher (whose workspace says them),
so the CLI and the MCP server refuse the same requests with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chitragupta.engine.search.searcher import (DEFAULT_BATCH_K, DEFAULT_K, UNIT_HELP, check_k, check_max_per_source,
                                         check_snippet_chars)
from chitragupta.engine.search.filters import Filters, to_filters
from chitragupta.errors import UsageError
from chitragupta.service import registry

__all__ = ["SearchRequest", "Limits", "DEFAULT_MAX_QUERY_CHARS", "DEFAULT_MAX_K", "DEFAULT_MAX_BATCH_QUERIES"]

# the packaged [serve] defaults (engine/defaults.toml), for a caller without a workspace config
DEFAULT_MAX_QUERY_CHARS = 10_000
DEFAULT_MAX_K = 10_000
DEFAULT_MAX_BATCH_QUERIES = 1_000


@dataclass(frozen=True)
class Limits:
    """What one request may ask: ``max_query_chars`` (a query's length), ``max_k``, ``max_batch_queries``
    (with ``max_query_chars``, the length of a draft the server checks)."""

    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS
    max_k: int = DEFAULT_MAX_K
    max_batch_queries: int = DEFAULT_MAX_BATCH_QUERIES

    @classmethod
    def of(cls, config) -> "Limits":
        """The limits a config's ``[serve]`` section sets (the defaults for a config without one)."""
        serve = getattr(config, "serve", None)
        if serve is None:
            return cls()
        return cls(serve.max_query_chars, serve.max_k, serve.max_batch_queries)

    def check_k(self, k: int, what: str = "k") -> None:
        if k > self.max_k:
            raise UsageError(f"{what} must be at most {self.max_k} ([serve].max_k), got {k}")

    def check_queries(self, queries, *, batch: bool = False) -> None:
        """UsageError naming the first query longer than ``max_query_chars`` (its position in a ``batch``).
        One ``len`` per query (a CLI batch of 20,000 queries: about a millisecond)."""
        if not queries or max(map(len, queries)) <= self.max_query_chars:
            return
        i, n = next((i, len(q)) for i, q in enumerate(queries) if len(q) > self.max_query_chars)
        which = f"query {i + 1}" if batch else "the query"
        raise UsageError(f"{which} is {n:,} characters long; at most {self.max_query_chars:,} "
                         "([serve].max_query_chars)")


@dataclass(frozen=True)
class SearchRequest:
    """``engine`` (a registry name), ``unit`` (None: the engine's default), ``k`` (None: ``DEFAULT_K`` for
    one query, ``DEFAULT_BATCH_K`` for a batch), ``snippet_chars`` (None: the configured width, 0: none),
    ``max_per_source`` (None: the engine's configured cap), ``filters`` (None, or metadata filters: a
    ``Filters`` or a dict of its fields, ``engine/search/filters.py``; kept as a ``Filters`` once checked)."""

    engine: str = registry.DEFAULT_ENGINE
    unit: str | None = None
    k: int | None = None
    snippet_chars: int | None = None
    max_per_source: int | None = None
    filters: object = None
    flags: bool = field(default=False, compare=False, repr=False)  # errors name the CLI's flags (-k)

    @classmethod
    def checked(cls, *, flags: bool = False, **fields) -> "SearchRequest":
        """A request from keyword fields, each checked (UsageError naming the field and what it allows;
        ``flags``: named as the CLI's flags, ``-k``, ``--snippet-chars``)."""
        return cls(**fields).check(flags=flags)

    def check(self, *, flags: bool | None = None) -> "SearchRequest":
        if flags is None:
            flags = self.flags
        object.__setattr__(self, "flags", flags)
        name = (lambda field: "-k" if field == "k" else "--" + field.replace("_", "-")) if flags else (lambda f: f)
        spec = registry.engine(self.engine)
        if self.unit is not None and self.unit not in spec.units:
            serving = [s.name for s in registry.ENGINES.values() if self.unit in s.units]
            if not serving:
                raise UsageError(f"unknown unit {self.unit!r}; allowed: {', '.join(registry.all_units())}")
            unit, eng = (f"--unit {self.unit}", "--engine") if flags else (f"unit {self.unit!r}", "engine")
            raise UsageError(f"{unit} is for {eng} {' or '.join(serving)}; {eng} {spec.name} ranks "
                             + ", ".join(f"{u} ({UNIT_HELP.get(u, u)})" for u in spec.units))
        if self.k is not None:
            check_k(self.k, name("k"))
        check_snippet_chars(self.snippet_chars, name("snippet_chars"))
        check_max_per_source(self.max_per_source, name("max_per_source"))
        if self.filters is not None and not isinstance(self.filters, Filters):
            object.__setattr__(self, "filters", to_filters(self.filters, "filters"))
        if isinstance(self.filters, Filters) and self.filters.is_empty():
            object.__setattr__(self, "filters", None)
        return self

    def filters_for(self, own: list | None, n: int):
        """The filters of a batch of ``n`` queries: the request's, ANDed with each query's ``own`` (a list
        of None or Filters, one per query: a ``--queries`` line's own filters), or None."""
        if own is None or all(f is None for f in own):
            return self.filters
        base = self.filters or Filters()
        return [base.merge(f) for f in own] if len(own) == n else self.filters

    @property
    def spec(self) -> registry.EngineSpec:
        return registry.engine(self.engine)

    @property
    def resolved_unit(self) -> str:
        """The unit the engine ranks for this request."""
        return self.unit if self.unit is not None else self.spec.units[0]

    def k_for(self, batch: bool) -> int:
        return self.k if self.k is not None else (DEFAULT_BATCH_K if batch else DEFAULT_K)

    # -- running it on an open searcher ---------------------------------------------------------------
    def limits(self, searcher) -> Limits:
        """The limits of ``searcher``'s workspace (``[serve]``)."""
        return Limits.of(getattr(getattr(searcher, "workspace", None), "config", None))

    def _within(self, searcher, queries, *, batch: bool = False) -> None:
        """UsageError unless k and ``queries`` are within the limits of ``searcher``'s workspace."""
        limits = self.limits(searcher)
        limits.check_k(self.k_for(batch), "-k" if self.flags else "k")
        if queries is not None:
            limits.check_queries(queries, batch=batch)

    def run_one(self, searcher, query: str):
        """One query: a ``SearchResponse`` (hits with snippets, index notes first)."""
        self._within(searcher, [query])
        return searcher.search(query, self.k_for(False), unit=self.resolved_unit, snippet_chars=self.snippet_chars,
                               max_per_source=self.max_per_source, filters=self.filters)

    def run_similar(self, searcher, citekey: str):
        """"Papers like this one": a ``SearchResponse`` of the sources most like ``citekey``."""
        self._within(searcher, None)
        return searcher.similar(citekey, self.k_for(False), snippet_chars=self.snippet_chars, filters=self.filters)

    def run_many(self, searcher, queries: list[str], filters: list | None = None, *,
                 syntax: bool | str | None = None):
        """A batch: the ``Ranked`` arrays (for a run file); ``filters``: each query's own (None or a
        ``Filters``), ANDed with the request's; ``syntax``: how the query syntax is read
        (``engine.search.constraints.SYNTAX_MODES``; None: ``[retrieval].query_syntax``)."""
        self._within(searcher, queries, batch=True)
        fs = self.filters_for(filters, len(queries))
        kw = {} if fs is None else {"filters": fs}
        if syntax is not None:
            kw["syntax"] = syntax
        return searcher.rank_many(queries, self.k_for(True), unit=self.resolved_unit,
                                  max_per_source=self.max_per_source, **kw)
