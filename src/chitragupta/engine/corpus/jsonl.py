"""Reading a BEIR-style corpus (``{"_id", "title", "text", "keywords"?}`` per line), streaming.

A bad line is reported with its line number and skipped; the rest is read. A duplicate ``_id`` keeps the
first record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from chitragupta.errors import CorpusError

__all__ = ["JsonlRecord", "iter_jsonl", "iter_records", "read_queries", "NOT_JSON"]

NOT_JSON = "not valid JSON"  # the problem text of a line that does not parse


@dataclass(frozen=True)
class JsonlRecord:
    citekey: str
    title: str
    text: str
    keywords: tuple[str, ...]
    abstract: str | None
    line: int


def _str_field(obj: dict, name: str, where: str, problems: list[str]) -> str | None:
    v = obj.get(name)
    if v is None:
        return ""
    if not isinstance(v, str):
        problems.append(f"{where}: field {name!r} must be a string, got {type(v).__name__}; line skipped")
        return None
    return v.replace("\x00", " ")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(*fields) -> bool:
    """Whether a lone surrogate is in any field (strings, or a list of them): an all-ASCII string holds none."""
    strs = [f for f in fields if isinstance(f, str)] + [k for f in fields if isinstance(f, list) for k in f]
    return not all(x.isascii() for x in strs) and any(_SURROGATE.search(x) for x in strs if not x.isascii())


Record = tuple[str, str, str, "tuple[str, ...]", "str | None", int]  # JsonlRecord's fields, in its order


def iter_jsonl(path: Path, problems: list[str]) -> Iterator[JsonlRecord]:
    """Yield the good records of ``path`` in file order; append a message to ``problems`` per bad line."""
    for rec in iter_records(path, problems):
        yield JsonlRecord(*rec)


def iter_records(path: Path, problems: list[str]) -> Iterator[Record]:
    """``iter_jsonl`` as plain tuples (citekey, title, text, keywords, abstract, line): the bulk import's
    reader. A lone surrogate escape (``"\\ud800"``, which no UTF-8 file can hold) is replaced with U+FFFD
    in a field and reported; in an ``_id`` it skips the line."""
    try:
        f = open(path, "rb")
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: corpus file not found") from err
    except OSError as err:
        raise CorpusError(f"{path}: cannot read corpus file: {err}") from err
    seen: set[str] = set()
    loads = json.loads
    scan = json.decoder.JSONDecoder().scan_once  # json.loads' own scanner (its default decoder's settings)
    with f:
        for n, raw in enumerate(f, start=1):
            if raw.isspace():
                continue
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError:
                problems.append(f"{path}:{n}: not UTF-8; undecodable bytes replaced with U+FFFD")
                line = raw.decode("utf-8", errors="replace")
            try:
                try:  # the C scanner json.loads ends in, without its Python wrappers; anything odd goes to loads
                    obj, end = scan(line, 0)
                    if line[end:].strip(" \t\n\r"):  # after the value, only JSON's own white space
                        obj = loads(line)  # what follows the value: loads says how it is wrong
                except (StopIteration, ValueError, RecursionError):
                    obj = loads(line)
            except json.JSONDecodeError as err:
                problems.append(f"{path}:{n}: {NOT_JSON} ({err.msg} at column {err.colno}); line skipped")
                continue
            except RecursionError:  # json's own nesting limit
                problems.append(f"{path}:{n}: {NOT_JSON} (nested too deeply); line skipped")
                continue
            if type(obj) is not dict:
                problems.append(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}; line skipped")
                continue
            key = obj.get("_id")
            if type(key) is not str:
                if isinstance(key, bool) or not isinstance(key, int):
                    problems.append(f"{path}:{n}: '_id' must be a string or an integer; line skipped")
                    continue
                key = str(key)
            if not key.strip() or "\x00" in key:
                problems.append(f"{path}:{n}: '_id' {key!r} is empty or holds a NUL byte; line skipped")
                continue
            if key in seen:
                problems.append(f"{path}:{n}: duplicate _id {key!r}; the first record is kept, this one skipped")
                continue
            title, text, abstract = obj.get("title"), obj.get("text"), obj.get("abstract")
            if type(title) is str and type(text) is str and (abstract is None or type(abstract) is str):
                if "\x00" in title:
                    title = title.replace("\x00", " ")
                if "\x00" in text:
                    text = text.replace("\x00", " ")
                if abstract and "\x00" in abstract:
                    abstract = abstract.replace("\x00", " ")
            else:  # a missing field is "", anything else but a string skips the line (each reported)
                where = f"{path}:{n}"
                title = _str_field(obj, "title", where, problems)
                text = _str_field(obj, "text", where, problems)
                abstract = _str_field(obj, "abstract", where, problems)
                if title is None or text is None or abstract is None:
                    continue
            kws = obj.get("keywords") or []
            if isinstance(kws, str):
                kws = [k for k in (x.strip() for x in kws.split(";")) if k]
            if not isinstance(kws, list) or not all(isinstance(k, str) for k in kws):
                problems.append(f"{path}:{n}: 'keywords' must be a list of strings; line skipped")
                continue
            if b"\\" in raw and _has_surrogate(key, title, text, abstract, kws):  # only a \\u escape makes one
                if _SURROGATE.search(key):
                    problems.append(f"{path}:{n}: '_id' {key!r} holds a lone surrogate escape (not Unicode text); "
                                    "line skipped")
                    continue
                problems.append(f"{path}:{n}: lone surrogate escape(s) (not Unicode text) replaced with U+FFFD")
                title, text = _SURROGATE.sub("\ufffd", title), _SURROGATE.sub("\ufffd", text)
                abstract = _SURROGATE.sub("\ufffd", abstract) if abstract else abstract
                kws = [_SURROGATE.sub("\ufffd", k) for k in kws]
            seen.add(key)
            yield (key, title, text, tuple(kws), abstract or None, n)


def read_queries(path: Path, problems: list[str]) -> list[tuple[str, str]]:
    """BEIR queries ``{"_id", "text"}``: (id, text) pairs in file order; bad lines reported and skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: queries file not found") from err
    except OSError as err:
        raise CorpusError(f"{path}: cannot read queries file: {err}") from err
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n, raw in enumerate(data.splitlines(), start=1):
        where = f"{path}:{n}"
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8-sig" if n == 1 else "utf-8", errors="replace"))
        except json.JSONDecodeError as err:
            problems.append(f"{where}: not valid JSON ({err.msg} at column {err.colno}); line skipped")
            continue
        except RecursionError:
            problems.append(f"{where}: not valid JSON (nested too deeply); line skipped")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: expected a JSON object, got {type(obj).__name__}; line skipped")
            continue
        qid, text = obj.get("_id"), obj.get("text")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
            problems.append(f"{where}: '_id' must be a non-empty string or integer; line skipped")
            continue
        qid = str(qid)
        if any(c.isspace() for c in qid):
            problems.append(f"{where}: '_id' {qid!r} holds whitespace, which a TREC run cannot carry; line skipped")
            continue
        if not isinstance(text, str):
            problems.append(f"{where}: 'text' must be a string; line skipped")
            continue
        if qid in seen:
            problems.append(f"{where}: duplicate query _id {qid!r}; the first is kept, this one skipped")
            continue
        seen.add(qid)
        out.append((qid, text))
    return out
