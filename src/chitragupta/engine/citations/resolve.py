"""Resolution: which library source a parsed reference entry names, and which works that the library
lacks its sources cite.

    lib = Library.from_rows(ledger.rows())                   # the library's sources as they are matched
    res = resolve(lib, {citekey: [Entry, ...]})              # each entry's source (or why none)
    res.target[(citing, i)]                                  # -> a library citekey, or None
    res.missing                                              # the entries that name no library source, as works

- **Identifiers first.** An entry and a library source that both carry a DOI or an arXiv id are the same
  work when one of them is equal, and different works when both carry the same kind of id and it differs
  (a title match is then refused). A library source's arXiv id is read from its DOI (``10.48550/arxiv.X``),
  its venue (Google Scholar's ``arXiv preprint arXiv:X``) or its title; an entry's from its own fields
  or DOI. An id that two library sources share names neither (ambiguous).
- **Else the title**, normalised (``norm_title``: case and accents folded, a hyphen inside a word dropped,
  other punctuation a space, a few function words left out), with the year within one. Two titles are
  close when rapidfuzz's ``fuzz.ratio`` of the normalised forms is at least ``TITLE_MIN`` (``TITLE_MIN_NO_YEAR``
  when either year is unknown). The title the entry parser took may be wrong: when it is close to no
  candidate, a library title of two words or more is compared with each sentence of the entry's text
  (cut at ". ", "? ", "! " and quotes), by the same bar.
- **Never a guess.** When two library sources are about equally close (scores within ``AMBIGUOUS_GAP``),
  the entry stays unresolved, and it is not a missing work either.
- **A source never cites itself**: an entry that names its own source (as closely as any other) is dropped.
- **Missing works**: the entries left (not resolved, not ambiguous, not self) are joined into works by the
  same rules (an equal DOI or arXiv id; the same normalised title with the years a chain one apart; else
  close titles with the year within one); a work's fields are its entries' most common ones.

Candidates come from blocking, never from every pair: an entry is compared with a title only when it
holds one of the title's ``BLOCK_KEYS`` rarest words and ``BLOCK_SHARE`` of all its words (sparse
incidence matrices, scipy). A key held by more than ``BLOCK_BUDGET`` rows is too common to block on: a
title whose keys are all so common is matched by its exact normalised form only. So the work is bounded
by ``BLOCK_BUDGET`` candidates a key, whatever the library or a hostile list of 10,000 entries holds.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from chitragupta.engine.library.metadata import _NO_DECOMPOSE, norm_doi

__all__ = ["norm_title", "arxiv_of", "entry_ids", "Library", "LibrarySource", "Resolution", "MissingWork",
           "resolve", "kept", "TITLE_MIN", "TITLE_MIN_NO_YEAR", "AMBIGUOUS_GAP", "BLOCK_BUDGET"]

TITLE_MIN = 90.0  # fuzz.ratio of the normalised titles, years known and within one
TITLE_MIN_NO_YEAR = 95.0  # ... when either year is unknown
AMBIGUOUS_GAP = 3.0  # a second source this close to the best: ambiguous, left unresolved
BLOCK_SHARE = 0.6  # blocking: a candidate holds at least this share of the title's words ...
BLOCK_KEYS = 2  # ... and one of its two rarest
BLOCK_BUDGET = 2000  # rows a blocking key may hold; a key held by more blocks nothing
_PAIRS_AT_ONCE = 1 << 20  # candidate pairs whose overlaps are counted at a time (bounded temporaries)
_STOP = frozenset("a an the of and or for in on to with via by from at as is are its into using".split())
_HYPHEN = re.compile(r"[-\u2010\u2011](?<=\w.)\s*(?=\w)")  # (the hyphen first: searched for, not tried everywhere)
_WORD = re.compile(r"[^\W_]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_CONTEXT = re.compile(r"arxiv(?:\s*preprint)?(?:\.org/(?:abs|pdf)/|\s*(?:abs/|:|\.|\s))\s*"
                            r"((?:\d{4}\.\d{4,5})|(?:[a-z\-]+(?:\.[a-z]{2})?/\d{7}))", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$")
_ARXIV_LEAD = re.compile(r"^(?:arxiv:|https?://arxiv\.org/(?:abs|pdf)/)")
_ARXIV_TAIL = re.compile(r"(?:v\d+)?(?:\.pdf)?$")
_ARXIV_ID = re.compile(r"(\d{4}\.\d{4,5})|[a-z\-]+(?:\.[a-z]{2})?/\d{7}")


def _fold_run(m) -> str:
    """A run of non-ASCII characters as ``metadata.fold`` makes it (character by character, as in its text)."""
    return "".join(c for c in unicodedata.normalize("NFKD", m.group().translate(_NO_DECOMPOSE))
                   if not unicodedata.combining(c))


def _tokens(s: str | None) -> list[str]:
    """A text's words as titles are compared: folded (``metadata.fold``: accents dropped, case folded; the
    non-ASCII runs alone decomposed), a hyphen inside a word dropped ("pre-training" and "pretraining"
    agree), every other run of punctuation a break."""
    if not s:
        return []
    return _WORD.findall(_HYPHEN.sub("", (s if s.isascii() else _NON_ASCII.sub(_fold_run, s)).casefold()))


def norm_title(s: str | None) -> str:
    """A title as it is compared: ``_tokens`` less the function words, joined by spaces."""
    return " ".join(t for t in _tokens(s) if t not in _STOP)


def _norm_arxiv(value: str | None) -> str | None:
    """A bare arXiv id from a printed one, or None (YYMM must name a month: "2022.99999" is a misprint)."""
    if not value:
        return None
    v = _ARXIV_TAIL.sub("", _ARXIV_LEAD.sub("", value.strip().lower(), count=1))
    m = _ARXIV_ID.fullmatch(v)
    return v if m and (not m.group(1) or 1 <= int(v[2:4]) <= 12) else None


def arxiv_of(*texts: str | None, doi: str | None = None) -> str | None:
    """The arXiv id an arXiv DOI or a text naming arXiv gives, or None."""
    m = _ARXIV_DOI.match(doi or "")
    if m:
        return _norm_arxiv(m.group(1))
    for t in texts:
        if t and "arxiv" in t.lower():
            m = _ARXIV_CONTEXT.search(t)
            if m:
                return _norm_arxiv(m.group(1))
            for m in _ARXIV_NEW.finditer(t):  # "CoRR abs/1706.03762" with arXiv named elsewhere
                if 1 <= int(m.group(1)[2:4]) <= 12:
                    return m.group(1)
    return None


def entry_ids(e) -> tuple[str | None, str | None]:
    """An entry's (DOI that is not arXiv's, arXiv id) from its printed DOI, arXiv id and URL."""
    doi = norm_doi(e.doi) if e.doi else None
    arxiv = _norm_arxiv(e.arxiv) or arxiv_of(e.url, doi=doi)
    return (doi if doi and not _ARXIV_DOI.match(doi) else None), arxiv


class LibrarySource(NamedTuple):
    citekey: str
    title: str
    year: int | None = None
    doi: str | None = None  # normalised, not an arXiv DOI
    arxiv: str | None = None


class Library:
    """The library's sources as resolution matches them (``from_rows``: ledger rows)."""

    def __init__(self, sources: list[LibrarySource]):
        self.sources = list(sources)
        self.keys = [s.citekey for s in self.sources]
        self.pos = {k: i for i, k in enumerate(self.keys)}
        self.norm = [norm_title(s.title) for s in self.sources]
        self.by_doi: dict[str, list[int]] = {}
        self.by_arxiv: dict[str, list[int]] = {}
        self.by_title: dict[str, list[int]] = {}
        for i, s in enumerate(self.sources):
            for index, value in ((self.by_doi, s.doi), (self.by_arxiv, s.arxiv), (self.by_title, self.norm[i])):
                if value:
                    index.setdefault(value, []).append(i)

    @classmethod
    def from_rows(cls, rows) -> "Library":
        """From ledger rows (``LedgerRow``: citekey, title, year, doi, venue)."""
        out = []
        for r in rows:
            doi = norm_doi(r.doi) if r.doi else None
            plain = doi if doi and not _ARXIV_DOI.match(doi) else None
            out.append(LibrarySource(r.citekey, r.title or "", r.year, plain, arxiv_of(r.venue, r.title, doi=doi)))
        return cls(out)

    def __len__(self) -> int:
        return len(self.sources)


