"""A reference list's text, split into entries, and the fields each entry prints.

    split_entries(ref_text)        the list's text (after its heading) -> one raw string per entry
    parse_entry(raw, n)            one raw entry -> Entry (authors, year, title, venue, DOI, arXiv id, URL)
    parse_reference_list(ref_text) both, and the notes a bad list earns (plain strings)

**Splitting.** The text is read as lines (a form feed, a page break, ends one too). Dropped first: lines
that are only a page number; running titles (a line among the first or last two of a page, digits
ignored, seen on two or more pages of the list -- or, from ``running``, of the whole document -- and not
ending in a period); footnotes set between two columns of entries (a line whose number is glued to its
text, "19The Kaggle ...", and a "See ..." line after it). Then the first style that fits, in this order,
cuts it:

- numbered ``[12]``: a line starting with the next number of a sequence 1, 2, 3 ... opens an entry (one to
  three past the last: a gap where the text layer lost an entry; "[cs]" of an arXiv id is no entry), or
  with a ``[Smi19]``-style label (letters and digits) where those outnumber the numbers;
- numbered ``12.`` (or ``12)``): the same sequence rule (a wrapped line starting "117." is no entry);
- Markdown list items (docling's sidecars and Markdown): a line starting ``- ``, ``* `` or ``+ ``; a lone
  first line of an item that is a LaTeX cite key ("- layernorm2016") and an item without a letter ("- 10",
  the widest label of a ``thebibliography``) are dropped;
- author-year (hanging or flush lines): a line opens an entry when the line before it ends one (a period
  not after an initial, a closing bracket, a year or page number, a DOI or a URL) and it starts like an
  author list: name words (capitalised; a few lower-case ones; no function word), initials, commas and
  "and" up to a year ("Family, I. (2019)", "Given Family and Given Family. 2019."); "Family, I." /
  "Family I," / "Family, Given"; initials first ("J. Andren, M. Hilding, and ..."); a group or a tool
  before its year ("OGC of Harvard. 2016.", "pdf2image. 2023."); or a whole line of names running on;
- otherwise blank-line separated paragraphs, else one entry per line.

An entry wrapped over lines or a page break is one entry; its lines are joined with single spaces, a word
split by a line-end hyphen ("infor-\\nmation") joined again (the hyphen kept only when both halves are
words of the document and the whole is not: "data-\\nbase"), a URL or DOI split at a line end joined
without a space. What follows the last entry inside the list's span -- a table or figure caption, an
appendix or the acknowledgements after a line that ends an entry -- is left out, with a note.

**Fields.** Plain regular expressions, each linear in the entry's length (no nested quantifiers, so a
200 KB run-on line cannot make one backtrack): DOI ``10.NNNN/...`` (lower-cased, URL prefix and trailing
``.,;)`` dropped), arXiv id (``arXiv:2005.14165v2``, ``arxiv.org/abs/...``, ``abs/1409.0473``, old
``hep-th/9901001``; the version dropped), the first other URL, the year (1800-2099, a letter suffix
allowed, the one after the author block when names come first, else the first outside a DOI, arXiv id or
URL), the authors' family names as printed (LaTeX accents decoded, pdfium's detached accents rejoined,
particles kept: "van der Maaten", a group's name whole: "OGC of Harvard"), the title (the quoted one, else
the sentence after the authors and year; a question mark ends it only before a venue) and the venue (the
part after the title, "In" dropped, up to its volume, pages or year). An IEEE-style list of initials-first
names that a comma ends, not a period ("I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of
Correlation. J. ..."), stops at that comma, the title after it, and a venue after a later comma ("...,
Proc. of ...", "..., in IEEE ...") is split from the title. Only the first ``MAX_ENTRY_CHARS``
characters of an entry are read for fields; its text is always kept whole.

**Cost** (tens of thousands of entries per library; every shortcut gives the plain rule's answer, pinned
in ``tests/engine/citations/test_entries_fast.py``): a token's kind for the author-list test and an author part's
family name are kept per string in bounded memos (names repeat across a library; never an entry's text);
patterns open with a character, their look-behinds after it (Python's ``re`` searches for a leading
character, but tries a leading look-around at every position); a list's lines are looked at one by one
for footnotes only where one may stand, and an entry's lines are joined in C unless a line end needs the
hyphen and URL rules. A field's pattern is tried only where a plain test says it can match (a DOI where
"10." stands, an arXiv id where "rxiv" or "abs/" does, no name prefix before a year with a digit before
it, an ASCII string's digits looked for in its bytes, the venue's stop opening with its characters), each
held to the plain rules in that test file. An author block (the text before an entry's year, or before its
title) is kept with its name test and its family names in bounded memos (the same work's authors are printed
alike by the entries that cite it; never an entry's whole text). Once numba is loaded in the process (by the
index's numba build, past its small build), the tails of a list's entries -- the title after the author block
and year where none was found, and the venue -- are read in one call of ``kernels.citefields`` over the list's
tails as bytes (a non-ASCII character no tail rule tells from "~", a dash or a curly apostrophe, read as "~";
a tail holding any other, an editor's mark or a leading quote left to ``_tail``); the kernel is held to
``_tail`` in that test file too.
"""

from __future__ import annotations

import codecs
import itertools
import re
import sys
import unicodedata
from dataclasses import dataclass

__all__ = ["Entry", "split_entries", "parse_entry", "parse_reference_list", "running_lines", "decode_latex",
           "starts_entry", "LazyWords", "MAX_ENTRY_CHARS", "MAX_LIST_CHARS"]

MAX_ENTRY_CHARS = 4000  # fields are read from this much of an entry (its raw text is kept whole)
MAX_LIST_CHARS = 2_000_000  # a reference list longer than this is read up to here, with a note


@dataclass(frozen=True)
class Entry:
    """One entry of a reference list: its raw text (always kept) and what could be read from it."""

    n: int
    text: str
    authors: tuple[str, ...] = ()
    year: int | None = None
    title: str | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv: str | None = None
    url: str | None = None

    def to_json(self) -> dict:
        """``{"n", "text", "authors" (a list), "year", "title", "venue", "doi", "arxiv", "url"}``, in that order
        (the fields' own: a copy of the instance's dict, the authors made a list)."""
        out = dict(self.__dict__)
        out["authors"] = list(out["authors"])
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Entry":
        """The inverse of ``to_json``; ValueError for a dict that is not one (a hand-edited file)."""
        if not isinstance(d, dict) or not isinstance(d.get("n"), int) or not isinstance(d.get("text"), str):
            raise ValueError("an entry needs an integer 'n' and a string 'text'")
        authors = d.get("authors") or []
        if not isinstance(authors, list) or not all(isinstance(a, str) for a in authors):
            raise ValueError("an entry's 'authors' is a list of strings")
        year = d.get("year")
        if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
            raise ValueError("an entry's 'year' is an integer or null")
        get = d.get
        strs = (get("title"), get("venue"), get("doi"), get("arxiv"), get("url"))
        for k, v in zip(_STR_FIELDS, strs):
            if v is not None and not isinstance(v, str):
                raise ValueError(f"an entry's {k!r} is a string or null")
        # the fields set as the dataclass's own __init__ sets them (object.__setattr__, each), in one update:
        # the graph makes one Entry per stored entry, tens of thousands
        e = object.__new__(cls)
        e.__dict__.update(n=d["n"], text=d["text"], authors=tuple(authors), year=year, title=strs[0], venue=strs[1],
                          doi=strs[2], arxiv=strs[3], url=strs[4])
        return e


_STR_FIELDS = ("title", "venue", "doi", "arxiv", "url")


# -- splitting ------------------------------------------------------------------------------------

_PAGE_NUMBER = re.compile(r"^\s*(?:[-\u2013\u2014]\s*)?(?:page\s+)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?"
                          r"(?:\s*[-\u2013\u2014])?\s*$", re.IGNORECASE)
