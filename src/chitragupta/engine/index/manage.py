"""Keeping the indexes current: open one, check it against the ledger, update it under the lock.

Two indexes, invalidated by different things, each in its own folder with its own schema: the document
index (``content/index/doc/``) and the passage index (``content/index/passage/``). A cache that is
missing, corrupt, truncated, foreign or of another schema is rebuilt with a note, never a traceback. A
search that finds its index stale updates it (taking the workspace lock); if another process holds the
lock, it answers from the previous index and says so.

Is the index current? The full answer reads every ledger row and stats every parsed file, compares the
per-document fingerprints (``chitragupta.engine.index.source``) and the citekey sequence: about 3 us a document, so
seconds at a million; and it compares the document index's filter columns with the ledger's metadata
(``engine.index.facets.LedgerFacets``: a digest, ~3.5 us a source, read only when the ledger was written since
they were built), so a metadata change without a text change rebuilds that index too. After any full check
or build that finds the index current, the *stamp* of what it read is recorded beside the index
(``content/index/<kind>/VERIFIED``: the generation and the stamp), and the next open compares stamps only:

    the ledger's change stamp   a counter bumped by triggers on every row written, the ledger's random
                                id, and its schema cookie (``Ledger.change_stamp``)
    content/parsed/             the folder's mtime, inode and device: sync and import write parsed files
                                and sidecars by temp file + rename, and delete by unlink, all of which
                                change the folder's mtime

A stamp is not recorded when it cannot be trusted: the folder's mtime is less than ``RACY_NS`` old when
read (a later change in the same clock tick would leave it equal; git's "racy clean" rule), or a parsed
row's path lies outside ``content/parsed/``. What the stamp does not see is a parsed file rewritten in
place by hand (no rename); ``chitragupta index`` still rebuilds what changed from fingerprints, and
``--force`` everything. On the stamp path the ledger rows are not read at all: ``rows`` is a
``LedgerRows`` that looks a row up when a hit needs its title or text.
"""

from __future__ import annotations

import json
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from chitragupta.engine.library.ledger import Ledger
from chitragupta.errors import WorkspaceBusy, WorkspaceError
from chitragupta.engine.index import doc as doc_index
from chitragupta.engine.index import store
from chitragupta.engine.index.facets import LedgerFacets
from chitragupta.engine.index.source import fingerprints
from chitragupta.notes import Note
from chitragupta.engine.library.workspace import Workspace, atomic_write_text

__all__ = ["OpenedIndex", "LedgerRows", "UNITS", "RACY_NS", "refresh", "open_current", "doc_folder", "index_folder",
           "stamp", "verified_path", "rebuild", "current_generation"]

RACY_NS = 2_000_000_000  # a parsed-folder mtime younger than this is not trusted
_VERIFIED = "VERIFIED"

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


def _passage(name: str) -> Callable:
    """``engine.index.passage.<name>``, imported when first called (a document index never needs it)."""

    def call(*args, **kwargs):
        from chitragupta.engine.index import passage as passage_index

        return getattr(passage_index, name)(*args, **kwargs)

    return call


UNITS: dict[str, _Kind] = {
    "document": _Kind("doc", doc_index.open_index, doc_index.build, doc_index.is_current, _doc_settings),
    "passage": _Kind("passage", _passage("open_passages"), _passage("build_passages"), _passage("is_current"),
                     _passage_settings),
}


@dataclass
class OpenedIndex:
    index: Any  # DocIndex or PassageIndex
    rows: list  # ledger (citekey, title, status, parsed_path), aligned with the index when ``current``
    current: bool
    report: Any = None
    notes: list[Note] = field(default_factory=list)
    check: str = ""  # how ``current`` was decided: "stamp", "scan", "built" (or "" when stale)
    references: Any = None  # the reference lists the build's pass parsed (``references.Lists``), or None


class LedgerRows(Sequence):
    """The ledger's (citekey, title, status, parsed_path) at each position of an index, read when asked
    for: a search needs the rows of its hits, not a million titles. A row deleted from the ledger since
    comes back as (citekey, "", "parsed", None)."""

    _CACHE = 1 << 16

    def __init__(self, ledger_path: Path, citekeys):
        self._path = Path(ledger_path)
        self._keys = citekeys
        self._ledger: Ledger | None = None
        self._lock = threading.Lock()
        self._cache: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def _open(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self._path, create=False, shared=True)
            weakref.finalize(self, self._ledger.close)
        return self._ledger

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        got = self._cache.get(i)
        if got is None:
            key = self._keys[i]
            with self._lock:
                got = self._open().index_rows([key]).get(key) or (key, "", "parsed", None)
            if len(self._cache) >= self._CACHE:
                self._cache.clear()
            self._cache[i] = got
        return got

    def __iter__(self):
        with self._lock:
            by_key = {r[0]: r for r in self._open().index_view()}
        for i in range(len(self)):
            key = self._keys[i]
            yield by_key.get(key) or (key, "", "parsed", None)


