"""``chitragupta eval`` and ``chitragupta sweep`` on one's own data: qrels and run readers, ir-measures on
exactly the run's order, max-P collapse of passage runs, ranges, the grid against standalone searches,
the writer's files and the CLI end to end on a tiny workspace."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (
    ROOT,
    Feeder,
    make_workspace,
    one_error_line,
    random_docs,
    run_main,
    write_jsonl,
)

pytest.importorskip("ir_measures")

from chitragupta.engine.evaluation.measure import (  # noqa: E402
    GRADE_MAX,
    GRADE_MIN,
    collapse_by_source,
    evaluate,
    parse_measures,
    passage_hint,
    read_qrels,
    read_trec_run,
    source_of,
    split_measures,
)
from chitragupta.engine.evaluation.sweep import (  # noqa: E402
    check_grid_size,
    check_out_dir,
    parse_range,
    run_sweep,
    write_sweep,
)
from chitragupta.errors import CorpusError, UsageError  # noqa: E402


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- qrels --------------------------------------------------------------------------------------------

def test_beir_qrels_with_header_and_duplicates(tmp_path):
    q = read_qrels(write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n\nq2\td9\t2\n"
                                                 "q1\td1\t2\n"))
    assert q.format == "beir"
    assert q.judgments == {"q1": {"d1": 1, "d2": 0}, "q2": {"d9": 2}}  # the first grade of a repeated pair kept
    assert len(q.notes) == 1 and "judged more than once" in q.notes[0]


def test_trec_qrels_and_headerless_beir(tmp_path):
    q = read_qrels(write(tmp_path / "qrels.txt", "301 0 FBIS3-10082 1\n301  0\tFBIS3-10169 0\n302 1 LA010189 -1\n"))
    assert q.format == "trec"
    assert q.judgments == {"301": {"FBIS3-10082": 1, "FBIS3-10169": 0}, "302": {"LA010189": -1}}
    q = read_qrels(write(tmp_path / "bare.tsv", "\ufeffq1\td1\t1\nq2\td2\t3\n"))  # a BOM, no header
    assert q.format == "beir" and q.judgments == {"q1": {"d1": 1}, "q2": {"d2": 3}}


@pytest.mark.parametrize("text, line, expected", [
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1\t7\n", 3, "3 tab-separated fields"),
    ("query-id\tcorpus-id\tscore\nq1\td1\tyes\n", 2, "relevance 'yes' is not an integer"),
    ("q1 0 d1 1\nq1 d2 1\n", 2, "qid 0 docid relevance"),
    ("q1 0 d1 1.5\n", 1, "relevance '1.5' is not an integer"),
    ("just-one-field\n", 1, "got 1 field(s)"),
    ("a b c d e\n", 1, "got 5 field(s)"),
])
def test_bad_qrels_lines_name_file_line_and_what_was_expected(tmp_path, text, line, expected):
    path = write(tmp_path / "qrels", text)
    with pytest.raises(CorpusError) as err:
        read_qrels(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:{line}: ") and expected in msg and "\n" not in msg


def test_empty_missing_and_binary_qrels(tmp_path):
    for text in ("", "query-id\tcorpus-id\tscore\n", "\n\n"):
        with pytest.raises(CorpusError, match="no judgments"):
            read_qrels(write(tmp_path / "q", text))
    with pytest.raises(CorpusError, match="not found"):
        read_qrels(tmp_path / "absent.tsv")
    (tmp_path / "bin").write_bytes(b"q1\td1\t1\nq2\t\xff\xfe\t1\n")
    with pytest.raises(CorpusError, match=r"bin:2: not UTF-8"):
        read_qrels(tmp_path / "bin")


# -- runs ---------------------------------------------------------------------------------------------

def test_run_order_is_score_then_rank_then_file_and_duplicates_keep_the_best(tmp_path):
    run = read_trec_run(write(tmp_path / "run", (
        "q1 Q0 c 3 1.0 t\n"
        "q1 Q0 b 2 5.0 t\n"
        "q1 Q0 a 1 5.0 t\n"       # ties with b on score: rank 1 goes first
        "q2 Q0 x 1 2 t\n"
        "q1 Q0 c 9 0.5 t\n"       # c again, lower: dropped
        "q2 Q0 y 1 2 t\n")))      # ties with x on score and rank: file order
    assert run.ranked == {"q1": ["a", "b", "c"], "q2": ["x", "y"]}
    assert run.lines == 6 and len(run.notes) == 1 and "best-ranked kept" in run.notes[0]


@pytest.mark.parametrize("text, expected", [
    ("q1 Q0 a 1 1.0\n", "6 whitespace-separated fields"),
    ("q1 Q0 a one 1.0 t\n", "rank 'one' is not an integer"),
    ("q1 Q0 a 1 nan t\n", "score 'nan' is not a finite number"),
    ("q1 Q0 a 1 high t\n", "score 'high' is not a finite number"),
    ("", "no run lines"),
])
def test_bad_run_lines(tmp_path, text, expected):
    path = write(tmp_path / "run", "q0 Q0 z 1 3 t\n" + text if text else "")
    with pytest.raises(CorpusError) as err:
        read_trec_run(path)
    assert expected in str(err.value) and (f"{path}:2: " in str(err.value) or not text)


# -- measures -----------------------------------------------------------------------------------------

def test_measures_are_checked_up_front():
    assert split_measures("nDCG@10, R(rel=2,judged_only=False)@100,MRR@10") == [
        "nDCG@10", "R(rel=2,judged_only=False)@100", "MRR@10"]
    with pytest.raises(UsageError, match="empty name"):
        split_measures("nDCG@10,,R@100")
    with pytest.raises(UsageError, match="unknown measure 'nDCGG@10'"):
        parse_measures(["nDCGG@10"])
    with pytest.raises(UsageError, match="cannot compute 'alpha_nDCG@10'"):
        parse_measures(["alpha_nDCG@10"])


LOG3 = math.log2(3)


def test_metrics_by_hand_missing_queries_and_the_runs_own_order():
    qrels = {"q1": {"a": 1, "b": 2, "n": 0}, "q2": {"c": 1}, "q3": {"x": 0}}
    run = {"q1": ["z", "b", "a"], "q9": ["c"]}  # q2 judged but not run, q9 run but not judged
    ev = evaluate(run, qrels, ["nDCG@10", "R@100", "MRR@10", "P@2"])
    ndcg_q1 = (2 / LOG3 + 1 / 2) / (2 + 1 / LOG3)
    assert ev.queries == ["q1", "q2"] and ev.missing == ["q2"] and ev.unjudged == 1 and ev.no_relevant == 1
    assert ev.per_query["nDCG@10"] == pytest.approx({"q1": ndcg_q1, "q2": 0.0}, abs=1e-12)
    assert ev.means == pytest.approx({"nDCG@10": ndcg_q1 / 2, "R@100": 0.5, "MRR@10": 0.25, "P@2": 0.25},
                                     abs=1e-12)
    skip = evaluate(run, qrels, ["nDCG@10", "MRR@10"], skip_missing=True)
    assert skip.queries == ["q1"] and skip.means == pytest.approx({"nDCG@10": ndcg_q1, "MRR@10": 0.5}, abs=1e-12)
    # equal scores in a run file: the rank column decides, not trec_eval's docid-descending tie rule
    assert evaluate({"q2": ["c", "d"]}, {"q2": {"c": 1}}, ["MRR@10"]).means["MRR@10"] == 1.0
    assert evaluate({"q2": ["d", "c"]}, {"q2": {"c": 1}}, ["MRR@10"]).means["MRR@10"] == 0.5
    with pytest.raises(UsageError, match="nothing to evaluate"):
        evaluate({"q9": ["c"]}, qrels, ["nDCG@10"], skip_missing=True)


@pytest.mark.parametrize("seed", [3, 4])
def test_evaluate_equals_the_bench_metrics_own_implementation(seed):
    """The package's ir-measures path against bench/metrics.py's pure-Python trec_eval formulas."""
    from bench.metrics import per_query

    from helpers import random_run

    qrels, run, _ = random_run(seed)
    measures = ["R@1", "R@5", "R@100", "MRR@5", "MRR@10", "nDCG@5", "nDCG@10"]
    ev = evaluate(run, qrels, measures)
    for m in measures:
        mine = per_query(run, qrels, m)
        assert ev.per_query[m] == pytest.approx(mine, rel=1e-9, abs=1e-12), m
        assert ev.means[m] == pytest.approx(sum(mine.values()) / len(mine), rel=1e-9, abs=1e-12), m


def test_max_p_collapse_and_the_passage_hint():
    assert source_of("smith2020#12") == "smith2020" and source_of("a#b") == "a#b" and source_of("k") == "k"
    assert source_of("we#ird#3") == "we#ird"
    run = {"q1": ["k2#4", "k1#3", "k2#1", "k3#0", "k1#9"]}
    assert collapse_by_source(run) == {"q1": ["k2", "k1", "k3"]}
    qrels = {"q1": {"k1": 1}}
    assert passage_hint(run, qrels) is not None
    assert passage_hint(collapse_by_source(run), qrels) is None
    assert evaluate(collapse_by_source(run), qrels, ["MRR@10"]).means["MRR@10"] == 0.5
    assert evaluate(run, qrels, ["MRR@10"]).means["MRR@10"] == 0.0


# -- ranges and the output folder ---------------------------------------------------------------------

def test_ranges():
    assert parse_range("0.5:2:0.25", "k1") == [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert parse_range("0.3:0.9:0.1", "b", high=1) == [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert parse_range("0:1:0.35", "b", high=1) == [0.0, 0.35, 0.7]  # never past STOP
    assert parse_range("1, 0.5,1", "k1") == [0.5, 1.0]
    assert parse_range("1.2", "k1") == [1.2]
    for text, name, high, msg in [("0:1:0", "k1", None, "STEP must be > 0"), ("1:0:0.1", "k1", None, "STOP must be >="),
                                  ("a:1:0.1", "k1", None, "'a' is not a number"), ("1:2", "k1", None, "START:STOP:STEP"),
                                  ("0:1:1e-9", "k1", None, "more than the 10,000"), ("0:1.2:0.1", "b", 1.0, "b must be in [0, 1]"),
                                  ("-1", "k1", None, "k1 must be >= 0"), ("nan", "k1", None, "not a finite number"),
                                  ("1,,2", "k1", None, "'' is not a number"), ("inf", "k1", None, "not a finite number")]:
        with pytest.raises(UsageError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            parse_range(text, name, high=high)
    assert check_grid_size([1] * 100, [1] * 100) == 10_000
    with pytest.raises(UsageError, match="10,100 points"):
        check_grid_size([1] * 101, [1] * 100)


def test_out_inside_the_package_is_refused(tmp_path):
    import chitragupta

    pkg = Path(chitragupta.__file__).resolve().parent
    for out in (pkg, pkg / "engine" / "sweeps", pkg / "new"):
        with pytest.raises(UsageError, match="inside the installed package"):
            check_out_dir(out)
    link = tmp_path / "link"
    link.symlink_to(pkg)
    with pytest.raises(UsageError, match="inside the installed package"):
        check_out_dir(link / "x")
    with pytest.raises(UsageError, match="not a directory"):
        check_out_dir(write(tmp_path / "file", "x"))
    assert check_out_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (pkg / "new").exists()


# -- the sweep on a workspace -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A tiny indexed workspace with queries and graded BEIR qrels (one query judged but not asked, one
    asked but not judged)."""
    from chitragupta.engine.search.bm25 import Retriever

    tmp = tmp_path_factory.mktemp("evalws")
    docs = random_docs(31, 80)
    ws = make_workspace(tmp, docs)
    Retriever.open(ws)  # builds the index
    queries = [{"_id": f"q{i}", "text": docs[i * 3]["text"][:40] or "twin model"} for i in range(15)]
    write_jsonl(tmp / "queries.jsonl", queries)
    lines = [f"q{i}\t{docs[i * 3]['_id']}\t{1 + i % 2}\n" for i in range(14)]
    lines += [f"q{i}\t{docs[i * 5 + 1]['_id']}\t1\n" for i in range(0, 14, 3)]
    lines += ["q0\td0077\t0\n", "q99\td0001\t1\n"]
    write(tmp / "qrels.tsv", "query-id\tcorpus-id\tscore\n" + "".join(lines))
    return {"ws": ws, "tmp": tmp, "queries": {q["_id"]: q["text"] for q in queries},
            "qrels": read_qrels(tmp / "qrels.tsv").judgments}