_BRACKET = re.compile(r"^\s*\[(?P<label>[^\]\s]{1,24})\]\s*")
_BRACKET_NUM = re.compile(r"^\s*\[(?P<num>\d{1,4})\]")
_DOTTED = re.compile(r"^\s*(?P<num>\d{1,4})[.)]\s+(?=\S)")
_MARKDOWN = re.compile(r"^\s*[-*+\u2022]\s+(?=\S)")
_MARKDOWN_FIRST = frozenset("-*+\u2022")
# (the century first, then the look-behind at the character before it: a pattern that opens with a
# look-around is tried at every position, one that opens with characters is searched for them)
_YEAR = re.compile(r"(?:1[89]|20)(?<![\d/.:-]..)\d\d[a-z]?(?![\d/])")
# a name-ish token: a capitalised word (any script's capital), an initial, a particle, a joiner
_NAME_TOKEN = re.compile(
    r"(?:[^\W\d_][\w'\u2019.-]*|&|,|;|\(|\)|\{|\}|\\.|[`'\"~^])",
)
_PARTICLES = frozenset("van von der den de del della di da das dos du le la el al bin ibn ter ten zu y e st st.".split())
_JOINERS = frozenset({"and", "&", "et", "al", "al.", "others", "und", "y"})
# "Family, I." / "Family I," / "Family, Given" / "Family, I" at a line start
_FAMILY_FIRST = re.compile(
    r"^\s*(?:(?:van|von|de|del|der|den|di|da|du|le|la|dos)\s+){0,2}"
    r"[^\W\d_][^\W\d_'\u2019-]*(?:[-'\u2019][^\W\d_]+)*"
    r"(?:,\s*(?:[^\W\d_]\.|[^\W\d_][^\W\d_]+(?:\s|,|$))|\s+[A-Z]{1,3}[.,])"
)


def _lines(text: str) -> list[tuple[str, bool]]:
    """(line, first on its page) of ``text``; a form feed ends a line."""
    out = []
    for p, page in enumerate(text.split("\f")):
        for i, line in enumerate(page.split("\n")):
            out.append((line.rstrip(), p > 0 and i == 0))
    return out


_FOOTNOTE = re.compile(r"^\s*\d{1,2}(?=[A-Z][a-z]{2})")
# a footnote's next line, when it reads as one ("See Wang et al. (2020) for details.", a link)
_FOOTNOTE_MORE = re.compile(r"^\s*(?:See|see|Available|Accessed|https?://|www\.)")
_STRAY_ACCENT = re.compile(r"\s[\u00b4\u00a8\u02d8\u02c7\u02dc\u00b8\u02c6\u02d9\u02da\u02dd`]$")
_STRAY_ACCENT_LAST = frozenset("\u00b4\u00a8\u02d8\u02c7\u02dc\u00b8\u02c6\u02d9\u02da\u02dd`")  # a line it can end


_DIGITS = re.compile(r"\d+")


def _furniture_key(line: str) -> str:
    """The line without its digits (any script's, as ``\\d``; an ASCII line's deleted from its bytes), its
    spaces collapsed."""
    if line.isascii():
        return " ".join(line.encode("ascii").translate(None, b"0123456789").decode("ascii").split())
    return " ".join(_DIGITS.sub("", line).split())


_NONBLANK_LINE = re.compile(r"\s*(\S[^\n]*)")  # from a line start: the next non-blank line (its end unstripped)


def _edge_lines(page: str) -> list[str]:
    """The first two and the last two non-blank lines of a page (stripped; fewer where it has fewer, and
    then those at both ends), without splitting all of it (a page of more than 4,000 characters: the
    head read from its first 2,000 characters and the tail from its last 2,000, a line cut there read as
    cut)."""
    if len(page) <= 4000:
        head, tail = page, page
    else:
        head, tail = page[:2000], page[-2000:]
    out = []
    m = _NONBLANK_LINE.match(head)
    if m is not None:
        out.append(m.group(1).rstrip())
        nl = head.find("\n", m.end(1))
        m = _NONBLANK_LINE.match(head, nl + 1) if nl >= 0 else None
        if m is not None:
            out.append(m.group(1).rstrip())
    # the last two, from the end: the lines between newlines found backwards, blank ones passed over
    back, stop = [], len(tail)
    while len(back) < 2:
        nl = tail.rfind("\n", 0, stop)
        ln = tail[nl + 1:stop].strip()
        if ln:
            back.append(ln)
        if nl < 0:
            break
        stop = nl
    return out + back[::-1]


def running_lines(text: str, min_pages: int = 2) -> frozenset[str]:
    """The running titles of a paged text (pages split by form feeds): lines among the first two or last
    two of a page, read with their digits left out ("Paper Plain ... Processing 35"), seen on at least
    ``min_pages`` pages, at most 200 characters and not ending in a period (an entry's last line,
    "Association for Computational Linguistics.", may well stand at the top of two pages)."""
    if "\f" not in text:
        return frozenset()
    seen: dict[str, int] = {}
    for page in text.split("\f"):
        for ln in set(_edge_lines(page)):
            if len(ln) <= 200 and not ln.endswith("."):
                key = _furniture_key(ln)
                if key:
                    seen[key] = seen.get(key, 0) + 1
    return frozenset(k for k, c in seen.items() if c >= min_pages)


def _drop_furniture(text: str, running: frozenset[str] = frozenset()) -> list[str]:
    """The lines of ``text`` (a form feed ends one too; each right-stripped) without page numbers, footnotes
    ("19The Kaggle ...": a footnote's number glued to its text, set between two columns of entries) and
    running titles (``running_lines`` of the list, and ``running`` given from the whole document, at a
    page's edge); a stray accent at a line's end (pdfium's "Com- \u00b4") dropped.

    The lines are looked at one by one only where a footnote may stand (a line opening with one or two
    digits glued to a capitalised word: ``_FOOTNOTE_NL`` finds one); else each page's lines are taken as
    they are (each line's end read for an accent where the text holds one), and a page is looked at by its
    edges and its lines that open as a page number can."""
    if _FOOTNOTE_NL.search(text) or _FOOTNOTE.match(text) or ("\f" in text and _FOOTNOTE_FF.search(text)):
        pages = _pages_read(_lines(text))
    else:
        pages = [list(map(str.rstrip, page.split("\n"))) for page in text.split("\f")]
        if any(c in text for c in _STRAY_ACCENT_LAST):
            pages = [[_STRAY_ACCENT.sub("", ln) if ln[-1:] in _STRAY_ACCENT_LAST else ln for ln in pg] for pg in pages]
    if "\f" not in text:
        return [ln for ln in pages[0] if not _page_number(ln.strip())]
    running = running | running_lines(text)
    out: list[str] = []
    for pg in pages:
        stripped = list(map(str.strip, pg))
        furniture = {e for e in _edges(stripped) if _furniture_key(e) in running}
        # a page number's line opens with a digit, a dash or "p" (``_page_number``)
        gone = {k for k, st in enumerate(stripped)
                if st and (st[0] in _PAGE_FIRST or st[0].isdigit()) and _PAGE_NUMBER.match(st)}
        if furniture:
            gone.update(k for k, st in enumerate(stripped) if st in furniture)
        out += [ln for k, ln in enumerate(pg) if k not in gone] if gone else pg
    return out


def _pages_read(lines: list[tuple[str, bool]]) -> list[list[str]]:
    """``_lines``' lines, footnotes dropped and stray accents cut, as pages (a page's first line dropped
    leaves its other lines to the page before)."""
    kept, note = [], False
    for ln, first in lines:
        c = ln[:1]  # a footnote's line opens with its number (after spaces): the pattern is tried only then
        if ((c.isdigit() or c.isspace()) and _FOOTNOTE.match(ln)) or (note and _FOOTNOTE_MORE.match(ln)):
            note = True
            continue
        note = False
        kept.append((_STRAY_ACCENT.sub("", ln) if ln[-1:] in _STRAY_ACCENT_LAST else ln, first))
    pages: list[list[str]] = [[]]
    for ln, first in kept:
        if first:
            pages.append([])
        pages[-1].append(ln)
    return pages


def _edges(stripped: list[str]) -> set[str]:
    """The first two and the last two non-blank lines of a page's (stripped) lines."""
    out = set()
    k = 0
    for st in stripped:
        if st:
            out.add(st)
            k += 1
            if k == 2:
                break
    k = 0
    for st in reversed(stripped):
        if st:
            out.add(st)
            k += 1
            if k == 2:
                break
    return out


# a footnote's line (``_FOOTNOTE``) after the first: a line break (a form feed), spaces, one or two digits,
# a capitalised word (each pattern opens with one character: searched for it, fast)
_FOOTNOTE_NL = re.compile(r"\n[^\S\n\f]*\d{1,2}(?=[A-Z][a-z]{2})")
_FOOTNOTE_FF = re.compile(r"\f[^\S\n\f]*\d{1,2}(?=[A-Z][a-z]{2})")


_PAGE_FIRST = frozenset("-\u2013\u2014pP")  # what a page number's line may open with, besides a digit


def _page_number(s: str) -> bool:
    """``s`` (a line, stripped) is only a page number: ``_PAGE_NUMBER``, tried only on a line that opens
    as one can."""
    c = s[:1]
    return bool(c) and (c in _PAGE_FIRST or c.isdigit()) and _PAGE_NUMBER.match(s) is not None


