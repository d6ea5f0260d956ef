"""``sync`` (BibTeX + documents) and ``import`` (a BEIR-style JSONL) into the ledger and ``content/parsed/``.

Both are incremental and resumable: unchanged sources are not re-parsed, parsed files are written before
their ledger rows, and rows are committed in batches, so a killed run loses at most the batch in flight
and the next run carries on (and removes the temp files the killed one left). Both remove a parsed file
only after the commit that stops a row pointing at it (listed meanwhile under ``meta.unlink_pending``,
which the next run of either finishes), and ``sync`` moves a file to a new name (a case-colliding key
arrived or left) by linking it under the new name first: a committed row points at a file that exists
at every instant. Call them under the workspace lock (``Workspace.lock``), as the CLI does.

``sync`` picks each entry's document from its ``file`` field's candidates (PDF attachments first): the
first that is a regular file the backend reads by content; nothing that is not a regular file is opened.
An entry whose candidates cannot even be looked at (a name over the file system's limit) fails alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from chitragupta.engine.corpus.bibtex import MALFORMED, DecodeCache, read_bibtex
from chitragupta.engine.corpus.jsonl import NOT_JSON, iter_records
from chitragupta.engine.corpus.ledger import Ledger, LedgerRow
from chitragupta.engine.corpus.parsers import ParseError, document_kind, not_regular, parse, refusal
from chitragupta.engine.corpus.sidecar import dump_sidecar
from chitragupta.errors import CorpusError, WorkspaceError
from chitragupta.engine.workspace import Workspace, atomic_write_text, hashed_name, replace_in_folder, safe_name

__all__ = ["SyncReport", "sync", "import_jsonl", "assign_names", "docling_artifacts_path", "text_hash"]

Progress = Callable[[int, int | None], None]  # (done, total) -> None

_BATCH_ROWS = 500
_BATCH_SECONDS = 2.0
_PENDING = "unlink_pending"  # meta key: parsed files whose rows are committed away, still to unlink


@dataclass
class SyncReport:
    """What a sync or import did; ``problems`` are line-numbered messages about skipped input."""

    origin: str
    entries: int = 0
    parsed: int = 0
    unchanged: int = 0
    no_file: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    kept: int = 0  # of the failed, those that keep the text of an earlier parse
    removed: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.entries} entr{'y' if self.entries == 1 else 'ies'} from {self.origin}",
                 f"{self.parsed} parsed", f"{self.unchanged} unchanged"]
        if self.no_file:
            parts.append(f"{self.no_file} without a file")
        if self.failed:
            parts.append(f"{len(self.failed)} failed" + (f" ({self.kept} keep the text parsed before)"
                                                          if self.kept else ""))
        if self.removed:
            parts.append(f"{self.removed} removed (no longer in the source)")
        if self.problems:
            parts.append(f"{len(self.problems)} skipped or doubtful line(s)")
        return ", ".join(parts)


def assign_names(citekeys: Iterable[str]) -> dict[str, str]:
    """Safe file-name stems for a set of citekeys, unique even on case-insensitive file systems: a key
    whose safe name case-folds to another key's is hashed (``hashed_name``), and so is that other key."""
    names: dict[str, str] = {}
    taken: set[str] = set()  # case-folded names seen
    clash: set[str] = set()  # ... more than once
    for k in citekeys:
        if k in names:
            continue
        n = names[k] = safe_name(k)
        folded = n.casefold()
        if folded in taken:
            clash.add(folded)
        else:
            taken.add(folded)
    if clash:
        for k, n in names.items():
            if n.casefold() in clash:
                names[k] = hashed_name(k)
    return names


