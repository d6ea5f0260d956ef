"""Resolution: which library source a parsed reference entry names, and which works that the library
lacks several sources cite.

    lib = Library.from_rows(ledger.rows())                   # the library's sources as they are matched
    res = resolve(lib, all_references(ws))                   # each entry's source (or why none)
    res.target[(citing, i)]                                  # -> a library citekey, or None
    works = res.missing                                      # entries that name no library source, clustered

The rules (issue 31, item 2):

- **Identifiers first.** An entry and a library source that both carry a DOI or an arXiv id are the same
  work when one of them is equal, and different works when both carry the same kind of id and it differs
  (a title match is then refused). A library source's arXiv id is read from its DOI (``10.48550/arxiv.X``),
  its venue (Google Scholar's ``arXiv preprint arXiv:X``) or its title; an entry's from its own fields
  or DOI. An id that two library sources share names neither (ambiguous).
- **Else the title**, normalised (``norm_title``: case and accents folded, a hyphen inside a word dropped,
  other punctuation a space, a few function words left out), with the year within one. Two titles are
  close when rapidfuzz's ``fuzz.ratio`` of the normalised forms is at least ``TITLE_MIN`` (``TITLE_MIN_NO_YEAR``
  when either year is unknown). The title the entry parser took may be wrong (an author list it could not
  read, a venue swallowed): when it is close to no candidate, a library title of two words or more is
  compared with each sentence of the entry's text (cut at ". ", "? ", "! " and quotes), by the same bar.
- **Never a guess.** When two library sources are about equally close (scores within ``AMBIGUOUS_GAP``),
  the entry stays unresolved, and it is not a missing work either.
- **A source never cites itself**: an entry that names its own source (as closely as any other) is dropped.
- **Missing works**: the entries left (not resolved, not ambiguous, not self) are clustered by the same
  rules (an equal DOI or arXiv id; else close titles with the year within one) into one work each.

Speed: no pass over every (entry, source) pair in Python. Candidates come from a sparse product of
token-incidence matrices (scipy): an entry is compared with a source only when its text holds one of
the two rarest words of the source's title and most of the title's words (``_blocking``), so the work
grows with how common the rarest words are, never with the square of the library; a pair whose entry
holds fewer of the library's words than that share asks is dropped before its overlap is counted. With
many entries, or once numba is loaded (``_numba_loaded``), every entry's text and title are joined into
one ASCII buffer (``_Packed``: non-ASCII runs replaced as ``_tokens`` replaces them, once per distinct
run) and ``kernels/citewords.py`` reads it in one pass each: the library words each entry holds
(``vocab_pairs``), the normalised titles (``normalised``) and the blocking overlaps (``pair_overlaps``);
an entry with a text that stays non-ASCII is read per entry, as every entry is on the other path, and
``tests/engine/citations/test_resolve.py`` holds the two paths equal. The entries' fields are read as columns,
an entry with no candidate and no identifier is settled first, missing works are clustered over
(title, year) nodes and their fields counted for all works at once (``_modes``). The bench
(``python -m bench refs_graph``) times 1,000 sources x 40 entries beside indexing them.
"""

from __future__ import annotations

import gc
import re
import sys
import unicodedata
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from chitragupta.engine.library.metadata import _NO_DECOMPOSE, norm_doi

__all__ = ["norm_title", "arxiv_of", "Library", "LibrarySource", "Resolution", "MissingWork", "resolve",
           "TITLE_MIN", "TITLE_MIN_NO_YEAR", "AMBIGUOUS_GAP"]

