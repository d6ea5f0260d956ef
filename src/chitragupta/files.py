"""Files the engine does not trust, read and written one way: small ones read whole, line files a bounded
line at a time, every cache and index file replaced atomically.

    read_small(path, limit)            the text of a small regular file (a config, a manifest, a pointer)
    read_limited(path, limit)          its bytes
    read_head(path, n)                 the first n bytes of a regular file, or None
    open_lines(path, what)             a regular file or a pipe, opened to be read once, as lines
    kind_of(mode)                      what a file that is not a regular file is, in words (one table)
    atomic_write_bytes(path, data)     ``path`` replaced whole by ``data`` (``atomic_write_text``: UTF-8)
    replacing(path)                    the same, streamed: a binary file that replaces ``path`` on success
    temp_beside(path) / put_in_place   its two steps, for a writer that renames several files at the end

Each looks at what ``path`` is before opening it: a folder, a FIFO, a device (``/dev/zero``, a terminal) or
a socket is refused by its type and never opened (opening a FIFO waits for a writer; reading a device may
never end), and a small file is read only up to its ``limit``. ``read_small`` refuses by raising
``FileRefused``, an ``OSError`` saying what the path is, so a caller that already treats ``OSError`` as
"absent or corrupt" needs nothing more; callers that talk to a user turn ``kind`` / ``size`` into their
own one line.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
import threading
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import BinaryIO, Iterator

__all__ = ["load_npy", "FileRefused", "kind_of", "FOLDER", "FIFO", "read_small", "read_limited", "open_lines", "iter_lines", "LineTooLong",
           "SMALL_FILE", "read_head", "atomic_write_bytes", "atomic_write_text", "replacing", "temp_beside",
           "put_in_place", "replace_in_folder", "fsync_dir", "discard"]

SMALL_FILE = 1 << 24  # CURRENT, manifest.json, CHECKED: anything bigger is not ours

# The one table of what a path can be besides a regular file, in the words every message uses (a config,
# a corpus or queries file, a bibliography, a source document, a sidecar, a run file's destination).
FOLDER, FIFO = "a folder", "a pipe (FIFO)"
_KINDS = ((stat.S_ISDIR, FOLDER), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, FIFO),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is ("a folder", "a pipe (FIFO)", ...; "not a regular
    file" for a kind not in the table); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class FileRefused(OSError):
    """``path`` is not a regular file (``kind`` says what it is) or is over ``limit`` bytes (``size``: its
    size, or -1 when it grew past the limit while read). ``str()``: ``<name> is <kind>`` or ``<name> is N
    bytes, more than LIMIT``."""

    def __init__(self, path, *, kind: str | None = None, size: int | None = None, limit: int | None = None):
        self.path, self.kind, self.size, self.limit = Path(path), kind, size, limit
        if kind is not None:
            text = f"{self.path.name} is {kind}"
        elif size is not None and size >= 0:
            text = f"{self.path.name} is {size} bytes, more than {limit}"
        else:
            text = f"{self.path.name} is more than {limit} bytes"
        super().__init__(text)


def read_limited(path: str | Path, limit: int = SMALL_FILE, *, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. ``follow``: a symbolic link is
    followed (a user's file); otherwise it is refused like any other non-regular file (a cache's own).
    A FIFO, device, socket or folder is refused before it is opened, and checked again on the open
    descriptor (``O_NONBLOCK``: a FIFO swapped in meanwhile cannot block the open). ``FileRefused`` for
    what is refused, other ``OSError`` (``FileNotFoundError``, ...) as the system raises them."""
    path = Path(path)
    st = os.stat(path) if follow else os.lstat(path)
    kind = kind_of(st.st_mode)
    if kind is not None:
        raise FileRefused(path, kind=kind)
    if st.st_size > limit:
        raise FileRefused(path, size=st.st_size, limit=limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:  # replaced between the look and the open
            raise FileRefused(path, kind=kind)
        if st.st_size > limit:
            raise FileRefused(path, size=st.st_size, limit=limit)
        chunks, got = [], 0
        while got <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - got))
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if got > limit:  # it grew while read
            raise FileRefused(path, size=-1, limit=limit)
    finally:
        os.close(fd)
    return b"".join(chunks)


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def read_head(path: str | Path, n: int) -> bytes | None:
    """The first ``n`` bytes of the regular file ``path``, or None (missing, unreadable, not a regular
    file). Opened non-blocking and checked after opening, so a FIFO swapped in is never waited on."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read(n)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def read_small(path: str | Path, limit: int = SMALL_FILE, *, follow: bool = False) -> str:
    """``read_limited`` decoded as UTF-8 (``UnicodeDecodeError`` when it is not)."""
    return read_limited(path, limit, follow=follow).decode("utf-8")


def open_lines(path: str | Path, *, pipes: bool = True) -> BinaryIO:
    """``path`` opened for reading once, in binary: a regular file or (with ``pipes``) a pipe; ``-`` is
    standard input, as it is. Anything else is ``FileRefused`` and never opened."""
    if str(path) == "-":
        return sys.stdin.buffer
    path = Path(path)
    kind = kind_of(os.stat(path).st_mode)
    if kind is not None and not (pipes and kind == FIFO):
        raise FileRefused(path, kind=kind)
    f = open(path, "rb")
    try:
        again = kind_of(os.fstat(f.fileno()).st_mode)
    except OSError:
        again = "not a regular file"
    if again != kind:  # replaced between the look and the open
        f.close()
        raise FileRefused(path, kind=again or "not what it was a moment ago")
    return f


class LineTooLong(ValueError):
    """A line of ``line`` number longer than ``limit`` bytes (nothing after it was read)."""

    def __init__(self, line: int, limit: int):
        self.line, self.limit = line, limit
        super().__init__(f"line {line} is longer than {limit} bytes")


def iter_lines(f: BinaryIO, limit: int) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of ``f``, each read up to ``limit`` bytes: a longer line raises
    ``LineTooLong`` and nothing more is read, so no input, however long, is held whole."""
    n = 0
    for raw in iter(partial(f.readline, limit + 1), b""):
        n += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise LineTooLong(n, limit)
        yield n, raw