_STOPWORDS = frozenset("""a an the of for in on at to with from by into via using is are as its this that
our we how what why when which new towards toward pages page vol volume no pp proceedings proc conference
journal transactions workshop symposium press university arxiv preprint editor editors ed eds see
""".split())
_ANY_DIGIT = re.compile(r"\d")
_ASCII_DIGITS = b"0123456789"  # (``\d`` in an ASCII string: these; deleted from its bytes, a shorter string)
_NAME_SEP = re.compile(r"[\s,;&()\[\]]+")
_LONG_STOPWORDS = frozenset(w for w in _STOPWORDS if len(w) > 1)
# a mark and a space after two word characters that are neither digits nor "_" (a superset of two letters:
# ``str.isalpha`` is checked on what it finds); the mark written first, so that the pattern is tried only
# where one stands (a look-behind first is tried at every position: four times slower)
_MARK_SPACE = re.compile(r"[.?!](?<=[^\W\d_][^\W\d_][.?!])\s")


def _sentence_break(s: str) -> bool:
    """A full stop, question or exclamation mark after a word of two letters or more, then a space
    ("Scientometrics. Zhihong ..."; not an initial's "J. "): found by the marks with two such characters
    before them (an initial's mark is not even stopped at), then the letters checked."""
    if "." not in s and "?" not in s and "!" not in s:  # (the marks the pattern opens with)
        return False
    for m in _MARK_SPACE.finditer(s):
        i = m.start()
        if s[i - 1].isalpha() and s[i - 2].isalpha():
            return True
    return False


def _name_prefix(s: str, lenient: bool = False) -> bool:
    """``_names_only``, or a group's name ("Organizers of Queer in AI") before at least three more names.
    ``lenient``: names in lower case too ("david nicholas, peter williams"), for an entry already cut."""
    if _names_only(s, lenient):
        return True
    head, sep, tail = s.partition(",")
    return bool(sep) and tail.count(",") >= 2 and head[:1].isupper() and len(head.split()) <= 8 \
        and not any(c.isdigit() for c in head) and not _sentence_break(head + " ") \
        and _names_only(tail)


def _names_only(s: str, lenient: bool = False) -> bool:
    """``s`` (the text before a year) reads as an author list: name words (capitalised, a few lower-case
    ones such as "xiang" or "van" allowed, no function word), initials, commas and "and"; at least two name
    tokens; no sentence break inside it ("In ICCSA. Qi He ..." is the end of one entry and the next)."""
    s = s.strip().rstrip("(").strip()
    if not s or len(s) > 1500:
        return False
    # each token's kind (``_token_kind``), looked up in C: tokens (names, initials) repeat across a library
    # ``_NAME_SEP.split(s)`` (less its empty ends): an ASCII string's separators made spaces in its bytes
    # (and its digits looked for there: an ASCII digit is all ``\d`` finds in it)
    if s.isascii():
        b = s.encode("ascii")
        if len(b.translate(None, _ASCII_DIGITS)) != len(b) or _sentence_break(s.rstrip(" .,;:")):
            return False
        tokens = b.translate(_SEPS_AS_SPACES).decode("ascii").split()
    else:
        if _ANY_DIGIT.search(s) or _sentence_break(s.rstrip(" .,;:")):
            return False
        tokens = _NAME_SEP.split(s)
    kinds = list(map(_TOKEN_KINDS.get, tokens))
    if None in kinds:
        kinds = [_token_kind(t) for t in tokens]
    if _STOP_KIND in kinds:
        return False
    lower = kinds.count(_LOWER_NAME)
    names = lower + kinds.count(_NAME)
    return names >= 2 and (lenient or lower * 4 <= names)


_NO_NAME, _NAME, _LOWER_NAME, _STOP_KIND = 0, 1, 2, 3
_SEPS_AS_SPACES = bytes.maketrans(b",;&()[]", b"       ")  # ``_NAME_SEP``'s characters besides white space
_TOKEN_KINDS: dict[str, int] = {}  # a token -> its ``_token_kind``, the last few kept
_TOKENS_KEPT = 1 << 16


def _token_kind(t: str) -> int:
    """What one token between ``_NAME_SEP``'s separators is to ``_names_only`` (its dots at either end
    stripped): a stopword (two letters or more), no name (empty, a joiner or a particle, LaTeX marks only),
    a name with a lower-case first letter (after the marks), or a name. Kept in ``_TOKEN_KINDS`` (a pure
    function of the token: kept or not, the same answer)."""
    got = _TOKEN_KINDS.get(t)
    if got is not None:
        return got
    w = t.strip(".")
    low = w.lower()
    if low in _LONG_STOPWORDS:
        got = _STOP_KIND
    elif not w or low in _JOINERS or low in _PARTICLES:
        got = _NO_NAME
    else:
        first = w.lstrip("{\\\"'`^~")[:1]
        got = _NO_NAME if not first else _LOWER_NAME if first.islower() else _NAME
    if len(t) <= 80:
        if len(_TOKEN_KINDS) >= _TOKENS_KEPT:
            _TOKEN_KINDS.clear()
        _TOKEN_KINDS[t] = got
    return got


def _starts_author_block(joined: str) -> bool:
    """Whether ``joined`` (a line and the lines after it, joined) opens with an author list: only name
    tokens up to its first year, or "Family, I." / "Family I," / "Family, Given" at its start."""
    head = joined[:1500]
    if head[:3] in ("In ", "In:") or head[:2] == "(":
        return False
    m = _YEAR.search(head)
    if m is not None and m.start() > 0 and _name_prefix(head[:m.start()]):
        return True
    return bool(_FAMILY_FIRST.match(head) or _GROUP_YEAR.match(head) or _INITIALS_FIRST.match(head))


# initials first, the year at the end: "J. Andren, M. Hilding, and D. Veitch. Understanding ...", "J.-C. Bolot,
# S. Fosse-Parisis ...", "H. Sanneck. Concealment of ..."
_INITIALS_FIRST = re.compile(r"^(?:[A-Z]\.(?:\s?-?[A-Z]\.)*\s)+(?:[a-z]{1,3}\s){0,2}[A-Z][^\s,.;:()]{1,40}(?:,\s|\s+and\s|\.\s)")
# a group or a tool as the author, then the year: "OGC of Harvard. 2016.", "pdf2image. 2023.", "Grobid. 2008-2023."
_GROUP_YEAR = re.compile(r"^[^\W_][^.,;:()]{0,60}\.\s(?:1[89]|20)\d\d[a-z]?(?:[.,\u2013-]|\s|$)")


def starts_entry(text: str) -> bool:
    """Whether ``text`` opens like a reference entry: a list number or label, or an author list up to a
    year, or "Family, I." / "Family I," / "Family, Given" (what tells a docling ``text`` item that is an
    entry of its own from one that continues the entry before it, a link or a page range)."""
    head = " ".join(text[:1500].split())
    return bool(_LEAD_MARK.match(head)) or _starts_author_block(head) or _name_line(head)


def _name_line(line: str) -> bool:
    """A whole line of names running on ("Waleed Ammar, Dirk Groeneveld, Chandra Bhagavat-"): at least two
    commas, four name words, nothing but names, and no end of sentence."""
    s = line.strip()
    if s.count(",") < 2 or s.endswith(".") or len(s.split()) < 4:
        return False
    return _name_prefix(s.rstrip("-"))




def _ends_entry(line: str) -> bool:
    """The line can end an entry: a period (not after an initial, "Quoc V."), a bracket, a year or a page
    number (a letter after it: "2019a"), a DOI or a URL as its last word."""
    s = line.rstrip()
    if not s:
        return False
    c = s[-1]
    if not (c in ".)]" or c.isdigit() or ("a" <= c <= "z" and len(s) > 1 and s[-2].isdigit())):
        last = s[s.rfind(" ") + 1:]
        if not ("http://" in last or "https://" in last or _DOI.search(last)):
            return False
    # "Quoc V.": an initial ends the line, the family name is on the next
    return not (c == "." and len(s) > 1 and "A" <= s[-2] <= "Z" and (len(s) == 2 or s[-3] in " \t.,-"))


def _numbered(lines: list[str], pattern: re.Pattern, only: list[int] | None = None) -> list[int]:
    """Lines opening entries numbered 1, 2, 3 ...: a number one to three past the last one taken (an entry
    lost to the text layer leaves a gap), starting at 0 or 1; a wrapped line that starts with another
    number ("117." of a page range, "[cs]" of an arXiv id) is no entry. ``only``: the lines (in order)
    that can match ``pattern`` at all, the others not tried."""
    starts, last = [], None
    for i in range(len(lines)) if only is None else only:
        m = pattern.match(lines[i])
        if m is None or not m.group("num").isdigit():
            continue
        num = int(m.group("num"))
        if (last is None and num <= 1) or (last is not None and last < num <= last + 3):
            starts.append(i)
            last = num
    return starts