class _Batcher:
    """Commit ledger writes every few hundred rows or seconds, so a killed run keeps its progress.

    Parsed files a row stops pointing at (``unlink``) are removed only after the commit that stops it,
    and that commit lists them under ``meta.unlink_pending`` (the key ``import`` uses too), so a committed
    row never points at a missing file, and a run killed before the unlinks has them finished by the next
    (``_finish_pending``). A path a row of this run points at is never unlinked."""

    def __init__(self, ledger: Ledger, ws: Workspace):
        self.ledger, self.ws = ledger, ws
        self.rows: list[LedgerRow] = []
        self.deletes: list[str] = []
        self.unlinks: list[str] = []
        self.live: set[str] = set()
        self.t = time.monotonic()

    def put(self, row: LedgerRow) -> None:
        self.rows.append(row)
        if row.parsed_path:
            self.live.add(row.parsed_path)
        if len(self.rows) >= _BATCH_ROWS or time.monotonic() - self.t > _BATCH_SECONDS:
            self.flush()

    def unlink(self, rel: str | None) -> None:
        if rel:
            self.unlinks.append(rel)

    def flush(self) -> None:
        unlinks = [r for r in dict.fromkeys(self.unlinks) if r not in self.live]
        if self.rows or self.deletes or unlinks:
            with self.ledger.transaction():
                self.ledger.upsert(self.rows)
                self.ledger.delete(self.deletes)
                if unlinks:
                    self.ledger.set_meta(_PENDING, json.dumps(unlinks))
            if unlinks:
                for rel in unlinks:
                    _remove_parsed(self.ws, rel)
                with self.ledger.transaction():
                    self.ledger.delete_meta(_PENDING)
        self.rows, self.deletes, self.unlinks, self.t = [], [], [], time.monotonic()


def _finish_pending(ledger: Ledger, used: set, remove) -> None:
    """The unlinks a killed sync or import committed but did not do: ``remove(rel)`` each recorded path
    that no row points at now (``used``), then forget the record."""
    raw = ledger.get_meta(_PENDING)
    if raw is None:
        return
    try:
        pending = json.loads(raw)
    except ValueError:
        pending = []
    if isinstance(pending, list):
        for rel in pending:
            if isinstance(rel, str) and rel not in used:
                remove(rel)
    with ledger.transaction():
        ledger.delete_meta(_PENDING)


def _origin(ws: Workspace, path: Path) -> str:
    p = path.resolve()
    try:
        return p.relative_to(ws.root).as_posix()
    except ValueError:
        return str(p)


_SIDECAR_SUFFIX = ".passages.json"


def _sidecar_path(ws: Workspace, rel: str) -> Path:
    """The structural sidecar beside a parsed ``<name>.txt`` (checked to stay inside ``content/``)."""
    name = Path(rel).name
    if name.endswith(".txt"):
        name = name[: -len(".txt")]
    return ws.parsed_path(name, _SIDECAR_SUFFIX)


def _remove_sidecar(ws: Workspace, rel: str | None) -> None:
    if not rel:
        return
    try:
        _sidecar_path(ws, rel).unlink(missing_ok=True)
    except OSError:
        pass


def _remove_parsed(ws: Workspace, rel: str | None) -> None:
    if not rel:
        return
    try:
        p = ws.absolute(rel)
        p.unlink(missing_ok=True)
    except (OSError, WorkspaceError):
        pass
    try:
        _remove_sidecar(ws, rel)
    except WorkspaceError:
        pass


def _link(src: Path, dst: Path) -> None:
    """``dst`` made the same file as ``src`` (a hard link, else a copy) by a temp name and a rename, so
    ``dst`` is the old file or the new one at every instant and ``src`` is untouched."""
    tmp = dst.parent / f".{dst.name}.{os.getpid()}.link.tmp"  # the pattern _sweep_temp removes
    try:
        tmp.unlink(missing_ok=True)
        try:
            os.link(src, tmp)
        except OSError:  # a file system without hard links
            shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def _parsed_file(ws: Workspace, rel: str | None) -> Path | None:
    """The parsed file a row points at, when it is there (and inside ``content/``)."""
    if not rel:
        return None
    try:
        p = ws.absolute(rel)
    except WorkspaceError:
        return None
    return p if p.is_file() else None


