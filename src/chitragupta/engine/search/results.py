"""The result types of every engine, in one module: ``SearchResult`` (one citable hit),
``SearchResponse`` (one query's hits and notes), ``Note``, and ``Ranked`` (a batch's top-k arrays with
what turns them into citekeys and run files).

Library code never prints: a search returns its hits together with the notes the CLI shows on stderr
(title-only sources, dropped query words, expansions). Every engine -- BM25 documents and passages,
embedding chunks, hybrid sources -- returns these same types.

    ranked = searcher.rank_many(queries, k=100)         # any engine: Ranked
    ranked.topk.ids, ranked.topk.scores                 # (q, k) in the engine's own unit, -1 / -inf padding
    ranked.keys()                                       # citekeys per query, best first
    for chunk in ranked.run_chunks(qids): ...           # a TREC run (fmt="jsonl": JSON lines)

``Ranked`` holds, beside the top-k arrays, the key table (the citekeys, a ``StringTable``), each hit's row
in it, and, for units that are part of a source, each hit's item number (a passage or a chunk:
``<citekey>#<item>`` in a TREC run, an ``item_field`` field in JSON lines). ``columns`` carries what one
engine needs to turn a hit into a citable one (hybrid: each source's rank in either list, its best passage
and chunk). The query plan, when the engine has one, gives the terms and notes, worked out once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.notes import Note
from chitragupta.kernels.types import TopK

__all__ = ["SearchResult", "SearchResponse", "Ranked"]


@dataclass(frozen=True)
class SearchResult:
    """One citable hit. ``page`` and ``passage`` are set by units that know them (passages, chunks);
    ``authors`` (family names) and ``year`` from the ledger (``engine/search/byline.py``)."""

    citekey: str
    title: str
    score: float
    snippet: str
    page: int | None = None
    passage: int | None = None
    authors: tuple[str, ...] = ()
    year: int | None = None

    def to_dict(self) -> dict:
        # the fields by hand: dataclasses.asdict deep-copies each value, a tenth of a warm query's time
        return {"citekey": self.citekey, "title": self.title, "authors": list(self.authors), "year": self.year,
                "score": self.score, "snippet": self.snippet, "page": self.page, "passage": self.passage}


@dataclass
class SearchResponse:
    """The hits of one query, best first, and its notes. Iterating yields the hits."""

    query: str
    hits: list[SearchResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)  # the terms that were scored
    unit: str = "document"

    def __iter__(self):
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i):
        return self.hits[i]


class Ranked:
    """A batch's top-k with what turns it into citekeys and run files (see the module docstring)."""

    def __init__(self, topk: TopK, queries: Sequence[str], *, unit: str, table, rows: np.ndarray | None = None,
                 items: np.ndarray | None = None, item_field: str = "passage", plan=None, tag: str = "chitragupta",
                 columns: dict[str, np.ndarray] | None = None, engine: str = "bm25"):
        self.topk = topk
        self.queries = list(queries)
        self.unit = unit  # the engine's unit: "document", "passage" or "chunk"
        self.engine = engine  # the registry name of the engine that ranked it
        self.table = table
        self.rows = topk.ids if rows is None else rows
        self.items = items
        self.item_field = item_field
        self.plan = plan
        self.tag = tag
        self.columns = columns or {}

    # -- what the plan read ----------------------------------------------------------------------
    @property
    def batch(self):
        """The scored term ids (a ``QueryBatch``), or None for an engine without a BM25 side."""
        return self.plan.batch if self.plan is not None else None

    @property
    def terms(self) -> list[list[str]]:
        """Each query's scored BM25 terms: what it typed, then what expansion added ([] without a plan)."""
        return self.plan.terms if self.plan is not None else [[] for _ in self.queries]

    @property
    def expansions(self) -> list | None:
        return self.plan.expansions if self.plan is not None else None

    @property
    def notes(self):
        """Each query's notes (dropped words, unknown terms, expansions)."""
        if self.plan is None:
            return [[] for _ in self.queries]
        return self.plan.notes(self._note_unit)

    @property
    def _note_unit(self) -> str:
        return "passage" if self.unit == "passage" else "document"

    @property
    def label(self) -> str:
        """What ranked it, for logs: the unit, prefixed by the engine unless it is BM25's."""
        return self.unit if self.engine == "bm25" else f"{self.engine} {self.unit}"

    def counts(self) -> np.ndarray:
        """(q,) the number of hits of each query."""
        return self.topk.counts()

    def unmatched(self) -> int:
        """How many queries had no term the index knows (and so no BM25 hits)."""
        if self.plan is None:
            return int(np.count_nonzero(self.counts() == 0))
        return self.plan.unmatched()

    # -- ids to citable keys, for the whole batch ------------------------------------------------
    def _flat(self):
        """(counts per query, key-table row per hit, item per hit or None, score per hit), rank order."""
        mask = self.topk.ids >= 0
        items = np.asarray(self.items)[mask] if self.items is not None else None
        return mask.sum(axis=1), np.asarray(self.rows)[mask], items, self.topk.scores[mask]

    def keys(self) -> list[list[str]]:
        """Every query's hits as doc ids, best first: the citekey, or ``<citekey>#<item>`` for a part."""
        counts, rows, items, _scores = self._flat()
        if not counts.any():
            return [[] for _ in self.queries]
        names = self.table.strings_at(rows).tolist()
        if items is not None:
            names = [f"{k}#{i}" for k, i in zip(names, items.tolist())]
        out, at = [], 0
        for c in counts.tolist():
            out.append(names[at:at + c])
            at += c
        return out

    def docids(self, q: int) -> list[tuple[str, float]]:
        """Query q's hits as (doc id, score), best first (doc ids as ``keys``)."""
        keep = self.topk.ids[q] >= 0
        names = self.table.strings_at(np.asarray(self.rows[q])[keep]).tolist()
        if self.items is not None:
            names = [f"{k}#{i}" for k, i in zip(names, np.asarray(self.items[q])[keep].tolist())]
        return list(zip(names, self.topk.scores[q][keep].tolist()))

    def run_chunks(self, qids: Sequence[str], *, fmt: str = "trec", tag: str | None = None):
        """The batch as a run file (``fmt`` "trec" or "jsonl"), in chunks of bytes, written by array code
        (``chitragupta.engine.search.runfile.run_chunks``); ``tag`` defaults to the engine's."""
        from chitragupta.engine.search.runfile import run_chunks

        if len(qids) != len(self.queries):
            raise UsageError(f"{len(qids)} query ids for {len(self.queries)} queries")
        counts, rows, items, scores = self._flat()
        return run_chunks(qids, counts, rows, scores, self.table, items, fmt=fmt, tag=tag or self.tag,
                          item_field=self.item_field)