_ALPHA_LABEL = re.compile(r"^\s*\[(?=[^\]\s]*\d)(?=[^\]\s]*[A-Za-z])[^\]\s]{2,24}\]\s*")


def _bracket_starts(lines: list[str], only: list[int] | None = None) -> list[int]:
    """Lines opening ``[n]`` entries in sequence, or ``[Smi19]``-style labels (letters and digits);
    ``only``: the lines that open with "[" (after spaces), the others not tried."""
    numeric = _numbered(lines, _BRACKET_NUM, only)
    if len(numeric) >= (len(lines) if only is None else len(only)):
        return numeric  # every line tried is a number in sequence: no more labels can stand there
    alpha = [i for i in (range(len(lines)) if only is None else only) if _ALPHA_LABEL.match(lines[i])]
    return numeric if len(numeric) >= len(alpha) else alpha


def _dotted_starts(lines: list[str], only: list[int] | None = None) -> list[int]:
    return _numbered(lines, _DOTTED, only)


_SPLIT_WORD = re.compile(r"-(?<=[^\W\d_]-)\n\s*(?=[a-z])")  # (the hyphen first: see _YEAR)


def _quick_join(window: list[str]) -> str:
    """Lines joined for the author-block test: a line-end hyphen before a lower-case letter dropped
    ("Abdul-\nlahi" is one name there, whatever ``_join`` later makes of it), spaces collapsed."""
    joined = "\n".join(window)
    return " ".join((_SPLIT_WORD.sub("", joined) if "-\n" in joined else joined).split())


def _author_year_starts(lines: list[str], words) -> list[int]:
    starts = []
    prev_end = True  # the first line opens an entry
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if prev_end:
            if not starts:
                starts.append(i)
            else:
                window, size = [], 0
                for x in lines[i:i + 16]:
                    window.append(x)
                    size += len(x)
                    if size > 1500 or _YEAR.search(x):
                        break
                if _starts_author_block(_quick_join(window)) or _name_line(s):
                    starts.append(i)
        # ``_ends_entry(s)``, inline (a call per line)
        c = s[-1]
        if c in ".)]" or c.isdigit() or ("a" <= c <= "z" and len(s) > 1 and s[-2].isdigit()):
            prev_end = not (c == "." and len(s) > 1 and "A" <= s[-2] <= "Z" and (len(s) == 2 or s[-3] in " \t.,-"))
        else:
            last = s[s.rfind(" ") + 1:]
            prev_end = "http://" in last or "https://" in last or _DOI.search(last) is not None
    return starts


def _paragraph_starts(lines: list[str]) -> list[int]:
    starts, blank = [], True
    for i, ln in enumerate(lines):
        if ln.strip():
            if blank:
                starts.append(i)
            blank = False
        else:
            blank = True
    return starts


def _cut(lines: list[str], starts: list[int]) -> list[list[str]]:
    out = []
    if starts and starts[0] > 0 and any(ln.strip() for ln in lines[:starts[0]]):
        starts = [0, *starts]
    for a, b in zip(starts, [*starts[1:], len(lines)]):
        chunk = [ln for ln in lines[a:b] if ln.strip()]
        if chunk:
            out.append(chunk)
    return out


_URLISH_END = re.compile(r"(?:https?://|www\.|10\.\d{4,9}/)\S*[-/._~=?&#]$")
_URLISH_LAST = frozenset("-/._~=?&#")  # what ``_URLISH_END`` ends in
# a line end ``_join`` looks at: a hyphen, a dash or a URL's last character but a period (which it looks at
# only where a URL or a DOI stands: ``_DOT_EOL``, with "://", "www." or ``_DOI_HEAD`` in the entry)
_JOIN_SPECIAL = re.compile(r"[-/_~=?&#\u2013][^\S\n]*\n")
_DOT_EOL = re.compile(r"\.[^\S\n]*\n")
_DOI_HEAD = re.compile(r"10\.\d{4,9}/")
_HYPHEN_HEAD = re.compile(r"(?<![A-Za-z0-9-])([A-Za-z]{1,40})-$")
_TAIL_WORD = re.compile(r"^([a-z]{1,40})(?![A-Za-z0-9])")


def _join(chunk: list[str], words) -> str:
    """An entry's lines as one string: single spaces; a word split by a line-end hyphen joined (the hyphen
    kept only when both halves are words of the document and the whole is not: "data-\nbase"); a dash
    before a digit ("1435-\n1446"), a hyphen before a capital ("Sci-\nBERT") and a URL or DOI split at a
    line end glued without a space."""
    if len(chunk) == 1:
        return " ".join(chunk[0].split())
    joined = "\n".join(chunk)
    if not _JOIN_SPECIAL.search(joined) and not (_DOT_EOL.search(joined) and (
            "://" in joined or "www." in joined or ("10." in joined and _DOI_HEAD.search(joined)))):
        return " ".join(joined.split())  # no line ends as the loop below looks at: its spaces, in C
    out = ""
    for ln in chunk:
        s = " ".join(ln.split())
        if not s:
            continue
        if not out:
            out = s
            continue
        end = out[-1]
        if end not in _URLISH_LAST and end != "\u2013":
            out += " " + s  # no URL, hyphen or dash at the line's end: the common case
            continue
        last = out[out.rfind(" ") + 1:]
        if end in _URLISH_LAST and _URLISH_END.search(last):
            out += s
            continue
        h = _HYPHEN_HEAD.search(last) if end == "-" else None
        t = _TAIL_WORD.match(s) if h else None
        if h and t:
            head, tail = h.group(1).lower(), t.group(1)
            keep = (head + tail) not in words and head in words and tail in words
            out = out + s if keep else out[:-1] + s
            continue
        if out[-1] in "-\u2013" and len(last) > 1 and (s[0].isdigit() or s[0].isupper()):
            out += s
            continue
        out += " " + s
    return out


_MD_KEY = re.compile(r"^[^\s]{1,80}$")


# what follows a list inside its span, and is no entry: a table or figure caption, an appendix or the
# acknowledgements (a line that opens so after a line that ends an entry)
_TRAILER = re.compile(r"^\s*(?:(?:Table|TABLE|Figure|FIGURE|Fig\.)\s*[A-Z]?\d|(?:[A-Z]\.?\s+|\d{1,2}(?:\.\d+)*\.?\s+)?"
                      r"(?:APPENDIX|Appendix|APPENDICES|Appendices|ACKNOWLEDGE?MENTS?|Acknowledge?ments?)\b)")


def _strip_marker(chunk: list[str], style: str) -> list[str]:
    """The chunk without its list marker ([12], 12., "- "); a Markdown item's first line that is a lone
    LaTeX cite key ("- layernorm2016" over the entry's lines) is dropped too."""
    first = chunk[0]
    if style == "markdown":
        first = _MARKDOWN.sub("", first, count=1)
        rest = chunk[1:]
        if rest and _MD_KEY.match(first.strip()) and not first.strip().endswith("."):
            return rest
        return [first, *rest]
    return chunk


class LazyWords:
    """``chitragupta.engine.text.hyphens.document_words`` of a text, made when first asked (most lists
    never ask: only a word split at a line end does)."""

    def __init__(self, text: str):
        self._text, self._words = text, None

    def __contains__(self, word: str) -> bool:
        if self._words is None:
            from chitragupta.engine.text.hyphens import document_words

            self._words, self._text = document_words(self._text), None
        return word in self._words


def split_entries(ref_text: str, *, words=None, running: frozenset[str] = frozenset()) -> list[str]:
    """The list's text (after the heading) -> the raw entries, in order (see the module docstring).
    ``words``: the whole document's words (``chitragupta.engine.text.hyphens.document_words``), which tell a
    split word from a hyphenated one; by default the list's own. ``running``: the whole document's
    ``running_lines``, dropped where they stand at a page's edge."""
    return [e for e, _style in _split(ref_text, words, running)[0]]


