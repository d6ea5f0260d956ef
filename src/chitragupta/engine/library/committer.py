"""The one committer of ``sync`` and ``import``: ledger rows and the files in ``content/parsed/`` they
point at, kept in step however a run is killed.

A committed row vouches for its parsed file: the file holds the text of the source the row names, and
the next run trusts it when the source has not changed (sync: its path, size and mtime; import: its
text's hash). The protocol keeps that true:

- **New files first.** A file no committed row points at (a new key's, a key's new name) is written in
  place, before the row that points at it is committed.
- **A vouched file changes only under an intent.** A file a committed row points at is rewritten at
  the batch's commit, after a transaction that lists it under ``meta.rewrite_pending``; the transaction
  that commits its new row takes it off the list. A run killed in between leaves the file newer than its
  row, listed, and the next run trusts no listed file: it parses (or rewrites) that source again, so one
  rerun finishes the job. (Without the list, a source switched back to its committed version -- two
  ``.bib`` versions swapping PDFs between keys, say -- kept the text of the killed run's version.)
- **Files go after the commit that stops them.** A file a row stops pointing at (the row removed,
  moved to a new name, left without text) is removed only after that commit, which lists it under
  ``meta.unlink_pending``; a run killed before the removals has them finished by the next
  (``begin``). A path a row of this run points at is never removed.
- **Renames are links.** A file moved to a new name (a case-colliding key arrived or left) is linked
  under the new name, the row pointing there committed, and the old name removed after: a committed row
  points at a file that exists at every instant.
- **What no row points at is no one's.** A run starts (``begin``) by removing the parsed texts and
  sidecars no row points at: what a killed run wrote for rows it never committed (a key since dropped
  from the source, a name since changed), so a rerun leaves exactly the files a clean build would; the
  report counts them (``SyncReport.orphans``, said in its summary).
- **A failed run leaves nothing unlisted.** A run stopped by an error (a full disk, an I/O error, a
  ledger that cannot be written) removes, before it says so (``stopped``), the files it wrote for rows it
  had not committed -- every file in the folder no committed row points at -- so the disk it filled is
  given back now, not at the next run; what it committed stays. Batches are small (a few hundred rows or
  ``BATCH_SECONDS``, whichever first), so a failure keeps nearly all the work done before it.

- **Packed texts (``import``).** An import appends each text to a pack (``engine.library.texts``) and the
  row points at ``<pack>#<offset>+<length>``; the pack is fsynced (and its folder, when the pack is new)
  before the transaction that commits the rows pointing into it, so a committed row never points at
  bytes that are not on disk. Packs are only appended to, never rewritten in place: a changed text is
  appended anew and the bytes it replaces, like what a killed run appended, are garbage no row points
  at and no reader reads. A run an error stops cuts the packs back to what its committed rows reach.
  ``import`` reclaims the garbage once it is over half the packs: the live texts copied into a new
  pack, their rows committed pointing there, then the old packs removed under ``meta.unlink_pending``.

Readers therefore see, for every row, its file whole: the text the row stands for or, for a batch in
flight, the source's new text. ``begin`` also removes the temp files killed writers left.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable

from chitragupta.engine.library.ledger import COLUMNS, Ledger
from chitragupta.engine.library.texts import PackWriter, is_ref
from chitragupta.files import discard, put_in_place, replace_in_folder
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import ChitraguptaError, WorkspaceError

__all__ = ["SyncReport", "ParsedFolder", "Committer", "begin", "stopped", "STOPS", "origin_of", "gone_keys", "TXT",
           "SIDECAR_SUFFIX", "UNLINK_PENDING", "REWRITE_PENDING"]

TXT = ".txt"
SIDECAR_SUFFIX = ".passages.json"
UNLINK_PENDING = "unlink_pending"  # meta: parsed files whose rows are committed away, still to remove
REWRITE_PENDING = "rewrite_pending"  # meta: parsed files that may be newer than the rows pointing at them
BATCH_SECONDS = 2.0
_HELD_BYTES = 64 << 20  # rewrites of vouched files held for the batch's commit, at most (then it commits)
_PATH = COLUMNS.index("parsed_path")


@dataclass
class SyncReport:
    """What a sync or import did; ``problems`` are line-numbered messages about skipped input.

    Entries without text are told apart: ``no_file_field`` (citekeys of entries that name no file at
    all), ``missing`` (citekey, reason: the ``file`` field names files none of which is there -- a moved
    PDF) and ``failed`` (citekey, reason: a file is there, but it is not a document the backend reads,
    or its parse failed; ``kept`` of them keep the text of an earlier parse)."""

    origin: str
    entries: int = 0
    parsed: int = 0
    unchanged: int = 0
    no_file_field: list[str] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    kept: int = 0  # of the failed, those that keep the text of an earlier parse
    removed: int = 0
    garbage: int = 0  # bytes of the packs no row points at, after the run (import's packed texts)
    reclaimed: int = 0  # bytes of garbage this run reclaimed (the live texts rewritten into a new pack)
    orphans: int = 0  # parsed files no row pointed at, removed at the start (an earlier run stopped)
    problems: list[str] = field(default_factory=list)

    @property
    def no_file(self) -> int:
        """Entries left without a file: no file field, or none of its files found."""
        return len(self.no_file_field) + len(self.missing)

    @property
    def incomplete(self) -> bool:
        """Some entry names a document that could not be read: its file is missing, or it failed."""
        return bool(self.missing or self.failed)

    def summary(self) -> str:
        parts = [f"{self.entries} entr{'y' if self.entries == 1 else 'ies'} from {self.origin}",
                 f"{self.parsed} parsed", f"{self.unchanged} unchanged"]
        if self.no_file_field:
            parts.append(f"{len(self.no_file_field)} without a file field")
        if self.missing:
            parts.append(f"{len(self.missing)} whose file is missing")
        if self.failed:
            parts.append(f"{len(self.failed)} failed" + (f" ({self.kept} keep the text parsed before)"
                                                          if self.kept else ""))
        if self.removed:
            parts.append(f"{self.removed} removed (no longer in the source)")
        if self.problems:
            parts.append(f"{len(self.problems)} skipped or doubtful line(s)")
        if self.reclaimed:
            parts.append(f"{self.reclaimed / 2**20:.1f} MiB of replaced texts reclaimed from the packs")
        elif self.garbage >= 1 << 20:
            parts.append(f"{self.garbage / 2**20:.1f} MiB of the packs hold replaced texts (reclaimed by the "
                         "import that finds them over half)")
        if self.orphans:
            parts.append(f"{self.orphans} parsed file(s) that no source listed removed (an earlier run stopped "
                         "before committing them)")
        return ", ".join(parts)


def origin_of(ws: Workspace, path: Path) -> str:
    """What the ledger records as a row's origin: the source file, relative to the workspace when inside."""
    p = path.resolve()
    try:
        return p.relative_to(ws.root).as_posix()
    except ValueError:
        return str(p)


