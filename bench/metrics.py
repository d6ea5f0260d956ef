"""Retrieval metrics over a run (qid -> ranked doc ids) and judgments (qid -> {doc: grade}).

``evaluate`` is the package's own evaluation (``chitragupta.engine.evaluation.measure.evaluate``: ir-measures on
exactly the run's order), the same code ``chitragupta eval`` and ``chitragupta sweep`` use. ``recall``,
``mrr``, ``ndcg`` and ``per_query`` are an independent implementation of Recall@k, MRR@k and nDCG@k as
trec_eval defines them (linear gains = the grade, log2(rank + 1) discount, the ideal ranking over every
judged relevant document), kept for per-query comparisons; tests check both against ir-measures called
directly on the same runs. Queries without a relevant judgment are not scored; a judged query with no
hits scores 0. Also: per-query better/worse/unchanged counts between two runs, the mean document frequency
of a query's terms, and what a snippet looks like (mid-sentence edges).
"""

from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

__all__ = ["recall", "mrr", "ndcg", "evaluate", "per_query", "compare", "STANDARD", "sentence_edges",
           "mean_query_term_df"]

STANDARD = ("R@1", "R@3", "R@5", "R@10", "R@100", "MRR@5", "MRR@10", "nDCG@5", "nDCG@10")


def recall(ranked: Sequence[str], rel: Mapping[str, int], k: int) -> float:
    return sum(1 for d in ranked[:k] if rel.get(d, 0) > 0) / sum(1 for g in rel.values() if g > 0)


def mrr(ranked: Sequence[str], rel: Mapping[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k], start=1):
        if rel.get(d, 0) > 0:
            return 1.0 / i
    return 0.0


def ndcg(ranked: Sequence[str], rel: Mapping[str, int], k: int) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 1) for i, d in enumerate(ranked[:k], start=1) if rel.get(d, 0) > 0)
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


METRICS = {"R": recall, "MRR": mrr, "nDCG": ndcg}


def per_query(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], measure: str) -> dict[str, float]:
    """qid -> value of ``measure`` (e.g. ``"nDCG@10"``) for every judged query."""
    name, k = measure.split("@")
    fn = METRICS[name]
    return {q: fn(run.get(q, []), rel, int(k)) for q, rel in qrels.items() if any(g > 0 for g in rel.values())}


def evaluate(run, qrels, measures: Sequence[str] = STANDARD) -> dict[str, float]:
    """Means over judged queries of measures written like ``"nDCG@10"``, ``"R@100"``, ``"MRR@5"``: the
    package's evaluation (ir-measures underneath), so the bench and ``chitragupta eval`` agree."""
    from chitragupta.engine.evaluation.measure import evaluate as package_evaluate

    return package_evaluate(run, qrels, list(measures)).means


def compare(base: Mapping[str, float], other: Mapping[str, float], eps: float = 1e-12) -> tuple[int, int, int]:
    """(better, worse, unchanged) queries of ``other`` against ``base`` on one per-query measure."""
    better = worse = same = 0
    for q, b in base.items():
        o = other.get(q, 0.0)
        if o > b + eps:
            better += 1
        elif o < b - eps:
            worse += 1
        else:
            same += 1
    return better, worse, same


def mean_query_term_df(index, term_lists: Sequence[Sequence[str]]) -> float:
    """Mean over queries of the mean document frequency of the query's indexed terms."""
    df = index.postings.df()
    vals = []
    for terms in term_lists:
        ids = [i for i in index.vocab.find_many([index.index_term(t) for t in terms]) if i >= 0]
        if ids:
            vals.append(sum(int(df[i]) for i in ids) / len(ids))
    return sum(vals) / len(vals) if vals else 0.0


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")


def sentence_edges(text: str, start: int, end: int) -> tuple[bool, bool]:
    """(begins mid-sentence, ends mid-sentence) for the window ``text[start:end]`` of ``text``: it
    begins cleanly at the text's start, after sentence-ending punctuation or at a paragraph break, and
    ends cleanly at the text's end or on sentence-ending punctuation."""
    before = text[:start].rstrip()
    begins_mid = bool(before) and not (_SENTENCE_END.search(before) or text[max(0, start - 2):start] == "\n\n")
    window = text[start:end].rstrip()
    rest = text[end:].strip()
    ends_mid = bool(rest) and not _SENTENCE_END.search(window)
    return begins_mid, ends_mid
