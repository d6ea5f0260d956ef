"""The demo's batch figures (``chitragupta demo``) come from chitragupta.engine.evaluation.measure without the eval
extra: ``first_relevant`` and ``mean_reciprocal_rank``, pinned here by hand and against ir-measures."""

from __future__ import annotations

import random

import pytest
from chitragupta.engine.evaluation.measure import (
    evaluate,
    first_relevant,
    mean_reciprocal_rank,
)


def test_first_relevant_by_hand():
    run = {"q1": ["a", "b", "c"], "q2": ["x", "y"], "q3": [], "q5": ["a"]}
    qrels = {"q1": {"a": 0, "c": 1}, "q2": {"z": 2}, "q3": {"a": 1}, "q4": {"b": 0}, "q6": {"a": 1}}
    # q4 has no relevant judgment: not counted; q5 has no judgment: not counted; q6 has no run lines: 0
    assert first_relevant(run, qrels) == {"q1": 3, "q2": 0, "q3": 0, "q6": 0}
    assert first_relevant(run, qrels, depth=2) == {"q1": 0, "q2": 0, "q3": 0, "q6": 0}
    assert mean_reciprocal_rank({"q1": 3, "q2": 0, "q3": 1}) == pytest.approx((1 / 3 + 1) / 3)
    assert mean_reciprocal_rank({}) == 0.0


def test_mean_reciprocal_rank_is_ir_measures_rr():
    pytest.importorskip("ir_measures")
    rng = random.Random(29)
    docs = [f"d{i}" for i in range(40)]
    run, qrels = {}, {}
    for q in range(60):
        run[f"q{q}"] = rng.sample(docs, rng.randint(0, 15))
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, rng.randint(1, 6))}
    ranks = first_relevant(run, qrels, depth=10)
    want = evaluate(run, qrels, ["RR@10"]).means["RR@10"]
    assert mean_reciprocal_rank(ranks) == pytest.approx(want, abs=1e-12)
    assert any(r == 0 for r in ranks.values()) and any(r > 1 for r in ranks.values())  # the cases are there
