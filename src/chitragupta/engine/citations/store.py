"""Parsed reference entries, one derived file per source: ``content/refs/<name>.json``.

    {"rules": RULES, "citekey": "...", "stamp": "...", "fingerprint": "...", "located": true,
     "entries": [Entry.to_json(), ...], "notes": ["...", ...]}

``<name>`` is the stem of the source's parsed file (``sync`` assigns it from the citekey, unique even on a
case-insensitive file system; ``safe_name(citekey)`` for a row without one), so a citekey never becomes a
path outside ``content/``. The text parsed is the reference span the index cuts out, found by the same
functions on the same files (``chitragupta.engine.text.refcut`` through the rules of
``chitragupta.engine.index.source``): with a docling sidecar its items from the reference heading up to an
appendix heading, without one the plain-text span; the heading itself left out.

``fingerprint`` is a hash of the source's parsed text (the ``.txt``, or the sidecar's items) and
``RULES``: a file is rewritten only when it changes. ``stamp`` (the parsed file's and its sidecar's size
and mtime, and RULES) lets an unchanged source skip even the reading. A source whose text holds no
reference list gets no file of its own: it is one line of ``content/refs/unlocated.idx`` (JSON,
``{"rules": RULES, "sources": {name: [citekey, stamp, fingerprint]}}``, rewritten only when it changes), so a
large corpus of texts without lists (1M synthetic abstracts) costs one file, not a million; ``references_of``
answers None for such a source. A file that is corrupt, foreign or of other rules is rebuilt with a note
(the list of unlocated sources too); files of sources no longer in the ledger are removed. Written with the one atomic writer (``chitragupta.engine.files``), under the
workspace lock. Hyphens split at a line end are judged by the list's own words, and running titles by
the whole document's pages (``entries.running_lines``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Callable, NamedTuple

from chitragupta.engine.citations.entries import Entry, parse_reference_list

__all__ = ["RULES", "REFS_DIR", "references_of", "all_references", "build_references", "reference_text",
           "refs_folder", "summary_line"]

RULES = 4  # bumped whenever splitting or field rules change: every artifact is rebuilt
REFS_DIR = "refs"
UNLOCATED = "unlocated.idx"  # the sources whose text holds no reference list (not a .json: never a source's name)

_NUMBERED = re.compile(r"^\s*(?:\[[^\]\s]{1,24}\]|\d{1,4}[.)]\s|[-*+\u2022]\s)")

Progress = Callable[[int, "int | None"], None]


def refs_folder(ws) -> Path:
    return ws.inside_content(ws.content / REFS_DIR)


def _name(citekey: str, parsed_path: str | None) -> str:
    from chitragupta.engine.workspace import safe_name

    if parsed_path:
        stem = parsed_path.rsplit("/", 1)[-1]
        if stem.endswith(".txt") and len(stem) > 4:
            stem = stem[:-4]
            if safe_name(stem) == stem:
                return stem
    return safe_name(citekey)


class _Input(NamedTuple):
    """What a source's reference list is parsed from: the list's text (its heading left out), the whole
    document's words and running titles, and the fingerprint of the document text it came from."""

    text: str | None
    words: object
    running: frozenset
    fingerprint: str


def reference_text(root: "Path | str", parsed_path: str | None) -> str | None:
    """The text of a source's reference list, its heading left out; None when it has none (or no text).

    The same files and rules the index reads (``chitragupta.engine.index.source.row_body``): a ledger path
    outside ``content/`` or not a regular file reads as nothing; a valid sidecar's reference span
    (``refcut.reference_span``: its items from the reference heading to the next appendix heading, page
    headers and footers left out), one item a line (docling's list items as Markdown items); else the
    plain-text span of the ``.txt`` (``refcut.plain_reference_span``)."""
    return _input(Path(root), parsed_path).text


