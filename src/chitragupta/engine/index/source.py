"""What text a ledger row contributes to the index, and the fingerprint that says when it changed.

A document contributes its title and its parsed text (title + newline + text). A row the ledger calls
``parsed`` whose ``.txt`` is gone contributes its title alone and is flagged, so the count can be
reported even when a search is served wholly from the cache. Rows that are not parsed (``no-file``,
``failed``) are citable sources too and contribute their title.

The fingerprint is cheap by design -- title, parsed_path, ledger status, the parsed file's size and
mtime, and its sidecar's when there is one -- not the content. A packed text (``import``'s packs,
``chitragupta.engine.library.texts``: ``parsed_path`` is ``content/parsed/packs/<pack>#<offset>+<length>``)
is fingerprinted by that reference and its pack's inode, one ``stat`` per pack and none per row (packs
are append-only and never rewritten in place); a pack gone or shorter than the reference reads as
missing text (``FLAG_TEXT_MISSING``). A packed text has no sidecar; every reader here (``read_text``,
``plain_body``, ``load_body``, ``row_body``, ``has_text``, ``text_stamp``) takes the reference, relative
or made absolute, where it takes a file's path.

Only regular files are read: a FIFO, a device or a folder where a parsed ``.txt`` (or its sidecar) is
expected is treated as missing (the ``.txt``: ``FLAG_TEXT_MISSING``) and never opened, so it cannot hang
an index build or a snippet. Text without a sidecar has its reference list blanked by the plain-text rule
(``chitragupta.engine.text.refcut.plain_reference_span``; appendices after it stay): ``plain_body``.

One text path: ``load_body`` (and ``row_body``, the same from a ledger row's parsed path) is the one
function that applies the reference cut, the appendix rule, the hyphen join and the front-matter end to a
source's text, whether it came from pdftotext, docling or a JSONL import. The index, the snippets, the
embed stage (``chitragupta.enrich.chunking.document_text``) and topics all read what it returns; docling's
Markdown in ``content/docling/`` is read by none of them.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from chitragupta.engine.library.texts import PACKS_DIR, pack_stats, read_ref, split_ref

__all__ = ["RowView", "DocSource", "Body", "FLAG_TEXT_MISSING", "FLAG_NOT_PARSED", "FLAG_BAD_SIDECAR",
           "FLAG_NO_SIDECAR", "FLAG_HAS_ABSTRACT", "fingerprints", "read_text", "load_body", "plain_body",
           "row_body", "sidecar_path", "is_regular", "has_text", "text_stamp"]

FLAG_TEXT_MISSING = 1  # ledger says parsed, the .txt is gone: indexed on its title alone
FLAG_NOT_PARSED = 2  # no-file or failed: indexed on its title alone
FLAG_BAD_SIDECAR = 4  # a sidecar that is not the documented shape: indexed from its .txt, uncut
FLAG_NO_SIDECAR = 8  # parsed text without a sidecar (pdftotext): nothing cut, no passages
FLAG_HAS_ABSTRACT = 16  # the sidecar gave an abstract field

_PACKED = PACKS_DIR + "/"

RowView = tuple[str, str, str, "str | None"]  # (citekey, title, status, parsed_path)


class DocSource(NamedTuple):
    """Where one document's text is: its parsed file (an absolute path string, or None) and its flags.
    (A tuple with the path kept as a string: a million of them are made per full scan.)"""

    citekey: str
    title: str
    text_file: str | None
    flags: int
    # a packed text's (text_file, its pack's path, offset, length) as the scan parsed it; None: not told
    # (``tokenize_fast.packed_texts`` parses text_file where this is not told for the same text_file)
    ref: "tuple[str, str, int, int] | None" = None

    @property
    def text_path(self) -> Path | None:
        return None if self.text_file is None else Path(self.text_file)


def _stat(path: Path) -> tuple[int, int] | None:
    """(size, mtime_ns) of a regular file; None for anything else (missing, a FIFO, a device, a folder)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_size, st.st_mtime_ns)


