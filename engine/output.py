"""Where a command's output file goes: ``-`` (stdout), a regular file (replaced atomically), or a FIFO or
character device (written directly, never renamed over).

A regular file is written to a temp file beside it and renamed into place, so a reader (or a crash)
sees the old run or the new one; a symlink is followed, so the file it points at is replaced and the
link kept; an existing file keeps its permission bits. A FIFO or a device such as ``/dev/stdout`` is
opened and written like a stream: replacing a device node with a regular file (as a rename would, and
as root can) is never right. A directory, socket or block device is refused with one line.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

from engine.errors import OutputError, UsageError

__all__ = ["open_output", "describe"]


def describe(path: str) -> str:
    """How the output names its destination in messages."""
    return "stdout" if path == "-" else str(path)


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
    target = Path(os.path.realpath(Path(path).expanduser()))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot use it ({err.strerror or err})") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            try:
                f = open(target, "wb")
            except OSError as err:
                raise UsageError(f"{what} {path}: cannot open it for writing ({err.strerror or err})") from None
            with _reported(path, what), f:
                yield f
            return
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise UsageError(f"{what} {path} is {kind}; name a file to write (or - for stdout)")
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
        os.fchmod(fd, mode)
        with _reported(path, what), os.fdopen(fd, "wb") as f:
            yield f
        with _reported(path, what):
            os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
