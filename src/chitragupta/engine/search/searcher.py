"""What every search engine is: the ``Searcher`` calls, their defaults, and the checks of each request
field, written once.

Every engine -- ``BM25Searcher`` (``engine/search/bm25.py``), ``EmbedSearcher`` and ``HybridSearcher``
(``enrich/``) -- derives from ``Searcher`` and provides three things:

    rank_many(queries, k, *, unit=None, max_per_source=None, filters=None, syntax=None) -> Ranked
                                                                           the batch, arrays only
    responses(ranked, *, snippet_chars=None) -> list[SearchResponse]      citable hits for a Ranked
    index_notes(unit=None) -> list[Note]                                   what holds for every query
    rank_similar(citekey, k) -> Ranked                                     "papers like this one"

and inherits ``search_many``, ``search`` and ``similar`` from here, so the request fields mean the same on every
engine and have the same defaults:

    k               hits per query, an integer >= 1 (``DEFAULT_K``; a batch from the CLI: ``DEFAULT_BATCH_K``);
                    more than the unit holds is not an error: the list is as long as the unit allows
    unit            None: the engine's first unit (``UNITS[0]``); else one of ``UNITS``
    snippet_chars   None: ``[retrieval].snippet_chars``; 0: no snippet; else the width, in [1, SNIPPET_MAX]
    max_per_source  None: the engine's configured cap (passages, chunks; a document or a fused source is
                    one per source already); else an integer >= 1. A capped list that falls short while
                    more units exist is ranked again deeper (``deepen_capped``), on every engine
    filters         None, or metadata filters (``engine/search/filters.py``: a ``Filters`` or a dict of its fields) for
                    every query, or a list with one entry (None, a Filters or a dict) per query; applied as a
                    mask before top-k. Each query's notes say how many sources had no value for a filtered field
    syntax          (``rank_many``) how BM25 reads the query syntax: None: ``[retrieval].query_syntax`` (a
                    malformed query an error); "lenient" (a malformed one read as plain words, with a note);
                    "plain" (``engine/search/constraints.py``'s ``SYNTAX_MODES``)

Every hit ``search`` and ``similar`` give carries its source's authors and year (``byline.py``).

The service layer (``chitragupta.service``) checks a request with these same functions before it
reaches an engine; an engine called directly checks it again, with the same words.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from chitragupta.engine.search.byline import with_bylines
from chitragupta.errors import UsageError

__all__ = ["Searcher", "check_k", "check_snippet_chars", "check_max_per_source", "deepen_capped",
           "UNIT_HELP", "DEFAULT_K", "DEFAULT_BATCH_K", "SNIPPET_MAX"]

DEFAULT_K = 10
DEFAULT_BATCH_K = 100  # a batch (``search --queries``, a run file) asks for this many by default
SNIPPET_MAX = 2**31 - 1  # as [retrieval].snippet_chars allows

# What each unit is, for help and error texts (the engines that serve a unit are in the service registry).
UNIT_HELP = {
    "document": "whole sources",
    "passage": "a source's paragraphs, each with its page (not an imported text's)",
    "chunk": "the embedding index's chunks (each hit names its chunk as citekey#n)",
}


def check_k(k, what: str = "k") -> int:
    """``k`` as an int, or UsageError unless it is an integer >= 1 (every engine's k, every cap)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"{what} must be an integer >= 1, got {k!r}")
    return int(k)


def check_snippet_chars(width, what: str = "snippet_chars") -> int | None:
    """None (the configured width), 0 (no snippet) or a width in [1, SNIPPET_MAX]; UsageError otherwise."""
    if width is None:
        return None
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or not 0 <= width <= SNIPPET_MAX:
        raise UsageError(f"{what} must be an integer in [0, {SNIPPET_MAX}] (0: no snippet), got {width!r}")
    return int(width)


def check_max_per_source(cap, what: str = "max_per_source") -> int | None:
    """None (the engine's configured cap) or an integer >= 1."""
    return None if cap is None else check_k(cap, what)


def deepen_capped(rank: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]],
                  n_queries: int, k: int, cap: int, n_units: int, depth: int):
    """The top ``k`` of each query with at most ``cap`` units per source, exact on every engine.

    ``rank(queries, depth)`` ranks the queries at positions ``queries`` to ``depth`` units and returns
    ``(ids, sources, scores)``, each (len(queries), depth), best first, -1 padding. The capped list is
    gathered from that (``kernels.topk.cap_per_source``); a query whose capped list is short while its
    ranked prefix was full is ranked again four times deeper, until the unit is exhausted. Returns
    ``(ids, scores)`` (n_queries, k), -1 / -inf padding."""
    from chitragupta.kernels.topk import cap_per_source

    ids_out = np.full((n_queries, k), -1, dtype=np.int64)
    scores_out = np.full((n_queries, k), -np.inf)
    todo = np.arange(n_queries)
    depth = max(depth, k)
    while todo.size:
        depth = min(max(depth, k), max(n_units, 1))
        ids, src, scores = rank(todo, depth)
        cols, short = cap_per_source(ids, np.where(ids >= 0, src, 0), cap, k)
        got = cols >= 0
        safe = np.where(got, cols, 0)
        ids_out[todo] = np.where(got, np.take_along_axis(ids, safe, axis=1), -1)
        scores_out[todo] = np.where(got, np.take_along_axis(np.asarray(scores, dtype=np.float64), safe, axis=1),
                                    -np.inf)
        again = short & (depth < n_units)
        ids_out[todo[again]], scores_out[todo[again]] = -1, -np.inf
        todo = todo[again]
        depth *= 4
    return ids_out, scores_out