def _carry(ws: Workspace, old_rel: str, new_rel: str, batch: _Batcher) -> None:
    """Keep a parsed file (and its sidecar) whose safe name changed (a case-colliding key arrived or
    left). Crash-safe: the file is linked under its new name now, the row that points at the new name is
    committed by ``batch``, and only then is the old name unlinked -- a committed row points at a file
    that exists at every instant."""
    if old_rel == new_rel:
        return
    _link(ws.absolute(old_rel), ws.absolute(new_rel))
    side, new_side = _sidecar_path(ws, old_rel), _sidecar_path(ws, new_rel)
    if side.is_file():
        _link(side, new_side)
    else:
        new_side.unlink(missing_ok=True)
    batch.unlink(old_rel)


def docling_artifacts_path(ws: Workspace) -> str:
    """``[parser].docling_artifacts_path``, a relative folder taken from the workspace root ("" when unset).
    The parser backend and the enrich docling stage both read it through here."""
    raw = ws.config.parser.docling_artifacts_path
    if not raw or not raw.strip():
        return ""
    p = Path(raw).expanduser()
    return str(p if p.is_absolute() else ws.root / p)


def _sweep_temp(ws: Workspace) -> None:
    """Remove the temp files a killed writer left in ``content/parsed/`` (``.<name>.<random>.tmp`` from
    ``atomic_write_text``). Never read as parsed text, but they would pile up; callers hold the lock, so
    no live writer owns one."""
    try:
        with os.scandir(ws.parsed_dir) as it:
            stale = [e.path for e in it if e.name.startswith(".") and e.name.endswith(".tmp") and e.is_file()]
    except OSError:
        return
    for p in stale:
        try:
            os.unlink(p)
        except OSError:
            pass


def _gone(existing: dict[str, LedgerRow], origin: str, seen: set[str], damage: str | None, where: str,
          report: SyncReport) -> list[str]:
    """The citekeys of ``origin`` no longer in it, to remove -- none when the source looks damaged
    (``damage`` says how): a half-written export must not wipe what the ledger already holds."""
    gone = [k for k, r in existing.items() if r.origin == origin and k not in seen]
    if gone and damage:
        report.problems.append(f"{where}: {damage}; the {len(gone)} source(s) it no longer lists were kept, not "
                               "removed (fix the file and run again; to drop them all, delete content/ledger.sqlite)")
        return []
    return gone


def _names_for(ledger: Ledger, incoming: Iterable[str]) -> dict[str, str]:
    return assign_names(set(ledger.citekeys()) | set(incoming))


@dataclass
class _Choice:
    """The document chosen among an entry's candidates, or why none was."""

    doc: Path | None = None
    st: os.stat_result | None = None
    kind: str | None = None
    unchanged: bool = False
    found: bool = False  # some candidate exists (so none chosen means "failed", not "no file")
    reasons: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _same_source(old: LedgerRow | None, backend: str, resolved: Path, st: os.stat_result) -> bool:
    return (old is not None and old.status == "parsed" and old.backend == backend
            and old.source_size == st.st_size and old.source_mtime_ns == st.st_mtime_ns
            and old.source_path == str(resolved))


def _choose(files: tuple[Path, ...], backend: str, old: LedgerRow | None) -> _Choice:
    """The first candidate that is a regular file the backend reads (by content), in the order given
    (``read_bibtex`` puts PDF attachments first). Nothing that is not a regular file is opened; a
    candidate that cannot even be looked at (a name too long, no permission) is a reason, not a stop."""
    c = _Choice()
    for p in files:
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            c.missing.append(str(p))
            continue
        except (OSError, ValueError) as err:  # ENAMETOOLONG, EACCES, ELOOP, ...; ValueError: an embedded NUL
            c.found = True
            why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            shown = str(p) if len(str(p)) <= 300 else str(p)[:300] + "..."
            c.reasons.append(f"{shown}: {why}")
            continue
        what = not_regular(st.st_mode)
        if what:
            c.found = True
            c.reasons.append(f"{p} {what}")
            continue
        try:
            p = p.resolve()  # judged by what it is: a link named .md to /etc/passwd is not Markdown
        except (OSError, RuntimeError) as err:
            c.found = True
            c.reasons.append(f"{p}: {err}")
            continue
        if _same_source(old, backend, p, st):
            c.doc, c.st, c.unchanged = p, st, True
            return c
        kind = document_kind(p, backend)
        if kind is None:
            c.found = True
            c.reasons.append(refusal(p, backend) if os.access(p, os.R_OK) else f"{p}: permission denied")
            continue
        c.doc, c.st, c.kind = p, st, kind
        return c
    return c


