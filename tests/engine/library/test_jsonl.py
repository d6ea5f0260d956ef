"""engine/library/jsonl.py: corpus and queries files read as they are found -- lone surrogates, integers
over Python's conversion limit, a line over the cap, /dev/zero, a pipe, a folder, ids a TREC run cannot
carry -- each one clear line or a skipped line, read in bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import chitragupta.engine.library.jsonl as jsonl
import pytest
from chitragupta.engine.library.jsonl import iter_jsonl, read_queries
from chitragupta.errors import CorpusError

from helpers import (
    ROOT,
    imported_workspace,
    one_error_line_after_progress,
    run_main,
    write_lines,
)

HUGE = "9" * 5000  # over Python's 4,300-digit int conversion limit


def test_a_lone_surrogate_in_a_query_id_skips_that_query_and_the_run_is_written(tmp_path):
    ws = imported_workspace(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin \\ud800 model"}\n{"_id": "q\\ud800", "text": "twin"}\n'
                 '{"_id": "q3", "text": "sensor"}\n', encoding="ascii")
    problems: list[str] = []
    assert read_queries(q, problems) == [("q1", "twin \ufffd model"), ("q3", "sensor")]
    assert any(f"{q}:2: '_id'" in p and "lone surrogate" in p for p in problems), problems
    assert any(f"{q}:1:" in p and "'text'" in p and "U+FFFD" in p for p in problems), problems
    run = tmp_path / "out.trec"
    p = run_main("search", "-w", ws, "--queries", q, "--run", run)
    assert p.returncode == 0, p.stderr  # was: error: query id 'q\ud800' is not valid Unicode
    qids = {line.split()[0] for line in run.read_text().splitlines()}
    assert qids == {"q1", "q3"}


def test_lone_surrogates_in_a_corpus_import_and_a_run_can_be_written(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text('{"_id": "a", "title": "t \\udc00", "text": "twin \\ud800 y"}\n'
                   '{"_id": "b\\udfff", "text": "twin"}\n{"_id": "c", "text": "twin"}\n', encoding="ascii")
    ws = tmp_path / "ws"
    p = run_main("import", "-w", ws, src)
    assert p.returncode == 0 and "import: 2 entries" in p.stdout, p.stderr
    assert f"{src}:2: '_id'" in p.stderr and f"{src}:1: lone surrogate" in p.stderr
    q = write_lines(tmp_path / "q.jsonl", json.dumps({"_id": "q1", "text": "twin"}))
    run = tmp_path / "out.trec"
    assert run_main("search", "-w", ws, "--queries", q, "--run", run).returncode == 0
    assert sorted(line.split()[2] for line in run.read_text().splitlines()) == ["a", "c"]


def test_a_huge_integer_never_stops_the_import(tmp_path):
    src = write_lines(tmp_path / "c.jsonl",
                 '{"_id": "ignored", "text": "twin", "n": ' + HUGE + '}',
                 '{"_id": ' + HUGE + ', "text": "twin"}',
                 '{"_id": "title", "title": ' + HUGE + ', "text": "twin"}',
                 '{"_id": "kw", "text": "twin", "keywords": [' + HUGE + ']}',
                 '{"_id": 42, "text": "twin"}')
    problems: list[str] = []
    got = {r.citekey: r for r in iter_jsonl(src, problems)}
    assert list(got) == ["ignored", "kw", "42"]  # was: ValueError
    assert got["kw"].keywords == ()  # a bad metadata field is left empty; the record is kept
    assert any(f"{src}:2: '_id' is an integer of 5000 digits" in p for p in problems), problems
    assert any(f"{src}:3: field 'title' must be a string, got an integer of 5000 digits" in p for p in problems)
    assert any(f"{src}:4: 'keywords' must be a list of strings or one string, got list; left empty" in p
               for p in problems), problems
    p = run_main("import", "-w", tmp_path / "ws", src)
    assert p.returncode == 0 and "import: 3 entries" in p.stdout, p.stderr


def test_a_huge_integer_in_a_queries_file_skips_only_its_line(tmp_path):
    q = write_lines(tmp_path / "q.jsonl", '{"_id": "q1", "text": "twin", "n": ' + HUGE + '}',
               '{"_id": ' + HUGE + ', "text": "twin"}', '{"_id": "q3", "text": ' + HUGE + '}',
               '{"_id": "q4", "text": "model"}')
    problems: list[str] = []
    assert read_queries(q, problems) == [("q1", "twin"), ("q4", "model")]  # was: ValueError
    assert [p.split(": ", 1)[0] for p in problems] == [f"{q}:2", f"{q}:3"]
    assert "'_id' is an integer of 5000 digits" in problems[0] and "'text' must be a string" in problems[1]


def test_a_line_over_the_cap_stops_the_read_naming_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1000)
    src = write_lines(tmp_path / "c.jsonl", '{"_id": "a", "text": "x"}', '{"_id": "b", "text": "' + "y" * 5000 + '"}')
    with pytest.raises(CorpusError, match=rf"{src}:2: line longer than"):
        list(iter_jsonl(src, []))
    with pytest.raises(CorpusError, match=rf"{src}:2: line longer than"):
        read_queries(src, [])
    exact = write_lines(tmp_path / "d.jsonl", '{"_id": "a", "text": "' + "z" * (1000 - 24) + '"}')
    assert len(exact.read_bytes()) == 1001  # 1,000 bytes and the newline: at the cap, read
    assert [r.citekey for r in iter_jsonl(exact, [])] == ["a"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_as_queries_or_corpus_is_refused_in_bounded_memory(tmp_path):
    """Run in a child with its address space capped at 1 GiB and a time limit: reading /dev/zero whole
    (what ``read_queries`` did) dies there instead of taking the machine."""
    code = ("import resource, sys; from pathlib import Path\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from chitragupta.engine.library.jsonl import read_queries, iter_jsonl\n"
            "from chitragupta.errors import CorpusError\n"
            "for f in (lambda: read_queries(Path('/dev/zero'), []), lambda: list(iter_jsonl(Path('/dev/zero'), []))):\n"
            "    try:\n        f()\n    except CorpusError as e:\n        print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout.splitlines() == ["/dev/zero: is a character device, not a queries file (JSON lines)",
                                     "/dev/zero: is a character device, not a corpus file (JSON lines)"]


def test_what_the_input_is_is_said_not_file_not_found(tmp_path):
    ws = imported_workspace(tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    one_error_line_after_progress(run_main("import", "-w", ws, tmp_path), "is a folder, not a corpus file")
    one_error_line_after_progress(run_main("import", "-w", ws, fifo), "is a pipe (FIFO); a corpus file is read more than once", "save the stream to a file first")
    one_error_line_after_progress(run_main("import", "-w", ws, "/dev/null"), "is a character device")
    one_error_line_after_progress(run_main("import", "-w", ws, tmp_path / "nope.jsonl"), "corpus file not found")
    one_error_line_after_progress(run_main("search", "-w", ws, "--queries", tmp_path, "--run", "-"),
                     "is a folder, not a queries file")
    one_error_line_after_progress(run_main("search", "-w", ws, "--queries", "/dev/null", "--run", "-"), "is a character device")


@pytest.mark.slow  # a subprocess
def test_queries_from_a_pipe_are_read_once(tmp_path):
    ws = imported_workspace(tmp_path)
    fifo = tmp_path / "q.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w") as f:
            f.write('{"_id": "q1", "text": "twin"}\n{"_id": "q2", "text": "sensor"}\n')

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert read_queries(fifo, []) == [("q1", "twin"), ("q2", "sensor")]
    t.join(5)
    p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--queries",
                        "/dev/stdin", "--run", "-"], input='{"_id": "q1", "text": "twin"}\n', capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 6 and {line.split()[0] for line in p.stdout.splitlines()} == {"q1"}


@pytest.mark.parametrize("key", ["a b", "tab\tkey", "nbsp\u00a0key", "ideo\u3000key", "", "   ", "ctl\x01key",
                                 "del\x7fkey", "c1\x85key", "nl\nkey"])
def test_an_id_a_trec_run_cannot_carry_is_refused_at_import(tmp_path, key):
    src = write_lines(tmp_path / "c.jsonl", json.dumps({"_id": key, "text": "twin"}), json.dumps({"_id": "ok", "text": "twin"}))
    problems: list[str] = []
    assert [r.citekey for r in iter_jsonl(src, problems)] == ["ok"]
    assert len(problems) == 1 and problems[0].startswith(f"{src}:1: '_id' ") and "line skipped" in problems[0]
    q = write_lines(tmp_path / "q.jsonl", json.dumps({"_id": key, "text": "twin"}), json.dumps({"_id": "q2", "text": "twin"}))
    qp: list[str] = []
    assert read_queries(q, qp) == [("q2", "twin")]
    assert len(qp) == 1 and qp[0].startswith(f"{q}:1: '_id' ")


def test_bad_metadata_is_a_note_naming_line_and_field_and_the_record_is_kept(tmp_path):
    src = write_lines(tmp_path / "c.jsonl", *[json.dumps(r) for r in [
        {"_id": "y", "text": "t", "year": "19x5", "venue": 12, "type": ["x"], "doi": "nope"},
        {"_id": "a", "text": "t", "authors": {"family": "Doe"}, "keywords": 3, "metadata": {"year": 2020}},
        {"_id": "m", "text": "t", "authors": ["Doe, J.", 4], "year": 10**7, "doi": 7, "metadata": "not an object"},
        {"_id": "h", "text": "t", "year": True},
        {"_id": "ok", "text": "t", "authors": "M{\\\"u}ller, K. and Ada Lovelace and others", "type": " Article ",
         "metadata": {"venue": "  Nature\n Physics ", "keywords": ["x"], "doi": "doi:10.1000/ABC", "year": "in press",
                      "authors": "ignored: the top level wins"}},
    ]])
    problems: list[str] = []
    got = {r.citekey: r for r in iter_jsonl(src, problems)}
    assert list(got) == ["y", "a", "m", "h", "ok"]  # every record kept
    assert [(r.year, r.venue, r.type, r.doi) for r in got.values()] == [
        (None, None, None, None), (2020, None, None, None), (None, None, None, None), (None, None, None, None),
        (None, "Nature Physics", "article", "10.1000/abc")]
    assert got["a"].authors == got["m"].authors == () and got["a"].keywords == () and got["ok"].keywords == ("x",)
    assert got["ok"].authors == ("Müller, K.", "Ada Lovelace", "others")  # LaTeX in a name: decoded
    assert got["ok"].author_names == (("Müller", "K."), ("Lovelace", "Ada"))
    assert problems == [
        f"{src}:1: field 'year' '19x5' is not a year; left empty",
        f"{src}:1: 'venue' must be a string, got int; left empty",
        f"{src}:1: 'type' must be a string, got list; left empty",
        f"{src}:1: field 'doi' 'nope' is not a DOI (10.NNNN/...); left empty",
        f"{src}:2: 'keywords' must be a list of strings or one string, got int; left empty",
        f"{src}:2: 'authors' must be a list of strings or one string, got dict; left empty",
        f"{src}:3: 'authors' must be a list of strings or one string, got list; left empty",
        f"{src}:3: field 'year' 10000000 is not a year; left empty",
        f"{src}:3: field 'doi' 7 is not a DOI (10.NNNN/...); left empty",
        f"{src}:4: 'year' must be a number or a string, got bool; left empty",
        f"{src}:5: field 'year' 'in press' is not a year; left empty",
    ]
    p = run_main("import", "-w", tmp_path / "ws", src)
    assert p.returncode == 0 and "import: 5 entries" in p.stdout, p.stderr
