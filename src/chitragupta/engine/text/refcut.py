"""The reference-list cut: a paper's own bibliography is neither indexed nor shown; its appendices are.

With a sidecar, the span is found structurally: it starts at the *last* ``section_header`` item whose
whole text is References / Bibliography / Works Cited / Literature Cited (any case, optionally numbered:
``7 References``, ``VII. REFERENCES``). "Reference architecture" is not such a heading, and neither is
the same word under another label. It ends where the paper's own text resumes: the first later
``section_header`` that opens an appendix or supplement (``is_appendix_heading``: the appendix test
below), else the end of the document.

Without one (the pdftotext backend, an imported corpus), ``plain_reference_span`` finds it by the lines
of the text. A line is a reference heading when, on its own, it reads

    References | REFERENCES | Bibliography | BIBLIOGRAPHY | Works Cited | Literature Cited (or in capitals)

optionally numbered (``7 References``, ``VII. REFERENCES``, ``A. Bibliography``), with an optional
trailing ``.`` or ``:`` -- capitalised, since plain text has no labels and a lower-case ``references``
alone on a line is a wrapped sentence or a figure's label. The span starts at the *last* such line that

- starts after the first ``PLAIN_MIN_FRACTION`` (30%) of the text: a table of contents or a front-matter
  line never cuts the paper it introduces; and
- is followed by what a reference list looks like: at least ``PLAIN_MIN_MARKERS`` (4) years (1800-2099)
  or ``[n]`` entry numbers in the ``PLAIN_WINDOW`` (2,000) characters after it (fewer when less text
  follows: 1 when under 1,000 characters do, none when nothing does), so a heading followed by prose is
  not cut.

**The appendix test** (the same words in docs/reference-cut.md). The list ends at the first later
heading that opens an appendix or supplement. A heading holding no year and no [n] entry number opens one when it reads Appendix, Appendices,
Supplementary, Supplemental, Supporting Information or Online Resource (in any case, after an optional
letter label, with at most 120 characters after the word: "Appendix A: Proofs", "Supplementary
Material"), or when it is lettered, such as "A Proof of Lemma 2" or "B.1 Annotation": a capital letter (A-H
in plain text), optional ".1"-style numbers, then a title of at most 12 words whose first word is
capitalised and not an initial, with no comma, no "et al", "pp." or "In Proc", and no full stop or
semicolon inside it or comma, full stop or semicolon at its end. In a docling sidecar a heading is a
section_header item. In plain text a line of at most 140 characters is one only when it does not continue
the line before it (that line does not end in a letter, a comma, a colon, a semicolon or a hyphen: in
"Models of Graphs for" followed by "A Study of Cities", the second line continues the first) and it is
followed by prose, not by more entries: the 2,000 characters after it (all that follow, when fewer do)
hold at least 150 characters of text and fewer than 14 per 2,000 characters (in proportion for a shorter
remainder) of years (1800-2099), [n] entry numbers at a line's start and venue words (Proceedings, Proc.,
arXiv, Journal, Conference, Transactions, Association for, "pages" or "pp." before a digit, doi, http://,
https://, Press, Workshop, Symposium; in any case). So a wrapped title such as "A Multiscale Approach to
Integrated" alone on a line after an entry's full stop has a heading's form and continues no line; the
prose test rejects it, because entries follow it. What lies between the list and an appendix
(acknowledgements, author biographies) goes with it; with no appendix, the list runs to the end.

(The numbers: ``PLAIN_WINDOW``, ``APPENDIX_MIN_CHARS``, ``APPENDIX_MAX_CITES``; a reference list holds
~30 years, entry numbers and venue words in 2,000 characters, appendix prose that cites its sources 0-12.)

Plain text is cut by blanking, not by removal (``cut_plain``): every character of the span but line
and page breaks becomes a space, so the text the index reads, the snippets quote and the pages counted
by form feeds keep the offsets of ``content/parsed/<key>.txt``. Measured against docling's structural
cut on 242 SemEval-2010 papers and on real PDFs: ``python -m bench refcut``. One module, used by the
document index, the passage index, every snippet, every evidence window and the embed stage.
"""

from __future__ import annotations

import re

from chitragupta.engine.text.sidecar import EXCLUDED_LABELS

__all__ = ["is_reference_heading", "is_appendix_heading", "reference_cut", "reference_span", "kept_items",
           "may_hold_heading", "HEADING_WORDS", "plain_reference_cut", "plain_reference_span", "cut_plain", "blank",
           "PLAIN_MIN_FRACTION", "PLAIN_MIN_MARKERS", "PLAIN_WINDOW", "APPENDIX_MAX_CITES", "APPENDIX_MIN_CHARS"]

_HEADING = re.compile(
    r"^\s*(?:(?:\d+(?:\.\d+)*|[ivxlcdm]+|[a-z])[.):]?\s+)?"
    r"(?:references|bibliography|works\s+cited|literature\s+cited)\s*[.:]?\s*$",
    re.IGNORECASE,
)

