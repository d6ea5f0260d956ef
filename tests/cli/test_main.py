"""The CLI end to end, in subprocesses."""

import json
import os
import sys

import pytest
from tools.reliability import HOSTILE, run_hostile

from helpers import ROOT, random_docs, run_cli, write_jsonl


def test_help_lists_commands():
    p = run_cli("--help", check=True)
    for cmd in ("init", "sync", "import", "index", "search", "demo"):
        assert cmd in p.stdout


@pytest.mark.slow
def test_import_index_search_batch_and_json(tmp_path):
    docs = random_docs(21, 60)
    corpus = write_jsonl(tmp_path / "corpus.jsonl", docs)
    ws = tmp_path / "ws"
    p = run_cli("import", "-w", ws, corpus, check=True)
    assert "60 entries" in p.stdout
    p = run_cli("index", "-w", ws, check=True)
    assert "60 documents" in p.stdout
    p = run_cli("index", "-w", ws, check=True)
    assert "up to date" in p.stdout
    p = run_cli("search", "-w", ws, "twin model", "-k", "3", "--json", check=True)
    hits = json.loads(p.stdout)
    assert len(hits) == 3 and set(hits[0]) == {"citekey", "title", "authors", "year", "score", "snippet", "page", "passage"}
    p = run_cli("search", "-w", ws, "twin model", "-k", "3", check=True)
    assert hits[0]["citekey"] in p.stdout
    queries = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "twin model"}, {"_id": "q2", "text": "the of"},
                                                  {"_id": "q3", "text": "sensor fidelity"}])
    run = tmp_path / "out.trec"
    p = run_cli("search", "-w", ws, "--queries", queries, "--run", run, "-k", "5", check=True)
    lines = run.read_text().splitlines()
    assert "1 of 3 queries had no indexable term" in p.stderr
    fields = [l.split() for l in lines]
    assert all(len(f) == 6 and f[1] == "Q0" and f[5] == "chitragupta" for f in fields)
    q1 = [f for f in fields if f[0] == "q1"]
    assert [f[2] for f in q1[:3]] == [h["citekey"] for h in hits] and [f[3] for f in q1] == ["1", "2", "3", "4", "5"]
    assert abs(float(q1[0][4]) - hits[0]["score"]) <= 1e-9 * hits[0]["score"]


@pytest.mark.slow
def test_errors_are_one_line_and_nonzero(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    p = run_cli("search", "-w", ws, "twin")
    assert p.returncode == 1 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    assert "chitragupta sync" in p.stderr
    (ws / "config.toml").write_text("[retrieval]\nb = 2\n")
    p = run_cli("search", "-w", ws, "twin")
    assert p.returncode == 1 and "config.toml" in p.stderr and "[retrieval] b = 2 " in p.stderr and "[0, 1]" in p.stderr
    (ws / "config.toml").unlink()
    p = run_cli("search", "-w", ws, "twin", "-k", "0")
    assert p.returncode == 1 and "-k must be an integer >= 1, got 0" in p.stderr
    p = run_cli("search", "-w", ws)
    assert p.returncode == 1 and "give a QUERY" in p.stderr
    p = run_cli("import", "-w", ws, tmp_path / "nope.jsonl")
    assert p.returncode == 1 and "not found" in p.stderr
    p = run_cli("sync", "-w", ws)
    assert p.returncode == 1 and "bibliography not found" in p.stderr


def test_init_writes_commented_config(tmp_path):
    ws = tmp_path / "new"
    p = run_cli("init", "-w", ws, check=True)
    assert f"put your BibTeX at {ws / 'papers' / 'bibliography.bib'}, then run `chitragupta sync -w {ws}` and " \
        f"`chitragupta index -w {ws}`" in p.stdout  # the commands as they must be typed
    text = (ws / "config.toml").read_text()
    assert "k1 = 1.5" in text and text.count("#") > 5 and (ws / "papers").is_dir()
    p = run_cli("init", "-w", ws)
    assert p.returncode == 1 and "--force" in p.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    p = run_cli("demo", "-w", tmp_path / "demo", check=True)
    assert "sync: 37 entries" in p.stdout and "36 parsed" in p.stdout and "1 without a file" in p.stdout
    assert "index: 37 documents" in p.stdout and "batch: 12 queries" in p.stdout
    assert (tmp_path / "demo" / "content" / "demo.trec").is_file()
    assert "\ntry next:\n" in p.stdout and f"chitragupta search -w {tmp_path / 'demo'} --unit passage " in p.stdout
    got = json.loads(run_cli("search", "-w", tmp_path / "demo", "--unit", "passage", "sensor fidelity", "--json",
                             check=True).stdout)
    assert got and all(h["passage"] is not None for h in got)  # the demo's PDFs have passages
    # a second run reuses the workspace
    p = run_cli("demo", "-w", tmp_path / "demo", check=True)
    assert "36 unchanged" in p.stdout
    other = tmp_path / "other"
    other.mkdir()
    (other / "precious.txt").write_text("keep")
    p = run_cli("demo", "-w", other)
    assert p.returncode == 1 and "not a demo workspace" in p.stderr


def test_import_engine_is_light():
    code = ("import sys, chitragupta, chitragupta.engine, chitragupta.engine.search.bm25, chitragupta.cli.main; chitragupta.Retriever; "
            "print(sorted(m for m in ('torch', 'faiss', 'numba', 'scipy', 'sentence_transformers') if m in sys.modules))")
    out = run_cli_python(code)
    assert out.strip() == "[]"


def run_cli_python(code):
    import subprocess

    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow  # a subprocess
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_disk_is_one_line(tmp_path):
    """`search ... > /dev/full`: the table cannot be written; one error line and exit 1, no traceback."""
    import subprocess

    from helpers import make_workspace

    ws = make_workspace(tmp_path, random_docs(3, 30))
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "twin", "-k", "5"],
                           stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if not line.startswith("[note]")]
    assert errors == ["error: cannot write the output: No space left on device"], p.stderr


# -- the hostile-input table (tools.reliability.HOSTILE) through the CLI -------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("case", HOSTILE, ids=[f"{c.cls}-{c.name}" for c in HOSTILE])
def test_hostile_input_gets_a_clear_line_and_harms_nothing(tmp_path, case):
    if "docling" in case.name:
        pytest.importorskip("docling")
    o = run_hostile(case, tmp_path)
    assert not o.traceback, o.err
    assert o.rc == case.rc, (o.rc, o.err[-800:], o.out[-300:])
    assert case.needle in o.out or any(case.needle in line for line in o.lines), (case.needle, o.lines, o.out[-300:])
    if o.rc not in (0, 3):  # 3: sync finished, but some entry's document could not be read (named in warnings)
        assert o.err.count("\n") == 1 and o.err.startswith("error: "), o.err
    assert len(o.lines) == len(set(o.lines)), f"a line said twice: {o.lines}"
    assert o.outside == [], f"written outside the workspace: {o.outside}"
    assert o.lost == [], f"lost from the workspace: {o.lost}"
