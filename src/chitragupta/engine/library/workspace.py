"""The workspace folder: its layout, safe file names for citekeys, and the write lock.

    <workspace>/config.toml                 optional; packaged defaults otherwise
    <workspace>/papers/bibliography.bib     what ``sync`` reads (``[corpus].bibliography``)
    <workspace>/content/ledger.sqlite       one row per source (``chitragupta.engine.library.ledger``)
    <workspace>/content/parsed/<name>.txt   extracted text, ``<name>`` made safe from the citekey
    <workspace>/content/index/doc/          the BM25 document index cache (``chitragupta.engine.index.store``)
    <workspace>/content/.lock               held by every command that writes

Every path the engine writes is resolved and checked to stay inside ``content/``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from chitragupta.engine.library.config import Config, load_config
# the one atomic writer (chitragupta.files), named here too: the workspace's writers have always
# imported it from this module
from chitragupta.files import atomic_write_bytes, atomic_write_text, discard, fsync_dir, replace_in_folder
from chitragupta.errors import WorkspaceBusy, WorkspaceError

__all__ = ["Workspace", "safe_name", "atomic_write_bytes", "atomic_write_text", "replace_in_folder", "fsync_dir",
           "discard"]

CONFIG_NAME = "config.toml"
LEDGER_NAME = "ledger.sqlite"

_SAFE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# Names Windows reserves in any folder, with any extension.
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}


def safe_name(citekey: str) -> str:
    """A file-name stem for ``citekey`` that cannot leave its folder and is unique per citekey.

    A plain key (letters, digits, ``._-``, at most 80 characters, not starting with a dot, not a
    reserved device name, not ending in a dot) is used as it is. Anything else is reduced to its safe
    characters and suffixed with a hash of the real key, so ``a/b`` and ``a_b`` never share a file.
    """
    stem = citekey.split(".")[0].upper()
    if _SAFE_RE.match(citekey) and not citekey.endswith(".") and stem not in _RESERVED:
        return citekey
    return hashed_name(citekey)


def hashed_name(citekey: str) -> str:
    """The always-hashed form of ``safe_name`` (also used to break case-insensitive collisions)."""
    digest = hashlib.blake2b(citekey.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    # No dots in a hashed name: Windows reads the part before the first dot as the device name.
    base = _UNSAFE_CHARS.sub("_", citekey).replace(".", "_").strip("_-")[:60] or "key"
    return f"{base}-{digest}"


def _resolved(path: Path, what: str) -> Path:
    """``path.resolve()``, or one WorkspaceError line for a symlink loop (Python raises RuntimeError)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:
        raise WorkspaceError(f"{path}: cannot follow {what} ({'a symlink loop' if isinstance(err, RuntimeError) else err})") \
            from None


_HELD = threading.local()  # .paths: the lock files this thread holds


