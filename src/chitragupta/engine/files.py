"""Reading files the engine does not trust: small ones whole, line files a bounded line at a time.

    read_small(path, limit)            the text of a small regular file (a config, a manifest, a pointer)
    read_limited(path, limit)          its bytes
    read_head(path, n)                 the first n bytes of a regular file, or None
    open_lines(path, what)             a regular file or a pipe, opened to be read once, as lines

Each looks at what ``path`` is before opening it: a folder, a FIFO, a device (``/dev/zero``, a terminal) or
a socket is refused by its type and never opened (opening a FIFO waits for a writer; reading a device may
never end), and a small file is read only up to its ``limit``. ``read_small`` refuses by raising
``FileRefused``, an ``OSError`` saying what the path is, so a caller that already treats ``OSError`` as
"absent or corrupt" needs nothing more; callers that talk to a user turn ``kind`` / ``size`` into their
own one line.
"""

from __future__ import annotations

import os
import stat
import sys
from functools import partial
from pathlib import Path
from typing import BinaryIO, Iterator

__all__ = ["FileRefused", "kind_of", "read_small", "read_limited", "open_lines", "iter_lines", "LineTooLong",
           "SMALL_FILE", "read_head"]

SMALL_FILE = 1 << 24  # CURRENT, manifest.json, CHECKED: anything bigger is not ours

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is ("a folder", "a pipe (FIFO)", ...); None for a regular file."""
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
    if kind is not None and not (pipes and kind == "a pipe (FIFO)"):
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