def is_regular(path: "Path | str") -> bool:
    """Whether ``path`` is a regular file (symlinks followed), found without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def has_text(path: "Path | str") -> bool:
    """Whether ``path`` -- a parsed file, or a packed reference (``engine.library.texts``) -- has a text to
    read: a regular file, or a pack that holds the whole reference."""
    ref = split_ref(path)
    if ref is None:
        return is_regular(path)
    try:
        st = os.stat(ref[0])
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size >= ref[1] + ref[2]


def text_stamp(path: "Path | str") -> str:
    """What changes when the text at ``path`` may have, for a cache of what was made from it: a file's
    size and mtime; a packed reference's length and its pack's inode (packs are never rewritten in place,
    so the reference names one text for the life of the pack); "-" when there is no text there."""
    ref = split_ref(path)
    try:
        if ref is None:
            st = os.stat(path)
            return f"{st.st_size}:{st.st_mtime_ns}"
        st = os.stat(ref[0])
    except (OSError, ValueError):
        return "-"
    if not stat.S_ISREG(st.st_mode) or st.st_size < ref[1] + ref[2]:
        return "-"
    return f"{ref[2]}:pack:{st.st_ino}"


def _inside_content(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) >= 2 and parts[0] == "content" and ".." not in parts and "" not in parts and "\\" not in rel


def sidecar_path(text_path: Path) -> Path:
    """The corpus layer's structural sidecar beside a parsed ``.txt``."""
    return text_path.with_suffix(".passages.json")


def _stat_folder(folder: Path) -> dict[str, tuple[int, int]]:
    """name -> (size, mtime_ns) of every regular file in ``folder`` (symlinks followed): one directory
    scan instead of a stat per expected name (most sidecars do not exist, and a failed stat costs as much
    as a good one). A FIFO, a device or a folder is left out: it reads as missing."""
    out = {}
    isreg = stat.S_ISREG
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    st = entry.stat()
                except OSError:
                    continue
                if isreg(st.st_mode):
                    out[entry.name] = (st.st_size, st.st_mtime_ns)
    except OSError:
        pass
    return out


# The scan hands a packed row's parsed reference on (``DocSource.ref``) only up to this many rows: it saves the
# readers a parse per row (~0.5 us; ms at NPL size), but costs ~150 B a row held through the build (a 1M build's
# peak RSS grew 158 MiB with it, past README's bound), where the parse is noise.
TELL_REF_ROWS = 1 << 17


def fingerprints(root: Path, rows: list[RowView]) -> tuple[np.ndarray, np.ndarray, list[DocSource]]:
    """Per row: a 128-bit fingerprint ((n, 2) uint64), flags ((n,) uint8) and its DocSource."""
    n = len(rows)
    digests: list[bytes] = []
    flags = bytearray(n)
    sources: list[DocSource] = []
    listing = _stat_folder(root / "content" / "parsed")
    packs = None  # name -> (size, inode) of every pack, read at the first packed row
    base = str(root) + os.sep
    blake = hashlib.blake2b
    tell = n <= TELL_REF_ROWS  # (DocSource.ref: see TELL_REF_ROWS)
    heads: dict[str, str] = {}
    formats: dict[int, str] = {}  # a pack's inode -> its rows' fingerprint text with the rest left to fill
    for i, (key, title, status, rel) in enumerate(rows):
        text_file = None
        st = side = None
        flag = 0
        if status == "parsed" and rel:
            # A ledger path is never followed outside content/ (a hand-edited ledger, say); checked on
            # the text of the path, since resolving every row would cost more than the stat itself.
            ref = None
            if rel.startswith(_PACKED):
                # ``split_ref`` inline (a call per row is most of its cost): "<pack>#<offset>+<length>",
                # both numbers ASCII digits, the pack's name checked once per pack
                head, sep, tail = rel.rpartition("#")
                a, plus, b = tail.partition("+")
                if sep and plus and a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
                    pack = heads.get(head)  # (its path as text_file gives it; "": not a pack's)
                    if pack is None:
                        pack = heads[head] = base + head if split_ref(rel) is not None else ""
                    if pack:
                        ref = (head, int(a), int(b))
            if ref is not None:
                # A packed text (engine.library.texts): the reference and its pack's inode, no stat of its
                # own; a pack gone, or shorter than the reference, reads as missing text.
                if packs is None:
                    packs = pack_stats(str(root / PACKS_DIR))
                got = packs.get(ref[0][len(_PACKED):])
                if got is not None and got[0] >= ref[1] + ref[2]:
                    # (the usual row: the fingerprint's text is the repr below, its pack's part made once)
                    fmt = formats.get(got[1])
                    if fmt is None:
                        fmt = formats[got[1]] = "(%r, %r, %r, " + repr(("pack", got[1])) + ", None)"
                    digests.append(blake((fmt % (title, rel, status)).encode("utf-8", "surrogatepass"),
                                         digest_size=16).digest())
                    flags[i] = FLAG_NO_SIDECAR
                    text_file = base + rel
                    told = (text_file, pack, ref[1], ref[2]) if tell else None
                    sources.append(DocSource(key, title, text_file, FLAG_NO_SIDECAR, told))
                    continue
            elif _inside_content(rel):
                folder, _, name = rel.rpartition("/")
                if folder == "content/parsed":
                    st = listing.get(name)
                    side = listing.get(name[:-4] + ".passages.json") if name.endswith(".txt") else None
                else:
                    st = _stat(root / rel)
                    side = _stat(sidecar_path(root / rel)) if st else None
            if st is None:
                flag = FLAG_TEXT_MISSING
            else:
                text_file = base + rel
                if side is None:
                    flag = FLAG_NO_SIDECAR
        elif status != "parsed":
            flag = FLAG_NOT_PARSED
        digests.append(blake(repr((title, rel, status, st, side)).encode("utf-8", "surrogatepass"),
                             digest_size=16).digest())
        flags[i] = flag
        sources.append(DocSource(key, title, text_file, flag))
    fps = np.frombuffer(b"".join(digests), dtype=np.uint64).reshape(n, 2).copy()
    return fps, np.frombuffer(bytes(flags), dtype=np.uint8).copy(), sources