@dataclass
class MissingWork:
    """Entries that name one work the library lacks. ``members``: (citing citekey, entry) pairs, in the
    order met; the fields are the members' most common values (``names``: the authors as printed)."""

    title: str
    year: int | None
    authors: tuple[str, ...]
    venue: str | None
    doi: str | None
    arxiv: str | None
    members: list = field(default_factory=list, repr=False)
    names: tuple[str, ...] = ()

    @property
    def citing(self) -> list[str]:
        return list(dict.fromkeys(k for k, _ in self.members))

    @property
    def count(self) -> int:
        return len(self.citing)

    def to_dict(self) -> dict:
        return {"title": self.title, "year": self.year, "authors": list(self.authors), "citing": self.citing,
                "count": self.count}


@dataclass
class Resolution:
    """What ``resolve`` found. ``target``: (citing citekey, entry position) -> library citekey or None;
    ``why``: for an unresolved entry, "ambiguous", "self" or "none"; ``missing``: every work of unresolved
    entries, in the order of its first entry (those cited once included)."""

    target: dict[tuple[str, int], str | None]
    why: dict[tuple[str, int], str]
    missing: list[MissingWork]


_SENTENCE = re.compile(r"(?<=[.?!])\s+|[\"\u201c\u201d]")


def _years_ok(a: int | None, b: int | None) -> bool:
    return a is None or b is None or abs(a - b) <= 1


