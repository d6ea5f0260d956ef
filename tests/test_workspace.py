import multiprocessing
import os
import time
from pathlib import Path

import pytest

from chitragupta.engine.corpus.sync import assign_names
from chitragupta.errors import WorkspaceBusy, WorkspaceError
from chitragupta.engine.workspace import Workspace, atomic_write_text, safe_name


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


def test_missing_workspace_is_a_clear_error(tmp_path):
    with pytest.raises(WorkspaceError, match="does not exist"):
        Workspace.open(tmp_path / "nope")
