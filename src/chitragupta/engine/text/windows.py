"""The one window chooser, shared by search snippets and ``evidence``.

Candidate windows of ``width`` characters are anchored on every whole-word occurrence of every query
term (the tokenizer's ``[a-z0-9]`` boundary, not ``\\b``), each centred on its anchor. A candidate scores
the number of distinct query terms that occur whole inside it; candidates are taken best first (ties by
position), skipping any that overlaps one already taken, and returned in document order. Nothing reads
a set's iteration order, so the result is deterministic by construction. A paper's front matter (before
its abstract, ``chitragupta.engine.text.front``) is a candidate only when nothing after it is.

A chosen window touching a pipe table is widened to take in the whole table (``chitragupta.engine.text.tables``),
the table rendered line by line; two windows widened into the same table come back as one, so fewer
windows than asked for may return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from chitragupta.engine.text.tables import render_block, table_blocks
from chitragupta.engine.text.tokenize import TOKEN_CLASS, term_pattern

__all__ = ["Window", "choose_windows", "fitted", "lead", "lower_same_length", "normalize_ws"]

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Window:
    """A span ``[start, end)`` of the text, the distinct query terms inside it, and its rendered text."""

    start: int
    end: int
    covered: int
    text: str
    anchor: int = -1  # the query-term occurrence the window was centred on (where its page is read)


def lower_same_length(text: str) -> str:
    """``text.lower()`` that keeps every character at its offset.

    A few characters lower to two (``İ`` -> ``i̇``); the tokenizer sees the first one followed by a
    combining mark, which is a separator, so keeping the first alone gives the same tokens.
    """
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c.lower()[:1] or c for c in text)


def normalize_ws(s: str) -> str:
    """Whitespace runs as one space, none at either end (``str.split`` and ``\\s`` agree on whitespace)."""
    return " ".join(s.split())


def lead(text: str, width: int) -> str:
    """The first ``width`` characters of whitespace-normalised ``text``, cut back to a word boundary."""
    flat = normalize_ws(text)
    if len(flat) <= width:
        return flat
    cut = flat.rfind(" ", 0, width + 1)
    return flat[:cut if cut > 0 else width]


def fitted(text: str, terms: list[str], width: int, stem=None) -> str:
    """A part of a source (a passage, a chunk) quoted in ``width`` characters: whole when it fits (as it
    is), else the window of that width holding most of ``terms``, else its first words; "" for width 0."""
    if width < 1:
        return ""
    if len(text) <= width:
        return text
    wins = choose_windows(text, terms, width, 1, stem=stem)
    return wins[0].text if wins else lead(text, width)


_PLAIN_TERM = re.compile(TOKEN_CLASS + "+")


def _occurrences(low: str, terms: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, term indexes, match lengths) of every whole-word occurrence, in text order."""
    if not terms:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    if all(_PLAIN_TERM.fullmatch(t) for t in terms):
        return _run_occurrences(low, terms)
    index = {t: i for i, t in enumerate(terms)}
    pos, tid, ln = [], [], []
    for m in term_pattern(terms).finditer(low):
        pos.append(m.start())
        tid.append(index[m.group()])
        ln.append(m.end() - m.start())
    return (np.asarray(pos, dtype=np.int64), np.asarray(tid, dtype=np.int64), np.asarray(ln, dtype=np.int64))


