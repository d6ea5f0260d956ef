"""Crash safety and concurrency, tested the way SQLite tests itself: real SIGKILLs at seeded write points.

Each kill runs the command as ``python -m chitragupta.cli.main ...`` with the fault hook in
``tools/_faults`` armed to SIGKILL it just before its Nth write in the workspace; a reader then checks
what it would see, the same command runs again, and the workspace must equal one whose run was never
interrupted (ledger rows, parsed files, index arrays, hits with scores and snippets). The campaign
itself lives in ``tools/reliability.py`` (``python -m tools.reliability --kills 30`` is the full one);
``CHITRAGUPTA_KILLS=30 python -m pytest tools/tests/test_reliability.py`` scales this file up to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tools.reliability import (
    FAULTS,
    allowed_files,
    build_scenario,
    case_campaign,
    cli,
    concurrent_writers,
    diff,
    kill_campaign,
    reader_check,
    search_during_rebuild,
    snapshot,
)

from helpers import ROOT

pytestmark = pytest.mark.slow  # SIGKILL campaigns and concurrent writers: the full CI run has them

KILLS = int(os.environ.get("CHITRAGUPTA_KILLS", "6"))


def _has_docling() -> bool:
    try:
        import docling  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name, n_docs, kills", [
    ("import", 2000, KILLS),
    ("index", 2000, KILLS),
    ("sync", 150, KILLS),
    ("sync-docling", 12, max(3, KILLS // 2)),
    pytest.param("enrich-embed", 60, max(2, KILLS // 3), marks=pytest.mark.enrich),
])
def test_sigkill_at_any_write_then_rerun_equals_a_clean_run(tmp_path, name, n_docs, kills):
    if name == "sync-docling" and not _has_docling():
        pytest.skip("docling extra not installed")
    if name == "enrich-embed":
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("faiss")
    outcomes = kill_campaign(name, tmp_path, kills, seed=11, n_docs=n_docs)
    assert len(outcomes) == kills
    points = [o.kill_at for o in outcomes]
    assert points == sorted(set(points)) and points[-1] > outcomes[0].writes // 2  # spread over the run
    for o in outcomes:
        where = f"{name} killed at write {o.kill_at} of {o.writes}"
        assert o.killed, f"{where}: the process was not killed (the hook never fired)"
        assert o.torn == [], f"{where}: a reader saw {o.torn}"
        assert o.rerun_rc == 0, f"{where}: rerun failed: {o.rerun_err}"
        assert o.differences == [], f"{where}: differs from a clean run: {o.differences}"
        assert o.leftovers == [], f"{where}: temp files left after the rerun: {o.leftovers}"


def test_killed_syncs_over_case_colliding_keys_then_one_rerun_equal_a_clean_build(tmp_path):
    """Issue 20.1: citekeys folding together (Lo2000 lo2000 LO2000 ...) that join and leave their groups
    and swap PDFs between two .bib versions; a sync of one version killed at a seeded write, a sync of the
    other killed too, then ONE sync: the workspace equals a sync of that version into an empty one."""
    outcomes = case_campaign(tmp_path, max(4, KILLS), seed=11, groups=5, plain=12)
    assert len(outcomes) == max(4, KILLS)
    for o in outcomes:
        where = f"killed at write {o.kill_at} of {o.writes}, {o.note}"
        assert o.killed, f"{where}: the process was not killed (the hook never fired)"
        assert o.torn == [], f"{where}: a reader saw {o.torn}"
        assert o.rerun_rc == 0, f"{where}: rerun failed: {o.rerun_err}"
        assert o.differences == [], f"{where}: differs from a clean build after one rerun: {o.differences}"
        assert o.leftovers == [], f"{where}: temp files left after the rerun: {o.leftovers}"


def test_the_checks_catch_a_torn_file_and_a_changed_index(tmp_path):
    """The campaign's checks are not vacuous: a half-written parsed file and a changed index are seen."""
    sc = build_scenario("index", tmp_path / "sc", n_docs=60, seed=3)
    ws = sc.start / "ws"
    before = snapshot(ws)
    answers = [{k: [h[:3] for h in v] for k, v in before["results"].items() if k.startswith("document:")}]
    allowed = allowed_files(before, before)
    assert reader_check(ws, allowed, answers) == []
    parsed = ws / "content" / "parsed"
    victim = sorted(list(parsed.glob("*.txt")) or list(parsed.glob("packs/*.pack")))[0]  # a file, or a pack
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    assert any(victim.name in p for p in reader_check(ws, allowed, answers))
    victim.write_bytes(data)
    assert cli(["index", "-w", ws]).returncode == 0  # the ledger moved on: the index changes
    problems = reader_check(ws, allowed, answers)
    assert any("neither the old index's nor the new one's" in p for p in problems)
    assert any(d.startswith("arrays:") for d in diff(before, snapshot(ws)))


