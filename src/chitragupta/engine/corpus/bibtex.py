"""Reading a BibTeX file into entries, with line-numbered problems instead of exceptions.

Parsed with bibtexparser (v2) and its LaTeX decoding; a malformed or duplicate entry is reported with
its line number and skipped, and the rest is read.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from chitragupta.errors import CorpusError

__all__ = ["BibEntry", "read_bibtex", "file_field_paths", "MALFORMED"]

MALFORMED = "malformed entry skipped"  # the problem text of a block the parser could not read


@dataclass(frozen=True)
class BibEntry:
    citekey: str
    title: str
    abstract: str | None
    keywords: tuple[str, ...]
    files: tuple[Path, ...]  # candidate documents from the ``file`` field, in the order given
    line: int  # 1-based line of the entry in the .bib


_WS = re.compile(r"\s+")
# JabRef/Mendeley write ``description:path:type``; Windows drive colons are escaped as ``\:``.
_JABREF = re.compile(r"^(?P<desc>[^:]*):(?P<path>.*):(?P<type>[A-Za-z0-9/+.-]*)$")


def _clean(value: str) -> str:
    """LaTeX-decoded field text without the grouping braces, whitespace collapsed."""
    return _WS.sub(" ", value.replace("{", "").replace("}", "")).strip()


def file_field_paths(value: str, base: Path) -> tuple[Path, ...]:
    """The document paths a ``file`` field names, relative ones resolved against ``base``.

    Handles plain paths, ``;``-separated lists (Zotero, JabRef) and ``description:path:type`` triples.
    """
    out = []
    for part in value.split(";"):
        part = part.strip()
        if not part:
            continue
        unescaped = part.replace("\\:", "\x00")
        m = _JABREF.match(unescaped)
        raw = m.group("path") if m else unescaped
        raw = raw.replace("\x00", ":").replace("\\\\", "\\").strip()
        if not raw:
            continue
        p = Path(raw).expanduser()
        out.append(p if p.is_absolute() else base / p)
    return tuple(out)


def _keywords(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(k for k in (_clean(x) for x in re.split(r"[;,]", value)) if k)


@contextmanager
def _quiet_parser():
    # bibtexparser logs each failed block; we report them ourselves, with line numbers.
    lg = logging.getLogger("bibtexparser")
    old = lg.level
    lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        lg.setLevel(old)


def read_bibtex(path: Path) -> tuple[list[BibEntry], list[str]]:
    """Entries of ``path`` in file order, and one message per skipped or doubtful block.

    Raises CorpusError only when the file cannot be read at all.
    """
    try:
        import bibtexparser
        from bibtexparser import middlewares as mw
        from bibtexparser import model
    except ImportError as err:
        raise CorpusError("reading BibTeX needs bibtexparser>=2 (pip install 'bibtexparser>=2.0.0b7')") from err
    try:
        data = path.read_bytes()
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: bibliography not found (set [corpus].bibliography or create it)") from err
    except OSError as err:
        raise CorpusError(f"{path}: cannot read bibliography: {err}") from err
    problems: list[str] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        problems.append(f"{path}:{line}: not UTF-8; undecodable bytes replaced with U+FFFD")
        text = data.decode("utf-8", errors="replace")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        problems.append(f"{path}:{line}: NUL bytes removed")
        text = text.replace("\x00", "")
    with _quiet_parser():
        try:
            lib = bibtexparser.parse_string(text, append_middleware=[mw.LatexDecodingMiddleware()])
        except Exception as err:  # the parser's own failure on pathological input
            raise CorpusError(f"{path}: BibTeX parser failed: {err}") from err
    for block in lib.failed_blocks:
        line = (block.start_line or 0) + 1
        if isinstance(block, model.DuplicateBlockKeyBlock):
            problems.append(f"{path}:{line}: duplicate citekey {block.key!r}; the first entry is kept, this one skipped")
        else:
            err = getattr(block, "error", None)
            reason = getattr(err, "abort_reason", None) or str(err) or type(err).__name__
            problems.append(f"{path}:{line}: {MALFORMED}: {reason}")
    entries = []
    base = path.parent
    for e in lib.entries:
        fields = {k.lower(): v.value for k, v in e.fields_dict.items()}
        line = (e.start_line or 0) + 1
        key = (e.key or "").strip()
        if not key:
            problems.append(f"{path}:{line}: entry without a citekey skipped")
            continue

        def text_field(name):
            v = fields.get(name)
            return _clean(v) if isinstance(v, str) and v.strip() else None

        entries.append(BibEntry(
            citekey=key,
            title=text_field("title") or "",
            abstract=text_field("abstract"),
            keywords=_keywords(fields.get("keywords") if isinstance(fields.get("keywords"), str) else None),
            files=file_field_paths(fields["file"], base) if isinstance(fields.get("file"), str) else (),
            line=line,
        ))
    return entries, problems