@dataclass
class Workspace:
    """A workspace folder and its validated configuration."""

    root: Path
    config: Config

    @classmethod
    def open(cls, root: str | Path = ".", config: str | Path | Config | None = None,
             *, create: bool = False) -> "Workspace":
        """Open ``root``; ``config`` is a path, a loaded Config, or None for ``<root>/config.toml`` if present
        (whatever stands there: one that is not a readable config file is a ConfigError, not the defaults)."""
        root = Path(root).expanduser()
        if create:
            root.mkdir(parents=True, exist_ok=True)
        if not root.is_dir():
            raise WorkspaceError(f"{root}: workspace folder does not exist (create it, or pass --workspace DIR)")
        root = root.resolve()
        if isinstance(config, Config):
            cfg = config
        elif config is not None:
            cfg = load_config(config)
        else:
            # Anything at config.toml is read as the config: a folder, a FIFO or a link to nothing there
            # is one line saying so, never silently the defaults.
            default = root / CONFIG_NAME
            cfg = load_config(default if os.path.lexists(default) else None)
        return cls(root=root, config=cfg)

    # -- layout ---------------------------------------------------------------------------------
    @property
    def content(self) -> Path:
        return self.root / "content"

    @property
    def parsed_dir(self) -> Path:
        return self.content / "parsed"

    @property
    def index_dir(self) -> Path:
        return self.content / "index"

    @property
    def ledger_path(self) -> Path:
        return self.content / LEDGER_NAME

    @property
    def bibliography(self) -> Path:
        return _resolved(self.root / self.config.corpus.bibliography, "[corpus].bibliography")

    def inside_content(self, path: Path) -> Path:
        """``path`` resolved, or WorkspaceError if it would fall outside ``content/``."""
        resolved = _resolved(self.content / path if not path.is_absolute() else path, str(path))
        content = _resolved(self.content, "content/")
        if resolved != content and content not in resolved.parents:
            raise WorkspaceError(f"refusing to write {path}: outside {content}")
        return resolved

    def parsed_path(self, name: str, suffix: str = ".txt") -> Path:
        """The parsed-text path for a safe name, checked to stay inside ``content/parsed/``."""
        return self.inside_content(self.parsed_dir / f"{name}{suffix}")

    def relative(self, path: Path) -> str:
        """``path`` relative to the workspace root, POSIX-style (what the ledger stores)."""
        return path.resolve().relative_to(self.root).as_posix()

    def absolute(self, rel: str) -> Path:
        """A ledger-stored relative path made absolute, checked to stay inside ``content/``."""
        return self.inside_content(self.root / rel)

    # -- the write lock -------------------------------------------------------------------------
    # Re-entrant within a thread (``_HELD``): a command that holds the lock across its steps (``index``) calls
    # steps that take it themselves; other threads and processes still wait for it.
    @contextmanager
    def lock(self, command: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the workspace's exclusive write lock; wait up to ``timeout`` seconds, then WorkspaceBusy.
        A lock file that cannot be opened or locked (a read-only workspace, a folder named ``.lock``)
        is a WorkspaceError naming it."""
        lock_path = self.content / ".lock"
        held = _HELD.__dict__.setdefault("paths", set())
        key = os.path.abspath(lock_path)
        if key in held:  # this thread holds it already (a command's steps nest): held until the outer hold ends
            yield
            return
        wait = self.config.workspace.lock_timeout if timeout is None else timeout
        if self.content.exists() and not self.content.is_dir():
            raise WorkspaceError(f"{self.content} is not a folder; move it away (the workspace keeps its data there)")
        try:
            self.content.mkdir(parents=True, exist_ok=True)
            # never through a symlink: the lock's holder line is written into this file
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0),
                         0o644)
        except IsADirectoryError:
            raise WorkspaceError(f"{lock_path} is a folder, not the workspace's lock file; remove it") from None
        except OSError as err:
            raise WorkspaceError(f"cannot take the workspace lock {lock_path} ({err.strerror or err}); "
                                 f"{command} needs it to write") from None
        acquired = False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceError(f"{lock_path} is not a regular file, so it cannot be the workspace's lock; "
                                     "remove it")
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    acquired = True
                    break
                except OSError as err:
                    if err.errno not in (errno.EAGAIN, errno.EACCES):
                        raise WorkspaceError(f"cannot take the workspace lock {lock_path} "
                                             f"({err.strerror or err})") from None
                    if time.monotonic() >= deadline:
                        holder = _read_holder(fd)
                        raise WorkspaceBusy(
                            f"{self.root}: workspace is busy ({holder or 'another chitragupta process'} "
                            f"holds {lock_path.name}); waited {wait:g} s, try again when it finishes"
                        ) from None
                    time.sleep(0.05)
            try:  # who holds it, for a waiting process's message; a full disk may refuse the bytes
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{command} (pid {os.getpid()})".encode(), 0)
            except OSError:
                pass
            held.add(key)
            try:
                yield
            finally:
                held.discard(key)
        finally:
            if acquired:
                try:
                    os.ftruncate(fd, 0)
                except OSError:
                    pass
            os.close(fd)  # closing releases the flock


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
