"""A reference list's text, split into entries, and the fields each entry prints: the rules, as the
specification (the index's pass calls them on each text it reads; ``engine.citations`` stores and
resolves what they give).

    parse_reference_list(ref_text)  the list's text (after its heading) -> (entries, notes)
    split_entries(ref_text)         -> one raw string per entry
    parse_entry(raw, n)             one raw entry -> Entry (authors, year, title, venue, DOI, arXiv id, URL)
    plain_list(text, span), items_list(items, span)   what the list's text is, from a plain text or a sidecar

**The list's text.** Without a sidecar, the plain-text reference span (``refcut.plain_reference_span``)
less its heading line; running titles are read off the whole text (``running_lines(text, 3)``). With a
docling sidecar, its items after the reference heading (``refcut.reference_span``) up to the first later
heading, captions and page headers left out, one item a line: a list item (docling's one entry) as a
Markdown item unless it is numbered already; where the list is made of list items, a ``text`` item too
when it opens like an entry (``starts_entry``: docling's Markdown reader makes an entry holding a link a
``text`` item), else it continues the entry before it.

**Splitting.** The text is read as lines (a form feed, a page break, ends one too). Dropped first: lines
that are only a page number; running titles (a line among the first or last two of a page, digits
ignored, seen on two or more pages of the list -- or on three of the whole document -- and not ending in
a period; an author running head, "Shen, et al.", on two pages); footnotes set between two columns of entries
(a line whose number is glued to its text, "19The Kaggle ...", and a "See ..." line after it). Then the
first style that fits, in this order, cuts it:

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
words of the list and the whole is not: "data-\\nbase"), a URL or DOI split at a line end joined without a
space. What follows the last entry inside the list's span -- a table or figure caption, an appendix or the
acknowledgements after a line that ends an entry -- is left out, with a note. A list that reads as one
entry of more than 2,000 characters gets a note (it could not be split).

**Fields.** Plain regular expressions, each linear in the entry's length (no nested quantifiers, so a
200 KB run-on line cannot make one backtrack), read from the first ``MAX_ENTRY_CHARS`` characters (the
text is kept whole): DOI ``10.NNNN/...`` (lower-cased, URL prefix and trailing ``.,;)`` dropped), arXiv id
(``arXiv:2005.14165v2``, ``arxiv.org/abs/...``, ``abs/1409.0473``, old ``hep-th/9901001``; the version
dropped), the first other URL, the year (1800-2099, a letter suffix allowed: the one after the author
block when only names come before it, else the first outside a DOI, arXiv id or URL), the authors as
printed (``names``) and their family names (``authors``; LaTeX accents decoded, pdfium's detached accents
rejoined, particles kept: "van der Maaten", a group's name whole: "OGC of Harvard"), the title (a quoted
one that stands as a segment of its own -- at the start, or after a ``.,:;)`` -- else the sentence after
the authors and year; a question mark ends it only before a venue; a part of the author block without a
letter, "2019" of "2019. CHI '19: ...", is no author) and the venue (the part after the
title, "In" dropped, up to its volume, pages or year). An IEEE-style list of initials-first names that a
comma ends ("I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of Correlation. J. ...") stops at
that comma, the title after it, and a venue after a later comma ("..., Proc. of ...") is split from it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Entry", "split_entries", "parse_entry", "parse_reference_list", "running_lines", "decode_latex",
           "starts_entry", "plain_list", "items_list", "MAX_ENTRY_CHARS", "MAX_LIST_CHARS", "RULES"]

RULES = 5  # bumped whenever a splitting or field rule changes: every stored list is parsed again
MAX_ENTRY_CHARS = 4000  # fields are read from this much of an entry (its raw text is kept whole)
MAX_LIST_CHARS = 2_000_000  # a reference list longer than this is read up to here, with a note


@dataclass(frozen=True)
class Entry:
    """One entry of a reference list: its raw text (always kept) and what could be read from it."""

    n: int
    text: str
    authors: tuple[str, ...] = ()  # family names
    year: int | None = None
    title: str | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv: str | None = None
    url: str | None = None
    names: tuple[str, ...] = ()  # each author's name as printed ("Kyle Lo", "Lo, K."), one per family name


# -- the list's text ------------------------------------------------------------------------------

def plain_list(text: str, span: tuple[int, int]) -> tuple[str, frozenset[str]]:
    """(the list's text, the document's running titles) of a plain text whose reference span is ``span``."""
    body = text[span[0]:span[1]]
    nl = body.find("\n")
    return ("" if nl < 0 else body[nl + 1:]), running_lines(text, 3)


_NUMBERED = re.compile(r"^\s*(?:\[[^\]\s]{1,24}\]|\d{1,4}[.)]\s|[-*+\u2022]\s)")


def items_list(items: list[dict], span: tuple[int, int]) -> str:
    """The list's text from a sidecar's items and its reference span (the module docstring)."""
    from chitragupta.engine.text.sidecar import EXCLUDED_LABELS

    kept = []
    for it in items[span[0] + 1:span[1]]:
        if it["label"] in ("section_header", "title"):
            break  # a list has no headings: what follows one (an appendix the span keeps) is no entry
        if it["label"] not in EXCLUDED_LABELS:
            kept.append(it)
    listed = sum(it["label"] == "list_item" for it in kept) >= 2
    out = []
    for it in kept:
        t = it["text"]
        entry = it["label"] == "list_item" or (listed and it["label"] == "text" and starts_entry(t))
        out.append("- " + t if entry and not _NUMBERED.match(t) else t)
    return "\n".join(out)


# -- splitting ------------------------------------------------------------------------------------

_PAGE_NUMBER = re.compile(r"^\s*(?:[-\u2013\u2014]\s*)?(?:page\s+)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?"
                          r"(?:\s*[-\u2013\u2014])?\s*$", re.IGNORECASE)
_BRACKET_NUM = re.compile(r"^\s*\[(?P<num>\d{1,4})\]")
_ALPHA_LABEL = re.compile(r"^\s*\[(?=[^\]\s]*\d)(?=[^\]\s]*[A-Za-z])[^\]\s]{2,24}\]\s*")
_DOTTED = re.compile(r"^\s*(?P<num>\d{1,4})[.)]\s+(?=\S)")
_MARKDOWN = re.compile(r"^\s*[-*+\u2022]\s+(?=\S)")
_MD_KEY = re.compile(r"^[^\s]{1,80}$")
# (patterns open with characters, their look-behinds after them: one opening with a look-around is tried at
# every position of the text, one opening with characters is searched for them)
_YEAR = re.compile(r"(?:1[89]|20)(?<![\d/.:-]..)\d\d[a-z]?(?![\d/])")
_FOOTNOTE = re.compile(r"^\s*\d{1,2}(?=[A-Z][a-z]{2})")
_FOOTNOTE_MORE = re.compile(r"^\s*(?:See|see|Available|Accessed|https?://|www\.)")
_STRAY_ACCENT = re.compile(r"\s[\u00b4\u00a8\u02d8\u02c7\u02dc\u00b8\u02c6\u02d9\u02da\u02dd`]$")
_DIGITS = re.compile(r"\d+")
_DIGIT = re.compile(r"\d")
_LINE_END_HYPHEN = re.compile(r"-\s*[\n\f]")
_SPLIT_WORD = re.compile(r"-(?<=[^\W\d_]-)\n\s*(?=[a-z])")
# what follows a list inside its span, and is no entry: a table or figure caption, an appendix or the
# acknowledgements (a line that opens so after a line that ends an entry)
_TRAILER = re.compile(r"^\s*(?:(?:Table|TABLE|Figure|FIGURE|Fig\.)\s*[A-Z]?\d|(?:[A-Z]\.?\s+|\d{1,2}(?:\.\d+)*\.?\s+)?"
                      r"(?:APPENDIX|Appendix|APPENDICES|Appendices|ACKNOWLEDGE?MENTS?|Acknowledge?ments?)\b)")


def _furniture_key(line: str) -> str:
    """A line as running titles are compared: its digits left out, its spaces collapsed."""
    return " ".join(_DIGITS.sub("", line).split())


def _edges(lines: list[str]) -> list[str]:
    """The first two and the last two non-blank lines of a page's (stripped) lines."""
    full = [ln for ln in lines if ln]
    return full[:2] + full[-2:]


