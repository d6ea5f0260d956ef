"""``sync``: the BibTeX bibliography and its documents into the ledger and ``content/parsed/``.

Incremental and resumable: a source whose document is unchanged (path, size, mtime, backend) and whose
parsed text is there and trusted is not parsed again; rows and files are committed by the one
``Committer`` (``committer.py`` has the protocol), so a killed sync loses at most the batch in flight
and one rerun ends where a clean build of the same bibliography would; a sync an error stops (a full
disk) removes the files of that batch before it says so (``committer.stopped``). Sources the
bibliography no longer lists are removed first, and the file names are drawn after
(``names.assign_names`` over the keys that remain), so a case-folded group that loses members gets its
final names in the same run.

Each entry's document is chosen among its ``file`` field's candidates (PDF attachments first): the
first that is a regular file the backend reads by content; nothing that is not a regular file is
opened. An entry whose candidates cannot even be looked at (a name over the file system's limit) fails
alone. Call under the workspace lock (``Workspace.lock``), as the CLI does.

With ``jobs`` > 1 the documents to parse are parsed ahead by a process pool (``_Ahead``), a window of
entries in front of the one being committed; everything else (the rows, the files, their order) is done
here as with one job, so the ledger and ``content/parsed/`` come out the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from chitragupta.engine.library.bibtex import MALFORMED, read_bibtex
from chitragupta.engine.library.committer import (STOPS, Committer, ParsedFolder, SyncReport, begin, gone_keys,
                                                 origin_of, stopped, TXT)
from chitragupta.engine.library.ledger import Ledger, LedgerRow
from chitragupta.engine.library.names import assign_names
from chitragupta.engine.library.parsers import ParseError, document_kind, not_regular, parse, refusal
from chitragupta.engine.text.sidecar import dump_sidecar
from chitragupta.engine.library.workspace import Workspace

__all__ = ["sync", "docling_artifacts_path"]

Progress = Callable[[int, int | None], None]  # (done, total) -> None

_BATCH_ROWS = 500  # rows a batch commits (or BATCH_SECONDS, whichever first)


def docling_artifacts_path(ws: Workspace) -> str:
    """``[parser].docling_artifacts_path``, a relative folder taken from the workspace root ("" when unset).
    The parser backend and the enrich docling stage both read it through here."""
    raw = ws.config.parser.docling_artifacts_path
    if not raw or not raw.strip():
        return ""
    p = Path(raw).expanduser()
    return str(p if p.is_absolute() else ws.root / p)


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
    candidate that cannot even be looked at (a name too long, no permission) is a reason, not a stop.
    ``old``: the row whose document, unchanged, needs no reading (None: read it whatever the row says)."""
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _carry(folder: ParsedFolder, old_rel: str, name: str, batch: Committer) -> None:
    """Keep a parsed file (and its sidecar) whose name changed (a case-colliding key arrived or left):
    linked under its new name now (no committed row points there), its old name removed after the
    commit of the row that points at the new one."""
    src = folder.path(old_rel)
    if src is None:  # outside content/: never read (``had`` is False for it)
        return
    folder.link(src, name)
    side = src.with_name(folder.sidecar_of(src.name))
    if side.is_file():
        folder.link(side, folder.sidecar_of(name))
    else:
        folder.drop(folder.sidecar_of(name))
    batch.unlink(old_rel)


def sync(ws: Workspace, progress: Progress | None = None, jobs: int = 1) -> SyncReport:
    """Read the bibliography, parse what changed, and bring the ledger in line with it.

    A source whose document the backend reads but fails to parse (docling without its PDF models, a
    damaged file) keeps the text of its last successful parse (and its ``parsed`` status) until a parse
    succeeds; the failure is reported (``SyncReport.failed``, ``kept``) and noted in the row's ``reason``.
    A source whose ``file`` field no longer names a file, or names one the backend does not read (not a
    regular file, not a document of its kinds), loses its text. ``jobs``: processes that parse."""
    bib = ws.bibliography
    entries, problems = read_bibtex(bib)
    origin = origin_of(ws, bib)
    report = SyncReport(origin=origin, entries=len(entries), problems=problems)
    backend = ws.config.parser.backend
    artifacts = docling_artifacts_path(ws)
    folder = ParsedFolder(ws)
    with Ledger(ws.ledger_path) as ledger:
        dropped = ledger.drop_unkeyed()
        if dropped:
            report.problems.append(f"{ws.ledger_path}: dropped {dropped} row(s) whose citekey was not text "
                                   "(NULL or a BLOB: a hand edit?)")
        existing = {r.citekey: r for r in ledger.rows()}
        untrusted = begin(ledger, folder, {r.parsed_path for r in existing.values() if r.parsed_path}, report)
        live: set[str] = set()
        batch = Committer(ledger, folder, rows_per_batch=_BATCH_ROWS, untrusted=untrusted, live=live)
        try:
            _sync(entries, existing, untrusted, folder, batch, ledger, report, progress, bib, backend, artifacts,
                  jobs)
        except STOPS as err:
            raise stopped("sync", ws, ledger, folder, batch.committed, err) from None
        if progress:
            progress(len(entries), len(entries))
    return report


