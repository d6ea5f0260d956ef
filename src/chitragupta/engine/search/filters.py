"""Metadata filters: which sources a search may return, as a mask over an index's documents.

    f = Filters.from_dict({"year": "2015..2020", "author": ["Smith", "Müller"], "type": "article"})
    mask, missing = f.mask(facets, citekeys)     # (n_docs,) bool; {field: sources without a value}

Fields (different fields combine with AND; a list within a field means any of its values):

    year      a range ``(lo, hi)``, either end None (open): "2015..2020", "2015..", "..2020", "2019" or 2019
    author    family names, case- and accent-folded (``metadata.fold``); a family with particles
              ("van der Berg") is matched by the whole and by the name after them ("berg")
    keyword   keywords, folded, matched exactly
    venue     a folded substring of the venue
    type      BibTeX entry types, lower case
    keys      citekeys: only these
    topic     BERTopic topic ids of ``content/topics.json`` (``chitragupta enrich --stages bertopic``; -1:
              the outliers); a workspace without topics is a UsageError

A source with no value for a filtered field (no year, no author, no topic, ...) is excluded, and counted.
``FacetTable.notes`` says what a filter did that a user would not guess: sources excluded for lack of a
value, citekeys not in the library (with the nearest one), a keyword matched by no keyword whole (with
those holding it), a topic that does not exist, and every source excluded. ``merge`` ANDs two filters (a
batch line's own on top of the command line's). The mask is applied by the scorers before top-k
(``engine/search/scoring.py``), never to a ranked list.
"""

from __future__ import annotations

import difflib
import json
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.notes import Note

__all__ = ["Filters", "FacetTable", "FIELDS", "to_filters", "per_query", "filter_notes"]

FIELDS = ("year", "author", "keyword", "venue", "type", "keys", "topic")
_ALLOWED = {
    "year": 'a year (2019) or a range "2015..2020", "2015..", "..2020"',
    "author": "a family name or a list of them",
    "keyword": "a keyword or a list of them",
    "venue": "a string (matched as a case-insensitive substring)",
    "type": "an entry type (article, inproceedings, ...) or a list of them",
    "keys": "a list of citekeys",
    "topic": "a topic id of content/topics.json (an integer, -1: the outliers) or a list of them",
}
TOPICS_LIMIT = 1 << 28  # content/topics.json read at most (a million sources' assignments take ~30 MB)
NEAREST_ALL = 5000  # a misspelt citekey is compared with every citekey of a library up to this size
_YEAR = re.compile(r"\s*(-?\d{1,4})?\s*\.\.\s*(-?\d{1,4})?\s*")
_ONE_YEAR = re.compile(r"\s*-?\d{1,4}\s*")


def _label(where: str, name: str) -> str:
    """How an error names a field: ``filters.year``, or the flag ``--year`` when ``where`` is "--"."""
    return f"--{name}" if where == "--" else f"{where}.{name}"


def _bad(where: str, name: str, value, extra: str = "") -> UsageError:
    return UsageError(f"{_label(where, name)}: {extra or 'bad value'} {value!r}; allowed: {_ALLOWED[name]}")


def parse_year(value, where: str = "filters") -> tuple[int | None, int | None]:
    """``(lo, hi)`` of a year filter value (see the module docstring); UsageError otherwise."""
    if isinstance(value, bool):
        raise _bad(where, "year", value)
    if isinstance(value, (int, np.integer)):
        if not -9999 <= value <= 9999:
            raise _bad(where, "year", value)
        return int(value), int(value)
    if isinstance(value, str):
        if _ONE_YEAR.fullmatch(value):
            y = int(value)
            return y, y
        m = _YEAR.fullmatch(value)
        if m and (m.group(1) or m.group(2)):
            lo = int(m.group(1)) if m.group(1) else None
            hi = int(m.group(2)) if m.group(2) else None
            if lo is not None and hi is not None and lo > hi:
                raise _bad(where, "year", value, "an empty range (the first year is after the last)")
            return lo, hi
    raise _bad(where, "year", value)


