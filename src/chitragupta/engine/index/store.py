"""An index on disk: ``.npy`` arrays plus a JSON manifest, in generation folders behind a pointer file.

    content/index/<kind>/CURRENT          the live generation's folder name (replaced atomically)
    content/index/<kind>/g<time>-<pid>/   manifest.json + one .npy per array

A writer fills a new generation folder (each file fsynced), then replaces ``CURRENT``; readers resolve
``CURRENT`` once and memory-map that generation's files, so a search running while an index is rebuilt
sees the old index or the new one, never a mix. The manifest records each array's dtype, shape, byte
size and CRC-32; sizes and shapes are checked on every load, checksums when the arrays total less than
``CHECKSUM_LIMIT`` bytes (above it a full read would cost more than the load itself). Arrays are read
with ``allow_pickle=False``.

Checksums are verified once per generation: a load that verified them writes ``CHECKED`` into the
generation (each array file's size, mtime and inode), and later loads skip the read while those are
unchanged -- a rewritten, replaced or truncated file has a new mtime or inode. A file younger than
``RACY_NS`` is never vouched for this way (a change in the same clock tick would keep its mtime).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chitragupta.engine.workspace import atomic_write_text, fsync_dir

__all__ = ["IndexCorrupt", "StoredIndex", "save", "load", "CHECKSUM_LIMIT"]

CHECKSUM_LIMIT = 256 * 1024 * 1024
RACY_NS = 2_000_000_000
_KEEP_GENERATIONS = 2  # the live one and its predecessor, which a slow reader may still be opening


class IndexCorrupt(Exception):
    """The cache cannot be used (missing, truncated, foreign, other schema); the message says why."""


@dataclass
class StoredIndex:
    manifest: dict
    arrays: dict[str, np.ndarray]
    path: Path


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


def save(folder: Path, manifest: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write a new generation under ``folder`` and make it current. Returns the generation's path."""
    folder.mkdir(parents=True, exist_ok=True)
    gen = folder / f"g{time.time_ns():x}-{os.getpid()}"
    tmp = folder / f".{gen.name}.tmp"
    tmp.mkdir()
    try:
        files = {}
        for name, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            p = tmp / f"{name}.npy"
            with open(p, "wb") as f:
                np.save(f, arr, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            files[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "bytes": p.stat().st_size, "crc32": _crc(p)}
        full = dict(manifest, files=files, written=time.time())
        with open(tmp / "manifest.json", "w", encoding="utf-8") as f:
            json.dump(full, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
        os.replace(tmp, gen)
        fsync_dir(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_text(folder / "CURRENT", gen.name + "\n")
    _prune(folder, keep=gen.name)
    return gen


def _prune(folder: Path, keep: str) -> None:
    gens = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.startswith("g")), key=lambda p: p.name)
    old = [p for p in gens if p.name != keep]
    for p in old[: max(0, len(old) - (_KEEP_GENERATIONS - 1))]:
        shutil.rmtree(p, ignore_errors=True)
    for p in folder.iterdir():  # temp folders of writers that were killed
        if p.is_dir() and p.name.startswith(".g") and p.name.endswith(".tmp"):
            try:
                if not _writer_alive(p.name) or time.time() - p.stat().st_mtime > 3600:
                    shutil.rmtree(p, ignore_errors=True)
            except OSError:
                pass


def _writer_alive(tmp_name: str) -> bool:
    """Whether the process named in a temp folder ``.g<time>-<pid>.tmp`` still runs (True if unsure)."""
    try:
        pid = int(tmp_name[: -len(".tmp")].rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def load(folder: Path, *, expect: dict, mmap: bool = True) -> StoredIndex:
    """Open the current generation; IndexCorrupt unless every ``expect`` key matches the manifest."""
    try:
        name = (folder / "CURRENT").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise IndexCorrupt("no index built yet") from None
    except (OSError, UnicodeDecodeError) as err:
        raise IndexCorrupt(f"unreadable CURRENT pointer ({err})") from None
    if not name:
        raise IndexCorrupt("CURRENT is empty (a writer stopped before naming a generation)")
    gen = folder / name
    if "/" in name or name.startswith(".") or not gen.is_dir():
        raise IndexCorrupt(f"CURRENT names a generation that is not there ({name!r})")
    try:
        manifest = json.loads((gen / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise IndexCorrupt(f"unreadable manifest ({type(err).__name__}: {err})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise IndexCorrupt("the manifest is not an index manifest")
    for key, want in expect.items():
        got = manifest.get(key)
        if got != want:
            if key == "settings" and isinstance(got, dict):
                changed = ", ".join(f"{k}: {got.get(k, '-')!r} -> {want.get(k, '-')!r}"
                                    for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k))
                raise IndexCorrupt(f"index settings changed ({changed})")
            raise IndexCorrupt(f"built with {key} = {got!r}, this version needs {want!r}")
    files = manifest["files"]
    total = 0
    seen = {}
    for arr_name, meta in files.items():
        p = gen / f"{arr_name}.npy"
        try:
            st = p.stat()
        except OSError:
            raise IndexCorrupt(f"array {arr_name} is missing") from None
        size = st.st_size
        if size != meta.get("bytes"):
            raise IndexCorrupt(f"array {arr_name} is {size} bytes, the manifest says {meta.get('bytes')}")
        total += size
        seen[arr_name] = [size, st.st_mtime_ns, st.st_ino]
    check = total < CHECKSUM_LIMIT and not _checked_before(gen, seen)
    arrays = {}
    for arr_name, meta in files.items():
        p = gen / f"{arr_name}.npy"
        if check and _crc(p) != meta.get("crc32"):
            raise IndexCorrupt(f"array {arr_name} fails its checksum")
        try:
            arr = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise IndexCorrupt(f"array {arr_name} is unreadable ({err})") from None
        if arr.dtype.str != meta.get("dtype") or list(arr.shape) != meta.get("shape"):
            raise IndexCorrupt(f"array {arr_name} is {arr.dtype.str}{list(arr.shape)}, the manifest says "
                               f"{meta.get('dtype')}{meta.get('shape')}")
        arrays[arr_name] = arr
    if check:
        _note_checked(gen, seen)
    return StoredIndex(manifest=manifest, arrays=arrays, path=gen)


def _checked_before(gen: Path, seen: dict) -> bool:
    try:
        return json.loads((gen / "CHECKED").read_text(encoding="utf-8")) == seen
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def _note_checked(gen: Path, seen: dict) -> None:
    if any(time.time_ns() - mtime < RACY_NS for _size, mtime, _ino in seen.values()):
        return
    try:
        atomic_write_text(gen / "CHECKED", json.dumps(seen, sort_keys=True), durable=False)
    except OSError:
        pass  # a read-only cache is checked on every load