@dataclass(frozen=True)
class Body:
    """The text a document contributes beyond its title, and where it came from.

    With a valid sidecar: its items outside the reference span (excluded labels left out), joined by
    blank lines, with ``spans`` giving each item's (start, end, item number, page) in that text. Without
    one: the ``.txt`` with its reference span blanked (``plain_body``: same length and lines as the file;
    ``spans`` empty; pages, if any, are form-feed separated). Either way words split by a line-end
    hyphen are joined (``chitragupta.engine.text.hyphens``, length-preserving). ``problem`` names a
    sidecar that could not be used (the ``.txt`` is then taken whole). ``front`` is where the front
    matter ends (``chitragupta.engine.text.front``); ``ref_words`` the words of the reference list cut
    and ``after_words`` the words after it that were kept (its appendices).
    """

    text: str
    spans: tuple[tuple[int, int, int, int | None], ...] = ()
    items: tuple[dict, ...] | None = None  # every sidecar item, uncut (the passage unit numbers them)
    problem: str | None = None
    abstract: str = ""  # the items under an "Abstract" heading, up to the next heading ("" if none)
    front: int = 0  # where the front matter (title block, authors) ends in ``text``
    ref_words: int = 0  # words of the reference list cut
    after_words: int = 0  # words after the reference list kept (appendices)
    references: str | None = None  # the reference list's text, its heading left out (``engine.text.entries``)
    running: frozenset = frozenset()  # the running titles of a plain text's pages, which the list's split drops

    @property
    def from_sidecar(self) -> bool:
        return self.items is not None

    def page_at(self, pos: int) -> int | None:
        """The page of character ``pos``: from the sidecar's items, or by counting form feeds."""
        if self.items is not None:
            for start, end, _item, page in self.spans:
                if pos < end + 2:
                    return page
            return None
        if "\f" in self.text:
            return self.text.count("\f", 0, pos) + 1
        return None


def load_body(text_path: Path | None, lists: bool = False) -> Body:
    """What a parsed document contributes after its title (see Body). Never raises for a bad sidecar.
    ``lists``: also the reference list's text (``Body.references``), for the index's pass that parses it."""
    if text_path is None:
        return Body("")
    if split_ref(text_path) is not None:  # a packed text has no sidecar
        return plain_body(text_path, lists=lists)
    side = sidecar_path(text_path)
    if is_regular(side):  # a FIFO or a device there is no sidecar, and is never opened
        from chitragupta.engine.text.sidecar import ITEM_SEPARATOR, SidecarError, read_sidecar
        from chitragupta.engine.text.front import items_front_end
        from chitragupta.engine.text.hyphens import document_words, join_hyphens
        from chitragupta.engine.text.refcut import kept_items, reference_span

        try:
            items = read_sidecar(side)
        except SidecarError as err:  # indexed uncut; its list read by the plain rule
            text = read_text(text_path)
            listed = _plain_list(text, _PLAIN_RULES or _plain_rules()) if lists else {}
            return Body(text, problem=str(err), **listed)
        span = reference_span(items)
        references = None
        if span is not None and lists:
            from chitragupta.engine.text.entries import items_list

            references = items_list(items, span)
        words = document_words("\n".join(it["text"] for _n, it in kept_items(items)))
        items = [dict(it, text=join_hyphens(it["text"], words)) if "-" in it["text"] else it for it in items]
        kept = kept_items(items)
        parts, spans, pos = [], [], 0
        for number, it in kept:
            if parts:
                pos += len(ITEM_SEPARATOR)
            spans.append((pos, pos + len(it["text"]), number, it["page"]))
            parts.append(it["text"])
            pos += len(it["text"])
        ref_words = after_words = 0
        if span is not None:
            ref_words = sum(len(it["text"].split()) for it in items[span[0]:span[1]])
            after_words = sum(len(it["text"].split()) for _n, it in kept if _n >= span[1])
        return Body(ITEM_SEPARATOR.join(parts), tuple(spans), tuple(items), abstract=abstract_of(kept),
                    front=items_front_end(kept, spans), ref_words=ref_words, after_words=after_words,
                    references=references)
    return plain_body(text_path, lists=lists)