def running_lines(text: str, min_pages: int = 2) -> frozenset[str]:
    """The running titles of a paged text (form feeds between pages), their digits left out, seen on at
    least ``min_pages`` pages (an author running head on two): the module docstring's rule."""
    if "\f" not in text:
        return frozenset()
    seen: dict[str, int] = {}
    for page in text.split("\f"):
        for ln in set(_edges([x.strip() for x in page.split("\n")])):
            if len(ln) <= 200 and (not ln.endswith(".") or ln.endswith("et al.")):
                key = _furniture_key(ln)
                if key:
                    seen[key] = seen.get(key, 0) + 1
    return frozenset(k for k, c in seen.items() if c >= (min(2, min_pages) if k.endswith("et al.") else min_pages))


def _drop_furniture(text: str, running: frozenset[str]) -> list[str]:
    """The lines of ``text`` (right-stripped) less the furniture (module docstring; ``running``: the
    document's running titles) and a stray accent at a line's end (pdfium's "Com- \u00b4")."""
    pages: list[list[str]] = [[]]
    note = False
    for p, page in enumerate(text.split("\f")):
        for i, ln in enumerate(page.split("\n")):
            ln = ln.rstrip()
            if _FOOTNOTE.match(ln) or (note and _FOOTNOTE_MORE.match(ln)):
                note = True
                continue
            note = False
            if p > 0 and i == 0:
                pages.append([])
            pages[-1].append(_STRAY_ACCENT.sub("", ln) if ln[-1:] in _ACCENT_CHARS + "`" else ln)
    if "\f" not in text:
        return [ln for ln in pages[0] if not _PAGE_NUMBER.match(ln.strip())]
    running = running | running_lines(text)
    out: list[str] = []
    for pg in pages:
        stripped = [ln.strip() for ln in pg]
        furniture = {e for e in _edges(stripped) if _furniture_key(e) in running}
        out += [ln for ln, st in zip(pg, stripped) if not (_PAGE_NUMBER.match(st) or st in furniture)]
    return out


