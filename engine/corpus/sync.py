"""``sync`` (BibTeX + documents) and ``import`` (a BEIR-style JSONL) into the ledger and ``content/parsed/``.

Both are incremental and resumable: unchanged sources are not re-parsed, parsed files are written before
their ledger rows, and rows are committed in batches, so a killed run loses at most the batch in flight
and the next run carries on (and removes the temp files the killed one left). Call them under the
workspace lock (``Workspace.lock``), as the CLI does.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from engine.corpus.bibtex import MALFORMED, read_bibtex
from engine.corpus.jsonl import NOT_JSON, iter_jsonl
from engine.corpus.ledger import Ledger, LedgerRow
from engine.corpus.parsers import ParseError, parse
from engine.corpus.sidecar import dump_sidecar
from engine.errors import CorpusError
from engine.workspace import Workspace, atomic_write_text, hashed_name, safe_name

__all__ = ["SyncReport", "sync", "import_jsonl", "assign_names", "docling_artifacts_path"]

Progress = Callable[[int, int | None], None]  # (done, total) -> None

_BATCH_ROWS = 500
_BATCH_SECONDS = 2.0


@dataclass
class SyncReport:
    """What a sync or import did; ``problems`` are line-numbered messages about skipped input."""

    origin: str
    entries: int = 0
    parsed: int = 0
    unchanged: int = 0
    no_file: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    removed: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{self.entries} entr{'y' if self.entries == 1 else 'ies'} from {self.origin}",
                 f"{self.parsed} parsed", f"{self.unchanged} unchanged"]
        if self.no_file:
            parts.append(f"{self.no_file} without a file")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.removed:
            parts.append(f"{self.removed} removed (no longer in the source)")
        if self.problems:
            parts.append(f"{len(self.problems)} skipped or doubtful line(s)")
        return ", ".join(parts)


def assign_names(citekeys: Iterable[str]) -> dict[str, str]:
    """Safe file-name stems for a set of citekeys, unique even on case-insensitive file systems."""
    names = {k: safe_name(k) for k in citekeys}
    groups: dict[str, list[str]] = defaultdict(list)
    for k, n in names.items():
        groups[n.casefold()].append(k)
    for members in groups.values():
        if len(members) > 1:
            for k in members:
                names[k] = hashed_name(k)
    return names


class _Batcher:
    """Commit ledger writes every few hundred rows or seconds, so a killed run keeps its progress."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.rows: list[LedgerRow] = []
        self.deletes: list[str] = []
        self.t = time.monotonic()

    def put(self, row: LedgerRow) -> None:
        self.rows.append(row)
        if len(self.rows) >= _BATCH_ROWS or time.monotonic() - self.t > _BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.rows or self.deletes:
            with self.ledger.transaction():
                self.ledger.upsert(self.rows)
                self.ledger.delete(self.deletes)
        self.rows, self.deletes, self.t = [], [], time.monotonic()


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
    except OSError:
        pass
    _remove_sidecar(ws, rel)


def _rename_if_moved(ws: Workspace, old: LedgerRow | None, new_rel: str) -> None:
    """Keep a parsed file (and its sidecar) when its safe name changed (a new case-colliding key arrived)."""
    if old and old.parsed_path and old.parsed_path != new_rel:
        src = ws.absolute(old.parsed_path)
        if src.exists():
            os.replace(src, ws.absolute(new_rel))
        side = _sidecar_path(ws, old.parsed_path)
        if side.exists():
            os.replace(side, _sidecar_path(ws, new_rel))


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