def _split(ref_text: str, words=None, running: frozenset[str] = frozenset()) -> tuple[list[tuple[str, str]], list[str]]:
    notes: list[str] = []
    if len(ref_text) > MAX_LIST_CHARS:
        notes.append(f"the reference list is {len(ref_text)} characters; read up to {MAX_LIST_CHARS}")
        ref_text = ref_text[:MAX_LIST_CHARS]
    text = ref_text.replace("\r\n", "\n").replace("\r", "\n")
    lines = _drop_furniture(text, running)
    if not any(ln.strip() for ln in lines):
        return [], notes
    if words is None:
        words = LazyWords(text)
    style, starts = "", []
    # each style's pattern tried only on the lines whose first character (after spaces) it can open with
    firsts = [ln.lstrip()[:1] for ln in lines]
    brackets = _bracket_starts(lines, [i for i, c in enumerate(firsts) if c == "["])
    dotted = _dotted_starts(lines, [i for i, c in enumerate(firsts) if c.isdigit()])
    markdown = [i for i, c in enumerate(firsts) if c in _MARKDOWN_FIRST and _MARKDOWN.match(lines[i])]
    if len(brackets) >= 2 and len(brackets) >= len(dotted):
        style, starts = "bracket", brackets
    elif len(dotted) >= 2:
        style, starts = "dotted", dotted
    elif len(markdown) >= 2:
        style, starts = "markdown", markdown
    else:
        ay = _author_year_starts(lines, words)
        para = _paragraph_starts(lines)
        if len(ay) >= 2 or len(para) < 2:
            style, starts = "author-year", ay
        else:
            style, starts = "paragraph", para
    chunks = _cut(lines, starts)
    if chunks:
        last = chunks[-1]
        for j in range(1, len(last)):
            if _TRAILER.match(last[j]) and _ends_entry(last[j - 1].strip()):
                dropped = sum(len(x) + 1 for x in last[j:])
                notes.append(f"{dropped} characters after the last entry (from {last[j].strip()[:40]!r}: a "
                             "table, a figure or an appendix the list's span held) left out")
                chunks[-1] = last[:j]
                break
    out = []
    for chunk in chunks:
        chunk = _strip_marker(chunk, style)
        joined = _join(chunk, words)
        if style == "markdown" and not _A_LETTER.search(joined):
            continue  # "- 10": the widest label of a LaTeX thebibliography, not an entry
        if joined:
            out.append((joined, style))
    if len(out) == 1 and len(out[0][0]) > 2000:
        notes.append(f"the reference list reads as one entry of {len(out[0][0])} characters (a list run "
                     "together on one line?); kept whole")
    return out, notes


# -- fields ---------------------------------------------------------------------------------------

_DOI = re.compile(r"10\.\d{4,9}/[^\s\"<>]+")
_ARXIV_NEW = re.compile(r"(?:arxiv\s*[:.]?\s*(?:preprint\s+)?(?:arxiv\s*:\s*)?|arxiv\.org/(?:abs|pdf)/|\babs/)"
                        r"(\d{4}\.\d{4,5})(?:v\d+)?", re.IGNORECASE)
_ARXIV_OLD = re.compile(r"(?:arxiv\s*:\s*|arxiv\.org/(?:abs|pdf)/)([a-z-]+(?:\.[a-z]{2})?/\d{7})(?:v\d+)?",
                        re.IGNORECASE)
_URL = re.compile(r"(?:https?://|www\.)[^\s\"<>]+", re.IGNORECASE)
_TRAIL = ".,;:)]}>'\""
_LEAD_MARK = re.compile(r"^\s*(?:\[[^\]\s]{1,24}\]|\d{1,4}[.)](?=\s)|[-*+\u2022](?=\s))\s*")
_QUOTED = re.compile(r"[\u201c\"\u201e](?P<t>[^\u201c\u201d\"]{3,400}?)[,.]?[\u201d\"]")
# A full stop, question or exclamation mark before a space or the end: not after a capital letter (an
# initial, "J."), a two-letter capitalised word (ASCII), or vs / pp / Vol / Eds / Inc (the word before the
# mark being its whole run of word characters). One pattern, the mark first (so that the look-behinds are
# tried only where a mark stands), its match's ``end`` past the space.
_SENTENCE_END = re.compile(r"[.?!](?<![A-Z].)(?<!(?<!\w)(?:[A-Z][a-z]|vs|pp).)(?<!(?<!\w)(?:Vol|Eds|Inc).)(?:\s|\Z)")
# Where a venue's name stops: ", pages" / ", 12" / ", 2019" / ", A. B." (editors), " 12 (" / " 12:3", "(2019" /
# " (pp", " 2019." at the end, ": 12". Each alternative opens with one of ``,\s(:``: the pattern opens with
# that class (searched for it in C), the alternatives after it told apart by a look-behind at the character
# taken (the same match starts as those of the alternatives written one after another).
_VENUE_STOP = re.compile(r"[,\s(:](?:(?<=,)(?:\s*(?i:pages|pp\.?|vol\.?|volume|no\.?|num\.?|number|issue|art\.?"
                         r"|article)\b|\s*\d|\s*(?:1[89]|20)\d\d\b|\s[A-Z]\.\s?[A-Z])"
                         r"|(?<=\()(?:\s*(?:1[89]|20)\d\d|\s*(?i:pp|pages|vol)\b)"
                         r"|(?<=:)\s*\d"
                         r"|(?<=\s)(?:\d+\s*\(|\d+:\d|\(\s*(?i:pp|pages|vol)\b|(?:1[89]|20)\d\d[a-z]?\.?$))")
# (``_VENUE_STOP`` as first written, kept for the tests that hold the two to the same starts)
_VENUE_STOP_PLAIN = re.compile(r"(?=[,\s(:])(?:,\s*(?i:pages|pp\.?|vol\.?|volume|no\.?|num\.?|number|issue"
                               r"|art\.?|article)\b"
                               r"|,\s*\d|\s\d+\s*\(|\s\d+:\d|\(\s*(?:1[89]|20)\d\d|\s?\(\s*(?i:pp|pages|vol)\b"
                               r"|,\s*(?:1[89]|20)\d\d\b"
                               r"|\s(?:1[89]|20)\d\d[a-z]?\.?$|:\s*\d|,\s[A-Z]\.\s?[A-Z])")  # the last: editors

_LATEX_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304",
                  ".": "\u0307", "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b", "k": "\u0328",
                  "r": "\u030a"}
_LATEX_LETTERS = {"ss": "\u00df", "o": "\u00f8", "O": "\u00d8", "aa": "\u00e5", "AA": "\u00c5", "l": "\u0142",
                  "L": "\u0141", "ae": "\u00e6", "AE": "\u00c6", "oe": "\u0153", "OE": "\u0152", "i": "\u0131",
                  "j": "\u0237"}
_LATEX_ACCENT = re.compile(r"\{?\\([\"'`^~=.]|[cvuHkr](?=[\s{]))\s*\{?\\?([A-Za-z])\}?\}?")
_LATEX_LETTER = re.compile(r"\{?\\(ss|aa|AA|ae|AE|oe|OE|o|O|l|L|i|j)(?![A-Za-z])\s*\}?")


_ACCENT_CHARS = "\u00b4\u00a8\u02d8\u02c7\u02dc\u00b8\u02c6\u02d9\u02da\u02dd"
_ACCENTS_ALONE = re.compile(f"[{_ACCENT_CHARS}]")
# a spacing accent inside a name, with the spaces pdfium sets around it: "Krysci \u00b4 nski", "Ond\u02c7rej"
_ACCENT_IN_WORD = re.compile(f"(?<=[^\\W\\d_]) ?[{_ACCENT_CHARS}] ?(?=[^\\W\\d_])|\\s?[{_ACCENT_CHARS}](?=\\s|$)")


def decode_latex(s: str) -> str:
    """LaTeX accents and letters in a name (``{\\"o}``, ``\\'e``, ``\\ss``) as the characters, braces gone."""
    if "\\" not in s and "{" not in s:
        return s
    s = _LATEX_ACCENT.sub(lambda m: unicodedata.normalize("NFC", m.group(2) + _LATEX_ACCENTS[m.group(1)]), s)
    s = _LATEX_LETTER.sub(lambda m: _LATEX_LETTERS[m.group(1)], s)
    return s.replace("{", "").replace("}", "")


def _strip_trail(s: str) -> str:
    while s and s[-1] in _TRAIL:
        if s[-1] == ")" and s.count("(") >= s.count(")"):
            break
        s = s[:-1]
    return s


def _doi(s: str) -> tuple[str | None, tuple[int, int] | None]:
    m = _DOI.search(s)
    if m is None:
        return None, None
    return _strip_trail(m.group(0)).lower() or None, m.span()


def _arxiv(s: str) -> tuple[str | None, tuple[int, int] | None]:
    if "abs/" not in s and "rxiv" not in s and "RXIV" not in s and "rXiv" not in s:
        return None, None
    pos = 0
    if s.isascii():  # both patterns open with "arxiv" or "abs/", in any case: searched from the first one
        low = s.encode("ascii").lower()
        at = [i for i in (low.find(b"arxiv"), low.find(b"abs/")) if i >= 0]
        if not at:
            return None, None
        pos = min(at)
    m = _ARXIV_NEW.search(s, pos) or _ARXIV_OLD.search(s, pos)
    if m is None:
        return None, None
    return m.group(1).lower() if "/" in m.group(1) else m.group(1), m.span()