def index_folder(ws: Workspace, unit: str = "document") -> Path:
    return ws.index_dir / UNITS[unit].folder


def doc_folder(ws: Workspace) -> Path:
    return index_folder(ws, "document")


def _rows(ws: Workspace) -> list:
    with Ledger(ws.ledger_path, create=False) as ledger:
        return ledger.index_view()


def _weighted_fields(ws: Workspace) -> tuple[str, ...]:
    """The document fields the configuration weights (their counts are checked when the index opens)."""
    cfg = ws.config.retrieval
    return tuple(f for f, w in (("title", cfg.weight_title), ("abstract", cfg.weight_abstract)) if w != 1.0)


def _open_or_why(ws: Workspace, unit: str, *, verify: bool = False):
    """(the current index, None), or (None, why it is not usable; None when there is none yet).
    ``verify``: every checksum and the pass over every posting, for a writer about to reuse it or
    declare it current; a reader's index checks its postings itself before a numba kernel reads them."""
    kind = UNITS[unit]
    extra = {"fields": _weighted_fields(ws)} if unit == "document" else {}
    try:
        return kind.open(index_folder(ws, unit), kind.settings(ws), verify=verify, deep=verify, **extra), None
    except store.IndexCorrupt as err:
        return None, (None if str(err) == "no index built yet" else str(err))


def _try_open(ws: Workspace, unit: str, notes: list[Note], *, verify: bool = False):
    index, why = _open_or_why(ws, unit, verify=verify)
    if why:
        notes.append(Note("index", f"the {unit} index cache was not usable ({why}); rebuilding it"))
    return index


def stamp(ws: Workspace, ledger: Ledger | None = None) -> dict | None:
    """What the cheap up-to-date check compares (see the module docstring); None when untrustworthy.
    ``ledger``: an open read-only connection to ask (a long-lived caller keeps one), else one is opened."""
    now = time.time_ns()
    if ledger is not None:
        ledger_stamp = ledger.change_stamp()
    else:
        with Ledger(ws.ledger_path, create=False) as opened:
            ledger_stamp = opened.change_stamp()
    try:
        st = os.stat(ws.parsed_dir)
    except FileNotFoundError:
        parsed = None
    except OSError:
        return None
    else:
        if now - st.st_mtime_ns < RACY_NS:
            return None
        parsed = [st.st_mtime_ns, st.st_ino, st.st_dev]
        try:  # import's packs: one gone or made (a new name) changes their folder's mtime
            pk = os.stat(ws.parsed_dir / "packs")
            if now - pk.st_mtime_ns < RACY_NS:
                return None
            parsed += [pk.st_mtime_ns, pk.st_ino]
        except FileNotFoundError:
            pass
        except OSError:
            return None
    return {"ledger": ledger_stamp, "parsed": parsed}


def current_generation(ws: Workspace, unit: str = "document") -> str | None:
    """The name of ``unit``'s live generation (what ``CURRENT`` names), or None when it cannot be read."""
    try:
        return store.read_small(index_folder(ws, unit) / "CURRENT", limit=4096).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def verified_path(ws: Workspace, unit: str = "document") -> Path:
    """Where the stamp of the last full up-to-date check is kept; removing it forces the next full check."""
    return index_folder(ws, unit) / _VERIFIED


def _stamp_matches(ws: Workspace, unit: str, index, current: dict | None) -> bool:
    if current is None or getattr(index, "path", None) is None:
        return False
    try:
        got = json.loads(store.read_small(verified_path(ws, unit)))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(got, dict) and got.get("generation") == index.path.name and got.get("stamp") == current


_STAMPED = ("content/parsed", "content/parsed/packs")  # folders whose mtime ``stamp`` reads (packed texts' too)


def _record(ws: Workspace, unit: str, index, current: dict | None, rows) -> None:
    """Record that ``index`` is current at stamp ``current`` (nothing when the stamp cannot be trusted)."""
    if current is None or getattr(index, "path", None) is None:
        return
    if any(status == "parsed" and rel and rel.rpartition("/")[0] not in _STAMPED for _k, _t, status, rel in rows):
        return  # a file outside content/parsed/ would change without the folder's mtime noticing
    try:
        atomic_write_text(verified_path(ws, unit), json.dumps({"generation": index.path.name, "stamp": current}),
                          durable=False)
    except OSError:
        pass  # the check is only an optimization; a read-only workspace scans every time


