"""The search command on a workspace it may not write (read-only files, a read-only mount) and on hostile
input: one clear line, never a traceback; what the user had is kept."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys

import pytest

from conftest import ROOT, imported_workspace, one_error_line_after_progress, run_main


def test_search_on_a_read_only_workspace_simulated(tmp_path, monkeypatch):
    """What a read-only folder does to SQLite (root ignores file modes, so it is simulated): a write-
    ahead-log ledger opened any way but ``immutable`` cannot even be read there."""
    import chitragupta.engine.corpus.ledger as ledger_mod

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
