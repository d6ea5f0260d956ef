"""Reading a BEIR-style corpus (``{"_id", "title", "text", "keywords"?}`` per line), streaming, and the
queries of a batch search (``{"_id", "text"}`` per line).

A bad line is reported with its line number and skipped; the rest is read. A duplicate ``_id`` keeps the
first record. What a line may hold, and what becomes of what it may not:

- ``_id``: a string or an integer. Empty, or holding white space, a control character, a NUL or a lone
  surrogate escape (``"\\ud800"``: not Unicode text), it skips the line with a warning naming the line and
  the field -- a TREC run is split on white space, so such an id could be imported but never written.
- ``title``, ``text``, ``abstract``: strings (a missing one is ""). A lone surrogate escape becomes
  U+FFFD and is reported; a NUL becomes a space.
- Metadata, at the top level or inside BEIR's ``metadata`` object (the top level wins), read by the rules
  of ``metadata.py``: ``authors`` (a list of names, each ``Family, Given`` or ``Given Family`` as BibTeX
  reads them, or one string: names separated by ``;``, else a BibTeX-style ``A and B``; a name holding a
  backslash or a brace is LaTeX, decoded as ``sync`` decodes names, any other kept as written), ``year`` (a
  number, or a string that holds one: ``2019a`` is 2019), ``keywords`` (a list of strings, or one string
  separated by ``;``), ``venue`` (a string), ``type`` (a string, lower-cased) and ``doi`` (normalised).
  A value of the wrong kind, or one that is no year or DOI (``19x5``, a venue that is a number), is a
  warning naming the line and the field, and that field is left empty; the record is kept.
- An integer longer than Python's ``int`` conversion allows (``sys.get_int_max_str_digits()``, 4,300
  digits) never stops the read: in ``_id`` or a text field it skips the line with a warning; in a field
  this reader ignores, it is ignored.
- A line longer than ``MAX_LINE_BYTES`` (64 MiB) stops the read with a CorpusError naming the file and
  the line: nothing past it is read, so ``/dev/zero`` or a file with no newline costs bounded memory.

The input must be a regular file; the queries may also come from a pipe (``--queries /dev/stdin``),
read once. A folder, a device or a socket is refused by what it is, without being opened.
"""

from __future__ import annotations

import json
import os
import re
import stat
from functools import partial
from pathlib import Path
from typing import BinaryIO, Iterator, NamedTuple

from chitragupta.engine.library.ids import bad_id
from chitragupta.engine.library.metadata import norm_doi, split_and, split_name, year_of
from chitragupta.files import kind_of
from chitragupta.errors import CorpusError

__all__ = ["JsonlRecord", "iter_jsonl", "read_queries", "open_input", "bad_id",
           "NOT_JSON", "MAX_LINE_BYTES"]

NOT_JSON = "not valid JSON"  # the problem text of a line that does not parse
MAX_LINE_BYTES = 64 << 20  # one line (one record or query) at most; a longer one stops the read


class JsonlRecord(NamedTuple):
    citekey: str
    title: str
    text: str
    keywords: tuple[str, ...]
    abstract: str | None
    line: int
    authors: tuple[str, ...] = ()
    year: int | None = None
    author_names: tuple[tuple[str, str], ...] = ()
    venue: str | None = None
    type: str | None = None
    doi: str | None = None


class _HugeInt:
    """A JSON integer with more digits than ``int()`` converts (Python's ``int_max_str_digits``): kept as
    its digit count, so the line is judged by the field it is in instead of raising ValueError."""

    __slots__ = ("digits",)

    def __init__(self, digits: int):
        self.digits = digits


def _parse_int(s: str):
    try:
        return int(s)
    except ValueError:
        return _HugeInt(len(s.lstrip("-")))


_DECODER = json.JSONDecoder(parse_int=_parse_int)  # integers through the hook above


def _what(v) -> str:
    """A value's kind as a message names it."""
    if isinstance(v, _HugeInt):
        return f"an integer of {v.digits} digits (over Python's limit)"
    return type(v).__name__


