"""The search command on a workspace it may not write (read-only files, a read-only mount) and on hostile
input: one clear line, never a traceback; what the user had is kept."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys

import pytest

from helpers import (
    ROOT,
    imported_workspace,
    make_workspace,
    one_error_line_after_progress,
    random_docs,
    run_cli,
    run_main,
    write_jsonl,
)


def test_search_on_a_read_only_workspace_simulated(tmp_path, monkeypatch):
    """What a read-only folder does to SQLite (root ignores file modes, so it is simulated): a write-
    ahead-log ledger opened any way but ``immutable`` cannot even be read there."""
    import chitragupta.engine.library.ledger as ledger_mod

    ws = imported_workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0  # the stamp recorded: no rebuild needed
    real = sqlite3.connect

    def readonly_folder(database, *args, **kwargs):
        if "immutable=1" not in str(database):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(database, *args, **kwargs)

    monkeypatch.setattr(ledger_mod.sqlite3, "connect", readonly_folder)
    p = run_main("search", "-w", ws, "twin", "-k", "3")  # was: not a usable ledger database ... move it aside
    assert p.returncode == 0 and "d0" in p.stdout, p.stderr
    p = run_main("import", "-w", ws, tmp_path / "c.jsonl")
    one_error_line_after_progress(p, "read-only")
    assert "move it aside" not in p.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes; the simulated test covers this")
def test_search_on_a_read_only_workspace(tmp_path):
    ws = imported_workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0
    modes = {}
    for p in [ws, *ws.rglob("*")]:
        modes[p] = p.stat().st_mode
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        p = run_main("search", "-w", ws, "twin", "-k", "3")
        assert p.returncode == 0 and "d0" in p.stdout, p.stderr
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


@pytest.mark.slow  # a subprocess in a mount namespace
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1) here")
def test_search_on_a_read_only_mount(tmp_path):
    """A real read-only file system: the workspace bind-mounted read-only in a private mount namespace
    (root only; skipped where the namespace or the mount is not allowed)."""
    ws = imported_workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0
    mnt = tmp_path / "ro"
    mnt.mkdir()
    script = (f"mount --bind {ws} {mnt} && mount -o remount,ro,bind {mnt} || exit 77; "
              f"touch {mnt}/probe 2>/dev/null && exit 78; "
              f"exec {sys.executable} -m chitragupta.cli.main search -w {mnt} twin -k 3")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if p.returncode in (77, 78) or "unshare failed" in p.stderr or "Operation not permitted" in p.stderr:
        pytest.skip(f"cannot make a read-only mount here ({p.stderr.strip()[:120]})")
    assert p.returncode == 0 and "d0" in p.stdout, p.stderr  # was: not a usable ledger database ... move it aside


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("hs"), random_docs(21, 30, vocab=40))
    run_cli("index", "-w", root, check=True)
    return root


def _one_error_line(p, *fragments):
    assert p.returncode == 1, (p.returncode, p.stderr)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    for f in fragments:
        assert f in errors[0], (f, errors[0])


def _closed_stdout(*args):
    """The CLI with fd 1 closed, as ``>&-`` leaves it."""
    code = ("import os, sys\n"
            "os.close(1)\n"
            "sys.stdout = None\n"
            "from chitragupta.cli.main import main\n"
            f"sys.exit(main({[str(a) for a in args]!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=False, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_closed_stdout_is_one_error_line(ws, tmp_path):
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "twin model"}])
    _one_error_line(_closed_stdout("search", "-w", ws, "--queries", q, "--run", "-"), "stdout is closed")
    _one_error_line(_closed_stdout("search", "-w", ws, "twin model"), "stdout is closed")
    ok = _closed_stdout("search", "-w", ws, "--queries", q, "--run", tmp_path / "x.trec")  # stdout not needed
    assert ok.returncode == 0 and (tmp_path / "x.trec").read_text().startswith("q1 Q0 "), ok.stderr


@pytest.mark.slow
@pytest.mark.parametrize("content", ["", "\n\n", "garbage\n{\"no\": \"id\"}\n[1, 2]\n"])
def test_no_usable_query_is_an_error_and_the_old_run_is_kept(ws, tmp_path, content):
    q = tmp_path / "q.jsonl"
    q.write_text(content)
    run = tmp_path / "old.trec"
    run.write_text("q0 Q0 d0001 1 1.5 earlier\n")
    p = run_cli("search", "-w", ws, "--queries", q, "--run", run)
    _one_error_line(p, "no query to run", "left as it was")
    assert p.stderr.count("\n") == 1  # the first refusal is folded into the one line
    assert run.read_text() == "q0 Q0 d0001 1 1.5 earlier\n"


def test_the_run_destination_is_checked_before_the_work(ws, tmp_path, monkeypatch):
    import chitragupta.engine.search.bm25 as search

    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "twin model"}])
    out = tmp_path / "new" / "deeper" / "x.trec"  # a missing folder is made, as sweep --out does
    p = run_cli("search", "-w", ws, "--queries", q, "--run", out)
    assert p.returncode == 0 and out.read_text().startswith("q1 Q0 "), p.stderr
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    _one_error_line(run_cli("search", "-w", ws, "--queries", q, "--run", tmp_path / "a"), "symlink loop")
    (tmp_path / "dir").mkdir()
    # in process: nothing is scored when the destination is refused
    from helpers import run_main

    scored = []
    real = search.Retriever.rank_many
    monkeypatch.setattr(search.Retriever, "rank_many", lambda self, *a, **k: scored.append(1) or real(self, *a, **k))
    p = run_main("search", "-w", ws, "--queries", q, "--run", tmp_path / "dir")
    assert p.returncode == 1 and "is a folder" in p.stderr and not scored
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_main("search", "-w", ws, "--queries", q, "--run", blocker / "x.trec")
    assert p.returncode == 1 and "Not a directory" in p.stderr and p.stderr.count("\n") == 1 and not scored


def test_an_embedding_store_outside_content_is_not_read(ws, tmp_path):
    pytest.importorskip("faiss")
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.embed import model_slug

    cfg = Workspace.open(ws).config.enrich
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    link = ws / "content" / "faiss" / model_slug(str(cfg.embed_model))
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    try:
        before = sorted(os.listdir(outside))
        p = run_cli("search", "-w", ws, "twin model", "--engine", "hybrid", "--json")
        assert p.returncode == 0 and json.loads(p.stdout), p.stderr  # BM25 alone
        assert "hybrid search is BM25 alone" in p.stderr and "leads outside content/" in p.stderr
        assert "refusing to write" not in p.stderr
        _one_error_line(run_cli("search", "-w", ws, "twin model", "--engine", "embed"), "leads outside content/")
        assert sorted(os.listdir(outside)) == before  # a search wrote nothing there
    finally:
        link.unlink()


def test_a_bibliography_symlink_loop_and_a_huge_snippet_width_are_one_line(ws, tmp_path):
    (tmp_path / "l1").symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(tmp_path / "l1")
    cfg = tmp_path / "loop.toml"
    cfg.write_text(f'[corpus]\nbibliography = "{tmp_path / "l1"}"\n')
    _one_error_line(run_cli("sync", "-w", ws, "--config", cfg), "symlink loop")
    _one_error_line(run_cli("search", "-w", ws, "twin", "--snippet-chars", str(10**30)), "--snippet-chars must be")


def test_a_search_on_a_full_disk_reads_the_ledger_without_writing(tmp_path, monkeypatch, caplog):
    """A write-ahead log left by a killed writer, and no room for the -shm index a reader needs: the search
    reads the ledger as it was before the log's writes (immutable), with a warning, and answers."""
    import signal
    import sqlite3

    import chitragupta.engine.library.ledger as ledger_mod
    from chitragupta.engine.search.bm25 import Retriever

    root = make_workspace(tmp_path, random_docs(22, 20, vocab=30))
    run_cli("index", "-w", root, check=True)
    db_path = root / "content" / "ledger.sqlite"
    pid = os.fork()
    if pid == 0:  # a writer killed before its checkpoint: committed frames stay in the -wal file
        db = sqlite3.connect(db_path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("UPDATE sources SET title = title || ' later' WHERE citekey = 'd0001'")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    assert (root / "content" / "ledger.sqlite-wal").stat().st_size > 0
    real = sqlite3.connect

    def full_disk(target, *a, uri=False, **k):
        if "immutable=1" not in str(target):
            raise sqlite3.OperationalError("disk I/O error")
        return real(target, *a, uri=uri, **k)

    monkeypatch.setattr(ledger_mod.sqlite3, "connect", full_disk)
    ledger_mod._WARNED.clear()
    with caplog.at_level("WARNING"):
        resp = Retriever.open(root, update=False).search("twin model", k=3)
    assert resp.hits and all(h.title is not None for h in resp.hits)
    assert any("write-ahead log" in r.getMessage() and "full disk" in r.getMessage() for r in caplog.records)