def _sync(entries, existing: dict[str, LedgerRow], untrusted: set[str], folder: ParsedFolder, batch: Committer,
          ledger: Ledger, report: SyncReport, progress: Progress | None, bib: Path, backend: str,
          artifacts: str, jobs: int = 1) -> None:
    """``sync`` once the run has begun: the removals, then every entry, then the last batch."""
    origin, problems = report.origin, report.problems
    listed = {e.citekey for e in entries}
    damage = ("it yields no entries (empty, or not BibTeX)" if not entries else
              "it has malformed entries (a half-written export?)" if any(MALFORMED in p for p in problems)
              else None)
    gone = gone_keys((k for k, r in existing.items() if r.origin == origin and k not in listed), damage,
                     str(bib), report)
    if gone:  # removed before any name is drawn: the names are those of the keys that remain
        for k in gone:
            batch.unlink(existing[k].parsed_path)
        batch.flush(gone)
        report.removed = len(gone)
    removed = set(gone)
    names = assign_names([k for k in existing if k not in removed] + [e.citekey for e in entries])
    ahead = _Ahead(entries, existing, untrusted, origin, backend, artifacts, jobs) if jobs > 1 else None
    try:
        for i, e in enumerate(entries):
            if progress:
                progress(i, len(entries))
            old = existing.get(e.citekey)
            if old is not None and old.origin != origin:
                report.problems.append(
                    f"{bib}:{e.line}: citekey {e.citekey!r} is already in the ledger from {old.origin}; entry skipped"
                )
                continue
            _sync_entry(e, old, names[e.citekey] + TXT, folder, batch, report, backend, artifacts, untrusted,
                        ahead.take(i) if ahead else None)
    finally:
        if ahead is not None:
            ahead.close()
    batch.flush()
    with ledger.transaction():
        ledger.set_meta("last_source", origin)


