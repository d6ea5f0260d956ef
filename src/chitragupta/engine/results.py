"""The one result type, and the notes that travel with it.

Library code never prints: a search returns its hits together with the notes the CLI shows on stderr
(title-only sources, dropped query words, expansions). Every search engine here -- BM25 documents, BM25
passages, embeddings -- returns these same types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SearchResult", "SearchResponse", "Note"]


@dataclass(frozen=True)
class SearchResult:
    """One citable hit. ``page`` and ``passage`` are set by units that know them (passages, chunks)."""

    citekey: str
    title: str
    score: float
    snippet: str
    page: int | None = None
    passage: int | None = None

    def to_dict(self) -> dict:
        # the fields by hand: dataclasses.asdict deep-copies each value, a tenth of a warm query's time
        return {"citekey": self.citekey, "title": self.title, "score": self.score, "snippet": self.snippet,
                "page": self.page, "passage": self.passage}


@dataclass(frozen=True)
class Note:
    """Something the caller should be told; ``kind`` lets a caller filter (``title-only``, ``dropped``,
    ``no-terms``, ``unknown-terms``, ``index``, ``expansion``)."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


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
