"""The reference-list cut: a paper's own bibliography is neither indexed nor shown.

With a sidecar, the span is found structurally: the *last* ``section_header`` item whose whole text is
References / Bibliography / Works Cited / Literature Cited (any case, optionally numbered: ``7
References``, ``VII. REFERENCES``), and everything from it to the end of the document. "Reference
architecture" is not such a heading, and neither is the same word under another label.

Without one (the pdftotext backend, an imported corpus), ``plain_reference_cut`` finds it by the lines
of the text. A line is a reference heading when, on its own, it reads

    References | REFERENCES | Bibliography | BIBLIOGRAPHY | Works Cited | Literature Cited (or in capitals)

optionally numbered (``7 References``, ``VII. REFERENCES``, ``A. Bibliography``), with an optional
trailing ``.`` or ``:`` -- capitalised, since plain text has no labels and a lower-case ``references``
alone on a line is a wrapped sentence or a figure's label. The cut is at the *last* such line that

- starts after the first ``PLAIN_MIN_FRACTION`` (30%) of the text: a table of contents or a front-matter
  line never cuts the paper it introduces; and
- is followed by what a reference list looks like: at least ``PLAIN_MIN_MARKERS`` (4) years (1800-2099)
  or ``[n]`` entry numbers in the ``PLAIN_WINDOW`` (2,000) characters after it (fewer when less text
  follows: 1 when under 1,000 characters do, none when nothing does), so a heading followed by prose is
  not cut.

As with the sidecar, everything from that line to the end goes, appendices after the list included.
Measured against docling's structural cut on 242 SemEval-2010 papers and on real PDFs:
``python -m bench.refcut``. One module, used by the document index, the passage index, every snippet and
every evidence window.
"""

from __future__ import annotations

import re

from chitragupta.engine.corpus.sidecar import EXCLUDED_LABELS

__all__ = ["is_reference_heading", "reference_cut", "kept_items", "plain_reference_cut", "cut_plain",
           "PLAIN_MIN_FRACTION", "PLAIN_MIN_MARKERS", "PLAIN_WINDOW"]

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
# a text holding none of these has no heading: skipped without the line scan (most abstracts)
_WORDS = ("eferences", "EFERENCES", "ibliography", "IBLIOGRAPHY", "ited", "ITED")


def is_reference_heading(item: dict) -> bool:
    return item.get("label") == "section_header" and bool(_HEADING.match(item.get("text", "")))


def reference_cut(items: list[dict]) -> int | None:
    """Position of the last reference heading in ``items``, or None when there is none."""
    for i in range(len(items) - 1, -1, -1):
        if is_reference_heading(items[i]):
            return i
    return None


def kept_items(items: list[dict]) -> list[tuple[int, dict]]:
    """(item number, item) of everything before the cut, excluded labels left out, in order."""
    cut = reference_cut(items)
    end = len(items) if cut is None else cut
    return [(i, it) for i, it in enumerate(items[:end]) if it["label"] not in EXCLUDED_LABELS]


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
    if not any(w in text for w in _WORDS):
        return None
    floor = len(text) * PLAIN_MIN_FRACTION
    for m in reversed(list(_PLAIN_HEADING.finditer(text))):
        if m.start() < floor:
            return None
        if _looks_like_references(text[m.end():m.end() + PLAIN_WINDOW]):
            return m.start()
    return None


def cut_plain(text: str) -> str:
    """``text`` before its reference list (``plain_reference_cut``); unchanged when it has none."""
    cut = plain_reference_cut(text)
    return text if cut is None else text[:cut]
