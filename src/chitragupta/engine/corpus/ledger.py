"""The ledger: one SQLite row per source, written in transactions.

A row records what the corpus holds for one citekey: title, abstract and keywords where the source has
them, the parse status (``parsed``, ``no-file``, ``failed`` with a reason) and the parsed text's path
relative to the workspace. Only ledger rows are ever indexed, so every hit is citable.

Change stamp: ``meta.changes`` counts writes to ``sources`` -- once per ``upsert`` call (the only way
this code inserts), and per row by triggers for every UPDATE or DELETE, whoever issues it (an older
version of this code, a hand edit in the ``sqlite3`` shell). ``meta.ledger_id`` is a random id given to
the database when it is created. ``change_stamp()`` returns both with the schema cookie: equal stamps
mean the rows are as they were, which lets a search skip re-reading a large ledger. (A per-row INSERT
trigger would catch a hand-typed INSERT too, but costs 30 us a row, 6x an upsert; ``chitragupta index``
always compares every row, so it is the answer to an INSERT typed by hand.)
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator

from chitragupta.errors import WorkspaceError

__all__ = ["Ledger", "LedgerRow", "STATUSES", "SCHEMA_VERSION", "COLUMNS"]

SCHEMA_VERSION = 1
STATUSES = ("parsed", "no-file", "failed")

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (
    citekey         TEXT PRIMARY KEY,
    title           TEXT NOT NULL DEFAULT '',
    abstract        TEXT,
    keywords        TEXT,
    status          TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    reason          TEXT,
    parsed_path     TEXT,
    origin          TEXT NOT NULL,
    source_path     TEXT,
    source_size     INTEGER,
    source_mtime_ns INTEGER,
    source_hash     TEXT,
    backend         TEXT,
    updated_at      REAL NOT NULL
);
CREATE TRIGGER IF NOT EXISTS sources_changed_upd AFTER UPDATE ON sources
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'; END;
CREATE TRIGGER IF NOT EXISTS sources_changed_del AFTER DELETE ON sources
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'; END;
"""

_COLUMNS = (
    "citekey", "title", "abstract", "keywords", "status", "reason", "parsed_path", "origin",
    "source_path", "source_size", "source_mtime_ns", "source_hash", "backend", "updated_at",
)
COLUMNS = _COLUMNS  # the order of ``Ledger.upsert_values``' tuples