_STOPWORDS = frozenset("""a an the of for in on at to with from by into via using is are as its this that
our we how what why when which new towards toward pages page vol volume no pp proceedings proc conference
journal transactions workshop symposium press university arxiv preprint editor editors ed eds see
""".split())
_PARTICLES = frozenset("van von der den de del della di da das dos du le la el al bin ibn ter ten zu y e st st.".split())
_JOINERS = frozenset({"and", "&", "et", "al", "al.", "others", "und", "y"})
_NO_NAMES = _JOINERS | _PARTICLES  # (tokens that are neither names nor against them)
_LONG_STOPWORDS = frozenset(w for w in _STOPWORDS if len(w) > 1)
_NAME_SEP = re.compile(r"[\s,;&()\[\]]+")
_MARK_SPACE = re.compile(r"[.?!]\s")


def _sentence_break(s: str) -> bool:
    """A full stop, question or exclamation mark after two letters, then a space (not an initial's "J. ")."""
    return any(m.start() >= 2 and s[m.start() - 1].isalpha() and s[m.start() - 2].isalpha()
               for m in _MARK_SPACE.finditer(s))


def _names_only(s: str, lenient: bool = False) -> bool:
    """``s`` reads as an author list (module docstring): at least two name tokens, no function word, no
    digit, no sentence break; ``lenient``: names in lower case too ("david nicholas"), for an entry cut."""
    s = s.strip().rstrip("(").strip()
    if not s or len(s) > 1500 or _DIGIT.search(s) or _sentence_break(s.rstrip(" .,;:")):
        return False
    words = [t.strip(".") for t in _NAME_SEP.split(s)]
    lows = [w.lower() for w in words]
    if not _LONG_STOPWORDS.isdisjoint(lows):
        return False
    firsts = [w.lstrip("{\\\"'`^~")[:1] for w, low in zip(words, lows) if w and low not in _NO_NAMES]
    names = len(firsts) - firsts.count("")
    lower = sum(map(str.islower, firsts))
    return names >= 2 and (lenient or lower * 4 <= names)


def _name_prefix(s: str, lenient: bool = False) -> bool:
    """``_names_only``, or a group's name ("Organizers of Queer in AI") before at least three more names."""
    if _names_only(s, lenient):
        return True
    head, sep, tail = s.partition(",")
    return bool(sep) and tail.count(",") >= 2 and head[:1].isupper() and len(head.split()) <= 8 \
        and not any(c.isdigit() for c in head) and not _sentence_break(head + " ") and _names_only(tail)


# "Family, I." / "Family I," / "Family, Given" at a line start
_FAMILY_FIRST = re.compile(
    r"^\s*(?:(?:van|von|de|del|der|den|di|da|du|le|la|dos)\s+){0,2}"
    r"[^\W\d_][^\W\d_'\u2019-]*(?:[-'\u2019][^\W\d_]+)*"
    r"(?:,\s*(?:[^\W\d_]\.|[^\W\d_][^\W\d_]+(?:\s|,|$))|\s+[A-Z]{1,3}[.,])")
# initials first: "J. Andren, M. Hilding, and D. Veitch. Understanding ...", "H. Sanneck. Concealment of ..."
_INITIALS_FIRST = re.compile(r"^(?:[A-Z]\.(?:\s?-?[A-Z]\.)*\s)+(?:[a-z]{1,3}\s){0,2}[A-Z][^\s,.;:()]{1,40}(?:,\s|\s+and\s|\.\s)")
# a group or a tool as the author, then the year: "OGC of Harvard. 2016.", "pdf2image. 2023.", "Grobid. 2008-2023."
_GROUP_YEAR = re.compile(r"^[^\W_][^.,;:()]{0,60}\.\s(?:1[89]|20)\d\d[a-z]?(?:[.,\u2013-]|\s|$)")
_LEAD_MARK = re.compile(r"^\s*(?:\[[^\]\s]{1,24}\]|\d{1,4}[.)](?=\s)|[-*+\u2022](?=\s))\s*")


