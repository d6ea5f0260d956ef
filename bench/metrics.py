"""Retrieval metrics over a run (qid -> ranked doc ids) and judgments (qid -> {doc: grade}).

nDCG uses linear gains (the grade) and a log2(rank + 1) discount, the ideal ranking taken over every
judged relevant document, as trec_eval's ndcg_cut does. Queries without a relevant judgment are not
scored; a judged query with no hits scores 0.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

__all__ = ["recall", "mrr", "ndcg", "evaluate", "per_query"]


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


def per_query(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], name: str, k: int) -> dict[str, float]:
    fn = METRICS[name]
    return {q: fn(run.get(q, []), rel, k) for q, rel in qrels.items() if any(g > 0 for g in rel.values())}


def evaluate(run, qrels, measures: Sequence[str]) -> dict[str, float]:
    """Means over judged queries of measures written like ``"nDCG@10"``, ``"R@100"``, ``"MRR@5"``."""
    out = {}
    for m in measures:
        name, k = m.split("@")
        vals = per_query(run, qrels, name, int(k))
        out[m] = sum(vals.values()) / len(vals) if vals else 0.0
    return out
