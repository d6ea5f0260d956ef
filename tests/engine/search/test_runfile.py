"""engine/search/runfile.py: run files written by array code, and where a run goes.

``run_chunks`` against a per-line reference (``format_run_lines`` for TREC, json.dumps for JSON lines) on
random runs, every chunk size; scores as Python's ``%.10g``; a destination refused before any work, in one
line; a regular file replaced whole (temp + rename) or left untouched.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.search.runfile import (
    check_destination,
    describe,
    format_run_lines,
    open_output,
    run_chunks,
)
from chitragupta.errors import UsageError

from helpers import indexed_workspace, run_main


def _reference_run(qids, per_query, fmt):
    lines = []
    for qid, hits in zip(qids, per_query):
        if fmt == "trec":
            lines += [x + "\n" for x in format_run_lines(qid, [(k + (f"#{i}" if i >= 0 else ""), s)
                                                                for k, i, s in hits])]
        else:
            for rank, (k, i, s) in enumerate(hits, start=1):
                d = {"qid": qid, "rank": rank, "citekey": k}
                if i >= 0:
                    d["passage"] = i
                lines.append(json.dumps(d, ensure_ascii=False)[:-1] + f', "score": {s:.10g}}}\n')
    return "".join(lines).encode("utf-8")


def _random_run(seed, keys, passages=False):
    rng = np.random.default_rng(seed)
    n_q = int(rng.integers(1, 40))
    counts = rng.integers(0, 12, n_q)
    n = int(counts.sum())
    docs = rng.integers(0, len(keys), n)
    items = rng.integers(0, 300, n) if passages else np.full(n, -1)
    kind = rng.integers(0, 4, n)
    scores = np.where(kind == 0, rng.random(n) * 40, np.where(kind == 1, np.exp(rng.uniform(-40, 80, n)),
                      np.where(kind == 2, np.round(rng.random(n) * 1e4) / 8, rng.integers(1, 10**12, n) * 1.0)))
    qids = [f"q{i}" for i in range(n_q)]
    return qids, counts, docs, items, scores


PLAIN_KEYS = sorted(["smith2020", "doe-2019a", "müller2021", "x:y/z", "日本2020", "a" * 300, "k9"])


JSON_KEYS = sorted(PLAIN_KEYS + ['quote"key', "back\\slash", "tab\tkey", "nl\nkey", "nbsp\u00a0key", "\x1fctl"])


@pytest.mark.parametrize("fmt", ["trec", "jsonl"])
@pytest.mark.parametrize("passages", [False, True])
def test_run_chunks_equal_the_per_line_reference(fmt, passages):
    keys = PLAIN_KEYS if fmt == "trec" else JSON_KEYS
    table = StringTable.from_sorted(keys)
    table._list = None  # read the bytes, as an opened index does
    for seed in range(25):
        qids, counts, docs, items, scores = _random_run(seed, keys, passages)
        if fmt == "jsonl" and seed % 3 == 0:
            qids = [q + ['"', "\\", "é", "\t"][seed % 4] for q in qids]
        per_query, h = [], 0
        for c in counts:
            per_query.append([(keys[d], int(i), float(s)) for d, i, s in
                              zip(docs[h:h + c], items[h:h + c], scores[h:h + c])])
            h += c
        want = _reference_run(qids, per_query, fmt)
        for chunk_bytes in (1 << 23, 1, 97):
            got = b"".join(bytes(c) for c in run_chunks(qids, counts, docs, scores, table,
                                                         items if passages else None, fmt=fmt,
                                                         chunk_bytes=chunk_bytes))
            assert got == want, (seed, chunk_bytes)
        if fmt == "jsonl":
            for line in want.decode().splitlines():
                assert set(json.loads(line)) >= {"qid", "rank", "citekey", "score"}


def test_a_large_run_in_small_chunks_is_the_per_line_reference():
    """Thousands of queries (a batch's shape, not the few of the random runs above), passages among them,
    in one chunk and in chunks of a few queries (queries without hits among them): the per-line
    reference's bytes."""
    keys = PLAIN_KEYS
    table = StringTable.from_sorted(keys)
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 30, 3000)
    n = int(counts.sum())
    docs, items = rng.integers(0, len(keys), n), rng.integers(-1, 50, n)
    scores = np.where(rng.random(n) < 0.5, rng.random(n) * 40, np.exp(rng.uniform(-40, 80, n)))
    qids = [f"query-{i}" for i in range(counts.size)]
    per_query, h = [], 0
    for c in counts:
        per_query.append([(keys[d], int(i), float(x))
                          for d, i, x in zip(docs[h:h + c], items[h:h + c], scores[h:h + c])])
        h += c
    want = _reference_run(qids, per_query, "trec")
    for chunk_bytes in (1 << 23, 5000):
        got = b"".join(bytes(c) for c in run_chunks(qids, counts, docs, scores, table, items, chunk_bytes=chunk_bytes))
        assert got == want


@pytest.mark.parametrize("key", ["has space", "nbsp\u00a0key", "ideo\u3000key", "fs\x1ckey", "tab\tkey"])
def test_trec_refuses_a_citekey_holding_whitespace(key):
    table = StringTable.from_sorted(sorted(["ok2020", key]))
    d = table.find(key)
    with pytest.raises(UsageError, match="whitespace"):
        list(run_chunks(["q1"], np.array([1]), np.array([d]), np.array([1.0]), table))
    got = b"".join(run_chunks(["q1"], np.array([1]), np.array([d]), np.array([1.0]), table, fmt="jsonl"))
    assert json.loads(got)["citekey"] == key