def _starts_author_block(joined: str) -> bool:
    """Whether ``joined`` (a line and the lines after it) opens with an author list (module docstring)."""
    head = joined[:1500]
    if head[:3] in ("In ", "In:"):
        return False
    m = _YEAR.search(head)
    if m is not None and m.start() > 0 and _name_prefix(head[:m.start()]):
        return True
    return bool(_FAMILY_FIRST.match(head) or _GROUP_YEAR.match(head) or _INITIALS_FIRST.match(head))


def _name_line(line: str) -> bool:
    """A whole line of names running on ("Waleed Ammar, Dirk Groeneveld, Chandra Bhagavat-")."""
    s = line.strip()
    return s.count(",") >= 2 and not s.endswith(".") and len(s.split()) >= 4 and _name_prefix(s.rstrip("-"))


def starts_entry(text: str) -> bool:
    """Whether ``text`` opens like a reference entry: a list number or label, or an author list."""
    head = " ".join(text[:1500].split())
    return bool(_LEAD_MARK.match(head)) or _starts_author_block(head) or _name_line(head)


def _ends_entry(s: str) -> bool:
    """The (stripped) line can end an entry (module docstring; not an initial's period: "Quoc V.")."""
    if not s:
        return False
    c = s[-1]
    if not (c in ".)]" or c.isdigit() or ("a" <= c <= "z" and len(s) > 1 and s[-2].isdigit())):
        last = s[s.rfind(" ") + 1:]
        return "http://" in last or "https://" in last or _DOI.search(last) is not None
    return not (c == "." and len(s) > 1 and "A" <= s[-2] <= "Z" and (len(s) == 2 or s[-3] in " \t.,-"))


def _numbered(lines: list[str], pattern: re.Pattern) -> list[int]:
    """Lines opening entries numbered 1, 2, 3 ... (one to three past the last one taken)."""
    starts, last = [], None
    for i, ln in enumerate(lines):
        m = pattern.match(ln)
        if m is None:
            continue
        num = int(m.group("num"))
        if (last is None and num <= 1) or (last is not None and last < num <= last + 3):
            starts.append(i)
            last = num
    return starts


def _author_year_starts(lines: list[str]) -> list[int]:
    starts, prev_end = [], True  # the first line opens an entry
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if prev_end:
            window, size = [], 0
            for x in lines[i:i + 16]:  # the lines up to a year (at most 1,500 characters) are read together
                window.append(x)
                size += len(x)
                if size > 1500 or _YEAR.search(x):
                    break
            joined = "\n".join(window)
            joined = " ".join(_SPLIT_WORD.sub("", joined).split())  # "Abdul-\nlahi" is one name here
            if not starts or _starts_author_block(joined) or _name_line(s):
                starts.append(i)
        prev_end = _ends_entry(s)
    return starts


def _paragraph_starts(lines: list[str]) -> list[int]:
    return [i for i, ln in enumerate(lines) if ln.strip() and (i == 0 or not lines[i - 1].strip())]


_URLISH_END = re.compile(r"(?:https?://|www\.|10\.\d{4,9}/)\S*[-/._~=?&#]$")
_HYPHEN_HEAD = re.compile(r"(?<![A-Za-z0-9-])([A-Za-z]{1,40})-$")
_TAIL_WORD = re.compile(r"^([a-z]{1,40})(?![A-Za-z0-9])")


def _join(chunk: list[str], words) -> str:
    """An entry's lines as one string (module docstring); a dash before a digit ("1435-\\n1446") or a
    hyphen before a capital ("Sci-\\nBERT") glued too."""
    out = ""
    for ln in chunk:
        s = " ".join(ln.split())
        if not s or not out:
            out = out or s
            continue
        last = out[out.rfind(" ") + 1:]
        h = _HYPHEN_HEAD.search(last) if out[-1] == "-" else None
        t = _TAIL_WORD.match(s) if h else None
        if _URLISH_END.search(last):
            out += s
        elif h and t:
            head, tail = h.group(1).lower(), t.group(1)
            keep = (head + tail) not in words and head in words and tail in words
            out = out + s if keep else out[:-1] + s
        elif out[-1] in "-\u2013" and len(last) > 1 and (s[0].isdigit() or s[0].isupper()):
            out += s
        else:
            out += " " + s
    return out


def split_entries(ref_text: str, *, words=None, running: frozenset[str] = frozenset()) -> list[str]:
    """The list's text -> the raw entries, in order. ``words``: what tells a split word from a hyphenated
    one (``hyphens.document_words``; the list's own by default); ``running``: the document's running titles."""
    return _split(ref_text, words, running)[0]