def sync(ws: Workspace, progress: Progress | None = None) -> SyncReport:
    """Read the bibliography, parse what changed, and bring the ledger in line with it."""
    bib = ws.bibliography
    entries, problems = read_bibtex(bib)
    origin = _origin(ws, bib)
    report = SyncReport(origin=origin, entries=len(entries), problems=problems)
    backend = ws.config.parser.backend
    artifacts = docling_artifacts_path(ws)
    ws.parsed_dir.mkdir(parents=True, exist_ok=True)
    _sweep_temp(ws)
    with Ledger(ws.ledger_path) as ledger:
        existing = {r.citekey: r for r in ledger.rows()}
        names = _names_for(ledger, (e.citekey for e in entries))
        batch = _Batcher(ledger)
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
            rel = ws.relative(ws.parsed_path(names[e.citekey]))
            base = LedgerRow(citekey=e.citekey, title=e.title, abstract=e.abstract, keywords=e.keywords,
                             status="no-file", origin=origin, backend=backend)
            doc = next((p for p in e.files if p.is_file()), None)
            if doc is None:
                reason = ("no file field" if not e.files
                          else "file not found: " + "; ".join(str(p) for p in e.files))
                _remove_parsed(ws, old.parsed_path if old else None)
                _remove_sidecar(ws, rel)
                batch.put(base.with_(reason=reason))
                report.no_file += 1
                continue
            doc = doc.resolve()
            st = doc.stat()
            row = base.with_(source_path=str(doc), source_size=st.st_size, source_mtime_ns=st.st_mtime_ns)
            _rename_if_moved(ws, old, rel)
            unchanged = (
                old is not None and old.status == "parsed" and old.source_path == str(doc)
                and old.source_size == st.st_size and old.source_mtime_ns == st.st_mtime_ns
                and old.backend == backend and (ws.root / rel).is_file()
                and (backend != "docling" or _sidecar_path(ws, rel).is_file())
            )
            if unchanged:
                report.unchanged += 1
                if (old.title, old.abstract, old.keywords, old.parsed_path) != (e.title, e.abstract, e.keywords, rel):
                    batch.put(row.with_(status="parsed", parsed_path=rel))
                continue
            try:
                result = parse(doc, backend, docling_artifacts_path=artifacts)
            except ParseError as err:
                _remove_parsed(ws, old.parsed_path if old else None)
                _remove_sidecar(ws, rel)
                batch.put(row.with_(status="failed", reason=str(err)))
                report.failed.append((e.citekey, str(err)))
                continue
            # The sidecar first: a run killed between the two leaves the old row, so it is re-parsed.
            if result.items:
                atomic_write_text(_sidecar_path(ws, rel), dump_sidecar(result.items), durable=False)
            else:
                _remove_sidecar(ws, rel)
            atomic_write_text(ws.absolute(rel), result.text, durable=False)
            batch.put(row.with_(status="parsed", parsed_path=rel))
            report.parsed += 1
        damage = ("it yields no entries (empty, or not BibTeX)" if not entries else
                  "it has malformed entries (a half-written export?)" if any(MALFORMED in p for p in problems)
                  else None)
        gone = _gone(existing, origin, seen, damage, str(bib), report)
        for k in gone:
            _remove_parsed(ws, existing[k].parsed_path)
        batch.deletes = gone
        report.removed = len(gone)
        batch.flush()
        with ledger.transaction():
            ledger.set_meta("last_source", origin)
        if progress:
            progress(len(entries), len(entries))
    return report


def _text_hash(title: str, text: str, abstract: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (title, text, abstract or ""):
        b = part.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def import_jsonl(ws: Workspace, path: Path, progress: Progress | None = None) -> SyncReport:
    """Import a BEIR-style corpus: ``_id`` becomes the citekey, ``text`` the parsed text."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: corpus file not found")
    origin = _origin(ws, path)
    report = SyncReport(origin=origin)
    ws.parsed_dir.mkdir(parents=True, exist_ok=True)
    _sweep_temp(ws)
    # First pass for the key set (names must be collision-free across the whole ledger).
    scan_problems: list[str] = []
    keys = [r.citekey for r in iter_jsonl(path, scan_problems)]
    with Ledger(ws.ledger_path) as ledger:
        existing = {r.citekey: r for r in ledger.rows()}
        names = _names_for(ledger, keys)
        batch = _Batcher(ledger)
        seen = set()
        for i, rec in enumerate(iter_jsonl(path, report.problems)):
            if progress and i % 256 == 0:
                progress(i, len(keys))
            report.entries += 1
            old = existing.get(rec.citekey)
            if old is not None and old.origin != origin:
                report.problems.append(
                    f"{path}:{rec.line}: _id {rec.citekey!r} is already in the ledger from {old.origin}; line skipped"
                )
                continue
            seen.add(rec.citekey)
            rel = ws.relative(ws.parsed_path(names[rec.citekey]))
            digest = _text_hash(rec.title, rec.text, rec.abstract)
            row = LedgerRow(citekey=rec.citekey, title=rec.title, abstract=rec.abstract, keywords=rec.keywords,
                            status="parsed", origin=origin, parsed_path=rel, source_hash=digest, backend="jsonl")
            _rename_if_moved(ws, old, rel)
            if (old is not None and old.status == "parsed" and old.source_hash == digest
                    and old.parsed_path == rel and (ws.root / rel).is_file()):
                report.unchanged += 1
                if old.keywords != rec.keywords:
                    batch.put(row)
                continue
            _remove_sidecar(ws, rel)  # imported text has no structure; a stale sidecar must not describe it
            atomic_write_text(ws.absolute(rel), rec.text, durable=False)
            batch.put(row)
            report.parsed += 1
        damage = ("it yields no records" if not keys else
                  "it has lines that are not JSON (a truncated file?)" if any(NOT_JSON in p for p in report.problems)
                  else None)
        gone = _gone(existing, origin, seen, damage, str(path), report)
        for k in gone:
            _remove_parsed(ws, existing[k].parsed_path)
        batch.deletes = gone
        report.removed = len(gone)
        batch.flush()
        with ledger.transaction():
            ledger.set_meta("last_source", origin)
        if progress:
            progress(len(keys), len(keys))
    return report