@pytest.mark.parametrize("name", ["import", "index", "sync"])
def test_two_writers_at_once_serialise_on_the_lock(tmp_path, name):
    o = concurrent_writers(name, tmp_path, n_docs=150 if name == "sync" else 1000, seed=5)
    assert o.exit_codes == [0, 0] and o.unclear == []  # the default lock_timeout waits: both run
    assert o.identical


def test_two_writers_without_waiting_one_says_busy_or_both_finish(tmp_path):
    o = concurrent_writers("index", tmp_path, n_docs=1000, seed=6, lock_timeout=0.0)
    assert o.unclear == [], o.unclear
    assert all(c in (0, 1) for c in o.exit_codes) and o.exit_codes.count(0) >= 1
    assert o.busy == o.exit_codes.count(1)
    assert o.identical


def test_busy_workspace_is_one_clear_line_and_changes_nothing(tmp_path):
    from chitragupta.engine.library.workspace import Workspace

    sc = build_scenario("import", tmp_path / "sc", n_docs=200, seed=7)
    ws_dir = sc.start / "ws"
    before = snapshot(ws_dir)
    (ws_dir / "config.toml").write_text("[workspace]\nlock_timeout = 0\n")
    ws = Workspace.open(ws_dir)
    with ws.lock("test holder"):
        p = cli(sc.argv, cwd=sc.start)
        assert p.returncode == 1
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ")
        assert "workspace is busy (test holder (pid " in p.stderr and "try again when it finishes" in p.stderr
        assert snapshot(ws_dir) == before
        # with a timeout, a second writer waits for the lock, then runs
        (ws_dir / "config.toml").write_text("[workspace]\nlock_timeout = 120\n")
        waiting = cli(sc.argv, cwd=sc.start, popen=True)
        time.sleep(1.0)  # not a timed assertion: the outcome is the same whenever the lock is let go
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert "import: " in out and snapshot(ws_dir) != before


def test_search_during_rebuilds_sees_the_old_or_the_new_index_never_a_mix(tmp_path):
    race = search_during_rebuild(tmp_path, rounds=2, n_docs=1000, seed=8)
    assert race.errors == ""
    assert race.mixed == 0, race
    assert race.old >= 1 and race.new >= 1 and race.searches == race.old + race.new


@pytest.mark.slow
def test_every_write_stays_inside_the_workspace(tmp_path):
    """Every file-system write of sync, import, index, search (--log), evidence, traced by audit hooks:
    inside the workspace, except the --run file the user named (and Python's/numba's own caches)."""
    ws = tmp_path / "ws"
    (ws / "papers").mkdir(parents=True)
    from chitragupta.engine.library.demo.tinypdf import write_pdf

    write_pdf(ws / "papers" / "a.pdf", ["A title", "digital twin bridge"])
    (ws / "papers" / "bibliography.bib").write_text(
        "@misc{../../up, title={Up}, file={a.pdf}}\n@misc{CON, title={Con}, file={/etc/passwd}}\n"
        "@misc{a/b, title={AB}, file={a.pdf}}\n", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "../../../j", "text": "twin"}) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "twin"}) + "\n")
    log = tmp_path / "writes.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAULTS), str(ROOT)]), CHITRAGUPTA_WRITE_LOG=str(log))
    commands = [["sync", "-w", ws], ["import", "-w", ws, tmp_path / "c.jsonl"], ["index", "-w", ws],
                ["search", "-w", ws, "twin", "--log", "../../../draft"], ["evidence", "-w", ws, "twin", "--citekey", "a/b"],
                ["search", "-w", ws, "--queries", tmp_path / "q.jsonl", "--run", tmp_path / "out.trec"]]
    for argv in commands:
        p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", *map(str, argv)], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
        assert p.returncode == (3 if argv[0] == "sync" else 0), (argv, p.stderr)  # sync: CON's file is refused
    writes = [line.split("\t", 1) for line in log.read_text().splitlines()]
    assert len(writes) > 20  # the hook saw the work
    inside = str(ws.resolve()) + os.sep
    outside = []
    for event, path in writes:
        if path.startswith(inside) or "__pycache__" in Path(path).parts:
            continue
        if event == "os.mkdir" and Path(path).is_dir() and inside.startswith(path + os.sep):
            continue  # mkdir(parents=True, exist_ok=True) of the workspace's own ancestors
        if Path(path).parent == tmp_path and Path(path).name.startswith((".out.trec.", "out.trec")):
            continue  # the run file the user asked for, via its temp file
        outside.append(f"{event} {path}")
    assert outside == []
    assert (ws / "content" / "dossiers").is_dir() and not (tmp_path.parent / "draft").exists()
