"""``chitragupta index`` as one use case: the BM25 indexes (documents, passages), hybrid's own BM25 index
and the references, built under one hold of the workspace lock, answered as an ``IndexReport``.

    from chitragupta.service.index import build
    report = build("my-review")                  # what is stale is rebuilt; the rest is reused
    report.document.size, report.references["summary"]

The CLI prints the report, the MCP server and the Python API read it; nothing here prints.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["IndexReport", "UnitReport", "build"]

UNITS = ("document", "passage")


@dataclass
class UnitReport:
    """One index unit: ``size`` in words, ``build`` the manage report (None: it was up to date)."""

    unit: str
    size: str
    build: Any = None  # engine.index.manage's report: retokenized, reused, removed, seconds, cuts
    notes: list = field(default_factory=list)
    title_only: int = 0  # parsed sources whose text is gone: ranked on their title alone
    unparsed: int = 0  # sources without parsed text at all
    abstracts: tuple[int, int, int] = (0, 0, 0)  # documents, with a docling sidecar, with an Abstract section


@dataclass
class IndexReport:
    units: dict[str, UnitReport] = field(default_factory=dict)
    hybrid: tuple[str, float | None] | None = None  # (its stemmer, build seconds or None when up to date)
    references: dict | None = None  # build_references' answer (counts, "notes"); None: no document index built

    @property
    def document(self) -> UnitReport | None:
        return self.units.get("document")


def _progress(progress, desc: str):
    """A step's ``(done, total)`` callback: ``progress(desc)`` is a context manager giving one (the CLI's
    progress bar); None: no progress."""
    return nullcontext(None) if progress is None else progress(desc)


def build(workspace, *, unit: str = "all", force: bool = False, jobs: int | None = None,
          progress: Callable | None = None, config=None) -> IndexReport:
    """Build or update the workspace's indexes and its references. ``unit``: "all", "document" or
    "passage"; ``jobs``: processes that tokenize (None: the cores). Holds the workspace lock throughout: between the steps another
    writer could otherwise take the workspace, and this build would end busy, half done."""
    from chitragupta.engine.index.segments import available_cores
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.errors import UsageError

    if unit not in ("all",) + UNITS:
        raise UsageError(f"unit {unit!r}: one of all, {', '.join(UNITS)}")
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
    jobs = jobs or available_cores()
    with ws.lock("index"):
        return _build(ws, unit, force, jobs, progress)


def _build(ws, unit, force, jobs, progress) -> IndexReport:
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.index.source import (FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR, FLAG_NOT_PARSED,
                                                 FLAG_TEXT_MISSING)

    report = IndexReport()
    doc = None
    for name in (UNITS if unit == "all" else (unit,)):
        with _progress(progress, f"{name} index") as cb:
            opened = refresh(ws, unit=name, force=force, progress=cb, jobs=jobs)
        idx = opened.index
        if name == "document":
            doc = opened
            size = f"{idx.n_docs} documents, {len(idx.vocab)} terms, {idx.postings.nnz} postings"
            no_sidecar = idx.count_flag(FLAG_NO_SIDECAR | FLAG_TEXT_MISSING | FLAG_NOT_PARSED)
            got = UnitReport(name, size, opened.report, list(opened.notes),
                             title_only=idx.count_flag(FLAG_TEXT_MISSING), unparsed=idx.count_flag(FLAG_NOT_PARSED),
                             abstracts=(idx.n_docs, idx.n_docs - no_sidecar, idx.count_flag(FLAG_HAS_ABSTRACT)))
        else:
            size = f"{idx.n_passages} passages from {len(set(idx.p_doc.tolist()))} documents, {len(idx.vocab)} terms"
            got = UnitReport(name, size, opened.report, list(opened.notes))
        report.units[name] = got
    if unit in ("all", "document"):
        own = _hybrid_index(ws)
        if own is not None:  # [hybrid].bm25_stemmer: hybrid search fuses a document index of its own
            with _progress(progress, "hybrid's BM25 index") as cb:
                r = refresh(own, unit="document", force=force, progress=cb, jobs=jobs).report
            report.hybrid = (own.config.retrieval.stemmer, None if r is None else r.seconds)
    if doc is not None:  # its pass parsed the lists of the texts it read: the rest (resolved when first asked)
        report.references = build_references(ws, doc, lock=False, links=False)
    return report


def _hybrid_index(ws):
    """The workspace view of hybrid's own BM25 index when one is to be built, else None -- told without
    importing hybrid search when ``[hybrid].bm25_stemmer`` is "same" (or the plain index's stemmer) or no
    embedding store exists (the folder every model's store sits in is missing)."""
    if ws.config.hybrid.bm25_stemmer in ("same", ws.config.retrieval.stemmer):
        return None
    from chitragupta.enrich.store import store_folder

    if not store_folder(ws.content, "any model").parent.is_dir():
        return None
    from chitragupta.enrich.hybrid import own_index_to_build

    return own_index_to_build(ws)
