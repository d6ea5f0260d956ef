"""The tokenizer, shared by the index, the query and the window chooser.

Exactly: lowercase; a token is a maximal run of ``[a-z0-9]`` (so ``ai_model`` is ``ai``, ``model`` and an
accented letter splits a word); tokens shorter than ``MIN_TOKEN_CHARS`` are dropped; the 19-word core
stopword list is dropped. ``WORD_BOUNDARY`` gives the same boundary as lookarounds, for finding a term
in text exactly where the index counted it (not Python's ``\\b``, which treats ``_`` and accented letters
as word characters).

A one-character word is not a term, but a query does not lose it: ``short_pairs`` joins it to the word
beside it ("type 2", "2 diabetes", "vitamin d", "t cells"), and BM25 search scores each pair as a term
from the positions array (``engine.search.pairs``), so "type 1 diabetes" and "type 2 diabetes" differ. Not
joined (each measured to cost on cisi or cranfield and to buy nothing): a letter after an apostrophe
("today's", "can't"), one beside another one-character word (the abbreviations "e.g.", "i.e.", "U.S.", the
lists "1, 2"), and "i" to the word after it (the pronoun: "I am"; "type I" still pairs). The index itself
is unchanged: a pair is read from the words in order, so no rebuild follows from the rule.
"""

from __future__ import annotations

import re

import numpy as np

from chitragupta.kernels.charset import IS_TOKEN_BYTE, MIN_TOKEN_CHARS, SEPARATE, TOKEN_BYTES, TOKEN_CLASS

__all__ = [
    "MIN_TOKEN_CHARS",
    "DROPPED_RUNS",
    "runs_bytes",
    "iter_runs_bytes",
    "STOPWORDS",
    "TOKENIZER_ID",
    "TOKEN_CLASS",
    "TOKEN_CHARS",
    "tokenize",
    "tokenize_raw",
    "query_terms",
    "query_words",
    "term_pattern",
    "short_pairs",
    "short_rows",
]

STOPWORDS = frozenset(
    "a an and are as at be by for from in is of on that the to was with".split()
)
# Recorded in the index manifest: a change here invalidates every cache.
TOKENIZER_ID = f"az09-min{MIN_TOKEN_CHARS}-core19"

# Runs of [a-z0-9] shorter than the floor never match, so one findall yields exactly the kept runs.
_TOKEN_RE = re.compile(TOKEN_CLASS + "{%d,}" % MIN_TOKEN_CHARS)
_RUN_RE = re.compile(TOKEN_CLASS + "+")


def tokenize(text: str) -> list[str]:
    """Indexed tokens of ``text``, in order, repeats kept."""
    stop = STOPWORDS
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in stop]


# Bytes outside [a-z0-9] become spaces (kernels.charset.SEPARATE); with every non-ASCII character encoded
# as "?" first, splitting the result yields exactly the [a-z0-9] runs of the lowercased text.
_SEPARATE = SEPARATE
# Runs that are never indexed: below the length floor, or stopwords.
DROPPED_RUNS = tuple(sorted({bytes([c]) for c in TOKEN_BYTES} | {w.encode() for w in STOPWORDS}))
assert MIN_TOKEN_CHARS == 2  # DROPPED_RUNS lists the one-character runs; a higher floor needs more


def runs_bytes(text: str) -> list[bytes]:
    """Every ``[a-z0-9]`` run of the lowercased text, as ASCII bytes, in order (short runs and stopwords
    included: the caller drops ``DROPPED_RUNS``). Same runs as ``tokenize_raw``."""
    return text.lower().encode("ascii", "replace").translate(_SEPARATE).split()


def iter_runs_bytes(text: str, chunk: int = 1 << 22):
    """``runs_bytes`` of a long text in pieces cut between runs, so memory stays bounded."""
    n = len(text)
    start = 0
    while start < n:
        end = min(n, start + chunk)
        while end < n and _run_char(text[end - 1].lower()[-1:]) and _run_char(text[end].lower()[:1]):
            end += 1
        yield runs_bytes(text[start:end])
        start = end