def _split(ref_text: str, words=None, running: frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    if len(ref_text) > MAX_LIST_CHARS:
        notes.append(f"the reference list is {len(ref_text)} characters; read up to {MAX_LIST_CHARS}")
        ref_text = ref_text[:MAX_LIST_CHARS]
    text = ref_text.replace("\r\n", "\n").replace("\r", "\n")
    lines = _drop_furniture(text, running)
    if not any(ln.strip() for ln in lines):
        return [], notes
    if words is None:  # (only a line that ends in a hyphen asks)
        from chitragupta.engine.text.hyphens import document_words

        words = document_words(text) if _LINE_END_HYPHEN.search(text) else frozenset()
    numeric = _numbered(lines, _BRACKET_NUM)
    alpha = [i for i, ln in enumerate(lines) if _ALPHA_LABEL.match(ln)]
    brackets = numeric if len(numeric) >= len(alpha) else alpha
    dotted = _numbered(lines, _DOTTED)
    markdown = [i for i, ln in enumerate(lines) if _MARKDOWN.match(ln)]
    style = ""
    if len(brackets) >= 2 and len(brackets) >= len(dotted):
        starts = brackets
    elif len(dotted) >= 2:
        starts = dotted
    elif len(markdown) >= 2:
        style, starts = "markdown", markdown
    else:
        starts, para = _author_year_starts(lines), _paragraph_starts(lines)
        if len(starts) < 2 and len(para) >= 2:
            starts = para
    if starts and starts[0] > 0 and any(ln.strip() for ln in lines[:starts[0]]):
        starts = [0, *starts]
    chunks = [c for c in ([ln for ln in lines[a:b] if ln.strip()] for a, b in zip(starts, [*starts[1:], len(lines)]))
              if c]
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
        if style == "markdown":
            first = _MARKDOWN.sub("", chunk[0], count=1)
            lone_key = len(chunk) > 1 and _MD_KEY.match(first.strip()) and not first.strip().endswith(".")
            chunk = chunk[1:] if lone_key else [first, *chunk[1:]]
        joined = _join(chunk, words)
        if joined and (style != "markdown" or _A_LETTER.search(joined)):  # "- 10": a thebibliography's label
            out.append(joined)
    if len(out) == 1 and len(out[0]) > 2000:
        notes.append(f"the reference list reads as one entry of {len(out[0])} characters and could not be split "
                     "into entries (a list run together on one line?); kept whole")
    return out, notes


# -- fields ---------------------------------------------------------------------------------------

_DOI = re.compile(r"10\.\d{4,9}/[^\s\"<>]+")
_ARXIV_NEW = re.compile(r"(?:arxiv\s*[:.]?\s*(?:preprint\s+)?(?:arxiv\s*:\s*)?|arxiv\.org/(?:abs|pdf)/|\babs/)"
                        r"(\d{4}\.\d{4,5})(?:v\d+)?", re.IGNORECASE)
_ARXIV_OLD = re.compile(r"(?:arxiv\s*:\s*|arxiv\.org/(?:abs|pdf)/)([a-z-]+(?:\.[a-z]{2})?/\d{7})(?:v\d+)?",
                        re.IGNORECASE)
_URL = re.compile(r"(?:https?://|www\.)[^\s\"<>]+", re.IGNORECASE)
_TRAIL = ".,;:)]}>'\""
_QUOTES = "\u201c\"\u201e"
_QUOTED = re.compile(r"[\u201c\"\u201e](?P<t>[^\u201c\u201d\"]{3,400}?)[,.]?[\u201d\"]")


def _quoted(s: str):
    """The first quoted title in ``s``: a quote at the start or after ``.,:;)`` (and a space at most)."""
    m = _QUOTED.search(s)
    while m is not None and not (m.start() == 0 or s[m.start() - 1] in ".,:;)" or (
            s[m.start() - 1].isspace() and s[max(0, m.start() - 2)] in ".,:;)")):
        m = _QUOTED.search(s, m.start() + 1)
    return m


# A full stop, question or exclamation mark before a space or the end: not after a capital letter (an
# initial, "J."), a two-letter capitalised word (ASCII), or vs / pp / Vol / Eds / Inc.
_SENTENCE_END = re.compile(r"[.?!](?<![A-Z].)(?<!(?<!\w)(?:[A-Z][a-z]|vs|pp).)(?<!(?<!\w)(?:Vol|Eds|Inc).)(?:\s|\Z)")
_QUESTION_END = re.compile(r"[?!]\s+(?=In\b|Proc|arXiv|ArXiv|CoRR|Journal|Advances|Trans|IEEE|ACM|Findings)")
# where a venue's name stops: ", pages" / ", 12" / ", 2019" / ", A. B." (editors), " 12 (" / " 12:3", "(2019" /
# " (pp", " 2019." at the end, ": 12"; each opens with one of ``,\s(:``, told apart by a look-behind at it
_VENUE_STOP = re.compile(r"[,\s(:](?:(?<=,)(?:\s*(?i:pages|pp\.?|vol\.?|volume|no\.?|num\.?|number|issue|art\.?"
                         r"|article)\b|\s*\d|\s*(?:1[89]|20)\d\d\b|\s[A-Z]\.\s?[A-Z])"
                         r"|(?<=\()(?:\s*(?:1[89]|20)\d\d|\s*(?i:pp|pages|vol)\b)|(?<=:)\s*\d"
                         r"|(?<=\s)(?:\d+\s*\(|\d+:\d|\(\s*(?i:pp|pages|vol)\b|(?:1[89]|20)\d\d[a-z]?\.?$))")
_COMMA_VENUE = re.compile(r",\s(?=(?:[Ii]n|Proc|Proceedings|Journal|Trans|IEEE|ACM|Intl|International|Advances|arXiv|CoRR)\b)")
_AFTER_YEAR = re.compile(r"(?:\s?[\u2013-]\s?(?:1[89]|20)\d\d)?[\s).,:;\]]+")
_EDITORS = re.compile(r"^[^()]{0,200}?,?\s\(?(?:editors?|eds?\.?)\)?,?\s+")
_IN = re.compile(r"^(?:[Ii]n\s*:?\s+|[Ii]n:)")
_PREPRINT = re.compile(r"^(arXiv preprint|ArXiv preprint)\s+arXiv$")
_DOT_SPACE = re.compile(r"\.\s")
_A_LETTER = re.compile(r"[^\W\d_]")
_TWO_LETTERS = re.compile(r"[^\W\d_]{2}")
# the words a venue's name abbreviates beyond four letters ("Proc.", "Conf." and "J." are short enough)
_ABBREVIATIONS = frozenset("""Trans Intell Comput Artif Assoc Annu Mach Learn Lang Linguist Process Inform
Syst Technol Softw Appl Math Phys Chem Biol Stat Psychol Symp Commun Recognit Anal Inst Neurosci Mater Environ
Internat Engin Electr Theor Geophys""".split())

_LATEX_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304",
                  ".": "\u0307", "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b", "k": "\u0328",
                  "r": "\u030a"}
