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

A source with no value for a filtered field (no year, no author, ...) is excluded, and counted (the
notes say how many). ``merge`` ANDs two filters (a batch line's own on top of the command line's).
The mask is applied by the scorers before top-k (``engine/search/scoring.py``), never to a ranked list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from chitragupta.errors import UsageError

__all__ = ["Filters", "FacetTable", "FIELDS", "to_filters", "per_query", "filter_notes"]

FIELDS = ("year", "author", "keyword", "venue", "type", "keys")
_ALLOWED = {
    "year": 'a year (2019) or a range "2015..2020", "2015..", "..2020"',
    "author": "a family name or a list of them",
    "keyword": "a keyword or a list of them",
    "venue": "a string (matched as a case-insensitive substring)",
    "type": "an entry type (article, inproceedings, ...) or a list of them",
    "keys": "a list of citekeys",
}
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
        parts.extend(o.describe() for o in self.also)
        return " and ".join(parts)


def to_filters(value, where: str = "filters") -> Filters | None:
    """None, a Filters or a dict as a Filters (None when it filters nothing)."""
    if value is None:
        return None
    f = Filters.from_dict(value, where)
    return None if f.is_empty() else f


class FacetTable:
    """The facets of an index's documents, looked up by value: built once per index generation, so a
    filter's mask costs a few array operations and a pass over the distinct venues."""

    def __init__(self, facets, citekeys):
        keys = citekeys.to_list() if hasattr(citekeys, "to_list") else list(citekeys)
        n = self.n = len(keys)
        at = {k: i for i, k in enumerate(facets.citekeys)}
        rows = np.array([at.get(k, -1) for k in keys], dtype=np.int64)
        self.doc_of_key = {k: d for d, k in enumerate(keys)}
        self.year = np.zeros(n, dtype=np.int64)
        self.has = {name: np.zeros(n, dtype=bool) for name in ("year", "author", "keyword", "venue", "type")}
        self.by_family: dict[str, list[int]] = {}
        self.by_keyword: dict[str, list[int]] = {}
        self.by_type: dict[str, list[int]] = {}
        self.by_venue: dict[str, list[int]] = {}
        for d, r in enumerate(rows.tolist()):
            if r < 0:
                continue
            y = facets.year[r]
            if y is not None:
                self.year[d] = y
                self.has["year"][d] = True
            for name, values, index in (("author", facets.families[r], self.by_family),
                                        ("keyword", facets.keywords[r], self.by_keyword)):
                if values:
                    self.has[name][d] = True
                    for v in values:
                        index.setdefault(v, []).append(d)
            for name, v, index in (("type", facets.type[r], self.by_type), ("venue", facets.venue[r], self.by_venue)):
                if v:
                    self.has[name][d] = True
                    index.setdefault(v, []).append(d)

    def _any(self, index: dict, values) -> np.ndarray:
        m = np.zeros(self.n, dtype=bool)
        for v in values:
            got = index.get(v)
            if got:
                m[got] = True
        return m

    def mask(self, f: Filters) -> tuple[np.ndarray, dict[str, int]]:
        m = np.ones(self.n, dtype=bool)
        if f.year is not None:
            lo, hi = f.year
            m &= self.has["year"]
            if lo is not None:
                m &= self.year >= lo
            if hi is not None:
                m &= self.year <= hi
        if f.author:
            m &= self._any(self.by_family, f.author)
        if f.keyword:
            m &= self._any(self.by_keyword, f.keyword)
        if f.type:
            m &= self._any(self.by_type, f.type)
        if f.venue is not None:
            m &= self._any(self.by_venue, [v for v in self.by_venue if f.venue in v])
        if f.keys is not None:
            m &= self._keys(f.keys)
        for o in f.also:
            m &= self.mask(o)[0]
        missing = {name: int(self.n - np.count_nonzero(self.has[name]))
                   for name in f.fields_used() if name != "keys"}
        return m, missing

    def _keys(self, keys) -> np.ndarray:
        m = np.zeros(self.n, dtype=bool)
        ids = [self.doc_of_key[k] for k in keys if k in self.doc_of_key]
        if ids:
            m[ids] = True
        return m


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
