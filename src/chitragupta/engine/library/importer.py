"""``import``: a BEIR-style corpus (``{"_id", "title", "text"}`` per line) as the ledger's sources.

By default the texts go into a few large append-only packs (``engine.library.texts``; a row's
``parsed_path`` is ``content/parsed/packs/<pack>#<offset>+<length>``): one read of the file, each text
appended, each batch's pack bytes fsynced before its rows commit (``committer.py``). A record whose text,
title or abstract changed (``text_hash``) has its text appended anew; the bytes it replaces become
garbage, reclaimed (``_reclaim``) once they are over half the packs. A re-import of the same file is a
no-op. Rows an earlier per-file import wrote keep their files while unchanged; a changed one moves into
the packs (its file removed after the commit). Why a reference in ``parsed_path`` and not new columns:
every reader already passes ``parsed_path`` from the ledger to the one text path
(``engine.index.source``), old rows stay valid as they are, and no ledger migration is needed.

``packed=False`` (the layout before packs, kept for the API and its tests): one read of the file. Per record: its text goes to ``content/parsed/<name>.txt`` and its row joins a
batch committed every ``_BATCH_ROWS`` rows or two seconds, by the one ``Committer`` (``committer.py``
has the protocol: new files written before their rows, a file a committed row vouches for rewritten
only under ``meta.rewrite_pending``, files removed after the commit that stops them). A run an error
stops (a full disk) keeps the batches it committed and removes the files of the one in flight before
it says so (``committer.stopped``), so no file is left that the ledger does not list. ``names.Names``
draws the names as the keys arrive; the few whose final name is only known at the end (a case-folded
collision found late, or one that the removals undo) are rewritten by a second read of just those
records, after the removals are committed. A re-import of the same file is a no-op; a record is
rewritten when its text, title or abstract changed (its hash, ``text_hash``) or its file is not trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Callable

from chitragupta.engine.library.committer import (STOPS, UNLINK_PENDING, Committer, ParsedFolder, SyncReport, begin,
                                                 gone_keys, origin_of, stopped, TXT)
from chitragupta.engine.library.texts import PACKS_DIR, PackWriter, pack_stats, split_ref
from chitragupta.files import discard
from chitragupta.engine.library.jsonl import NOT_JSON, iter_jsonl, open_input
from chitragupta.engine.library.ledger import Ledger, authors_json, names_json, year_text
from chitragupta.engine.library.names import Names

__all__ = ["import_jsonl", "text_hash"]

Progress = Callable[[int, int | None], None]  # (done, total) -> None

_BATCH_ROWS = 500  # rows a batch commits (or BATCH_SECONDS): a run stopped by a full disk keeps all but the last
_PACKED_BATCH_ROWS = 5000  # (or BATCH_SECONDS) packed: one fsync of the pack and one commit per batch
_NO_META = (None,) * 6  # authors, year, venue, type, doi, author_names of a record without them


def text_hash(title: str, text: str, abstract: str | None) -> str:
    """What an imported row records as its ``source_hash``: title, text and abstract, length-prefixed."""
    h = hashlib.blake2b(digest_size=16)
    for part in (title, text, abstract or ""):
        b = part.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()

def _record_state(title, text, abstract, kws, authors, year, pairs, venue, kind, doi) -> tuple:
    """What a record gives its row, as both import loops compare and store it: (the text's UTF-8 bytes, its
    ``text_hash``, the keywords as stored, the metadata in ``import_state``'s order)."""
    data = text.encode("utf-8")
    tb = title.encode("utf-8")
    ab = abstract.encode("utf-8") if abstract else b""
    digest = hashlib.blake2b(b"".join((len(tb).to_bytes(8, "little"), tb, len(data).to_bytes(8, "little"), data,
                                       len(ab).to_bytes(8, "little"), ab)), digest_size=16).hexdigest()
    meta = (authors_json(authors), year_text(year), venue, kind, doi, names_json(pairs)) \
        if authors or year is not None or venue or kind or doi else _NO_META
    return data, digest, _keywords_json(kws), meta



def _count_lines(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
    except OSError:
        return None


def _keywords_json(kws: tuple[str, ...]) -> str | None:
    return json.dumps(list(kws), ensure_ascii=False) if kws else None  # as LedgerRow._values stores them


def import_jsonl(ws, path: Path, progress: Progress | None = None, *, packed: bool = True) -> SyncReport:
    """Import a BEIR-style corpus: ``_id`` becomes the citekey, ``text`` the parsed text -- appended to the
    workspace's packs (``packed``, the default), or one file per record (``packed=False``)."""
    path = Path(path)
    open_input(path, "corpus").close()  # a folder, device, FIFO or socket is named as such, never read
    origin = origin_of(ws, path)
    report = SyncReport(origin=origin)
    folder = ParsedFolder(ws)
    with Ledger(ws.ledger_path) as ledger:
        ledger.cache_for_bulk()
        dropped = ledger.drop_unkeyed()
        if dropped:
            report.problems.append(f"{ws.ledger_path}: dropped {dropped} row(s) whose citekey was not text "
                                   "(NULL or a BLOB: a hand edit?)")
        existing = ledger.import_state()
        untrusted = begin(ledger, folder, {t[2] for t in existing.values() if t[2]}, report,
                          list_files=bool(existing))
        if not packed:
            batch = Committer(ledger, folder, rows_per_batch=_BATCH_ROWS, untrusted=untrusted)
            try:
                _import(path, origin, existing, untrusted, folder, batch, ledger, report, progress)
            except STOPS as err:
                raise stopped("import", ws, ledger, folder, batch.committed, err) from None
            return report
        writer = PackWriter(ws.root)
        batch = Committer(ledger, folder, rows_per_batch=_PACKED_BATCH_ROWS, untrusted=untrusted, packs=writer)
        try:
            _import_packed(path, origin, existing, untrusted, folder, batch, ledger, report, progress)
            writer.close()
            _reclaim(ws, ledger, report)
        except STOPS as err:
            writer.rollback()  # the bytes appended for rows not committed given back now
            raise stopped("import", ws, ledger, folder, batch.committed, err) from None
        finally:
            writer.close()
    return report


def _import_packed(path: Path, origin: str, existing: dict[str, tuple], untrusted: set[str], folder: ParsedFolder,
                   batch: Committer, ledger: Ledger, report: SyncReport, progress: Progress | None) -> None:
    """``import_jsonl`` into packs, once the run has begun: one read of the records, then the removals.
    A packed text has no name, so there are no renames; a record whose text changed gets its new text
    appended (the old bytes become garbage); a row of an earlier per-file import keeps its file while
    its text is unchanged, and moves into the packs when it changes (its file removed after the commit)."""
    tick = None
    if progress:
        total = _count_lines(path)
        progress(0, total)
        tick = lambda done, _total: progress(done, total)  # noqa: E731
    packs = pack_stats(str(ws_packs(folder)))
    files, plain, prefix_len = folder.files, folder.plain, len(PACKS_DIR) + 1
    put, append = batch.put, batch.packs.append
    now = time.time
    seen: set[str] = set()
    problems = report.problems
    for key, title, text, kws, abstract, line, authors, year, pairs, venue, kind, doi in iter_jsonl(path, problems):
        n = report.entries
        if tick and not n & 4095:
            tick(n, None)
        report.entries = n + 1
        old = existing.get(key)
        if old is not None and old[0] != origin:
            problems.append(f"{path}:{line}: _id {key!r} is already in the ledger from {old[0]}; line skipped")
            continue
        if key in seen:  # a duplicate is reported and skipped by the reader; this cannot happen
            continue
        seen.add(key)
        data, digest, kw, meta = _record_state(title, text, abstract, kws, authors, year, pairs, venue, kind, doi)
        if old is not None and old[1] == "parsed" and old[3] == digest and old[2]:
            rel = old[2]
            ref = split_ref(rel)
            if ref is not None:
                got = packs.get(ref[0][prefix_len:])
                ok = got is not None and got[0] >= ref[1] + ref[2]
            else:
                ok = plain(rel) in files and rel not in untrusted
            if ok:
                report.unchanged += 1
                if (old[4] != kw and (tuple(json.loads(old[4])) if old[4] else ()) != kws) or old[5:] != meta:
                    put((key, title, abstract, kw, "parsed", None, rel, origin, None, None, None, digest, "jsonl",
                         now(), *meta))  # what the record says about itself changed, not its text
                continue
        rel = append(data)
        if old is not None and old[2]:
            batch.unlink(old[2])  # an earlier per-file text, removed once this row is committed
        report.parsed += 1
        put((key, title, abstract, kw, "parsed", None, rel, origin, None, None, None, digest, "jsonl", now(), *meta))
    damage = ("it yields no records" if not report.entries else
              "it has lines that are not JSON (a truncated file?)" if any(NOT_JSON in p for p in report.problems)
              else None)
    gone = gone_keys((k for k, t in existing.items() if t[0] == origin and k not in seen), damage, str(path),
                     report)
    for k in gone:
        batch.unlink(existing[k][2])
    batch.flush(gone)
    report.removed = len(gone)
    with ledger.transaction():
        ledger.set_meta("last_source", origin)
    if progress:
        progress(report.entries, report.entries)


def ws_packs(folder: ParsedFolder) -> Path:
    return Path(folder.folder, "packs")


_MOVE_ROWS = 20_000  # rows a reclaim commits at once (their texts synced first)


def _reclaim(ws, ledger: Ledger, report: SyncReport) -> None:
    """Garbage in the packs -- bytes no row points at: replaced texts, removed records, what a killed run
    appended -- counted into ``report.garbage``; once it is more than half the packs' bytes, the live
    texts are rewritten into a new pack (in the order they lie), their new references committed, then
    the old packs removed (listed under ``meta.unlink_pending`` first, so a run killed in between has the
    next run's ``begin`` finish the removal). A pack no row points at is removed at once."""
    folder = os.path.join(ws.root, PACKS_DIR)
    stats = pack_stats(folder)
    if not stats:
        return
    prefix_len = len(PACKS_DIR) + 1
    counted = ledger.packed_bytes()
    live = {name: min(counted.get(name, 0), size) for name, (size, _ino) in stats.items()}
    total = sum(size for size, _ino in stats.values())
    used = sum(live.values())
    report.garbage = total - used
    if 2 * (total - used) <= total:
        for name, n in live.items():
            if n == 0:
                discard(os.path.join(folder, name))
        return
    refs = []
    for key, rel in ledger.packed_texts():
        ref = split_ref(rel)
        if ref is not None and ref[0][prefix_len:] in stats:
            refs.append((ref[0][prefix_len:], ref[1], ref[2], key, rel))
    refs.sort()
    writer = PackWriter(ws.root, fresh=True)
    fds: dict[str, int] = {}
    moves: list[tuple[str, str, str]] = []
    try:
        for name, offset, length, key, rel in refs:
            fd = fds.get(name)
            if fd is None:
                fd = fds[name] = os.open(os.path.join(folder, name), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            data = os.pread(fd, length, offset)
            if len(data) != length:  # cut short since the count: left as it is (it reads as missing)
                continue
            moves.append((key, rel, writer.append(data)))
            if len(moves) >= _MOVE_ROWS:
                writer.sync()
                with ledger.transaction():
                    ledger.move_texts(moves)
                moves = []
        writer.sync()
        with ledger.transaction():
            ledger.move_texts(moves)
            ledger.set_meta(UNLINK_PENDING, json.dumps([f"{PACKS_DIR}/{name}" for name in sorted(stats)]))
    finally:
        writer.close()
        for fd in fds.values():
            os.close(fd)
    for name in stats:
        discard(os.path.join(folder, name))
    with ledger.transaction():
        ledger.delete_meta(UNLINK_PENDING)
    report.reclaimed, report.garbage = total - used, 0


def _import(path: Path, origin: str, existing: dict[str, tuple], untrusted: set[str], folder: ParsedFolder,
            batch: Committer, ledger: Ledger, report: SyncReport, progress: Progress | None) -> None:
    """``import_jsonl`` once the run has begun: the records, the removals, the late renames."""
    names = Names(existing)
    seen: set[str] = set()
    tick = None
    if progress:
        total = _count_lines(path)  # what the bar runs to (blank and bad lines included)
        progress(0, total)
        tick = lambda done, _total: progress(done, total)  # noqa: E731
    _import_records(path, origin, existing, names, seen, folder, batch, report, tick, None, untrusted)
    damage = ("it yields no records" if not report.entries else
              "it has lines that are not JSON (a truncated file?)" if any(NOT_JSON in p for p in report.problems)
              else None)
    gone = gone_keys((k for k, t in existing.items() if t[0] == origin and k not in seen), damage, str(path),
                     report)
    redo = names.redo(gone, seen)
    for k in gone:
        batch.unlink(existing[k][2])
    batch.flush(gone)  # the removals committed and their files gone before any name is reused
    report.removed = len(gone)
    if redo:
        _import_records(path, origin, existing, names, seen, folder, batch, report, None, redo, untrusted)
        if redo:
            report.problems.append(f"{path}: changed while it was imported ({len(redo)} record(s) not found "
                                   "again); run the import again")
        batch.flush()
    with ledger.transaction():
        ledger.set_meta("last_source", origin)
    if progress:
        progress(report.entries, report.entries)


def _import_records(path: Path, origin: str, existing: dict[str, tuple], names: Names, seen: set[str],
                    folder: ParsedFolder, batch: Committer, report: SyncReport, progress: Progress | None,
                    wanted: dict[str, str] | None, untrusted: set[str]) -> None:
    """One read of ``path``: each record's file written (unless unchanged) and its row batched. With
    ``wanted`` (key -> the name the first read gave it), only those keys, each moved to its final name;
    the keys found are taken out of ``wanted``."""
    prefix, files = folder.prefix, folder.files
    put, write = batch.put, batch.write
    now = time.time
    problems = report.problems if wanted is None else []
    for key, title, text, kws, abstract, line, authors, year, pairs, venue, kind, doi in iter_jsonl(path, problems):
        if wanted is not None:
            if key not in wanted:
                continue
            old_rel = prefix + wanted.pop(key) + TXT  # where the first read put it (its committed row's path)
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
            committed = old[2] if old is not None else None
        else:
            name = names.name(key, False, seen)
            committed = old_rel
        fname = name + TXT
        rel = prefix + fname
        data, digest, kw, meta = _record_state(title, text, abstract, kws, authors, year, pairs, venue, kind, doi)
        row = (key, title, abstract, kw, "parsed", None, rel, origin, None, None, None, digest, "jsonl", now(), *meta)
        if wanted is None and old is not None and old[1] == "parsed" and old[3] == digest and old[2] == rel \
                and fname in files and (not untrusted or rel not in untrusted):
            report.unchanged += 1
            if (old[4] != kw and (tuple(json.loads(old[4])) if old[4] else ()) != kws) or old[5:] != meta:
                put(row)  # what the record says about itself changed, not its text
            continue
        # (imported text has no structure: a stale sidecar there is removed with the write)
        write(fname, data, None, vouched=committed == rel)
        if wanted is not None:
            if old_rel != rel:
                batch.unlink(old_rel)  # once the row points at its new name
            if old is not None and old[1] == "parsed" and old[3] == digest and old[2] == old_rel \
                    and old_rel[len(prefix):] in files and old_rel not in untrusted:
                report.unchanged -= 1  # counted unchanged by the first read; rewritten after all
                report.parsed += 1
        else:
            if old is not None and old[2] and old[2] != rel:
                batch.unlink(old[2])
            report.parsed += 1
        put(row)