TOKEN_CHARS = frozenset(TOKEN_BYTES.decode("ascii"))  # the token characters, for a test per character


def _run_char(c: str) -> bool:
    # Lowercasing may turn one character into two (İ -> i + combining dot): the caller passes the
    # lowered character's end or start, whichever touches the cut.
    return c in TOKEN_CHARS


def tokenize_raw(text: str) -> list[str]:
    """All ``[a-z0-9]`` runs of ``text`` lowercased, before the length floor and stopwords (for notes)."""
    return _RUN_RE.findall(text.lower())


def query_words(runs: list[bytes]) -> tuple[list[str], list[str]]:
    """The one query splitter, given the query's ``runs_bytes``: its distinct indexable words in first-seen
    order, and the distinct words it drops (below the length floor, or stopwords), in order.
    ``chitragupta.engine.search.query.parse`` (which also hands the runs to acronym expansion) and ``query_terms``
    both read a query's words from here."""
    seen: set[bytes] = set()
    typed: list[str] = []
    dropped: list[str] = []
    for r in runs:
        if r in seen:
            continue
        seen.add(r)
        word = r.decode("ascii")
        if len(r) < MIN_TOKEN_CHARS or word in STOPWORDS:
            dropped.append(word)
        else:
            typed.append(word)
    return typed, dropped


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """A query's distinct indexable terms in first-seen order, and the words it dropped (``query_words``)."""
    return query_words(runs_bytes(query))


def term_pattern(terms) -> re.Pattern[str]:
    """A compiled pattern matching any of ``terms`` as a whole token of lowercased text.

    The boundary is the tokenizer's: not preceded or followed by ``[a-z0-9]``. Longer terms are tried
    first so that alternation never stops at a prefix.
    """
    alts = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda t: (-len(t), t)))
    return re.compile(r"(?<!%s)(?:%s)(?!%s)" % (TOKEN_CLASS, alts, TOKEN_CLASS))


_APOSTROPHES = frozenset("'\u2019\u2018\u02bc`")  # a letter right after one is a clitic: today's, can't


def short_pairs(text: str) -> list[tuple[str, str]]:
    """The (left, right) word pairs that carry ``text``'s one-character words, distinct, in order: each such
    word (not a stopword) with the indexable word before it and the one after it (module docstring: not
    after an apostrophe, not beside another one-character word, "i" only with the word before)."""
    low = text.lower()
    runs = [(m.group(), m.start()) for m in _RUN_RE.finditer(low)]
    out: list[tuple[str, str]] = []
    for i, (r, at) in enumerate(runs):
        if len(r) != 1 or r in STOPWORDS or (at and low[at - 1] in _APOSTROPHES):
            continue
        before = runs[i - 1][0] if i else ""
        after = runs[i + 1][0] if i + 1 < len(runs) else ""
        if len(before) == 1 or len(after) == 1:
            continue
        if len(before) >= MIN_TOKEN_CHARS and before not in STOPWORDS and (before, r) not in out:
            out.append((before, r))
        if r != "i" and len(after) >= MIN_TOKEN_CHARS and after not in STOPWORDS and (r, after) not in out:
            out.append((r, after))
    return out


def short_rows(texts: list[str]) -> list[int]:
    """The positions of the texts that may hold a pair (a one-character run other than "a"), found by numpy
    over the joined batch (a query file of 20,000 lines is not read a query at a time for this)."""
    if not texts:
        return []
    low = "\0".join(texts).lower().encode("ascii", "replace")
    if low.count(0) != len(texts) - 1:  # a text holds a NUL itself (a separator like any other)
        low = "\0".join(t.replace("\0", " ") for t in texts).lower().encode("ascii", "replace")
    buf = np.frombuffer(low, dtype=np.uint8)
    tok = np.concatenate(([False], IS_TOKEN_BYTE[buf], [False]))
    lone = tok[1:-1] & ~tok[:-2] & ~tok[2:] & (buf != ord("a"))
    if not lone.any():
        return []
    ends = np.flatnonzero(buf == 0)
    return np.unique(np.searchsorted(ends, np.flatnonzero(lone))).tolist()