_FAMILIES: dict[str, str | None] = {}  # an author's name as printed -> ``_family_of`` it, the last few kept
_FAMILIES_KEPT = 1 << 16
_UNSEEN = object()


def _family(part: str) -> str | None:
    """``_family_of(part)``, kept for the names met last: a library's reference lists name the same authors
    again and again (a pure function of the string: kept or not, the same answer)."""
    if len(part) > 80:
        return _family_of(part)  # no name: not kept (the memory kept stays small)
    got = _FAMILIES.get(part, _UNSEEN)
    if got is _UNSEEN:
        if len(_FAMILIES) >= _FAMILIES_KEPT:
            _FAMILIES.clear()
        got = _FAMILIES[part] = _family_of(part)
    return got


def _family_of(part: str) -> str | None:
    """The family name in one author's name as printed: "Family, Given", "Given Family", "Family IJ",
    "I. J. Family", "Given van der Family"."""
    part = part.strip(" .,;")
    if not part:
        return None
    if "," in part:
        fam = part.split(",", 1)[0].strip()
        return fam or None
    words = part.split()
    while len(words) > 1 and words[-1].rstrip(".") in _SUFFIXES:
        words.pop()
    if not words:
        return None
    if len(words) >= 2 and _CAPS.fullmatch(words[-1]) and not _CAPS.fullmatch(words[0]):
        return words[0]  # Vancouver: "Smith JA"
    # the last word, with the lower-case particles before it ("van der Zuylen"), or one capitalised
    # particle after a given name ("Asma Ben Abacha", "C. J. Van Rijsbergen"; not before a Vietnamese family
    # name, where "Van" or "Le" is a middle name: "Minh Le Nguyen")
    i = len(words) - 1
    while i > 0 and words[i - 1].lower() in _PARTICLES and words[i - 1][:1].islower():
        i -= 1
    if i == len(words) - 1 and i >= 2 and words[i - 1] in _CAP_PARTICLES \
            and words[i].strip(" .") not in _VIETNAMESE_FAMILIES \
            and not (words[i - 1] == "Ben" and all(_INITIAL_WORD.fullmatch(w) for w in words[:i - 1])):
        i -= 1  # not "Ben" after initials only: a given name then ("J. Ben Schafer"), as against "Asma Ben Abacha"
    fam = " ".join(words[i:]).strip(" .")
    if len(fam.rstrip(".")) <= 1 and len(words) > 1:
        return None  # only initials
    return fam or None


_INITIAL_WORD = re.compile(r"[A-Z]\.(?:-?[A-Z]\.)*")  # "J.", "J.-C."
_GROUP_WORD = re.compile(r"\s(?:of|for|at|on|the|in)\s")
_SUFFIXES = frozenset({"Jr", "Sr", "II", "III", "IV"})
_CAP_PARTICLES = frozenset("Ben Bin Ibn Abu Al El De Del Della Dos Da Das Van Von Le La Di Du Der Den Ter Ten".split())
_VIETNAMESE_FAMILIES = frozenset("Nguyen Tran Le Pham Hoang Huynh Phan Vu Vo Dang Bui Do Ho Ngo Duong Ly".split())
_INITIALS = re.compile(r"(?:[A-Z\u00c0-\u00de]\.?\s?-?\s?){1,4}")
_AND = re.compile(r"\s(?:and|und)\s")


def _authors(block: str) -> tuple[str, ...]:
    """The family names of an author block (from an entry's text: its only white space single spaces):
    ``_authors_of`` it, kept in ``_BLOCKS`` for the blocks met last (a pure function of the string: kept or
    not, the same answer; the same work's authors are printed alike by the entries that cite it)."""
    got = _BLOCKS.get(block)
    if got is None:
        got = _authors_of(block)
        if len(block) <= _BLOCK_CHARS:
            if len(_BLOCKS) >= _BLOCKS_KEPT:
                _BLOCKS.clear()
            _BLOCKS[block] = got
    return got


def _authors_of(block: str) -> tuple[str, ...]:
    """``_authors``, worked out."""
    if "\\" in block or "{" in block:  # (``decode_latex``'s own test, without the call)
        block = decode_latex(block)
    low = block.lower()
    # what ``_NOT_NAMES`` needs, looked for first ("\u017f", a long s, matches "s" there)
    if ("et" in low and "al" in low) or "others" in low or "(ed" in low or "ed." in low or "eds." in low \
            or "\u017f" in low:
        block = _NOT_NAMES.sub(" ", block)
    # "A, B, and C" / "A; B & C" / "A und B": one separator
    block = block.replace(";", ",").replace("&", ",")
    if "nd " in block:  # (" and " alone: replaced as the pattern would, leftmost first, the spaces single)
        block = block.replace(" and ", ",") if " und " not in block else _AND.sub(",", block)
    parts = list(filter(None, map(str.strip, block.split(","), _SPACE_DOTS)))
    if not parts:
        return ()
    names: list[str] = []
    if len(parts) >= 2 and len(parts) % 2 == 0 and " " not in "".join(parts) and "," in block:
        return tuple(parts[0::2])  # "Family, Given, and Family, Given": every part one word, in pairs
    # each part's family name and whether it is initials, looked up in C (``_part``): names repeat
    initials = list(map(_PART_INITIALS.get, parts))
    fams = None
    if None in initials:
        got = [_part(p) for p in parts]
        fams, initials = [f for f, _i in got], [i for _f, i in got]
    # "Family, I. J., Family, I." -> after splitting on commas, initials parts belong to the part before
    if len(parts) >= 2 and True in initials:
        i = 0
        while i < len(parts):
            if i + 1 < len(parts) and initials[i + 1] and not initials[i]:
                names.append(parts[i])
                i += 2
                continue
            if not initials[i]:
                fam = _family(parts[i])
                if fam:
                    names.append(fam)
            i += 1
        return tuple(n for n in (x.strip(" .") for x in names) if n)
    if fams is None:
        fams = list(map(_PART_FAMILY.get, parts))
        if None in fams:
            fams = [_part(p)[0] for p in parts]
    return tuple(filter(None, fams))


_SPACE_DOTS = itertools.repeat(" .")
_PART_FAMILY: dict[str, str] = {}  # an author list's part -> its family name ("" for none), the last few kept
_PART_INITIALS: dict[str, bool] = {}  # the same parts -> whether the part is initials only
_PARTS_KEPT = 1 << 16


def _part(p: str) -> tuple[str, bool]:
    """(the family name of one comma-separated part of an author list, "" for none; whether it is initials
    only ("I. J.")): a group's name whole ("OGC of Harvard"), else ``_family``. Kept for the parts met last
    (a pure function of the part)."""
    fam = p if " " in p and _GROUP_WORD.search(p) else _family(p) or ""
    init = bool(_INITIALS.fullmatch(p))
    if len(p) <= 80:
        if len(_PART_FAMILY) >= _PARTS_KEPT:
            _PART_FAMILY.clear()
            _PART_INITIALS.clear()
        _PART_FAMILY[p] = fam
        _PART_INITIALS[p] = init
    return fam, init


def _has_quote(s: str, within: int) -> bool:
    """A quote ``_QUOTED`` opens with among the first ``within`` characters (else no quoted title starts
    there: the pattern is not searched)."""
    head = s[:within]
    return '"' in head or "\u201c" in head or "\u201e" in head


def parse_entry(raw: str, n: int) -> Entry:
    """One raw entry -> an Entry: its whitespace collapsed (kept whole) and the fields it prints."""
    return _parse_entry(" ".join(raw.split()), n)


def _parse_entry(text: str, n: int) -> Entry:
    """``parse_entry`` of an entry whose white space is collapsed already (``_split``'s entries are)."""
    authors, year, title, doi, arxiv, url, rest = _head(text)
    title, venue = _tail(rest, title)
    # the frozen dataclass's fields set as its own __init__ sets them, in one update (one Entry per entry)
    e = _new_entry(Entry)
    e.__dict__.update(n=n, text=text, authors=authors, year=year, title=title or None, venue=venue, doi=doi,
                      arxiv=arxiv, url=url)
    return e


def _tail(rest: str, title: str | None) -> tuple[str | None, str | None]:
    """(title, venue) from what follows an entry's author block and year (``rest``): the title there when
    none was found before (a quoted one, else up to ``_title_end``), then the venue after it."""
    if title is None:
        head = rest[:5]  # (``_has_quote(rest, 5)``, inline)
        q = _QUOTED.search(rest) if '"' in head or "\u201c" in head or "\u201e" in head else None
        if q is not None and q.start() < 5:
            title, rest = q.group("t").strip(" ,."), rest[q.end():]
        else:
            end, nxt = _title_end(rest)
            t = rest[:end].strip(" ,.;:")
            if t:
                title = t[:500]
            rest = rest[nxt:]
    return title, _venue(rest)


