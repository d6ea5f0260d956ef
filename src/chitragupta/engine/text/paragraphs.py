"""Plain text as paragraphs with their pages: the passage unit of a source without a docling sidecar.

    plain_paragraphs("Abstract\\nWe study ...\\f2 Method\\n...")  ->  [{"text", "label", "page"}, ...]

pdftotext (pdfium) writes a page's lines in reading order with no blank line between paragraphs, and
pages separated by form feeds. A paragraph ends

- at a page break (a paragraph running on to the next page is two passages, each with its page),
- at a blank line (an imported text's paragraph breaks; the reference list that ``plain_body`` blanked),
- after a line that ends a sentence (``.``, ``?``, ``!`` or ``:``, closing quotes and brackets allowed)
  and is shorter than ``SHORT_LINE`` (80%) of the page's usual line (the median length of its lines of
  at least ``MIN_LINE`` characters): the last line of a paragraph rarely fills its column,
- around a heading line (``1 Introduction``, ``3.2 Results``, ``IV. DISCUSSION``, ``Abstract``): a short
  line, numbered or one of the usual section names, not ending a sentence (one ending in "of", "for",
  a comma, ... takes in its next short line: a wrapped heading); its label is ``section_header``, so like
  a sidecar's heading it is never a passage of its own.

A run of lines longer than ``MAX_CHARS`` without such a break (a layout this reading cannot tell apart)
is cut after the first sentence-ending line past ``MAX_CHARS``, else at ``2 * MAX_CHARS``. Each item's
text is its lines joined by single spaces (none after a hyphen the join kept); labels and pages as in a sidecar item
(``chitragupta.engine.text.sidecar``), so the passage index and its hits read both alike. The text given
is the body the index read (``chitragupta.engine.index.source.plain_body``: the reference list blanked,
hyphens joined), so nothing cut from the document is a passage either.
"""

from __future__ import annotations

import re

__all__ = ["plain_paragraphs", "SHORT_LINE", "MIN_LINE", "MAX_CHARS"]

SHORT_LINE = 0.8  # of the page's usual line length: a shorter line that ends a sentence ends its paragraph
MIN_LINE = 25  # characters: lines counted for the usual length (not page numbers, running heads)
MAX_CHARS = 1500  # characters: a paragraph longer than this is cut at its next sentence end

_SENTENCE_END = re.compile(r"[.?!:][\"'\u201d\u2019)\]]*\d{0,2}$")
_NUMBERED = re.compile(r"^(?:\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,4}\.|[A-H](?:\.\d{1,2})*\.?)\s+[A-Z][^.!?]{1,70}$")
_OPEN_END = re.compile(r"(?:\b(?:a|an|and|for|in|of|on|or|the|to|with|from|by)|,)$")  # a heading wrapped
_NAMED = re.compile(r"^(?:abstract|introduction|background|related work|method(?:s|ology)?|results|discussion"
                    r"|conclusions?|limitations|acknowledge?ments?|appendix|references)\s*$", re.IGNORECASE)


def _usual(lines: list[str]) -> int:
    sizes = sorted(len(s) for s in lines if len(s) >= MIN_LINE)
    return sizes[len(sizes) // 2] if sizes else max(map(len, lines), default=0)


def _is_heading(line: str, usual: int) -> bool:
    if len(line) >= SHORT_LINE * usual and len(line) > 40 or _SENTENCE_END.search(line):
        return False
    return bool(_NAMED.match(line) or _NUMBERED.match(line))


def plain_paragraphs(text: str) -> list[dict]:
    """The paragraphs of plain ``text`` in reading order, each ``{"text", "label", "page"}`` (module
    docstring); ``page`` is None for a text without form feeds."""
    pages = text.split("\f")
    paged = len(pages) > 1
    return [{"text": " ".join(lines), "label": label, "page": number if paged else None}
            for number, page in enumerate(pages, start=1) for label, lines in _page_paragraphs(page)]


def _flush(out: list, run: list[str], label: str = "text") -> list[str]:
    """``run`` (a paragraph's lines) appended to ``out`` as ``(label, lines)`` unless empty; a new run."""
    if run:
        out.append((label, run))
    return []


def _page_paragraphs(page: str) -> list[tuple[str, list[str]]]:
    """One page's paragraphs as (label, their lines)."""
    lines = [s.strip() for s in page.split("\n")]
    usual = _usual(lines)
    out: list[tuple[str, list[str]]] = []
    run: list[str] = []
    size = 0
    open_heading = False
    for line in lines:
        if not line:
            run, size = _flush(out, run), 0
            continue
        if open_heading and not _SENTENCE_END.search(line) and len(line) < SHORT_LINE * usual:
            out[-1][1].append(line)  # a wrapped heading's second line
            open_heading = False
            continue
        open_heading = False
        if _is_heading(line, usual):
            run, size = _flush(out, run), 0
            _flush(out, [line], "section_header")
            open_heading = _OPEN_END.search(line) is not None
            continue
        if run and run[-1][-1:] == "-" and run[-1][-2:-1].isalpha():
            run[-1] += line  # a hyphen the join kept ("data-\nbase"): no space inside the word
        else:
            run.append(line)
        size += len(line) + 1
        ends = _SENTENCE_END.search(line) is not None
        if (ends and (len(line) < SHORT_LINE * usual or size > MAX_CHARS)) or size > 2 * MAX_CHARS:
            run, size = _flush(out, run), 0
    _flush(out, run)
    return out
