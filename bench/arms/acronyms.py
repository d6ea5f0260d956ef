"""The derived acronym arm: keyword self-retrieval queries with each vocabulary expansion phrase
rewritten to its acronym (whole words, any case); only the rows that change are kept. It is the only
set that can see acronym expansion at all: a keyword list that uses an acronym almost always spells
the phrase out beside it, and expansion never re-adds a typed word."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from bench.arms import Arm
from bench.arms.keywords import jsonl


def vocabulary(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The packaged acronym list (what a default install expands), plus ``extra``."""
    from chitragupta.engine.search.expand import packaged_vocabulary

    vocab = packaged_vocabulary()
    vocab.update(extra or {})
    return vocab


def rewrite(query: str, vocab: dict[str, str]) -> str:
    out = query
    for acr, phrase in sorted(vocab.items(), key=lambda kv: -len(kv[1])):
        out = re.sub(r"(?<![A-Za-z0-9])" + re.escape(phrase) + r"(?![A-Za-z0-9])", acr.upper(), out, flags=re.I)
    return out


def derived(base: str, data: Path, extra: dict[str, str] | None = None) -> Arm:
    src = jsonl(base, data)
    vocab = vocabulary(extra)
    queries = {}
    for q, text in src.queries.items():
        new = rewrite(text, vocab)
        if new != text:
            queries[q] = new
    return Arm(name=f"acronyms-{base}", queries=queries, qrels={q: src.qrels[q] for q in queries}, build=src.build,
               note=f"{base} keyword queries with expansion phrases rewritten to acronyms: {len(queries)} rows change")


ARMS = {f"acronyms-{b}": partial(derived, b) for b in ("www", "semeval2010", "inspec")}