PLAIN_MIN_FRACTION = 0.3
PLAIN_MIN_MARKERS = 4
PLAIN_WINDOW = 2000

_PLAIN_HEADING = re.compile(
    r"^[ \t\f]*(?:(?:\d+(?:\.\d+)*|[ivxlcdmIVXLCDM]+|[A-Za-z])[.):]?[ \t]+)?"
    r"(?:References|REFERENCES|Bibliography|BIBLIOGRAPHY"
    r"|(?:Works|WORKS|Literature|LITERATURE)[ \t]+(?:Cited|cited|CITED))"
    r"[ \t]*[.:]?[ \t\r]*$",
    re.MULTILINE,
)
# what a line of a reference list holds: a year (not inside a longer number or a decimal), an entry number
_MARKER = re.compile(r"(?<![\d.])(?:1[89]|20)\d\d[a-z]?(?!\d)|^[ \t]*\[\d{1,4}\]", re.MULTILINE)

# one of these is in every text ``may_hold_heading`` passes: a text (or a stretch of texts joined, each
# told by where these are found) without any holds no heading
HEADING_WORDS = ("References", "REFERENCES", "Bibliography", "BIBLIOGRAPHY", "Cited", "cited", "CITED")


def may_hold_heading(text: str) -> bool:
    """False when ``text`` cannot hold a ``_PLAIN_HEADING`` line: it lacks every word the pattern spells
    out (References, Bibliography, or Works / Literature with Cited). Most abstracts are told apart by a
    few single-character searches (the capitals those words start with), without the line scan."""
    if "R" not in text and "B" not in text and "W" not in text and "L" not in text:
        return False
    if "References" in text or "REFERENCES" in text or "Bibliography" in text or "BIBLIOGRAPHY" in text:
        return True
    return (("Cited" in text or "cited" in text or "CITED" in text)
            and ("Works" in text or "WORKS" in text or "Literature" in text or "LITERATURE" in text))


# what opens an appendix: the word (with an optional letter label before or after it) ...
_APPENDIX_WORD = re.compile(
    r"^\s*(?:[A-Z](?:\.\d+)*[.:)]?\s+)?"
    r"(?:appendix|appendices|supplementary|supplemental|supporting\s+information|online\s+resource)"
    r"(?![a-z])(?:.{0,120})$",
    re.IGNORECASE | re.DOTALL,
)
# ... or a lettered section heading: "A Proof of Lemma 2", "B.1 Annotation", "C. DETAILS"
_LETTERED = re.compile(r"^\s*(?P<letter>[A-Z])(?:\.\d{1,2})*\.?\s+(?P<title>[A-Z][^\s]+(?:\s+\S+){0,11})\s*$")
_PLAIN_LETTERS = "ABCDEFGH"
_SENTENCE_BREAK = re.compile(r"[.;]\s|[,;.]$|\bet al\b|\bpp\.|\bIn Proc")
# a line: a form feed (a page break) ends one too, as pdfium glues a page's first line to the last one's number
_PLAIN_LINE = re.compile(r"(?:^|(?<=\f))[^\n\f]{1,140}(?=[\n\f]|\Z)", re.MULTILINE)


def is_reference_heading(item: dict) -> bool:
    return item.get("label") == "section_header" and bool(_HEADING.match(item.get("text", "")))


def _opens_appendix(line: str, letters: str | None) -> bool:
    """True when ``line`` reads as an appendix or supplement heading (``letters``: the letters a lettered
    heading may start with; None: any capital)."""
    if _MARKER.search(line):
        return False
    if _APPENDIX_WORD.match(line):
        return True
    m = _LETTERED.match(line)
    if m is None or (letters is not None and m.group("letter") not in letters):
        return False
    title = m.group("title")
    # a capitalised word of two or more letters, not an initial ("C. L. Giles"), and no sentence break
    first = title.split()[0]
    return not (first.endswith(".") or _SENTENCE_BREAK.search(title) or "," in title)


def is_appendix_heading(item: dict) -> bool:
    """A sidecar ``section_header`` that opens an appendix or supplement (the module docstring's forms)."""
    return item.get("label") == "section_header" and _opens_appendix(item.get("text", "").strip(), None)


def reference_cut(items: list[dict]) -> int | None:
    """Position of the last reference heading in ``items``, or None when there is none."""
    for i in range(len(items) - 1, -1, -1):
        if is_reference_heading(items[i]):
            return i
    return None


def reference_span(items: list[dict]) -> tuple[int, int] | None:
    """``(first, end)``: the items cut, from the last reference heading up to the first appendix heading
    after it (or the end); None when there is no reference heading."""
    cut = reference_cut(items)
    if cut is None:
        return None
    for j in range(cut + 1, len(items)):
        if is_appendix_heading(items[j]):
            return cut, j
    return cut, len(items)