_DECODED = "bibtex_decoded.json"  # in content/: the LaTeX decodings of the last sync (DecodeCache)
_DECODED_MAX = 256 << 20


def _load_decoded(ws: Workspace) -> DecodeCache:
    """The last sync's LaTeX decodings; an empty cache when there are none, or they are damaged, of
    another decoder, or not a regular file (nothing but a regular file is opened). Temp files a killed
    save left are removed."""
    path = ws.content / _DECODED
    try:
        with os.scandir(ws.content) as it:
            for e in it:
                if e.name.startswith(f".{_DECODED}.") and e.name.endswith(".tmp"):
                    os.unlink(e.path)
    except OSError:
        pass
    try:
        st = os.stat(path)
        if not_regular(st.st_mode) or st.st_size > _DECODED_MAX:
            return DecodeCache()
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not_regular(os.fstat(f.fileno()).st_mode):
                return DecodeCache()
            obj = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return DecodeCache()
    if not isinstance(obj, dict) or obj.get("decoder") != DecodeCache.DECODER or not isinstance(obj.get("texts"), dict):
        return DecodeCache()
    return DecodeCache(obj["texts"])


def _save_decoded(ws: Workspace, cache: DecodeCache) -> None:
    if not cache.changed:
        return
    data = json.dumps({"decoder": DecodeCache.DECODER, "texts": cache.new}, ensure_ascii=False)
    try:
        atomic_write_text(ws.inside_content(ws.content / _DECODED), data, durable=False)
    except OSError:
        pass  # only a cache: the next sync decodes again


def _one_line(text: str) -> str:
    return " ".join(text.split())