def test_run_on_a_file_system_without_permission_bits(tmp_path, monkeypatch):
    ws = indexed_workspace(tmp_path, n=60, seed=41, vocab=40)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin"}\n')

    def no_chmod(*_a):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "fchmod", no_chmod)
    got = run_main("search", "-w", ws.root, "--queries", q, "--run", tmp_path / "out.trec")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "out.trec").read_text().startswith("q1 Q0 ")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


# -- --run destinations that are not regular files ----------------------------------------------------------
@pytest.mark.parametrize("dest, message", [
    ("DIR", "is a folder; name a file to write"),
    ("/proc/self/status", "is a kernel interface file"),
    ("/dev/full", "cannot write --run /dev/full: No space left on device"),
])
def test_run_destinations_are_named_in_one_line(tmp_path, dest, message):
    if dest.startswith("/") and not Path(dest).exists():
        pytest.skip(f"{dest} is not on this system")
    ws = indexed_workspace(tmp_path, n=60, seed=41, vocab=40)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin"}\n')
    if dest == "DIR":
        dest = tmp_path / "runs"
        dest.mkdir()
    got = run_main("search", "-w", ws.root, "--queries", q, "--run", dest)
    assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
    assert got.stderr.startswith("error: ") and message in got.stderr


# -- the contract, one call at a time ----------------------------------------------------------------------
def test_format_run_lines_ranks_from_one_with_the_tag():
    assert format_run_lines("q7", [("a2020", 3.5), ("b#4", 1.0)], tag="mine") == [
        "q7 Q0 a2020 1 3.5 mine", "q7 Q0 b#4 2 1 mine"]
    assert format_run_lines("q7", []) == []
    with pytest.raises(UsageError, match="whitespace"):
        format_run_lines("q", [("", 1.0)])


@pytest.mark.parametrize("kwargs, err, needle", [
    ({"fmt": "csv"}, UsageError, "unknown run format 'csv'; allowed: trec, jsonl"),
    ({"tag": "two words"}, UsageError, "must be ASCII without whitespace"),
    ({"tag": "tag\u00e9"}, UsageError, "must be ASCII without whitespace"),
    ({"tag": ""}, UsageError, "must be ASCII without whitespace"),
])
def test_run_chunks_refuses_a_bad_format_or_tag(kwargs, err, needle):
    table = StringTable.from_sorted(["a", "b"])
    with pytest.raises(err, match=needle):
        list(run_chunks(["q1"], np.array([1]), np.array([0]), np.array([1.0]), table, **kwargs))


def test_run_chunks_refuses_arrays_that_disagree():
    table = StringTable.from_sorted(["a", "b"])
    with pytest.raises(ValueError, match="disagree in length"):
        list(run_chunks(["q1", "q2"], np.array([1]), np.array([0]), np.array([1.0]), table))
    with pytest.raises(ValueError, match="disagree in length"):
        list(run_chunks(["q1"], np.array([2]), np.array([0]), np.array([1.0]), table))


def test_run_chunks_cut_at_query_boundaries_and_a_query_without_hits_writes_nothing():
    table = StringTable.from_sorted(["a", "b", "c"])
    chunks = [bytes(c) for c in run_chunks(["q1", "q2", "q3"], np.array([2, 0, 1]), np.array([2, 0, 1]),
                                           np.array([2.0, 1.0, 0.5]), table, tag="t", chunk_bytes=1)]
    assert chunks == [b"q1 Q0 c 1 2 t\nq1 Q0 a 2 1 t\n", b"q3 Q0 b 1 0.5 t\n"]
    assert list(run_chunks(["q1"], np.array([0]), np.zeros(0, np.int64), np.zeros(0), table)) == []


def test_describe_names_stdout():
    assert describe("-") == "stdout" and describe("runs/a.trec") == "runs/a.trec"


def test_check_destination_makes_a_missing_folder_and_refuses_a_folder(tmp_path):
    check_destination(str(tmp_path / "new" / "deeper" / "run.trec"))
    assert (tmp_path / "new" / "deeper").is_dir() and not (tmp_path / "new" / "deeper" / "run.trec").exists()
    with pytest.raises(UsageError, match="is a folder; name a file to write"):
        check_destination(str(tmp_path / "new"), "--out")
    with pytest.raises(UsageError, match=r"^--out "):
        check_destination(str(tmp_path / "new"), "--out")


def test_open_output_replaces_a_file_whole_or_leaves_it(tmp_path):
    target = tmp_path / "run.trec"
    target.write_text("old\n")
    target.chmod(0o640)
    with pytest.raises(RuntimeError):
        with open_output(str(target)) as f:
            f.write(b"half")
            raise RuntimeError("stopped mid-write")
    assert target.read_text() == "old\n"  # an error inside the block: the old file untouched
    with open_output(str(target)) as f:
        f.write(b"new\n")
        assert target.read_text() == "old\n"  # written aside until the block ends
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o640  # its mode kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trec"]  # no temporary left
    with pytest.raises(UsageError, match="does not exist"):
        with open_output(str(tmp_path / "no" / "run.trec")):
            pass
