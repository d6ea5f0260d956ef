"""Words split by a hyphen at a line end, joined again where the document shows they are one word.

    join_hyphens("the sum-\nmaries of summaries")  ->  "the  \nsummaries of summaries"

A PDF's text layer keeps the hyphen a typesetter put at a line end: ``sum-\nmaries`` (pdfium marks it, and
the pdftotext backend writes it as a hyphen and a line break; a parse written before 2026-12-04 holds it
inline, ``sum-maries``). Indexed as it is, the word counts as ``sum`` and ``maries`` and a snippet shows
"sum-\nmaries". A split ``head-tail`` is joined when the joined word occurs in the document as a word of
its own (not itself next to a hyphen) and

- across a line break: the halves are not both such words -- ``data-\nbase`` beside ``data`` and
  ``base`` keeps its hyphen. A word of one letter never counts (``e`` is no such word), so ``e-\nmail``
  is joined when ``email`` stands alone in the document, and kept otherwise;
- inline (where a line break may have been lost, or the author wrote the hyphen): neither half is such a
  word -- ``sum-maries``, ``prac-tice`` are joined, ``non-linear`` beside ``linear`` is not.

Only ASCII letters are joined (the tokenizer's ``[a-z0-9]`` runs are what the join changes), the
tail must start lower-case (``Hewlett-Packard`` stays), and a split inside a longer compound is not one
(``state-of-the-\nart`` stays). The join keeps the text's length and lines: the
hyphen and the line break move, as spaces and that same line break, to one side of the joined word, so
every offset outside the word -- the snippets', the pages counted by form feeds -- still points into
``content/parsed/<key>.txt``. One function, applied where the index reads a body
(``chitragupta.engine.index.source``): what is indexed, quoted and encoded is the joined text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Split", "document_words", "find_splits", "join_hyphens", "split_positions"]

# a hyphen, an optional line break with the next line's indent, and a lower-case letter: where a split may be
_DASH = re.compile(r"-(\n[ \t]*)?(?=[a-z])")
_TAIL = re.compile(r"[a-z]{1,40}(?![A-Za-z0-9-])")
# a-z, 0-9 and "-" kept, every other byte a space
_SEPARATE = bytes(c if 97 <= c <= 122 or 48 <= c <= 57 or c == 45 else 32 for c in range(256))
_LINE_END = re.compile(r"-\n[ \t]*")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_GLUE = _LETTERS | frozenset("0123456789-")
_CLOSING = re.compile(r"([^\sA-Za-z0-9]{0,4})(?=\s|$)")


def _head_start(text: str, dash: int) -> int:
    """Where the run of ASCII letters ending just before ``dash`` starts (``dash`` itself: none, or a run
    glued to a digit or another hyphen, or longer than 40 letters)."""
    i = dash
    while i > 0 and dash - i < 41 and text[i - 1] in _LETTERS:
        i -= 1
    if i == dash or dash - i > 40 or (i > 0 and text[i - 1] in _GLUE):
        return dash
    return i


class _Words:
    """Which lower-case words stand alone in a text (no hyphen, digit or letter glued to them), supports ``in``."""

    def __init__(self, text: str):
        # a hyphen at a line end glues the next line's first word to it, as an inline one does; then every
        # byte but a-z, 0-9 and the hyphen separates (bytes.translate and split: C speed), and a word stands
        # alone when it is a whole token
        low = _LINE_END.sub("-", text.lower())
        self._tokens = set(low.encode("utf-8", "surrogatepass").translate(_SEPARATE).split())

    def __contains__(self, word: str) -> bool:
        key = word.encode()
        return len(key) > 1 and key in self._tokens


def document_words(text: str):
    """The lower-cased ASCII words of ``text`` that stand alone somewhere in it (not only beside a hyphen);
    supports ``in``."""
    return _Words(text)


class Split(NamedTuple):
    """A word split by a hyphen: ``text[start:end]`` is ``head + "-" + gap + tail``; ``join`` says the rule's verdict."""

    start: int
    end: int
    head: str
    gap: str
    tail: str
    join: bool


def split_positions(text: str) -> list[int]:
    """Where a split may be in ``text`` (its hyphens before a lower-case letter, a line break and indent
    between them or not): a text with none is one ``join_hyphens`` returns as it is. A stretch of texts
    joined by a separator that is neither a letter nor a line break is told apart at once."""
    return [m.start() for m in _DASH.finditer(text)] if "-" in text else []


def find_splits(text: str, words=None) -> list[Split]:
    """Every ``head-tail`` split in ``text`` (a hyphen, an optional line break, a lower-case tail; not inside
    a longer compound), each with the join rule's verdict. ``words``: as for ``join_hyphens``."""
    out: list[Split] = []
    if "-" not in text:
        return out
    last = 0
    low = None  # the text lowercased: a word standing alone in it is in there (without a hyphen, as joined
    # words are), so one missing from it is no word of the text, told before the text's words are collected
    for m in _DASH.finditer(text):
        d = m.start()
        s = _head_start(text, d)
        if s == d or s < last:
            continue
        t = _TAIL.match(text, m.end())
        if t is None:
            continue
        head, gap, tail = text[s:d], m.group(1) or "", t.group(0)
        whole = (head + tail).lower()
        if words is None:
            if low is None:
                low = text.lower()
            if whole not in low:
                out.append(Split(s, t.end(), head, gap, tail, False))
                last = t.end()
                continue
            words = _Words(text)
        joined = whole in words
        if gap:  # across a line break: the halves are not both words
            join = joined and not (head.lower() in words and tail in words)
        else:  # inline: neither half is a word
            join = joined and head.lower() not in words and tail not in words
        out.append(Split(s, t.end(), head, gap, tail, join))
        last = t.end()
    return out


def join_hyphens(text: str, words=None) -> str:
    """``text`` with each line-break split word joined (the module docstring's rule), same length and lines.
    ``words``: the document's words (``document_words``), when the text is one piece of a larger document."""
    out: list[str] = []
    last = 0
    for sp in find_splits(text, words):
        s, e = sp.start, sp.end
        if s < last:  # inside the closing punctuation taken with the previous word (cannot hold letters)
            continue
        if sp.join:
            pad = " " + sp.gap  # where the hyphen and the line break were
            piece = pad + sp.head + sp.tail
            glued = s > 0 and not text[s - 1].isspace()
        elif sp.gap:
            # kept, across a line break: the word stays hyphenated, whole on one line ("solu-tions"), the
            # line break after it, so a snippet shows no "solu- tions"
            pad, piece, glued = sp.gap, sp.head + "-" + sp.tail, True
        else:
            continue
        if glued:
            # the spaces (or the line break) go after the word and the punctuation that closes it, when
            # whitespace (or the end) follows that ("(sum-maries)" -> "(summaries)  ")
            close = _CLOSING.match(text, e)
            if close is not None:
                piece, e = piece.lstrip(" \n\t") + close.group(1) + pad, close.end(1)
            elif not sp.join:
                continue
        out.append(text[last:s])
        out.append(piece)
        last = e
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)