_LATEX_LETTERS = {"ss": "\u00df", "o": "\u00f8", "O": "\u00d8", "aa": "\u00e5", "AA": "\u00c5", "l": "\u0142",
                  "L": "\u0141", "ae": "\u00e6", "AE": "\u00c6", "oe": "\u0153", "OE": "\u0152", "i": "\u0131",
                  "j": "\u0237"}
_LATEX_ACCENT = re.compile(r"\{?\\([\"'`^~=.]|[cvuHkr](?=[\s{]))\s*\{?\\?([A-Za-z])\}?\}?")
_LATEX_LETTER = re.compile(r"\{?\\(ss|aa|AA|ae|AE|oe|OE|o|O|l|L|i|j)(?![A-Za-z])\s*\}?")
_ACCENT_CHARS = "\u00b4\u00a8\u02d8\u02c7\u02dc\u00b8\u02c6\u02d9\u02da\u02dd"
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
    while s and s[-1] in _TRAIL and not (s[-1] == ")" and s.count("(") >= s.count(")")):
        s = s[:-1]
    return s


_CAPS = re.compile(r"[A-Z]{1,3}")
_INITIAL_WORD = re.compile(r"[A-Z]\.(?:-?[A-Z]\.)*")  # "J.", "J.-C."
_INITIALS = re.compile(r"(?:[A-Z\u00c0-\u00de]\.?\s?-?\s?){1,4}")
_GROUP_WORD = re.compile(r"\s(?:of|for|at|on|the|in)\s")
_AND = re.compile(r"\s(?:and|und)\s")
_NOT_NAMES = re.compile(r"e(?<!\we)t\s+al\.?|o(?<!\wo)thers\b|\(eds?\.?\)|e(?<!\we)ds?\.(?=\s|$)", re.IGNORECASE)
_SUFFIXES = frozenset({"Jr", "Sr", "II", "III", "IV"})
_CAP_PARTICLES = frozenset("Ben Bin Ibn Abu Al El De Del Della Dos Da Das Van Von Le La Di Du Der Den Ter Ten".split())
_VIETNAMESE_FAMILIES = frozenset("Nguyen Tran Le Pham Hoang Huynh Phan Vu Vo Dang Bui Do Ho Ngo Duong Ly".split())


