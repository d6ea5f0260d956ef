"""Where a command's output file goes: ``-`` (stdout), a regular file (replaced atomically), or a FIFO or
character device (written directly, never renamed over).

A regular file is written to a temp file beside it and renamed into place, so a reader (or a crash)
sees the old run or the new one; a symlink is followed, so the file it points at is replaced and the
link kept; an existing file keeps its permission bits. A FIFO or a character device is opened and
written like a stream: replacing a device node with a regular file (as a rename would, and as root
can) is never right. ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N`` write to that open descriptor,
as a shell redirection does (no truncation, no rename: ``>> log`` keeps appending). A directory,
socket, block device or kernel interface file is refused with one line.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

from chitragupta.engine.workspace import discard
from chitragupta.errors import OutputError, UsageError

__all__ = ["open_output", "describe"]


def describe(path: str) -> str:
    """How the output names its destination in messages."""
    return "stdout" if path == "-" else str(path)


_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd|proc/\d+/fd)/(\d+)")
_STD = {"/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: str) -> int | None:
    """The descriptor a path names (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/2``), or None; -1 for
    another descriptor's path (``/dev/fd/63``), which is used only if it is a pipe or a device."""
    if path in _STD:
        return _STD[path]
    m = _FD_PATH.fullmatch(path)
    if not m:
        return None
    return int(m.group(1)) if int(m.group(1)) in (1, 2) else -1


@contextmanager
def _reported(path: str, what: str) -> Iterator[None]:
    """An OS error while writing becomes one line naming the output (a closed pipe is left to the CLI)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as err:
        raise OutputError(f"cannot write {what} {describe(path)}: {err.strerror or err}") from None


@contextmanager
def open_output(path: str, what: str = "--run") -> Iterator[BinaryIO]:
    """A binary file to write the output to; the write is complete (renamed, flushed) when the block ends
    without an exception, and a regular file is left untouched when it raises."""
    if path == "-":
        out = sys.stdout.buffer
        sys.stdout.flush()
        with _reported(path, what):
            yield out
            out.flush()
        return
    fd = _descriptor(str(path))
    if fd is not None and fd >= 0:  # /dev/stdout, /dev/stderr: the open file itself, as a shell redirection
        try:
            f = os.fdopen(os.dup(fd), "wb")
        except OSError as err:
            raise UsageError(f"{what} {path}: file descriptor {fd} is not open for writing ({err.strerror or err})") \
                from None
        sys.stdout.flush()
        with _reported(path, what), f:
            yield f
        return
    try:
        st = os.stat(Path(path).expanduser())
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot use it ({err.strerror or err})") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            try:
                f = open(Path(path).expanduser(), "wb")
            except OSError as err:
                raise UsageError(f"{what} {path}: cannot open it for writing ({err.strerror or err})") from None
            with _reported(path, what), f:
                yield f
            return
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise UsageError(f"{what} {path} is {kind}; name a file to write (or - for stdout)")
    if fd is not None:  # /dev/fd/N onto a regular file: which file is not ours to guess
        raise UsageError(f"{what} {path} names an open file by its descriptor; name the file itself "
                         "(a pipe such as >(gzip > run.gz) is fine)")
    target = Path(os.path.realpath(Path(path).expanduser()))  # a symlink's file is replaced, the link kept
    if target.parts[1:2] in (("proc",), ("sys",)):
        raise UsageError(f"{what} {path} is a kernel interface file ({target}); name a file to write")
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"{what} {path}: the folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot write in {folder} ({err.strerror or err})") from None
    try:
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        try:
            os.fchmod(fd, mode)
        except OSError:
            pass  # a file system without permission bits (vfat): the run is still written
        with _reported(path, what), os.fdopen(fd, "wb") as f:
            yield f
        with _reported(path, what):
            os.replace(tmp, target)
    except BaseException:
        discard(tmp)
        raise
