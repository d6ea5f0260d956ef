"""Packed parsed texts: ``import`` appends each record's text to a few large pack files instead of one
file per record (a million small files cost a million inodes and a 4 KiB block each).

A pack is ``content/parsed/packs/<nnnnnn>-<8 hex>.pack``: the UTF-8 texts one after another, nothing
between them. A ledger row whose text is packed stores, in ``parsed_path``, the reference
``content/parsed/packs/<pack>#<offset>+<length>``; a row with a file of its own keeps a plain path, so
old ledgers need no migration and every reader that passes ``parsed_path`` along passes the reference
along too (``is_ref`` tells them apart; a plain path never names a ``.pack`` in ``packs/`` with a
``#`` suffix -- no writer makes one).

Packs are append-only and never rewritten in place: bytes no committed row points at are garbage,
never read. The random part of the name is drawn when a pack is created, so a pack deleted and made
again (a workspace cleared and imported anew) never has its old name: a reference names one text for
the life of the pack, and the index's fingerprint of a packed row is the reference and the pack's inode
(one ``stat`` per pack, not per row). Reclaiming garbage writes the live texts into a new pack, commits
the new references, then removes the old packs (``engine.library.importer``).

The writer (``PackWriter``) buffers appends and ``sync`` writes and fsyncs them (and the folder, when
it created a pack): the committer calls it before the transaction that commits the rows pointing at
them, so a committed row never points at bytes that are not on disk.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import stat

__all__ = ["PACKS_DIR", "PACK_BYTES", "is_ref", "split_ref", "text_size", "make_ref", "read_ref", "read_stretches", "PackWriter",
           "pack_stats"]

PACKS_DIR = "content/parsed/packs"  # where packs live, relative to the workspace root
PACK_BYTES = 1 << 30  # a pack is closed once it holds this much; the next text starts a new one
_BUFFER = 8 << 20  # appended bytes held before they are written
_NAME = re.compile(r"[0-9]{6}-[0-9a-f]{8}\.pack")


def make_ref(pack: str, offset: int, length: int) -> str:
    """The ``parsed_path`` of a text ``length`` bytes long at ``offset`` of pack ``pack`` (its name)."""
    return f"{PACKS_DIR}/{pack}#{offset}+{length}"


def split_ref(path: "str | os.PathLike | None") -> tuple[str, int, int] | None:
    """(the pack's path, offset, length) of a packed reference -- relative (``content/parsed/packs/...``)
    or absolute (the workspace root before it) -- else None (a plain path, or None)."""
    if path is None:
        return None
    s = os.fspath(path)
    if not isinstance(s, str):
        return None
    head, sep, tail = s.rpartition("#")
    if not sep:
        return None
    a, plus, b = tail.partition("+")  # the tail is [0-9]+ "+" [0-9]+ (ASCII digits), read without a regex
    if not (plus and a.isascii() and a.isdigit() and b.isascii() and b.isdigit()) or not _pack_head(head):
        return None
    return head, int(a), int(b)


@functools.lru_cache(maxsize=1024)
def _pack_head(head: str) -> bool:
    """``head`` (the part before "#") names a pack in a ``packs`` folder: one regex a pack, not a row (a
    build reads millions of references into a handful of packs)."""
    folder, _, name = head.rpartition("/")
    return _NAME.fullmatch(name) is not None and (folder == PACKS_DIR or folder.endswith("/" + PACKS_DIR))


def is_ref(path: "str | os.PathLike | None") -> bool:
    """``path`` is a packed reference (see the module docstring)."""
    return split_ref(path) is not None


def text_size(path: "str | os.PathLike | None") -> int:
    """The bytes of a parsed text without reading it: a packed reference's length, else the file's size
    (0 for None or a file that cannot be stat'ed). What a build counts to decide whether a process pool
    pays (``segments.small_text``, ``citations.store._small``)."""
    ref = split_ref(path)
    if ref is not None:
        return ref[2]
    if path is None:
        return 0
    try:
        return os.stat(path).st_size
    except (OSError, TypeError, ValueError):
        return 0


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_ref(path: "str | os.PathLike") -> bytes | None:
    """The bytes a packed reference names; None when its pack is missing, is not a regular file (a FIFO
    is never waited on), or is shorter than the reference (a pack truncated by hand)."""
    got = split_ref(path)
    if got is None:
        return None
    pack, offset, length = got
    try:
        fd = os.open(pack, _READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size < offset + length:
            return None
        os.set_blocking(fd, True)
        parts, pos, left = [], offset, length
        while left:
            b = os.pread(fd, left, pos)
            if not b:
                return None
            parts.append(b)
            pos += len(b)
            left -= len(b)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stretches(refs: list, most: int, gap: int = 1 << 16) -> dict:
    """key -> text for each (key, pack path, offset, length) of ``refs`` (in pack order: texts that follow
    one another within ``gap`` unused bytes are read by one ``pread`` of at most ``most`` bytes, decoded
    once when ASCII, each text a slice as its own decoding would give it; UTF-8 with replacement). A text
    whose pack is missing, not a regular file (a FIFO is never waited on) or shorter than its stretch is
    left out, for its reader's own path to find what is wrong."""
    stretches, cur = [], []
    for r in refs:
        if cur:
            c = cur[-1]
            end = c[2] + c[3]
            if r[1] != c[1] or r[2] < end or r[2] - end > gap or r[2] + r[3] - cur[0][2] > most:
                stretches.append(cur)
                cur = []
        cur.append(r)
    if cur:
        stretches.append(cur)
    out: dict = {}
    fds: dict[str, int | None] = {}
    try:
        for run in stretches:
            pack = run[0][1]
            if pack not in fds:
                try:
                    fd = os.open(pack, _READ_FLAGS)
                except OSError:
                    fd = None
                else:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):  # (a FIFO is never waited on)
                        os.close(fd)
                        fd = None
                    else:
                        os.set_blocking(fd, True)
                fds[pack] = fd
            fd = fds[pack]
            start, end = run[0][2], run[-1][2] + run[-1][3]
            if fd is None or os.fstat(fd).st_size < end:
                continue  # (left to the reader's own path, which finds what is wrong)
            try:
                data = os.pread(fd, end - start, start)
                while len(data) < end - start:
                    more = os.pread(fd, end - start - len(data), start + len(data))
                    if not more:
                        break
                    data += more
            except OSError:
                continue
            if len(data) < end - start:
                continue
            if data.isascii():  # (decoded once: each text a slice, as its own decoding would give it)
                whole = data.decode("ascii")
                for k, _pack, off, length in run:
                    out[k] = whole[off - start:off - start + length]
                continue
            view = memoryview(data)
            for k, _pack, off, length in run:
                out[k] = str(view[off - start:off - start + length], "utf-8", "replace")
    finally:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)
    return out


