"""Keeping the indexes current: open one, check it against the ledger, update it under the lock.

Two indexes, invalidated by different things, each in its own folder with its own schema: the document
index (``content/index/doc/``) and the passage index (``content/index/passage/``). A cache that is
missing, corrupt, truncated, foreign or of another schema is rebuilt with a note, never a traceback. A
search that finds its index stale updates it (taking the workspace lock); if another process holds the
lock, it answers from the previous index and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from engine.corpus.ledger import Ledger
from engine.errors import WorkspaceBusy, WorkspaceError
from engine.index import doc as doc_index
from engine.index import passage as passage_index
from engine.index import store
from engine.index.source import fingerprints
from engine.results import Note
from engine.workspace import Workspace

__all__ = ["OpenedIndex", "UNITS", "refresh", "open_current", "doc_folder", "index_folder"]

Progress = Callable[[int, int | None], None]


@dataclass(frozen=True)
class _Kind:
    folder: str
    open: Callable
    build: Callable
    is_current: Callable
    settings: Callable[[Workspace], dict]


def _doc_settings(ws: Workspace) -> dict:
    return ws.config.index_settings()


def _passage_settings(ws: Workspace) -> dict:
    return dict(ws.config.index_settings(), **{"retrieval.min_passage_tokens": ws.config.retrieval.min_passage_tokens})


UNITS: dict[str, _Kind] = {
    "document": _Kind("doc", doc_index.open_index, doc_index.build, doc_index.is_current, _doc_settings),
    "passage": _Kind("passage", passage_index.open_passages, passage_index.build_passages,
                     passage_index.is_current, _passage_settings),
}


@dataclass
class OpenedIndex:
    index: Any  # DocIndex or PassageIndex
    rows: list  # ledger (citekey, title, status, parsed_path), aligned with the index when ``current``
    current: bool
    report: Any = None
    notes: list[Note] = field(default_factory=list)


def index_folder(ws: Workspace, unit: str = "document") -> Path:
    return ws.index_dir / UNITS[unit].folder


def doc_folder(ws: Workspace) -> Path:
    return index_folder(ws, "document")


def _rows(ws: Workspace) -> list:
    with Ledger(ws.ledger_path, create=False) as ledger:
        return ledger.index_view()


def _try_open(ws: Workspace, unit: str, notes: list[Note]):
    kind = UNITS[unit]
    try:
        return kind.open(index_folder(ws, unit), kind.settings(ws))
    except store.IndexCorrupt as err:
        if str(err) != "no index built yet":
            notes.append(Note("index", f"the {unit} index cache was not usable ({err}); rebuilding it"))
        return None


def _update_locked(ws: Workspace, unit: str, notes: list[Note], *, force: bool,
                   progress: Progress | None) -> OpenedIndex:
    kind = UNITS[unit]
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    old = _try_open(ws, unit, notes)
    if old is not None and not force and kind.is_current(old, rows, scanned[0]):
        return OpenedIndex(old, rows, True, None, notes)
    index, report = kind.build(ws.root, rows, index_folder(ws, unit), kind.settings(ws),
                               old=None if force else old, progress=progress, scanned=scanned)
    notes += [Note("sidecar", n) for n in report.notes]
    return OpenedIndex(index, rows, True, report, notes)


def refresh(ws: Workspace, *, unit: str = "document", force: bool = False,
            progress: Progress | None = None) -> OpenedIndex:
    """Build or update an index (what ``chitragupta index`` does). Holds the workspace lock.
    ``report`` is None when the index was already current."""
    with ws.lock("index"):
        return _update_locked(ws, unit, [], force=force, progress=progress)


def open_current(ws: Workspace, *, unit: str = "document", update: bool = True,
                 progress: Progress | None = None) -> OpenedIndex:
    """Open an index for searching, updating it first if the ledger or a parsed file changed."""
    kind = UNITS[unit]
    notes: list[Note] = []
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    index = _try_open(ws, unit, notes)
    if index is not None and kind.is_current(index, rows, scanned[0]):
        return OpenedIndex(index, rows, True, None, notes)
    if not update:
        if index is None:
            raise WorkspaceError(f"{ws.root}: no usable {unit} index; run `chitragupta index`")
        notes.append(Note("index", f"the {unit} index is older than the ledger; run `chitragupta index` to update it"))
        return OpenedIndex(index, rows, False, None, notes)
    try:
        with ws.lock(f"search (updating the {unit} index)", timeout=0 if index is not None else None):
            opened = _update_locked(ws, unit, [], force=False, progress=progress)
    except WorkspaceBusy:
        if index is None:
            raise
        notes.append(Note("index", "another process is writing this workspace; these results come from the "
                                   "previous index"))
        return OpenedIndex(index, rows, False, None, notes)
    opened.notes[:0] = notes
    return opened