def _str_field(obj: dict, name: str, where: str, problems: list[str]) -> str | None:
    v = obj.get(name)
    if v is None:
        return ""
    if not isinstance(v, str):
        problems.append(f"{where}: field {name!r} must be a string, got {_what(v)}; line skipped")
        return None
    return v.replace("\x00", " ")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(*fields) -> bool:
    """Whether a lone surrogate is in any field (strings, or a list of them): an all-ASCII string holds none."""
    strs = [f for f in fields if isinstance(f, str)] + [k for f in fields if isinstance(f, list) for k in f]
    return not all(x.isascii() for x in strs) and any(_SURROGATE.search(x) for x in strs if not x.isascii())


def open_input(path: Path, what: str, *, pipes: bool = False) -> BinaryIO:
    """``path`` opened for reading in binary, after checking what it is: a regular file, or with
    ``pipes`` a pipe (read once, as a stream). Anything else -- a folder, a device (``/dev/zero``, a
    terminal), a socket, a pipe where one cannot be read -- is a CorpusError that says what it is, and is
    never opened (opening a FIFO waits for a writer). ``what``: "corpus", "queries", for the messages."""
    try:
        st = os.stat(path)
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: {what} file not found") from err
    except OSError as err:
        raise CorpusError(f"{path}: cannot read {what} file ({err.strerror or err})") from err
    kind = kind_of(st.st_mode)
    if kind is not None and not (pipes and stat.S_ISFIFO(st.st_mode)):
        if stat.S_ISFIFO(st.st_mode):
            raise CorpusError(f"{path}: is {kind}; a {what} file is read more than once, so save the stream to "
                              "a file first (e.g. `cat > corpus.jsonl`) and give that")
        raise CorpusError(f"{path}: is {kind}, not a {what} file (JSON lines)")
    try:
        f = open(path, "rb")
    except OSError as err:
        raise CorpusError(f"{path}: cannot read {what} file ({err.strerror or err})") from err
    try:
        again = kind_of(os.fstat(f.fileno()).st_mode)
    except OSError:
        again = "not a regular file"
    if again is not None and again != kind:  # replaced between the check and the open
        f.close()
        raise CorpusError(f"{path}: is {again}, not a {what} file (JSON lines)")
    return f


