"""Reading a BibTeX file into entries, with line-numbered problems instead of exceptions.

bibtexparser (v2) only splits the file into blocks; everything after that is done here, lazily and in
linear time, and only for the fields the ledger keeps:

- **Values**: a field is a ``#`` concatenation of ``{braced}`` and ``"quoted"`` strings, numbers and
  ``@string`` macros (case-insensitive; ``jan`` .. ``dec`` are the month names, as in BibTeX). A macro's
  value is expanded where it is defined, from the macros defined above it; an entry may use any macro
  of the file; a later ``@string`` of the same name wins. An unknown macro stands for its own name. A
  value expanded past the size of the whole file (macros doubling each other) is cut, with a warning.
- **LaTeX**: ``title``, ``abstract``, ``keywords``, the venue and the first ``MAX_AUTHORS`` names (each
  split into family and given names first: braces protect) are LaTeX-decoded (pylatexenc, as
  bibtexparser's decoding middleware), text without LaTeX is not, and a long value is decoded piecewise,
  so the cost is linear in what is used. Other fields (the rest of a 100,000-name ``author``) are never
  decoded.
- **Metadata**: year, venue, type and DOI by the rules of ``metadata.py``; a year or DOI that cannot be
  read is a problem naming the line, the citekey and the field, and is left empty (the entry is kept).
- **Citekeys**: an empty key, or one holding white space or a control character (a TREC run line is split
  on white space, so such a source could be synced but never written to a run), skips the entry with a
  warning naming its line.
- **The ``file`` field** is read raw, never LaTeX-decoded (a path's ``~``, ``--``, ``%`` and ``''`` are
  characters of the name); see ``file_field_paths`` for the forms read.

A malformed or duplicate entry is reported with its line number and skipped, and the rest is read. The
bibliography must be a regular file: a folder, a FIFO or a device is refused by what it is, without being
opened for reading.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from chitragupta.engine.library.ids import bad_id
from chitragupta.engine.library.metadata import join_name, name_parts, norm_doi, split_and, venue_of, year_of
from chitragupta.engine.library.parsers import not_regular
from chitragupta.errors import CorpusError

__all__ = ["BibEntry", "read_bibtex", "file_field_paths", "file_attachments", "bad_citekey",
           "latex_to_text", "MALFORMED"]

MALFORMED = "malformed entry skipped"  # the problem text of a block the parser could not read


@dataclass(frozen=True)
class BibEntry:
    citekey: str
    title: str
    abstract: str | None
    keywords: tuple[str, ...]
    files: tuple[Path, ...]  # candidate documents from the ``file`` field: PDF attachments first
    line: int  # 1-based line of the entry in the .bib
    authors: tuple[str, ...] = ()  # the ``author`` field's names (``editor``'s when it has none), decoded
    year: int | None = None  # the ``year`` field's year (``metadata.year_of``), else a biblatex ``date``'s
    author_names: tuple[tuple[str, str], ...] = ()  # (family, given) of each of ``authors`` but "others"
    venue: str | None = None  # ``metadata.venue_of``, decoded
    type: str | None = None  # the entry type, lower case
    doi: str | None = None  # ``metadata.norm_doi``


_WS = re.compile(r"\s+")


# -- citekeys -----------------------------------------------------------------------------------

def bad_citekey(key: str) -> str | None:
    """Why ``key`` cannot be a citekey, or None when it can: the rule of a JSONL ``_id`` (``bad_id``):
    empty, white space (which splits a TREC run line), a control character, an invisible format character, or
    a lone surrogate."""
    return bad_id(key)


# -- values: strings, numbers, macros and # -----------------------------------------------------

_MONTHS = {m[:3]: m for m in ("january", "february", "march", "april", "may", "june", "july", "august",
                              "september", "october", "november", "december")}
_MONTHS = {k: v.capitalize() for k, v in _MONTHS.items()}
_WORD_END = re.compile(r'[\s#{}"]')


_BRACE_OR_ESCAPE = re.compile(r"[\\{}]")
_QUOTE_BRACE_OR_ESCAPE = re.compile(r'[\\{}"]')


def _closing(s: str, i: int) -> int:
    """The index of what closes the ``{`` or ``"`` at ``i``, or -1. A brace or quote after a backslash
    does not count (as in bibtexparser's splitter); inside a quoted string, quotes within braces do not
    close it."""
    quote = s[i] == '"'
    find = (_QUOTE_BRACE_OR_ESCAPE if quote else _BRACE_OR_ESCAPE).search
    depth = 0
    i += quote
    while True:
        m = find(s, i)
        if m is None:
            return -1
        i = m.start()
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            if quote:
                depth = max(0, depth - 1)
            else:
                depth -= 1
                if depth == 0:
                    return i
        elif depth == 0:  # a quote outside braces
            return i
        i += 1


class _Expander:
    """Field values with ``#`` concatenation and ``@string`` macros expanded, each at most ``limit``
    characters (expanding past it is cut and reported once per value)."""

    def __init__(self, limit: int):
        self.macros: dict[str, str] = {}
        self.limit = limit

    def expand(self, raw: str) -> tuple[str, bool]:
        """(value, cut): the text ``raw`` stands for, and whether it was cut at ``limit``."""
        s = raw.strip()
        if s[:1] == "{" and _closing(s, 0) == len(s) - 1:
            return s[1:-1], False  # the usual field, at the cost of one scan
        parts: list[str] = []
        size = 0
        i, n = 0, len(s)
        while i < n:
            c = s[i]
            if c.isspace() or c == "#":  # a missing ``#`` between two terms is read as if it were there
                i += 1
                continue
            if c == "{" or c == '"':
                j = _closing(s, i)
                if j < 0:  # unbalanced: the rest as it is
                    part, i = s[i:], n
                else:
                    part, i = s[i + 1:j], j + 1
            elif c == "}":  # a stray brace: kept as text
                part, i = c, i + 1
            else:
                m = _WORD_END.search(s, i)
                j = m.start() if m else n
                word = s[i:j]
                i = j
                if word.isdigit():
                    part = word
                else:
                    low = word.lower()
                    part = self.macros.get(low)
                    if part is None:
                        part = _MONTHS.get(low, word)
            parts.append(part)
            size += len(part)
            if size > self.limit:
                return "".join(parts)[: self.limit], True
        return "".join(parts), False


# -- LaTeX --------------------------------------------------------------------------------------

# What pylatexenc changes in text: a backslash, braces, math, comments, alignment, ties, ``--``, quotes.
_LATEX_SPECIAL = re.compile(r"[\\{}$%&~`]|''|--")
_PIECE = 2000  # a long value is decoded in pieces of about this many characters
_decoder = None


def _latex_decoder():
    global _decoder
    if _decoder is None:
        import pylatexenc.latex2text as l2t

        db = l2t.get_default_latex_context_db()
        db.add_context_category("chitragupta", prepend=True, macros=[l2t.MacroTextSpec("url", simplify_repl="%s")])
        _decoder = l2t.LatexNodes2Text(latex_context=db, keep_braced_groups=False, math_mode="verbatim")
    return _decoder


def _pieces(s: str) -> list[str]:
    """``s`` cut at white space that is outside braces, math and comments and does not follow a control
    word (``\\emph {x}``), into pieces of about ``_PIECE`` characters that decode as the whole does."""
    if len(s) <= _PIECE:
        return [s]
    out = []
    start = 0
    depth = 0
    math = False
    comment = False
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if comment:
            if c == "\n":
                comment = False
        elif c == "\\":
            i += 2
            continue
        elif c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif c == "$":
            math = not math
        elif c == "%":
            comment = True
        elif c.isspace() and depth == 0 and not math and i - start >= _PIECE:
            j = i - 1
            while j >= start and s[j].isalpha():
                j -= 1
            if not (j >= start and s[j] == "\\" and j < i - 1):  # not right after a control word
                out.append(s[start:i + 1])
                start = i + 1
        i += 1
    out.append(s[start:])
    return out


def _decode(value: str) -> str:
    dec = _latex_decoder()
    try:
        return "".join(dec.latex_to_text(p) for p in _pieces(value))
    except Exception:  # pylatexenc's own failure on odd input: the raw text is still the best answer
        return value


def latex_to_text(value: str) -> str:
    """LaTeX ``value`` as plain text (braces dropped, white space collapsed); linear in its length.
    Text holding nothing LaTeX would change is returned as it is (never decoded); a value the
    decoder cannot read is kept as written, without its braces."""
    if _LATEX_SPECIAL.search(value):
        value = _decode(value)
    return _WS.sub(" ", value.replace("{", "").replace("}", "")).strip()


_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
_YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")


MAX_AUTHORS = 100  # names kept from one author list; a longer one ends in "others" (BibTeX's "et al.")
_JOIN = " \u2063 "  # joins the kept names so that they are decoded as one value (an invisible separator)


_NO_NAMES: tuple[tuple[str, ...], tuple[tuple[str, str], ...]] = ((), ())


def _names(value: str | None) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """A BibTeX name list (``A and B and {Barnes and Noble}``): (display names, (family, given) pairs).
    Split on ``and`` outside braces; each name split as BibTeX does (``metadata.split_name``) before
    decoding, so braces protect; the first ``MAX_AUTHORS`` names, their family and given parts
    LaTeX-decoded together (one decode, not one per name); ``others`` kept among the display
    names, left out of the pairs."""
    if not value or not value.strip():
        return _NO_NAMES
    parts = split_and(value.replace("\u2063", ""), MAX_AUTHORS)
    more = len(parts) > MAX_AUTHORS
    parts = parts[:MAX_AUTHORS]
    split = [name_parts(p) for p in parts]
    pieces = [x for fam, jr, given, _ in split for x in (fam, jr, given)]
    decoded = [n.strip() for n in latex_to_text(_JOIN.join(pieces)).split("\u2063")]
    if len(decoded) != len(pieces):  # the decoder ate a separator: one piece at a time
        decoded = [latex_to_text(x) if x else "" for x in pieces]
    names, pairs = [], []
    for i, (*_, commas) in enumerate(split):
        name, fam, given = join_name(*decoded[3 * i:3 * i + 3], commas)
        if not name:
            continue
        names.append(name)
        if name.lower() != "others":
            pairs.append((fam, given))
    if more and (not names or names[-1].lower() != "others"):
        names.append("others")
    return tuple(names), tuple(pairs)


def _year(year: str | None, date: str | None, note) -> int | None:
    """The year of the ``year`` field (``metadata.year_of``: ``1999``, ``2020a``), else the first
    four-digit year of a biblatex ``date`` (``2020-05-01``, ``2019/2020``). A field that gives none
    (``19x5``, ``in press``) is noted (``note(field, value)``) and gives None."""
    if year and year.strip():
        text = latex_to_text(year)
        got = year_of(text)
        if got is None:
            note("year", text)
        return got
    if date and date.strip():
        m = _YEAR.search(date)
        if m is None:
            note("date", date.strip())
        return int(m.group(1)) if m else None
    return None


def _keywords(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(k for k in (x.strip() for x in re.split(r"[;,]", latex_to_text(value))) if k)


# -- the file field -----------------------------------------------------------------------------

_TYPE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+-]{0,31}|[A-Za-z0-9.+-]+/[A-Za-z0-9.+-]+)?")
# LaTeX escapes reference managers (Mendeley) write in paths: ``{\_}``, ``\&``, ``$\backslash$``, ...
_BACKSLASH_WORDS = ("$\\backslash$", "{\\textbackslash}", "\\textbackslash{}")
_TILDES = ("{\\~{}}", "\\~{}", "{\\textasciitilde}", "\\textasciitilde{}")
_ESCAPED = frozenset("\\:;_&%#${}")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


def _fields(part: str) -> list[str]:
    """``part`` split at its unescaped colons, escapes undone: ``\\:`` ``\\;`` ``\\\\`` and Mendeley's
    ``\\_`` ``\\&`` ``\\%`` ``\\#`` ``\\$`` ``\\{`` ``\\}`` (also braced, ``{\\_}``); any other backslash is
    a character of the path (``C:\\papers``). A colon right after a lone drive letter at the start of a
    field (``C:\\``, ``C:/``) or after ``file`` (a ``file:`` URL) does not split."""
    fields: list[str] = []
    cur: list[str] = []
    i, n = 0, len(part)
    while i < n:
        c = part[i]
        if c == "\\" and i + 1 < n and part[i + 1] in _ESCAPED:
            cur.append(part[i + 1])
            i += 2
            continue
        if c == "{" and i + 3 < n and part[i + 1] == "\\" and part[i + 2] in _ESCAPED and part[i + 3] == "}":
            cur.append(part[i + 2])
            i += 4
            continue
        if c == ":":
            field = "".join(cur)
            nxt = part[i + 1: i + 2]
            if (len(field) == 1 and field.isascii() and field.isalpha() and nxt in ("\\", "/")) or \
                    (field.lower() == "file" and nxt == "/"):
                cur.append(c)
            else:
                fields.append(field)
                cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    fields.append("".join(cur))
    return fields


def _split_attachments(value: str) -> list[str]:
    """``value`` split at unescaped ``;`` (``\\;`` and ``\\\\`` stay for ``_fields`` to undo)."""
    out, start, i, n = [], 0, 0, len(value)
    while i < n:
        c = value[i]
        if c == "\\":
            i += 2
            continue
        if c == ";":
            out.append(value[start:i])
            start = i + 1
        i += 1
    out.append(value[start:])
    return out


@dataclass(frozen=True)
class Attachment:
    """One attachment of a ``file`` field: the paths it may mean, most likely first, and its type."""

    paths: tuple[str, ...]
    type: str
    pdf: bool


def file_attachments(value: str) -> list[Attachment]:
    """The attachments a raw ``file`` field lists, in its order (see ``file_field_paths``)."""
    for w in _BACKSLASH_WORDS:
        value = value.replace(w, "\\")
    for w in _TILDES:
        value = value.replace(w, "~")
    out = []
    for part in _split_attachments(value):
        if not part.strip():
            continue
        f = _fields(part.strip())
        typ = ""
        if len(f) >= 3 and _TYPE.fullmatch(f[-1].strip()):
            typ = f[-1].strip()
            paths = [":".join(f[1:-1])]
        elif len(f) == 2 and not f[0]:
            paths = [f[1]]  # ``:path``, an empty description
        elif len(f) == 2:
            paths = [":".join(f), f[1]]  # a name holding a colon, else ``description:path``
        else:
            paths = [":".join(f)]
        cands: list[str] = []
        for p in paths:
            p = p.strip()
            if not p:
                continue
            if p[:5].lower() == "file:":
                u = urllib.parse.urlsplit(p)
                if u.netloc not in ("", "localhost"):
                    continue  # a file on another host: nothing here to read
                p = urllib.parse.unquote(u.path)
                if not p:
                    continue
            elif len(f) >= 2 and not f[0] and not p.startswith(("/", "~", ".")) \
                    and not _DRIVE.match(p):
                cands.append("/" + p)  # Mendeley's ``:home/u/x.pdf:pdf``: the leading slash dropped
            cands.append(p)
        if cands:
            pdf = "pdf" in typ.lower() or any(c.lower().endswith(".pdf") for c in cands)
            out.append(Attachment(tuple(dict.fromkeys(cands)), typ, pdf))
    return out


def file_field_paths(value: str, base: Path) -> tuple[Path, ...]:
    """The document paths a raw (not LaTeX-decoded) ``file`` field names, to try in this order: those
    of PDF attachments first, then the others, each group in the field's order. Relative paths are
    taken from ``base`` (the .bib's folder), ``~`` is the home folder.

    The rule, covering what JabRef, Zotero, Better BibTeX and Mendeley write, and plain paths:

    - The field is a list of attachments separated by ``;`` (``\\;`` is a semicolon of a name).
    - In an attachment, ``\\:`` ``\\;`` ``\\\\`` are a colon, a semicolon and a backslash of the name
      (JabRef's and Zotero's ``C\\:\\\\Users\\\\me\\\\a.pdf``), ``\\_`` ``\\&`` ``\\%`` ``\\#`` ``\\$``
      ``\\{`` ``\\}`` (braced or not), ``$\\backslash$`` and ``{\\~{}}`` are Mendeley's escapes; any
      other backslash is part of the path.
    - With two or more unescaped colons and a type after the last one (empty, a word such as ``PDF``,
      or a MIME type such as ``application/pdf``), the attachment is ``description:path:type``: the
      path is everything between the first and the last colon (``Full Text:a:b.pdf:PDF`` names
      ``a:b.pdf``). An empty description with a relative path is Mendeley's, which drops the leading
      slash: ``:home/u/x.pdf:pdf`` is tried as ``/home/u/x.pdf``, then relative.
    - Otherwise the whole attachment is the path (``a:b:c.pdf``, ``C:\\papers\\x.pdf``); with exactly
      one colon, the part after it is tried next (``description:path``).
    - A colon after a lone drive letter (``C:\\``, ``C:/``) never splits; ``file:`` URLs
      (``file:///home/u/a%20b.pdf``) are percent-decoded, and those naming another host are skipped.
    """
    first: list[Path] = []
    rest: list[Path] = []
    for att in file_attachments(value):
        for raw in att.paths:
            p = Path(raw)
            if raw.startswith("~"):
                try:
                    p = p.expanduser()
                except RuntimeError:  # no home folder to expand to
                    pass
            (first if att.pdf else rest).append(p if p.is_absolute() else base / p)
    return tuple(dict.fromkeys(first + rest))


# -- the file -----------------------------------------------------------------------------------

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


def _read_bytes(path: Path) -> bytes:
    """The bibliography's bytes; CorpusError when it is missing, not a regular file, or unreadable. A
    FIFO, a device or a folder is refused by its type and never opened for reading."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError) as err:
        raise CorpusError(f"{path}: bibliography not found (set [corpus].bibliography or create it)") from err
    except OSError as err:
        raise CorpusError(f"{path}: cannot read bibliography: {err.strerror or err}") from err
    what = not_regular(st.st_mode)
    if what:
        raise CorpusError(f"{path}: the bibliography {what}; expected a BibTeX file "
                          "(set [corpus].bibliography to one)")
    try:
        # O_NONBLOCK: should it have been swapped for a FIFO since the stat, the open does not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise CorpusError(f"{path}: cannot read bibliography: {err.strerror or err}") from err
    with os.fdopen(fd, "rb") as f:
        what = not_regular(os.fstat(fd).st_mode)
        if what:
            raise CorpusError(f"{path}: the bibliography {what}; expected a BibTeX file")
        try:
            return f.read()
        except OSError as err:
            raise CorpusError(f"{path}: cannot read bibliography: {err.strerror or err}") from err


def read_bibtex(path: Path) -> tuple[list[BibEntry], list[str]]:
    """Entries of ``path`` in file order, and one message per skipped or doubtful block.

    Raises CorpusError only when the file cannot be read at all.
    """
    try:
        import bibtexparser
        from bibtexparser import model
    except ImportError as err:
        raise CorpusError("reading BibTeX needs bibtexparser>=2 (pip install 'bibtexparser>=2.0.0b7')") from err
    path = Path(path)
    data = _read_bytes(path)
    problems: list[str] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        problems.append(f"{path}:{line}: not UTF-8; undecodable bytes replaced with U+FFFD")
        text = data.decode("utf-8", errors="replace")
    del data
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        problems.append(f"{path}:{line}: NUL bytes removed")
        text = text.replace("\x00", "")
    with _quiet_parser():
        try:
            lib = bibtexparser.parse_string(text, parse_stack=[])  # split only: values stay raw
        except Exception as err:  # the parser's own failure on pathological input
            raise CorpusError(f"{path}: BibTeX parser failed: {err}") from err
    ex = _Expander(limit=len(text) + 1024)
    strings = list(lib.strings)
    for block in lib.failed_blocks:
        line = (block.start_line or 0) + 1
        if isinstance(block, model.DuplicateBlockKeyBlock):
            if isinstance(block.ignore_error_block, model.String):
                strings.append(block.ignore_error_block)  # BibTeX: the later definition wins
                problems.append(f"{path}:{line}: @string {block.key!r} defined again; this definition is used")
            else:
                problems.append(f"{path}:{line}: duplicate citekey {block.key!r}; the first entry is kept, "
                                "this one skipped")
        else:
            err = getattr(block, "error", None)
            reason = getattr(err, "abort_reason", None) or str(err) or type(err).__name__
            problems.append(f"{path}:{line}: {MALFORMED}: {reason}")
    strings.sort(key=lambda s: s.start_line or 0)
    for s in strings:
        if isinstance(s.value, str):
            value, cut = ex.expand(s.value)
            if cut:
                problems.append(f"{path}:{(s.start_line or 0) + 1}: @string {s.key!r} expands past "
                                f"{ex.limit:,} characters; cut there")
            ex.macros[str(s.key).strip().lower()] = value
    entries = []
    base = path.parent
    for e in lib.entries:
        fields = {k.lower(): v.value for k, v in e.fields_dict.items()}
        line = (e.start_line or 0) + 1
        key = (e.key or "").strip()
        why = bad_citekey(key)
        if why:
            shown = f"citekey {key!r} " if key else "citekey "
            problems.append(f"{path}:{line}: {shown}{why}; entry skipped (rename the key in the .bib)")
            continue

        def raw(name):
            v = fields.get(name)
            if not isinstance(v, str):
                return None
            value, cut = ex.expand(v)
            if cut:
                problems.append(f"{path}:{line}: field {name!r} of {key!r} expands past {ex.limit:,} "
                                "characters; cut there")
            return value

        def text_field(name):
            v = raw(name)
            return (latex_to_text(v) or None) if v and v.strip() else None

        def note(name, value, what="a year"):
            shown = value if len(value) <= 60 else value[:60] + "..."
            problems.append(f"{path}:{line}: {key!r}: field {name!r} {shown!r} is not {what}; left empty")

        f = raw("file")
        kind = (e.entry_type or "").strip().lower() or None
        _, venue = venue_of(kind or "", raw)
        doi = raw("doi")
        norm = norm_doi(doi) if doi and doi.strip() else None
        if doi and doi.strip() and norm is None:
            note("doi", doi.strip(), "a DOI (10.NNNN/...)")
        authors = _names(raw("author"))
        if not authors[0]:
            authors = _names(raw("editor"))
        entries.append(BibEntry(
            citekey=key,
            title=text_field("title") or "",
            abstract=text_field("abstract"),
            keywords=_keywords(raw("keywords")),
            files=file_field_paths(f, base) if f and f.strip() else (),
            line=line,
            authors=authors[0],
            year=_year(raw("year"), raw("date"), note),
            author_names=authors[1],
            venue=(latex_to_text(venue) or None) if venue else None,
            type=kind,
            doi=norm,
        ))
    return entries, problems