def sync(ws: Workspace, progress: Progress | None = None) -> SyncReport:
    """Read the bibliography, parse what changed, and bring the ledger in line with it.

    A source whose document the backend reads but fails to parse (docling without its PDF models, a
    damaged file) keeps the text of its last successful parse (and its ``parsed`` status) until a parse
    succeeds; the failure is reported (``SyncReport.failed``, ``kept``) and noted in the row's ``reason``.
    A source whose ``file`` field no longer names a file, or names one the backend does not read (not a
    regular file, not a document of its kinds), loses its text."""
    bib = ws.bibliography
    decoded = _load_decoded(ws) if ws.content.is_dir() else DecodeCache()
    entries, problems = read_bibtex(bib, decoded)
    origin = _origin(ws, bib)
    report = SyncReport(origin=origin, entries=len(entries), problems=problems)
    backend = ws.config.parser.backend
    artifacts = docling_artifacts_path(ws)
    ws.parsed_dir.mkdir(parents=True, exist_ok=True)
    _sweep_temp(ws)
    with Ledger(ws.ledger_path) as ledger:
        existing = {r.citekey: r for r in ledger.rows()}
        _finish_pending(ledger, {r.parsed_path for r in existing.values() if r.parsed_path},
                        lambda rel: _remove_parsed(ws, rel))
        names = _names_for(ledger, (e.citekey for e in entries))
        batch = _Batcher(ledger, ws)
        prefix = ws.relative(ws.inside_content(ws.parsed_dir)) + "/"  # "content/parsed/", checked once
        seen = set()
        for i, e in enumerate(entries):
            if progress:
                progress(i, len(entries))
            old = existing.get(e.citekey)
            if old is not None and old.origin != origin:
                report.problems.append(
                    f"{bib}:{e.line}: citekey {e.citekey!r} is already in the ledger from {old.origin}; entry skipped"
                )
                continue
            seen.add(e.citekey)
            rel = f"{prefix}{names[e.citekey]}.txt"  # a safe name: one plain component in the checked folder
            base = LedgerRow(citekey=e.citekey, title=e.title, abstract=e.abstract, keywords=e.keywords,
                             status="no-file", origin=origin, backend=backend)
            had = old is not None and old.status == "parsed" and _parsed_file(ws, old.parsed_path) is not None
            choice = _choose(e.files, backend, old)
            if choice.doc is None and not choice.found:
                reason = "no file field" if not e.files else "file not found: " + "; ".join(choice.missing)
                batch.unlink(old.parsed_path if old else None)
                batch.unlink(rel)  # a stale sidecar there
                batch.put(base.with_(reason=reason))
                report.no_file += 1
                continue
            row = result = None
            if choice.doc is not None:
                doc, st = choice.doc, choice.st
                row = base.with_(source_path=str(doc), source_size=st.st_size, source_mtime_ns=st.st_mtime_ns)
                unchanged = choice.unchanged and had and (
                    backend != "docling" or _sidecar_path(ws, old.parsed_path).is_file())
                if unchanged:
                    report.unchanged += 1
                    if old.parsed_path != rel:
                        _carry(ws, old.parsed_path, rel, batch)
                    if (old.title, old.abstract, old.keywords, old.parsed_path, old.reason) != (
                            e.title, e.abstract, e.keywords, rel, None):
                        batch.put(row.with_(status="parsed", parsed_path=rel))
                    continue
                try:
                    result = parse(doc, backend, docling_artifacts_path=artifacts, kind=choice.kind)
                    error = None
                except ParseError as err:
                    result, error = None, _one_line(str(err)) or type(err).__name__
            else:
                error = "; ".join(_one_line(r) for r in choice.reasons)
            if error is not None:
                if had and result is None and row is not None:
                    # A document the backend reads, whose parse failed (no models, a damaged file, a
                    # parser error): the last good text stays until a parse succeeds. A document the
                    # backend does not read at all (or no longer a regular file) loses it, as no file does.
                    _carry(ws, old.parsed_path, rel, batch)
                    batch.put(old.with_(title=e.title, abstract=e.abstract, keywords=e.keywords, parsed_path=rel,
                                        reason=f"kept the text of an earlier parse; the last sync failed: {error}"))
                    report.failed.append((e.citekey, f"{error} (the text parsed before is kept)"))
                    report.kept += 1
                    continue
                batch.unlink(old.parsed_path if old else None)
                batch.unlink(rel)
                batch.put((row or base).with_(status="failed", reason=error))
                report.failed.append((e.citekey, error))
                continue
            # The sidecar first: a run killed between the two leaves the old row, so it is re-parsed.
            if result.items:
                atomic_write_text(_sidecar_path(ws, rel), dump_sidecar(result.items), durable=False)
            else:
                _remove_sidecar(ws, rel)
            atomic_write_text(ws.absolute(rel), result.text, durable=False)
            if old is not None and old.parsed_path != rel:
                batch.unlink(old.parsed_path)
            batch.put(row.with_(status="parsed", parsed_path=rel))
            report.parsed += 1
        damage = ("it yields no entries (empty, or not BibTeX)" if not entries else
                  "it has malformed entries (a half-written export?)" if any(MALFORMED in p for p in problems)
                  else None)
        gone = _gone(existing, origin, seen, damage, str(bib), report)
        for k in gone:
            batch.unlink(existing[k].parsed_path)
        batch.deletes = gone
        report.removed = len(gone)
        batch.flush()
        with ledger.transaction():
            ledger.set_meta("last_source", origin)
        _save_decoded(ws, decoded)
        if progress:
            progress(len(entries), len(entries))
    return report


