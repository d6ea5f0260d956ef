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

from chitragupta.engine.config import Config
from chitragupta.errors import UsageError
from chitragupta.engine.expand import load_expander
from chitragupta.engine.index.manage import OpenedIndex, open_current
from chitragupta.engine.index.source import FLAG_BAD_SIDECAR, FLAG_NO_SIDECAR, FLAG_NOT_PARSED, FLAG_TEXT_MISSING, load_body
from chitragupta.engine.results import Note, SearchResponse, SearchResult
from chitragupta.engine.text.windows import choose_windows
from chitragupta.engine.tokenize import query_terms
from chitragupta.engine.workspace import Workspace
from chitragupta.kernels import BM25Params, QueryBatch, TopK
from chitragupta.kernels.dispatch import Backend, resolve, score_topk, set_threads

__all__ = ["Retriever", "Ranked"]


class Ranked:
    """The batched fast path's output: top-k unit ids and scores (``topk``; documents, or passages for
    ``unit="passage"``) and the ``batch`` of term ids that was scored. Each query's terms, expansions
    and notes are worked out on first access (once for the whole batch), so the fast path does not pay
    for them; ``keys`` and ``run_chunks`` turn the arrays into citekeys and run files without Python per
    hit."""

    def __init__(self, topk: TopK, queries: Sequence[str], retriever: "Retriever", unit: str = "document",
                 expander=None, batch: QueryBatch | None = None):
        self.topk = topk
        self.queries = list(queries)
        self.unit = unit
        self.batch = batch
        self._expander = expander
        self._retriever = retriever
        self._parsed: list[tuple[list[str], list[str]]] | None = None
        self._expansions: list | None = None
        self._terms: list[list[str]] | None = None
        self._notes: list[list[Note]] | None = None

    def _parse(self):
        if self._parsed is None:
            self._parsed = [query_terms(q) for q in self.queries]
        return self._parsed

    @property
    def expansions(self) -> list | None:
        """Each query's ``Expansion`` (what acronym expansion added), or None when expansion is off."""
        if self._expander is None:
            return None
        if self._expansions is None:
            self._expansions = [self._expander.expand(q) for q in self.queries]
        return self._expansions

    @property
    def terms(self) -> list[list[str]]:
        """Each query's scored terms: what it typed, then what expansion added."""
        if self._terms is None:
            exp = self.expansions
            if exp is None:
                self._terms = [p[0] for p in self._parse()]
            else:
                self._terms = [p[0] + list(e.added) for p, e in zip(self._parse(), exp)]
        return self._terms

    @property
    def notes(self) -> list[list[Note]]:
        """Each query's notes (dropped words, unknown terms, expansions)."""
        if self._notes is None:
            exp = self.expansions
            out = []
            for i, (q, (t, d)) in enumerate(zip(self.queries, self._parse())):
                notes = self._retriever._query_notes(q, t, d, self.unit)
                if exp is not None and exp[i].pairs:
                    notes.append(Note("expansion", exp[i].note()))
                out.append(notes)
            self._notes = out
        return self._notes

    def unmatched(self) -> int:
        """How many queries had no term the index knows (and so no hits)."""
        if self.batch is None:
            return int(np.count_nonzero(self.topk.counts() == 0))
        return int(np.count_nonzero(np.diff(self.batch.indptr) == 0))

    # -- ids to citable keys, for the whole batch ----------------------------------------------------
    def _hits(self):
        """(counts per query, flat unit ids, flat scores) of the real hits, in rank order."""
        ids, scores = self.topk.ids, self.topk.scores
        mask = ids >= 0
        return mask.sum(axis=1), ids[mask], scores[mask]

    def _key_rows(self, units: np.ndarray):
        """(citekey table, row per hit, item per hit or None) for unit ids."""
        r = self._retriever
        if self.unit == "document":
            return r.index.citekeys, units, None
        pidx = r.passage_index()
        return pidx.citekeys, np.asarray(pidx.p_doc)[units].astype(np.int64), \
            np.asarray(pidx.p_item)[units].astype(np.int64)

    def keys(self) -> list[list[str]]:
        """Every query's hits as doc ids, best first: the citekey, or ``<citekey>#<item>`` for passages."""
        ids = self.topk.ids
        counts = (ids >= 0).sum(axis=1)
        if self.unit == "passage":
            flat_units = ids[ids >= 0]
            table, rows, items = self._key_rows(flat_units)
            flat = [f"{k}#{i}" for k, i in zip(table.strings_at(rows).tolist(), items.tolist())]
            out, at = [], 0
            for c in counts.tolist():
                out.append(flat[at:at + c])
                at += c
            return out
        if not counts.any():
            return [[] for _ in range(ids.shape[0])]
        # rows are hits then padding (-1): name every cell, then cut the short rows
        out = self._retriever.index.citekeys.strings_at(np.where(ids >= 0, ids, ids.max())).tolist()
        for q in np.flatnonzero(counts < ids.shape[1]).tolist():
            del out[q][counts[q]:]
        return out

    def docids(self, q: int) -> list[tuple[str, float]]:
        """Query q's hits as (doc id, score): the citekey, or ``<citekey>#<item>`` for passages."""
        ids, scores = self.topk.ids[q], self.topk.scores[q]
        keep = ids >= 0
        table, rows, items = self._key_rows(ids[keep])
        keys = table.strings_at(rows).tolist()
        if items is not None:
            keys = [f"{k}#{i}" for k, i in zip(keys, items.tolist())]
        return list(zip(keys, scores[keep].tolist()))

    def run_chunks(self, qids: Sequence[str], *, fmt: str = "trec", tag: str | None = None):
        """The batch as a run file (``fmt`` "trec" or "jsonl"), in chunks of bytes (``chitragupta.engine.trec``)."""
        from chitragupta.engine.trec import RUN_TAG, run_chunks

        if len(qids) != len(self.queries):
            raise UsageError(f"{len(qids)} query ids for {len(self.queries)} queries")
        counts, units, scores = self._hits()
        table, rows, items = self._key_rows(units)
        return run_chunks(qids, counts, rows, scores, table, items, fmt=fmt, tag=tag or RUN_TAG)