def _family(part: str) -> str | None:
    """The family name in one author's name as printed ("Family, Given", "Given Family", "Family IJ",
    "Given van der Family", "Asma Ben Abacha"; not "Minh Le Nguyen" nor "J. Ben Schafer")."""
    part = part.strip(" .,;")
    if "," in part:
        return part.split(",", 1)[0].strip() or None
    words = part.split()
    while len(words) > 1 and words[-1].rstrip(".") in _SUFFIXES:
        words.pop()
    if not words:
        return None
    if len(words) >= 2 and _CAPS.fullmatch(words[-1]) and not _CAPS.fullmatch(words[0]):
        return words[0]  # Vancouver: "Smith JA"
    i = len(words) - 1
    while i > 0 and words[i - 1].lower() in _PARTICLES and words[i - 1][:1].islower():
        i -= 1
    if i == len(words) - 1 and i >= 2 and words[i - 1] in _CAP_PARTICLES \
            and words[i].strip(" .") not in _VIETNAMESE_FAMILIES \
            and not (words[i - 1] == "Ben" and all(_INITIAL_WORD.fullmatch(w) for w in words[:i - 1])):
        i -= 1
    fam = " ".join(words[i:]).strip(" .")
    if len(fam.rstrip(".")) <= 1 and len(words) > 1:
        return None  # only initials
    return fam or None


def _authors(block: str) -> tuple[tuple[str, str], ...]:
    """(family name, the name as printed) of each author of an author block ("A, B, and C", "A; B & C",
    "Family, I. J., Family, I.", "Family, Given, and Family, Given", a group's name whole)."""
    block = decode_latex(block)
    low = block.lower()
    if "al" in low or "others" in low or "ed" in low:  # (what ``_NOT_NAMES`` needs)
        block = _NOT_NAMES.sub(" ", block)
    block = block.replace(";", ",").replace("&", ",")
    if "nd " in block:
        block = _AND.sub(",", block)
    parts = [p.strip(" .") for p in block.split(",") if _A_LETTER.search(p)]  # a name has a letter: no year
    if len(parts) >= 2 and len(parts) % 2 == 0 and " " not in "".join(parts):
        return tuple((f, f"{f}, {g}") for f, g in zip(parts[0::2], parts[1::2]))
    initials = [bool(_INITIALS.fullmatch(p)) for p in parts]
    if len(parts) < 2 or not any(initials):
        got = [(p if " " in p and _GROUP_WORD.search(p) else _family(p), p) for p in parts]
        return tuple((f, p) for f, p in got if f)[:200]
    out, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and initials[i + 1] and not initials[i]:
            out.append((parts[i], f"{parts[i]}, {parts[i + 1]}"))
            i += 2
            continue
        fam = None if initials[i] else _family(parts[i])
        if fam:
            out.append((fam, parts[i]))
        i += 1
    return tuple(out)[:200]


# one author, initials first ("D. Monderer", "J.-C. Bolot", "A. van Dam"), or two joined by "and"; a part of
# a comma-separated list, "and" before it allowed
_INITIALS_NAME = r"(?:[A-Z]\.(?:\s?-?[A-Z]\.)*\s?)(?:[a-z]{1,3}\s){0,2}[A-Z][^\s,.;:()]{1,40}"
_INITIALS_PART = re.compile(rf"(?:and\s+)?{_INITIALS_NAME}(?:\s+and\s+{_INITIALS_NAME})?")


def _initials_list_end(block: str) -> int | None:
    """The comma that ends an IEEE-style initials-first author list in ``block`` (the text up to the first
    sentence end), before a title (a capital or a quote, two words, not names only), or None."""
    if not _INITIALS_FIRST.match(block + " "):
        return None
    pos = 0
    while True:
        comma = block.find(",", pos)
        if comma < 0 or not _INITIALS_PART.fullmatch(block[pos:comma].strip()):
            return None
        nxt = block[comma + 1:].lstrip()
        if (nxt[:1].isupper() and nxt[1:2] != ".") or nxt[:1] in "\"\u201c":
            following = block[comma + 1:].split(",", 1)[0]
            if not _INITIALS_PART.fullmatch(following.strip()) and len(following.split()) >= 2 \
                    and not _names_only(block[comma + 1:]):  # "J. Smith, Dan Frankowski, and K. Lee": names
                return comma
        pos = comma + 1


def _title_end(rest: str) -> tuple[int, int]:
    """Where the title at the start of ``rest`` ends and what follows starts ("Dream? In Proc...")."""
    m = _SENTENCE_END.search(rest)
    while m is not None and rest[m.start()] in "?!" and not _QUESTION_END.match(rest, m.start()):
        m = _SENTENCE_END.search(rest, m.end())
    if m is None:
        return len(rest), len(rest)
    return (m.start() + 1 if rest[m.start()] in "?!" else m.start()), m.end()


def _venue(rest: str) -> str | None:
    v = rest.strip(" ,.;:")
    m = _IN.match(v)
    v = v[m.end():] if m else v
    m = _EDITORS.match(v) if " ed" in v or "(ed" in v else None
    v = v[m.end():] if m else v  # "B. Scholkopf and A. J. Smola, editors, Advances in ..."
    m = _VENUE_STOP.search(v)
    if m is not None:
        v = v[:m.start()]
    for m in _DOT_SPACE.finditer(v):
        i = j = m.start()
        while j > 0 and v[j - 1].isalpha():
            j -= 1
        word = v[j:i]
        if not (word[:1].isupper() and (len(word) == 1 or len(word) <= 4 and not word.isupper()
                                        or word in _ABBREVIATIONS)):  # "J.", "Proc.", "Comput."
            v = v[:i]
            break
    v = v.strip(" ,.;:(")
    m = _PREPRINT.match(v)
    v = m.group(1) if m else v
    if not v or not _TWO_LETTERS.search(v) or _DOI.match(v) or _URL.match(v):
        return None
    return v[:300]


