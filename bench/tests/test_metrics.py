"""The measuring instrument: metrics against a maintained evaluator, sweeps against standalone
searches, arms on a BEIR folder the test writes itself (no ../shared needed)."""

import math
import time

import pytest
from bench.metrics import compare, evaluate, per_query, sentence_edges

from helpers import random_docs, random_run, write_jsonl


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_equal_ir_measures(seed):
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import RR, R, nDCG

    qrels, run, scored = random_run(seed)
    ours = evaluate(run, qrels)
    theirs = ir_measures.calc_aggregate([R @ 1, R @ 3, R @ 5, R @ 10, R @ 100, RR @ 5, RR @ 10, nDCG @ 5, nDCG @ 10],
                                        qrels, scored)
    by_name = {str(k): v for k, v in theirs.items()}
    for ours_name, theirs_name in [("R@1", "R@1"), ("R@5", "R@5"), ("R@100", "R@100"), ("MRR@5", "RR@5"),
                                   ("MRR@10", "RR@10"), ("nDCG@5", "nDCG@5"), ("nDCG@10", "nDCG@10")]:
        assert math.isclose(ours[ours_name], by_name[theirs_name], rel_tol=1e-9, abs_tol=1e-12), ours_name
        # evaluate is the package's (ir-measures underneath); the bench's own formulas are checked too
        own = per_query(run, qrels, ours_name)
        assert math.isclose(sum(own.values()) / len(own), by_name[theirs_name], rel_tol=1e-9, abs_tol=1e-12), ours_name


def test_compare_counts():
    assert compare({"a": 0.5, "b": 0.2, "c": 0.1}, {"a": 0.6, "b": 0.2, "c": 0.0}) == (1, 1, 1)


def test_sentence_edges():
    text = "First sentence here. Second one follows. Third."
    start = text.index("Second")
    assert sentence_edges(text, start, text.index("Third")) == (False, False)
    assert sentence_edges(text, start + 3, len(text)) == (True, False)
    assert sentence_edges(text, 0, 10) == (False, True)


@pytest.fixture()
def beir(tmp_path, monkeypatch):
    """A tiny BEIR folder with queries and qrels, and bench's work folder in tmp."""
    data = tmp_path / "data"
    (data / "toy").mkdir(parents=True)
    docs = random_docs(31, 80)
    for d in docs[:20]:
        d["keywords"] = d["title"].split()[:2] or ["twin"]
    write_jsonl(data / "toy" / "corpus.jsonl", docs)
    queries = [{"_id": f"q{i}", "text": docs[i * 3]["text"][:40] or "twin model"} for i in range(15)]
    write_jsonl(data / "toy" / "queries.jsonl", queries)
    (data / "toy" / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\t{docs[i * 3]['_id']}\t{1 + i % 2}\n" for i in range(15)) + "q0\td0077\t0\n")
    import bench.data as bd

    monkeypatch.setattr(bd, "WORK", tmp_path / "work")
    import bench.runs as br

    monkeypatch.setattr(br, "WORK", tmp_path / "work")
    return data


@pytest.mark.slow
def test_qrels_arm_and_sweep_points_equal_standalone_searches(beir):
    from bench.arms.qrels import beir as beir_arm
    from bench.runs import run, sweep_runs
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.kernels.sweep import grid_of

    arm = beir_arm("toy", beir)
    assert len(arm.queries) == 15 and arm.qrels["q0"] == {"d0000": 1}  # grade 0 is not relevant
    grid = grid_of([0.9, 1.5], [0.4, 0.75, 1.0])
    runs = sweep_runs(arm, grid, 20)
    for p, swept in zip(grid, runs):
        cfg = load_config(overrides={"retrieval": {"k1": p.k1, "b": p.b}})
        r = Retriever.open(Workspace.open(arm.workspace(), cfg))
        assert run(arm, 20, retriever=r) == swept


def test_keyword_and_acronym_arms(beir):
    from bench.arms.acronyms import rewrite
    from bench.arms.keywords import jsonl

    arm = jsonl("toy", beir)
    assert len(arm.queries) == 20 and all(arm.qrels[q] == {q: 1} for q in arm.queries)
    assert rewrite("digital twin models and Digital Twin fidelity", {"dt": "digital twin"}) == "DT models and DT fidelity"
    assert rewrite("digitaltwin", {"dt": "digital twin"}) == "digitaltwin"


def test_sweep_cli_writes_table_csv_and_heatmap(beir, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import bench.arms as arms_mod
    from bench.arms.qrels import beir as beir_arm
    from bench.sweep import main

    monkeypatch.setattr(arms_mod, "get", lambda name, data=None: beir_arm("toy", beir))
    out = tmp_path / "sweeps"
    assert main(["--arm", "toy", "--k1", "0.5:1.5:0.5", "--b", "0,0.5,1", "--out", str(out)]) == 0
    md = (out / "toy-nDCG10.md").read_text()
    assert md.startswith("| k1 \\ b | 0 | 0.5 | 1 |") and md.count("\n") == 5
    assert (out / "toy-nDCG10.csv").read_text().count("\n") == 10
    assert (out / "toy-nDCG10.png").read_bytes()[:4] == b"\x89PNG"


def test_floor_variant_two_reproduces_the_engine(beir):
    from bench.arms.qrels import beir as beir_arm
    from bench.data import read_jsonl
    from bench.runs import run
    from bench.variants import build_floor_index, dropped_runs
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.text.tokenize import DROPPED_RUNS

    assert dropped_runs(2) == DROPPED_RUNS
    arm = beir_arm("toy", beir)
    idx = build_floor_index(list(read_jsonl(beir / "toy" / "corpus.jsonl")), 2)
    cfg = load_config(overrides={"retrieval": {"acronym_expansion": False}})
    r = Retriever.open(Workspace.open(arm.workspace(), cfg))
    assert idx.run(arm.queries, 20) == run(arm, 20, retriever=r)


# -- bench.timer: the paired timing (bench.scale, bench.cli_batch) -----------------------------------
@pytest.mark.slow
def test_paired_timing_alternates_the_engines_and_repeats_short_calls():
    """Ours and bm25s are timed in alternating rounds (a b, b a, ...), each call repeated within its
    round until the round lasts long enough, and the figures are per call."""
    from bench.timer import paired_time

    calls = []

    def a():
        calls.append("a")
        time.sleep(0.002)

    def b():
        calls.append("b")
        time.sleep(0.004)

    # the repeat count comes from one untimed call of each, whose sleep a loaded host stretches: a round of
    # 0.2 s still repeats a call unless that first call took over 0.07 s
    ta, tb = paired_time(a, b, repeats=3, min_round_s=0.2)
    reps = (len(calls) - 2) // 6  # one untimed call of each first, then 3 rounds of 2 engines
    assert reps >= 3 and calls[:2] == ["a", "b"]
    rounds = [calls[2 + i * reps:2 + (i + 1) * reps] for i in range(6)]
    assert [r[0] for r in rounds] == ["a", "b", "b", "a", "a", "b"] and all(len(set(r)) == 1 for r in rounds)
    assert len(ta) == len(tb) == 3
    # per call, not per round (a round is several calls): no fewer seconds than each call sleeps (lower bounds
    # only: a loaded machine makes calls slower, never faster)
    assert all(w >= 0.0019 for w, _c in ta) and all(w >= 0.0039 for w, _c in tb)
