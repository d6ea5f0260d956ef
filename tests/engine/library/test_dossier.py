"""engine/library/dossier.py: the ``--log`` dossier of a search -- a query that is not UTF-8, lone surrogates in a
batch, a full disk -- written whole (with replacement characters) or refused in one line."""

from __future__ import annotations

import os

from helpers import built_workspace, enospc, run_main


def _log_rows(ws, draft):
    return (ws.content / "dossiers" / draft / "retrieval.md").read_text(encoding="utf-8").splitlines()


def test_log_of_a_query_that_is_not_utf8(tmp_path):
    """argv bytes b'caf\\xe9' arrive as 'caf\\udce9' (surrogateescape): the hits were printed, then the
    log row was lost in a UnicodeEncodeError."""
    ws = built_workspace(tmp_path)
    query = os.fsdecode(b"twin caf\xe9")
    got = run_main("search", "-w", ws.root, query, "--log", "draft")
    assert got.returncode == 0, got.stderr
    rows = _log_rows(ws, "draft")
    assert len(rows) == 3 and "| twin caf\ufffd |" in rows[2]


def test_log_of_a_batch_with_lone_surrogates(tmp_path):
    ws = built_workspace(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin \\ud800 model"}\n{"_id": "q2", "text": "sensor"}\n')
    got = run_main("search", "-w", ws.root, "--queries", q, "--run", tmp_path / "out.trec", "--log", "d")
    assert got.returncode == 0, got.stderr
    rows = _log_rows(ws, "d")
    assert len(rows) == 4 and "twin \ufffd" in rows[2] and "| sensor |" in rows[3]


def test_log_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    from chitragupta.engine.library import dossier

    ws = built_workspace(tmp_path)
    monkeypatch.setattr(dossier.os, "write", enospc)
    got = run_main("search", "-w", ws.root, "twin", "--log", "draft")
    assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
    assert "cannot write the --log dossier" in got.stderr and "No space left on device" in got.stderr
