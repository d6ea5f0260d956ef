"""The public entry point: open a workspace, ``search``, ``search_many``.

    r = Retriever.open("my-workspace")
    resp = r.search("digital twin fidelity", k=10)      # SearchResponse: .hits, .notes
    many = r.search_many(["q1", "q2"], k=100)          # the batched fast path

Queries are tokenized exactly like documents, scored by the one dispatch in ``kernels``, and turned into
citable hits at the edge. Library code never prints; notes come back with the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from engine.config import Config
from engine.errors import UsageError
from engine.index.manage import OpenedIndex, open_current
from engine.index.source import FLAG_TEXT_MISSING, read_text
from engine.results import Note, SearchResponse, SearchResult
from engine.text.windows import choose_windows
from engine.tokenize import query_terms
from engine.workspace import Workspace
from kernels import BM25Params, TopK
from kernels.dispatch import Backend, resolve, score_topk, set_threads

__all__ = ["Retriever", "Ranked"]


class Ranked:
    """The batched fast path's output: top-k document ids and scores (``topk``); each query's scored
    terms and notes are worked out on first access, so the fast path does not pay for them."""

    def __init__(self, topk: TopK, queries: Sequence[str], retriever: "Retriever"):
        self.topk = topk
        self.queries = list(queries)
        self._retriever = retriever
        self._parsed: list[tuple[list[str], list[str]]] | None = None

    def _parse(self):
        if self._parsed is None:
            self._parsed = [query_terms(q) for q in self.queries]
        return self._parsed

    @property
    def terms(self) -> list[list[str]]:
        return [p[0] for p in self._parse()]

    @property
    def notes(self) -> list[list[Note]]:
        return [self._retriever._query_notes(q, t, d) for q, (t, d) in zip(self.queries, self._parse())]


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


class Retriever:
    """BM25 over a workspace's documents. Create with :meth:`open`."""

    def __init__(self, ws: Workspace, opened: OpenedIndex, *, backend: str | None = None):
        self.workspace = ws
        self._opened = opened
        self.index = opened.index
        cfg = ws.config.retrieval
        self.params = BM25Params(k1=cfg.k1, b=cfg.b)
        self.backend: Backend = resolve(backend or cfg.backend)
        set_threads(cfg.threads)
        if opened.current:
            self._rows = opened.rows
        else:  # the index and the ledger disagree: look rows up by citekey
            by_key = {r[0]: r for r in opened.rows}
            self._rows = [by_key.get(self.index.citekeys[i], (self.index.citekeys[i], "", "parsed", None))
                          for i in range(self.index.n_docs)]

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             update: bool = True, backend: str | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> "Retriever":
        """Open a workspace for search, bringing its index up to date unless ``update`` is False."""
        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        return cls(ws, open_current(ws, update=update, progress=progress), backend=backend)

    # -- notes that hold for every query ------------------------------------------------------------
    def index_notes(self) -> list[Note]:
        """Notes about the index itself: title-only sources, a rebuilt or stale cache."""
        notes = list(self._opened.notes)
        missing = self.index.count_flag(FLAG_TEXT_MISSING)
        if missing:
            notes.append(Note("title-only", (
                f"{missing} parsed source(s) have no parsed text on disk and were ranked on their title alone; "
                "`chitragupta sync` re-parses them.")))
        return notes

    # -- scoring ------------------------------------------------------------------------------------
    def _query_notes(self, query: str, terms: list[str], dropped: list[str]) -> list[Note]:
        notes = []
        if dropped:
            notes.append(Note("dropped", "query words not indexed (stopwords or shorter than 2 characters): "
                                         + ", ".join(dropped)))
        if not terms:
            notes.append(Note("no-terms", f"no indexable term in {query!r}; no hits"))
        else:
            unknown = [t for t in terms if self.index.vocab.find(t) < 0]
            if unknown:
                notes.append(Note("unknown-terms", "in no indexed document: " + ", ".join(unknown)))
        return notes

    def rank_many(self, queries: Sequence[str], k: int = 10) -> Ranked:
        """Tokenize and score a batch: the fast path (no snippets, no titles; notes on demand)."""
        k = _check_k(k)
        batch = self.index.query_batch_from_strings(queries)
        cached = {}
        if self.backend.accepts_cached:
            cached = {"idf": self.index.idf_, "norm": self.index.norm(self.params.k1, self.params.b)}
        topk = score_topk(self.index.postings, batch, self.params, k, backend=self.backend, **cached)
        return Ranked(topk, queries, self)

    def citekey(self, doc_id: int) -> str:
        return self.index.citekeys[int(doc_id)]

    def _hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        key, title, _status, _rel = self._rows[doc_id]
        snippet = ""
        if width:
            src_path = self.workspace.root / _rel if _rel and not (self.index.flags[doc_id] & FLAG_TEXT_MISSING) else None
            wins = choose_windows(read_text(src_path), terms, width, 1) if src_path else []
            snippet = wins[0].text if wins else ""
        return SearchResult(citekey=key, title=title, score=float(score), snippet=snippet)

    def search_many(self, queries: Sequence[str], k: int = 10, *, snippet_chars: int | None = 0) -> list[SearchResponse]:
        """Batched search; ``snippet_chars=None`` uses the configured width, 0 (default) skips snippets."""
        ranked = self.rank_many(queries, k)
        width = self.workspace.config.retrieval.snippet_chars if snippet_chars is None else snippet_chars
        terms, notes = ranked.terms, ranked.notes
        out = []
        for q, query in enumerate(queries):
            ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
            hits = [self._hit(int(d), float(s), terms[q], width) for d, s in zip(ids, scores) if d >= 0]
            out.append(SearchResponse(query=query, hits=hits, notes=notes[q], terms=terms[q]))
        return out

    def search(self, query: str, k: int = 10, *, snippet_chars: int | None = None) -> SearchResponse:
        """One query: hits with snippets (width ``[retrieval].snippet_chars`` unless given), and notes."""
        resp = self.search_many([query], k, snippet_chars=snippet_chars)[0]
        resp.notes[:0] = self.index_notes()
        return resp
