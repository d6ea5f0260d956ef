"""An index on disk: ``.npy`` arrays plus a JSON manifest, in generation folders behind a pointer file.

    content/index/<kind>/CURRENT          the live generation's folder name (replaced atomically)
    content/index/<kind>/g<time>-<pid>/   manifest.json + one .npy per array

A writer fills a new generation folder (``save`` from arrays in memory, or a ``NewGeneration`` filled an
array or a piece of one at a time; every file fsynced before the folder is renamed into place, those
below ``SYNC_AT_ONCE`` all at once in threads at the commit: one after another, each waited on its own
journal commit, ~0.07 s of a small build's 0.25 s on this host against ~0.01 s), then replaces ``CURRENT``; readers resolve
``CURRENT`` once and memory-map that generation's files, so a search running while an index is rebuilt
sees the old index or the new one, never a mix. The manifest records each array's dtype, shape, byte
size and CRC-32; sizes and shapes are checked on every load, checksums when the arrays total less than
``CHECKSUM_LIMIT`` bytes (above it a full read would cost more than the load itself). Arrays are read
with ``allow_pickle=False``.

Checksums are verified once per generation: a load that verified them writes ``CHECKED`` into the
generation (each array file's size, mtime and inode), and later loads skip the read while those are
unchanged -- a rewritten, replaced or truncated file has a new mtime or inode. A file younger than
``RACY_NS`` is never vouched for this way (a change in the same clock tick would keep its mtime). The
note cannot see a byte that rots in place (size, mtime and inode unchanged), so a caller names the
arrays to verify on every load anyway (``always``: the small ones, cheap to read), those only some
queries read when it first reads them (``verify_checksums``: the filter columns), and checks the rest
for what its kernels index with (``chitragupta.engine.index.terms``); a writer about to build from a
generation, or to declare it current, loads it with ``verify=True``: every checksum, whatever the note
or the size.

Nothing in the folder is trusted: the manifest's schema (types included) is checked, ``CURRENT`` and
the manifest are read only as small regular files (a folder, FIFO or huge file there is a corrupt
cache, never a hang), array names are plain names, and ``save`` clears whatever stands where it must
write inside the index folder (a folder named ``CURRENT``, a file named like the index folder). An OS
error while saving (a full disk, a read-only folder) is one ``WorkspaceError`` line; the previous
generation stays current and whole.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from chitragupta.files import atomic_write_text, fsync_dir, load_npy
from chitragupta.files import read_small  # re-exported: CURRENT, manifest.json, CHECKED
from chitragupta.errors import WorkspaceError

__all__ = ["IndexCorrupt", "StoredIndex", "save", "writing", "NewGeneration", "ArrayFile", "load", "verify_checksums",
           "check_manifest", "read_small", "CHECKSUM_LIMIT"]

CHECKSUM_LIMIT = 256 * 1024 * 1024
RACY_NS = 2_000_000_000
_KEEP_GENERATIONS = 2  # the live one and its predecessor, which a slow reader may still be opening
_ARRAY_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


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


def _non_negative_int(x) -> bool:
    return type(x) is int and x >= 0


def check_manifest(manifest) -> dict:
    """``manifest`` if it has an index manifest's shape (types included), else IndexCorrupt naming the
    first field that is wrong. Only ``files`` is the store's; the rest is compared by the caller."""
    if not isinstance(manifest, dict):
        raise IndexCorrupt(f"the manifest is a JSON {type(manifest).__name__}, not an object")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise IndexCorrupt("the manifest has no \"files\" object")
    for name, meta in files.items():
        if not _ARRAY_NAME.fullmatch(name):
            raise IndexCorrupt(f"the manifest names an array {name[:80]!r} (allowed: letters, digits, _)")
        if not isinstance(meta, dict):
            raise IndexCorrupt(f"the manifest's files.{name} is a {type(meta).__name__}, not an object")
        shape = meta.get("shape")
        problems = [
            not isinstance(meta.get("dtype"), str) and "dtype (a string)",
            not (isinstance(shape, list) and len(shape) <= 8 and all(map(_non_negative_int, shape)))
            and "shape (a list of integers >= 0)",
            not _non_negative_int(meta.get("bytes")) and "bytes (an integer >= 0)",
            not (_non_negative_int(meta.get("crc32")) and meta["crc32"] < 2**32) and "crc32 (an integer < 2**32)",
        ]
        bad = [p for p in problems if p]
        if bad:
            raise IndexCorrupt(f"the manifest's files.{name} has no valid {', '.join(bad)}")
    return manifest