def _title_score(ratio, a: str, b: str, ya: int | None, yb: int | None) -> float:
    """fuzz.ratio of two normalised titles when it passes the bar for the years given, else 0."""
    if not a or not b or not _years_ok(ya, yb):
        return 0.0
    s = ratio(a, b)
    return s if s >= (TITLE_MIN if ya is not None and yb is not None else TITLE_MIN_NO_YEAR) else 0.0


def _matrix(token_lists, ids: dict[str, int], grow: bool):
    """A CSR incidence matrix, a row per token list (``grow``: a new word gets an id, else is left out)."""
    from scipy import sparse

    indptr, indices = [0], []
    for toks in token_lists:
        if grow:
            for t in toks:
                ids.setdefault(t, len(ids))
        row = {ids[t] for t in toks if t in ids}
        indices.extend(row)
        indptr.append(len(indices))
    return sparse.csr_matrix((np.ones(len(indices), dtype=np.float32), np.asarray(indices, dtype=np.int64),
                              np.asarray(indptr, dtype=np.int64)), shape=(len(token_lists), max(len(ids), 1)))


def _blocking(rows, cols, share: float = BLOCK_SHARE, keys: int = BLOCK_KEYS):
    """Candidate (row, col) pairs: a row holding one of the column's ``keys`` rarest words (the fewest
    columns hold them) that at most ``BLOCK_BUDGET`` rows hold, and at least ``share`` of all its words."""
    from scipy import sparse

    rows = sparse.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.shape[0], cols.shape[1]))
    none = np.zeros(0, dtype=np.int64)
    if cols.nnz == 0 or rows.nnz == 0:
        return none, none
    df = np.bincount(cols.indices, minlength=cols.shape[1])
    held = np.bincount(rows.indices, minlength=cols.shape[1])
    coo = cols.tocoo()
    order = np.lexsort((df[coo.col], coo.row))
    r_sorted, c_sorted = coo.row[order], coo.col[order]
    pos = np.arange(len(order))
    start = np.maximum.accumulate(np.where(np.r_[True, r_sorted[1:] != r_sorted[:-1]], pos, 0))
    keep = (pos - start < keys) & (held[c_sorted] <= BLOCK_BUDGET)
    key_m = sparse.csr_matrix((np.ones(int(keep.sum()), dtype=np.float32), (r_sorted[keep], c_sorted[keep])),
                              shape=cols.shape)
    cand = (rows @ key_m.T).tocoo()
    r, c = cand.row.astype(np.int64), cand.col.astype(np.int64)
    need = np.ceil(np.diff(cols.indptr) * share)
    fits = np.diff(rows.indptr)[r] >= need[c]  # a row with fewer words than the share asks cannot hold them
    r, c = r[fits], c[fits]
    ok = np.zeros(len(r), dtype=bool)
    for a in range(0, len(r), _PAIRS_AT_ONCE):
        b = a + _PAIRS_AT_ONCE
        overlap = np.asarray(rows[r[a:b]].multiply(cols[c[a:b]]).sum(axis=1)).ravel()
        ok[a:b] = overlap >= need[c[a:b]]
    return r[ok], c[ok]


