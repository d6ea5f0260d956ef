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
and mtime, a packed text's length and its pack's inode, and RULES) lets an unchanged source skip even the
reading; a pack is stat'ed and opened once per build, not once per row. A source whose text holds no
reference list gets no file of its own: it is one 32-byte record of ``content/refs/unlocated.idx``, so a
large corpus of texts without lists (10M synthetic abstracts) costs one file of 32 bytes a source, held in
memory as one array. The file: the line ``chitragupta unlocated 2``, a JSON line ``{"rules": RULES,
"count": n, "record": ...}``, then n records of little-endian unsigned integers -- key (64 bits: blake2b
of ``name + "\0" + citekey``), stamp (64 bits: blake2b of the stamp), fingerprint (its 128 bits, high
half first) -- in key order; rewritten (atomically) only when its bytes change. An older one (JSON,
``{"rules", "sources": {name: [citekey, stamp, fingerprint]}}``) is read, and written anew in this form by
the next build. ``references_of`` answers None for such a source. A file that is corrupt, foreign or of
other rules is rebuilt with a note (the list of unlocated sources too: a wrong header, a count that is not
the body's, keys out of order); files of sources no longer in the ledger are removed. A build reads the
ledger a page of rows at a time (``Ledger.index_page``) and keeps per source only what it writes: the
records above and the names of the files with entries; a text is read only when its stamp changed, and
one that cannot hold a reference heading (``may_have_heading``: refcut's ``may_hold_heading``) is not searched further. A
packed text whose pack has no sidecar beside it (an import's) is read with its reference split and its
pack looked up once. The entries a build writes are handed to ``all_references`` in the same process
(``_Handover``: a script or the API that builds, then opens the graph) while their files are as written.
Written with the one atomic writer (``chitragupta.files``), under the workspace lock. Hyphens
split at a line end are judged by the list's own words, and running titles by
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
from chitragupta.engine.text.refcut import may_hold_heading

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
    from chitragupta.engine.library.workspace import safe_name

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


def _input(root: Path, parsed_path: str | None, texts: "_Texts | None" = None) -> _Input:
    from chitragupta.engine.index.source import _inside_content

    if not parsed_path or not _inside_content(parsed_path):
        return _Input(None, None, frozenset(), _fingerprint(None))
    if texts is None:
        texts = _Texts(root)
        try:
            return _input(root, parsed_path, texts)
        finally:
            texts.close()
    whole = texts.packed_alone(parsed_path)  # a packed text no sidecar can stand beside: its text at once
    if whole is None and not texts.has_text(parsed_path):  # a regular file, or a packed text's whole bytes
        return _Input(None, None, frozenset(), _fingerprint(None))
    if whole is None and texts.has_sidecar(parsed_path):
        from chitragupta.engine.citations.entries import LazyWords
        from chitragupta.engine.text.sidecar import EXCLUDED_LABELS, SidecarError, read_sidecar
        from chitragupta.engine.index.source import sidecar_path

        side = sidecar_path(root / parsed_path)
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
    if whole is None:
        whole = texts.read_text(parsed_path)
    fp = _fingerprint(whole)
    if not may_have_heading(whole):  # refcut's own first test, without its digest of the text
        return _Input(None, None, frozenset(), fp)
    from chitragupta.engine.citations.entries import LazyWords, running_lines
    from chitragupta.engine.text.refcut import plain_reference_span

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
    return _Texts(root).stamp(parsed_path)  # opens nothing: nothing to close


# False when a text cannot hold a plain reference heading, so ``refcut.plain_reference_span`` is None:
# refcut's own first test, asked here before any other work on a text without a list
may_have_heading = may_hold_heading


class _Texts:
    """The file facts of one build's texts, found once per pack: a packed text's stamp, whether it is
    whole and whether a sidecar stands beside it come from its pack's one ``stat`` (packs are never
    rewritten in place: ``engine.library.texts``), and its bytes from the pack's one open file, where the
    same functions per row (``engine.index.source.text_stamp``, ``has_text``, ``is_regular``,
    ``read_text``) would stat and open the pack each time; a file of its own is stat'ed and read as
    before. Held for one build (or one worker's chunk), then ``close``d: the workspace lock keeps the
    files as they are meanwhile."""

    def __init__(self, root: Path):
        self.root = root
        self._packs: dict[str, tuple] = {}  # pack path (relative) -> (size or -1, inode, sidecar stamp)
        self._fds: dict[str, tuple] = {}  # pack path -> (its open file, its size); (-1, -1): unreadable
        self._last: tuple = (None, None)  # the last parsed path asked about, and its split_ref
        # packed texts ``_read_packed`` read (parsed path -> (text, ref, inode)), kept for the build's later
        # reads of the same page (``_no_list`` after ``_quick_page``, ``packed_alone`` after both) while
        # their characters stay under ``KEPT_CHARS``; let go at the page's end (``forget``)
        self.kept: dict[str, tuple] = {}
        self.kept_chars = 0

    KEPT_CHARS = 1 << 28

    def keep(self, parsed_path: str, got: tuple) -> None:
        if parsed_path not in self.kept and self.kept_chars + len(got[0]) <= self.KEPT_CHARS:
            self.kept[parsed_path] = got
            self.kept_chars += len(got[0])

    def forget(self) -> None:
        self.kept.clear()
        self.kept_chars = 0

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        for fd, _size in fds.values():
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _ref(self, parsed_path: str):
        if self._last[0] != parsed_path:
            from chitragupta.engine.library.texts import split_ref

            self._last = (parsed_path, split_ref(parsed_path))
        return self._last[1]

    def _pack(self, pack: str) -> tuple:
        got = self._packs.get(pack)
        if got is None:
            import stat as st_

            from chitragupta.engine.index.source import sidecar_path, text_stamp

            try:
                st = os.stat(self.root / pack)
                size, ino = (st.st_size, st.st_ino) if st_.S_ISREG(st.st_mode) else (-1, 0)
            except (OSError, ValueError):
                size, ino = -1, 0
            # every text of a pack has the same sidecar path (its suffix replaced): one stamp per pack
            got = self._packs[pack] = (size, ino, text_stamp(sidecar_path(self.root / (pack + "#0+0"))))
        return got

    def stamp(self, parsed_path: str | None) -> str:
        parts = [str(RULES), parsed_path or ""]
        if parsed_path:
            ref = self._ref(parsed_path)
            if ref is None:
                from chitragupta.engine.index.source import sidecar_path, text_stamp

                p = self.root / parsed_path
                for f in (p, sidecar_path(p)):
                    parts.append(text_stamp(f))  # size:mtime, "-" if none
            else:
                size, ino, side = self._pack(ref[0])
                parts.append(f"{ref[2]}:pack:{ino}" if size >= ref[1] + ref[2] else "-")
                parts.append(side)
        return "|".join(parts)

    def has_text(self, parsed_path: str) -> bool:
        ref = self._ref(parsed_path)
        if ref is None:
            from chitragupta.engine.index.source import has_text

            return has_text(self.root / parsed_path)
        return self._pack(ref[0])[0] >= ref[1] + ref[2]

    def has_sidecar(self, parsed_path: str) -> bool:
        from chitragupta.engine.index.source import is_regular, sidecar_path

        ref = self._ref(parsed_path)
        if ref is not None and self._pack(ref[0])[2] == "-":
            return False
        return is_regular(sidecar_path(self.root / parsed_path))

    def packed_alone(self, parsed_path: str) -> str | None:
        """``read_text`` of a packed text that ``has_text`` and has no sidecar (its pack has none beside
        it): what ``_input`` asks of nearly every row of an imported corpus, with the reference split and
        the pack looked up once; None for any other text (asked about as before)."""
        got = self.kept.pop(parsed_path, None)
        if got is not None:  # read already in a stretch (as this reads it: the same checks, the same text)
            return got[0]
        ref = self._ref(parsed_path)
        if ref is None:
            return None
        size, _ino, side = self._pack(ref[0])
        if side != "-" or size < ref[1] + ref[2]:
            return None
        return self._read_ref(ref)

    def read_text(self, parsed_path: str) -> str:
        """``engine.index.source.read_text`` of the text (decoded with errors="replace"; "" when it
        cannot be read)."""
        ref = self._ref(parsed_path)
        if ref is None:
            from chitragupta.engine.index.source import read_text

            return read_text(self.root / parsed_path)
        return self._read_ref(ref)

    def _read_ref(self, ref: tuple) -> str:
        pack, offset, length = ref
        got = self._fds.get(pack)
        if got is None:
            import stat as st_

            fd, size = -1, -1
            try:
                fd = os.open(self.root / pack, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
                st = os.fstat(fd)
                if not st_.S_ISREG(st.st_mode):  # a FIFO is never waited on
                    os.close(fd)
                    fd = -1
                else:
                    os.set_blocking(fd, True)
                    size = st.st_size
            except OSError:
                if fd >= 0:
                    os.close(fd)
                fd = -1
            got = self._fds[pack] = (fd, size)
        fd, size = got
        if fd < 0 or size < offset + length:
            return ""
        try:
            parts, pos, left = [], offset, length
            while left:
                b = os.pread(fd, left, pos)
                if not b:
                    return ""
                parts.append(b)
                pos += len(b)
                left -= len(b)
        except OSError:
            return ""
        return (parts[0] if len(parts) == 1 else b"".join(parts)).decode("utf-8", errors="replace")


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
    from chitragupta.files import FileRefused, read_limited

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


_MAGIC = b"chitragupta unlocated 2\n"
_REC = None  # the record's numpy dtype, made when first needed (numpy is not imported with the package)


def _rec_dtype():
    global _REC
    if _REC is None:
        import numpy as np

        _REC = np.dtype([("key", "<u8"), ("stamp", "<u8"), ("fp", "<u8", (2,))])
    return _REC


def _h64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _key_hash(name: str, citekey: str) -> int:
    return _h64(f"{name}\x00{citekey}")


def _fp_pair(fp: str) -> tuple[int, int]:
    try:
        if len(fp) == 32:
            return int(fp[:16], 16), int(fp[16:], 16)
    except ValueError:
        pass
    return 0, 0  # not a fingerprint this code writes: never equal to one (the text is read again)


def _fp_text(pair) -> str:
    return f"{int(pair[0]):016x}{int(pair[1]):016x}"


class _Unlocated:
    """The sources stored without a reference list, as the file ``unlocated.idx`` holds them (the module
    docstring): records (key, stamp, fp), sorted by key, where key is a 64-bit hash of the source's file
    name and citekey, stamp one of its stamp, fp its fingerprint's 128 bits."""

    def __init__(self, recs=None):
        import numpy as np

        self.recs = np.zeros(0, _rec_dtype()) if recs is None else recs

    def __len__(self) -> int:
        return len(self.recs)

    def find(self, keys):
        """Each key's record number, or -1."""
        import numpy as np

        keys = np.asarray(keys, dtype=np.uint64)
        if not len(self.recs):
            return np.full(len(keys), -1, dtype=np.int64)
        at = np.searchsorted(self.recs["key"], keys)
        at[at >= len(self.recs)] = 0
        return np.where(self.recs["key"][at] == keys, at, -1)

    def get(self, name: str, citekey: str) -> tuple[int, str] | None:
        """(stamp hash, fingerprint) of one source, or None."""
        j = int(self.find([_key_hash(name, citekey)])[0])
        if j < 0:
            return None
        return int(self.recs["stamp"][j]), _fp_text(self.recs["fp"][j])

    def to_bytes(self) -> bytes:
        head = json.dumps({"rules": RULES, "count": len(self.recs), "record": "key:u64le stamp:u64le fp:u128"})
        return _MAGIC + head.encode() + b"\n" + self.recs.tobytes()


def _read_unlocated(folder: Path, check: bool = True) -> "_Unlocated | None":
    """The sources stored without a list; None when the file is missing or of other rules; ValueError
    when it is unreadable or not of the shape. An older file (JSON, ``{"rules", "sources": {name:
    [citekey, stamp, fingerprint]}}``) is read too (``_Unlocated.legacy`` set: the build writes it anew).
    ``check``: make sure the records are in key order (a reader of one record skips it)."""
    import numpy as np

    from chitragupta.files import FileRefused, read_limited

    path = folder / UNLOCATED
    try:
        raw = read_limited(path, 1 << 38)
    except FileNotFoundError:
        return None
    except (OSError, FileRefused):
        raise ValueError("not a readable file") from None
    if raw[:1] == b"{":
        return _legacy_unlocated(raw)
    bad = ValueError("not a list of sources without a reference list")
    if not raw.startswith(_MAGIC):
        raise bad
    nl = raw.find(b"\n", len(_MAGIC))
    try:
        head = json.loads(raw[len(_MAGIC):nl]) if nl > 0 else None
    except (ValueError, UnicodeDecodeError):
        head = None
    if not isinstance(head, dict) or not isinstance(head.get("count"), int) or head["count"] < 0:
        raise bad
    dt = _rec_dtype()
    body = memoryview(raw)[nl + 1:]
    if len(body) != head["count"] * dt.itemsize:
        raise bad
    if head.get("rules") != RULES:
        return None
    recs = np.frombuffer(body, dtype=dt)
    if check and len(recs) > 1 and not bool(np.all(recs["key"][1:] >= recs["key"][:-1])):
        raise bad
    return _Unlocated(recs)


def _legacy_unlocated(raw: bytes) -> "_Unlocated | None":
    import numpy as np

    bad = ValueError("not a list of sources without a reference list")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError("not a readable JSON file") from None
    if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
        raise bad
    if data.get("rules") != RULES:
        return None
    recs = np.zeros(len(data["sources"]), _rec_dtype())
    for j, (name, rec) in enumerate(data["sources"].items()):
        if not (isinstance(rec, list) and len(rec) == 3 and all(isinstance(x, str) for x in rec)):
            raise bad
        recs[j] = (_key_hash(name, rec[0]), _h64(rec[1]), _fp_pair(rec[2]))
    recs.sort(order="key", kind="stable")
    got = _Unlocated(recs)
    got.legacy = True
    return got


def _unlocated_or_empty(folder: Path) -> "_Unlocated":
    try:
        return _read_unlocated(folder, check=False) or _Unlocated()
    except ValueError:
        return _Unlocated()


def _present(folder: Path) -> set[str]:
    """The ``.json`` names in ``folder`` (one scan, instead of an open per source that has no file)."""
    try:
        return {e.name for e in os.scandir(folder) if e.name.endswith(".json")}
    except OSError:
        return set()


def _entries(data: dict) -> list[Entry]:
    return [Entry.from_json(d) for d in data["entries"]]


_PAGE = 1 << 16  # ledger rows read at a time


def _row_pages(ws, size: int | None = None):
    """The ledger's (citekey, status, parsed_path), in citekey order, a list of at most ``size``
    (``_PAGE``) at a time (a build holds one page, never every row)."""
    from chitragupta.engine.library.ledger import Ledger

    size = size or _PAGE
    with Ledger(ws.ledger_path, create=False) as ledger:
        after = None
        while True:
            page = ledger.index_page(after, size)
            if not page:
                return
            yield page
            after = page[-1][0]


def _row_count(ws) -> int:
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws.ledger_path, create=False) as ledger:
        return ledger.count()


def references_of(workspace, citekey: str) -> list[Entry] | None:
    """The parsed entries of ``citekey``'s reference list, in order; None when no list was located for it
    (no parsed text, no reference heading, an unknown citekey). Read from its artifact when that is
    current, else parsed from the text now (nothing written: a reader holds no lock)."""
    from chitragupta.engine.library.ledger import Ledger

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
        rec = _unlocated_or_empty(folder).get(name, citekey)
        if rec is not None and rec[0] == _h64(_stamp(workspace.root, parsed_path)):
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


class _Handover:
    """The entries a build of this process wrote, handed to ``all_references`` (``CitationGraph.open`` in
    the same process: a script, the API, a bench) instead of read back from their files: per file name,
    the file's (inode, size, mtime in ns) right after it was written, its citekey, fingerprint and the
    ``Entry`` list. A file whose stat is no longer that one (rewritten, removed) is read as before. At most
    ``MAX`` entries are held (a larger build hands over the first ones); the next build starts afresh."""

    MAX = 1 << 17
    last: "_Handover | None" = None

    def __init__(self, folder: Path):
        self.folder = str(folder)
        self.files: dict[str, tuple] = {}
        self.held = 0

    @classmethod
    def start(cls, folder: Path) -> "_Handover":
        _Handover.last = None  # what an earlier build held is let go before this one holds anything
        got = _Handover.last = cls(folder)
        return got

    def keep(self, file: str, citekey: str, fp: str, entries: list) -> None:
        if self.held + len(entries) > self.MAX:
            return
        try:
            st = os.stat(f"{self.folder}/{file}")
        except OSError:
            return
        self.files[file] = ((st.st_ino, st.st_size, st.st_mtime_ns), citekey, fp, entries)
        self.held += len(entries)

    @classmethod
    def of(cls, folder: Path) -> dict[str, tuple]:
        got = cls.last
        return got.files if got is not None and got.folder == str(folder) else {}

    @staticmethod
    def take(folder: Path, file: str, held: tuple, citekey: str):
        """The entries held for ``file`` when it is still the file written and of ``citekey``, else None."""
        if held[1] != citekey:
            return None
        try:
            st = os.stat(folder / file)
        except OSError:
            return None
        return held[3] if (st.st_ino, st.st_size, st.st_mtime_ns) == held[0] else None


def all_references(workspace, fingerprints: dict | None = None) -> dict[str, list[Entry]]:
    """citekey -> entries of every ledger source whose artifact holds a located list (as ``index`` last
    built them; a missing or unreadable artifact is left out). ``fingerprints``: a dict given is filled
    with citekey -> the artifact's fingerprint, for each source returned. The files this process's last
    build wrote are not read back while they are as written (``_Handover``)."""
    folder = refs_folder(workspace)
    out: dict[str, list[Entry]] = {}
    present = _present(folder)
    if not present:  # no source has a list: the ledger is not read
        return out
    handed = _Handover.of(folder)
    for key, status, parsed_path in (r for page in _row_pages(workspace) for r in page):
        if status != "parsed":
            continue
        file = f"{_name(key, parsed_path)}.json"
        if file not in present:
            continue
        held = handed.get(file)
        if held is not None:
            got = _Handover.take(folder, file, held, key)
            if got is not None:
                out[key] = list(got)
                if fingerprints is not None:
                    fingerprints[key] = held[2]
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


_CHUNK = 1024  # sources a worker parses per task, at most (fewer when there are few: see ``_parse_all``)


def _parsed(root: Path, parsed_path: str | None, old_fp: str | None, texts: "_Texts | None" = None) -> tuple:
    """(fingerprint, located, entries as JSON, notes) of one source's list; (fingerprint, None, None, None)
    when its text's fingerprint is ``old_fp`` (the stored file is current: nothing parsed);
    (fingerprint, False, None, None) when it has no list."""
    inp = _input(root, parsed_path, texts)
    if old_fp is not None and inp.fingerprint == old_fp:
        return inp.fingerprint, None, None, None
    if inp.text is None:
        return inp.fingerprint, False, None, None
    entries, notes = _parse(inp)
    return inp.fingerprint, True, entries, notes


def _parse_chunk(root: Path, items: list) -> list:
    """``_parsed`` of a worker's chunk, the entries as their JSON dicts (made here, in the worker: the
    parent writes them as they are and hands nothing over)."""
    texts = _Texts(root)
    try:
        out = []
        for pp, fp in items:
            got = _parsed(root, pp, fp, texts)
            if got[2] is not None:
                got = (got[0], got[1], _AsJson([vars(e) for e in got[2]]), got[3])  # (see ``_build``)
            out.append(got)
        return out
    finally:
        texts.close()


class _AsJson(list):
    """A list of entries already as ``Entry.to_json`` dicts (a worker's)."""


POOL_FROM_BYTES = 8 << 20  # text below which a build parses in this process whatever ``jobs`` is


def _small(root: Path, items: list, limit: int) -> bool:
    """Whether the texts of ``items`` hold fewer than ``limit`` bytes (a packed reference's length, a file's
    size), counted until the sum reaches it: a process pool's start (~0.1-0.2 s) costs more than it saves
    on a library of abstracts (11,429 short texts: ~0.2 s of work in all)."""
    from chitragupta.engine.library.texts import text_size

    total = 0
    for pp, _fp in items:
        total += text_size(root / pp)  # (a packed reference with the root before it is one too)
        if total >= limit:
            return False
    return True


def _parse_all(root: Path, items: list, jobs: int, pool: dict, texts: "_Texts"):
    """``_parsed`` of each (parsed path, old fingerprint) of ``items``, in order: the packed texts that
    cannot hold a list told here first (``_no_list``), the others by ``_parse_some``."""
    quick = _no_list(root, items, texts)
    if not quick:
        yield from _parse_some(root, items, jobs, pool, texts)
        return
    rest = _parse_some(root, [it for j, it in enumerate(items) if j not in quick], jobs, pool, texts)
    for j, (_pp, old_fp) in enumerate(items):
        fp = quick.get(j)
        if fp is None:
            yield next(rest)
        else:  # (as ``_parsed``: None when the stored record is current)
            yield fp, (None if fp == old_fp else False), None, None


_STRETCH_BYTES = 1 << 24  # the most one stretch reads


def _read_packed(root: Path, paths: list, texts: "_Texts") -> dict[int, tuple]:
    """j -> (text, (pack, offset, length), the pack's inode) for each ``paths[j]`` that is a packed text
    alone in its pack (no sidecar can stand beside it: what ``_Texts.packed_alone`` reads), read a stretch
    of texts at a time (one ``pread`` of texts that follow one another in a pack, decoded once when it is
    ASCII), with one reference split a text. A text left out (another kind, a pack that reads short) is
    read by ``_input`` as before. The texts read are kept in ``texts`` (``_Texts.keep``): a later call of
    the same page, and ``_Texts.packed_alone``, take them from there."""
    from chitragupta.engine.library.texts import read_stretches, split_ref
    from chitragupta.engine.index.source import _inside_content

    refs = []  # (j, pack, offset, length, inode), in order
    out: dict[int, tuple] = {}
    kept = texts.kept
    for j, pp in enumerate(paths):
        got = kept.get(pp)
        if got is not None:
            out[j] = got
            continue
        ref = split_ref(pp)
        if ref is None or not _inside_content(pp):
            continue
        size, ino, side = texts._pack(ref[0])
        if side == "-" and size >= ref[1] + ref[2]:
            refs.append((j, *ref, ino))
    at = {j: (pack, off, length, ino) for j, pack, off, length, ino in refs}
    read = read_stretches([(j, str(root / pack), off, length) for j, pack, off, length, _ino in refs],
                          most=_STRETCH_BYTES)
    for j, text in read.items():
        pack, off, length, ino = at[j]
        out[j] = got = text, (pack, off, length), ino
        texts.keep(paths[j], got)
    return out


def _no_list(root: Path, items: list, texts: "_Texts") -> dict[int, str]:
    """j -> the fingerprint of ``items[j]``'s text, for each packed text alone in its pack
    (``_read_packed``) that cannot hold a reference heading (``may_have_heading``): what ``_parsed`` finds
    (no list) for most of an imported corpus. The others go through ``_parsed`` as before."""
    paths = [pp for pp, _fp in items]
    got = _read_packed(root, paths, texts)
    out = {j: _fingerprint(text) for j, (text, _ref, _ino) in got.items() if not may_have_heading(text)}
    for j in out:  # (not read again: told here)
        texts.kept.pop(paths[j], None)
    return out


def _quick_page(root: Path, page: list, base: int, texts: "_Texts", present: set, old: "_Unlocated",
                progress: Progress | None, n: int):
    """The records (``_rec_dtype``) of a ledger page whose every parsed row is a packed text alone in its
    pack that cannot hold a reference heading, none of them stored before (no file, no record: a first
    build, or one after ``content/refs`` was removed): what ``_build``'s loop writes for each (parsed, no
    list), made with the same stamp, name and fingerprint, a row at a time without the loop's lookups
    and generators. None when a row is of any other kind (the loop then does the page)."""
    if len(old):
        return None
    import numpy as np

    rows = [(i, key, pp) for i, (key, status, pp) in enumerate(page, start=base) if status == "parsed" and pp]
    got = _read_packed(root, [pp for _i, _k, pp in rows], texts)
    if len(got) != len(rows):
        return None
    from chitragupta.engine.library.workspace import safe_name

    blake = hashlib.blake2b
    prefix = blake(f"rules={RULES}\n".encode(), digest_size=16)  # (``_fingerprint``'s first bytes)
    keys, stamps, fps = [], [], []
    for j, (_i, key, pp) in enumerate(rows):
        text, ref, ino = got[j]
        name = safe_name(key)  # (``_name`` of a packed reference: its last part ends in digits, not ".txt")
        if f"{name}.json" in present or may_have_heading(text):
            return None
        keys.append(blake(f"{name}\x00{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest())
        stamp = f"{RULES}|{pp}|{ref[2]}:pack:{ino}|-"  # (``_Texts.stamp`` of such a text)
        stamps.append(blake(stamp.encode("utf-8", "surrogatepass"), digest_size=8).digest())
        h = prefix.copy()
        h.update(text.encode("utf-8", "surrogatepass"))
        fps.append(h.digest())
    if progress is not None:  # (where the loop says how far it is)
        for done in range(2000, len(rows), 2000):
            progress(rows[done][0], n)
    part = np.zeros(len(rows), _rec_dtype())
    part["key"] = np.frombuffer(b"".join(keys), dtype="<u8")  # (``_h64``: the digest little-endian)
    part["stamp"] = np.frombuffer(b"".join(stamps), dtype="<u8")
    part["fp"] = np.frombuffer(b"".join(fps), dtype=">u8").reshape(-1, 2)  # (``_fp_pair``: each half's hex)
    return part


def _parse_some(root: Path, items: list, jobs: int, pool: dict, texts: "_Texts"):
    """``_parsed`` of each (parsed path, old fingerprint) of ``items``, in order: here, or by ``jobs``
    worker processes (``engine.workers.process_pool``, started on the first call that has work for two
    chunks and more than ``POOL_FROM_BYTES`` of text, and kept in ``pool`` for the build's later calls) a
    chunk at a time, at most ``2 * jobs`` chunks waiting. A chunk is ``_CHUNK`` sources, or fewer so that
    each worker has 4 at least. The files written are the same either way."""
    size = max(1, min(_CHUNK, len(items) // (4 * max(jobs, 1))))
    chunks = [items[a:a + size] for a in range(0, len(items), size)]
    if jobs <= 1 or len(chunks) <= 1 or (_small(root, items, POOL_FROM_BYTES) if "ex" not in pool else False):
        for pp, fp in items:
            yield _parsed(root, pp, fp, texts)
        return
    if "ex" not in pool:
        from chitragupta.engine.library.workers import process_pool

        pool["cm"] = process_pool(jobs)
        pool["ex"] = pool["cm"].__enter__()
    ex = pool["ex"]
    pending, nxt = [], 0
    for _ in chunks:
        while nxt < len(chunks) and len(pending) < 2 * jobs:
            pending.append(ex.submit(_parse_chunk, root, chunks[nxt]))
            nxt += 1
        yield from pending.pop(0).result()


def _build(workspace, progress: Progress | None, jobs: int = 1) -> dict:
    import numpy as np

    from chitragupta.files import fsync_dir, replace_in_folder

    built = kept = none = total = removed = 0
    folder = refs_folder(workspace)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        from chitragupta.errors import WorkspaceError

        raise WorkspaceError(f"{folder}: cannot keep the reference entries there ({err.strerror or err}); "
                             "move what stands there away") from None
    root = workspace.root
    texts = _Texts(root)
    wanted: set[str] = set()
    n = _row_count(workspace)
    notes: list[str] = []  # in ledger order: a row's notes are added when it is done
    tail_notes: list[str] = []
    present = _present(folder)
    try:
        unlocated_old = _read_unlocated(folder)
    except ValueError as err:
        tail_notes.append(f"{REFS_DIR}/{UNLOCATED} {err}; rebuilt")
        unlocated_old = None
    rewrite = unlocated_old is not None and getattr(unlocated_old, "legacy", False)
    if unlocated_old is None:
        unlocated_old = _Unlocated()
    dt = _rec_dtype()
    new_parts: list = []  # arrays of the records of the sources without a list, a page at a time
    pool: dict = {}
    base = 0
    handover = _Handover.start(folder)
    try:
        for page in _row_pages(workspace):
            if progress is not None:
                progress(base, n)
            quick = _quick_page(root, page, base, texts, present, unlocated_old, progress, n)
            if quick is not None:  # a page of packed texts without a list, none stored before
                texts.forget()
                new_parts.append(quick)
                built += len(quick)
                none += len(quick)
                base += len(page)
                continue
            # the rows to look at, and their hashes looked up in the old list of sources without one
            rows = []
            for i, (key, status, parsed_path) in enumerate(page, start=base):
                if status != "parsed" or not parsed_path:
                    continue
                name = _name(key, parsed_path)
                rows.append((i, key, parsed_path, name, texts.stamp(parsed_path)))
            base += len(page)
            hkeys = np.fromiter((_key_hash(r[3], r[1]) for r in rows), dtype=np.uint64, count=len(rows))
            found = unlocated_old.find(hkeys)
            # this page's records of sources without a list: new ones as four columns, kept ones by their
            # position in the old list (gathered at the page's end; the whole list is sorted by key)
            new_k: list[int] = []
            new_s: list[int] = []
            new_f: list[tuple[int, int]] = []
            old_js: list[int] = []
            old_stamps = unlocated_old.recs["stamp"][found].tolist() if len(unlocated_old) else None
            todo: list[tuple] = []  # (row, citekey, name, stamp, old file, key hash, parsed path)
            for x, ((i, key, parsed_path, name, stamp), hk, j) in enumerate(zip(rows, hkeys.tolist(),
                                                                                 found.tolist())):
                file = f"{name}.json"
                old = None
                if file in present:
                    try:
                        old = _read(folder / file)
                    except ValueError as err:
                        notes.append(f"{key}: {REFS_DIR}/{file} {err}; rebuilt")
                    if old is not None and (old.get("citekey") != key or old.get("rules") != RULES):
                        old = None
                if old is not None and old.get("stamp") == stamp:
                    kept += 1
                    if old.get("located", True):
                        total += len(old["entries"])
                        wanted.add(file)
                    else:  # a file of an older build that wrote one per source without a list
                        none += 1
                        new_k.append(hk), new_s.append(_h64(stamp)), new_f.append(_fp_pair(str(old["fingerprint"])))
                    continue
                if old is None and j >= 0:
                    if old_stamps[x] == _h64(stamp):
                        kept += 1
                        none += 1
                        old_js.append(j)
                        continue
                    old = {"fingerprint": _fp_text(unlocated_old.recs[j]["fp"]), "located": False, "entries": [],
                           "notes": []}
                todo.append((i, key, name, stamp, old, hk, parsed_path))
            items = [(t[6], None if t[4] is None else t[4].get("fingerprint")) for t in todo]
            done = 0
            for (i, key, name, stamp, old, hk, _pp), (fp, located, parsed, list_notes) in zip(
                    todo, _parse_all(root, items, jobs, pool, texts)):
                if progress is not None and done % 2000 == 0 and done:
                    progress(i, n)
                done += 1
                if located is None:  # the text is as it was: the stored entries kept, the file restamped
                    entries_json, list_notes, located = old["entries"], old.get("notes", []), old.get("located", True)
                    parsed = None
                    kept += 1
                    fresh = False  # (dicts read back: written by the general encoder)
                elif isinstance(parsed, _AsJson):  # a worker's: written as they are, not handed over
                    entries_json, parsed = list(parsed), None
                    notes.extend(f"{key}: {note}" for note in list_notes or ())
                    built += 1
                    fresh = True
                else:
                    # each entry's fields as they stand (``Entry.to_json`` less its copy: the authors' tuple
                    # is written as the same JSON list)
                    entries_json = None if parsed is None else [vars(e) for e in parsed]
                    notes.extend(f"{key}: {note}" for note in list_notes or ())
                    built += 1
                    fresh = entries_json is not None
                if not located:
                    none += 1
                    new_k.append(hk), new_s.append(_h64(stamp)), new_f.append(_fp_pair(fp))
                    continue
                total += len(entries_json)
                wanted.add(f"{name}.json")
                if fresh:  # entries as ``vars`` of an Entry: their JSON made field by field (the same bytes)
                    body = _source_json(key, stamp, fp, located, entries_json, list_notes)
                else:
                    body = _DUMPS({"rules": RULES, "citekey": key, "stamp": stamp, "fingerprint": fp,
                                   "located": located, "entries": entries_json, "notes": list_notes})
                replace_in_folder(str(folder), f"{name}.json", body.encode("utf-8"), "refs")
                if parsed is not None:
                    handover.keep(f"{name}.json", key, fp, parsed)
            if new_k:
                part = np.zeros(len(new_k), dt)
                part["key"] = np.fromiter(new_k, dtype=np.uint64, count=len(new_k))
                part["stamp"] = np.fromiter(new_s, dtype=np.uint64, count=len(new_s))
                part["fp"] = np.fromiter((h for pair in new_f for h in pair), dtype=np.uint64,
                                         count=2 * len(new_f)).reshape(-1, 2)
                new_parts.append(part)
            if old_js:
                new_parts.append(unlocated_old.recs[np.asarray(old_js, dtype=np.int64)])
            texts.forget()
    finally:
        texts.close()
        if "cm" in pool:
            pool["cm"].__exit__(None, None, None)
    recs = np.concatenate(new_parts) if new_parts else np.zeros(0, dt)
    del new_parts
    if len(recs):
        recs = recs[np.argsort(recs["key"], kind="stable")]
    unlocated = _Unlocated(recs)
    if len(unlocated):
        if rewrite or len(unlocated_old) != len(unlocated) or unlocated_old.recs.tobytes() != recs.tobytes():
            replace_in_folder(str(folder), UNLOCATED, unlocated.to_bytes(), "refs")
    elif (folder / UNLOCATED).exists():
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
            "removed": removed, "notes": notes + tail_notes}


# a source's file as ``json.dumps(data, ensure_ascii=False, separators=(",", ":"))`` writes it, without the
# check for circular references (the data is a tree of fresh lists and dicts: the same bytes)
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_ENC = json.encoder.encode_basestring  # the string encoder ``_DUMPS`` uses (ensure_ascii=False; C where built)


def _source_json(key: str, stamp: str, fp: str, located, entries: list, notes) -> str:
    """``_DUMPS`` of a source's data (rules, citekey, stamp, fingerprint, located, entries, notes), each
    entry a ``vars`` of an ``Entry`` (its nine fields in their order, as ``_parse_entry``, ``from_json`` and
    the dataclass's own ``__init__`` set them; the authors a tuple or list of strings, the year an int or
    None): the entries' JSON written field by field with the encoder's own string function (the general
    encoder looks at each key and value's type; these are known). Pinned to ``_DUMPS`` in
    ``tests/engine/citations/test_store_cost.py``."""
    enc = _ENC
    parts = []
    for d in entries:
        y, t, v, o, x, u = d["year"], d["title"], d["venue"], d["doi"], d["arxiv"], d["url"]
        parts.append(f'{{"n":{d["n"]},"text":{enc(d["text"])},"authors":[{",".join(map(enc, d["authors"]))}],'
                     f'"year":{"null" if y is None else y},"title":{"null" if t is None else enc(t)},'
                     f'"venue":{"null" if v is None else enc(v)},"doi":{"null" if o is None else enc(o)},'
                     f'"arxiv":{"null" if x is None else enc(x)},"url":{"null" if u is None else enc(u)}}}')
    head = _DUMPS({"rules": RULES, "citekey": key, "stamp": stamp, "fingerprint": fp, "located": located})
    return f'{head[:-1]},"entries":[{",".join(parts)}],"notes":{_DUMPS(notes)}}}'


def summary_line(report: dict) -> str:
    """``build_references``'s report as the one line ``index`` prints."""
    return (f"references: {report['sources']} sources, {report['entries']} entries ({report['built']} parsed, "
            f"{report['kept']} unchanged, {report['none']} without a reference list"
            + (f", {report['removed']} stale removed" if report["removed"] else "") + ")")