def gone_keys(candidates: Iterable[str], damage: str | None, where: str, report: SyncReport) -> list[str]:
    """The citekeys of an origin it no longer lists, to remove -- none when the source looks damaged
    (``damage`` says how): a half-written export must not wipe what the ledger already holds."""
    gone = list(candidates)
    if gone and damage:
        report.problems.append(f"{where}: {damage}; the {len(gone)} source(s) it no longer lists were kept, not "
                               "removed (fix the file and run again; to drop them all, delete content/ledger.sqlite)")
        return []
    return gone


class ParsedFolder:
    """``content/parsed/``, checked once (``Workspace.inside_content``); files in it are named by plain
    names, rows store ``<prefix><name>``. ``sidecars`` (and ``files``, when scanned for them) are what
    ``begin``'s scan found there, kept up to date by this object's own writes and removals."""

    def __init__(self, ws: Workspace):
        ws.parsed_dir.mkdir(parents=True, exist_ok=True)
        self.ws = ws
        self.folder = str(ws.inside_content(ws.parsed_dir))
        self.prefix = ws.relative(Path(self.folder)) + "/"  # "content/parsed/", what rows store
        self.tag = str(os.getpid())
        self.sidecars: set[str] = set()
        self.files: set[str] = set()

    def scan(self, used: Collection[str], *, list_files: bool) -> int:
        """Remove what killed writers left -- temp files (``.<name>.<tag>.tmp``), and parsed texts and
        sidecars no row points at (``used``: every row's path), written for rows never committed --
        and remember the sidecars, and the files when asked. Callers hold the lock, so no live writer
        owns any of them. Returns how many texts and sidecars no row points at were removed."""
        prefix = self.prefix
        stale, orphans = [], []
        removed = 0
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    name = e.name
                    if name.startswith("."):
                        if name.endswith(".tmp") and e.is_file(follow_symlinks=False):
                            stale.append(e.path)
                    elif name.endswith(SIDECAR_SUFFIX):
                        if prefix + name[: -len(SIDECAR_SUFFIX)] + TXT in used or not e.is_file(follow_symlinks=False):
                            self.sidecars.add(name)
                        else:
                            orphans.append(name)
                    elif name.endswith(TXT) and prefix + name not in used and e.is_file(follow_symlinks=False):
                        orphans.append(name)
                    elif list_files and e.is_file():
                        self.files.add(name)
        except OSError:
            pass
        if orphans:  # unless a row names one by a path not in the plain form (a hand edit)
            odd = set()
            for rel in used:
                if self.plain(rel) is None and not is_ref(rel):
                    p = self.path(rel)
                    if p is not None and str(p.parent) == self.folder:
                        odd.add(p.name)
            for name in orphans:
                txt = name[: -len(SIDECAR_SUFFIX)] + TXT if name.endswith(SIDECAR_SUFFIX) else name
                if txt not in odd:
                    stale.append(f"{self.folder}/{name}")
                    removed += 1
                elif name != txt:
                    self.sidecars.add(name)
                elif list_files:
                    self.files.add(name)
        for path in stale:
            discard(path)
        return removed

    def plain(self, rel: str | None) -> str | None:
        """The file name of ``rel`` when it is a plain file right in this folder, else None."""
        if rel and rel.startswith(self.prefix):
            name = rel[len(self.prefix):]
            if name and "/" not in name and "\\" not in name and not name.startswith(".") and "\x00" not in name:
                return name
        return None

    def rel(self, name: str) -> str:
        return self.prefix + name

    @staticmethod
    def sidecar_of(name: str) -> str:
        """``<stem>.passages.json`` beside the file ``name`` (``<stem>.txt``)."""
        return (name[: -len(TXT)] if name.endswith(TXT) else name) + SIDECAR_SUFFIX

    def path(self, rel: str) -> Path | None:
        """The file a row's path names, checked to stay inside ``content/`` (None outside it)."""
        name = self.plain(rel)
        if name is not None:
            return Path(self.folder, name)
        try:
            return self.ws.absolute(rel)
        except WorkspaceError:
            return None

    def exists(self, rel: str | None) -> bool:
        """A row's file is there (a regular file inside ``content/``)."""
        p = self.path(rel) if rel else None
        return p is not None and p.is_file()

    def write(self, name: str, data: bytes) -> None:
        """``name`` (one plain path component) replaced whole by ``data`` (a temp file and a rename)."""
        replace_in_folder(self.folder, name, data, self.tag)
        if name.endswith(SIDECAR_SUFFIX):
            self.sidecars.add(name)

    def link(self, src: Path, name: str) -> None:
        """``name`` made the same file as ``src`` (a hard link, else a copy) by a temp name and a rename,
        so ``name`` is the old file or the new one at every instant and ``src`` is untouched."""
        tmp = f"{self.folder}/.{name}.{self.tag}.link.tmp"  # the pattern ``scan`` removes
        try:
            discard(tmp)
            try:
                os.link(src, tmp)
            except OSError:  # a file system without hard links
                shutil.copy2(src, tmp)
            put_in_place(tmp, f"{self.folder}/{name}", durable=False)
        except BaseException:
            discard(tmp)
            raise
        if os.path.lexists(tmp):  # ``name`` was already this file: rename does nothing then
            discard(tmp)
        if name.endswith(SIDECAR_SUFFIX):
            self.sidecars.add(name)

    def drop(self, name: str) -> None:
        """Remove the file ``name`` if there (quietly)."""
        discard(f"{self.folder}/{name}")
        self.files.discard(name)
        self.sidecars.discard(name)

    def drop_sidecar(self, name: str) -> None:
        """Remove ``name``'s sidecar if the scan saw it (or this object wrote it)."""
        side = self.sidecar_of(name)
        if side in self.sidecars:
            self.drop(side)

    def remove(self, rel: str) -> None:
        """A row's file and its sidecar removed; a path outside ``content/`` is never touched."""
        name = self.plain(rel)
        if name is not None:
            self.drop(name)
            self.drop_sidecar(name)
            return
        p = self.path(rel)  # a path put there by hand: the checked, resolving route
        if p is None:
            return
        discard(p)
        discard(p.with_name(self.sidecar_of(p.name)))