def _run_occurrences(low: str, terms: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_occurrences`` for terms that are ``[a-z0-9]`` runs, in array operations: a whole-word match
    of such a term is exactly a maximal ``[a-z0-9]`` run equal to it. One byte per character (anything
    non-ASCII becomes ``?``, a separator), so byte offsets are character offsets. Linear in the text,
    where a regex match object per occurrence costs seconds on a document of one repeated word."""
    b = np.frombuffer(low.encode("ascii", "replace"), dtype=np.uint8)
    is_run = ((b >= 97) & (b <= 122)) | ((b >= 48) & (b <= 57))
    edges = np.diff(is_run.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    lengths = np.flatnonzero(edges == -1) - starts
    pos, tid = [], []
    for i, t in enumerate(terms):
        s = starts[lengths == len(t)]
        want = np.frombuffer(t.encode("ascii"), dtype=np.uint8)
        for j in range(len(t)):  # narrow the candidates one character at a time
            if s.size == 0:
                break
            s = s[b[s + j] == want[j]]
        pos.append(s)
        tid.append(np.full(s.size, i, dtype=np.int64))
    pos_a, tid_a = np.concatenate(pos).astype(np.int64), np.concatenate(tid)
    order = np.argsort(pos_a, kind="stable")
    pos_a, tid_a = pos_a[order], tid_a[order]
    ln = np.fromiter((len(terms[i]) for i in range(len(terms))), dtype=np.int64, count=len(terms))[tid_a]
    return pos_a, tid_a, ln


_RUN = re.compile(TOKEN_CLASS + "+")
def _stemmed_occurrences(low: str, stems: list[str], stem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like ``_occurrences``, matching each word of the text by its stem."""
    index = {t: i for i, t in enumerate(stems)}
    pos, tid, ln = [], [], []
    seen: dict[str, int | None] = {}  # word -> term index: a long text repeats its words
    for m in _RUN.finditer(low):
        w = m.group()
        if len(w) < 2:
            continue
        i = seen.get(w, -1)
        if i == -1:
            i = seen[w] = index.get(stem(w))
        if i is not None:
            pos.append(m.start())
            tid.append(i)
            ln.append(m.end() - m.start())
    return (np.asarray(pos, dtype=np.int64), np.asarray(tid, dtype=np.int64), np.asarray(ln, dtype=np.int64))


def _trim_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop a word cut at either edge (never past the window's only word)."""
    if start > 0 and not text[start - 1].isspace() and not text[start].isspace():
        nxt = _WS.search(text, start, end)
        if nxt:
            start = nxt.end()
    if end < len(text) and not text[end].isspace() and not text[end - 1].isspace():
        i = end - 1  # back over the cut word to the last whitespace run inside the window, then to its start
        while i > start and not text[i].isspace():
            i -= 1
        if text[i].isspace():
            while i > start and text[i - 1].isspace():
                i -= 1
            if i > start:
                end = i
    return start, end


_PAIRWISE_MAX = 256  # occurrences; up to this every (window, occurrence) pair is tested at once


def _covered(starts, ends, pos, tid, ln, n_terms: int) -> np.ndarray:
    """For each candidate window [starts, ends), the number of distinct terms with an occurrence wholly
    inside it (it starts there and its end fits too)."""
    if pos.shape[0] <= _PAIRWISE_MAX:
        inside = (pos[None, :] >= starts[:, None]) & ((pos + ln)[None, :] <= ends[:, None])
        onehot = np.zeros((pos.shape[0], n_terms), dtype=np.int64)
        onehot[np.arange(pos.shape[0]), tid] = 1
        return ((inside.astype(np.int64) @ onehot) > 0).sum(axis=1)
    # many occurrences: per term, by binary search over its positions
    covered = np.zeros(starts.shape[0], dtype=np.int64)
    for t in range(n_terms):
        sel = tid == t
        if not sel.any():
            continue
        p_t = pos[sel]
        # an occurrence of t is inside a window when it starts there and its end fits too
        ends_t = p_t + ln[sel]
        first = np.searchsorted(p_t, starts, side="left")
        last = np.searchsorted(p_t, ends - ln[sel].min(), side="right")
        inside = last - first
        if (ln[sel] != ln[sel][0]).any():  # stemmed matches of different lengths: check exactly
            inside = np.array([int(((p_t >= s) & (ends_t <= e)).any()) for s, e in zip(starts, ends)])
        covered += inside > 0
    return covered


def _array_candidates(pos, tid, ln, n_terms: int, size: int, width: int):
    """Every occurrence's candidate window as (start, end, covered, anchor), best first: most distinct
    terms inside, then leftmost, then text order (a stable sort)."""
    if pos.size == 0:
        return []
    centre = pos + ln // 2
    starts = np.clip(centre - width // 2, 0, max(0, size - width))
    ends = np.minimum(starts + width, size)
    covered = _covered(starts, ends, pos, tid, ln, n_terms)
    order = np.lexsort((starts, -covered))
    return zip(starts[order].tolist(), ends[order].tolist(), covered[order].tolist(), pos[order].tolist())


def choose_windows(text: str, terms: list[str], width: int, n: int, stem=None, body_start: int = 0) -> list[Window]:
    """Up to ``n`` non-overlapping windows of ``text`` bearing on ``terms``, in document order.

    ``terms`` are query tokens (already lowercased). With ``stem`` (the index's stemmer), a word of
    the text matches a term when their stems agree, so a snippet still finds what the index counted.
    A document with no occurrence yields no window. ``body_start``: where the front matter (title block,
    authors) ends; windows are chosen from the text after it, and from the whole text only when none
    there bears on the query.
    """
    if 0 < body_start < len(text):
        wins = _choose(text[body_start:], terms, width, n, stem)
        if wins:
            return [Window(start=w.start + body_start, end=w.end + body_start, covered=w.covered, text=w.text,
                           anchor=w.anchor + body_start) for w in wins]
    return _choose(text, terms, width, n, stem)


def _choose(text: str, terms: list[str], width: int, n: int, stem) -> list[Window]:
    if n < 1 or width < 1 or not text:
        return []
    low = lower_same_length(text)
    size = len(text)
    if stem is None:
        terms = sorted(set(terms))
        pos, tid, ln = _occurrences(low, terms)
    else:
        terms = sorted({stem(t) for t in terms})
        pos, tid, ln = _stemmed_occurrences(low, terms, stem)
    chosen: list[tuple[int, int, int, int]] = []
    for s, e, c, anchor in _array_candidates(pos, tid, ln, len(terms), size, width):
        if any(s < ce and cs < e for cs, ce, _, _ in chosen):
            continue
        chosen.append((s, e, c, anchor))
        if len(chosen) == n:
            break
    if not chosen:
        return []
    chosen.sort()
    blocks = table_blocks(text)
    spans: list[list[int]] = []  # [start, end, covered, widened, anchor]
    for s, e, c, anchor in chosen:
        touched = [(bs, be) for bs, be in blocks if bs < e and s < be]
        if not touched:
            ts, te = _trim_to_words(text, s, e)
            spans.append([ts, te, c, 0, anchor])
            continue
        ws, we = min(s, touched[0][0]), max(e, touched[-1][1])
        ws = ws if ws == touched[0][0] else _trim_to_words(text, ws, we)[0]
        we = we if we == touched[-1][1] else _trim_to_words(text, ws, we)[1]
        if spans and spans[-1][3] and ws < spans[-1][1]:
            # two windows widened into the same table: one window, not the table twice
            prev = spans[-1]
            prev[1], prev[2] = max(prev[1], we), max(prev[2], c)
            continue
        spans.append([ws, we, c, 1, anchor])
    out = []
    for s, e, c, widened, anchor in spans:
        rendered = _render(text, s, e, blocks) if widened else normalize_ws(text[s:e])
        out.append(Window(start=s, end=e, covered=c, text=rendered, anchor=anchor))
    return out


def _render(text: str, s: int, e: int, blocks: list[tuple[int, int]]) -> str:
    """A widened window: prose normalised as usual, each table block line by line, in order."""
    parts, pos = [], s
    for bs, be in blocks:
        if be <= s or bs >= e:
            continue
        if bs > pos and normalize_ws(text[pos:bs]):
            parts.append(normalize_ws(text[pos:bs]))
        parts.append(render_block(text, bs, be))
        pos = be
    if pos < e and normalize_ws(text[pos:e]):
        parts.append(normalize_ws(text[pos:e]))
    return "\n".join(parts)