def text_hash(title: str, text: str, abstract: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (title, text, abstract or ""):
        b = part.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


# -- import -----------------------------------------------------------------------------------------
#
# One read of the file. Per record: its text goes to ``content/parsed/<name>.txt`` by temp file + rename
# (``replace_in_folder``: the folder is checked once, names are plain by construction), then its row joins
# a batch committed every ``_IMPORT_BATCH_ROWS`` rows or ``_BATCH_SECONDS``. ``_Names`` draws the names as
# the keys arrive; the few whose final name is only known at the end (a case-folded collision found late,
# or one that the removals undo) are rewritten by a second read of just those records, after the
# removals are committed. A file that stops being a row's (the row removed, or moved to a new name) is
# unlinked only after the transaction that stops referring to it commits, and that transaction also
# lists it under ``meta.unlink_pending``: a run killed before the unlinks leaves no row pointing at a
# missing file, and the next import finishes them.

_IMPORT_BATCH_ROWS = 5000
_TXT = ".txt"


class _Parsed:
    """``content/parsed/`` as the import sees it: checked once, scanned once (temp files a killed writer
    left are removed; the sidecars there, and the files when asked, are remembered)."""

    def __init__(self, ws: Workspace, *, list_files: bool):
        self.ws = ws
        ws.parsed_dir.mkdir(parents=True, exist_ok=True)
        self.folder = str(ws.inside_content(ws.parsed_dir))
        self.prefix = ws.relative(Path(self.folder)) + "/"  # "content/parsed/", what rows store
        self.sidecars: set[str] = set()
        self.files: set[str] = set()
        stale = []
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    name = e.name
                    if name.startswith("."):
                        if name.endswith(".tmp") and e.is_file():
                            stale.append(e.path)
                    elif name.endswith(_SIDECAR_SUFFIX):
                        self.sidecars.add(name)
                    elif list_files and e.is_file():
                        self.files.add(name)
        except OSError:
            pass
        for path in stale:
            try:
                os.unlink(path)
            except OSError:
                pass

    def plain(self, rel: str) -> str | None:
        """The file name of ``rel`` when it is a plain file right in this folder, else None."""
        if rel.startswith(self.prefix):
            name = rel[len(self.prefix):]
            if name and "/" not in name and "\\" not in name and not name.startswith(".") and "\x00" not in name:
                return name
        return None

    def drop_sidecar(self, name: str) -> None:
        """Remove ``<stem>.passages.json`` beside the file ``name`` if the scan saw it."""
        side = (name[: -len(_TXT)] if name.endswith(_TXT) else name) + _SIDECAR_SUFFIX
        if side in self.sidecars:
            try:
                os.unlink(f"{self.folder}/{side}")
            except OSError:
                pass
            self.sidecars.discard(side)

    def remove(self, rel: str) -> None:
        """``_remove_parsed`` for a row's path: the file and its sidecar."""
        name = self.plain(rel)
        if name is None:  # a path put there by hand: the checked, resolving route
            try:
                _remove_parsed(self.ws, rel)
            except WorkspaceError:
                pass  # outside content/: never touched
            return
        try:
            os.unlink(f"{self.folder}/{name}")
        except OSError:
            pass
        self.files.discard(name)
        self.drop_sidecar(name)


class _ImportBatch:
    """Rows (``Ledger.upsert_values`` tuples) and files to unlink once those rows are committed."""

    def __init__(self, ledger: Ledger, parsed: _Parsed):
        self.ledger, self.parsed = ledger, parsed
        self.rows: list[tuple] = []
        self.unlinks: list[str] = []
        self.t = time.monotonic()

    def put(self, row: tuple) -> None:
        self.rows.append(row)
        if len(self.rows) >= _IMPORT_BATCH_ROWS or time.monotonic() - self.t > _BATCH_SECONDS:
            self.flush()

    def flush(self, deletes: list[str] = ()) -> None:
        if self.rows or deletes or self.unlinks:
            with self.ledger.transaction():
                self.ledger.upsert_values(self.rows)
                self.ledger.delete(deletes)
                if self.unlinks:
                    self.ledger.set_meta(_PENDING, json.dumps(self.unlinks))
            if self.unlinks:
                for rel in self.unlinks:
                    self.parsed.remove(rel)
                with self.ledger.transaction():
                    self.ledger.delete_meta(_PENDING)
        self.rows, self.unlinks, self.t = [], [], time.monotonic()


def _count_lines(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
    except OSError:
        return None


def _keywords_json(kws: tuple[str, ...]) -> str | None:
    return json.dumps(list(kws), ensure_ascii=False) if kws else None  # as LedgerRow._values stores them


class _Names:
    """``assign_names`` over the keys the ledger keeps and the file's, drawn while the file is read once.

    Every ledger key is known before the read; a record's key is named as ``assign_names`` would name it
    given the keys seen so far. Two things are only known at the end: a *new* key can join a case-folded
    group late (the member named plainly earlier must be hashed), and a group can lose members to the
    removal of keys the file no longer lists (a lone survivor gets its plain name back). ``redo`` lists
    those keys, to be rewritten under their final names after the removals are committed (a second read
    of just those records), so a run ends at ``assign_names(ledger - removed | file)`` -- the names the
    next run draws too.
    """

    def __init__(self, ledger_keys: Iterable[str]):
        self.first: dict[str, str] = {}  # case-folded safe name -> the first key that has it
        self.clash: set[str] = set()  # folded names with more than one key: hashed
        self.members: dict[str, list[str]] = {}  # a clashing folded name -> its keys
        self.late: set[str] = set()
        for k in ledger_keys:
            f = self._fold(safe_name(k))
            owner = self.first.setdefault(f, k)
            if owner != k:
                self.clash.add(f)
                self.members.setdefault(f, [owner]).append(k)

    @staticmethod
    def _fold(n: str) -> str:
        f = n.casefold()
        return n if f == n else f  # one string object for the common lower-case name

    def name(self, key: str, new: bool, seen: set[str]) -> str:
        """``key``'s name now; ``new``: not in the ledger; ``seen``: the keys already named in this run."""
        n = safe_name(key)
        f = self._fold(n)
        if new:
            owner = self.first.setdefault(f, key)
            if owner != key:
                if f not in self.clash:
                    self.clash.add(f)
                    self.members[f] = [owner]
                    if owner in seen:  # named plainly earlier in this run: to be hashed
                        self.late.add(owner)
                self.members[f].append(key)
        return hashed_name(key) if f in self.clash else n

    def redo(self, removed: Iterable[str], seen: set[str]) -> dict[str, str]:
        """After the read: the keys of this run whose final name differs from the one they were given,
        each with that first name; the names drawn from here on are the final ones."""
        out = {k: safe_name(k) for k in self.late}
        self.late = set()
        removed = set(removed)
        if removed:
            for f in [f for f, keys in self.members.items() if any(k in removed for k in keys)]:
                left = [k for k in self.members[f] if k not in removed]
                if len(left) > 1:
                    self.members[f] = left
                    continue
                del self.members[f]
                self.clash.discard(f)
                out.update((k, hashed_name(k)) for k in left if k in seen)
        return out


def import_jsonl(ws: Workspace, path: Path, progress: Progress | None = None) -> SyncReport:
    """Import a BEIR-style corpus: ``_id`` becomes the citekey, ``text`` the parsed text."""
    from chitragupta.engine.corpus.jsonl import open_input

    path = Path(path)
    open_input(path, "corpus").close()  # a folder, device, FIFO or socket is named as such, never read
    origin = _origin(ws, path)
    report = SyncReport(origin=origin)
    with Ledger(ws.ledger_path) as ledger:
        ledger.cache_for_bulk()
        existing = ledger.import_state()
        parsed = _Parsed(ws, list_files=bool(existing))
        _finish_pending(ledger, {t[2] for t in existing.values()}, parsed.remove)
        names = _Names(existing)
        batch = _ImportBatch(ledger, parsed)
        seen: set[str] = set()
        tick = None
        if progress:
            total = _count_lines(path)  # what the bar runs to (blank and bad lines included)
            progress(0, total)
            tick = lambda done, _total: progress(done, total)  # noqa: E731
        _import_records(ws, path, origin, existing, names, seen, parsed, batch, report, tick, None)
        damage = ("it yields no records" if not report.entries else
                  "it has lines that are not JSON (a truncated file?)" if any(NOT_JSON in p for p in report.problems)
                  else None)
        gone = [k for k, t in existing.items() if t[0] == origin and k not in seen]
        if gone and damage:
            report.problems.append(f"{path}: {damage}; the {len(gone)} source(s) it no longer lists were kept, not "
                                   "removed (fix the file and run again; to drop them all, delete content/ledger.sqlite)")
            gone = []
        redo = names.redo(gone, seen)
        batch.unlinks.extend(p for p in (existing[k][2] for k in gone) if p)
        batch.flush(gone)  # the removals committed and their files gone before any name is reused
        report.removed = len(gone)
        if redo:
            _import_records(ws, path, origin, existing, names, seen, parsed, batch, report, None, redo)
            if redo:
                report.problems.append(f"{path}: changed while it was imported ({len(redo)} record(s) not found "
                                       "again); run the import again")
            batch.flush()
        with ledger.transaction():
            ledger.set_meta("last_source", origin)
        if progress:
            progress(report.entries, report.entries)
    return report


def _import_records(ws: Workspace, path: Path, origin: str, existing: dict[str, tuple], names: _Names,
                    seen: set[str], parsed: _Parsed, batch: _ImportBatch, report: SyncReport,
                    progress: Progress | None, wanted: dict[str, str] | None) -> None:
    """One read of ``path``: each record's file written (unless unchanged) and its row batched. With
    ``wanted`` (key -> the name the first read gave it), only those keys, each moved to its final name;
    the keys found are taken out of ``wanted``."""
    folder, prefix, files, sidecars = parsed.folder, parsed.prefix, parsed.files, parsed.sidecars
    tag = str(os.getpid())
    put = batch.put
    now = time.time
    blake2b = hashlib.blake2b
    problems = report.problems if wanted is None else []
    for key, title, text, kws, abstract, line in iter_records(path, problems):
        if wanted is not None:
            if key not in wanted:
                continue
            old_rel = prefix + wanted.pop(key) + _TXT  # where the first read put it
        else:
            n = report.entries
            if progress and not n & 4095:
                progress(n, None)
            report.entries = n + 1
        old = existing.get(key)
        if old is not None and old[0] != origin:
            if wanted is None:
                report.problems.append(
                    f"{path}:{line}: _id {key!r} is already in the ledger from {old[0]}; line skipped"
                )
            continue
        if wanted is None:
            if key in seen:  # a duplicate is reported and skipped by the reader; this cannot happen
                continue
            name = names.name(key, old is None, seen)
            seen.add(key)
        else:
            name = names.name(key, False, seen)
        fname = name + _TXT
        rel = prefix + fname
        data = text.encode("utf-8")
        tb = title.encode("utf-8")
        ab = abstract.encode("utf-8") if abstract else b""
        digest = blake2b(b"".join((len(tb).to_bytes(8, "little"), tb, len(data).to_bytes(8, "little"), data,
                                   len(ab).to_bytes(8, "little"), ab)), digest_size=16).hexdigest()  # text_hash
        kw = _keywords_json(kws)
        row = (key, title, abstract, kw, "parsed", None, rel, origin, None, None, None, digest, "jsonl", now())
        if wanted is None and old is not None and old[1] == "parsed" and old[3] == digest and old[2] == rel \
                and fname in files:
            report.unchanged += 1
            if old[4] != kw and (tuple(json.loads(old[4])) if old[4] else ()) != kws:
                put(row)
            continue
        if sidecars:  # imported text has no structure; a stale sidecar must not describe it
            parsed.drop_sidecar(fname)
        replace_in_folder(folder, fname, data, tag)
        if wanted is not None:
            if old_rel != rel:
                batch.unlinks.append(old_rel)  # once the row points at its new name
            if old is not None and old[1] == "parsed" and old[3] == digest and old[2] == old_rel \
                    and old_rel[len(prefix):] in files:
                report.unchanged -= 1  # counted unchanged by the first read; rewritten after all
                report.parsed += 1
        else:
            if old is not None and old[2] and old[2] != rel:
                batch.unlinks.append(old[2])
            report.parsed += 1
        put(row)