def _strings(value, where: str, name: str) -> tuple[str, ...]:
    """A string or a non-empty list of non-empty strings, as a tuple."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(s, str) and s.strip() for s in items):
        raise _bad(where, name, value)
    return tuple(items)


@dataclass(frozen=True)
class Filters:
    """Metadata filters (module docstring); values are kept folded as they are compared. ``also``: other
    filters ANDed with these (``merge`` of two that filter the same field)."""

    year: tuple[int | None, int | None] | None = None
    author: tuple[str, ...] = ()
    keyword: tuple[str, ...] = ()
    venue: str | None = None
    type: tuple[str, ...] = ()
    keys: frozenset[str] | None = None
    topic: tuple[int, ...] = ()
    also: tuple["Filters", ...] = field(default=(), repr=False)

    def __post_init__(self):
        from chitragupta.engine.library.metadata import fold

        set_ = object.__setattr__
        set_(self, "author", tuple(dict.fromkeys(fold(a) for a in self.author if fold(a))))
        set_(self, "keyword", tuple(dict.fromkeys(fold(a) for a in self.keyword if fold(a))))
        set_(self, "type", tuple(dict.fromkeys(t.strip().lower() for t in self.type if t.strip())))
        if self.venue is not None:
            set_(self, "venue", fold(self.venue))
        if self.keys is not None:
            set_(self, "keys", frozenset(self.keys))
        set_(self, "topic", tuple(dict.fromkeys(int(t) for t in self.topic)))

    @classmethod
    def from_dict(cls, d, where: str = "filters") -> "Filters":
        """Filters from a mapping of the fields' value syntax (module docstring); UsageError naming the
        field (``where.field``; the CLI's flag ``--field`` when ``where`` is "--") and what it allows for an
        unknown field or a bad value."""
        if isinstance(d, Filters):
            return d
        if not isinstance(d, dict):
            raise UsageError(f"{where} must be an object with fields {', '.join(FIELDS)}, got {type(d).__name__}")
        unknown = [k for k in d if k not in FIELDS]
        if unknown:
            raise UsageError(f"{where}: unknown field {unknown[0]!r}; allowed: {', '.join(FIELDS)}")
        kw: dict = {}
        for name, value in d.items():
            if value is None:
                continue
            if name == "year":
                kw["year"] = parse_year(value, where)
            elif name in ("author", "keyword", "type"):
                kw[name] = _strings(value, where, name)
            elif name == "venue":
                if not isinstance(value, str) or not value.strip():
                    raise _bad(where, name, value)
                kw["venue"] = value
            elif name == "topic":
                items = value if isinstance(value, (list, tuple)) else [value]
                if not items or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                                        and -1 <= t < 1 << 31 for t in items):
                    raise _bad(where, name, value)
                kw["topic"] = tuple(items)
            else:  # keys
                if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)) or \
                        not all(isinstance(s, str) and s for s in value):
                    raise _bad(where, name, value)
                kw["keys"] = frozenset(value)
        return cls(**kw)

    def is_empty(self) -> bool:
        return not self.fields_used()

    def fields_used(self) -> list[str]:
        """The fields these filters (and those ANDed with them) filter on, in ``FIELDS`` order."""
        used = {f for f in FIELDS if getattr(self, f) not in (None, ())}
        for o in self.also:
            used.update(o.fields_used())
        return [f for f in FIELDS if f in used]

    def merge(self, other: "Filters | None") -> "Filters":
        """Both these and ``other`` (AND)."""
        if other is None or other.is_empty():
            return self
        if self.is_empty():
            return other
        mine = {f: getattr(self, f) for f in FIELDS}
        theirs = {f: getattr(other, f) for f in FIELDS}
        if other.also or any(mine[f] not in (None, ()) and theirs[f] not in (None, ()) for f in FIELDS):
            return Filters(**mine, also=self.also + (other,))
        return Filters(**{f: mine[f] if mine[f] not in (None, ()) else theirs[f] for f in FIELDS}, also=self.also)

    def mask(self, facets, citekeys) -> tuple[np.ndarray, dict[str, int]]:
        """(the (len(citekeys),) bool mask of the documents these filters allow, {field: how many of those
        documents have no value for it}); ``facets`` a ``metadata.Facets`` (or a ``FacetTable``),
        ``citekeys`` the index's citekeys in document order (a list or a ``StringTable``)."""
        table = facets if isinstance(facets, FacetTable) else FacetTable(facets, citekeys)
        return table.mask(self)

    def describe(self) -> str:
        parts = []
        if self.year is not None:
            lo, hi = self.year
            parts.append(f"year {'' if lo is None else lo}..{'' if hi is None else hi}")
        for name in ("author", "keyword", "type"):
            if getattr(self, name):
                parts.append(f"{name} {' or '.join(getattr(self, name))}")
        if self.venue is not None:
            parts.append(f"venue ~ {self.venue}")
        if self.keys is not None:
            parts.append(f"{len(self.keys)} citekey(s)")
        if self.topic:
            parts.append(f"topic {' or '.join(map(str, self.topic))}")
        parts.extend(o.describe() for o in self.also)
        return " and ".join(parts)


def to_filters(value, where: str = "filters") -> Filters | None:
    """None, a Filters or a dict as a Filters (None when it filters nothing)."""
    if value is None:
        return None
    f = Filters.from_dict(value, where)
    return None if f.is_empty() else f


class FacetTable:
    """The values filters compare, as columns over an index's documents (``engine/index/facets.py``):
    the index's own, memory-mapped (``arrays``: written with its generation; ``verify(field)`` raises
    ``IndexCorrupt`` unless that field's arrays are sound, called once before they are first read), or
    built here from a ``metadata.Facets`` (``facets``: the embed store, the citation graph). A mask is a
    few array compares; a venue is matched over the distinct venues' bytes. ``topics``: the path of
    ``content/topics.json``, read when a topic filter first needs it (None: topic filters refused)."""

    def __init__(self, facets, citekeys, arrays: dict | None = None, verify=None, topics: Path | None = None):
        from chitragupta.engine.index.facets import columns

        self.citekeys = citekeys  # a list or a (sorted) StringTable
        self.n = len(citekeys)
        self._arrays = columns(facets, citekeys) if arrays is None else arrays
        self._verify = verify
        self._topics = topics
        self._ready: dict[str, tuple] = {}
        self._doc_of_key: dict | None = None

    def _field(self, name: str) -> tuple:
        """(ptr, ids, table, has) of a text field, (year, has) or (topic, has, the topic ids that exist,
        ``stamp``); verified on first use."""
        from chitragupta.engine.index.facets import NO_YEAR, names_of
        from chitragupta.engine.index.strings import StringTable

        got = self._ready.get(name)
        if name == "topic":
            now = self.stamp(("topic",))
            if got is None or got[3] != now:  # (read again when enrich rewrote it)
                got = self._ready[name] = self._topic_column() + (now,)
        elif got is None:
            a, names = self._arrays, names_of(name)
            if self._verify is not None:
                self._verify(name)
            if name == "year":
                year = np.asarray(a["facet_year"])
                got = (year, year != NO_YEAR)
            else:
                ptr = np.asarray(a[names[0]])
                got = (ptr, np.asarray(a[names[1]]), StringTable(a[names[2]], a[names[3]]), ptr[1:] != ptr[:-1])
            self._ready[name] = got
        return got

    def stamp(self, fields) -> tuple | None:
        """What a mask over ``fields`` (a Filters, or field names) depends on beyond the index: the topics
        file's size, mtime and inode when a topic is filtered (a cache of masks keys on it), else None."""
        if "topic" not in (fields.fields_used() if isinstance(fields, Filters) else fields) or self._topics is None:
            return None
        try:
            st = self._topics.stat()
        except OSError:
            return ()
        return st.st_size, st.st_mtime_ns, st.st_ino

    def _topic_column(self) -> tuple:
        """Each document's topic (``content/topics.json``'s assignments; -2: none), who has one, the ids."""
        from chitragupta.files import read_limited

        if self._topics is None:
            raise UsageError("the topic filter is not available here (it needs the workspace's content/topics.json)")
        shown, fix = f"{self._topics.parent.name}/{self._topics.name}", "run `chitragupta enrich --stages bertopic`"
        try:
            d = json.loads(read_limited(self._topics, TOPICS_LIMIT, follow=True))
            topics = {t["id"] for t in d["topics"]}
            pairs = [(k, t) for k, t in d["assignments"].items() if type(t) is int]
        except FileNotFoundError:
            raise UsageError(f"the topic filter: this workspace has no topics ({shown} is missing); {fix} first") \
                from None
        except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError) as err:
            raise UsageError(f"the topic filter: {shown} is not a topics file ({type(err).__name__}: "
                             f"{str(err)[:120]}); {fix} again") from None
        col = np.full(self.n, -2, dtype=np.int64)
        docs = self._doc_ids([k for k, _ in pairs])
        ok = docs >= 0
        col[docs[ok]] = np.asarray([t for _, t in pairs], dtype=np.int64)[ok]
        return col, col != -2, {t for t in topics if type(t) is int}

    def has(self, name: str) -> np.ndarray:
        """The (n,) bool mask of the documents with a value for field ``name``."""
        return self._field(name)[1 if name in ("year", "topic") else 3]

    def _any(self, name: str, codes: list[int]) -> np.ndarray:
        """The documents holding any of the values at ``codes`` of field ``name``'s table."""
        ptr, ids = self._field(name)[:2]
        m = np.zeros(self.n, dtype=bool)
        codes = [c for c in codes if c >= 0]
        if codes:
            at = np.flatnonzero(ids == codes[0] if len(codes) == 1 else np.isin(ids, codes))
            m[np.searchsorted(ptr, at, side="right") - 1] = True
        return m

    def _values(self, name: str, values) -> np.ndarray:
        return self._any(name, self._field(name)[2].find_many(values))

    def _containing(self, name: str, needle: str, most: int | None = None) -> list[int]:
        """Positions in field ``name``'s table of the values that hold ``needle`` (a byte search: UTF-8
        keeps characters whole), the first ``most`` of them."""
        table = self._field(name)[2]
        if not needle:
            return list(range(len(table)))[:most]
        blob, off, nb = bytes(table.blob), table.offsets, needle.encode("utf-8", "surrogatepass")
        out, i = [], blob.find(nb)
        while i >= 0 and (most is None or len(out) < most):
            e = int(np.searchsorted(off, i, side="right")) - 1
            end = int(off[e + 1])
            if i + len(nb) <= end:
                out.append(e)
                i = blob.find(nb, end)
            else:
                i = blob.find(nb, i + 1)
        return out

    def _doc_ids(self, keys: list[str]) -> np.ndarray:
        """The document of each citekey (-1: not in the index)."""
        if hasattr(self.citekeys, "find_many"):
            return np.asarray(self.citekeys.find_many(keys), dtype=np.int64).reshape(-1)
        if self._doc_of_key is None:
            self._doc_of_key = {k: d for d, k in enumerate(self.citekeys)}
        return np.fromiter((self._doc_of_key.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))

    def mask(self, f: Filters) -> tuple[np.ndarray, dict[str, int]]:
        """(the (n,) bool mask of the documents ``f`` allows, {field: how many documents have no value
        for it})."""
        m = np.ones(self.n, dtype=bool)
        if f.year is not None:
            lo, hi = f.year
            year, has = self._field("year")
            m &= has
            if lo is not None:
                m &= year >= lo
            if hi is not None:
                m &= year <= hi
        for name in ("author", "keyword", "type"):
            if getattr(f, name):
                m &= self._values(name, getattr(f, name))
        if f.venue is not None:
            m &= self._any("venue", self._containing("venue", f.venue))
        if f.keys is not None:
            docs = self._doc_ids(sorted(f.keys))
            keys = np.zeros(self.n, dtype=bool)
            keys[docs[docs >= 0]] = True
            m &= keys
        if f.topic:
            m &= np.isin(self._field("topic")[0], f.topic)
        for o in f.also:
            m &= self.mask(o)[0]
        missing = {name: int(self.n - np.count_nonzero(self.has(name)))
                   for name in f.fields_used() if name != "keys"}
        return m, missing

    def notes(self, f: Filters, mask: np.ndarray, missing: dict[str, int]) -> list[Note]:
        """What ``f`` did that its user would not guess (module docstring); ``mask``, ``missing``: its mask."""
        out = [Note("filter", f"{n} source(s) have no {name} and were excluded by the {name} filter")
               for name, n in missing.items() if n]
        for g in (f,) + f.also:
            if g.keys is not None:
                out += self._keys_notes(g.keys)
            for k in g.keyword:
                if self._field("keyword")[2].find(k) < 0:
                    near = [self._field("keyword")[2][i] for i in self._containing("keyword", k, 3)]
                    out.append(Note("filter", f"no source has the keyword {k!r} (a keyword matches whole)"
                                    + (f"; keywords holding it: {', '.join(map(repr, near))}" if near else "")))
            have = self._field("topic")[2] if g.topic else {}
            gone = [t for t in g.topic if t not in have]
            if gone:
                what = f"its topics are {min(have)}..{max(have)}" if have else "it holds none"
                out.append(Note("filter", f"no topic {', '.join(map(str, gone))} in {self._topics.name}: {what}"))
        if self.n and not mask.any():
            out.append(Note("filter", f"the filters ({f.describe()}) excluded every source"))
        return out

    def _keys_notes(self, keys: frozenset) -> list[Note]:
        if not keys:
            return [Note("filter", "the citekeys filter lists no citekey, so it excluded every source")]
        wanted = sorted(keys)
        absent = [k for k, d in zip(wanted, self._doc_ids(wanted).tolist()) if d < 0]
        if not absent:
            return []
        shown = [k + (f" (did you mean {near!r}?)" if (near := self._nearest(k)) else "") for k in absent[:5]]
        more = f", and {len(absent) - 5} more" if len(absent) > 5 else ""
        return [Note("filter", f"{len(absent)} of {len(wanted)} citekey(s) are not in the library: "
                               f"{', '.join(shown)}{more}")]

    def _nearest(self, key: str) -> str | None:
        """The library citekey closest to ``key`` (difflib's ratio at least 0.75) among all of them in a
        library of up to ``NEAREST_ALL`` sources, else among the 64 that sort next to it; or None."""
        table = self.citekeys if hasattr(self.citekeys, "find") else sorted(self.citekeys)
        if len(table) <= NEAREST_ALL:
            near = table.to_list() if hasattr(table, "to_list") else table
        else:
            at = bisect_left(table, key)  # (a StringTable decodes only the strings the search looks at)
            near = [table[i] for i in range(max(0, at - 32), min(len(table), at + 32))]
        got = difflib.get_close_matches(key, near, n=1, cutoff=0.75)
        return got[0] if got else None


def per_query(filters, n: int, where: str = "filters") -> list | None:
    """``filters`` as given to ``rank_many`` (None, a Filters, a dict, or a list of one such entry per
    query) as a list of ``n`` entries, each None or a Filters; None when no query is filtered."""
    if isinstance(filters, (list, tuple)):
        if len(filters) != n:
            raise UsageError(f"{where}: a list of {len(filters)} entries for {n} queries (one per query, or one "
                             "Filters or object for all)")
        out = [to_filters(f, f"{where}[{q}]") for q, f in enumerate(filters)]
    else:
        one = to_filters(filters, where)
        out = [one] * n
    return None if all(f is None for f in out) else out


def filter_notes(ranked, q: int) -> list:
    """Query ``q``'s filter notes on a ``Ranked`` (none when it was not filtered)."""
    notes = getattr(ranked, "filter_notes", None)
    return list(notes[q]) if notes else []