def _metadata(ws: Workspace, unit: str) -> LedgerFacets | None:
    """What the document index's filter columns are checked against and built from (``engine.index.facets``)."""
    return LedgerFacets(ws.ledger_path) if unit == "document" else None


def _is_current(kind: _Kind, index, rows, fps, metadata: LedgerFacets | None) -> bool:
    """The index was built from these rows and fingerprints, and (the document index) this metadata."""
    return kind.is_current(index, rows, fps) and (metadata is None or metadata.holds(index.manifest))


def _update_locked(ws: Workspace, unit: str, notes: list[Note], *, force: bool,
                   progress: Progress | None, jobs: int = 1) -> OpenedIndex:
    kind = UNITS[unit]
    current = stamp(ws)  # before the rows: a change while they are read leaves a stamp that will not match
    metadata = _metadata(ws, unit)
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    # what is reused, or declared current, is verified whole first: a byte rotted in place must not be
    # copied into a new checksummed generation. --force reads nothing of the old one.
    old = None if force else _try_open(ws, unit, notes, verify=True)
    if old is not None and _is_current(kind, old, rows, scanned[0], metadata):
        _record(ws, unit, old, current, rows)
        return OpenedIndex(old, rows, True, None, notes, "scan")
    # (the passage index is built in this process)
    more = {"jobs": jobs, "metadata": metadata} if unit == "document" else {}
    lists = None
    if unit == "document" and ws.index_dir == ws.content / "index":  # the workspace's own: its pass reads the lists
        from chitragupta.engine.index.references import Lists

        lists = more["references"] = Lists(ws.ledger_path, scanned[2], scanned[0])
    index, report = kind.build(ws.root, rows, index_folder(ws, unit), kind.settings(ws),
                               old=old, progress=progress, scanned=scanned, **more)
    notes += [Note("sidecar", n) for n in report.notes]
    _record(ws, unit, index, current, rows)
    return OpenedIndex(index, rows, True, report, notes, "built", lists)


def refresh(ws: Workspace, *, unit: str = "document", force: bool = False,
            progress: Progress | None = None, jobs: int = 1) -> OpenedIndex:
    """Build or update an index (what ``chitragupta index`` does). Holds the workspace lock.
    ``report`` is None when the index was already current. ``jobs``: processes that tokenize the
    document index (the arrays are the same for any number)."""
    with ws.lock("index"):
        return _update_locked(ws, unit, [], force=force, progress=progress, jobs=jobs)


def rebuild(ws: Workspace, why: str, *, unit: str = "document", progress: Progress | None = None) -> OpenedIndex:
    """Build ``unit``'s index from scratch because the one opened turned out damaged (``why``: found by
    the deep check, or by the numpy scorer in a posting slice), under the workspace lock."""
    notes = [Note("index", f"the {unit} index cache was not usable ({why}); rebuilt it")]
    with ws.lock(f"search (rebuilding the damaged {unit} index)"):
        return _update_locked(ws, unit, notes, force=True, progress=progress)


def open_current(ws: Workspace, *, unit: str = "document", update: bool = True,
                 progress: Progress | None = None) -> OpenedIndex:
    """Open an index for searching, updating it first if the ledger or a parsed file changed."""
    kind = UNITS[unit]
    notes: list[Note] = []
    index, why = _open_or_why(ws, unit)
    if why and update:
        notes.append(Note("index", f"the {unit} index cache was not usable ({why}); rebuilding it"))
    current = stamp(ws)
    if index is not None and _stamp_matches(ws, unit, index, current):
        return OpenedIndex(index, LedgerRows(ws.ledger_path, index.citekeys), True, None, notes, "stamp")
    metadata = _metadata(ws, unit)
    rows = _rows(ws)
    scanned = fingerprints(ws.root, rows)
    if index is not None and _is_current(kind, index, rows, scanned[0], metadata):
        _record(ws, unit, index, current, rows)
        return OpenedIndex(index, rows, True, None, notes, "scan")
    if not update:
        if index is None:
            raise WorkspaceError(f"{ws.root}: no usable {unit} index{f' ({why})' if why else ''}; "
                                 "run `chitragupta index`")
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
    except WorkspaceError as err:  # the lock or the new generation could not be written (read-only, full)
        if index is None:
            raise
        # as when another process holds the lock: answer from the previous index, and say why
        notes.append(Note("index", f"the {unit} index is older than the ledger and could not be updated ({err}); "
                                   "these results come from the previous index"))
        return OpenedIndex(index, rows, False, None, notes)
    said = {n.kind for n in opened.notes}  # the locked re-open says why the cache was not usable again
    opened.notes[:0] = [n for n in notes if n not in opened.notes and not (n.kind == "index" and "index" in said)]
    return opened