def _head(text: str) -> tuple:
    """An entry's (authors, year, title or None, DOI, arXiv id, URL, the text after its author block and
    year): all ``_parse_entry`` reads before ``_tail``."""
    lead = _LEAD_MARK.match(text)
    if lead is None:
        s = text[:MAX_ENTRY_CHARS]
    else:
        a = lead.end()
        s = text[a:a + MAX_ENTRY_CHARS]
    if not s.isascii() and _ACCENTS_ALONE.search(s):  # (the accents are not ASCII)
        s = _ACCENT_IN_WORD.sub("", s)  # pdfium's accents set apart: "Krysci \u00b4 nski" -> "Kryscinski"
    doi, doi_span = _doi(s) if "10." in s else _NO_SPAN  # (``_DOI`` opens with "10.")
    # (``_arxiv``'s own first test, without the call)
    if "abs/" in s or "rxiv" in s or "RXIV" in s or "rXiv" in s:
        arxiv, arxiv_span = _arxiv(s)
    else:
        arxiv, arxiv_span = _NO_SPAN
    url = None
    linked = "://" in s or "www." in s or "WWW." in s
    for m in _URL.finditer(s) if linked else ():
        u = _strip_trail(m.group(0))
        if "doi.org/" in u.lower() and doi:
            continue
        url = u
        break
    # the first year outside a DOI, an arXiv id or a URL
    if doi_span is None and arxiv_span is None and url is None:
        y0 = _YEAR.search(s)  # (no span to be outside of: the first of ``finditer``'s)
    else:
        spans = []
        if doi_span:
            spans.append(doi_span)
        if arxiv_span:
            spans.append(arxiv_span)
        if url is not None:
            spans += [m.span() for m in _URL.finditer(s)]
        y0 = None
        for m in _YEAR.finditer(s):
            at = m.start()
            for a, b in spans:
                if a <= at < b:
                    break
            else:
                y0 = m
                break
    authors: tuple[str, ...] = ()
    year = None
    title = venue = None
    rest = s
    # the author block: up to the first year when only names come before it; else up to a quoted title;
    # else up to the first sentence end
    block = None
    ys = -1 if y0 is None else y0.start()
    # (a digit before the year: no name prefix there, ``_name_prefix``'s every branch rejecting it -- found
    # by one search)
    # (kept per text before the year: an entry's author block is printed again by the other entries citing the
    # same work)
    if ys > 0 and (_named_before(s[:ys]) or _GROUP_YEAR.match(s)):
        block = s[:ys]
        year = int(s[ys:ys + 4])  # (the year's four digits: its match's first)
        rest = s[y0.end():]
        m = _AFTER_YEAR.match(rest)  # "). ", "-2023. " (anchored: what ``sub`` would cut)
        if m is not None:
            rest = rest[m.end():]
    else:
        q = _QUOTED.search(s) if _has_quote(s, 600) else None
        if q is not None and q.start() < 600:
            block = s[:q.start()]
            title = q.group("t").strip(" ,.")
            rest = s[q.end():]
        else:
            m = _SENTENCE_END.search(s)
            if m is not None and m.start() < MAX_ENTRY_CHARS:
                block = s[:m.start()]
                rest = s[m.end():]
                cut = _initials_list_end(block)
                if cut is not None:  # "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of ..."
                    v = _COMMA_VENUE.search(block, cut + 1)  # "..., Proc. of SC 2002": a venue after a comma
                    if v is not None:
                        title, rest = block[cut:v.start()], s[v.start() + 1:]
                    else:
                        title = block[cut:]
                    title = title.strip(" ,.;:")[:500] or None
                    block = block[:cut]
    if block is not None:
        authors = _authors(block.strip(" ,.;:("))
        if len(authors) > 200:
            authors = authors[:200]
    if year is None and y0 is not None:
        year = int(s[ys:ys + 4])
    return authors, year, title, doi, arxiv, url, rest


_new_entry = object.__new__


def _named_before(pre: str) -> bool:
    """``not _has_digit(pre) and _name_prefix(pre, True)``: whether the text before an entry's first year is
    its author block, kept in ``_NAMED`` for the texts met last (a pure function of the string: kept or not,
    the same answer)."""
    got = _NAMED.get(pre)
    if got is None:
        if _has_digit(pre):
            return False  # (not kept: most such texts are a title and a venue, seen once)
        got = _name_prefix(pre, True)
        if len(pre) <= _BLOCK_CHARS:
            if len(_NAMED) >= _BLOCKS_KEPT:
                _NAMED.clear()
            _NAMED[pre] = got
    return got


# an author block (the text before an entry's year or its title) -> whether it reads as names
# (``_named_before``), and -> its family names (``_authors``): the last few kept, each at most
# ``_BLOCK_CHARS`` long (the memory kept stays under ~10 MB)
_NAMED: dict[str, bool] = {}
_BLOCKS: dict[str, tuple[str, ...]] = {}
_BLOCKS_KEPT = 1 << 14
_BLOCK_CHARS = 400


def _has_digit(s: str) -> bool:
    """``_ANY_DIGIT.search(s)`` found one: an ASCII string's digits deleted from its bytes (three times
    faster than the pattern's search)."""
    if s.isascii():
        b = s.encode("ascii")
        return len(b.translate(None, _ASCII_DIGITS)) != len(b)
    return _ANY_DIGIT.search(s) is not None
_NO_SPAN = (None, None)


# one author, initials first ("D. Monderer", "J.-C. Bolot", "A. van Dam"), or two joined by "and"; a part of
# a comma-separated list, "and" before it allowed
_INITIALS_NAME = r"(?:[A-Z]\.(?:\s?-?[A-Z]\.)*\s?)(?:[a-z]{1,3}\s){0,2}[A-Z][^\s,.;:()]{1,40}"
_INITIALS_PART = re.compile(rf"(?:and\s+)?{_INITIALS_NAME}(?:\s+and\s+{_INITIALS_NAME})?")


_COMMA_VENUE = re.compile(r",\s(?=(?:[Ii]n|Proc|Proceedings|Journal|Trans|IEEE|ACM|Intl|International|Advances|arXiv|CoRR)\b)")


def _initials_list_end(block: str) -> int | None:
    """Where an IEEE-style author list that a comma ends, not a period, stops in ``block`` (the text up to
    the entry's first sentence end): "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of Correlation"
    -> the comma before "On". None unless ``block`` opens with initials-first names, each a comma-separated
    part, followed by a part that is none (the title: a capital or a quote, then two words at least, and
    not names only from there on)."""
    if not ("A" <= block[:1] <= "Z" and block[1:2] == "."):  # what ``_INITIALS_FIRST`` opens with
        return None
    # a comma can end the list only where a capital that is not an initial, or a quote, follows it: with
    # none such the answer is None whatever the parts before are (the usual initials-first list, "A. Smith,
    # B. Jones, ...", is let go without its parts' patterns)
    comma = block.find(",")
    while comma >= 0:
        nxt = block[comma + 1:].lstrip()
        if (nxt[:1].isupper() and nxt[1:2] != ".") or nxt[:1] in "\"\u201c":
            break
        comma = block.find(",", comma + 1)
    else:
        return None
    if not _INITIALS_FIRST.match(block + " "):
        return None
    pos = 0
    while True:
        comma = block.find(",", pos)
        if comma < 0:
            return None
        if not _INITIALS_PART.fullmatch(block[pos:comma].strip()):
            return None
        nxt = block[comma + 1:].lstrip()
        if (nxt[:1].isupper() and nxt[1:2] != ".") or nxt[:1] in "\"\u201c":  # not an initial ("W. G.")
            following = block[comma + 1:block.find(",", comma + 1) if "," in block[comma + 1:] else len(block)]
            if not _INITIALS_PART.fullmatch(following.strip()) and len(following.split()) >= 2 \
                    and not _names_only(block[comma + 1:]):  # "J. Smith, Dan Frankowski, and K. Lee": names
                return comma
        pos = comma + 1


_QUESTION_END = re.compile(r"[?!]\s+(?=In\b|Proc|arXiv|ArXiv|CoRR|Journal|Advances|Trans|IEEE|ACM|Findings)")