TITLE_MIN = 90.0  # fuzz.ratio of the normalised titles, years known and within one
TITLE_MIN_NO_YEAR = 95.0  # ... when either year is unknown
AMBIGUOUS_GAP = 3.0  # a second source this close to the best: ambiguous, left unresolved
BLOCK_SHARE = 0.6  # blocking: a candidate holds at least this share of the title's words ...
BLOCK_KEYS = 2  # ... and one of its two rarest
_STOP = frozenset("a an the of and or for in on to with via by from at as is are its into using".split())
# a hyphen inside a word: "(?<=\w)[-\u2010\u2011]\s*(?=\w)" written hyphen first, so that the pattern is
# tried only where a hyphen stands (the same matches, a fraction of the time on a long text)
_HYPHEN = re.compile(r"[-\u2010\u2011](?<=\w[-\u2010\u2011])\s*(?=\w)")
_WORD = re.compile(r"[^\W_]+")
_ASCII_WORDS = bytes(c if 97 <= c <= 122 or 48 <= c <= 57 else 32 for c in range(256))  # [a-z0-9] kept
_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_CONTEXT = re.compile(r"arxiv(?:\s*preprint)?(?:\.org/(?:abs|pdf)/|\s*(?:abs/|:|\.|\s))\s*"
                            r"((?:\d{4}\.\d{4,5})|(?:[a-z\-]+(?:\.[a-z]{2})?/\d{7}))", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$")


def norm_title(s: str | None) -> str:
    """A title as it is compared: ``fold`` (case, accents), a hyphen inside a word dropped ("pre-training"
    and "pretraining" agree), every other run of punctuation a space, function words left out."""
    return " ".join([t for t in _tokens(s) if t not in _STOP])


def _tokens(s: str | None) -> list[str]:
    """``norm_title``'s words, function words kept (what blocking looks up)."""
    if not s:
        return []
    if not s.isascii():
        t = _NON_ASCII.sub(_ascii_run, s)  # quotes, dashes and accented letters as ASCII that tokenizes alike
        if t.isascii():
            s = t
    if s.isascii():  # the common case, 5x faster than the regex: bytes.translate to spaces, then split
        s = s.lower()
        if "-" in s:
            s = _HYPHEN.sub("", s)
        return s.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
    s = fold_text(s)
    if "-" in s or "\u2010" in s or "\u2011" in s:
        s = _HYPHEN.sub("", s)
    return _WORD.findall(s)


_FOLDED: dict[str, str] = {}  # a non-ASCII character -> what ``fold`` makes of it
_AS_ASCII: dict[str, str] = {}  # ... -> the ASCII that tokenizes the same, or the character (none does)
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_HYPHENS = frozenset("-\u2010\u2011")


def _fold_char(c: str) -> str:
    got = _FOLDED.get(c)
    if got is None:
        got = _FOLDED[c] = "".join(x for x in unicodedata.normalize("NFKD", c.translate(_NO_DECOMPOSE))
                                   if not unicodedata.combining(x)).casefold()
    return got


def _fold_run(m) -> str:
    return "".join(map(_fold_char, m.group()))


def fold_text(s: str) -> str:
    """``chitragupta.engine.library.metadata.fold`` (accents dropped, case folded, white space collapsed),
    the same string, made per character: NFKD decomposes, and case folding maps, one character at a time,
    and canonical reordering moves only combining marks, which are dropped; so each non-ASCII character's
    folded form is found once (and kept), and only the runs of them are replaced (the entries' texts are
    long and nearly all ASCII: ``fold`` tested every character in Python, half the graph's time)."""
    if not s.isascii():
        s = _NON_ASCII.sub(_fold_run, s)
    return " ".join(s.casefold().split())


def _ascii_char(c: str) -> str:
    """What a non-ASCII character may be replaced by before ``_tokens``' ASCII path, giving the same
    words: its folded form when that is ASCII; "#" when it folds to marks only (no letter or digit, no
    space, no hyphen: a quote, a dash, a dagger), which part words as it does and never stands beside
    a hyphen the way a letter or a space would; else the character itself (the text takes the full path)."""
    got = _AS_ASCII.get(c)
    if got is None:
        f = _fold_char(c)
        if f.isascii():
            got = f
        elif not any(x.isalnum() or x == "_" or x.isspace() or x in _HYPHENS or _WORD.match(x) for x in f):
            got = "#"
        else:
            got = c
        _AS_ASCII[c] = got
    return got


def _ascii_run(m) -> str:
    return "".join(map(_ascii_char, m.group()))


def _ascii_run_text(run: str) -> str:
    return "".join(map(_ascii_char, run))


_ASCII_HANDLER = "chitragupta-citations-ascii"
_MARK = 0x7F  # DEL: what a run with no ASCII form is encoded as (an entry holding it is read per entry)
_RUNS: dict[str, str] = {}  # a run of non-ASCII characters -> its ASCII form or DEL (at most _RUNS_MAX kept)
_RUNS_MAX = 1 << 16


def _ascii_or_mark(exc: UnicodeEncodeError) -> tuple[str, int]:
    """The ASCII encoder's error handler for ``_Packed``: a run of non-ASCII characters (the encoder hands
    over the whole run) as ``_ascii_run`` makes it, or DEL when that is not ASCII."""
    run = exc.object[exc.start:exc.end]
    got = _RUNS.get(run)
    if got is None:
        t = _ascii_run_text(run)
        got = t if t.isascii() else chr(_MARK)
        if len(_RUNS) < _RUNS_MAX:
            _RUNS[run] = got
    return got, exc.end


def _register_ascii_handler() -> None:
    import codecs

    try:
        codecs.lookup_error(_ASCII_HANDLER)
    except LookupError:
        codecs.register_error(_ASCII_HANDLER, _ascii_or_mark)


_ARXIV_LEAD = re.compile(r"^(?:arxiv:|https?://arxiv\.org/(?:abs|pdf)/)")
_ARXIV_TAIL = re.compile(r"(?:v\d+)?(?:\.pdf)?$")
_ARXIV_ID_NEW = re.compile(r"\d{4}\.\d{4,5}")
_ARXIV_ID_OLD = re.compile(r"[a-z\-]+(?:\.[a-z]{2})?/\d{7}")


def _norm_arxiv(value: str | None) -> str | None:
    if not value:
        return None
    if _ARXIV_ID_NEW.fullmatch(value):  # already bare (what the entry parser gives): nothing to strip
        return value if 1 <= int(value[2:4]) <= 12 else None
    v = value.strip().lower()
    v = _ARXIV_LEAD.sub("", v, count=1)
    v = _ARXIV_TAIL.sub("", v)
    if _ARXIV_ID_NEW.fullmatch(v):
        return v if 1 <= int(v[2:4]) <= 12 else None  # YYMM: "2022.99999" is a misprint, not an id
    return v if _ARXIV_ID_OLD.fullmatch(v) else None


def arxiv_of(*texts: str | None, doi: str | None = None) -> str | None:
    """The arXiv id (``2005.14165``, ``hep-th/9901001``; no version) an arXiv DOI or a text naming arXiv
    gives, or None."""
    if doi:
        m = _ARXIV_DOI.match(doi)
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


def _plain_doi(doi: str | None) -> str | None:
    """A DOI that is not arXiv's own (those are compared as arXiv ids)."""
    return doi if doi and not _ARXIV_DOI.match(doi) else None


@dataclass(frozen=True)
class LibrarySource:
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
        self.years = [s.year for s in self.sources]
        self.by_doi: dict[str, list[int]] = {}
        self.by_arxiv: dict[str, list[int]] = {}
        self.by_title: dict[str, list[int]] = {}
        for i, s in enumerate(self.sources):
            if s.doi:
                self.by_doi.setdefault(s.doi, []).append(i)
            if s.arxiv:
                self.by_arxiv.setdefault(s.arxiv, []).append(i)
            if self.norm[i]:
                self.by_title.setdefault(self.norm[i], []).append(i)

    @classmethod
    def from_rows(cls, rows) -> "Library":
        """From ledger rows (``LedgerRow``: citekey, title, year, doi, venue)."""
        out = []
        for r in rows:
            doi = norm_doi(r.doi) if r.doi else None
            out.append(LibrarySource(r.citekey, r.title or "", r.year, _plain_doi(doi),
                                     arxiv_of(r.venue, r.title, doi=doi)))
        return cls(out)

    def __len__(self) -> int:
        return len(self.sources)


@dataclass
class MissingWork:
    """Entries of several sources that name one work the library lacks. ``members``: (citing citekey,
    entry) pairs, in the order met; the fields are the members' most common values."""

    title: str
    year: int | None
    authors: tuple[str, ...]
    venue: str | None
    doi: str | None
    arxiv: str | None
    members: list = field(default_factory=list, repr=False)
    # each member's (citing citekey, entry position), where known (what ``content/citation_graph.json`` keeps)
    at: list = field(default_factory=list, repr=False, compare=False)

    @property
    def citing(self) -> list[str]:
        return list(dict.fromkeys(k for k, _ in self.members))


@dataclass
class Resolution:
    """What ``resolve`` found. ``target``: (citing citekey, entry position) -> library citekey or None;
    ``why``: for an unresolved entry, "ambiguous", "self" or "none"; ``missing``: every cluster of
    unresolved entries (those cited once included; ``MissingWork.citing`` counts the sources)."""

    target: dict[tuple[str, int], str | None]
    why: dict[tuple[str, int], str]
    missing: list[MissingWork]


def _entry_ids(e) -> tuple[str | None, str | None]:
    return _ids_of(getattr(e, "doi", None), getattr(e, "arxiv", None), getattr(e, "url", None))


def _ids_of(doi_s, arxiv_s, url) -> tuple[str | None, str | None]:
    """An entry's (DOI that is not arXiv's, arXiv id) from its printed DOI, arXiv id and URL."""
    if doi_s is None and arxiv_s is None and url is None:
        return None, None  # most entries print none of them
    doi = norm_doi(doi_s) if doi_s else None
    arxiv = _norm_arxiv(arxiv_s) or arxiv_of(url, doi=doi)
    return _plain_doi(doi), arxiv


_SENTENCE = re.compile(r"(?<=[.?!])\s+|[\"\u201c\u201d]")


def _segments(text: str | None, shortest: int = 0) -> list[str]:
    """An entry's text cut at sentence ends and quotes, each piece normalised: where its title is when the
    parser took another piece for it. ``shortest``: the shortest normalised title a piece is compared
    with; an ASCII piece too short to reach ``TITLE_MIN`` against it is left out unnormalised
    (normalising never lengthens an ASCII piece, and fuzz.ratio of lengths a < b is at most
    200 a / (a + b): below the bar T when a (200 - T) < T b)."""
    if not text:
        return []
    bar = min(TITLE_MIN, TITLE_MIN_NO_YEAR)
    floor, per = bar * shortest, 200.0 - bar
    return [g for g in (norm_title(p) for p in _SENTENCE.split(text) if len(p) * per >= floor or not p.isascii())
            if " " in g]


def _years_ok(a: int | None, b: int | None) -> bool:
    return a is None or b is None or abs(a - b) <= 1


def _title_score(ratio, a: str, b: str, ya: int | None, yb: int | None) -> float:
    """fuzz.ratio of two normalised titles when it passes the bar for the years given, else 0."""
    if not a or not b or not _years_ok(ya, yb):
        return 0.0
    s = ratio(a, b)
    return s if s >= (TITLE_MIN if ya is not None and yb is not None else TITLE_MIN_NO_YEAR) else 0.0


class _Vocab:
    """Token ids for blocking, and sparse incidence rows."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def matrix(self, token_lists, grow: bool, more=None):
        """One row per token list, a 1 for each of its words (``grow``: new words get ids; else unknown
        words are left out); ``more``: a second list of words per row, joined to the first (not grown)."""
        from scipy import sparse

        indptr, indices = [0], []
        ids = self.ids
        get = ids.get
        for k, toks in enumerate(token_lists):
            if grow:
                for t in toks:
                    if t not in ids:
                        ids[t] = len(ids)
                row = {ids[t] for t in toks}
            else:  # the ids of the known words, as a set built in C (an unknown word gives None, dropped)
                row = set(map(get, toks))
                if more is not None:
                    row.update(map(get, more[k]))
                row.discard(None)
            indices.extend(row)
            indptr.append(len(indices))
        data = np.ones(len(indices), dtype=np.float32)
        return sparse.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
                                 shape=(len(token_lists), max(len(ids), 1)))


KERNEL_FROM_BYTES = 1 << 23  # entry text above which it is read in numba even when numba is not loaded


def _numba_loaded() -> bool:
    return "numba" in sys.modules


def _numba_pays(texts) -> bool:
    """Whether the entries are read by ``kernels.citewords`` (the same results as per entry in Python):
    once numba is loaded, or for more text than its start costs."""
    return _numba_loaded() or sum(len(t) for t in texts if t) >= KERNEL_FROM_BYTES


class _Packed:
    """Every entry's text and title as ``kernels.citewords`` reads them: in row order (text, title),
    joined by NULs (neither a word character nor white space: no word or dropped hyphen reaches over
    one), encoded to ASCII with each run of non-ASCII characters replaced as ``_tokens`` replaces it
    (``_ascii_run``, by the encoder's error handler). ``slow``: the rows (ascending) whose text or title
    holds a NUL, a run with no ASCII form or a DEL; their pieces are empty here and they are read per
    entry. Piece ``2 j`` is row j's text, ``2 j + 1`` its title: ``buf[starts[p]:ends[p]]``."""

    def __init__(self, texts, raw_titles):
        n = len(texts)
        pieces: list[str] = [""] * (2 * n)
        pieces[0::2] = [t or "" for t in texts]
        pieces[1::2] = [t or "" for t in raw_titles]
        slow: set[int] = set()
        whole = "\x00".join(pieces)
        if whole.count("\x00") != 2 * n - 1:
            slow = {k // 2 for k, p in enumerate(pieces) if "\x00" in p}
            for j in slow:
                pieces[2 * j] = pieces[2 * j + 1] = ""
            whole = "\x00".join(pieces)
        if whole.isascii():
            buf = np.frombuffer(whole.encode("ascii"), dtype=np.uint8)
        else:  # each run of non-ASCII characters replaced by the encoder's error handler (``_ascii_or_mark``)
            _register_ascii_handler()
            buf = np.frombuffer(whole.encode("ascii", _ASCII_HANDLER), dtype=np.uint8)
            marks = np.flatnonzero(buf == _MARK)
            if len(marks):  # a run with no ASCII form (or a DEL of the text's own): its entry is read per entry
                seps = np.flatnonzero(buf == 0)
                slow |= set((np.searchsorted(seps, marks) // 2).tolist())
        ends = np.flatnonzero(buf == 0)
        if len(ends) != 2 * n - 1:
            raise AssertionError("a character made ASCII gave a NUL")
        self.ends = np.append(ends, buf.shape[0]).astype(np.int64)
        self.starts = np.empty_like(self.ends)
        self.starts[0] = 0
        self.starts[1:] = self.ends[:-1] + 1
        self.slow = sorted(slow)
        if self.slow:  # their pieces are not read
            rows = np.asarray(self.slow, dtype=np.int64)
            for half in (0, 1):
                self.starts[2 * rows + half] = self.ends[2 * rows + half]
        self.buf = buf

    def titles(self, raw_titles) -> list[str]:
        """``norm_title`` of every row's title."""
        from chitragupta.kernels.citewords import normalised

        text, ends = normalised(self.buf, self.starts[1::2], self.ends[1::2], *_stop_table())
        whole = text.tobytes().decode("ascii")
        cut = [0] + ends.tolist()
        out = [whole[a:b] for a, b in zip(cut, cut[1:])]
        for j in self.slow:
            out[j] = norm_title(raw_titles[j])
        return out


_STOP_TABLE: list = []


def _stop_table():
    """The function words as a string table with its lookup table (``kernels.citewords.normalised``)."""
    if not _STOP_TABLE:
        from chitragupta.kernels.lookup_table import build_table_numpy

        words = [w.encode("ascii") for w in sorted(_STOP)]
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum([len(w) for w in words], out=offsets[1:])
        blob = np.frombuffer(b"".join(words), dtype=np.uint8)
        _STOP_TABLE.extend((blob, offsets, build_table_numpy(blob, offsets)))
    return tuple(_STOP_TABLE)


def _entry_matrix(vocab: "_Vocab", texts, titles: list[str], packed: "_Packed | None"):
    """The entries' incidence rows over ``vocab`` (grown from the library's titles): the known words of
    each entry's text (``_tokens``) and of its normalised title. Per entry in Python (``_Vocab.matrix``),
    or, given ``packed``, in one pass of ``kernels.citewords`` (the rows ``packed.slow`` per entry): the
    same matrix."""
    if packed is None:
        return vocab.matrix([_tokens(t) for t in texts], grow=False, more=[t.split() for t in titles])
    from scipy import sparse

    from chitragupta.kernels.citewords import vocab_pairs
    from chitragupta.kernels.lookup_table import build_table_numpy

    n = len(texts)
    width = max(len(vocab.ids), 1)
    words = [w.encode("utf-8") for w in vocab.ids]  # ids in order (a dict keeps insertion order)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum([len(w) for w in words], out=offsets[1:])
    blob = np.frombuffer(b"".join(words), dtype=np.uint8) if words else np.zeros(0, dtype=np.uint8)
    slots = build_table_numpy(blob, offsets)
    r, c = vocab_pairs(packed.buf, packed.starts, packed.ends, np.arange(2 * n, dtype=np.int64) // 2, blob,
                       offsets, slots)
    if packed.slow:
        slow = packed.slow
        m = vocab.matrix([_tokens(texts[j]) for j in slow], grow=False, more=[titles[j].split() for j in slow])
        coo = m.tocoo()
        r = np.concatenate((r, np.asarray(slow, dtype=np.int64)[coo.row]))
        c = np.concatenate((c.astype(np.int64), coo.col.astype(np.int64)))
    return sparse.csr_matrix((np.ones(len(r), dtype=np.float32), (r, c)), shape=(n, width))


def _blocking(rows, cols, share: float, keys: int = BLOCK_KEYS):
    """Candidate (row, col) pairs: a row holding one of the column's ``keys`` rarest words (the fewest
    columns hold them) and at least ``share`` of all its words. ``rows``/``cols``: CSR incidences over one
    vocabulary. The keys bound the work by the rarest words' counts, not by the common words'."""
    from scipy import sparse

    n_cols, width = cols.shape
    if n_cols == 0 or rows.shape[0] == 0 or cols.nnz == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    df = np.bincount(cols.indices, minlength=width)
    coo = cols.tocoo()
    order = np.lexsort((df[coo.col], coo.row))
    r_sorted, c_sorted = coo.row[order], coo.col[order]
    pos = np.arange(len(order))
    start = np.maximum.accumulate(np.where(np.r_[True, r_sorted[1:] != r_sorted[:-1]], pos, 0))
    keep = pos - start < keys
    key_m = sparse.csr_matrix((np.ones(int(keep.sum()), dtype=np.float32), (r_sorted[keep], c_sorted[keep])),
                              shape=cols.shape)
    cand = (rows @ key_m.T).tocoo()
    r, c = cand.row.astype(np.int64), cand.col.astype(np.int64)
    if len(r) == 0:
        return r, c
    need = np.ceil(np.diff(cols.indptr) * share)
    # a row holding fewer words than the share asks for cannot hold that many of the column's: such pairs
    # (most, where the keys are common words or numbers) are dropped before the overlaps are counted
    fits = np.diff(rows.indptr)[r] >= need[c]
    if not fits.all():
        r, c = r[fits], c[fits]
    if _numba_loaded():  # (the same counts, without two fancy-indexed copies of the rows)
        from chitragupta.kernels.citewords import pair_overlaps

        overlap = pair_overlaps(rows, cols, r, c)
    else:
        overlap = np.asarray(rows[r].multiply(cols[c]).sum(axis=1)).ravel()
    ok = overlap >= need[c]
    return r[ok], c[ok]


def _pad(m, width: int):
    from scipy import sparse

    if m.shape[1] == width:
        return m
    return sparse.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], width))


def resolve(library: Library, references: dict[str, list]) -> Resolution:
    """Resolve every entry of ``references`` ({citing citekey: [Entry]}) against ``library``, and cluster
    the rest into missing works (module docstring)."""
    with no_gc():
        return _resolve(library, references)


def _resolve(library: Library, references: dict[str, list]) -> Resolution:
    from rapidfuzz.fuzz import ratio

    flat: list[tuple[str, int, object]] = [(k, i, e) for k, entries in references.items()
                                           for i, e in enumerate(entries or ())]
    target: dict[tuple[str, int], str | None] = {}
    why: dict[tuple[str, int], str] = {}
    n = len(flat)
    texts, raw_titles, years, dois, arxivs, urls = _columns([e for _, _, e in flat])
    ids = list(map(_ids_of, dois, arxivs, urls))
    packed = _Packed(texts, raw_titles) if n and _numba_pays(texts) else None
    titles = packed.titles(raw_titles) if packed is not None else list(map(norm_title, raw_titles))

    # title candidates: blocked by the library titles' words found in the entry's text (or title); only
    # entries with one are in ``cand``
    cand: dict[int, list[int]] = {}
    if n and len(library):
        vocab = _Vocab()
        lib_m = vocab.matrix([t.split() for t in library.norm], grow=True)
        ent_m = _pad(_entry_matrix(vocab, texts, titles, packed), lib_m.shape[1])
        rows, cols = _blocking(ent_m, lib_m, BLOCK_SHARE)
        for r, c in zip(rows.tolist(), cols.tolist()):
            got = cand.get(r)
            if got is None:
                cand[r] = [c]
            else:
                got.append(c)
    by_title = library.by_title
    if by_title:
        for j, t in enumerate(titles):
            hit = by_title.get(t) if t else None
            if hit:
                got = cand.setdefault(j, [])
                for c in hit:
                    if c not in got:
                        got.append(c)

    unresolved: list[int] = []
    by_doi, by_arxiv, pos = library.by_doi, library.by_arxiv, library.pos
    for j, (k, i, e) in enumerate(flat):
        key = (k, i)
        doi, arx = ids[j]
        cj = cand.get(j, ())
        # most entries: nothing to compare (no title candidate, and no identifier the library holds)
        if not cj and not (doi and by_doi.get(doi)) and not (arx and by_arxiv.get(arx)):
            target[key], why[key] = None, "none"
            unresolved.append(j)
            continue
        me = pos.get(k, -1)
        by_id = set()
        if doi:
            by_id.update(by_doi.get(doi, ()))
        if arx:
            by_id.update(by_arxiv.get(arx, ()))
        if by_id:
            if me in by_id:
                by_id.discard(me)
                if not by_id:
                    target[key], why[key] = None, "self"
                    continue
            if len(by_id) == 1:
                target[key] = library.keys[next(iter(by_id))]
                continue
            target[key], why[key] = None, "ambiguous"
            continue
        scored: list[tuple[float, int]] = []
        fit = []  # candidates the identifiers allow
        for c in cj:
            src = library.sources[c]
            if (doi and src.doi and doi != src.doi) or (arx and src.arxiv and arx != src.arxiv):
                continue  # the identifiers say these are different works
            fit.append(c)
            s = _title_score(ratio, titles[j], library.norm[c], years[j], src.year)
            if s > 0:
                scored.append((s, c))
        if not scored and fit:  # the title the entry parser took may be wrong: its text's sentences
            # (only candidates of two words or more, with the year within one, can pass)
            fit = [c for c in fit if " " in library.norm[c] and _years_ok(years[j], library.sources[c].year)]
            segs = _segments(texts[j], min(len(library.norm[c]) for c in fit)) if fit else []
            for c in fit:
                s = max([_title_score(ratio, g, library.norm[c], years[j], library.sources[c].year)
                         for g in segs] or [0.0])
                if s > 0:
                    scored.append((s, c))
        if not scored:
            target[key], why[key] = None, "none"
            unresolved.append(j)
            continue
        scored.sort(key=lambda t: -t[0])
        best = scored[0][0]
        if any(c == me and s >= best - AMBIGUOUS_GAP for s, c in scored):
            target[key], why[key] = None, "self"  # it names its own source (perhaps as well as another)
            continue
        best, c0 = scored[0]
        rivals = [c for s, c in scored[1:] if s >= best - AMBIGUOUS_GAP and c != c0]
        if rivals:
            target[key], why[key] = None, "ambiguous"
            continue
        target[key] = library.keys[c0]
    missing = _cluster([flat[j] for j in unresolved], [titles[j] for j in unresolved],
                       [years[j] for j in unresolved], [ids[j] for j in unresolved], ratio)
    return Resolution(target, why, missing)


class _Union:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _cluster(flat, titles, years, ids, ratio) -> list[MissingWork]:
    """Unresolved entries into works: an equal DOI or arXiv id, else close titles with the year within
    one. Entries with neither a title nor an id are left out."""
    keep = [j for j in range(len(flat)) if titles[j] or ids[j][0] or ids[j][1]]
    if not keep:
        return []
    # nodes: one per distinct (title, year) among the titled entries, one per untitled entry, numbered in
    # the order of their first entry; the entries of a node are one work from the start, and the unions
    # (same id, same title a year apart, close titles) join nodes
    node_keys = [(titles[j], years[j]) if titles[j] else ("", j) for j in keep]  # ("", j): an untitled entry's own
    distinct = {k: nd for nd, k in enumerate(dict.fromkeys(node_keys))}  # in the order of first entries
    nodes = np.fromiter(map(distinct.__getitem__, node_keys), dtype=np.int64, count=len(keep))
    keep_a = np.asarray(keep, dtype=np.int64)
    first = keep_a[np.unique(nodes, return_index=True)[1]].tolist()  # each node's first entry
    node_of = dict(zip(keep, nodes.tolist()))
    for k in [k for k in distinct if not k[0]]:
        del distinct[k]  # the title nodes only, below
    uf = _Union(len(first))
    first_of: dict[tuple[str, str], int] = {}
    for j in [j for j in keep if ids[j][0] or ids[j][1]]:
        a_ids = ids[j]
        for kind, v in (("doi", a_ids[0]), ("arxiv", a_ids[1])):
            if v:
                if (kind, v) in first_of:
                    uf.union(node_of[first_of[(kind, v)]], node_of[j])
                else:
                    first_of[(kind, v)] = j
    # titles: the same title a year apart, then blocked close pairs, between the (title, year) nodes
    reps = [(tk, first[nd]) for tk, nd in distinct.items()]
    by_title: dict[str, list[tuple[int | None, int]]] = {}
    for (t, y), j in reps:
        by_title.setdefault(t, []).append((y, j))
    for t, ys in by_title.items():
        if len(ys) < 2:
            continue
        known = sorted((y, j) for y, j in ys if y is not None)
        for (y0, j0), (y1, j1) in zip(known, known[1:]):
            if y1 - y0 <= 1:
                uf.union(node_of[j0], node_of[j1])
        anchor = known[0][1] if known else ys[0][1]
        for y, j in ys:
            if y is None:
                uf.union(node_of[anchor], node_of[j])
    if len(reps) > 1:
        vocab = _Vocab()
        m = vocab.matrix([t.split() for (t, _), _ in reps], grow=True)
        rows, cols = _blocking(m, m, BLOCK_SHARE)
        lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
        pairs = np.unique(lo[lo < hi] * len(reps) + hi[lo < hi])
        for r, c in zip((pairs // len(reps)).tolist(), (pairs % len(reps)).tolist()):
            (ta, ya), ja = reps[r]
            (tb, yb), jb = reps[c]
            if ta == tb:
                continue  # done above, by year
            a_ids, b_ids = ids[ja], ids[jb]
            if (a_ids[0] and b_ids[0] and a_ids[0] != b_ids[0]) or (a_ids[1] and b_ids[1] and a_ids[1] != b_ids[1]):
                continue
            if _title_score(ratio, ta, tb, ya, yb) > 0:
                uf.union(node_of[ja], node_of[jb])
    # a work's entries in order, works in the order of their first entry (a node's root is the work's
    # first node, and nodes are numbered in the order of their first entry)
    root = np.fromiter((uf.find(x) for x in range(len(first))), dtype=np.int64, count=len(first))
    comp = root[nodes]
    order = np.argsort(comp, kind="stable")  # by work (roots ascend as works' first entries do), entries in order
    cuts = np.flatnonzero(np.diff(comp[order])) + 1
    members_all = keep_a[order].tolist()
    bounds = [0] + cuts.tolist() + [len(members_all)]
    groups = {b0: members_all[b0:b1] for b0, b1 in zip(bounds, bounds[1:])}
    entries = [flat[j][2] for j in range(len(flat))]
    try:  # each entry's six fields in one C call (an object lacking one: read one by one)
        got = list(map(_SIX, entries))
    except AttributeError:
        got = [tuple(getattr(e, f, None) for f in _SIX_NAMES) for e in entries]
    # a work of several entries takes each field's most common non-empty value (``_most_common``), found
    # for all such works at once (``_modes``)
    several = [m for m in groups.values() if len(m) > 1]
    fields: list = [[None] * len(several) for _ in range(6)]
    if several:
        flat_members = [j for m in several for j in m]
        group = np.repeat(np.arange(len(several), dtype=np.int64), [len(m) for m in several])
        cols = list(zip(*[got[j] for j in flat_members]))
        cols[2] = [tuple(a or ()) for a in cols[2]]
        fields = [_modes(list(col), group, len(several)) for col in cols]
    works = []
    w = 0
    for members in groups.values():
        if len(members) == 1:  # most works are cited once: their one entry's fields
            j = members[0]
            title, year, authors, venue, doi, arxiv = got[j]
            works.append(MissingWork(title or "", year, tuple(authors or ()), venue, doi, arxiv,
                                     [(flat[j][0], entries[j])], [flat[j][:2]]))
            continue
        works.append(MissingWork(
            title=fields[0][w] or "", year=fields[1][w], authors=fields[2][w] or (), venue=fields[3][w],
            doi=fields[4][w], arxiv=fields[5][w],
            members=[(flat[j][0], entries[j]) for j in members], at=[flat[j][:2] for j in members]))
        w += 1
    return works


def _modes(values: list, group: np.ndarray, n_groups: int) -> list:
    """Per group (``group``: each value's, ascending, values in order within a group) its most frequent
    non-empty value, the first met on a tie, or None: ``_most_common`` of every group at once."""
    n = len(values)
    out: list = [None] * n_groups
    code_of: dict = {}
    codes = np.fromiter(map(code_of.setdefault, values, range(n)), dtype=np.int64, count=n)  # equal values: one code
    truthy = np.zeros(n, dtype=np.bool_)  # per code (the first position of its value): whether it counts
    firsts = list(code_of.values())
    truthy[firsts] = [bool(values[k]) for k in firsts]
    ok = truthy[codes]
    if not ok.any():
        return out
    at = np.flatnonzero(ok)
    key = group[at] * n + codes[at]
    uniq, first, counts = np.unique(key, return_index=True, return_counts=True)
    g = uniq // n
    order = np.lexsort((at[first], -counts, g))  # by group, the most frequent first, then the first met
    g_sorted = g[order]
    best = order[np.r_[True, g_sorted[1:] != g_sorted[:-1]]]
    for gi, k in zip(g[best].tolist(), at[first[best]].tolist()):
        out[gi] = values[k]
    return out


_SIX_NAMES = ("title", "year", "authors", "venue", "doi", "arxiv")
_RESOLVED_NAMES = ("text", "title", "year", "doi", "arxiv", "url")
_RESOLVED = tuple(map(attrgetter, _RESOLVED_NAMES))


def _columns(entries: list) -> tuple[tuple, ...]:
    """The entries' text, title, year, DOI, arXiv id and URL, as six columns (an object lacking a field:
    None for it)."""
    try:  # a column in one C call each
        return tuple(list(map(get, entries)) for get in _RESOLVED)
    except AttributeError:
        return tuple([getattr(e, f, None) for e in entries] for f in _RESOLVED_NAMES)
_SIX = attrgetter(*_SIX_NAMES)


def _most_common(values):
    """The most frequent non-empty value (the first met on a tie), or None."""
    got = Counter(filter(None, values))
    if not got:
        return None
    if len(got) == 1:
        return next(iter(got))
    top = max(got.values())
    return next(v for v in values if v and got[v] == top)


@contextmanager
def no_gc():
    """The cyclic garbage collector paused: building tens of thousands of small objects (entries, tuples,
    lists) otherwise runs it again and again over all of them, a third of the graph's time; the objects
    made hold no cycles that need it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

