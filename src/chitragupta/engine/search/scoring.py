"""BM25 scoring of a workspace: its document and passage indexes, the backend a batch is scored on, and
a batch of query strings to a ``Ranked`` (top-k arrays, no titles, no snippets).

Which scorer: under ``[retrieval].backend = "auto"`` each batch is scored where ``kernels.dispatch``
says its size (queries x units) is best scored: the numpy scorer (``chitragupta.kernels.reference``: it
reads only its terms' posting slices, checks them, and needs no JIT kernels, so a query or a small
library's batch from a cold process pays for nothing else), or numba (torch on CUDA) once the index has
passed its deep check. Both give the same ids and scores to the bit (tested). A configured backend other
than auto is used for everything.

An index found damaged while scoring is rebuilt once (with a note) and the batch ranked again.

A batch whose queries use the query syntax (``engine/search/constraints.py``) is scored with an ``allowed`` mask
per constrained query, built here from the unit's postings and, for phrases, the candidates' own text
(a document's title and body as the index read them; a passage's paragraph): the scorers never let a
disallowed unit into the top-k. A batch without syntax is scored exactly as before.

Metadata filters (``engine/search/filters.py``) take the same path: a query's filters give a mask over the
index's documents (for passages, mapped through ``p_doc``), built once per distinct filter and index
generation and kept here, ANDed with its syntax mask.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from chitragupta.engine.search.expand import load_expander
from chitragupta.engine.index.manage import OpenedIndex, open_current, rebuild
from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.engine.search.query import QueryPlan
from chitragupta.engine.search.results import Ranked
from chitragupta.engine.search.searcher import deepen_capped
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import IndexDamaged, UsageError
from chitragupta.kernels import BM25Params, QueryBatch, TopK
from chitragupta.kernels.dispatch import Backend, backend_name, resolve, set_threads

__all__ = ["BM25Scorer", "check_backend"]


def check_backend(backend: str) -> None:
    """UsageError unless ``backend`` names a scoring backend (checked when a searcher opens; the backend
    itself is resolved when a batch first needs it)."""
    from chitragupta.kernels.dispatch import BACKENDS

    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")


def _phrase_check(index):
    """``engine.constraints``' phrase check over ``index``'s positions array (None without one): a phrase's
    runs as the array's ids (an indexed run -> its term, the j-th dropped run -> ``n_terms + j``), the
    candidates scanned by ``kernels.phrase``. Final unless the index is stemmed (then the ids are stems)."""
    got = getattr(index, "positions", None)
    if got is None:
        return None
    from chitragupta.engine.text.stem import NONE
    from chitragupta.engine.text.tokenize import DROPPED_RUNS
    from chitragupta.kernels.phrase import phrase_units

    from chitragupta.kernels.phrase import Anchor, check_offsets

    seq, ptr = got
    n_terms = len(index.vocab)
    dropped = {run: j for j, run in enumerate(DROPPED_RUNS)}
    final = index.stemmer_name == NONE
    tpos, tptr = index.term_positions
    postings = index.raw_postings
    indptr = np.asarray(postings.indptr)

    def anchor(pattern: list[int]) -> Anchor:
        # the rarest indexed word of the phrase: the fewest occurrences to compare
        offset = min((j for j, t in enumerate(pattern) if t < n_terms), key=lambda j: indptr[pattern[j] + 1] - indptr[pattern[j]])
        t = pattern[offset]
        return Anchor(offset, postings.indices, postings.tf, int(indptr[t]), int(indptr[t + 1]), tpos,
                      int(tptr[t]), int(tptr[t + 1]))

    def phrases(runs: tuple, candidates: np.ndarray):
        if not getattr(index, "offsets_checked", False):  # once per opened index, on its first phrase
            check_offsets(seq, ptr)
            index.offsets_checked = True
        pattern = []
        for run in runs:
            j = dropped.get(run)
            if j is None:
                j = int(index.vocab.find_many([index.index_term(run.decode("ascii"))])[0])
                if j < 0:  # a run no document holds
                    return candidates[:0], True
            else:
                j += n_terms
            pattern.append(j)
        return candidates[phrase_units(seq, ptr, candidates, np.asarray(pattern, dtype=np.int32),
                                       anchor=anchor(pattern), offsets_checked=True)], final

    return phrases


class _Rebuilt(Exception):
    """An index was found damaged while scoring and has been rebuilt: rank the batch again."""


class BM25Scorer:
    """A workspace's BM25 indexes (the document index opened, the passage index on first use) and the
    scoring of query batches against them."""

    def __init__(self, ws: Workspace, opened: OpenedIndex, *, backend: str | None = None, update: bool = True,
                 device: str | None = None):
        self.workspace = ws
        self.update = update
        cfg = ws.config.retrieval
        self.params = BM25Params(k1=cfg.k1, b=cfg.b,
                                 field_weights=(("title", cfg.weight_title), ("abstract", cfg.weight_abstract)))
        self.passage_params = BM25Params(k1=cfg.k1, b=cfg.b)  # passages have no fields
        # device: where the torch backend runs ("auto" | "cpu" | "cuda"); numba and numpy ignore it
        self._backend_name = backend or cfg.backend
        self._device = device or cfg.device
        self._backends: dict[str | None, Backend] = {}  # resolved when a batch first needs one (None: ``backend``)
        self._expansion_cache = None
        self.opened: dict[str, OpenedIndex] = {}
        self.rows: dict[str, list] = {}  # per unit, the ledger row (citekey, title, status, parsed path) of each
        self._facet_tables: dict = {}  # (unit, index generation) -> FacetTable
        self._filter_masks: dict = {}  # (unit, index generation, Filters) -> (unit mask, {field: no value})
        self._opening = threading.Lock()  # the passage index opens once, whichever thread asks first
        self.install("document", opened)

    def install(self, unit: str, opened: OpenedIndex) -> None:
        """Take ``opened`` as ``unit``'s index (opened, or rebuilt after damage), with its aligned rows."""
        self.rows[unit] = _aligned_rows(opened)
        self._facet_tables = {}  # (a passage index's come from the document index's columns)
        self.opened[unit] = opened  # last: another thread takes a unit in ``opened`` as ready

    @property
    def index(self):
        """The document index."""
        return self.opened["document"].index

    def passage_index(self):
        """The passage index, opened (and brought up to date unless ``update`` is False) on first use."""
        if "passage" not in self.opened:
            with self._opening:
                if "passage" not in self.opened:
                    self.install("passage", open_current(self.workspace, unit="passage", update=self.update))
        return self.opened["passage"].index

    def index_of(self, unit: str):
        return self.index if unit == "document" else self.passage_index()

    def params_of(self, unit: str) -> BM25Params:
        return self.params if unit == "document" else self.passage_params

    # -- the backend, resolved when a batch first needs it ------------------------------------------
    @property
    def backend(self) -> Backend:
        """The backend a large batch is scored on (``[retrieval].backend`` resolved: numba, numpy or torch)."""
        if None not in self._backends:
            self._backends[None] = resolve(self._backend_name, self._device)
        return self._backends[None]

    def backend_for(self, unit: str, n_queries: int) -> Backend:
        """The backend a batch of ``n_queries`` over ``unit``'s index is scored on: under "auto", what
        ``kernels.dispatch`` says for its size (module docstring)."""
        work = n_queries * max(1, self.index_of(unit).n_units)
        name = backend_name(self._backend_name, self._device, work=work)
        if name not in self._backends:
            self._backends[name] = resolve(self._backend_name, self._device, work=work)
        backend = self._backends[name]
        if backend.name == "numba":
            set_threads(self.workspace.config.retrieval.threads)  # (each thread's own: set for this one)
        return backend

    # -- damage ---------------------------------------------------------------------------------------
    def checked_index(self, unit: str = "document"):
        """``unit``'s index once it has passed the checks a numba kernel needs (``TermIndex.check_deep``),
        rebuilt first (with a note) when it fails them; for callers that hand its arrays to a kernel."""
        index = self.index_of(unit)
        try:
            index.check_deep(fields=[name for name, _d in self.params_of(unit).active_fields()])
        except IndexCorrupt as err:
            index = self.repair(unit, str(err))
        return index

    def repair(self, unit: str, why: str):
        """The index of ``unit`` turned out damaged: rebuild it (with a note), or say how to."""
        index = self.index_of(unit)
        if not self.update:
            raise IndexDamaged(f"{index.where}: {why}; rebuild it with `chitragupta index --force`")
        self.install(unit, rebuild(self.workspace, why, unit=unit))
        return self.index_of(unit)

    # -- scoring --------------------------------------------------------------------------------------
    def expander(self):
        """The acronym expander (``engine.expand.Expander``: ``.expand(query)``), reloaded when
        content/acronyms.toml changes; None when expansion is switched off (nothing is read then)."""
        if not self.workspace.config.retrieval.acronym_expansion:
            return None
        user = self.workspace.content / "acronyms.toml"
        try:
            seen = user.stat().st_mtime_ns
        except OSError:
            seen = None
        if self._expansion_cache is None or self._expansion_cache[0] != seen:
            self._expansion_cache = (seen, load_expander(self.workspace.content, True))
        return self._expansion_cache[1]

    def plan(self, queries: Sequence[str], unit: str = "document", *, syntax: bool = False,
             pairs: bool = False) -> QueryPlan:
        """``queries`` tokenized, expanded and looked up once against ``unit``'s index; with ``syntax`` the
        query syntax is read, with ``pairs`` one-character words are paired (as ``rank`` does)."""
        return QueryPlan(queries, self.index_of(unit), self.expander(), syntax=syntax, pairs=pairs)

    def score(self, unit: str, batch: QueryBatch, k: int, allowed=None) -> TopK:
        """The top-k of a batch of term ids; ``_Rebuilt`` when the index turned out damaged on the way
        and was rebuilt (the caller plans again), IndexDamaged when it could not be. ``allowed``: per
        query, None or the (n_units,) bool mask of the only units that may be hits (a torch backend takes
        none: numba scores a masked batch then)."""
        from chitragupta.kernels.reference import PostingsDamaged

        index = self.index_of(unit)
        params = self.params_of(unit)
        backend = self.backend_for(unit, batch.n_queries)
        masks = {} if allowed is None else {"allowed": allowed}
        if masks and not backend.accepts_allowed:  # (kernels.dispatch.Backend)
            backend = resolve("numba")
            set_threads(self.workspace.config.retrieval.threads)
        try:
            if backend.name == "numpy":
                return backend.score_topk(index.raw_postings, batch, params, k, **masks)
            index.check_deep(fields=[name for name, _d in params.active_fields()])
            if backend.accepts_cached:
                return backend.score_topk(index.postings, batch, params, k, idf=index.idf_,
                                          norm=index.norm(params.k1, params.b), **masks)
            return backend.score_topk(index.postings, batch, params, k)
        except (IndexCorrupt, PostingsDamaged) as err:
            self.repair(unit, str(err))
            raise _Rebuilt from None

    def allowed(self, unit: str, plan: QueryPlan) -> list | None:
        """None when no query of ``plan`` has a constraint to check; else per query, None or the (n_units,)
        bool mask of the units of ``unit`` that satisfy its constraints (``engine.constraints.allowed_mask``); ``_Rebuilt`` when a posting
        list read on the way is damaged (the index is rebuilt first)."""
        from chitragupta.engine.search.constraints import allowed_mask
        from chitragupta.kernels.reference import PostingsDamaged

        from chitragupta.kernels.phrase import PositionsDamaged

        index = self.index_of(unit)
        term_docs, texts, phrases = self.unit_access(unit)
        try:
            # a query whose constraints are all ignored (``+the``) has no mask: it is scored as any other
            masks = [None if c is None or not c.active else allowed_mask(c, index.n_units, term_docs, texts, phrases)
                     for c in plan.constraints]
        except (PostingsDamaged, PositionsDamaged) as err:
            self.repair(unit, str(err))
            raise _Rebuilt from None
        return None if all(m is None for m in masks) else masks

    def unit_access(self, unit: str):
        """``(term_docs, texts, phrases)`` for ``engine.constraints``: an indexed word's ascending unit ids
        (its postings, checked), a unit's indexed texts (a document: its title and body as the index
        read them, ``row_body``; a passage: its paragraph), and the positions array's phrase check (None
        without one). Bodies read are kept for this access's life."""
        from chitragupta.engine.index.source import row_body
        from chitragupta.kernels.reference import term_docs as posting_docs

        index = self.index_of(unit)
        rows = self.rows[unit]
        root = self.workspace.root
        postings = index.raw_postings
        bodies: dict = {}

        def term_docs(word: str) -> np.ndarray:
            t = index.vocab.find_many([index.index_term(word)])[0]
            return posting_docs(postings, t) if t >= 0 else np.zeros(0, dtype=np.int64)

        def body(d: int):
            got = bodies.get(d)
            if got is None:
                got = bodies[d] = row_body(root, rows[d][3])
            return got

        if unit == "document":
            def texts(u: int):
                return (rows[u][1] or "", body(u).text)
        else:
            p_doc, p_item = np.asarray(index.p_doc), np.asarray(index.p_item)

            def texts(u: int):
                items = body(int(p_doc[u])).items or ()
                item = int(p_item[u])
                return (items[item]["text"] if item < len(items) else "",)
        return term_docs, texts, _phrase_check(index) if unit == "document" else None

    def rank(self, queries: list[str], k: int, unit: str, cap: int | None, filters: list | None = None,
             syntax: bool | str | None = None) -> Ranked:
        """``queries`` ranked to ``k`` units of ``unit`` (passages at most ``cap`` per source); ``filters``:
        None or per query None or a ``Filters``; ``syntax``: how the query syntax is read
        (``engine.search.constraints.SYNTAX_MODES``; None: ``[retrieval].query_syntax``). An index found
        damaged on the way is rebuilt once and the batch ranked again. The Ranked's ``filter_notes`` holds
        each query's filter notes."""
        if syntax is None:
            syntax = self.workspace.config.retrieval.query_syntax
        for _attempt in range(2):
            try:
                return self._rank(queries, k, unit, cap, filters, syntax)
            except _Rebuilt:
                continue
        raise IndexDamaged(f"{self.index_of(unit).where} is damaged again after a rebuild; "
                           "run `chitragupta index --force`")

    # -- metadata filters -----------------------------------------------------------------------------
    def _generation(self, unit: str):
        index = self.index_of(unit)
        path = getattr(index, "path", None)
        return path.name if path is not None else id(index)

    def facet_table(self, unit: str):
        """The ``FacetTable`` of ``unit``'s index's documents: the document index's filter columns (a
        passage index built from the same rows shares them), else read from the ledger once per generation."""
        from chitragupta.engine.search.filters import FacetTable

        key = (unit, self._generation(unit))
        table = self._facet_tables.get(key)
        if table is None:
            doc, index = self.index, self.index_of(unit)
            topics = self.workspace.content / "topics.json"
            if index.manifest.get("citekeys_digest") == doc.manifest.get("citekeys_digest"):
                table = FacetTable(None, index.citekeys, doc.facet_arrays, doc.verify_facets, topics=topics)
            else:
                from chitragupta.engine.library.ledger import Ledger
                from chitragupta.engine.library.metadata import facets

                with Ledger(self.workspace.ledger_path, create=False) as ledger:
                    table = FacetTable(facets(ledger), index.citekeys, topics=topics)
            self._facet_tables = {k: v for k, v in self._facet_tables.items() if k[0] != unit}
            self._facet_tables[key] = table
        return table

    def filter_mask(self, unit: str, filters) -> tuple[np.ndarray, dict[str, int]]:
        """(the (n_units,) bool mask of the units of ``unit`` whose source ``filters`` allow, {field: how
        many sources have no value for it}), cached per (filters, index generation) with the filter's
        notes (``FacetTable.notes``)."""
        return self._filter_mask(unit, filters)[:2]

    def _filter_mask(self, unit: str, filters) -> tuple[np.ndarray, dict[str, int], list]:
        key = (unit, self._generation(unit), filters, self.facet_table(unit).stamp(filters))
        got = self._filter_masks.get(key)
        if got is None:
            for attempt in range(2):
                try:
                    table = self.facet_table(unit)
                    docs, missing = table.mask(filters)
                    notes = table.notes(filters, docs, missing)
                    break
                except IndexCorrupt as err:  # a filter column damaged: the index rebuilt (a note), then again
                    if attempt:
                        raise IndexDamaged(f"{self.index.where}: {err} again after a rebuild; run "
                                           "`chitragupta index --force`") from None
                    self.repair("document", str(err))
            key = (unit, self._generation(unit), filters, table.stamp(filters))
            if unit == "passage":
                p_doc = np.asarray(self.index_of(unit).p_doc)
                units = docs[p_doc] if p_doc.size else np.zeros(0, dtype=bool)
            else:
                units = docs
            if len(self._filter_masks) >= 4096:
                self._filter_masks.clear()
            got = self._filter_masks[key] = (units, missing, notes)
        return got

    def filtered(self, unit: str, filters: list | None, allowed: list | None):
        """(``allowed`` ANDed with each query's filter mask, the filter notes per query)."""
        if filters is None or all(f is None for f in filters):
            return allowed, None
        out, notes = [], []
        for q, f in enumerate(filters):
            own = None if allowed is None else allowed[q]
            if f is None:
                out.append(own)
                notes.append([])
                continue
            mask, _missing, said = self._filter_mask(unit, f)
            out.append(mask if own is None else own & mask)
            notes.append(list(said))
        return out, notes

    def _rank(self, queries: list[str], k: int, unit: str, cap: int | None, filters: list | None,
              syntax: bool | str) -> Ranked:
        for f in dict.fromkeys(filters or ()):  # first: a damaged filter column rebuilds the index before the plan
            if f is not None:
                self._filter_mask(unit, f)
        index = self.index_of(unit)
        # No more hits than the unit has: a huge k (``-k 1000000000``) must not allocate (n, k) arrays.
        k = min(k, max(1, index.n_units))
        cfg = self.workspace.config.retrieval
        plan = QueryPlan(queries, index, self.expander(), syntax=syntax,
                         pairs=cfg.short_word_pairs and unit == "document")
        allowed = None if plan.constraints is None else self.allowed(unit, plan)
        allowed, notes = self.filtered(unit, filters, allowed)
        if unit == "document":
            top = self.score("document", plan.batch, k, allowed)
            ranked = Ranked(self.with_pairs(plan, top, allowed), queries, unit="document", table=index.citekeys,
                            plan=plan)
            ranked.filter_notes = notes
            return ranked
        top = self.capped(plan.batch, k, cap, allowed)
        units = np.where(top.ids >= 0, top.ids, 0)
        p_doc, p_item = np.asarray(index.p_doc), np.asarray(index.p_item)
        if p_doc.size:
            rows = np.where(top.ids >= 0, p_doc[units], -1).astype(np.int64)
            items = np.where(top.ids >= 0, p_item[units], -1).astype(np.int64)
        else:
            rows = items = np.full(top.ids.shape, -1, dtype=np.int64)
        ranked = Ranked(top, queries, unit="passage", table=index.citekeys, rows=rows, items=items, plan=plan)
        ranked.filter_notes = notes
        return ranked

    def with_pairs(self, plan: QueryPlan, top: TopK, allowed=None, params: BM25Params | None = None,
                   counts: dict | None = None) -> TopK:
        """``top`` with each query that holds one-character words ranked again with their pairs, under
        ``params`` (None: the configured ones): scored on the batch's backend over ``pairs.pair_postings``;
        ``counts``: pair -> its counts, kept by a caller that ranks one plan under many params. The other
        rows as they are."""
        from chitragupta.engine.search.pairs import pair_counts, pair_postings, scores_pairs
        from chitragupta.kernels.dispatch import score_topk
        from chitragupta.kernels.phrase import PositionsDamaged
        from chitragupta.kernels.reference import PostingsDamaged

        rows = [q for q, pairs in enumerate(plan.pairs) if pairs] if plan.score_pairs else []
        index = self.index
        if not rows or not scores_pairs(index):
            return top
        params, batch = params or self.params, plan.batch
        fields = [name for name, _d in params.active_fields()]
        terms = [batch.terms[batch.indptr[q]:batch.indptr[q + 1]] for q in rows]
        ids, scores = top.ids.copy(), top.scores.copy()
        try:
            counts = pair_counts(index, [x for q in rows for x in plan.pairs[q]], counts)
            postings, sub = pair_postings(index, terms, [plan.pairs[q] for q in rows], counts, fields)
            backend = self.backend_for("document", len(rows))
            if backend.name != "numpy":
                index.check_deep(fields=fields)
            got = score_topk(postings, sub, params, top.k, backend=backend,
                             allowed=None if allowed is None else [allowed[q] for q in rows])
            ids[rows], scores[rows] = got.ids, got.scores
        except (PostingsDamaged, PositionsDamaged) as err:
            self.repair("document", str(err))
            raise _Rebuilt from None
        return TopK(ids, scores)

    def capped(self, batch: QueryBatch, k: int, cap: int, allowed=None) -> TopK:
        """Top-k passages per query with at most ``cap`` per source, exact (``searcher.deepen_capped``);
        ``allowed`` as for ``score``."""
        pidx = self.passage_index()
        p_doc = np.asarray(pidx.p_doc)
        lens = np.diff(batch.indptr)

        def rank(todo: np.ndarray, depth: int):
            sub = QueryBatch(indptr=np.concatenate(([0], np.cumsum(lens[todo]))).astype(np.int64),
                             terms=np.concatenate([batch.terms[batch.indptr[q]:batch.indptr[q + 1]] for q in todo]))
            top = self.score("passage", sub, depth, None if allowed is None else [allowed[q] for q in todo])
            src = p_doc[np.where(top.ids >= 0, top.ids, 0)] if p_doc.size else np.zeros_like(top.ids)
            return top.ids, src, top.scores

        ids, scores = deepen_capped(rank, batch.n_queries, k, cap, pidx.n_passages, k * cap)
        return TopK(ids, scores)


def _aligned_rows(opened: OpenedIndex) -> list:
    if opened.current:
        return opened.rows
    # the index and the ledger disagree: look rows up by citekey
    by_key = {r[0]: r for r in opened.rows}
    keys = opened.index.citekeys
    return [by_key.get(keys[i], (keys[i], "", "parsed", None)) for i in range(len(keys))]