def resolve(library: Library, references: dict[str, list], *, cluster: bool = True) -> Resolution:
    """Resolve every entry of ``{citing citekey: [Entry]}`` against ``library``; join the rest into missing
    works (``cluster``; else none: what one source's ``refs`` needs)."""
    from rapidfuzz.fuzz import ratio

    flat = [(k, i, e) for k, entries in references.items() for i, e in enumerate(entries or ())]
    titles = [norm_title(e.title) for _k, _i, e in flat]
    ids = [entry_ids(e) for _k, _i, e in flat]
    cand: dict[int, list[int]] = {}
    if flat and len(library):
        vocab: dict[str, int] = {}
        lib_m = _matrix([t.split() for t in library.norm], vocab, grow=True)
        ent_m = _matrix([_tokens(e.text) + titles[j].split() for j, (_k, _i, e) in enumerate(flat)], vocab, False)
        for r, c in zip(*(x.tolist() for x in _blocking(ent_m, lib_m))):
            cand.setdefault(r, []).append(c)
    for j, t in enumerate(titles):
        for c in library.by_title.get(t, ()) if t else ():
            if c not in cand.setdefault(j, []):
                cand[j].append(c)
    target: dict[tuple[str, int], str | None] = {}
    why: dict[tuple[str, int], str] = {}
    unresolved = []
    for j, (k, i, e) in enumerate(flat):
        got, reason = _resolve_one(library, k, e, titles[j], ids[j], cand.get(j, ()), ratio)
        target[(k, i)] = got
        if reason:
            why[(k, i)] = reason
        if reason == "none":
            unresolved.append(j)
    missing = _cluster([flat[j] for j in unresolved], [titles[j] for j in unresolved],
                       [ids[j] for j in unresolved], ratio) if cluster else []
    return Resolution(target, why, missing)


def _resolve_one(library: Library, k: str, e, title: str, ids, cand, ratio) -> tuple[str | None, str | None]:
    """(the library citekey entry ``e`` of source ``k`` names, or None; why not: "self", "ambiguous", "none")."""
    doi, arx = ids
    me = library.pos.get(k, -1)
    by_id = set(library.by_doi.get(doi, ()) if doi else ()) | set(library.by_arxiv.get(arx, ()) if arx else ())
    if by_id:
        if me in by_id:
            by_id.discard(me)
            if not by_id:
                return None, "self"
        return (library.keys[by_id.pop()], None) if len(by_id) == 1 else (None, "ambiguous")
    scored: list[tuple[float, int]] = []
    fit = [c for c in cand if not ((doi and library.sources[c].doi and doi != library.sources[c].doi)
                                   or (arx and library.sources[c].arxiv and arx != library.sources[c].arxiv))]
    for c in fit:
        s = _title_score(ratio, title, library.norm[c], e.year, library.sources[c].year)
        if s > 0:
            scored.append((s, c))
    if not scored and fit:  # the title the entry parser took may be wrong: its text's sentences
        segs = [g for g in map(norm_title, _SENTENCE.split(e.text or "")) if " " in g]
        for c in fit:
            if " " in library.norm[c]:
                src = library.sources[c]
                s = max([_title_score(ratio, g, library.norm[c], e.year, src.year) for g in segs] or [0.0])
                if s > 0:
                    scored.append((s, c))
    if not scored:
        return None, "none"
    scored.sort(key=lambda t: -t[0])
    best, c0 = scored[0]
    if any(c == me and s >= best - AMBIGUOUS_GAP for s, c in scored):
        return None, "self"  # it names its own source (perhaps as well as another)
    if any(s >= best - AMBIGUOUS_GAP and c != c0 for s, c in scored[1:]):
        return None, "ambiguous"
    return library.keys[c0], None