def _paths(raw: str | None, everything: Iterable[str]) -> list[str]:
    """A ``meta`` list of paths; a value that is not one (a hand edit) means every path in ``everything``."""
    if raw is None:
        return []
    try:
        got = json.loads(raw)
    except (ValueError, RecursionError):
        got = None
    if not isinstance(got, list):
        return list(everything)
    return [p for p in got if isinstance(p, str)]


def begin(ledger: Ledger, folder: ParsedFolder, used: Collection[str], report: SyncReport, *,
          list_files: bool = False) -> set[str]:
    """Start a run: what a killed run left is finished or cleared, and the paths not to trust returned.

    ``used``: the parsed path of every row now. The removals a killed run committed but did not do are
    done (a path a row points at again is kept); the temp files it left, and the files it wrote for rows
    it never committed, are removed (``ParsedFolder.scan``; counted in ``report.orphans``); and the paths
    listed under ``meta.rewrite_pending`` are returned -- the files there may hold a newer text than their
    rows say, so the run must parse (or rewrite) those sources again. The list stays in the ledger until rows
    pointing there are committed again (``Committer`` takes them off)."""
    raw = ledger.get_meta(UNLINK_PENDING)
    if raw is not None:
        for rel in _paths(raw, ()):
            if rel not in used:
                folder.remove(rel)
        with ledger.transaction():
            ledger.delete_meta(UNLINK_PENDING)
    report.orphans = folder.scan(used, list_files=list_files)
    return set(_paths(ledger.get_meta(REWRITE_PENDING), used))