def row_body(root: "Path | str", parsed_path: str | None, lists: bool = False) -> Body:
    """The text a ledger row is read by after its title -- what the document index tokenizes, snippets and
    evidence quote, the embed stage chunks and topics see -- whatever made its parsed text: the pdftotext
    backend (a ``.txt``), docling (a ``.txt`` and its sidecar) or a JSONL import (a ``.txt``). It is
    ``load_body`` of ``<root>/<parsed_path>``, found as the index's scan finds it (``fingerprints``): a
    ledger path outside ``content/``, or anything but a regular file there, gives ``Body("")``."""
    if not parsed_path or not _inside_content(parsed_path):
        return Body("")
    path = Path(root) / parsed_path
    return load_body(path, lists) if has_text(path) else Body("")


def plain_body(text_path: "Path | str | None", text: str | None = None, lists: bool = False) -> Body:
    """A parsed ``.txt`` without a sidecar: its reference span blanked (the plain-text rule of
    ``chitragupta.engine.text.refcut``) and line-end hyphens joined, both keeping every offset of the
    file. What the index reads for a ``FLAG_NO_SIDECAR`` document. ``text``: the file's text, read already;
    ``lists``: as for ``load_body``."""
    rules = _PLAIN_RULES or _plain_rules()
    plain_front_end, join_hyphens, blank, plain_reference_span = rules
    text = read_text(text_path) if text is None else text
    span = plain_reference_span(text)
    ref_words = after_words = 0
    listed = _plain_list(text, rules, span) if lists else {}
    if span is not None:
        ref_words, after_words = len(text[span[0]:span[1]].split()), len(text[span[1]:].split())
        text = blank(text, *span)
    return Body(join_hyphens(text), front=plain_front_end(text), ref_words=ref_words, after_words=after_words,
                **listed)


def _plain_list(text: str, rules: tuple, span=False) -> dict:
    """``Body``'s ``references`` and ``running`` of a plain text (``span``: its reference span, if found)."""
    from chitragupta.engine.text.entries import plain_list

    span = rules[3](text) if span is False else span
    if span is None:
        return {}
    references, running = plain_list(text, span)
    return {"references": references, "running": running}


_PLAIN_RULES: tuple = ()  # plain_body's functions, imported at its first call (an index build makes a million)


def _plain_rules() -> tuple:
    global _PLAIN_RULES
    from chitragupta.engine.text.front import plain_front_end
    from chitragupta.engine.text.hyphens import join_hyphens
    from chitragupta.engine.text.refcut import blank, plain_reference_span

    _PLAIN_RULES = (plain_front_end, join_hyphens, blank, plain_reference_span)
    return _PLAIN_RULES


_ABSTRACT = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?\s+|[ivx]+\.\s+)?abstract\s*[.:]?\s*$", re.IGNORECASE)
_HEADINGS = ("section_header", "title")


def abstract_of(kept: list[tuple[int, dict]]) -> str:
    """The abstract field: the items after the first "Abstract" heading up to the next heading."""
    out, inside = [], False
    for _n, it in kept:
        if it["label"] in _HEADINGS:
            if inside:
                break
            inside = bool(_ABSTRACT.match(it["text"]))
            continue
        if inside:
            out.append(it["text"])
    return "\n\n".join(out)


def read_text(path: "Path | str | None") -> str:
    """A parsed file's text, decoded with errors="replace" (the rule sync uses); "" for None, and for
    anything but a regular file (a FIFO is never opened: opening it would wait for a writer)."""
    if path is None:
        return ""
    if split_ref(path) is not None:
        data = read_ref(path)
        return "" if data is None else data.decode("utf-8", errors="replace")
    if not is_regular(path):
        return ""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped for something else since the check
            return ""
        os.set_blocking(fd, True)
        # os.read to the end, no buffered file object (a million small files per build): the size the
        # file has now and one byte more, so a file that grew since is read on, to the end
        data = os.read(fd, st.st_size + 1)
        if data:
            more = os.read(fd, 1 << 20)
            if more:
                parts = [data, more]
                while more:
                    more = os.read(fd, 1 << 20)
                    parts.append(more)
                data = b"".join(parts)
        return data.decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