def kept_items(items: list[dict]) -> list[tuple[int, dict]]:
    """(item number, item) of everything outside the reference span, excluded labels left out, in order."""
    span = reference_span(items)
    a, b = span if span is not None else (len(items), len(items))
    return [(i, it) for i, it in enumerate(items) if not a <= i < b and it["label"] not in EXCLUDED_LABELS]


def _looks_like_references(tail: str) -> bool:
    window = tail[:PLAIN_WINDOW]
    if not window.strip():
        return True  # nothing follows: only the heading goes
    need = PLAIN_MIN_MARKERS if len(window) >= 1000 else min(1, PLAIN_MIN_MARKERS)
    if need <= 0:
        return True
    for found, _m in enumerate(_MARKER.finditer(window), start=1):
        if found >= need:
            return True
    return False


def plain_reference_cut(text: str) -> int | None:
    """Where plain text's reference list starts (the offset of its heading line), or None: the rule in
    the module docstring."""
    if not may_hold_heading(text):
        return None
    floor = len(text) * PLAIN_MIN_FRACTION
    for m in reversed(list(_PLAIN_HEADING.finditer(text))):
        if m.start() < floor:
            return None
        if _looks_like_references(text[m.end():m.end() + PLAIN_WINDOW]):
            return m.start()
    return None


# what a reference entry names besides a year: where it appeared
_VENUE = re.compile(r"Proceedings|Proc\.|arXiv|Journal|Conference|Transactions|Association for|pages \d|pp\.\s?\d"
                    r"|doi|https?://|Press|Workshop|Symposium", re.IGNORECASE)
APPENDIX_MAX_CITES = 14  # years, entry numbers and venue words per PLAIN_WINDOW characters after a heading: fewer
APPENDIX_MIN_CHARS = 150  # characters after a plain-text appendix heading, at least (an entry's tail is shorter)


def _followed_by_prose(after: str) -> bool:
    """The text after a candidate appendix heading reads as prose, not as more entries (the module
    docstring's appendix test): of its first ``PLAIN_WINDOW`` characters (all, when fewer follow), at
    least ``APPENDIX_MIN_CHARS``, holding fewer years, entry numbers and venue words than
    ``APPENDIX_MAX_CITES`` per ``PLAIN_WINDOW`` characters, in proportion for a shorter remainder."""
    window = after[:PLAIN_WINDOW]
    if len(window.strip()) < APPENDIX_MIN_CHARS:
        return False
    need = max(1, -(-APPENDIX_MAX_CITES * len(window) // PLAIN_WINDOW))  # the ceiling, at least 1
    found = 0
    for pattern in (_MARKER, _VENUE):
        for _m in pattern.finditer(window):
            found += 1
            if found >= need:
                return False
    return True


def _continues_previous_line(text: str, start: int) -> bool:
    """The line at ``start`` continues the last non-blank line before it: that line ends in a letter, a
    comma, a colon, a semicolon or a hyphen (a wrapped title, an author list running on)."""
    before = text[max(0, start - 400):start].rstrip()
    return bool(before) and (before[-1].isalpha() or before[-1] in ",:;-\u2010\u2013")


def _plain_resume(text: str, start: int) -> int:
    """The offset of the first whole line after ``start`` that passes the appendix test (a heading form,
    not continuing the line before it, followed by prose), else ``len(text)``."""
    for m in _PLAIN_LINE.finditer(text, start):
        line = m.group(0)
        if line.isspace() or not _opens_appendix(line, _PLAIN_LETTERS):
            continue
        at = m.start() + (len(line) - len(line.lstrip()))
        if not _continues_previous_line(text, at) and _followed_by_prose(text[m.end() + 1:m.end() + 1 + PLAIN_WINDOW]):
            return at
    return len(text)


def plain_reference_span(text: str) -> tuple[int, int] | None:
    """``(start, end)`` of plain text's reference span: its heading line up to the appendix that follows
    (or the end of the text); None when it has no reference list."""
    start = plain_reference_cut(text)
    if start is None:
        return None
    nl = text.find("\n", start)
    return start, _plain_resume(text, len(text) if nl < 0 else nl + 1)


_NOT_BREAK = re.compile(r"[^\n\f]+")


def blank(text: str, start: int, end: int) -> str:
    """``text`` with ``[start, end)`` turned to spaces, line and page breaks kept (same length, same lines)."""
    return text[:start] + _NOT_BREAK.sub(lambda m: " " * len(m.group(0)), text[start:end]) + text[end:]


def cut_plain(text: str) -> str:
    """``text`` with its reference span blanked (``plain_reference_span``, ``blank``): the same length and
    lines, so offsets still point into the file; unchanged when it has no reference list."""
    span = plain_reference_span(text)
    return text if span is None else blank(text, *span)