STOPS = (OSError, ChitraguptaError)  # what ``stopped`` says in one line: a full disk, an I/O error, the ledger's


def stopped(what: str, ws: Workspace, ledger: Ledger, folder: ParsedFolder, committed: int,
            err: BaseException) -> ChitraguptaError:
    """The one-line error of a ``what`` (``"import"``, ``"sync"``) that ``err`` (one of ``STOPS``) stopped,
    after the files it wrote for rows it had not committed are removed: every file in the folder that no
    row of the ledger (as committed) points at. ``committed``: rows this run committed. A ``ChitraguptaError``
    keeps its class and message, the removal added; an ``OSError`` becomes a ``WorkspaceError``."""
    try:
        used = {row[3] for row in ledger.index_view() if row[3]}
        removed = folder.scan(used, list_files=False)
        tail = (f"the {removed} parsed file(s) it wrote for sources not yet committed were removed" if removed
                else "")
    except STOPS:  # the ledger cannot be read either: the next run's start removes them (and counts them)
        tail = "the parsed files it wrote for sources not yet committed are removed by the next run"
    if isinstance(err, ChitraguptaError):
        msg = f"{err}; {tail}" if tail else str(err)
        try:
            return type(err)(msg)
        except TypeError:  # a class with another constructor
            return WorkspaceError(msg)
    cause = (getattr(err, "strerror", None) or str(err) or type(err).__name__)
    if getattr(err, "filename", None):
        cause += f" ({err.filename})"
    return WorkspaceError(f"{ws.root}: {what} stopped: {cause}; the ledger is whole and nothing is half-written "
                          f"({committed} source(s) committed by this run are kept){'; ' + tail if tail else ''}; "
                          f"fix that and run the {what} again to finish")