def _input(root: Path, parsed_path: str | None) -> _Input:
    from chitragupta.engine.citations.entries import LazyWords
    from chitragupta.engine.index.source import _inside_content, has_text, is_regular, read_text, sidecar_path

    if not parsed_path or not _inside_content(parsed_path):
        return _Input(None, None, frozenset(), _fingerprint(None))
    path = root / parsed_path
    if not has_text(path):  # a regular file, or a packed text's whole bytes
        return _Input(None, None, frozenset(), _fingerprint(None))
    side = sidecar_path(path)
    if is_regular(side):
        from chitragupta.engine.corpus.sidecar import EXCLUDED_LABELS, SidecarError, read_sidecar
        from chitragupta.engine.text.refcut import reference_span

        try:
            items = read_sidecar(side)
        except SidecarError:
            items = None  # the index reads the .txt uncut then; so does this, by the plain rule
        if items is not None:
            fp = _fingerprint(json.dumps(items, ensure_ascii=False, sort_keys=True))
            span = reference_span(items)
            if span is None:
                return _Input(None, None, frozenset(), fp)
            kept = []
            for it in items[span[0] + 1:span[1]]:
                if it["label"] in ("section_header", "title"):
                    break  # a list has no headings: what follows one (an appendix the span keeps) is no entry
                if it["label"] not in EXCLUDED_LABELS:
                    kept.append(it)
            text = _sidecar_list(kept)
            return _Input(text, LazyWords(text), frozenset(), fp)
    from chitragupta.engine.citations.entries import running_lines
    from chitragupta.engine.text.refcut import plain_reference_span

    whole = read_text(path)
    fp = _fingerprint(whole)
    span = plain_reference_span(whole)
    if span is None:
        return _Input(None, None, frozenset(), fp)
    body = whole[span[0]:span[1]]
    nl = body.find("\n")
    ref = "" if nl < 0 else body[nl + 1:]
    return _Input(ref, LazyWords(ref), running_lines(whole, 3), fp)


def _sidecar_list(kept: list[dict]) -> str:
    """A sidecar's reference items as list text, one item a line at least: a list item (docling's one
    entry) as a Markdown item unless its text is numbered already ("[12] ...", "12. ..."); where the list
    is made of list items, a ``text`` item too when it opens like an entry (docling's Markdown reader makes
    an entry holding a link a ``text`` item), else it continues the entry before it (the link itself)."""
    from chitragupta.engine.citations.entries import starts_entry

    listed = sum(it["label"] == "list_item" for it in kept) >= 2
    out = []
    for it in kept:
        t = it["text"]
        entry = it["label"] == "list_item" or (listed and it["label"] == "text" and starts_entry(t))
        out.append("- " + t if entry and not _NUMBERED.match(t) else t)
    return "\n".join(out)


def _parse(inp: _Input) -> tuple[list[Entry], list[str]]:
    return parse_reference_list(inp.text or "", words=inp.words, running=inp.running)


def _stamp(root: Path, parsed_path: str | None) -> str:
    """What changes when a source's parsed text may have: its files' size and mtime, and RULES."""
    from chitragupta.engine.index.source import sidecar_path, text_stamp

    parts = [str(RULES), parsed_path or ""]
    if parsed_path:
        p = root / parsed_path
        for f in (p, sidecar_path(p)):
            parts.append(text_stamp(f))  # size:mtime, a packed text's length and pack inode, "-" if none
    return "|".join(parts)