def _standalone(toy, k1, b, k, measure="nDCG@10"):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever

    cfg = load_config(overrides={"retrieval": {"k1": k1, "b": b}})
    r = Retriever.open(Workspace.open(toy["ws"], cfg))
    qids = [q for q in toy["queries"] if q in toy["qrels"]]
    keys = r.rank_many([toy["queries"][q] for q in qids], k).keys()
    return evaluate(dict(zip(qids, keys)), toy["qrels"], [measure]).means[measure]


def test_sweep_points_equal_standalone_searches(toy):
    from chitragupta.engine.search.bm25 import Retriever

    r = Retriever.open(toy["ws"])
    res = run_sweep(r, toy["queries"], toy["qrels"], [0.9, 1.5, 2.0], [0.4, 0.75, 1.0], "nDCG@10", k=20)
    assert [(p.k1, p.b) for p in res.points] == [(a, b) for a in (0.9, 1.5, 2.0) for b in (0.4, 0.75, 1.0)]
    assert len({p.value for p in res.points}) > 2  # the parameters matter on this corpus
    for p in res.points:
        assert p.value == _standalone(toy, p.k1, p.b, 20), (p.k1, p.b)
    assert res.current == res.points[4] and (res.current.k1, res.current.b) == (1.5, 0.75)
    assert res.n_queries == 14 and any("1 of 15 queries" in n for n in res.notes)
    assert any("1 judged queries are not among the queries" in n for n in res.notes)
    assert res.best.value == max(p.value for p in res.points)
    # the configured point off the grid is scored in the same pass
    off = run_sweep(r, toy["queries"], toy["qrels"], [0.6], [0.3], "R@5", k=20)
    assert off.current.value == _standalone(toy, 1.5, 0.75, 20, "R@5")
    assert off.points[0].value == _standalone(toy, 0.6, 0.3, 20, "R@5")