def _clear(path: Path) -> None:
    """Remove a folder (not a symlink to one) standing where a file must be renamed into place."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)


class _NotAFolder(OSError):
    pass


def _folder_ready(folder: Path) -> None:
    """Make ``folder`` (``content/index/<kind>``, the cache's own) a folder, removing whatever else
    stands there (a file, a FIFO, a dangling symlink); its parent being something else than a folder is
    an error (that is not ours to remove)."""
    parent = folder.parent
    if parent.exists() and not parent.is_dir():
        raise _NotAFolder(f"{parent} is not a folder (move it away)")
    try:
        os.lstat(folder)
    except FileNotFoundError:
        pass
    else:
        if not folder.is_dir():
            os.unlink(folder)
    folder.mkdir(parents=True, exist_ok=True)


def save(folder: Path, manifest: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Write a new generation under ``folder`` and make it current. Returns the generation's path.
    WorkspaceError (one line) when the disk or the folder refuses; the previous generation stays."""
    with writing(folder) as gen:
        for name, arr in arrays.items():
            gen.put(name, arr)
        return gen.commit(manifest)


@contextmanager
def writing(folder: Path) -> Iterator["NewGeneration"]:
    """A ``NewGeneration`` under ``folder`` to fill and ``commit``; removed if the block raises or
    never commits. An OS error is one ``WorkspaceError`` line, as in ``save``."""
    try:
        gen = NewGeneration(folder)
        try:
            yield gen
        finally:
            gen.abort()  # (nothing left to remove once committed)
    except _NotAFolder as err:
        raise WorkspaceError(f"cannot write the index in {folder}: {err}") from None
    except OSError as err:
        what = err.strerror or str(err)
        raise WorkspaceError(f"cannot write the index in {folder}: {what}; the previous index is unchanged") \
            from None


class NewGeneration:
    """A generation being written an array at a time: ``put`` (an array whole) or ``column`` (a 1-d
    array appended a piece at a time, never held whole), then ``commit`` (the manifest, fsync, rename,
    ``CURRENT``). ``scratch`` names a temporary file inside it (a build's buckets), removed by ``commit``.
    Each array file is byte for byte what ``np.save`` writes; a new file in the temp folder (never one
    that stood there, never a symlink's target), fsynced by ``commit`` with the others."""

    def __init__(self, folder: Path):
        _wait_for_prunes()
        _folder_ready(folder)
        self.folder = Path(folder)
        self.gen = self.folder / f"g{time.time_ns():x}-{os.getpid()}"
        self.tmp = self.folder / f".{self.gen.name}.tmp"
        self.tmp.mkdir()
        self.files: dict[str, dict] = {}
        self.committed = False
        self._scratch: list[Path] = []

    def _path(self, name: str) -> Path:
        if not _ARRAY_NAME.fullmatch(name) or name in self.files:
            raise ValueError(f"array name {name!r} is not allowed or written twice")
        return self.tmp / f"{name}.npy"

    def _done(self, name: str, p: Path, dtype: np.dtype, shape: tuple, crc: int | None = None) -> None:
        """Record a written array file; ``crc``: its CRC-32 if the writer kept it (else the file is read)."""
        self.files[name] = {"dtype": dtype.str, "shape": list(shape), "bytes": p.stat().st_size,
                            "crc32": _crc(p) if crc is None else crc}

    def put(self, name: str, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr)
        p = self._path(name)
        with _new_file(p) as f:
            np.save(f, arr, allow_pickle=False)
            if arr.nbytes > SYNC_AT_ONCE:
                f.flush()
                os.fsync(f.fileno())
        self._done(name, p, arr.dtype, arr.shape)

    def column(self, name: str, dtype, length: int) -> "ArrayFile":
        """A 1-d array file of ``dtype`` to ``write`` pieces to; ``length``: how many elements at most
        (the header says the number written once ``close`` d)."""
        p = self._path(name)
        return ArrayFile(p, np.dtype(dtype), int(length),
                         lambda n, crc=None: self._done(name, p, np.dtype(dtype), (n,), crc))

    def scratch(self, name: str) -> Path:
        p = self.tmp / f"{name}.scratch"
        self._scratch.append(p)
        return p

    def commit(self, manifest: dict) -> Path:
        """Make the generation current (see ``save``); returns its path."""
        folder, gen, tmp = self.folder, self.gen, self.tmp
        try:
            for p in self._scratch:
                p.unlink(missing_ok=True)
            full = dict(manifest, files=self.files, written=time.time())
            with _new_file(tmp / "manifest.json") as f:
                f.write(json.dumps(full, indent=1, sort_keys=True).encode("utf-8"))
            fsync_all([tmp / f"{n}.npy" for n in self.files] + [tmp / "manifest.json"])
            fsync_dir(tmp)
            os.replace(tmp, gen)
            self.committed = True
            fsync_dir(folder)
        except BaseException:
            self.abort()
            raise
        try:
            _clear(folder / "CURRENT")  # a folder there would refuse the rename
            atomic_write_text(folder / "CURRENT", gen.name + "\n")
        except OSError:
            shutil.rmtree(gen, ignore_errors=True)  # never current: leave no newer generation for _prune to keep
            raise
        _prune_behind(folder, gen.name)
        return gen

    def abort(self) -> None:
        if not self.committed:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def mapped(self, names) -> dict[str, np.ndarray]:
        """The committed arrays ``names``, memory-mapped read-only."""
        return {n: load_npy(self.gen / f"{n}.npy", mmap_mode="r") for n in names}


SYNC_AT_ONCE = 1 << 24  # a file past this many bytes is fsynced when closed, not left to the commit's
# fsync of all: a large build's gigabytes left dirty until then pass the kernel's dirty limits, and its
# writers are throttled
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def _new_file(path: Path):
    """A new file at ``path`` (none may stand there: never a symlink's target), open for writing."""
    return os.fdopen(os.open(path, _NEW_FILE, 0o666), "wb")


def fsync_all(paths: list) -> None:
    """fsync every file of ``paths``, in threads (up to 16) that wait on the disk together; the first error
    is raised once all are done."""
    errors: list[OSError] = []

    def sync(some: list) -> None:
        for p in some:
            try:
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as err:
                errors.append(err)

    n = min(16, len(paths))
    if n <= 1:
        sync(paths)
    else:
        threads = [threading.Thread(target=sync, args=(paths[i::n],), name="chitragupta-fsync") for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


class ArrayFile:
    """A ``.npy`` file written a piece at a time: the header for ``length`` elements first, rewritten in
    place by ``close`` when fewer were written (numpy pads a 1-d header to the same size for any length).
    The file's CRC-32 is kept as it is written (the manifest's, without reading the file back), except
    when the header is rewritten: then ``done`` reads it. Fsynced here past ``SYNC_AT_ONCE`` bytes; a
    smaller one by ``NewGeneration.commit`` (a caller of its own calls ``fsync_all``)."""

    def __init__(self, path: Path, dtype: np.dtype, length: int, done):
        self.path, self.dtype, self.length, self._done = path, dtype, length, done
        self.n = 0
        self.f = _new_file(path)
        self.header = self._header(length)
        self.f.write(self.header)
        self.crc = zlib.crc32(self.header)

    def _header(self, n: int) -> bytes:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                   "fortran_order": False, "shape": (n,)})
        return buf.getvalue()

    def write(self, piece: np.ndarray) -> None:
        piece = np.ascontiguousarray(piece, dtype=self.dtype)
        if self.n + piece.shape[0] > self.length:
            raise ValueError(f"{self.path.name}: more than the {self.length} elements announced")
        raw = memoryview(piece).cast("B")
        self.f.write(raw)
        self.crc = zlib.crc32(raw, self.crc)
        self.n += piece.shape[0]

    def close(self) -> None:
        crc = self.crc
        if self.n != self.length:
            header = self._header(self.n)
            if len(header) != len(self.header):
                raise AssertionError("a .npy header changed size")  # (numpy pads it for any length)
            self.f.seek(0)
            self.f.write(header)
            crc = None  # (read back by ``done``)
        if self.n * self.dtype.itemsize > SYNC_AT_ONCE:
            self.f.flush()
            os.fsync(self.f.fileno())
        self.f.close()
        self._done(self.n, crc)

    def read(self, a: int, b: int) -> np.ndarray:
        """Elements ``a..b`` as written (after ``close``), read into memory (not mapped)."""
        return np.fromfile(self.path, dtype=self.dtype, count=b - a, offset=len(self.header) + self.dtype.itemsize * a)


