"""chitragupta.files: the one atomic writer (never through a symlink, the old file kept on a failure
or a kill, the permission bits each writer asks for) and the one file-kind table."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from chitragupta import files
from chitragupta.files import (
    FileRefused,
    atomic_write_bytes,
    kind_of,
    replacing,
    temp_beside,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.fixture
def outside(tmp_path):
    """A file outside the folder the writers write in, and that folder."""
    out = tmp_path / "outside.txt"
    out.write_bytes(b"not yours\n")
    inside = tmp_path / "ws"
    inside.mkdir()
    return out, inside


# -- never through a symlink --------------------------------------------------------------------------------

def test_a_symlink_at_the_path_is_replaced_not_written_through(outside):
    out, inside = outside
    link = inside / "cache.json"
    link.symlink_to(out)
    atomic_write_bytes(link, b"new")
    assert out.read_bytes() == b"not yours\n"
    assert not link.is_symlink() and link.read_bytes() == b"new"


def test_a_symlink_planted_at_the_temp_name_is_never_followed(outside):
    out, inside = outside
    target = inside / "seg.npy"
    (inside / ".seg.npy.42.tmp").symlink_to(out)
    atomic_write_bytes(target, b"data", tag="42")
    assert out.read_bytes() == b"not yours\n"
    assert target.read_bytes() == b"data"
    assert sorted(p.name for p in inside.iterdir()) == ["seg.npy"]  # the planted link went with the rename


def test_random_temp_names_are_created_afresh_and_never_followed(outside, monkeypatch):
    """With no tag, a name already there (a file or a planted link) is skipped for another."""
    out, inside = outside
    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(names))
    (inside / ".x.aaaa.tmp").symlink_to(out)
    atomic_write_bytes(inside / "x", b"fresh")
    assert out.read_bytes() == b"not yours\n" and (inside / "x").read_bytes() == b"fresh"
    assert (inside / ".x.aaaa.tmp").is_symlink()  # left alone: not ours


def test_the_embedding_store_segments_never_write_through_a_planted_symlink(outside):
    """enrich/store.py's own copy of the writer opened its temp with open(): a symlink planted at the temp
    name sent the segment's bytes out of the workspace."""
    from chitragupta.enrich.store import write_segment

    out, inside = outside
    seg = inside / ".model.segments"
    seg.mkdir()
    for name in ("seg-000001.npy", "seg-000001.json"):
        (seg / f".{name}.{os.getpid()}.tmp").symlink_to(out)
    docs = [{"citekey": "a", "title": "A", "hash": "h", "text": "abc", "starts": [0], "ends": [3]}]
    write_segment(seg, 1, base="none", model="m", dim=2, recipe={}, docs=docs,
                  vectors=np.ones((1, 2), dtype=np.float32))
    assert out.read_bytes() == b"not yours\n"
    assert sorted(p.name for p in seg.iterdir()) == ["seg-000001.json", "seg-000001.npy"]


def test_the_sweep_output_and_the_parsed_texts_never_write_through_a_symlink(outside, tmp_path):
    from chitragupta.engine.evaluation.sweep import _replace_all
    from chitragupta.engine.library.committer import ParsedFolder
    from chitragupta.engine.library.workspace import Workspace

    out, inside = outside
    (inside / "grid.csv").symlink_to(out)
    (inside / f".heat.png.{os.getpid()}.tmp").symlink_to(out)
    _replace_all({inside / "grid.csv": b"k1,b\n", inside / "heat.png": b"png"})
    assert out.read_bytes() == b"not yours\n"
    assert (inside / "grid.csv").read_bytes() == b"k1,b\n" and (inside / "heat.png").read_bytes() == b"png"

    ws = Workspace.open(tmp_path / "w", create=True)
    folder = ParsedFolder(ws)
    Path(folder.folder).mkdir(parents=True, exist_ok=True)
    (Path(folder.folder) / "k.txt").symlink_to(out)
    folder.write("k.txt", b"text")
    assert out.read_bytes() == b"not yours\n" and (Path(folder.folder) / "k.txt").read_bytes() == b"text"
    with pytest.raises(ValueError, match="not a plain file name"):
        folder.write("../k.txt", b"text")


# -- the old file survives a failure or a kill ----------------------------------------------------------------

def test_an_error_mid_write_leaves_the_old_file_and_no_temp(tmp_path):
    p = tmp_path / "index.json"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with replacing(p) as f:
            f.write(b"half of the new")
            raise RuntimeError("disk full, say")
    assert p.read_bytes() == b"old"
    assert [q.name for q in tmp_path.iterdir()] == ["index.json"]