def test_write_sweep_files_and_no_matplotlib(toy, tmp_path, monkeypatch):
    from chitragupta.engine.search.bm25 import Retriever

    res = run_sweep(Retriever.open(toy["ws"]), toy["queries"], toy["qrels"], [0.5, 1.0], [0.0, 0.5, 1.0], k=10)
    paths, notes = write_sweep(res, tmp_path / "out" / "deep", "sweep-nDCG10")
    assert [p.name for p in paths] == ["sweep-nDCG10.md", "sweep-nDCG10.csv", "sweep-nDCG10.png"] and notes == []
    md = paths[0].read_text().splitlines()
    assert md[0] == "| k1 \\ b | 0 | 0.5 | 1 |" and len(md) == 4
    assert md[2] == "| 0.5 | " + " | ".join(f"{p.value:.4f}" for p in res.points[:3]) + " |"
    rows = paths[1].read_text().splitlines()
    assert rows[0] == "k1,b,weight_title,weight_abstract,nDCG@10" and len(rows) == 7
    assert float(rows[1].split(",")[-1]) == res.points[0].value
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    paths, notes = write_sweep(res, tmp_path / "nompl", "s")
    assert [p.name for p in paths] == ["s.md", "s.csv"] and not (tmp_path / "nompl" / "s.png").exists()
    assert len(notes) == 1 and "'eval' extra" in notes[0] and "pip install" in notes[0]
    with pytest.raises(UsageError, match="inside the installed package"):
        import chitragupta

        write_sweep(res, Path(chitragupta.__file__).parent / "sweeps", "s")