def parse_entry(raw: str, n: int) -> Entry:
    """One raw entry -> an Entry: its white space collapsed (kept whole) and the fields it prints."""
    text = " ".join(raw.split())
    lead = _LEAD_MARK.match(text)
    s = text[lead.end() if lead else 0:][:MAX_ENTRY_CHARS]
    if not s.isascii():
        s = _ACCENT_IN_WORD.sub("", s)  # pdfium's accents set apart: "Krysci \u00b4 nski" -> "Kryscinski"
    low = s.lower()  # (a pattern is searched only where the word it needs stands)
    m = _DOI.search(s) if "10." in s else None
    doi, spans = (_strip_trail(m.group(0)).lower() or None, [m.span()]) if m else (None, [])
    m = _ARXIV_NEW.search(s) or _ARXIV_OLD.search(s) if "arxiv" in low or "abs/" in low else None
    arxiv = None
    if m is not None:
        arxiv = m.group(1).lower() if "/" in m.group(1) else m.group(1)
        spans.append(m.span())
    urls = list(_URL.finditer(s)) if "http" in low or "www." in low else []
    url = next((u for u in (_strip_trail(m.group(0)) for m in urls) if not (doi and "doi.org/" in u.lower())), None)
    if url is not None:
        spans += [m.span() for m in urls]
    y0 = next((m for m in _YEAR.finditer(s) if not any(a <= m.start() < b for a, b in spans)), None)
    year = title = block = None
    rest = s
    # the author block: up to the first year when only names come before it; else up to a quoted title;
    # else up to the first sentence end
    ys = -1 if y0 is None else y0.start()
    q = _quoted(s) if any(c in s[:600] for c in _QUOTES) else None
    if ys > 0 and ((not _DIGIT.search(s, 0, ys) and _name_prefix(s[:ys], True)) or _GROUP_YEAR.match(s)):
        m = _AFTER_YEAR.match(s, y0.end())
        block, year, rest = s[:ys], int(s[ys:ys + 4]), s[m.end() if m else y0.end():]
    elif q is not None and q.start() < 600:
        block, title, rest = s[:q.start()], q.group("t").strip(" ,."), s[q.end():]
    else:
        m = _SENTENCE_END.search(s)
        if m is not None:
            block, rest = s[:m.start()], s[m.end():]
            cut = _initials_list_end(block)
            if cut is not None:  # "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of ..."
                v = _COMMA_VENUE.search(block, cut + 1)  # "..., Proc. of SC 2002": a venue after a comma
                title, rest = (block[cut:v.start()], s[v.start() + 1:]) if v else (block[cut:], rest)
                title, block = title.strip(" ,.;:")[:500] or None, block[:cut]
    names = _authors(block.strip(" ,.;:(")) if block is not None else ()
    if year is None and y0 is not None:
        year = int(s[ys:ys + 4])
    if title is None:  # the title after the author block and year: a quoted one, else up to its end
        q = _quoted(rest) if any(c in rest[:5] for c in _QUOTES) else None
        if q is not None and q.start() < 5:
            title, rest = q.group("t").strip(" ,."), rest[q.end():]
        else:
            end, nxt = _title_end(rest)
            title, rest = rest[:end].strip(" ,.;:")[:500], rest[nxt:]
    return Entry(n, text, tuple(f for f, _ in names), year, title or None, _venue(rest), doi, arxiv, url,
                 tuple(p for _, p in names))


def parse_reference_list(ref_text: str, *, words=None,
                         running: frozenset[str] = frozenset()) -> tuple[list[Entry], list[str]]:
    """The list's text -> its entries in order and notes (``words``, ``running``: as ``split_entries``)."""
    raw, notes = _split(ref_text, words, running)
    entries = [parse_entry(r, i) for i, r in enumerate(raw, start=1)]
    long = [e.n for e in entries if len(e.text) > MAX_ENTRY_CHARS]
    if long:
        notes.append(f"{len(long)} entr{'y' if len(long) == 1 else 'ies'} longer than {MAX_ENTRY_CHARS} characters "
                     f"(first: entry {long[0]}): fields read from the start, the text kept whole")
    if entries and not any(e.year or e.doi or e.arxiv for e in entries):
        notes.append(f"none of the {len(entries)} entries prints a year, a DOI or an arXiv id: "
                     "is this a reference list?")
    return entries, notes