@dataclass(frozen=True)
class LedgerRow:
    """One source. ``parsed_path`` is workspace-relative; ``origin`` is the .bib or .jsonl it came from."""

    citekey: str
    title: str
    status: str
    origin: str
    abstract: str | None = None
    keywords: tuple[str, ...] = ()
    reason: str | None = None
    parsed_path: str | None = None
    source_path: str | None = None
    source_size: int | None = None
    source_mtime_ns: int | None = None
    source_hash: str | None = None
    backend: str | None = None
    updated_at: float = field(default=0.0, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not one of {', '.join(STATUSES)}")

    def _values(self) -> tuple:
        return (
            self.citekey, self.title, self.abstract,
            json.dumps(list(self.keywords), ensure_ascii=False) if self.keywords else None,
            self.status, self.reason, self.parsed_path, self.origin, self.source_path,
            self.source_size, self.source_mtime_ns, self.source_hash, self.backend,
            self.updated_at or time.time(),
        )

    @classmethod
    def _from_sql(cls, r: tuple) -> "LedgerRow":
        d = dict(zip(_COLUMNS, r))
        kw = d.pop("keywords")
        return cls(keywords=tuple(json.loads(kw)) if kw else (), **d)

    def with_(self, **changes) -> "LedgerRow":
        return replace(self, **changes)


class Ledger:
    """The SQLite ledger at ``content/ledger.sqlite``. Use as a context manager, or call ``close``."""

    def __init__(self, path: Path, *, create: bool = True, shared: bool = False):
        """``shared``: the connection may be used from other threads (the caller serializes access)."""
        self.path = Path(path)
        if not create and not self.path.exists():
            raise WorkspaceError(
                f"{self.path}: no ledger yet; run `chitragupta sync` (BibTeX) or `chitragupta import FILE.jsonl` first"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=not shared)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_DDL)
            got = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if got is None:
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(got[0]) != SCHEMA_VERSION:
                raise WorkspaceError(
                    f"{self.path}: ledger schema {got[0]} is not the supported {SCHEMA_VERSION}"
                )
            if self._db.execute("SELECT value FROM meta WHERE key='ledger_id'").fetchone() is None:
                # a ledger from before the change stamp (or a new one): its counter starts here
                self._db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                                     [("ledger_id", secrets.token_hex(8)), ("changes", "0")])
        except sqlite3.DatabaseError as err:
            raise WorkspaceError(f"{self.path}: not a usable ledger database ({err}); move it aside and re-run sync") from err

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- reads ----------------------------------------------------------------------------------
    def rows(self, origin: str | None = None) -> list[LedgerRow]:
        """Every row (or those from one origin), in citekey order."""
        sql = f"SELECT {', '.join(_COLUMNS)} FROM sources"
        args: tuple = ()
        if origin is not None:
            sql += " WHERE origin = ?"
            args = (origin,)
        rows = [LedgerRow._from_sql(r) for r in self._db.execute(sql, args)]
        rows.sort(key=lambda r: r.citekey)
        return rows

    def index_view(self) -> list[tuple[str, str, str, str | None]]:
        """(citekey, title, status, parsed_path) of every row, in citekey order: what the index reads."""
        got = self._db.execute("SELECT citekey, title, status, parsed_path FROM sources").fetchall()
        got.sort(key=lambda r: r[0])
        return got

    def get(self, citekey: str) -> LedgerRow | None:
        r = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM sources WHERE citekey = ?", (citekey,)).fetchone()
        return LedgerRow._from_sql(r) if r else None

    def citekeys(self) -> list[str]:
        return sorted(r[0] for r in self._db.execute("SELECT citekey FROM sources"))

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM sources").fetchone()[0])

    def change_stamp(self) -> str:
        """``<ledger_id>:<changes>:<schema cookie>``: changes whenever any row is written, or the tables or
        triggers are redefined (see the module docstring)."""
        got = dict(self._db.execute("SELECT key, value FROM meta WHERE key IN ('ledger_id', 'changes')").fetchall())
        cookie = self._db.execute("PRAGMA schema_version").fetchone()[0]
        return f"{got.get('ledger_id', '-')}:{got.get('changes', '-')}:{cookie}"

    def index_rows(self, citekeys: Iterable[str]) -> dict[str, tuple[str, str, str, str | None]]:
        """``index_view``'s (citekey, title, status, parsed_path) for the given citekeys that exist."""
        out = {}
        for key in citekeys:
            r = self._db.execute("SELECT citekey, title, status, parsed_path FROM sources WHERE citekey = ?",
                                 (key,)).fetchone()
            if r is not None:
                out[key] = r
        return out

    def import_state(self) -> dict[str, tuple[str, str, str | None, str | None, str | None]]:
        """citekey -> (origin, status, parsed_path, source_hash, keywords as stored: JSON or None) of every
        row: what ``import`` compares a record with, without building a ``LedgerRow`` per row."""
        out = {}
        shared: dict[str, str] = {}  # one string object per distinct origin and status
        for key, origin, status, path, digest, kws in self._db.execute(
                "SELECT citekey, origin, status, parsed_path, source_hash, keywords FROM sources"):
            origin = shared.setdefault(origin, origin)
            out[key] = (origin, shared.setdefault(status, status), path, digest, kws)
        return out

    def get_meta(self, key: str) -> str | None:
        r = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return r[0] if r else None

    # -- writes (call inside ``transaction``) ---------------------------------------------------
    def upsert(self, rows: Iterable[LedgerRow]) -> None:
        marks = ", ".join("?" for _ in _COLUMNS)
        self._db.executemany(
            f"INSERT OR REPLACE INTO sources ({', '.join(_COLUMNS)}) VALUES ({marks})",
            [r._values() for r in rows],
        )
        self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'")

    def upsert_values(self, values: list[tuple]) -> None:
        """``upsert`` for rows given as tuples in ``COLUMNS`` order, keywords already JSON (what
        ``LedgerRow._values`` returns): the bulk import's path, without a ``LedgerRow`` per row."""
        if not values:
            return
        marks = ", ".join("?" for _ in _COLUMNS)
        self._db.executemany(f"INSERT OR REPLACE INTO sources ({', '.join(_COLUMNS)}) VALUES ({marks})", values)
        self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'")

    def delete(self, citekeys: Iterable[str]) -> None:
        self._db.executemany("DELETE FROM sources WHERE citekey = ?", [(k,) for k in citekeys])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def delete_meta(self, key: str) -> None:
        self._db.execute("DELETE FROM meta WHERE key = ?", (key,))

    def cache_for_bulk(self, mib: int = 64) -> None:
        """A larger page cache for this connection (a bulk write into a big ledger touches many index pages)."""
        self._db.execute(f"PRAGMA cache_size = {-int(mib) * 1024}")