# -- the CLI ------------------------------------------------------------------------------------------

def test_cli_search_then_eval(toy, tmp_path):
    t = toy["tmp"]
    run = tmp_path / "run.trec"
    p = run_main("search", "-w", toy["ws"], "--queries", t / "queries.jsonl", "--run", run, "-k", "20")
    assert p.returncode == 0, p.stderr
    p = run_main("eval", "--qrels", t / "qrels.tsv", run)
    assert p.returncode == 0, p.stderr
    table = dict(line.split() for line in p.stdout.splitlines())
    assert list(table) == ["nDCG@10", "R@100", "MRR@10"]
    ev = evaluate(read_trec_run(run).ranked, toy["qrels"], ["nDCG@10", "R@100", "MRR@10"])
    assert float(table["nDCG@10"]) == round(ev.means["nDCG@10"], 4)
    assert float(table["nDCG@10"]) == round(_standalone(toy, 1.5, 0.75, 20), 4)
    assert "15 judged queries evaluated (1 of them have no run lines and score 0)" in p.stderr
    assert "1 run queries have no judgment" in p.stderr
    p = run_main("eval", "--qrels", t / "qrels.tsv", run, "--json", "--per-query", "--metrics", "nDCG@10,P@5",
                 "--skip-missing")
    obj = json.loads(p.stdout)
    assert obj["queries"] == 14 and obj["missing"] == 1 and obj["qrels_format"] == "beir"
    assert set(obj["per_query"]["P@5"]) == {f"q{i}" for i in range(14)}
    assert obj["measures"]["nDCG@10"] == pytest.approx(sum(obj["per_query"]["nDCG@10"].values()) / 14)
    # the same judgments as TREC qrels give the same figures
    trec = write(tmp_path / "qrels.trec", "".join(f"{q} 0 {d} {g}\n" for q, rel in toy["qrels"].items()
                                                  for d, g in rel.items()))
    p2 = run_main("eval", "--qrels", trec, run, "--json", "--per-query", "--metrics", "nDCG@10,P@5", "--skip-missing")
    assert json.loads(p2.stdout)["measures"] == obj["measures"]


def test_cli_eval_passage_run_by_source(toy, tmp_path):
    run = write(tmp_path / "p.trec", "q1 Q0 d0001#4 1 9 x\nq1 Q0 d0003#2 2 8 x\nq1 Q0 d0003#7 3 7 x\n"
                                     "q2 Q0 d0006#0 1 3 x\n")
    qrels = write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td0003\t1\nq2\td0006\t1\n")
    # ids no judgment names, whose citekeys are judged: scored by source, never a confident 0
    p = run_main("eval", "--qrels", qrels, run, "--metrics", "MRR@10")
    assert p.returncode == 0 and p.stdout.split() == ["MRR@10", "0.7500"] and "scored by source" in p.stderr
    p = run_main("eval", "--qrels", qrels, run, "--metrics", "MRR@10", "--by-source")
    assert p.returncode == 0 and p.stdout.split() == ["MRR@10", "0.7500"] and "max-P" in p.stderr