# -- writing: one atomic writer ----------------------------------------------------------------------------
#
# The rule: a write never goes through a symbolic link. The new bytes go to a temp file created afresh in
# the target's folder (``O_CREAT | O_EXCL | O_NOFOLLOW``: a symlink or file planted at the temp name is
# never opened through -- with a fixed ``tag`` it is removed and the temp created again, otherwise another
# random name is drawn), and the rename replaces the last path component itself: a symlink at ``path`` is
# replaced by the new regular file, and what it pointed to (inside the workspace or out of it) is never
# touched. A folder at ``path`` makes the rename fail and is left as it was. The folders above ``path`` are
# the caller's to check (``Workspace.inside_content`` resolves them inside ``content/``); this module does
# not resolve paths. A crash or an error before the rename leaves the old file whole and removes the temp
# (a killed process leaves ``.<name>.<tag or random>.tmp``, which the owners' scans remove).
#
# A run file (``chitragupta.engine.search.runfile.open_output``, ``--run``) is a user's output, not a cache, and
# differs on purpose: a symlink there is followed (``runfile`` resolves it first and replaces the file it
# points at, keeping the link), a FIFO or character device is written directly, not replaced, and the
# permission bits of the file replaced are kept (``fchmod`` on the temp). It still writes through
# ``temp_beside`` and ``put_in_place``.

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so a rename inside it survives a crash (best effort where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def discard(path) -> None:
    """Remove a temp file a failed write leaves, quietly: the error being raised is the one to report."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _split(path: str | Path) -> tuple[str, str]:
    folder, name = os.path.split(os.fspath(path))
    if not name or name in (".", "..") or "\x00" in name:
        raise ValueError(f"not a file name to write: {os.fspath(path)!r}")
    return folder or ".", name


def temp_beside(path: str | Path, *, mode: int = 0o600, tag: str | None = None) -> tuple[int, str]:
    """(descriptor open for writing, name) of a new temp file in ``path``'s folder, never a symlink's
    target: ``.<name>.<tag>.tmp`` (one left by a killed writer of the same tag is replaced), or with no
    ``tag`` ``.<name>.<random>.tmp``. ``mode``: its permission bits, less the umask (0o600: private, what a
    ``tempfile.mkstemp`` temp has; 0o666: as ``open`` makes a file)."""
    folder, name = _split(path)
    if tag is not None:
        tmp = f"{folder}/.{name}.{tag}.tmp"
        try:
            return os.open(tmp, _TEMP_FLAGS, mode), tmp
        except FileExistsError:
            os.unlink(tmp)  # a killed writer's, or something planted there: removed, never followed
            return os.open(tmp, _TEMP_FLAGS, mode), tmp
    for _ in range(100):
        tmp = f"{folder}/.{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, _TEMP_FLAGS, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temp file name", f"{folder}/.{name}.*.tmp")


def put_in_place(tmp: str, path: str | Path, *, durable: bool = True) -> None:
    """Rename the finished temp ``tmp`` onto ``path`` (``rename(2)``: replacing a symlink there, never its
    target); ``durable``: the folder fsynced too, so the rename survives a power cut."""
    os.rename(tmp, path)
    if durable:
        fsync_dir(_split(path)[0])


@contextmanager
def replacing(path: str | Path, *, durable: bool = True, mode: int = 0o600,
              tag: str | None = None) -> Iterator[BinaryIO]:
    """A binary file whose bytes replace ``path`` whole when the block ends without an exception; on an
    exception the old file stays and the temp is removed. ``durable``: the file and its folder fsynced (a
    process kill is survived either way). ``mode`` / ``tag``: as ``temp_beside``."""
    fd, tmp = temp_beside(path, mode=mode, tag=tag)
    try:
        with os.fdopen(fd, "wb") as f:
            fd = -1
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        put_in_place(tmp, path, durable=durable)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        discard(tmp)
        raise


def atomic_write_bytes(path: str | Path, data: bytes, *, durable: bool = True, mode: int = 0o600,
                       tag: str | None = None) -> None:
    """``path`` replaced whole by ``data`` (as ``replacing``, without a file object); its folder is made if
    missing. A reader sees the old file or the new one, never a part."""
    os.makedirs(_split(path)[0], exist_ok=True)
    _replace_bytes(path, data, durable, mode, tag)


def _replace_bytes(path, data: bytes, durable: bool, mode: int, tag: str | None) -> None:
    fd, tmp = temp_beside(path, mode=mode, tag=tag)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        put_in_place(tmp, path, durable=durable)
    except BaseException:
        discard(tmp)
        raise


def atomic_write_text(path: str | Path, text: str, *, durable: bool = True, mode: int = 0o600,
                      tag: str | None = None) -> None:
    """``atomic_write_bytes`` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable, mode=mode, tag=tag)


def replace_in_folder(folder: str, name: str, data: bytes, tag: str) -> None:
    """``atomic_write_bytes(folder/name, data, durable=False, tag=tag)`` for a writer of many small files
    into a folder it has already checked (``Workspace.inside_content``) and made: ``name`` must be one plain
    path component (a ValueError otherwise), and the folder is not looked at again."""
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    _replace_bytes(f"{folder}/{name}", data, False, 0o600, tag)


_NPY_LOCK = threading.Lock()


def load_npy(src, *, mmap_mode: str | None = None):
    """``np.load(src, mmap_mode=..., allow_pickle=False)`` under one process-wide lock. numpy parses a ``.npy``
    header with ``ast.literal_eval``, and CPython 3.11 (seen on 3.11.7; gh-106905) can raise ``SystemError: AST
    constructor recursion depth mismatch`` when two threads build ASTs at once: the MCP server's worker threads
    open an index while a rebuild maps its new generation. Opening is a header and a map (or, without
    ``mmap_mode``, one read), so the lock costs little."""
    import numpy as np

    with _NPY_LOCK:
        return np.load(src, mmap_mode=mmap_mode, allow_pickle=False)