class Committer:
    """Rows (``Ledger.upsert_values`` tuples) committed in batches -- every ``rows_per_batch`` rows or
    ``BATCH_SECONDS`` -- with the file changes they need, by the protocol in the module docstring.

    ``untrusted``: ``begin``'s paths, kept listed until rows pointing there are committed. ``live``: a
    set to collect the paths rows of this run point at, none of which is ever removed (``sync`` passes
    one; ``import``, whose paths are its keys' own names, does not pay for a million of them)."""

    def __init__(self, ledger: Ledger, folder: ParsedFolder, *, rows_per_batch: int,
                 untrusted: set[str] = frozenset(), live: set[str] | None = None, packs: PackWriter | None = None):
        self.ledger, self.folder = ledger, folder
        self.packs = packs  # import's packed texts: appended, then synced before the rows pointing there commit
        self.rows_per_batch = rows_per_batch
        self.rows: list[tuple] = []
        self.unlinks: list[str] = []
        self.held: list[tuple[str, bytes, bytes | None]] = []  # (name, text, sidecar) of vouched files
        self.held_bytes = 0
        self.intents = set(untrusted)  # what meta.rewrite_pending lists now
        self.live = live
        self.committed = 0  # rows committed so far
        self.t = time.monotonic()

    def put(self, row: tuple) -> None:
        """A row to commit (``COLUMNS`` order); commits the batch when it is full."""
        self.rows.append(row)
        if self.live is not None and row[_PATH]:
            self.live.add(row[_PATH])
        if (len(self.rows) >= self.rows_per_batch or self.held_bytes > _HELD_BYTES
                or time.monotonic() - self.t > BATCH_SECONDS):
            self.flush()

    def write(self, name: str, text: bytes, sidecar: bytes | None, *, vouched: bool) -> None:
        """``name``'s new text, and its sidecar (None: it has none, any there is removed). ``vouched``:
        a committed row points at ``name``, so the files change at the commit of the row put next (call
        ``put`` with it right after); else they are written now, the sidecar first."""
        if vouched:
            self.held.append((name, text, sidecar))
            self.held_bytes += len(text) + len(sidecar or b"")
            return
        self._write(name, text, sidecar)

    def _write(self, name: str, text: bytes, sidecar: bytes | None) -> None:
        # The sidecar first: a run killed between the two leaves the old row, so it is parsed again.
        if sidecar is not None:
            self.folder.write(self.folder.sidecar_of(name), sidecar)
        else:
            self.folder.drop_sidecar(name)
        self.folder.write(name, text)

    def unlink(self, rel: str | None) -> None:
        """Remove a row's file (and its sidecar) once the rows of this batch are committed. A packed
        text is never removed: its bytes become garbage, for ``import`` to reclaim."""
        if rel and not is_ref(rel):
            self.unlinks.append(rel)

    def flush(self, deletes: Iterable[str] = ()) -> None:
        """Commit the batch (and ``deletes``, citekeys whose rows go) with its file changes."""
        deletes = list(deletes)
        live = self.live if self.live is not None else {r[_PATH] for r in self.rows if r[_PATH]}
        unlinks = [r for r in dict.fromkeys(self.unlinks) if r not in live]
        held = self.held
        if held:
            listed = self.intents | {self.folder.rel(name) for name, _t, _s in held}
            with self.ledger.transaction():
                self.ledger.set_meta(REWRITE_PENDING, json.dumps(sorted(listed)))
            self.intents = listed
            for name, text, sidecar in held:
                self._write(name, text, sidecar)
        settled = self.intents - {r[_PATH] for r in self.rows} - set(unlinks) if self.intents else self.intents
        if self.rows or deletes or unlinks or settled != self.intents:
            if self.packs is not None:
                self.packs.sync()  # the packed texts these rows point at, on disk before the rows commit
            with self.ledger.transaction():
                self.ledger.upsert_values(self.rows)
                self.ledger.delete(deletes)
                if settled != self.intents:
                    if settled:
                        self.ledger.set_meta(REWRITE_PENDING, json.dumps(sorted(settled)))
                    else:
                        self.ledger.delete_meta(REWRITE_PENDING)
                if unlinks:
                    self.ledger.set_meta(UNLINK_PENDING, json.dumps(unlinks))
            self.intents = settled
            self.committed += len(self.rows)
            if self.packs is not None:
                self.packs.committed()
            if unlinks:
                for rel in unlinks:
                    self.folder.remove(rel)
                with self.ledger.transaction():
                    self.ledger.delete_meta(UNLINK_PENDING)
        self.rows, self.unlinks, self.held, self.held_bytes, self.t = [], [], [], 0, time.monotonic()