def test_cli_eval_errors_are_one_line(toy, tmp_path, monkeypatch):
    run = write(tmp_path / "r.trec", "q1 Q0 d0003 1 9 x\n")
    bad = write(tmp_path / "bad.tsv", "query-id\tcorpus-id\tscore\nq1\td0003\n")
    for args, msg in [(("--qrels", bad, run), f"{bad}:2: expected BEIR qrels"),
                      (("--qrels", toy["tmp"] / "qrels.tsv", write(tmp_path / "x", "q1 d 1\n")), "6 whitespace-separated"),
                      (("--qrels", toy["tmp"] / "qrels.tsv", run, "--metrics", "nDCG@ten"), "unknown measure"),
                      (("--qrels", tmp_path / "none.tsv", run), "qrels file not found")]:
        p = run_main("eval", *args)
        assert p.returncode == 1 and p.stdout == "", p.stderr
        assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1 and msg in p.stderr, p.stderr
    monkeypatch.setitem(sys.modules, "ir_measures", None)
    p = run_main("eval", "--qrels", toy["tmp"] / "qrels.tsv", run)
    assert p.returncode == 1 and "ir_measures is not installed for evaluation; install the 'eval' extra" in p.stderr


def test_cli_sweep(toy, tmp_path):
    import chitragupta

    t = toy["tmp"]
    base = ("sweep", "-w", toy["ws"], "--queries", t / "queries.jsonl", "--qrels", t / "qrels.tsv")
    out = tmp_path / "sweeps"
    p = run_main(*base, "--k1", "0.5:2:0.5", "--b", "0.25,0.75,1", "-k", "20", "--out", out)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("sweep: 12 grid points x 14 queries (k=20)")
    assert lines[2].startswith(f"current nDCG@10 {_standalone(toy, 1.5, 0.75, 20):.4f} at k1=1.5 b=0.75")
    best = lines[1].split()
    k1, b = float(best[4].split("=")[1]), float(best[5].split("=")[1])
    assert best[2] == f"{_standalone(toy, k1, b, 20):.4f}"
    assert sorted(x.name for x in out.iterdir()) == ["sweep-nDCG10.csv", "sweep-nDCG10.md", "sweep-nDCG10.png"]
    pkg = Path(chitragupta.__file__).resolve().parent
    for extra, msg in [(("--k1", "1", "--b", "0.5", "--out", pkg / "sweeps"), "inside the installed package"),
                       (("--k1", "0:3:0", "--b", "0.5", "--out", out), "--k1 '0:3:0': STEP must be > 0"),
                       (("--k1", "1", "--b", "0:2:0.5", "--out", out), "b must be in [0, 1], got 2"),
                       (("--k1", "0:100:0.01", "--b", "0:1:0.01", "--out", out), "more than the 10,000"),
                       (("--k1", "1", "--b", "0.5", "--metric", "nope", "--out", out), "unknown measure 'nope'")]:
        p = run_main(*base, *extra)
        assert p.returncode == 1 and p.stderr.startswith("error: ") and msg in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1
    assert not (pkg / "sweeps").exists()


# -- eval and sweep on hostile files and values: one line, no crash of pytrec_eval, no unbounded read --------
@pytest.mark.parametrize("grade", ["99999999999999999999999", str(GRADE_MAX + 1), str(GRADE_MIN - 1),
                                   "9" * 5000, str(2**31 - 1)])  # the last: 16 GB inside trec_eval
def test_a_grade_pytrec_eval_cannot_take_is_refused_with_its_line(tmp_path, grade):
    q = write(tmp_path / "qrels.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{grade}\n")
    with pytest.raises(CorpusError) as ei:
        read_qrels(q)
    msg = str(ei.value)
    assert msg.startswith(f"{q}:3: relevance ") and "outside" in msg and len(msg) < 300, msg
    run = write(tmp_path / "run", "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n")
    one_error_line(run_main("eval", "--qrels", q, run), f"{q}:3: relevance", "outside")


def test_grades_at_the_bounds_are_evaluated(tmp_path):
    q = read_qrels(write(tmp_path / "qrels", f"q1 0 d1 {GRADE_MAX}\nq1 0 d2 {GRADE_MIN}\n"))
    ev = evaluate({"q1": ["d2", "d1"]}, q.judgments, ["MRR@10", "R@100"])
    assert ev.means == {"MRR@10": 0.5, "R@100": 1.0}