def _fingerprint(text: str | None) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"rules={RULES}\n".encode())
    h.update(b"none" if text is None else text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


_NO_FILE = object()  # what ``read_json`` answers for a file that is not there (a file may hold ``null``)


def read_json(path: Path, limit: int = 1 << 30):
    """The JSON value of the file at ``path``; ``_NO_FILE`` when there is no file; ValueError("not a
    readable JSON file") when it cannot be read (an OS error, over ``limit`` bytes, not a regular file), is
    not UTF-8 or is not JSON. The one reader of the files kept here and of the graph's kept resolution."""
    from chitragupta.engine.files import FileRefused, read_limited

    try:
        return json.loads(read_limited(path, limit))
    except FileNotFoundError:
        return _NO_FILE
    except (OSError, FileRefused, ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError("not a readable JSON file") from None


def _read(path: Path) -> dict | None:
    """The artifact at ``path`` as a dict of the documented shape, or None (missing, corrupt, foreign)."""
    data = read_json(path)
    if data is _NO_FILE:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or "fingerprint" not in data:
        raise ValueError("not a reference-entries file")
    return data


def _read_unlocated(folder: Path) -> dict[str, list]:
    """name -> [citekey, stamp, fingerprint] of the sources stored without a list; {} when the file is
    missing or of other rules; ValueError when it is unreadable or not of that shape."""
    data = read_json(folder / UNLOCATED, 1 << 34)
    if data is _NO_FILE:
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
        raise ValueError("not a list of sources without a reference list")
    if data.get("rules") != RULES:
        return {}
    out = {}
    for name, rec in data["sources"].items():
        if not (isinstance(rec, list) and len(rec) == 3 and all(isinstance(x, str) for x in rec)):
            raise ValueError("not a list of sources without a reference list")
        out[name] = rec
    return out


def _unlocated_or_empty(folder: Path) -> dict[str, list]:
    try:
        return _read_unlocated(folder)
    except ValueError:
        return {}


def _present(folder: Path) -> set[str]:
    """The ``.json`` names in ``folder`` (one scan, instead of an open per source that has no file)."""
    try:
        return {e.name for e in os.scandir(folder) if e.name.endswith(".json")}
    except OSError:
        return set()


def _entries(data: dict) -> list[Entry]:
    return [Entry.from_json(d) for d in data["entries"]]


def _rows(ws) -> list:
    from chitragupta.engine.corpus.ledger import Ledger

    with Ledger(ws.ledger_path, create=False) as ledger:
        return ledger.index_view()


def references_of(workspace, citekey: str) -> list[Entry] | None:
    """The parsed entries of ``citekey``'s reference list, in order; None when no list was located for it
    (no parsed text, no reference heading, an unknown citekey). Read from its artifact when that is
    current, else parsed from the text now (nothing written: a reader holds no lock)."""
    from chitragupta.engine.corpus.ledger import Ledger

    with Ledger(workspace.ledger_path, create=False) as ledger:
        row = ledger.get(citekey)
    if row is None:
        return None
    parsed_path = row.parsed_path if row.status == "parsed" else None
    folder = refs_folder(workspace)
    name = _name(citekey, parsed_path)
    try:
        data = _read(folder / f"{name}.json")
    except ValueError:
        data = None
    if data is None:
        rec = _unlocated_or_empty(folder).get(name)
        if rec is not None and rec[0] == citekey and rec[1] == _stamp(workspace.root, parsed_path):
            return None
    if (data is not None and data.get("citekey") == citekey and data.get("rules") == RULES
            and data.get("stamp") == _stamp(workspace.root, parsed_path)):
        if not data.get("located", True):
            return None
        try:
            return _entries(data)
        except ValueError:
            pass
    inp = _input(workspace.root, parsed_path)
    return None if inp.text is None else _parse(inp)[0]


def all_references(workspace, fingerprints: dict | None = None) -> dict[str, list[Entry]]:
    """citekey -> entries of every ledger source whose artifact holds a located list (as ``index`` last
    built them; a missing or unreadable artifact is left out). ``fingerprints``: a dict given is filled
    with citekey -> the artifact's fingerprint, for each source returned."""
    folder = refs_folder(workspace)
    out: dict[str, list[Entry]] = {}
    present = _present(folder)
    for key, _title, status, parsed_path in _rows(workspace):
        if status != "parsed":
            continue
        file = f"{_name(key, parsed_path)}.json"
        if file not in present:
            continue
        try:
            data = _read(folder / file)
        except ValueError:
            continue
        if data is None or data.get("citekey") != key or not data.get("located", True):
            continue
        try:
            out[key] = _entries(data)
        except ValueError:
            continue
        if fingerprints is not None:
            fingerprints[key] = str(data["fingerprint"])
    return out


def build_references(workspace, progress: Progress | None = None, *, lock: bool = True, jobs: int = 1) -> dict:
    """Parse every source's reference list and store it (see the module docstring). Returns ``{"built": n,
    "kept": n, "none": n, "sources": n, "entries": n, "removed": n, "notes": [...]}``: files written, files
    current, sources with no list located, sources with one, entries stored, stale files removed.
    ``lock``: take the workspace lock (a caller that holds it already passes False: a second hold from the
    same process would wait for itself). ``jobs``: processes that read and parse the lists (``index
    --jobs``; the files are written here, in ledger order, the same bytes whatever ``jobs`` is): the wall
    time falls, the CPU time does not (each worker finds its texts' reference spans itself)."""
    if not lock:
        return _build(workspace, progress, jobs)
    with workspace.lock("index (references)"):
        return _build(workspace, progress, jobs)


_CHUNK = 32  # sources a worker parses per task


def _parsed(root: Path, parsed_path: str | None, old_fp: str | None) -> tuple:
    """(fingerprint, located, entries as JSON, notes) of one source's list; (fingerprint, None, None, None)
    when its text's fingerprint is ``old_fp`` (the stored file is current: nothing parsed)."""
    inp = _input(root, parsed_path)
    if old_fp is not None and inp.fingerprint == old_fp:
        return inp.fingerprint, None, None, None
    if inp.text is None:
        return inp.fingerprint, False, [], []
    entries, notes = _parse(inp)
    return inp.fingerprint, True, [e.to_json() for e in entries], notes


def _parse_chunk(root: Path, items: list) -> list:
    return [_parsed(root, pp, fp) for pp, fp in items]


def _parse_all(root: Path, items: list, jobs: int):
    """``_parsed`` of each (parsed path, old fingerprint) of ``items``, in order: here, or by ``jobs``
    worker processes (``engine.workers.process_pool``) a chunk at a time, at most ``2 * jobs`` chunks
    waiting."""
    chunks = [items[a:a + _CHUNK] for a in range(0, len(items), _CHUNK)]
    if jobs <= 1 or len(chunks) <= 1:
        for pp, fp in items:
            yield _parsed(root, pp, fp)
        return
    from chitragupta.engine.workers import process_pool

    with process_pool(min(jobs, len(chunks))) as ex:
        pending, nxt = [], 0
        for _ in chunks:
            while nxt < len(chunks) and len(pending) < 2 * jobs:
                pending.append(ex.submit(_parse_chunk, root, chunks[nxt]))
                nxt += 1
            yield from pending.pop(0).result()


def _build(workspace, progress: Progress | None, jobs: int = 1) -> dict:
    from chitragupta.engine.files import fsync_dir, replace_in_folder

    built = kept = none = total = removed = 0
    rows = _rows(workspace)
    folder = refs_folder(workspace)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        from chitragupta.errors import WorkspaceError

        raise WorkspaceError(f"{folder}: cannot keep the reference entries there ({err.strerror or err}); "
                             "move what stands there away") from None
    wanted: set[str] = set()
    n = len(rows)
    row_notes: list[list[str]] = [[] for _ in range(n)]
    present = _present(folder)
    try:
        unlocated_old = _read_unlocated(folder)
    except ValueError as err:
        row_notes.append([f"{REFS_DIR}/{UNLOCATED} {err}; rebuilt"])
        unlocated_old = {}
    unlocated: dict[str, list] = {}
    todo: list[tuple[int, str, str, str, dict | None]] = []  # (row, citekey, file name, stamp, old file)
    for i, (key, _title, status, parsed_path) in enumerate(rows):
        if status != "parsed" or not parsed_path:
            continue
        name = _name(key, parsed_path)
        path = folder / f"{name}.json"
        stamp = _stamp(workspace.root, parsed_path)
        old = None
        if path.name in present:
            try:
                old = _read(path)
            except ValueError as err:
                row_notes[i].append(f"{key}: {REFS_DIR}/{path.name} {err}; rebuilt")
        if old is not None and (old.get("citekey") != key or old.get("rules") != RULES):
            old = None
        if old is None:
            rec = unlocated_old.get(name)
            if rec is not None and rec[0] == key:
                old = {"citekey": key, "stamp": rec[1], "fingerprint": rec[2], "located": False, "entries": [],
                       "notes": []}
        if old is not None and old.get("stamp") == stamp:
            kept += 1
            if old.get("located", True):
                total += len(old["entries"])
                wanted.add(path.name)
            else:
                none += 1
                unlocated[name] = [key, stamp, str(old["fingerprint"])]
            continue
        todo.append((i, key, name, stamp, old))
    items = [(rows[i][3], None if old is None else old.get("fingerprint")) for i, _k, _n, _s, old in todo]
    done = 0
    for (i, key, name, stamp, old), (fp, located, entries_json, list_notes) in zip(
            todo, _parse_all(workspace.root, items, jobs)):
        if progress is not None and done % 200 == 0:
            progress(i, n)
        done += 1
        if located is None:  # the text is as it was: the stored entries kept, the file restamped
            entries_json, list_notes, located = old["entries"], old.get("notes", []), old.get("located", True)
            kept += 1
        else:
            row_notes[i].extend(f"{key}: {note}" for note in list_notes)
            built += 1
        if not located:
            none += 1
            unlocated[name] = [key, stamp, fp]
            continue
        total += len(entries_json)
        wanted.add(f"{name}.json")
        data = {"rules": RULES, "citekey": key, "stamp": stamp, "fingerprint": fp, "located": located,
                "entries": entries_json, "notes": list_notes}
        replace_in_folder(str(folder), f"{name}.json",
                          json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), "refs")
    if unlocated != unlocated_old or (not unlocated and (folder / UNLOCATED).exists()):
        if unlocated:
            replace_in_folder(str(folder), UNLOCATED, json.dumps(
                {"rules": RULES, "sources": unlocated}, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                "refs")
        else:
            try:
                os.unlink(folder / UNLOCATED)
            except OSError:
                pass
    for entry in os.scandir(folder):
        if entry.name.endswith(".json") and entry.name not in wanted:
            try:
                os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    fsync_dir(folder)
    if progress is not None:
        progress(n, n)
    return {"built": built, "kept": kept, "none": none, "sources": built + kept - none, "entries": total,
            "removed": removed, "notes": [note for notes in row_notes for note in notes]}


def summary_line(report: dict) -> str:
    """``build_references``'s report as the one line ``index`` prints."""
    return (f"references: {report['sources']} sources, {report['entries']} entries ({report['built']} parsed, "
            f"{report['kept']} unchanged, {report['none']} without a reference list"
            + (f", {report['removed']} stale removed" if report["removed"] else "") + ")")