def _lines(f: BinaryIO, path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of ``f``; a line over MAX_LINE_BYTES is a CorpusError (nothing more is read)."""
    limit = MAX_LINE_BYTES
    n = 0
    for raw in iter(partial(f.readline, limit + 1), b""):
        n += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise CorpusError(f"{path}:{n}: line longer than {limit >> 20} MiB (not a JSON-lines file?); "
                              "stopped reading there")
        yield n, raw


def _decode_line(raw: bytes, n: int, path: str, problems: list[str]) -> str:
    try:
        return raw.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError:
        problems.append(f"{path}:{n}: not UTF-8; undecodable bytes replaced with U+FFFD")
        return raw.decode("utf-8", errors="replace")


def _decode(line: str):
    """``json.loads(line)`` with the integer hook: its BOM check, then the decoder."""
    if line.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", line, 0)
    return _DECODER.decode(line)


def _parse(line: str, path: str, n: int, problems: list[str]):
    """The line's JSON value, or None (reported) when it is not JSON."""
    try:
        obj = _decode(line)
    except json.JSONDecodeError as err:
        problems.append(f"{path}:{n}: {NOT_JSON} ({err.msg} at column {err.colno}); line skipped")
    except RecursionError:  # json's own nesting limit
        problems.append(f"{path}:{n}: {NOT_JSON} (nested too deeply); line skipped")
    except ValueError as err:  # nothing json raises past the hook; kept so no line can stop the read
        problems.append(f"{path}:{n}: {NOT_JSON} ({err}); line skipped")
    else:
        return obj
    return None


def _id_of(obj: dict, path: str, n: int, problems: list[str]) -> str | None:
    """The record's ``_id`` as a string, or None (reported) when it cannot be one."""
    key = obj.get("_id")
    if type(key) is not str:
        if isinstance(key, _HugeInt):
            problems.append(f"{path}:{n}: '_id' is {_what(key)}; line skipped")
            return None
        if isinstance(key, bool) or not isinstance(key, int):
            problems.append(f"{path}:{n}: '_id' must be a string or an integer; line skipped")
            return None
        return str(key)
    why = bad_id(key)
    if why is not None:
        problems.append(f"{path}:{n}: '_id' {key!r} {why}; line skipped")
        return None
    return key


def _clean(s: str) -> str:
    """A string with lone surrogates as U+FFFD and NULs as spaces, stripped."""
    if not s.isascii():
        s = _SURROGATE.sub("\ufffd", s)
    return s.replace("\x00", " ").strip()


def _shown(v) -> str:
    r = repr(v) if not isinstance(v, _HugeInt) else _what(v)
    return r if len(r) <= 60 else r[:60] + "..."


def _bibliographic(obj: dict, where: str, problems: list[str]) -> tuple:
    """(authors, year, author_names, venue, type, doi) of a record, from its top level or BEIR's
    ``metadata`` (the top level wins); a value of the wrong kind is a warning naming the field, and that
    field is left empty (the record is kept)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    get = lambda name: obj[name] if name in obj else meta.get(name)  # noqa: E731
    names, year, venue, kind, doi = get("authors"), get("year"), get("venue"), get("type"), get("doi")
    authors: tuple[str, ...] = ()
    if isinstance(names, str):
        authors = tuple(a for a in (_clean(x) for x in (names.split(";") if ";" in names else split_and(names))) if a)
    elif isinstance(names, list) and all(isinstance(a, str) for a in names):
        authors = tuple(a for a in map(_clean, names) if a)
    elif names is not None:
        problems.append(f"{where}: 'authors' must be a list of strings or one string, got {_what(names)}; "
                        "left empty")
    pairs = []
    if authors and any("\\" in a or "{" in a for a in authors):
        authors, pairs = _latex_names(authors)
    else:
        pairs = [split_name(a) for a in authors if a.lower() != "others"]
    if year is not None:
        if isinstance(year, bool) or not isinstance(year, (str, int)):
            problems.append(f"{where}: 'year' must be a number or a string, got {_what(year)}; left empty")
            year = None
        else:
            got = year_of(_clean(year) if isinstance(year, str) else year)
            if got is None and year != "":
                problems.append(f"{where}: field 'year' {_shown(year)} is not a year; left empty")
            year = got
    text = {}
    for name, v in (("venue", venue), ("type", kind)):
        if v is None:
            text[name] = None
        elif not isinstance(v, str):
            problems.append(f"{where}: '{name}' must be a string, got {_what(v)}; left empty")
            text[name] = None
        else:
            text[name] = " ".join(_clean(v).split()) or None
    if text["type"]:
        text["type"] = text["type"].lower()
    if doi is not None:
        got = norm_doi(doi)
        if got is None and doi != "":
            problems.append(f"{where}: field 'doi' {_shown(doi)} is not a DOI (10.NNNN/...); left empty")
        doi = got
    return authors, year, tuple(pairs), text["venue"], text["type"], doi


def _latex_names(authors: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """Names of which some hold LaTeX (a backslash or a brace: ``M{\\"u}ller, K.``), split before they are
    decoded (braces protect, as in BibTeX), then decoded as ``sync`` decodes them. Names without either are
    kept as written."""
    from chitragupta.engine.library.bibtex import latex_to_text  # bibtex imports this module

    shown, pairs = [], []
    for a in authors:
        tex = "\\" in a or "{" in a
        if a.lower() != "others":
            fam, given = split_name(a)
            pairs.append((latex_to_text(fam), latex_to_text(given)) if tex else (fam, given))
        shown.append(latex_to_text(a) if tex else a)
    return tuple(x for x in shown if x), pairs


def _keywords(obj: dict, where: str, problems: list[str]) -> list[str]:
    """A record's keywords (top level, else BEIR's ``metadata``): a list of strings, or one string separated
    by ``;``; anything else is a warning, and no keywords."""
    kws = obj.get("keywords")
    if kws is None:
        meta = obj.get("metadata")
        kws = meta.get("keywords") if isinstance(meta, dict) else None
    if kws is None:
        return []
    if isinstance(kws, str):
        return [k for k in (x.strip() for x in kws.split(";")) if k]
    if not isinstance(kws, list) or not all(isinstance(k, str) for k in kws):
        problems.append(f"{where}: 'keywords' must be a list of strings or one string, got {_what(kws)}; left empty")
        return []
    return kws


def iter_jsonl(path: Path, problems: list[str]) -> Iterator[JsonlRecord]:
    """Yield the good records of ``path`` in file order; append a message to ``problems`` per bad line.
    See the module docstring for what skips a line and what is replaced."""
    f = open_input(path, "corpus")
    spath = str(path)
    seen: set[str] = set()
    with f:
        for n, raw in _lines(f, path):
            if raw.isspace():
                continue
            line = _decode_line(raw, n, spath, problems)
            obj = _parse(line, spath, n, problems)
            if obj is None:
                continue
            if type(obj) is not dict:
                problems.append(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}; line skipped")
                continue
            key = _id_of(obj, spath, n, problems)
            if key is None:
                continue
            if key in seen:
                problems.append(f"{path}:{n}: duplicate _id {key!r}; the first record is kept, this one skipped")
                continue
            # a missing field is "", anything else but a string skips the line (each reported)
            where = f"{path}:{n}"
            title = _str_field(obj, "title", where, problems)
            text = _str_field(obj, "text", where, problems)
            abstract = _str_field(obj, "abstract", where, problems)
            if title is None or text is None or abstract is None:
                continue
            kws = _keywords(obj, where, problems)
            if b"\\" in raw and _has_surrogate(title, text, abstract, kws):  # only a \\u escape makes one
                problems.append(f"{path}:{n}: lone surrogate escape(s) (not Unicode text) replaced with U+FFFD")
                title, text = _SURROGATE.sub("\ufffd", title), _SURROGATE.sub("\ufffd", text)
                abstract = _SURROGATE.sub("\ufffd", abstract) if abstract else abstract
                kws = [_SURROGATE.sub("\ufffd", k) for k in kws]
            seen.add(key)
            if "metadata" in obj or "authors" in obj or "year" in obj or "venue" in obj or "type" in obj or "doi" in obj:
                yield JsonlRecord(key, title, text, tuple(kws), abstract or None, n,
                                  *_bibliographic(obj, f"{path}:{n}", problems))
            else:
                yield JsonlRecord(key, title, text, tuple(kws), abstract or None, n)


def read_queries(path: Path, problems: list[str], filters: list | None = None,
                 read_filters=None, lines: list | None = None) -> list[tuple[str, str]]:
    """BEIR queries ``{"_id", "text"}``: (id, text) pairs in file order; bad lines reported and skipped.
    With a list ``filters``, each kept query's own ``"filters": {...}`` is read by ``read_filters(value,
    "filters")`` (``engine.search.filters.to_filters``: it raises ``UsageError`` on a bad value) and
    appended to it (None: the line has none); a line whose filters are not valid is reported and skipped.
    Without the list a line's filters are not read. With a list ``lines``, each kept query's line number
    is appended to it.
    ``path`` may be a pipe (``/dev/stdin``), read once. An ``_id`` follows the corpus's rule (no white
    space, control character or lone surrogate: a TREC run carries it); a lone surrogate in ``text``
    becomes U+FFFD, reported."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    spath = str(path)
    with open_input(path, "queries", pipes=True) as f:
        for n, raw in _lines(f, path):
            if raw.isspace():
                continue
            where = f"{path}:{n}"
            obj = _parse(_decode_line(raw, n, spath, problems), spath, n, problems)
            if obj is None:
                continue
            if not isinstance(obj, dict):
                problems.append(f"{where}: expected a JSON object, got {type(obj).__name__}; line skipped")
                continue
            qid = _id_of(obj, spath, n, problems)
            if qid is None:
                continue
            text = obj.get("text")
            if not isinstance(text, str):
                problems.append(f"{where}: 'text' must be a string, got {_what(text)}; line skipped")
                continue
            if qid in seen:
                problems.append(f"{where}: duplicate query _id {qid!r}; the first is kept, this one skipped")
                continue
            if not text.isascii() and _SURROGATE.search(text):
                problems.append(f"{where}: lone surrogate escape(s) in 'text' (not Unicode text) replaced with U+FFFD")
                text = _SURROGATE.sub("\ufffd", text)
            own = None
            if filters is not None and obj.get("filters") is not None:
                from chitragupta.errors import UsageError

                try:
                    own = read_filters(obj["filters"], "filters")
                except UsageError as err:
                    problems.append(f"{where}: {err}; line skipped")
                    continue
            seen.add(qid)
            out.append((qid, text))
            if lines is not None:
                lines.append(n)
            if filters is not None:
                filters.append(own)
    return out
