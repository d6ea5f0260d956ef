"""Where a paper's front matter ends: the title block, the authors, their affiliations and e-mail.

    plain_front_end(text) -> int      plain text: the offset of its "Abstract" line, else of its first
                                      section heading ("1 Introduction", "I. INTRODUCTION"), else 0
    items_front_end(kept, spans) -> int   a sidecar body: the start of its Abstract heading item, else of
                                      its first section heading, else 0

Both look only at the first ``FRONT_MAX_FRACTION`` (25%) of the text, so a heading deep in a paper never
makes its body "front matter"; a text with neither (an abstract alone, an imported corpus) has none (0).
The window chooser (``chitragupta.engine.text.windows``) takes a window from before this offset only when
no window after it bears on the query, so snippets open on the paper, not on its author block.
"""

from __future__ import annotations

import re

__all__ = ["plain_front_end", "items_front_end", "FRONT_MAX_FRACTION"]

FRONT_MAX_FRACTION = 0.25
_FRONT_MIN_CHARS = 4000  # a short text may still have a title block: look at least this far

# "Abstract", "ABSTRACT", "Abstract.", "Abstract: While ...", "Abstract—We ..." at a line's start
_ABSTRACT_LINE = re.compile(r"^[ \t\f]*(?:Abstract|ABSTRACT|A B S T R A C T)(?![A-Za-z])", re.MULTILINE)
# a first section heading alone on its line: "1 Introduction", "1. INTRODUCTION", "I. Introduction", "Introduction"
_FIRST_SECTION = re.compile(r"^[ \t\f]*(?:(?:1|I)\.?[ \t]+)?(?:Introduction|INTRODUCTION|Background|BACKGROUND)"
                            r"[ \t]*$", re.MULTILINE)
_WORDS = ("Abstract", "ABSTRACT", "A B S T R A C T", "Introduction", "INTRODUCTION", "Background", "BACKGROUND")
_ABSTRACT_ITEM = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?\s+|[ivx]+\.\s+)?abstract\s*[.:]?\s*$", re.IGNORECASE)


def _limit(size: int) -> int:
    return max(int(size * FRONT_MAX_FRACTION), min(size, _FRONT_MIN_CHARS))


def plain_front_end(text: str) -> int:
    """The offset where plain text's front matter ends (0 when it has none that can be told)."""
    limit = _limit(len(text))
    # every word looked for starts with A, I or B: a head without those capitals (most abstracts) has
    # none, told by three single-character searches; else the words themselves, before any regex scan
    if text.find("A", 0, limit) < 0 and text.find("I", 0, limit) < 0 and text.find("B", 0, limit) < 0:
        return 0
    head = text[:limit]
    if not any(w in head for w in _WORDS):
        return 0
    for pattern in (_ABSTRACT_LINE, _FIRST_SECTION):
        m = pattern.search(text, 0, limit)
        if m is not None:
            return m.start() + (len(m.group(0)) - len(m.group(0).lstrip(" \t\f")))
    return 0


def items_front_end(kept: list[tuple[int, dict]], spans) -> int:
    """The offset in a sidecar body (the ``kept`` items joined; ``spans`` their (start, end, number,
    page)) where its front matter ends: the Abstract heading, else the first section heading, else 0."""
    if not spans:
        return 0
    limit = _limit(spans[-1][1])
    first_section = None
    for (_n, it), (start, _end, _num, _page) in zip(kept, spans):
        if start > limit:
            break
        if it.get("label") != "section_header":
            continue
        if _ABSTRACT_ITEM.match(it.get("text", "")):
            return start
        if first_section is None:
            first_section = start
    return first_section or 0