def _cluster(flat, titles, ids, ratio) -> list[MissingWork]:
    """Unresolved entries into works (the module docstring), entries with neither a title nor an id left
    out; works in the order of their first entry, a work's entries in order."""
    keep = [j for j in range(len(flat)) if titles[j] or ids[j][0] or ids[j][1]]
    parent = list(range(len(flat)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)

    node_of: dict[tuple[str, int | None], int] = {}  # a (title, year) node -> its first entry
    id_of: dict[tuple[int, str], int] = {}  # a DOI (0) or an arXiv id (1) -> its first entry
    for j in keep:
        if titles[j]:
            union(node_of.setdefault((titles[j], flat[j][2].year), j), j)
        for x in (0, 1):
            if ids[j][x]:
                union(id_of.setdefault((x, ids[j][x]), j), j)
    nodes = [(t, y, j) for (t, y), j in node_of.items()]  # in the order of their first entry
    by_title: dict[str, list[tuple[int | None, int]]] = {}
    for t, y, j in nodes:
        by_title.setdefault(t, []).append((y, j))
    for ys in by_title.values():  # one title: years a chain one apart, an unknown year with the earliest known
        known = sorted((y, j) for y, j in ys if y is not None)
        for (y0, j0), (y1, j1) in zip(known, known[1:]):
            if y1 - y0 <= 1:
                union(j0, j1)
        for y, j in ys:
            if y is None:
                union((known[0] if known else ys[0])[1], j)
    if len(nodes) > 1:  # close titles (not the same one), with no id telling them apart
        m = _matrix([t.split() for t, _y, _j in nodes], {}, grow=True)
        rows, cols = _blocking(m, m)
        for a, b in set(zip(np.minimum(rows, cols).tolist(), np.maximum(rows, cols).tolist())):
            (ta, ya, ja), (tb, yb, jb) = nodes[a], nodes[b]
            if ta == tb or any(ids[ja][x] and ids[jb][x] and ids[ja][x] != ids[jb][x] for x in (0, 1)):
                continue
            if _title_score(ratio, ta, tb, ya, yb) > 0:
                union(ja, jb)
    groups: dict[int, list[tuple]] = {}
    for j in keep:
        groups.setdefault(find(j), []).append(flat[j])
    return [_work([(k, e) for k, _i, e in members]) for members in groups.values()]


def _work(members: list[tuple]) -> MissingWork:
    """A missing work of (citing citekey, entry) pairs: each field its entries' most common value."""
    es = [e for _k, e in members]
    authors = _most_common([tuple(e.authors) for e in es]) or ()
    names = next((tuple(e.names) for e in es if tuple(e.authors) == authors and len(e.names) == len(authors)), ())
    return MissingWork(_most_common([e.title for e in es]) or "", _most_common([e.year for e in es]), authors,
                       _most_common([e.venue for e in es]), _most_common([e.doi for e in es]),
                       _most_common([e.arxiv for e in es]), list(members), names)


def kept(references: dict[str, list], links) -> Resolution:
    """The ``Resolution`` kept as ``links`` ((citekey, n, target, why, work) rows: ``store``): an entry named
    there as it was, a work's members together; any other unresolved, a work of its own if titled or id'd."""
    rows = {(k, n - 1): (t, w, work) for k, n, t, w, work in links}
    target: dict[tuple[str, int], str | None] = {}
    why: dict[tuple[str, int], str] = {}
    groups: dict[tuple, list[tuple]] = {}
    for k, entries in references.items():
        for i, e in enumerate(entries):
            t, reason, work = rows.get((k, i), (None, None, None))
            target[(k, i)] = t
            if t is None:
                why[(k, i)] = reason or "none"
            if t is None and not reason and (work is not None or norm_title(e.title) or any(entry_ids(e))):
                groups.setdefault(("work", work) if work is not None else (k, i), []).append((k, e))
    return Resolution(target, why, [_work(m) for m in groups.values()])


def _most_common(values):
    """The most frequent non-empty value (the first met on a tie), or None."""
    got = Counter(v for v in values if v)
    if not got:
        return None
    top = max(got.values())
    return next(v for v in values if v and got[v] == top)