class Searcher:
    """The base of every engine: ``search_many`` and ``search`` over the engine's ``rank_many``,
    ``responses`` and ``index_notes`` (module docstring). ``NAME`` is the engine's registry name,
    ``UNITS`` the units it ranks, its default first."""

    NAME = ""
    UNITS: tuple[str, ...] = ("document",)

    def check_unit(self, unit: str | None) -> str:
        """``unit``, or the engine's default for None; UsageError naming the units it serves."""
        if unit is None:
            return self.UNITS[0]
        if unit not in self.UNITS:
            raise UsageError(f"unit {unit!r} is not one that engine {self.NAME} ranks; allowed: "
                             + ", ".join(f"{u} ({UNIT_HELP.get(u, u)})" for u in self.UNITS))
        return unit

    def snippet_width(self, snippet_chars: int | None) -> int:
        """The snippet width a request asks for: None is ``[retrieval].snippet_chars``."""
        width = check_snippet_chars(snippet_chars)
        return self.workspace.config.retrieval.snippet_chars if width is None else width

    def changed(self) -> bool:
        """Whether what this searcher read has moved on, so a long-lived caller should open it again."""
        return False

    # -- what an engine provides ---------------------------------------------------------------------
    def rank_many(self, queries: Sequence[str], k: int = DEFAULT_K, *, unit: str | None = None,
                  max_per_source: int | None = None, filters=None, syntax: bool | str | None = None):
        raise NotImplementedError

    def responses(self, ranked, *, snippet_chars: int | None = None) -> list:
        raise NotImplementedError

    def index_notes(self, unit: str | None = None) -> list:
        raise NotImplementedError

    def rank_similar(self, citekey: str, k: int = DEFAULT_K):
        """The ``k`` sources most like ``citekey`` (never itself), as a ``Ranked`` of one query."""
        raise UsageError(f"engine {self.NAME} cannot rank the sources like a given one")

    # -- what every engine inherits ------------------------------------------------------------------
    def similar(self, citekey: str, k: int = DEFAULT_K, *, snippet_chars: int | None = None, filters=None):
        """"Papers like this one": the ``k`` sources most like ``citekey`` (never itself), as citable hits
        with snippets, the index's notes first; ``filters`` as for ``search`` (the hits only among the
        sources they allow). UsageError naming the closest citekeys for an unknown one."""
        from chitragupta.engine.search.filters import filter_notes, to_filters

        check_snippet_chars(snippet_chars)
        kw = {}
        if filters is not None:
            f = to_filters(filters, "filters")
            kw = {} if f.is_empty() else {"filters": f}
        ranked = self.rank_similar(citekey, k, **kw)
        resp = with_bylines(getattr(self, "workspace", None), self.responses(ranked, snippet_chars=snippet_chars))[0]
        resp.notes.extend(filter_notes(ranked, 0))
        resp.notes[:0] = self.index_notes(None)
        return resp

    def search_many(self, queries: Sequence[str], k: int = DEFAULT_K, *, unit: str | None = None,
                    snippet_chars: int | None = None, max_per_source: int | None = None, filters=None) -> list:
        """Batched search with citable hits (``responses`` of ``rank_many``): documents and chunks with a
        ``snippet_chars`` window (None: the configured width, 0: none); a passage's window is in its paragraph."""
        from chitragupta.engine.search.filters import filter_notes

        check_snippet_chars(snippet_chars)
        kw = {} if filters is None else {"filters": filters}  # an engine written before filters takes none
        ranked = self.rank_many(queries, k, unit=unit, max_per_source=max_per_source, **kw)
        out = with_bylines(getattr(self, "workspace", None), self.responses(ranked, snippet_chars=snippet_chars))
        for q, resp in enumerate(out):
            resp.notes.extend(filter_notes(ranked, q))
        return out

    def search(self, query: str, k: int = DEFAULT_K, *, unit: str | None = None, snippet_chars: int | None = None,
               max_per_source: int | None = None, filters=None):
        """One query: hits with snippets, best first, and the notes (the index's first)."""
        resp = self.search_many([query], k, unit=unit, snippet_chars=snippet_chars, max_per_source=max_per_source,
                                filters=filters)[0]
        resp.notes[:0] = self.index_notes(unit)
        return resp
