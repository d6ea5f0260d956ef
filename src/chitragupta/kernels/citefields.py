"""The tail of reference entries' fields in numba: the title that opens what follows an entry's author block
and year, and the venue after it (``engine/citations/entries.py``: ``_title_end`` and ``_venue``, the rules
written once there), for every entry of a list in one call.

The engine hands over the tails as one byte buffer of printable ASCII (``starts``/``ends`` per piece) and,
per piece, whether its title is still to be found (``need_title``). Out come, per piece and relative to its
start, ``(status, title_start, title_end, venue_start, venue_end)``: status 1 where the piece is one these
rules leave to Python (a byte outside the printable ASCII range, a quote in its first five characters
where a title is looked for, an editor's mark " ed" / " (ed" in the venue), 0 otherwise; a start of -1 for
no title (or none looked for) and for no venue. Each test below is the pattern's, on printable ASCII (the
only white space a space; ``\\w`` ``[A-Za-z0-9_]``; ``isalpha`` ``[A-Za-z]``); the module's tests hold the
two to the same answers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["tails", "ABBREVIATIONS_BLOB"]

_SP, _DOT, _COMMA, _COLON, _SEMI, _LPAREN = 32, 46, 44, 58, 59, 40
_QUOTE, _LT, _GT, _SLASH = 34, 60, 62, 47
_Q, _EXCL = 63, 33


def _table(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    blob = np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8).copy()
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(w) for w in words])
    return blob, offsets


# ``entries._QUESTION_END``'s words after "?"/"!" and spaces ("In" separately: a word boundary after it)
_QWORDS, _QWORD_AT = _table(["Proc", "arXiv", "ArXiv", "CoRR", "Journal", "Advances", "Trans", "IEEE", "ACM",
                             "Findings"])
# ``entries._VENUE_STOP``'s words after a comma (case-insensitive, a word boundary after: the variants with a
# period, "pp." and the like, match where these do) and after an opening parenthesis
_COMMA_WORDS, _COMMA_WORD_AT = _table(["pages", "pp", "vol", "volume", "no", "num", "number", "issue", "art",
                                       "article"])
_PAREN_WORDS, _PAREN_WORD_AT = _table(["pp", "pages", "vol"])
# ``entries._ABBREVIATIONS`` (set by the engine at import: ``set_abbreviations``)
ABBREVIATIONS_BLOB = [np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)]


@njit(cache=True, inline="always")
def _alpha(c):
    return (65 <= c <= 90) or (97 <= c <= 122)


@njit(cache=True, inline="always")
def _upper(c):
    return 65 <= c <= 90


@njit(cache=True, inline="always")
def _lower(c):
    return 97 <= c <= 122


@njit(cache=True, inline="always")
def _digit(c):
    return 48 <= c <= 57


@njit(cache=True, inline="always")
def _word(c):
    return _alpha(c) or _digit(c) or c == 95


@njit(cache=True)
def _at(buf, i, b, blob, offsets, k, fold):
    """Whether table word ``k`` stands at ``buf[i:]`` (before ``b``), lower-cased first when ``fold``."""
    a0, a1 = offsets[k], offsets[k + 1]
    n = a1 - a0
    if i + n > b:
        return False
    for t in range(n):
        c = buf[i + t]
        if fold and 65 <= c <= 90:
            c += 32
        if c != blob[a0 + t]:
            return False
    return True


@njit(cache=True)
def _word_bounded(buf, i, b, blob, offsets):
    """Some table word (case-insensitive) stands at ``i`` with a word boundary after it."""
    for k in range(offsets.shape[0] - 1):
        if _at(buf, i, b, blob, offsets, k, True):
            e = i + offsets[k + 1] - offsets[k]
            if e == b or not _word(buf[e]):
                return True
    return False


@njit(cache=True)
def _spaces(buf, i, b):
    while i < b and buf[i] == _SP:
        i += 1
    return i


@njit(cache=True)
def _sentence_end(buf, a, b, pos):
    """``_SENTENCE_END.search(piece, pos)``: (start, end) or (-1, -1)."""
    for i in range(pos, b):
        c = buf[i]
        if c != _DOT and c != _Q and c != _EXCL:
            continue
        if i - 1 >= a and _upper(buf[i - 1]):
            continue
        if i - 2 >= a and (i - 2 == a or not _word(buf[i - 3])):
            x, y = buf[i - 2], buf[i - 1]
            if (_upper(x) and _lower(y)) or (x == 118 and y == 115) or (x == 112 and y == 112):  # "Xy", "vs", "pp"
                continue
        if i - 3 >= a and (i - 3 == a or not _word(buf[i - 4])):
            x, y, z = buf[i - 3], buf[i - 2], buf[i - 1]
            if (x == 86 and y == 111 and z == 108) or (x == 69 and y == 100 and z == 115) \
                    or (x == 73 and y == 110 and z == 99):  # "Vol", "Eds", "Inc"
                continue
        if i + 1 == b:
            return i, i + 1
        if buf[i + 1] == _SP:
            return i, i + 2
    return -1, -1


@njit(cache=True)
def _question_end(buf, b, i):
    """``_QUESTION_END.match(piece, i)`` (``buf[i]`` is "?" or "!")."""
    j = _spaces(buf, i + 1, b)
    if j == i + 1:
        return False
    if j + 2 <= b and buf[j] == 73 and buf[j + 1] == 110 and (j + 2 == b or not _word(buf[j + 2])):  # "In\b"
        return True
    for k in range(_QWORD_AT.shape[0] - 1):
        if _at(buf, j, b, _QWORDS, _QWORD_AT, k, False):
            return True
    return False


@njit(cache=True)
def _title_end(buf, a, b):
    """``entries._title_end`` of ``buf[a:b]``: (end, next), absolute."""
    s, e = _sentence_end(buf, a, b, a)
    while s >= 0 and buf[s] != _DOT and not _question_end(buf, b, s):
        s, e = _sentence_end(buf, a, b, e)
    if s < 0:
        return b, b
    return (s if buf[s] == _DOT else s + 1), e


@njit(cache=True)
def _strip_set(c, parens):
    return c == _SP or c == _COMMA or c == _DOT or c == _SEMI or c == _COLON or (parens and c == _LPAREN)


@njit(cache=True)
def _venue_stop(buf, a, b):
    """The start of ``_VENUE_STOP.search(v)`` in ``buf[a:b]``, or ``b``."""
    for p in range(a, b):
        c = buf[p]
        if c == _COMMA:
            q = _spaces(buf, p + 1, b)
            if q < b and (_digit(buf[q]) or _word_bounded(buf, q, b, _COMMA_WORDS, _COMMA_WORD_AT)):
                return p
            # ", A. B" / ", A.B": an editor's initials (one white space, exactly)
            if p + 4 < b and buf[p + 1] == _SP and _upper(buf[p + 2]) and buf[p + 3] == _DOT:
                if _upper(buf[p + 4]) or (buf[p + 4] == _SP and p + 5 < b and _upper(buf[p + 5])):
                    return p
        elif c == _LPAREN:
            q = _spaces(buf, p + 1, b)
            if q + 4 <= b and ((buf[q] == 49 and (buf[q + 1] == 56 or buf[q + 1] == 57))
                               or (buf[q] == 50 and buf[q + 1] == 48)) and _digit(buf[q + 2]) and _digit(buf[q + 3]):
                return p
            if q < b and _word_bounded(buf, q, b, _PAREN_WORDS, _PAREN_WORD_AT):
                return p
        elif c == _COLON:
            q = _spaces(buf, p + 1, b)
            if q < b and _digit(buf[q]):
                return p
        elif c == _SP:
            q = p + 1
            if q < b and _digit(buf[q]):
                r = q
                while r < b and _digit(buf[r]):
                    r += 1
                t = _spaces(buf, r, b)
                if t < b and buf[t] == _LPAREN:  # "12 (" / "12("
                    return p
                if r + 1 < b and buf[r] == _COLON and _digit(buf[r + 1]):  # "12:3"
                    return p
                # a year at the very end: "2019", "2019a", "2019.", "2019a."
                if q + 4 <= b and ((buf[q] == 49 and (buf[q + 1] == 56 or buf[q + 1] == 57))
                                   or (buf[q] == 50 and buf[q + 1] == 48)) and _digit(buf[q + 2]) \
                        and _digit(buf[q + 3]):
                    e = q + 4
                    if e < b and _lower(buf[e]):
                        e += 1
                    if e < b and buf[e] == _DOT:
                        e += 1
                    if e == b:
                        return p
            elif q < b and buf[q] == _LPAREN:
                t = _spaces(buf, q + 1, b)
                if t < b and _word_bounded(buf, t, b, _PAREN_WORDS, _PAREN_WORD_AT):
                    return p
    return b


@njit(cache=True)
def _abbreviation(buf, j, i, blob, offsets):
    for k in range(offsets.shape[0] - 1):
        if offsets[k + 1] - offsets[k] == i - j and _at(buf, j, i, blob, offsets, k, False):
            return True
    return False


@njit(cache=True)
def _venue(buf, a, b, ablob, aoffsets):
    """``entries._venue`` of ``buf[a:b]``: (status, start, end), absolute; start -1 for None."""
    while a < b and _strip_set(buf[a], False):
        a += 1
    while b > a and _strip_set(buf[b - 1], False):
        b -= 1
    if b - a >= 2 and (buf[a] == 73 or buf[a] == 105) and buf[a + 1] == 110:  # "In" / "in": ``_IN``
        j = a + 2
        k = _spaces(buf, j, b)
        if k > j:
            a = k
            if k < b and buf[k] == _COLON:
                m = _spaces(buf, k + 1, b)
                if m > k + 1:
                    a = m
        elif j < b and buf[j] == _COLON:
            m = _spaces(buf, j + 1, b)
            a = m if m > j + 1 else j + 1
    for p in range(a, b - 2):  # " ed" / " (ed": ``_EDITORS`` is left to Python
        if buf[p] == _SP and ((buf[p + 1] == 101 and buf[p + 2] == 100)
                              or (p + 3 < b and buf[p + 1] == _LPAREN and buf[p + 2] == 101 and buf[p + 3] == 100)):
            return 1, -1, -1
    if a >= b:
        return 0, -1, -1
    b = _venue_stop(buf, a, b)
    k = a
    while k + 1 < b:
        if buf[k] == _DOT and buf[k + 1] == _SP:
            i = j = k
            while j > a and _alpha(buf[j - 1]):
                j -= 1
            n = i - j
            keep = False
            if n >= 1 and _upper(buf[j]):
                if n == 1:
                    keep = True
                else:
                    low = False
                    for t in range(j, i):
                        if _lower(buf[t]):
                            low = True
                            break
                    keep = (n <= 4 and low) or _abbreviation(buf, j, i, ablob, aoffsets)
            if not keep:
                b = i
                break
            k += 2
        else:
            k += 1
    while a < b and _strip_set(buf[a], True):
        a += 1
    while b > a and _strip_set(buf[b - 1], True):
        b -= 1
    # "arXiv preprint arXiv" -> "arXiv preprint" (``_PREPRINT``)
    if b - a >= 20 and buf[b - 5] == 97 and buf[b - 4] == 114 and buf[b - 3] == 88 and buf[b - 2] == 105 \
            and buf[b - 1] == 118 and (buf[a] == 97 or buf[a] == 65) and buf[a + 14] == _SP:
        same = True
        pre = "rXiv preprint"
        for t in range(13):
            if buf[a + 1 + t] != ord(pre[t]):
                same = False
                break
        if same:
            for t in range(a + 14, b - 5):
                if buf[t] != _SP:
                    same = False
                    break
        if same:
            b = a + 14
    if a >= b:
        return 0, -1, -1
    two = False
    for t in range(a, b - 1):
        if _alpha(buf[t]) and _alpha(buf[t + 1]):
            two = True
            break
    if not two:
        return 0, -1, -1
    if b - a >= 3 and buf[a] == 49 and buf[a + 1] == 48 and buf[a + 2] == _DOT:  # ``_DOI.match``
        d = a + 3
        while d < b and _digit(buf[d]):
            d += 1
        if 4 <= d - a - 3 <= 9 and d + 1 < b and buf[d] == _SLASH and _url_char(buf[d + 1]):
            return 0, -1, -1
    c0 = buf[a] | 32
    if c0 == 104 or c0 == 119:  # ``_URL.match``: "http://", "https://", "www." (any case), then a character
        e = -1
        if _folded(buf, a, b, "http://"):
            e = a + 7
        elif _folded(buf, a, b, "https://"):
            e = a + 8
        elif _folded(buf, a, b, "www."):
            e = a + 4
        if e >= 0 and e < b and _url_char(buf[e]):
            return 0, -1, -1
    return 0, a, min(b, a + 300)


@njit(cache=True, inline="always")
def _url_char(c):
    return c != _SP and c != _QUOTE and c != _LT and c != _GT


@njit(cache=True)
def _folded(buf, a, b, word):
    n = len(word)
    if a + n > b:
        return False
    for t in range(n):
        c = buf[a + t]
        if 65 <= c <= 90:
            c += 32
        if c != ord(word[t]):
            return False
    return True


@njit(cache=True)
def _tails(buf, starts, ends, need_title, ablob, aoffsets):
    n = starts.shape[0]
    out = np.full((n, 5), -1, dtype=np.int64)
    for r in range(n):
        a, b = starts[r], ends[r]
        out[r, 0] = 0
        odd = False
        for t in range(a, b):
            if buf[t] < 32 or buf[t] > 126:
                odd = True
                break
        if odd:
            out[r, 0] = 1
            continue
        if need_title[r]:
            quoted = False
            for t in range(a, min(b, a + 5)):
                if buf[t] == _QUOTE:
                    quoted = True
                    break
            if quoted:
                out[r, 0] = 1
                continue
            end, nxt = _title_end(buf, a, b)
            ta, tb = a, end
            while ta < tb and _strip_set(buf[ta], False):
                ta += 1
            while tb > ta and _strip_set(buf[tb - 1], False):
                tb -= 1
            if tb > ta:
                out[r, 1] = ta - a
                out[r, 2] = min(tb, ta + 500) - a
            a = nxt
        status, va, vb = _venue(buf, a, b, ablob, aoffsets)
        if status != 0:
            out[r, 0] = 1
            continue
        if va >= 0:
            out[r, 3] = va - starts[r]
            out[r, 4] = vb - starts[r]
    return out


def tails(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, need_title: np.ndarray) -> np.ndarray:
    """Per piece ``buf[starts[r]:ends[r]]`` (printable ASCII; ``need_title[r]``: its title is still to be
    found), ``(status, title_start, title_end, venue_start, venue_end)`` relative to the piece's start (the
    module docstring)."""
    return _tails(buf, starts, ends, need_title, ABBREVIATIONS_BLOB[0], ABBREVIATIONS_BLOB[1])


def set_abbreviations(words) -> None:
    """The venue words that an abbreviating period after them does not end (``entries._ABBREVIATIONS``)."""
    words = sorted(words)
    ABBREVIATIONS_BLOB[0], ABBREVIATIONS_BLOB[1] = _table(words)
