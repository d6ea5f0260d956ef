"""The batch paths users run, checked against their slow references: acronym expansion, ids to citekeys,
and run files (TREC and JSON lines), chunked, to files, stdout, FIFOs and devices."""

from __future__ import annotations

import json
import os
import stat
import threading

import numpy as np
import pytest
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.runfile import format_run_lines

from helpers import make_workspace, random_docs, run_cli, write_jsonl


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("batch"), random_docs(5, 300, vocab=60))
    return root


@pytest.fixture(scope="module")
def retriever(ws):
    return Retriever.open(ws)


def test_rank_many_with_expansion_matches_scoring_the_expanded_strings(ws):
    r = Retriever.open(ws)
    queries = [f"dt {w} ml" for w in r.index.vocab.to_list()[:40]] + ["gpu", "ocean9 heat", "zz"]
    expander = r.expander()
    assert expander is not None and "dt" in expander.tokens
    expanded = [q + " " + " ".join(expander.expand(q).added) for q in queries]
    got = r.rank_many(queries, 10)
    r.expander = lambda: None  # score the spelled-out strings instead
    want = r.rank_many(expanded, 10)
    assert np.array_equal(got.topk.ids, want.topk.ids) and np.array_equal(got.topk.scores, want.topk.scores)
    assert got.terms[0][:1] == ["dt"] and "digital" in got.terms[0]
    assert any(n.kind == "expansion" for n in got.notes[0])
    assert got.terms is got.terms and got.notes is got.notes  # worked out once per batch


def test_strings_at_decodes_only_what_it_needs_and_agrees_with_indexing():
    keys = sorted(f"key{i:05d}" + ("é" if i % 7 == 0 else "") for i in range(5000))
    table = StringTable.from_sorted(keys)
    table._list = None
    rows = np.array([4999, 3, 3, 0, 1234, 7])
    assert table.strings_at(rows).tolist() == [keys[i] for i in rows]
    assert table.strings_at(rows.reshape(2, 3)).tolist() == [[keys[i] for i in r] for r in rows.reshape(2, 3)]
    assert table._list is None  # a few rows: no full decode
    many = np.random.default_rng(0).integers(0, 5000, (1000, 4))
    assert table.strings_at(many).tolist() == [[keys[i] for i in r] for r in many]
    assert table._list is not None  # many rows: the table decoded once, and kept
    assert table.strings_at(np.zeros(0, np.int64)).tolist() == []


# -- the CLI: destinations ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_ws(ws, tmp_path_factory):
    run_cli("index", "-w", ws, check=True)
    q = write_jsonl(tmp_path_factory.mktemp("q") / "q.jsonl",
                    [{"_id": f"q{i}", "text": t} for i, t in enumerate(["twin model", "ocean heat dt", "the of",
                                                                         "sensor fidelity"] * 12)])
    return ws, q


@pytest.mark.slow
def test_cli_run_to_stdout_file_and_json_lines(cli_ws, tmp_path):
    ws, q = cli_ws
    out = tmp_path / "run.trec"
    run_cli("search", "-w", ws, "--queries", q, "--run", out, "-k", "5", check=True)
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "-", "-k", "5", check=True)
    assert p.stdout == out.read_text() and "written to stdout" in p.stderr
    r = Retriever.open(ws)
    texts = [json.loads(x)["text"] for x in q.read_text().splitlines()]
    ranked = r.rank_many(texts, 5)
    want = "".join(x + "\n" for i in range(len(texts)) for x in format_run_lines(f"q{i}", ranked.docids(i)))
    assert out.read_text() == want
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "-", "-k", "5", "--json", check=True)
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(d["qid"], d["rank"], d["citekey"]) for d in rows] == [
        (f"q{i}", n, k) for i in range(len(texts)) for n, (k, _s) in enumerate(ranked.docids(i), start=1)]
    assert all(abs(d["score"] - s) <= 1e-9 * s for d, (_k, s) in
               zip(rows, [h for i in range(len(texts)) for h in ranked.docids(i)]))


@pytest.mark.slow
def test_cli_run_destinations_that_are_not_regular_files(cli_ws, tmp_path):
    ws, q = cli_ws
    p = run_cli("search", "-w", ws, "--queries", q, "--run", tmp_path, "-k", "5")
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("error: --run")
    assert "is a folder" in p.stderr and "Traceback" not in p.stderr
    # a character device is written, never replaced by a file
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/null", "-k", "5", check=True)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # a FIFO is written directly and stays a FIFO
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    run_cli("search", "-w", ws, "--queries", q, "--run", fifo, "-k", "5", check=True)
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].count(b"\n") > 40
    # a symlink: the file it points at is replaced, the link kept; an existing file keeps its mode
    target = tmp_path / "real.trec"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.trec"
    link.symlink_to(target)
    run_cli("search", "-w", ws, "--queries", q, "--run", link, "-k", "5", check=True)
    assert link.is_symlink() and target.read_bytes() == got[0]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    # a missing folder is made before the work (as sweep --out does), not found missing after it
    p = run_cli("search", "-w", ws, "--queries", q, "--run", tmp_path / "no" / "such" / "x.trec", "-k", "5")
    assert p.returncode == 0 and (tmp_path / "no" / "such" / "x.trec").read_bytes() == got[0]
    if os.path.exists("/dev/full"):
        p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/full", "-k", "5")
        assert p.returncode == 1 and "error: cannot write --run /dev/full" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_cli_run_to_dev_stdout_writes_the_open_descriptor(cli_ws, tmp_path):
    import subprocess
    import sys

    ws, q = cli_ws
    base = [sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--queries", str(q), "-k", "3", "--run"]
    piped = subprocess.run(base + ["/dev/stdout"], capture_output=True, text=True, check=True)
    assert piped.stdout.count("\n") > 40
    log = tmp_path / "log.txt"
    log.write_text("kept line\n")
    with open(log, "a") as f:  # `>> log`: appended to, never truncated or replaced
        subprocess.run(base + ["/dev/stdout"], stdout=f, stderr=subprocess.DEVNULL, check=True)
    assert log.read_text() == "kept line\n" + piped.stdout
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/fd/9", "-k", "3")
    assert p.returncode == 1 and "name the file itself" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/proc/self/status", "-k", "3")
    assert p.returncode == 1 and "kernel interface" in p.stderr


@pytest.mark.slow
def test_cli_passage_batch_writes_item_docids(tmp_path):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.text.sidecar import dump_sidecar, join_items

    items = [{"text": f"soil microbiome yield paragraph number {i} with biochar amendment", "label": "text",
              "page": 1 + i // 3} for i in range(9)]
    records = [{"_id": f"p{j}", "title": "Soil", "text": join_items(items)} for j in range(4)]
    root = make_workspace(tmp_path, records)
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 5\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for j in range(4):
            (w.root / led.get(f"p{j}").parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": f"q{i}", "text": "soil yield biochar"} for i in range(3)])
    p = run_cli("search", "-w", root, "--queries", q, "--run", "-", "--unit", "passage", "-k", "6", check=True)
    ranked = Retriever.open(root).rank_many(["soil yield biochar"] * 3, 6, unit="passage")
    want = "".join(x + "\n" for i in range(3) for x in format_run_lines(f"q{i}", ranked.docids(i)))
    assert p.stdout == want and "#" in p.stdout
    p = run_cli("search", "-w", root, "--queries", q, "--run", "-", "--unit", "passage", "-k", "6", "--json",
                check=True)
    first = json.loads(p.stdout.splitlines()[0])
    assert first["citekey"] + f"#{first['passage']}" == ranked.docids(0)[0][0]