def test_a_process_killed_mid_write_leaves_the_old_file(tmp_path):
    p = tmp_path / "manifest.json"
    p.write_bytes(b"old")
    code = ("import os, sys\nfrom chitragupta.files import replacing\n"
            "with replacing(sys.argv[1]) as f:\n    f.write(b'half'); f.flush(); os._exit(9)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 9
    assert p.read_bytes() == b"old"
    left = [q.name for q in tmp_path.iterdir() if q.name != "manifest.json"]
    assert len(left) == 1 and left[0].startswith(".manifest.json.") and left[0].endswith(".tmp")


def test_a_folder_at_the_path_is_left_as_it_was(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        atomic_write_bytes(tmp_path / "d", b"x")
    assert (tmp_path / "d").is_dir() and [q.name for q in tmp_path.iterdir()] == ["d"]


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_a_path_without_a_file_name_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="not a file name"):
        temp_beside(str(tmp_path) + "/" + name)


# -- permissions: what each writer made before -----------------------------------------------------------------

def test_permission_bits(tmp_path):
    umask = _umask()
    atomic_write_bytes(tmp_path / "private", b"x")  # a cache file: private, as mkstemp made it
    assert stat.S_IMODE(os.stat(tmp_path / "private").st_mode) == 0o600 & ~umask
    atomic_write_bytes(tmp_path / "shared", b"x", mode=0o666)  # the stores' arrays, the sweep's files
    assert stat.S_IMODE(os.stat(tmp_path / "shared").st_mode) == 0o666 & ~umask
    with replacing(tmp_path / "streamed", mode=0o666) as f:  # the index store's arrays
        f.write(b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "streamed").st_mode) == 0o666 & ~umask


def test_a_run_file_still_follows_its_symlink(tmp_path):
    """The documented difference: --run replaces the file a symlink points at, keeps the link, and keeps
    the permission bits of the file it replaces."""
    from chitragupta.engine.search.runfile import open_output

    target = tmp_path / "real.run"
    target.write_bytes(b"old")
    os.chmod(target, 0o604)
    link = tmp_path / "link.run"
    link.symlink_to(target)
    with open_output(str(link)) as f:
        f.write(b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o604


# -- one file-kind table ---------------------------------------------------------------------------------------

def test_kind_of_names_each_kind_once(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    (tmp_path / "l").symlink_to(tmp_path / "nowhere")
    assert kind_of(os.stat(tmp_path / "p").st_mode) == "a pipe (FIFO)"
    assert kind_of(os.stat(tmp_path).st_mode) == "a folder"
    assert kind_of(os.stat("/dev/null").st_mode) == "a character device"
    assert kind_of(os.lstat(tmp_path / "l").st_mode) == "a symbolic link"
    assert kind_of(stat.S_IFBLK) == "a block device" and kind_of(stat.S_IFSOCK) == "a socket"
    assert kind_of(stat.S_IFREG) is None
    with pytest.raises(FileRefused, match="p is a pipe"):
        files.read_small(fifo)


def test_the_workspace_lock_is_never_taken_through_a_symlink(outside, tmp_path):
    """The lock file gets its holder's line written into it: a symlink there is refused, not followed."""
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.errors import WorkspaceError

    out, _ = outside
    ws = Workspace.open(tmp_path / "w", create=True)
    ws.content.mkdir(parents=True, exist_ok=True)
    (ws.content / ".lock").symlink_to(out)
    with pytest.raises(WorkspaceError, match="cannot take the workspace lock"):
        with ws.lock("test"):
            pass
    assert out.read_bytes() == b"not yours\n"


def test_npy_files_are_opened_under_the_one_lock(tmp_path, monkeypatch):
    """``files.load_npy`` holds the process-wide lock while numpy parses the header (CPython 3.11, seen on 3.11.7,
    can raise SystemError when two threads build ASTs at once, gh-106905; numpy's header parse is one), and the
    index and embedding stores open their arrays through it."""
    import threading

    arr = np.arange(12, dtype=np.int32)
    np.save(tmp_path / "a.npy", arr)
    real, held = np.load, []
    monkeypatch.setattr(np, "load", lambda *a, **k: (held.append(files._NPY_LOCK.locked()), real(*a, **k))[1])
    assert np.array_equal(files.load_npy(tmp_path / "a.npy", mmap_mode="r"), arr) and held == [True]
    assert not files._NPY_LOCK.locked()

    out, errors = [], []

    def opener():
        try:
            for _ in range(50):
                out.append(int(files.load_npy(tmp_path / "a.npy", mmap_mode="r")[-1]))
        except Exception as err:  # noqa: BLE001 -- a SystemError from a racing header parse
            errors.append(err)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and out == [11] * 200 and all(held)
    for mod in ("engine/index/store.py", "enrich/store.py", "enrich/embed.py", "enrich/topics.py"):
        src = (Path(files.__file__).parent / mod).read_text(encoding="utf-8")
        assert "np.load(" not in src, mod
