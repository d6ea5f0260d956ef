"""A batch of queries tokenized, expanded and looked up once, against one index.

    plan = QueryPlan(["digital twin fidelity", "DT soil"], index, expander)
    plan.batch                 # QueryBatch: each query's distinct known term ids, what every scorer takes
    plan.terms[1]              # what query 1 scores: its typed terms, then what expansion added
    plan.notes("document")[1]  # dropped words, unknown terms, the expansion
    plan.pairs[0]              # its one-character words as pairs with a neighbour: [("type", "2"), ...]

A batch is cut into its ``[a-z0-9]`` runs once per query in Python; from those runs come the typed
terms, the dropped words, the acronym expansion and the vocabulary ids, so nothing is tokenized, expanded
or looked up twice and no JIT kernel is loaded.

A query's one-character words are scored as pairs with the word beside them (``pairs``: the rule is
``engine.text.tokenize.short_pairs``, the scoring ``engine.search.pairs``); only the queries that hold one
(``short_rows``: one numpy pass over the batch) are read for them.

Query syntax (``engine/search/constraints.py``: ``"a phrase"``, ``+word``, ``-word``) is read as ``syntax``
says (``constraints.SYNTAX_MODES``; True is "strict", False "plain": a sweep reads plain text): the queries
that may use it are found by one pattern (``syntax_rows``), each of those is read
once, what is planned is its scored text (its words and phrases, exclusions left out), and
``constraints[q]`` holds what it must and must not contain. A batch without syntax takes exactly the path
it took before (``constraints`` is None). "lenient": a query whose syntax is malformed is planned as plain
words, ``malformed[q]`` saying why (and its notes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from chitragupta.engine.search.constraints import Constraints, read_syntax, syntax_mode, syntax_rows
from chitragupta.notes import Note
from chitragupta.engine.text.tokenize import STOPWORDS, query_words, runs_bytes, short_pairs, short_rows
from chitragupta.errors import UsageError
from chitragupta.kernels.types import QueryBatch

__all__ = ["QueryPlan", "ParsedQuery"]


@dataclass(frozen=True)
class ParsedQuery:
    """One query as the plan read it."""

    typed: tuple[str, ...]  # distinct indexable words, in first-seen order
    dropped: tuple[str, ...]  # distinct words the tokenizer drops (stopwords, shorter than 2 characters)
    expansion: object  # chitragupta.engine.search.expand.Expansion, or None when expansion is off
    ids: tuple[int, ...]  # the vocabulary id of each typed term, then of each added one (-1: not indexed)

    @property
    def terms(self) -> list[str]:
        """What is scored: the typed terms, then the ones acronym expansion added."""
        return list(self.typed) + (list(self.expansion.added) if self.expansion is not None else [])

    @property
    def unknown(self) -> list[str]:
        """Typed terms the index does not hold."""
        return [t for t, i in zip(self.typed, self.ids) if i < 0]


def parse(query: str, vocab_ids, expander=None) -> ParsedQuery:
    """Cut ``query`` into its runs once and read everything off them; ``vocab_ids(words)`` gives the
    index's id of each word (-1 for none)."""
    runs = runs_bytes(query)
    typed, dropped = query_words(runs)
    expansion = expander.expand_runs(runs) if expander is not None else None
    added = list(expansion.added) if expansion is not None else []
    ids = tuple(vocab_ids(typed + added)) if typed else ()
    return ParsedQuery(tuple(typed), tuple(dropped), expansion, ids)


