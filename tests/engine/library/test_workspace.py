import errno
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest
from chitragupta.engine.library.sync import assign_names
from chitragupta.engine.library.workspace import Workspace, atomic_write_text, safe_name
from chitragupta.errors import WorkspaceBusy, WorkspaceError

from helpers import (
    STORE_QUERY,
    built_workspace,
    enospc,
    make_stale,
    numba_hits,
    run_main,
)


@pytest.mark.parametrize("key", ["../x", "../../x", "a/b", "a\\b", "x\x00y", "CON", "con.txt", "nul", ".hidden",
                                 "k" * 10_000, "..", ".", "ends.", "naïve", "with space", "/abs/path"])
def test_hostile_citekeys_stay_inside_parsed(tmp_path, key):
    ws = Workspace.open(tmp_path)
    name = safe_name(key)
    assert "/" not in name and "\\" not in name and "\x00" not in name and len(name) <= 80
    assert not name.startswith(".") and name.split(".")[0].upper() not in {"CON", "NUL"}
    p = ws.parsed_path(name)
    assert ws.parsed_dir.resolve() in p.parents


def test_plain_keys_are_kept_and_names_are_unique():
    assert safe_name("smith2020twin") == "smith2020twin"
    assert safe_name("Smith_2020-a.b") == "Smith_2020-a.b"
    keys = ["a/b", "a_b", "a?b", "Smith2020", "smith2020", "x" * 100, "x" * 101]
    names = assign_names(keys)
    assert len({n.casefold() for n in names.values()}) == len(keys)
    assert names["a_b"] == "a_b"
    assert names["Smith2020"] != "Smith2020" and names["smith2020"] != "smith2020"  # case collision hashed


def test_inside_content_refuses_escape(tmp_path):
    ws = Workspace.open(tmp_path)
    with pytest.raises(WorkspaceError, match="outside"):
        ws.absolute("content/../../etc/passwd")
    with pytest.raises(WorkspaceError, match="outside"):
        ws.absolute("/etc/passwd")


def test_atomic_write_leaves_no_temp_and_replaces(tmp_path):
    p = tmp_path / "f.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["f.txt"]


def _hold(root, ready, seconds):
    ws = Workspace.open(root)
    with ws.lock("holder"):
        ready.set()
        time.sleep(seconds)


@pytest.mark.slow
def test_lock_busy_names_the_holder(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(tmp_path), ready, 3.0))
    proc.start()
    try:
        assert ready.wait(30)
        ws = Workspace.open(tmp_path)
        with pytest.raises(WorkspaceBusy, match=r"busy \(holder \(pid \d+\)"):
            with ws.lock("second", timeout=0.2):
                pass
    finally:
        proc.join()
    with Workspace.open(tmp_path).lock("third", timeout=0):  # released when the holder exits
        pass


def test_the_lock_nests_in_one_thread_and_still_excludes_other_threads(tmp_path):
    """``index`` holds the lock across its steps, which take it again: a nested hold in the same thread
    passes through, the outer hold keeps it (another thread is busy until the outer hold ends), and then
    it is free."""
    import threading

    ws = Workspace.open(tmp_path)
    seen = []

    def other():
        try:
            with Workspace.open(tmp_path).lock("other", timeout=0):
                seen.append("took it")
        except WorkspaceBusy:
            seen.append("busy")

    with ws.lock("outer", timeout=0):
        with ws.lock("inner", timeout=0):
            t = threading.Thread(target=other)
            t.start()
            t.join()
        t = threading.Thread(target=other)  # the inner hold's end does not release the outer one
        t.start()
        t.join()
    other()
    assert seen == ["busy", "busy", "took it"]


def test_missing_workspace_is_a_clear_error(tmp_path):
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace.open(tmp_path / "nope")


# -- the lock and init on hostile ground: read-only, not a file, a full disk ---------------------------------
# -- the workspace lock: read-only, a folder --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES])
def test_a_lock_that_cannot_be_opened(tmp_path, monkeypatch, err):
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    real = os.open

    def guarded(path, *a, **k):
        if str(path).endswith(os.sep + ".lock"):
            raise OSError(err, os.strerror(err), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "open", guarded)
    got = run_main("search", "-w", ws.root, STORE_QUERY, "-k", 8, "--json", "--backend", "numba")
    assert got.returncode == 0, got.stderr  # a current index needs no lock
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    make_stale(ws, tmp_path)
    lock_said = f"cannot take the workspace lock {ws.content / '.lock'} ({os.strerror(err)})"
    got = run_main("index", "-w", ws.root)
    assert got.returncode == 1 and got.stderr.count("\n") == 1 and lock_said in got.stderr, got.stderr
    # a search on a read-only workspace whose index is stale answers from that index, with a note
    got = run_main("search", "-w", ws.root, STORE_QUERY, "-k", 8, "--json", "--backend", "numba")
    assert got.returncode == 0, got.stderr
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    assert lock_said in got.stderr and "these results come from the previous index" in got.stderr
    got = run_main("search", "-w", ws.root, STORE_QUERY, "--no-update")
    assert got.returncode == 0 and "older than the ledger" in got.stderr


@pytest.mark.parametrize("what", ["fifo", "content-a-file"])
def test_a_lock_that_is_not_a_file(tmp_path, what):
    ws = built_workspace(tmp_path)
    make_stale(ws, tmp_path)
    (ws.content / ".lock").unlink(missing_ok=True)
    if what == "fifo":
        os.mkfifo(ws.content / ".lock")
        needle = ".lock is not a regular file"
    else:
        shutil.move(ws.content, tmp_path / "moved")
        ws.content.write_text("x")
        needle = "content is not a folder"
    got = run_main("index", "-w", ws.root)
    assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
    assert needle in got.stderr


def test_a_full_disk_cannot_stop_the_lock_being_taken(tmp_path, monkeypatch):
    """The holder's name written into .lock is a courtesy for a waiting process: ENOSPC there is not an error."""
    ws = built_workspace(tmp_path)
    make_stale(ws, tmp_path)
    monkeypatch.setattr(os, "pwrite", enospc)
    got = run_main("index", "-w", ws.root, "--unit", "document")
    assert got.returncode == 0, got.stderr


def test_a_lock_that_is_a_folder(tmp_path):
    ws = built_workspace(tmp_path)
    make_stale(ws, tmp_path)
    (ws.content / ".lock").unlink(missing_ok=True)
    (ws.content / ".lock").mkdir()
    got = run_main("index", "-w", ws.root)
    assert got.returncode == 1 and got.stderr.count("\n") == 1
    assert ".lock is a folder, not the workspace's lock file; remove it" in got.stderr


# -- init, --log ---------------------------------------------------------------------------------------------
def test_init_on_a_file_is_one_line(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    got = run_main("init", "-w", f)
    assert got.returncode == 1 and got.stderr.count("\n") == 1
    assert "is not a folder" in got.stderr and f.read_text() == "mine"


def test_init_in_a_read_only_place_is_one_line(tmp_path, monkeypatch):
    def refuse(self, *a, **k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    got = run_main("init", "-w", tmp_path / "new")
    assert got.returncode == 1 and got.stderr.count("\n") == 1
    assert "cannot create the workspace" in got.stderr and "Permission denied" in got.stderr