def _near(key: str, table, limit: int = 5) -> str:
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


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k!r}")
    return int(k)


class Retriever:
    """BM25 over a workspace's documents (``unit="document"``) or its sidecar paragraphs
    (``unit="passage"``). Create with :meth:`open`."""

    UNITS = ("document", "passage")

    def __init__(self, ws: Workspace, opened: OpenedIndex, *, backend: str | None = None, update: bool = True,
                 device: str | None = None):
        self.workspace = ws
        self._opened = opened
        self._update = update
        self.index = opened.index
        cfg = ws.config.retrieval
        self.params = BM25Params(k1=cfg.k1, b=cfg.b,
                                 field_weights=(("title", cfg.weight_title), ("abstract", cfg.weight_abstract)))
        self.passage_params = BM25Params(k1=cfg.k1, b=cfg.b)  # passages have no fields
        # device: where the torch backend runs ("auto" | "cpu" | "cuda"); numba and numpy ignore it
        self.backend: Backend = resolve(backend or cfg.backend, device or cfg.device)
        set_threads(cfg.threads)
        self._rows = self._aligned_rows(opened)
        self._passages: OpenedIndex | None = None
        self._expansion_cache = None
        self._passage_rows: list | None = None

    @staticmethod
    def _aligned_rows(opened: OpenedIndex) -> list:
        if opened.current:
            return opened.rows
        # the index and the ledger disagree: look rows up by citekey
        by_key = {r[0]: r for r in opened.rows}
        keys = opened.index.citekeys
        return [by_key.get(keys[i], (keys[i], "", "parsed", None)) for i in range(len(keys))]

    @classmethod
    def open(cls, workspace: str | Path | Workspace = ".", config: str | Path | Config | None = None, *,
             update: bool = True, backend: str | None = None, device: str | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> "Retriever":
        """Open a workspace for search, bringing its index up to date unless ``update`` is False.
        ``backend`` and ``device`` override ``[retrieval].backend`` and ``[retrieval].device``."""
        ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
        return cls(ws, open_current(ws, update=update, progress=progress), backend=backend, update=update,
                   device=device)

    # -- the passage index, opened on first use -----------------------------------------------------
    def passage_index(self):
        if self._passages is None:
            self._passages = open_current(self.workspace, unit="passage", update=self._update)
            self._passage_rows = self._aligned_rows(self._passages)
        return self._passages.index

    def _check_unit(self, unit: str) -> str:
        if unit not in self.UNITS:
            raise UsageError(f"unknown unit {unit!r}; allowed: {', '.join(self.UNITS)}")
        return unit

    # -- notes that hold for every query ------------------------------------------------------------
    def index_notes(self, unit: str = "document") -> list[Note]:
        """Notes about an index itself: title-only sources, sidecars, a rebuilt or stale cache."""
        if self._check_unit(unit) == "passage":
            return self._passage_notes()
        notes = list(self._opened.notes)
        bad = self.index.keys_with_flag(FLAG_BAD_SIDECAR)
        if bad and not any(n.kind == "sidecar" for n in notes):
            notes.append(Note("sidecar", f"{len(bad)} source(s) have a sidecar that is not valid and were indexed "
                                         f"from their .txt without the reference cut: {_names(bad)}"))
        missing = self.index.count_flag(FLAG_TEXT_MISSING)
        if missing:
            notes.append(Note("title-only", (
                f"{missing} parsed source(s) have no parsed text on disk and were ranked on their title alone; "
                "`chitragupta sync` re-parses them.")))
        return notes

    def _passage_notes(self) -> list[Note]:
        pidx = self.passage_index()
        notes = list(self._passages.notes)
        flags = np.asarray(pidx.flags)
        no_side = [pidx.citekeys[int(i)] for i in np.flatnonzero(
            (flags & FLAG_NO_SIDECAR) & ~(flags & (FLAG_TEXT_MISSING | FLAG_NOT_PARSED)))]
        bad = pidx.keys_with_flag(FLAG_BAD_SIDECAR)
        if pidx.n_passages == 0:
            notes.append(Note("no-passages", "the passage unit has nothing to search: no source has a usable "
                                             "passage sidecar (parse with [parser].backend = \"docling\" and sync)"))
        if no_side:
            notes.append(Note("no-sidecar", f"{len(no_side)} source(s) have no passage sidecar and cannot be "
                                            f"returned by the passage unit: {_names(no_side)}"))
        if bad:
            notes.append(Note("sidecar", f"{len(bad)} source(s) have a sidecar that is not valid and were "
                                         f"skipped by the passage unit: {_names(bad)}"))
        return notes

    def _query_notes(self, query: str, terms: list[str], dropped: list[str], unit: str = "document") -> list[Note]:
        notes = []
        if dropped:
            notes.append(Note("dropped", "query words not indexed (stopwords or shorter than 2 characters): "
                                         + ", ".join(dropped)))
        if not terms:
            notes.append(Note("no-terms", f"no indexable term in {query!r}; no hits"))
        else:
            index = self.passage_index() if unit == "passage" else self.index
            unknown = [t for t in terms if index.vocab.find(index.index_term(t)) < 0]
            if unknown:
                where = "passage" if unit == "passage" else "document"
                notes.append(Note("unknown-terms", f"in no indexed {where}: " + ", ".join(unknown)))
        return notes

    # -- scoring ------------------------------------------------------------------------------------
    def _score(self, index, batch, k: int) -> TopK:
        params = self.params if index is self.index else self.passage_params
        cached = {}
        if self.backend.accepts_cached:
            cached = {"idf": index.idf_, "norm": index.norm(params.k1, params.b), "bounds": index.bounds(params)}
        return score_topk(index.postings, batch, params, k, backend=self.backend, **cached)

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str = "document",
                  max_per_source: int | None = None) -> Ranked:
        """Tokenize and score a batch: the fast path (no snippets, no titles; notes on demand).

        For passages, ``[retrieval].max_passages_per_source`` (or ``max_per_source``) is applied to the
        fully ranked list, so a dominant source's excess promotes another source's passage rather than
        shortening the list.
        """
        k = _check_k(k)
        self._check_unit(unit)
        queries = list(queries)
        expander = self.expander()
        # No more hits than the unit has: a huge k (``-k 1000000000``) must not allocate (n, k) arrays.
        if unit == "document":
            k = min(k, max(1, self.index.n_docs))
            batch = self.index.query_batch_from_strings(queries, expander)
            return Ranked(self._score(self.index, batch, k), queries, self, "document", expander, batch)
        pidx = self.passage_index()
        k = min(k, max(1, pidx.n_passages))
        batch = pidx.query_batch_from_strings(queries, expander)
        cap = self.workspace.config.retrieval.max_passages_per_source if max_per_source is None else max_per_source
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise UsageError(f"max_per_source must be an integer >= 1, got {cap!r}")
        return Ranked(self._capped(pidx, batch, k, cap), queries, self, "passage", expander, batch)

    def expander(self):
        """The acronym expander (``engine.expand.Expander``: ``.expand(query)``), reloaded when
        content/acronyms.toml changes; None when expansion is switched off (nothing is read then)."""
        if not self.workspace.config.retrieval.acronym_expansion:
            return None
        user = self.workspace.content / "acronyms.toml"
        try:
            stamp = user.stat().st_mtime_ns
        except OSError:
            stamp = None
        if self._expansion_cache is None or self._expansion_cache[0] != stamp:
            self._expansion_cache = (stamp, load_expander(self.workspace.content, True))
        return self._expansion_cache[1]

    def _capped(self, pidx, batch, k: int, cap: int) -> TopK:
        """Top-k passages per query with at most ``cap`` per source, exact: a query whose capped list is
        short while its ranked prefix was full is ranked again deeper."""
        out = TopK.empty(batch.n_queries, k)
        p_doc = np.asarray(pidx.p_doc)
        todo = np.arange(batch.n_queries)
        depth = k * cap
        while todo.size:
            sub = QueryBatch(indptr=np.concatenate(([0], np.cumsum(np.diff(batch.indptr)[todo]))).astype(np.int64),
                             terms=np.concatenate([batch.terms[batch.indptr[q]:batch.indptr[q + 1]] for q in todo])
                             if todo.size else batch.terms[:0])
            depth = min(max(depth, k), max(pidx.n_passages, 1))
            top = self._score(pidx, sub, depth)
            again = []
            for row, q in enumerate(todo):
                ids, scores = top.ids[row], top.scores[row]
                kept, per = 0, {}
                for u, sc in zip(ids.tolist(), scores.tolist()):
                    if u < 0:
                        break
                    d = int(p_doc[u])
                    if per.get(d, 0) >= cap:
                        continue
                    per[d] = per.get(d, 0) + 1
                    out.ids[q, kept], out.scores[q, kept] = u, sc
                    kept += 1
                    if kept == k:
                        break
                if kept < k and ids[-1] >= 0 and depth < pidx.n_passages:
                    out.ids[q], out.scores[q] = -1, -np.inf
                    again.append(q)
            todo = np.asarray(again, dtype=np.int64)
            depth *= 4
        return out

    def citekey(self, doc_id: int) -> str:
        return self.index.citekeys[int(doc_id)]

    # -- turning ids into citable hits --------------------------------------------------------------
    def _doc(self, citekey: str) -> int:
        doc_id = self.index.doc_id(citekey)
        if doc_id < 0:
            raise UsageError(f"unknown citekey {citekey!r}" + _near(citekey, self.index.citekeys))
        return doc_id

    def body(self, citekey: str):
        """The text the index read for ``citekey`` (``engine.index.source.Body``: ``.text`` after the
        reference cut, ``.page_at(offset)``, the sidecar's ``.items``); empty when it is not on disk."""
        return self._body(self._doc(citekey))

    def parsed_path(self, citekey: str) -> Path | None:
        """The parsed text file of ``citekey`` (``content/parsed/<name>.txt``), or None when it has none."""
        rel = self._rows[self._doc(citekey)][3]
        return self.workspace.root / rel if rel else None

    def _body(self, doc_id: int):
        _key, _title, _status, rel = self._rows[doc_id]
        if not rel or self.index.flags[doc_id] & FLAG_TEXT_MISSING:
            return load_body(None)
        return load_body(self.workspace.root / rel)

    def doc_hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        """Document ``doc_id`` as a citable hit: its title and the ``width``-character window holding most
        of ``terms`` (0 or None: no snippet)."""
        return self._hit(doc_id, score, terms, width)

    def passage_hit(self, u: int, score: float, cache: dict | None = None) -> SearchResult:
        """Passage ``u`` as a citable hit: its whole paragraph, page and item number. ``cache`` keeps the
        sidecars read across calls."""
        return self._passage_hit(u, score, {} if cache is None else cache)

    def _hit(self, doc_id: int, score: float, terms: list[str], width: int | None) -> SearchResult:
        key, title, _status, _rel = self._rows[doc_id]
        snippet, page = "", None
        if width:
            body = self._body(doc_id)
            wins = choose_windows(body.text, terms, width, 1, stem=self.index.stem)
            if wins:
                snippet, page = wins[0].text, body.page_at(wins[0].anchor)
        return SearchResult(citekey=key, title=title, score=float(score), snippet=snippet, page=page)

    def _passage_hit(self, u: int, score: float, cache: dict) -> SearchResult:
        pidx = self.passage_index()
        d, item = int(pidx.p_doc[u]), int(pidx.p_item[u])
        key, title, _status, rel = self._passage_rows[d]
        if d not in cache:
            body = load_body(self.workspace.root / rel) if rel else load_body(None)
            cache[d] = body.items or ()
        items = cache[d]
        it = items[item] if item < len(items) else {"text": "", "page": None}
        return SearchResult(citekey=key, title=title, score=float(score), snippet=it["text"], page=it["page"],
                            passage=item)

    def search_many(self, queries: Sequence[str], k: int = 10, *, unit: str = "document",
                    snippet_chars: int | None = 0, max_per_source: int | None = None) -> list[SearchResponse]:
        """Batched search. Documents: ``snippet_chars=None`` uses the configured width, 0 (default)
        skips snippets. Passages: each hit is its whole paragraph, with its page and item number
        (``max_per_source`` as for ``rank_many``)."""
        ranked = self.rank_many(queries, k, unit=unit, max_per_source=max_per_source)
        width = self.workspace.config.retrieval.snippet_chars if snippet_chars is None else snippet_chars
        terms, notes = ranked.terms, ranked.notes
        out, cache = [], {}
        for q, query in enumerate(queries):
            ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
            if unit == "passage":
                hits = [self._passage_hit(int(u), float(s), cache) for u, s in zip(ids, scores) if u >= 0]
            else:
                hits = [self._hit(int(d), float(s), terms[q], width) for d, s in zip(ids, scores) if d >= 0]
            out.append(SearchResponse(query=query, hits=hits, notes=notes[q], terms=terms[q], unit=unit))
        return out

    def search(self, query: str, k: int = 10, *, unit: str = "document",
               snippet_chars: int | None = None) -> SearchResponse:
        """One query: hits (with snippets, or whole passages) and notes, index notes first."""
        resp = self.search_many([query], k, unit=unit, snippet_chars=snippet_chars)[0]
        resp.notes[:0] = self.index_notes(unit)
        return resp

    # -- evidence -----------------------------------------------------------------------------------
    def evidence(self, query: str, citekey: str, *, n: int = 2, width: int = 600) -> SearchResponse:
        """The passages of one document that bear on ``query``: up to ``n`` windows of ``width``
        characters from the same text the index read (nothing after the reference cut), chosen by the
        shared window chooser; a window in a table is widened to the whole table. Each hit's score is
        the number of distinct query terms its window holds."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"n must be an integer >= 1, got {n!r}")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise UsageError(f"width must be an integer >= 1, got {width!r}")
        doc_id = self._doc(citekey)
        terms, dropped = query_terms(query)
        notes = self._query_notes(query, terms, dropped)
        expander = self.expander()
        if expander is not None:
            exp = expander.expand(query)
            terms = terms + list(exp.added)
            if exp.pairs:
                notes.append(Note("expansion", exp.note()))
        body = self._body(doc_id)
        title = self._rows[doc_id][1]
        hits = [SearchResult(citekey=citekey, title=title, score=float(w.covered), snippet=w.text,
                             page=body.page_at(w.anchor))
                for w in choose_windows(body.text, terms, width, n, stem=self.index.stem)]
        if terms and not hits:
            notes.append(Note("no-window", f"{citekey} has no passage holding a query term"
                                           + (" (its text is not on disk)" if not body.text else "")))
        return SearchResponse(query=query, hits=hits, notes=notes, terms=terms, unit="evidence")