class QueryPlan:
    """``queries`` against ``index`` (a ``TermIndex``), with ``expander``'s acronyms (None: off); phrases and
    signed words read as ``syntax`` says (the module docstring: search reads them; a sweep and the
    tokenizer's helpers read plain text, as before); with ``pairs``, the scorer adds the one-character
    words' pairs and the notes say so."""

    def __init__(self, queries: Sequence[str], index, expander=None, *, syntax: bool | str = False,
                 pairs: bool = False):
        self.queries = list(queries)
        self.score_pairs = pairs  # whether the scorer adds ``pairs`` (``[retrieval].short_word_pairs``)
        # per query, its constraints (None: none); None for a batch that uses no syntax at all
        self.constraints: list[Constraints | None] | None = None
        self.scored = self.queries  # what is tokenized and scored: the queries less their syntax
        self.malformed: dict[int, str] = {}  # query -> why its syntax could not be read ("lenient")
        mode = syntax_mode(syntax)
        rows = syntax_rows(self.queries) if mode != "plain" else None
        if rows:
            read = {}
            for q in rows:
                try:
                    read[q] = read_syntax(self.queries[q])
                except UsageError as err:
                    if mode == "strict":
                        raise
                    self.malformed[q] = str(err)
            if any(c is not None for _s, c in read.values()):
                self.scored = list(self.queries)
                self.constraints = [None] * len(self.queries)
                for q, (scored, cons) in read.items():
                    self.scored[q], self.constraints[q] = scored, cons
        self.index = index
        self.expander = expander
        self._parsed: list[ParsedQuery] | None = None
        self._terms: list[list[str]] | None = None
        self._expansions: list | None = None
        self._pairs: list[list[tuple[str, str]]] | None = None
        self._notes: dict[str, list[list[Note]]] = {}
        parsed = self.parsed
        lengths = np.fromiter((len(p.ids) for p in parsed), dtype=np.int64, count=len(parsed))
        ids = np.fromiter((i for p in parsed for i in p.ids), dtype=np.int64, count=int(lengths.sum()))
        self.batch: QueryBatch = QueryBatch.from_ids(ids, lengths)

    def __len__(self) -> int:
        return len(self.queries)

    def _vocab_ids(self, words: list[str]) -> list[int]:
        index = self.index
        return index.vocab.find_many([index.index_term(w) for w in words])

    # -- per query, read once ------------------------------------------------------------------------
    @property
    def parsed(self) -> list[ParsedQuery]:
        if self._parsed is None:
            self._parsed = [parse(q, self._vocab_ids, self.expander) for q in self.scored]
        return self._parsed

    @property
    def terms(self) -> list[list[str]]:
        """Each query's scored terms: what it typed, then what expansion added (worked out once)."""
        if self._terms is None:
            self._terms = [p.terms for p in self.parsed]
        return self._terms

    @property
    def expansions(self) -> list | None:
        """Each query's ``Expansion``, or None when expansion is off."""
        if self.expander is None:
            return None
        if self._expansions is None:
            self._expansions = [p.expansion for p in self.parsed]
        return self._expansions

    def narrowed(self) -> list[int]:
        """The queries whose syntax narrows the units they may match (a constraint that is checked)."""
        cons = self.constraints or ()
        return [q for q, c in enumerate(cons) if c is not None and c.active]

    @property
    def pairs(self) -> list[list[tuple[str, str]]]:
        """Each query's one-character words as (left, right) pairs with a neighbour (worked out once)."""
        if self._pairs is None:
            self._pairs = [[] for _ in self.scored]
            for q in short_rows(self.scored):
                self._pairs[q] = short_pairs(self.scored[q])
        return self._pairs

    def unmatched(self) -> int:
        """How many queries hold no term the index knows (and so can have no hits)."""
        return int(np.count_nonzero(np.diff(self.batch.indptr) == 0))

    def notes(self, unit: str = "document") -> list[list[Note]]:
        """Each query's notes: words dropped, no indexable term, terms in no ``unit``, the expansion."""
        got = self._notes.get(unit)
        if got is not None:
            return got
        from chitragupta.engine.search.pairs import scores_pairs

        scored = self.score_pairs and unit == "document" and scores_pairs(self.index)
        out = []
        for query, text, p, pairs in zip(self.queries, self.scored, self.parsed, self.pairs):
            notes = []
            if pairs and scored:
                notes.append(Note("pairs", "one-character words scored with the word beside them: "
                                           + ", ".join(f'"{a} {b}"' for a, b in pairs)))
            dropped = [w for w in p.dropped if not (scored and any(w in pair for pair in pairs))]
            if dropped:
                notes.append(Note("dropped", "query words not indexed (stopwords or shorter than 2 characters): "
                                             + ", ".join(dropped) + _quote_hint(text, dropped)))
            if not p.typed:
                notes.append(Note("no-terms", f"no indexable term in {query!r}; no hits"))
            elif p.unknown:
                notes.append(Note("unknown-terms", f"in no indexed {unit}: " + ", ".join(p.unknown)))
            if p.expansion is not None and p.expansion.pairs:
                notes.append(Note("expansion", p.expansion.note()))
            if self.constraints is not None and self.constraints[len(out)] is not None:
                notes.extend(self.constraints[len(out)].notes())
            if len(out) in self.malformed:
                notes.append(Note("syntax", f"{self.malformed[len(out)]}; read as plain words"))
            out.append(notes)
        self._notes[unit] = out
        return out


def _quote_hint(text: str, dropped: list[str]) -> str:
    """What makes a dropped one-character word count: the phrase of it and the words beside it, quoted
    (a phrase matches every word in its place); "" when no one-character word other than "a" was dropped."""
    short = [w for w in dropped if len(w) == 1 and w != "a"]
    if not short:
        return ""
    runs = [r.decode("ascii") for r in runs_bytes(text)]
    at = [i for i, r in enumerate(runs) if r in short]
    # the first beside a word that is indexed ("a t test", not "e g")
    i = next((i for i in at if any(len(w) > 1 and w not in STOPWORDS for w in runs[max(0, i - 1):i + 2])), at[0])
    return f'; to require "{runs[i]}", quote it with the words beside it: "{" ".join(runs[max(0, i - 1):i + 2])}"'