_pruning: list[threading.Thread] = []
_pruning_lock = threading.Lock()


def _prune_behind(folder: Path, keep: str) -> None:
    """``_prune`` in a thread of its own: unlinking a generation written moments before waits on the
    disk (~0.06 s for a small index on this host, against ~0.002 s of CPU), which the caller's next
    step (``index``'s references) overlaps. Not a daemon: the process waits for it at exit; the next
    generation written in this process waits for it first."""

    def run() -> None:
        try:
            _prune(folder, keep=keep)
        except OSError:
            pass  # old generations are removed by the next save

    t = threading.Thread(target=run, name="chitragupta-prune")
    with _pruning_lock:
        _pruning.append(t)
    t.start()


def _wait_for_prunes() -> None:
    with _pruning_lock:
        waiting, _pruning[:] = list(_pruning), []
    for t in waiting:
        t.join()


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


def load(folder: Path, *, expect: dict, mmap: bool = True, verify: bool = False,
         always: tuple[str, ...] | frozenset = ()) -> StoredIndex:
    """Open the current generation; IndexCorrupt unless every ``expect`` key matches the manifest.

    Checksums: of every array when ``verify`` (a writer about to trust the generation); else of the
    arrays named in ``always`` on every load, and of all of them on a generation's first load while
    they total less than ``CHECKSUM_LIMIT`` bytes (see the module docstring)."""
    try:
        name = read_small(folder / "CURRENT", limit=4096).strip()
    except FileNotFoundError:
        raise IndexCorrupt("no index built yet") from None
    except (OSError, UnicodeDecodeError) as err:
        raise IndexCorrupt(f"unreadable CURRENT pointer ({err})") from None
    if not name:
        raise IndexCorrupt("CURRENT is empty (a writer stopped before naming a generation)")
    gen = folder / name
    if "/" in name or "\x00" in name or name.startswith(".") or not gen.is_dir():
        raise IndexCorrupt(f"CURRENT names a generation that is not there ({name[:80]!r})")
    try:
        manifest = json.loads(read_small(gen / "manifest.json"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:  # ValueError: JSON, huge integers
        raise IndexCorrupt(f"unreadable manifest ({type(err).__name__}: {str(err)[:200]})") from None
    check_manifest(manifest)
    for key, want in expect.items():
        got = manifest.get(key)
        if got != want:
            if key == "settings" and isinstance(got, dict):
                changed = ", ".join(f"{k}: {got.get(k, '-')!r} -> {want.get(k, '-')!r}"
                                    for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k))
                raise IndexCorrupt(f"index settings changed ({changed})")
            raise IndexCorrupt(f"built with {key} = {repr(got)[:80]}, this version needs {want!r}")
    files = manifest["files"]
    total = 0
    seen = {}
    for arr_name, meta in files.items():
        p = gen / f"{arr_name}.npy"
        try:
            st = os.lstat(p)
        except OSError:
            raise IndexCorrupt(f"array {arr_name} is missing") from None
        if not stat.S_ISREG(st.st_mode):
            raise IndexCorrupt(f"array {arr_name} is not a regular file")
        size = st.st_size
        if size != meta["bytes"]:
            raise IndexCorrupt(f"array {arr_name} is {size} bytes, the manifest says {meta['bytes']}")
        total += size
        seen[arr_name] = [size, st.st_mtime_ns, st.st_ino]
    check_all = verify or (total < CHECKSUM_LIMIT and not _checked_before(gen, seen))
    arrays = {}
    for arr_name, meta in files.items():
        p = gen / f"{arr_name}.npy"
        if check_all or arr_name in always:
            verify_checksums(gen, manifest, [arr_name])
        try:
            arr = load_npy(p, mmap_mode="r" if mmap else None)
        except (ValueError, OSError, EOFError, TypeError, SyntaxError, OverflowError, MemoryError) as err:
            raise IndexCorrupt(f"array {arr_name} is unreadable ({str(err)[:200]})") from None
        if arr.dtype.str != meta["dtype"] or list(arr.shape) != meta["shape"]:
            raise IndexCorrupt(f"array {arr_name} is {arr.dtype.str}{list(arr.shape)}, the manifest says "
                               f"{meta['dtype'][:20]}{meta['shape']}")
        arrays[arr_name] = arr
    if check_all and total < CHECKSUM_LIMIT:
        _note_checked(gen, seen)
    return StoredIndex(manifest=manifest, arrays=arrays, path=gen)


def verify_checksums(gen: Path, manifest: dict, names) -> None:
    """IndexCorrupt unless each array of ``names`` in generation ``gen`` is named by ``manifest`` (a loaded
    one's) and matches its checksum: what ``load`` checks, for arrays a reader checks when it first reads
    them (the document index's filter columns)."""
    for name in names:
        meta = manifest["files"].get(name)
        if meta is None:
            raise IndexCorrupt(f"array {name} is missing from the manifest")
        try:
            crc = _crc(gen / f"{name}.npy")
        except OSError as err:
            raise IndexCorrupt(f"array {name} is unreadable ({err.strerror or err})") from None
        if crc != meta["crc32"]:
            raise IndexCorrupt(f"array {name} fails its checksum")


def _checked_before(gen: Path, seen: dict) -> bool:
    try:
        return json.loads(read_small(gen / "CHECKED")) == seen
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False


def _note_checked(gen: Path, seen: dict) -> None:
    if any(time.time_ns() - mtime < RACY_NS for _size, mtime, _ino in seen.values()):
        return
    try:
        atomic_write_text(gen / "CHECKED", json.dumps(seen, sort_keys=True), durable=False)
    except OSError:
        pass  # a read-only cache is checked on every load
