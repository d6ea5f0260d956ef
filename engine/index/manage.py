"""Keeping the document index current: open it, check it against the ledger, update it under the lock.

A cache that is missing, corrupt, truncated, foreign or of another schema is rebuilt with a note, never
a traceback. A search that finds the index stale updates it (taking the workspace lock); if another
process holds the lock, it answers from the previous index and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from engine.corpus.ledger import Ledger
from engine.errors import WorkspaceBusy, WorkspaceError
from engine.index import store
from engine.index.doc import DocIndex, IndexReport, build, is_current, open_index
from engine.index.source import fingerprints
from engine.results import Note
from engine.workspace import Workspace

__all__ = ["OpenedIndex", "refresh", "open_current", "doc_folder"]

Progress = Callable[[int, int | None], None]


@dataclass
class OpenedIndex:
    index: DocIndex
    rows: list  # ledger (citekey, title, status, parsed_path), aligned with the index when ``current``
    current: bool
    report: IndexReport | None = None
    notes: list[Note] = field(default_factory=list)


def doc_folder(ws: Workspace) -> Path:
    return ws.index_dir / "doc"


def _rows(ws: Workspace) -> list:
    with Ledger(ws.ledger_path, create=False) as ledger:
        return ledger.index_view()


def _try_open(ws: Workspace, notes: list[Note]) -> DocIndex | None:
    try:
        return open_index(doc_folder(ws), ws.config.index_settings())
    except store.IndexCorrupt as err:
        if str(err) != "no index built yet":
            notes.append(Note("index", f"the index cache was not usable ({err}); rebuilding it"))
        return None


def _update_locked(ws: Workspace, notes: list[Note], *, force: bool, progress: Progress | None) -> OpenedIndex:
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    old = _try_open(ws, notes)
    if old is not None and not force and is_current(old, rows, scanned[0]):
        return OpenedIndex(old, rows, True, IndexReport(n_docs=old.n_docs, n_terms=len(old.vocab),
                                                        nnz=old.postings.nnz, reused=old.n_docs), notes)
    index, report = build(ws.root, rows, doc_folder(ws), ws.config.index_settings(),
                          old=None if force else old, progress=progress, scanned=scanned)
    return OpenedIndex(index, rows, True, report, notes)


def refresh(ws: Workspace, *, force: bool = False, progress: Progress | None = None) -> OpenedIndex:
    """Build or update the index (what ``chitragupta index`` does). Holds the workspace lock."""
    notes: list[Note] = []
    with ws.lock("index"):
        return _update_locked(ws, notes, force=force, progress=progress)


def open_current(ws: Workspace, *, update: bool = True, progress: Progress | None = None) -> OpenedIndex:
    """Open the index for searching, updating it first if the ledger or a parsed file changed."""
    notes: list[Note] = []
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    index = _try_open(ws, notes)
    if index is not None and is_current(index, rows, scanned[0]):
        return OpenedIndex(index, rows, True, None, notes)
    if not update:
        if index is None:
            raise WorkspaceError(f"{ws.root}: no usable index; run `chitragupta index`")
        notes.append(Note("index", "the index is older than the ledger; run `chitragupta index` to update it"))
        return OpenedIndex(index, rows, False, None, notes)
    try:
        with ws.lock("search (index update)", timeout=0 if index is not None else None):
            opened = _update_locked(ws, [], force=False, progress=progress)
    except WorkspaceBusy:
        if index is None:
            raise
        notes.append(Note("index", "another process is writing this workspace; these results come from the "
                                   "previous index"))
        return OpenedIndex(index, rows, False, None, notes)
    opened.notes[:0] = notes
    return opened