def pack_stats(folder: str) -> dict[str, tuple[int, int]]:
    """name -> (size, inode) of every pack (a regular file with a pack's name) in ``folder``."""
    out = {}
    try:
        with os.scandir(folder) as it:
            for e in it:
                if _NAME.fullmatch(e.name):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        out[e.name] = (st.st_size, st.st_ino)
    except OSError:
        pass
    return out


class PackWriter:
    """Appends texts to the packs of one workspace (``root``): to the last pack while it holds less than
    ``limit`` bytes (unless ``fresh``: then a new pack first), else to a new one. ``append`` returns the
    reference; the bytes reach the disk at ``sync``. The caller holds the workspace's lock: no other
    writer appends meanwhile."""

    def __init__(self, root: "str | os.PathLike", *, limit: int = PACK_BYTES, fresh: bool = False):
        self.folder = os.path.join(os.fspath(root), PACKS_DIR)
        self.limit = limit
        self.fd: int | None = None
        self.name = ""
        self.size = 0  # the pack's logical size: what is on disk and what the buffer holds
        self.buf: list[bytes] = []
        self.buffered = 0
        self.dirty: dict[str, int] = {}  # pack -> fd written to since the last sync
        self.fds: dict[str, int] = {}
        self.new_dir_entry = False
        self.created: list[str] = []  # packs this writer made
        self.synced: dict[str, int] = {}  # pack -> its size at the last sync
        self.safe: dict[str, int] = {}  # pack -> the size its committed rows may reach (``committed``)
        self.fresh = fresh

    def _open(self, need: int) -> None:
        if self.fd is not None and (self.size == 0 or self.size + need <= self.limit):
            return
        self._write_out()
        if self.fd is None and not self.fresh:
            os.makedirs(self.folder, exist_ok=True)
            packs = sorted(pack_stats(self.folder).items())
            if packs:
                name, (size, _ino) = packs[-1]
                if size + need <= self.limit:
                    fd = os.open(os.path.join(self.folder, name), os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
                    self.fd, self.name, self.size = fd, name, os.fstat(fd).st_size
                    self.fds[name] = fd
                    self.safe.setdefault(name, self.size)
                    return
        self._new()

    def _new(self) -> None:
        os.makedirs(self.folder, exist_ok=True)
        nums = [int(n[:6]) for n in pack_stats(self.folder)] + [int(n[:6]) for n in self.created]
        number = max(nums, default=0) + 1
        while True:
            name = f"{number:06d}-{secrets.token_hex(4)}.pack"
            try:
                fd = os.open(os.path.join(self.folder, name),
                             os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
                break
            except FileExistsError:
                continue
        self.fd, self.name, self.size = fd, name, 0
        self.fds[name] = fd
        self.created.append(name)
        self.safe[name] = 0
        self.new_dir_entry = True
        self.fresh = False

    def append(self, data: bytes) -> str:
        """Append ``data``; its reference (``make_ref``), valid once ``sync`` has returned."""
        self._open(len(data))
        ref = make_ref(self.name, self.size, len(data))
        self.buf.append(data)
        self.buffered += len(data)
        self.size += len(data)
        self.dirty[self.name] = self.fd
        if self.buffered >= _BUFFER:
            self._write_out()
        return ref

    def _write_out(self) -> None:
        if not self.buf:
            return
        data = b"".join(self.buf)
        self.buf, self.buffered = [], 0
        view, fd = memoryview(data), self.fd
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def sync(self) -> None:
        """Every appended byte written and fsynced (and the folder, if a pack was created): the rows
        pointing at them may now commit."""
        self._write_out()
        for name, fd in self.dirty.items():
            os.fsync(fd)
            self.synced[name] = os.fstat(fd).st_size
        self.dirty = {}
        if self.new_dir_entry:
            dfd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            self.new_dir_entry = False

    def committed(self) -> None:
        """The rows pointing at what the last ``sync`` wrote are committed."""
        self.safe.update(self.synced)

    def rollback(self) -> None:
        """A run stopped by an error: each pack this writer appended to cut back to what committed rows
        may reach (its size when opened, or at the last ``committed``), and the packs it made that no
        committed row uses removed. The bytes cut were never pointed at by a committed row."""
        self.buf, self.buffered = [], 0
        for name, fd in list(self.fds.items()):
            keep = self.safe.get(name)
            try:
                if keep is not None and keep < os.fstat(fd).st_size:
                    os.ftruncate(fd, keep)
                if keep == 0 and name in self.created:
                    os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds, self.dirty, self.fd = {}, {}, None
