"""Query syntax for BM25: ``"an exact phrase"``, ``+required``, ``-excluded`` and ``-"an excluded phrase"``.

    scored, cons = read_syntax('"digital twin" +fidelity -aircraft')
    scored          # 'digital twin fidelity': what BM25 scores (phrases and required words are query words)
    cons.items      # Item("phrase", ...), Item("required", ...), Item("excluded", ...)

The syntax narrows the set of sources; it never changes a score. The hits of a constrained query are the
unconstrained BM25 ranking of its scored words restricted to the sources that satisfy every constraint:
the constraint is a boolean mask over the units handed to the scorer, so a disallowed unit never enters
the top-k (``kernels``: ``allowed``).

What each item means, over the tokenizer's runs (``engine.tokenize.runs_bytes``: the lowercased
``[a-z0-9]`` runs of the text, stop words and one-character runs included, each in its position):

- ``"w1 w2 ..."`` (or ``+"..."``): the phrase's runs occur contiguously, in order, in the unit's indexed
  text (a document: its title, or its body as the index read it; a passage: its paragraph). Stop words
  keep their positions and must match too, so ``"effect of the drug"`` does not match "effect of a drug".
- ``+word``: the word's indexed term is in the unit (its posting list). ``+covid-19`` (a word of several
  runs) is read as the phrase ``"covid 19"``.
- ``-word`` / ``-"a phrase"``: the unit must not hold it. Excluded words are not scored.

Phrases are checked on candidates only: the units that hold every indexed word of the phrase (the
intersection of their posting lists) -- never a scan of every text. A document index built with
positions (``[retrieval].positions``, the default) answers for them from its positions array: each
candidate's runs in order, as ids, scanned for the phrase's ids (``kernels/phrase.py``); an index
without positions, a stemmed one (whose ids are stems: the survivors are then confirmed on their text)
and the passage unit read the candidates' text through the same tokenizer. A phrase with no indexed
word (``"of the"``) cannot be checked so and is refused.

How a batch reads it (``SYNTAX_MODES``, ``syntax_mode``): "strict" (one query, as the API, the MCP
``search`` tool and ``chitragupta search "..."`` read it when ``[retrieval].query_syntax`` is on: a
malformed query is an error naming what is wrong), "lenient" (a batch asked to read it: a malformed query
is read as plain words, with a note, and the other queries are answered as they would be without it) or
"plain" (every query is plain words: what every IR toolkit does with a query file, and what
``search --queries`` does unless ``--syntax`` is given).

Only what is unambiguous is syntax: a double quote, or ``+`` / ``-`` at the start of a word directly
followed by a letter, a digit or a quote. A sign standing alone between words ("CD4 + T cells",
"CTLA - 4", as claims in held-out collections write them) is punctuation, as it always was; a sign alone
at the end of a query is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from chitragupta.notes import Note
from chitragupta.engine.text.tokenize import DROPPED_RUNS, runs_bytes
from chitragupta.errors import UsageError

__all__ = ["Item", "Constraints", "SYNTAX_MODES", "syntax_mode", "syntax_rows", "has_syntax", "read_syntax", "allowed_mask", "check_unit", "phrase_in"]

_DROPPED = frozenset(DROPPED_RUNS)
# Could any of these queries use the syntax? One pass over the joined batch; a batch with no match takes
# exactly the path it took before the syntax existed.
_SPACE = " \t\n\r\f\v"  # what separates words for the syntax (a sign counts only after one, or first)
_OPERAND = re.compile(r'[A-Za-z0-9"]')

KINDS = ("phrase", "required", "excluded")
SYNTAX_MODES = ("strict", "lenient", "plain")  # the module docstring


def syntax_mode(syntax: "bool | str") -> str:
    """A ``syntax`` argument as one of ``SYNTAX_MODES``: True is "strict", False is "plain"."""
    if syntax is True or syntax is False:
        return "strict" if syntax else "plain"
    if syntax not in SYNTAX_MODES:
        raise ValueError(f"syntax {syntax!r}; allowed: True, False, {', '.join(SYNTAX_MODES)}")
    return syntax


@dataclass(frozen=True)
class Item:
    """One constraint: ``kind`` is "phrase" or "required" (the unit must hold it) or "excluded" (must not)."""

    kind: str
    text: str                 # as typed, without its sign and quotes
    runs: tuple[bytes, ...]   # the tokenizer's runs of ``text``

    @property
    def indexed(self) -> tuple[str, ...]:
        """Its runs that the index holds terms for (not stop words, not one character)."""
        return tuple(r.decode("ascii") for r in self.runs if r not in _DROPPED)

    @property
    def positive(self) -> bool:
        return self.kind != "excluded"

    @property
    def checked(self) -> bool:
        """False for a single dropped word (``+the``): it cannot be checked and is ignored, with a note."""
        return bool(self.indexed)

    def shown(self) -> str:
        sign = "-" if self.kind == "excluded" else ("+" if self.kind == "required" else "")
        return f'{sign}"{self.text}"' if len(self.runs) > 1 or self.kind == "phrase" else f"{sign}{self.text}"


@dataclass(frozen=True)
class Constraints:
    """The constraints of one query, in the order typed."""

    items: tuple[Item, ...]

    @property
    def active(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.checked)

    def notes(self) -> list[Note]:
        out = []
        for item in self.items:
            if not item.checked:
                what = "required" if item.positive else "excluded"
                out.append(Note("constraint", f"{item.shown()}: not indexed (a stopword or shorter than 2 "
                                              f"characters), so it cannot be {what}; ignored"))
        return out


# a quote, or a sign after a separator (or first) before a word or a quote, or with nothing after it
_MAY_USE = re.compile(r'"|(?<![^ \t\n\r\f\v])[+-](?:[A-Za-z0-9"]|[ \t\n\r\f\v]*\Z)')


def syntax_rows(queries: Sequence[str]) -> list[int]:
    """The positions of the queries that may use the syntax (``read_syntax`` decides): a quote, or a sign
    after a separator followed by a word or a quote or standing last in its query."""
    return [q for q, query in enumerate(queries) if _MAY_USE.search(query)]


def has_syntax(queries: Sequence[str]) -> bool:
    """Whether any of ``queries`` may use the syntax."""
    return bool(syntax_rows(queries))


def read_syntax(query: str) -> tuple[str, Constraints | None]:
    """``query`` read: the text BM25 scores, and its constraints (None when it uses no syntax).
    UsageError for unbalanced quotes, an empty phrase, a phrase of stop words only, a sign alone at the
    end, or a query of exclusions only."""
    items: list[Item] = []
    scored: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in _SPACE:
            i += 1
            continue
        sign = None
        if c in "+-":
            nxt = query[i + 1] if i + 1 < n else ""
            if _OPERAND.match(nxt):
                sign, i = c, i + 1
                c = query[i]
            elif not query[i + 1:].strip(_SPACE):
                raise UsageError(f"{c!r} alone at the end of the query {query!r}: write {c}word or "
                                 f'{c}"a phrase" ({"required" if c == "+" else "excluded"})')
        if c == '"':
            j = query.find('"', i + 1)
            if j < 0:
                raise UsageError(f"unbalanced quotes in the query {query!r}: the phrase opened at character "
                                 f"{i + 1} is never closed")
            body = query[i + 1:j]
            i = j + 1
            runs = tuple(runs_bytes(body))
            if not runs:
                raise UsageError(f'empty phrase "{body}" in the query {query!r}: a phrase needs at least one word')
            item = Item("excluded" if sign == "-" else "phrase", body, runs)
            if not item.indexed:
                raise UsageError(f'the phrase "{body}" holds no indexed word (only stopwords or one-character '
                                 "words), so it cannot be looked up; add a word or drop the quotes")
            items.append(item)
            if item.positive:
                scored.append(body)
            continue
        j = i
        while j < n and query[j] not in _SPACE and query[j] != '"':
            j += 1
        word = query[i:j]
        i = j
        if sign is None:
            scored.append(word)
            continue
        runs = tuple(runs_bytes(word))
        items.append(Item("required" if sign == "+" else "excluded", word, runs))
        if sign == "+":
            scored.append(word)
    if not items:
        return query, None
    if not any(runs_bytes(s) for s in scored) and any(not it.positive for it in items):
        raise UsageError(f"the query {query!r} holds only exclusions (a word after \"-\" is left out): add a word "
                         f"or a phrase to search for, or write the word without the \"-\" to search for it")
    return " ".join(scored), Constraints(tuple(items))


# -- checking units ------------------------------------------------------------------------------------
def phrase_in(runs: tuple[bytes, ...], texts) -> bool:
    """Whether the runs occur contiguously in any of ``texts`` (strings), after the same tokenizer."""
    needle = b" " + b" ".join(runs) + b" "
    for text in texts:
        if text and needle in b" " + b" ".join(runs_bytes(text)) + b" ":
            return True
    return False


TermDocs = Callable[[str], np.ndarray]  # an indexed word -> the ascending unit ids holding its term
Texts = Callable[[int], Sequence[str]]  # a unit id -> its indexed texts (a document: title, body)
# (the phrase's runs, candidate unit ids) -> (the candidates holding it by the positions array, whether that
# is final); None: no positions array
Phrases = Callable[[tuple, np.ndarray], tuple]


def _holding(item: Item, term_docs: TermDocs) -> np.ndarray:
    """The units holding every indexed word of ``item`` (ascending ids): its candidates."""
    got = None
    for w in dict.fromkeys(item.indexed):
        docs = term_docs(w)
        got = docs if got is None else np.intersect1d(got, docs, assume_unique=True)
        if not got.size:
            break
    return got


def _holds(item: Item, candidates: np.ndarray, texts: Texts, phrases: Phrases | None = None) -> np.ndarray:
    """The candidates whose text holds ``item`` (a single run: all of them, its postings say so)."""
    if len(item.runs) == 1:
        return candidates
    if phrases is not None and candidates.size:
        candidates, final = phrases(item.runs, candidates)
        if final:
            return candidates
    keep = [d for d in candidates.tolist() if phrase_in(item.runs, texts(d))]
    return np.asarray(keep, dtype=np.int64)


def allowed_mask(cons: Constraints, n_units: int, term_docs: TermDocs, texts: Texts,
                 phrases: Phrases | None = None) -> np.ndarray:
    """(n_units,) bool: the units that satisfy every active constraint of ``cons``.

    Positive items are applied first (single words, then phrases, so a phrase's text is read only for
    units every other requirement already allows); an excluded phrase is checked only on units still
    allowed that hold all its words."""
    allowed = np.ones(n_units, dtype=bool)
    active = cons.active
    order = sorted((it for it in active if it.positive), key=lambda it: len(it.runs) > 1)
    order += sorted((it for it in active if not it.positive), key=lambda it: len(it.runs) > 1)
    for item in order:
        cand = _holding(item, term_docs)
        cand = cand[allowed[cand]]
        if item.positive:
            keep = np.zeros(n_units, dtype=bool)
            keep[_holds(item, cand, texts, phrases)] = True
            allowed &= keep
        else:
            allowed[_holds(item, cand, texts, phrases)] = False
        if not allowed.any():
            break
    return allowed


def check_unit(cons: Constraints, unit: int, term_docs: TermDocs, texts: Texts,
               phrases: Phrases | None = None) -> list[dict]:
    """For ``explain``: each constraint of ``cons`` against one unit: kind, the item as typed, whether
    the unit meets it and what was found ("phrase found", "required present", "excluded absent", or
    their failures; "ignored" for one that cannot be checked)."""
    out = []
    for item in cons.items:
        if not item.checked:
            out.append({"kind": item.kind, "item": item.shown(), "met": True, "found": "ignored (not indexed)"})
            continue
        cand = _holding(item, term_docs)
        cand = cand[cand == unit]
        held = bool(_holds(item, cand, texts, phrases).size)
        word = "phrase" if len(item.runs) > 1 else "word"
        if item.kind == "excluded":
            met, found = not held, f"excluded {word} " + ("present" if held else "absent")
        elif item.kind == "required" and len(item.runs) == 1:
            met, found = held, "required " + ("present" if held else "missing")
        else:
            met, found = held, "phrase " + ("found" if held else "not found")
        out.append({"kind": item.kind, "item": item.shown(), "met": met, "found": found})
    return out