def _sync_entry(e, old: LedgerRow | None, name: str, folder: ParsedFolder, batch: Committer, report: SyncReport,
                backend: str, artifacts: str, untrusted: set[str], pre=None) -> None:
    """One entry: its row (and parsed file) brought in line with its ``file`` field. ``pre``: its
    ``_choose`` and the parse (a future, or None) that ``_Ahead`` began for it."""
    rel = folder.rel(name)  # a safe name: one plain component in the checked folder
    trusted = old is not None and old.parsed_path not in untrusted
    meta = dict(authors=e.authors, year=e.year, author_names=e.author_names, venue=e.venue, type=e.type, doi=e.doi)
    base = LedgerRow(citekey=e.citekey, title=e.title, abstract=e.abstract, keywords=e.keywords,
                     status="no-file", origin=report.origin, backend=backend, **meta)
    had = trusted and old.status == "parsed" and folder.exists(old.parsed_path)
    choice = pre[0] if pre is not None else _choose(e.files, backend, old if trusted else None)
    put = lambda row: batch.put(row._values())  # noqa: E731
    if choice.doc is None and not choice.found:
        if e.files:
            reason = "file not found: " + "; ".join(choice.missing)
            report.missing.append((e.citekey, reason))
        else:
            reason = "no file field"
            report.no_file_field.append(e.citekey)
        batch.unlink(old.parsed_path if old else None)
        batch.unlink(rel)  # a stale sidecar there
        put(base.with_(reason=reason))
        return
    row = result = None
    if choice.doc is not None:
        doc, st = choice.doc, choice.st
        row = base.with_(source_path=str(doc), source_size=st.st_size, source_mtime_ns=st.st_mtime_ns)
        unchanged = choice.unchanged and had and (backend != "docling" or _has_sidecar(folder, old.parsed_path))
        if unchanged:
            report.unchanged += 1
            if old.parsed_path != rel:
                _carry(folder, old.parsed_path, name, batch)
            if (old.title, old.abstract, old.keywords, old.parsed_path, old.reason) != (
                    e.title, e.abstract, e.keywords, rel, None) or any(getattr(old, k) != v for k, v in meta.items()):
                put(row.with_(status="parsed", parsed_path=rel))
            return
        try:
            if pre is not None and pre[1] is not None:
                result = pre[1].result()
            else:
                result = parse(doc, backend, docling_artifacts_path=artifacts, kind=choice.kind)
            error = None
        except ParseError as err:
            result, error = None, _one_line(str(err)) or type(err).__name__
    else:
        error = "; ".join(_one_line(r) for r in choice.reasons)
    if error is not None:
        if had and result is None and row is not None:
            # A document the backend reads, whose parse failed (no models, a damaged file, a parser
            # error): the last good text stays until a parse succeeds. A document the backend does not
            # read at all (or no longer a regular file) loses it, as no file does.
            if old.parsed_path != rel:
                _carry(folder, old.parsed_path, name, batch)
            put(old.with_(title=e.title, abstract=e.abstract, keywords=e.keywords, **meta, parsed_path=rel,
                          reason=f"kept the text of an earlier parse; the last sync failed: {error}"))
            report.failed.append((e.citekey, f"{error} (the text parsed before is kept)"))
            report.kept += 1
            return
        batch.unlink(old.parsed_path if old else None)
        batch.unlink(rel)
        put((row or base).with_(status="failed", reason=error))
        report.failed.append((e.citekey, error))
        return
    sidecar = dump_sidecar(result.items).encode("utf-8") if result.items else None
    batch.write(name, result.text.encode("utf-8"), sidecar, vouched=old is not None and old.parsed_path == rel)
    if old is not None and old.parsed_path and old.parsed_path != rel:
        batch.unlink(old.parsed_path)
    put(row.with_(status="parsed", parsed_path=rel))
    report.parsed += 1


class _Ahead:
    """Entries' documents chosen and parsed ahead, in a process pool: ``take(i)`` is entry i's
    ``(choice, future or None)`` (None: an entry ``_sync`` skips). Only a document that will be parsed
    whatever the ledger folder holds (chosen, and not the unchanged source of a trusted row) is sent;
    one found to need a parse later (its parsed file gone) is parsed in place. At most ``4 * jobs``
    entries are ahead, so finished parses waiting hold a bounded amount of text."""

    def __init__(self, entries, existing: dict[str, LedgerRow], untrusted: set[str], origin: str, backend: str,
                 artifacts: str, jobs: int):
        from chitragupta.engine.library.workers import process_pool

        self.entries, self.existing, self.untrusted = entries, existing, untrusted
        self.origin, self.backend, self.artifacts = origin, backend, artifacts
        self.pool = process_pool(jobs)
        self.window = 4 * jobs
        self.planned: dict[int, tuple | None] = {}
        self.next = 0

    def _plan(self, j: int):
        e = self.entries[j]
        old = self.existing.get(e.citekey)
        if old is not None and old.origin != self.origin:
            return None
        trusted = old is not None and old.parsed_path not in self.untrusted
        choice = _choose(e.files, self.backend, old if trusted else None)
        fut = None
        if choice.doc is not None and not choice.unchanged:
            fut = self.pool.submit(parse, choice.doc, self.backend, docling_artifacts_path=self.artifacts,
                                   kind=choice.kind)
        return choice, fut

    def take(self, i: int):
        while self.next < len(self.entries) and self.next < i + self.window:
            self.planned[self.next] = self._plan(self.next)
            self.next += 1
        return self.planned.pop(i, None)

    def close(self) -> None:
        for got in self.planned.values():
            if got is not None and got[1] is not None:
                got[1].cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)


def _has_sidecar(folder: ParsedFolder, rel: str) -> bool:
    p = folder.path(rel)
    return p is not None and p.with_name(folder.sidecar_of(p.name)).is_file()