def _title_end(rest: str) -> tuple[int, int]:
    """Where the title at the start of ``rest`` ends and what follows starts: at its first full stop, or
    at a question or exclamation mark followed by a venue ("Dream? In Proceedings ..."; elsewhere one is
    part of the title, "What's in a Summary? Laying ...")."""
    m = _SENTENCE_END.search(rest)
    while m is not None and rest[m.start()] in "?!" and not _QUESTION_END.match(rest, m.start()):
        m = _SENTENCE_END.search(rest, m.end())
    if m is None:
        return len(rest), len(rest)
    return (m.start() + 1 if rest[m.start()] in "?!" else m.start()), m.end()


_A_LETTER = re.compile(r"[^\W\d_]")
_TWO_LETTERS = re.compile(r"[^\W\d_]{2}")
_CAPS = re.compile(r"[A-Z]{1,3}")
# "et al.", "others", "(eds.)", "eds.": each a word (its first letter, then no word character before it)
# (its first characters as a class of their own cases -- only "e"/"E" and "o"/"O" match them without case -- so
# that the pattern is searched for them; the rest without case, as the whole was once written)
_NOT_NAMES = re.compile(r"[eEoO(](?:(?<=[eE])(?<!\w[eE])(?i:t\s+al\.?|ds?\.(?=\s|$))|(?<=[oO])(?<!\w[oO])(?i:thers\b)"
                        r"|(?<=\()(?i:eds?\.?\)))")
# (``_NOT_NAMES`` as first written, kept for the test that holds the two to the same matches)
_NOT_NAMES_PLAIN = re.compile(r"e(?<!\we)t\s+al\.?|o(?<!\wo)thers\b|\(eds?\.?\)|e(?<!\we)ds?\.(?=\s|$)", re.IGNORECASE)
_AFTER_YEAR = re.compile(r"^(?:\s?[\u2013-]\s?(?:1[89]|20)\d\d)?[\s).,:;\]]+")
_EDITORS = re.compile(r"^[^()]{0,200}?,?\s\(?(?:editors?|eds?\.?)\)?,?\s+")
_IN = re.compile(r"^(?:[Ii]n\s*:?\s+|[Ii]n:)")
_PREPRINT = re.compile(r"^(arXiv preprint|ArXiv preprint)\s+arXiv$")
_DOT_SPACE = re.compile(r"\.\s")
# the words a venue's name abbreviates beyond four letters ("Proc.", "Conf." and "J." are short enough)
_ABBREVIATIONS = frozenset("""Trans Intell Comput Artif Assoc Annu Mach Learn Lang Linguist Process Inform
Syst Technol Softw Appl Math Phys Chem Biol Stat Psychol Symp Commun Recognit Anal Inst Neurosci Mater Environ
Internat Engin Electr Theor Geophys""".split())


def _venue(rest: str) -> str | None:
    v = rest.strip(" ,.;:")
    if v[:2] in ("In", "in"):
        m = _IN.match(v)  # (anchored: what ``sub`` would cut, at most once)
        if m is not None:
            v = v[m.end():]
    m = _EDITORS.match(v) if " ed" in v or " (ed" in v else None  # what the pattern needs, looked for first
    if m is not None:
        v = v[m.end():]  # "B. Scholkopf and A. J. Smola, editors, Advances in ..."
    if not v:
        return None
    m = _VENUE_STOP.search(v)
    if m is not None:
        v = v[:m.start()]
    for m in _DOT_SPACE.finditer(v) if "." in v else ():
        i = j = m.start()
        while j > 0 and v[j - 1].isalpha():
            j -= 1
        word = v[j:i]
        if not (word[:1].isupper() and (len(word) == 1 or len(word) <= 4 and not word.isupper()
                                        or word in _ABBREVIATIONS)):  # "J.", "Proc.", "Comput."
            v = v[:i]
            break
    v = v.strip(" ,.;:(")
    if v.endswith("arXiv"):
        m = _PREPRINT.match(v)  # (anchored at both ends: the whole ``v``, or nothing)
        if m is not None:
            v = m.group(1) + v[m.end():]
    # (``_DOI`` opens with "10.", ``_URL`` with "http" or "www." in any case: tried only where ``v`` does)
    if not v or not _TWO_LETTERS.search(v) or (v[:3] == "10." and _DOI.match(v)) or \
            (v[:1] in "hHwW" and _URL.match(v)):
        return None
    return v[:300]


_KERNEL_FROM = 4  # entries in a list from which its tails go to ``kernels.citefields`` (once numba is loaded)
_AS_DASH_OR_NUL = "chitragupta-citefields"  # the codec error handler below
_BYTE_OF: dict[str, str] = {}  # a non-ASCII character -> "~" or NUL (``_byte_of``), the last few kept


def _byte_of(c: str) -> str:
    """"~" for a non-ASCII character every tail rule (``_tail``: ``_title_end``, ``_venue``) reads as it reads
    "~" -- not white space (``\\s``, ``str.isspace``), no word character (``\\w``, ``isalnum``: no letter or
    digit of any kind), no cased character (nothing a case-blind pattern folds to a letter), no quote
    ``_QUOTED`` opens or closes with: "\u2013", "\u2019" --, else a NUL (``kernels.citefields`` leaves a tail
    holding one to Python)."""
    got = _BYTE_OF.get(c)
    if got is None:
        plain = not (c.isspace() or c.isalnum() or c.isupper() or c.islower() or c.lower() != c or c.upper() != c
                     or c.casefold() != c or c in "\u201c\u201d\u201e")
        got = "~" if plain else "\x00"
        if len(_BYTE_OF) >= 4096:
            _BYTE_OF.clear()
        _BYTE_OF[c] = got
    return got


def _as_dash_or_nul(err: UnicodeEncodeError) -> tuple[str, int]:
    return "".join(map(_byte_of, err.object[err.start:err.end])), err.end


codecs.register_error(_AS_DASH_OR_NUL, _as_dash_or_nul)


def _parse_entries(raws: list[str]) -> list[Entry]:
    """``[_parse_entry(r, n) for n, r in enumerate(raws, start=1)]``, each entry's ``_head`` here and the
    tails (``_tail``: the title after the author block and year where none was found, and the venue) of all
    of them in one call of ``kernels.citefields.tails``; a tail it leaves to Python read by ``_tail``."""
    import numpy as np

    from chitragupta.kernels import citefields

    if citefields.ABBREVIATIONS_BLOB[0].shape[0] == 0:
        citefields.set_abbreviations(_ABBREVIATIONS)
    heads = list(map(_head, raws))
    rests = [h[6] for h in heads]
    joined = "".join(rests)
    # one byte a character: a non-ASCII one that no tail rule tells from a dash stands as "~", any other as a
    # NUL (its tail left to Python)
    buf = joined.encode("ascii") if joined.isascii() else joined.encode("ascii", _AS_DASH_OR_NUL)
    n = len(rests)
    lens = np.fromiter(map(len, rests), dtype=np.int64, count=n)
    ends = np.cumsum(lens)
    need = np.fromiter((h[2] is None for h in heads), dtype=np.bool_, count=n)
    got = citefields.tails(np.frombuffer(buf, dtype=np.uint8), ends - lens, ends, need).tolist()
    out = []
    new, update = _new_entry, dict.update
    for k, ((authors, year, title, doi, arxiv, url, rest), (status, ta, tb, va, vb)) in enumerate(zip(heads, got)):
        if status:
            title, venue = _tail(rest, title)
        else:
            if title is None and ta >= 0:
                title = rest[ta:tb]
            venue = rest[va:vb] if va >= 0 else None
        e = new(Entry)
        update(e.__dict__, n=k + 1, text=raws[k], authors=authors, year=year, title=title or None, venue=venue,
               doi=doi, arxiv=arxiv, url=url)
        out.append(e)
    return out


def parse_reference_list(ref_text: str, *, words=None,
                         running: frozenset[str] = frozenset()) -> tuple[list[Entry], list[str]]:
    """The list's text (after its heading) -> its entries in order and notes on what could not be read
    (``words``, ``running``: as ``split_entries``)."""
    raw, notes = _split(ref_text, words, running)
    # (``_join``'s entries: spaces single)
    if len(raw) >= _KERNEL_FROM and "numba" in sys.modules:  # numba loaded already (by the index): its start is paid
        entries = _parse_entries([r for r, _style in raw])
    else:
        entries = [_parse_entry(r, i) for i, (r, _style) in enumerate(raw, start=1)]
    long = [e.n for e in entries if len(e.text) > MAX_ENTRY_CHARS]
    if long:
        notes.append(f"{len(long)} entr{'y' if len(long) == 1 else 'ies'} longer than {MAX_ENTRY_CHARS} characters "
                     f"(first: entry {long[0]}): fields read from the start, the text kept whole")
    if entries and not any(e.year or e.doi or e.arxiv for e in entries):
        notes.append(f"none of the {len(entries)} entries prints a year, a DOI or an arXiv id: "
                     "is this a reference list?")
    return entries, notes