@pytest.mark.parametrize("qrels, run, needle", [
    ({"q": {"d": 2**64}}, {"q": ["d"]}, "an integer of 65 bits"),
    ({"q": {"d": "1"}}, {"q": ["d"]}, "is a str"),
    ({"q": {"d": 1.5}}, {"q": ["d"]}, "is a float"),
])
def test_evaluate_refuses_grades_a_library_caller_passes(qrels, run, needle):
    with pytest.raises(UsageError, match=needle):
        evaluate(run, qrels, ["nDCG@10"])


def test_ids_pytrec_eval_would_crash_on_are_refused():
    """A NUL or a lone surrogate in an id crashed pytrec_eval (a segfault): checked in a subprocess, so a
    regression fails this test instead of ending the run."""
    script = r"""
from chitragupta.engine.evaluation.measure import evaluate
from chitragupta.errors import UsageError
for qrels, run in [({"q": {"\udcff": 1}}, {"q": ["\udcff"]}), ({"q": {"d": 1}}, {"q": ["d\x00x", "d\x00y"]}),
                   ({"q\x00a": {"d": 1}}, {"q\x00a": ["d"]}), ({"q": {"d\x00x": 1, "d\x00y": 1}}, {"q": ["d"]})]:
    try:
        evaluate(run, qrels, ["nDCG@10", "R@100"])
        print("accepted")
    except UsageError as err:
        print("refused", err)
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, (p.returncode, p.stderr)
    lines = p.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("refused ") for line in lines), p.stdout
    assert "lone surrogate" in lines[0] and all("NUL character" in line for line in lines[1:])


def test_nul_in_a_qrels_or_run_id_names_its_line(tmp_path):
    q = tmp_path / "qrels"
    q.write_bytes(b"q1 0 d1 1\nq1 0 d\x00x 1\n")
    with pytest.raises(CorpusError, match=r"qrels:2: the doc id .* holds a NUL character"):
        read_qrels(q)
    r = tmp_path / "run"
    r.write_bytes(b"q1 Q0 d1 1 2 t\nq\x001 Q0 d1 1 2 t\n")
    with pytest.raises(CorpusError, match=r"run:2: the query id .* holds a NUL character"):
        read_trec_run(r)


@pytest.mark.parametrize("what, needle", [("folder", "is a folder"), ("device", "is a character device")])
def test_qrels_and_run_refused_by_what_they_are(tmp_path, what, needle):
    bad = tmp_path if what == "folder" else Path("/dev/null")  # /dev/null read whole: "no judgments"
    good_q = write(tmp_path / "qrels", "q1 0 d1 1\n")
    good_r = write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    with pytest.raises(CorpusError, match=f"{needle}, not a qrels file"):
        read_qrels(bad)
    with pytest.raises(CorpusError, match=f"{needle}, not a run file"):
        read_trec_run(bad)
    one_error_line(run_main("eval", "--qrels", bad, good_r), f"{needle}, not a qrels file")
    one_error_line(run_main("eval", "--qrels", good_q, bad), f"{needle}, not a run file")


def test_a_qrels_pipe_is_read_once(tmp_path):
    fifo = tmp_path / "qrels.fifo"
    run = write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    with Feeder(fifo, b"q1 0 d1 1\n"):
        p = run_main("eval", "--qrels", fifo, run, "--metrics", "MRR@10")
    assert p.returncode == 0 and p.stdout.split() == ["MRR@10", "1.0000"], p.stderr


def test_a_line_without_end_stops_the_read(tmp_path):
    from chitragupta.engine.evaluation.measure import MAX_LINE_BYTES

    q = tmp_path / "qrels"
    with open(q, "wb") as f:
        f.write(b"q1 0 d1 1\n")
        f.write(b"x" * (MAX_LINE_BYTES + 10))
    with pytest.raises(CorpusError) as ei:
        read_qrels(q)
    assert str(ei.value).startswith(f"{q}:2: a line longer than 1 MiB") and len(str(ei.value)) < 200


def test_a_5000_digit_rank_is_a_short_line(tmp_path):
    r = write(tmp_path / "run", "q1 Q0 d1 " + "9" * 5000 + " 2 t\n")
    with pytest.raises(CorpusError) as ei:
        read_trec_run(r)
    assert "rank '9999" in str(ei.value) and len(str(ei.value)) < 300


@pytest.mark.slow  # a subprocess
def test_dev_zero_everywhere_is_one_line_and_a_bounded_read(tmp_path):
    """``eval --qrels /dev/zero``, ``eval /dev/zero``, ``eval -`` fed from /dev/zero, ``--config
    /dev/zero`` and a store manifest linked to /dev/zero: each one line, read (at most) a line's worth."""
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "manifest.json").symlink_to("/dev/zero")
    run = write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    qrels = write(tmp_path / "qrels", "q1 0 d1 1\n")
    script = f"""
import contextlib, io, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from chitragupta.cli.main import main
from chitragupta.engine.library.config import load_config
from chitragupta.enrich.store import load_store
from chitragupta.errors import ChitraguptaError

def cli(*argv, stdin=None):
    err = io.StringIO()
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(open(stdin, "rb"))
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(list(argv))
    print("cli", rc, err.getvalue().count(chr(10)), err.getvalue().strip())

def lib(call):
    try:
        call()
        print("lib accepted")
    except ChitraguptaError as err:
        print("lib", type(err).__name__, err)

cli("eval", "--qrels", "/dev/zero", {str(run)!r})
cli("eval", "--qrels", {str(qrels)!r}, "/dev/zero")
cli("eval", "--qrels", {str(qrels)!r}, "-", stdin="/dev/zero")
cli("search", "-w", {str(tmp_path)!r}, "--config", "/dev/zero", "twin")
lib(lambda: load_store(Path({str(folder)!r})))
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    lines = p.stdout.splitlines()
    assert len(lines) == 5, p.stdout
    assert lines[0] == "cli 1 1 error: /dev/zero: is a character device, not a qrels file"
    assert lines[1] == "cli 1 1 error: /dev/zero: is a character device, not a run file"
    assert lines[2] == "cli 1 1 error: -:1: a line longer than 1 MiB (not a run file?); stopped reading there"
    assert lines[3] == "cli 1 1 error: /dev/zero: is a character device, not a config file (a TOML file)"
    assert lines[4].startswith("lib StoreCorrupt manifest.json cannot be the store's manifest") \
        and "symbolic link" in lines[4], lines[4]


@pytest.fixture(scope="module")
def sweep_ws(tmp_path_factory):
    from chitragupta.engine.search.bm25 import Retriever

    tmp = tmp_path_factory.mktemp("hostile_sweep")
    docs = random_docs(7, 50)
    ws = make_workspace(tmp, docs)
    Retriever.open(ws)
    queries = [{"_id": f"q{i}", "text": docs[i * 3]["text"][:40] or "twin model"} for i in range(8)]
    write_jsonl(tmp / "queries.jsonl", queries)
    write(tmp / "qrels.tsv", "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{docs[i * 3]['_id']}\t1\n"
                                                                       for i in range(8)))
    write(tmp / "other.tsv", "query-id\tcorpus-id\tscore\nx1\td0001\t1\nx2\td0002\t2\n")
    return {"ws": ws, "tmp": tmp, "queries": {q["_id"]: q["text"] for q in queries},
            "qrels": read_qrels(tmp / "qrels.tsv").judgments}


@pytest.mark.parametrize("text, name, high, needle", [
    ("1e308", "k1", None, "k1 must be in [0, 1000], got 1e+308"),
    ("0:1e308:1e-308", "k1", None, "k1 must be in [0, 1000], got 1e+308"),
    ("0:1000:1e-308", "k1", None, "more than the 10,000"),
    ("0:1:5e-324", "b", 1.0, "more than the 10,000"),
    ("1001", "weight-title", None, "weight-title must be in [0, 1000], got 1001"),
    (",".join(str(i / 100) for i in range(10_001)), "k1", None, "10,001 values, more than the 10,000"),
])
def test_ranges_keep_to_the_configs_bounds_and_a_countable_grid(text, name, high, needle):
    kwargs = {"high": high} if high is not None else {}
    with pytest.raises(UsageError) as ei:
        parse_range(text, name, **kwargs)
    assert needle in str(ei.value), str(ei.value)


def test_a_step_finer_than_the_kept_decimals_repeats_no_value():
    values = parse_range("0:1e-9:1e-12", "k1")
    assert values == sorted(set(values)) and len(values) == 11


def test_run_sweep_holds_library_grids_to_the_configs_bounds(sweep_ws):
    from chitragupta.engine.search.bm25 import Retriever

    r = Retriever.open(sweep_ws["ws"])
    for kwargs, needle in [({"k1s": [1e308]}, "k1 = 1e+308 cannot be swept; allowed: a number in [0, 1000]"),
                           ({"bs": [1.5]}, "b = 1.5 cannot be swept"),
                           ({"k1s": [float("nan")]}, "k1 = nan cannot be swept"),
                           ({"k1s": [10**400]}, "k1 = 1000000"),
                           ({"titles": [1e308]}, "weight_title = 1e+308 cannot be swept"),
                           ({"abstracts": [-1]}, "weight_abstract = -1 cannot be swept")]:
        args = {"k1s": [1.0], "bs": [0.5], **kwargs}
        with pytest.raises(UsageError) as ei:
            run_sweep(r, sweep_ws["queries"], sweep_ws["qrels"], args.pop("k1s"), args.pop("bs"), k=10, **args)
        assert needle in str(ei.value) and len(str(ei.value)) < 300, str(ei.value)


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "10"])
def test_run_sweep_checks_k_as_search_does(sweep_ws, k):
    from chitragupta.engine.search.bm25 import Retriever

    with pytest.raises(UsageError, match=r"k must be an integer >= 1"):
        run_sweep(Retriever.open(sweep_ws["ws"]), sweep_ws["queries"], sweep_ws["qrels"], [1.0], [0.5], k=k)


@pytest.mark.parametrize("flag", ["-k", "--k"])  # -k as every command spells it; --k, the older form
def test_sweep_cli_k_message_is_check_ks(sweep_ws, tmp_path, flag):
    t = sweep_ws["tmp"]
    one_error_line(run_main("sweep", "-w", sweep_ws["ws"], "--queries", t / "queries.jsonl", "--qrels", t / "qrels.tsv",
                       "--k1", "1", "--b", "0.5", flag, "0", "--out", tmp_path / "o"),
              "-k must be an integer >= 1, got 0")


def test_sweep_out_on_a_symlink_loop_is_one_line(sweep_ws, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="symbolic link loop"):
        check_out_dir(loop)
    with pytest.raises(UsageError, match="symbolic link loop"):
        check_out_dir(loop / "sub")
    t = sweep_ws["tmp"]
    one_error_line(run_main("sweep", "-w", sweep_ws["ws"], "--queries", t / "queries.jsonl", "--qrels", t / "qrels.tsv",
                       "--k1", "1", "--b", "0.5", "--out", loop), f"--out {loop}: a symbolic link loop")
    assert loop.is_symlink()


def test_sweep_with_no_judged_query_is_an_error_and_keeps_the_old_output(sweep_ws, tmp_path):
    from chitragupta.engine.search.bm25 import Retriever

    t = sweep_ws["tmp"]
    out = tmp_path / "out"
    base = ("sweep", "-w", sweep_ws["ws"], "--queries", t / "queries.jsonl", "--k1", "1,2", "--b", "0.5,0.75",
            "--k", "10", "--out", out)
    assert run_main(*base, "--qrels", t / "qrels.tsv").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["sweep-nDCG10.csv", "sweep-nDCG10.md", "sweep-nDCG10.png"]
    for extra in ((), ("--skip-missing",)):
        one_error_line(run_main(*base, "--qrels", t / "other.tsv", *extra),
                  "nothing to sweep: none of the 8 queries has a judgment of grade >= 1", "2 judged queries")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    r = Retriever.open(sweep_ws["ws"])
    with pytest.raises(UsageError, match="nothing to sweep"):
        run_sweep(r, sweep_ws["queries"], read_qrels(t / "other.tsv").judgments, [1.0], [0.5], k=10)
    with pytest.raises(UsageError, match="the qrels hold no judgment of grade >= 1"):
        run_sweep(r, sweep_ws["queries"], {"q1": {"d0001": 0}}, [1.0], [0.5], k=10)


def test_sweep_files_are_never_written_through_a_planted_temp_link(sweep_ws, tmp_path):
    from chitragupta.engine.search.bm25 import Retriever

    res = run_sweep(Retriever.open(sweep_ws["ws"]), sweep_ws["queries"], sweep_ws["qrels"], [1.0], [0.5], k=10)
    out = tmp_path / "out"
    out.mkdir()
    precious = write(tmp_path / "precious.txt", "keep me")
    (out / f".s.md.{os.getpid()}.tmp").symlink_to(precious)
    paths, _ = write_sweep(res, out, "s")
    assert precious.read_text() == "keep me"
    assert (out / "s.md").read_text().startswith("| k1 \\ b |") and not (out / f".s.md.{os.getpid()}.tmp").exists()
    assert [p.name for p in paths][:2] == ["s.md", "s.csv"]


def test_a_folder_where_a_sweep_file_goes_keeps_every_old_file(sweep_ws, tmp_path):
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.errors import OutputError

    res = run_sweep(Retriever.open(sweep_ws["ws"]), sweep_ws["queries"], sweep_ws["qrels"], [1.0, 2.0], [0.5], k=10)
    out = tmp_path / "out"
    write_sweep(res, out, "s")
    (out / "s.png").unlink()
    (out / "s.png").mkdir()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    res2 = run_sweep(Retriever.open(sweep_ws["ws"]), sweep_ws["queries"], sweep_ws["qrels"], [1.0, 3.0], [0.5], k=10)
    with pytest.raises(OutputError, match="s.png: is a folder"):
        write_sweep(res2, out, "s")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == ["s.csv", "s.md", "s.png"]  # no temp file left
