"""The ledger: one SQLite row per source, written in transactions.

A row records what the corpus holds for one citekey: title, abstract, keywords and the bibliographic
metadata (authors, year, venue, type, doi; ``metadata.py`` has the rules) where the source has them, the
parse status (``parsed``, ``no-file``, ``failed`` with a reason) and the parsed text's path
relative to the workspace. Only ledger rows are ever indexed, so every hit is citable.

Change stamp: ``meta.changes`` counts writes to ``sources`` -- once per ``upsert`` call (the only way
this code inserts), and per row by triggers for every UPDATE or DELETE, whoever issues it (an older
version of this code, a hand edit in the ``sqlite3`` shell). ``meta.ledger_id`` is a random id given to
the database when it is created. ``change_stamp()`` returns both with the schema cookie: equal stamps
mean the rows are as they were, which lets a search skip re-reading a large ledger. (A per-row INSERT
trigger would catch a hand-typed INSERT too, but costs 30 us a row, 6x an upsert; ``chitragupta index``
always compares every row, so it is the answer to an INSERT typed by hand.)

Opened with ``create=False`` (every reader: search, index checks, enrich), the ledger is never written
(``PRAGMA query_only``), so a read-only workspace (``chmod -R a-w``, a read-only mount) can be searched:
where the file or folder cannot be written it is opened ``mode=ro``, and where even that cannot read it
(a write-ahead-log database needs a ``-shm`` file the folder cannot hold) ``immutable=1`` -- when no
write-ahead log is pending; else it says so.

A damaged ledger (bytes overwritten, a truncated file, not SQLite at all) or one that cannot be written
(a full disk, a read-only folder) is a one-line WorkspaceError naming ``content/ledger.sqlite`` and what
to do, from any method, never a ``sqlite3`` traceback. Text that is not UTF-8 in a row (a hand edit, a
damaged page) is read with the bad bytes as U+FFFD and logged once as a warning.

Values of the wrong type, which only a hand edit puts there (SQLite lets ``UPDATE sources SET citekey =
NULL`` or ``= X'..'`` through): a row whose citekey is not text (NULL or a BLOB) cannot be cited, so
every reader skips it and logs one warning (counted through the citekey index, so a healthy ledger pays
nothing for the check), and ``sync`` and ``import`` drop it (``drop_unkeyed``); a BLOB or a number where
other text belongs (a title, a path) is read as the text it holds, a number column that holds text as
unknown.

Reference lists (``engine.index.references`` writes them, ``engine.citations`` reads them): ``ref_lists`` a
row per source (the document fingerprint and entry ``RULES`` parsed with, whether a list was found, its
notes), ``ref_entries`` a row per entry (``engine.text.entries.Entry``'s fields, authors and names joined by
newlines), ``ref_links`` the kept resolution, current while ``meta.links`` names the ledger's state; made by
the first writer that opens an older ledger, and no part of the change stamp's counter.

Schema 3 added ``venue``, ``type``, ``doi`` and ``author_names`` (a JSON list of [family, given] pairs) to
schema 2's ``authors`` (a JSON list of display strings) and ``year`` (text: the year's digits since 3).
An older ledger is read as it is -- its missing columns NULL, its ``year`` text read by ``year_of`` (an old
``2020a`` is 2020, ``in press`` none), its family names split from the display strings -- and a writer
migrates it in one transaction (``ALTER TABLE ... ADD COLUMN``, rows kept); the next sync or import fills
the new columns without parsing any document again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import secrets
import sqlite3
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import Iterable, Iterator

from chitragupta.engine.library.metadata import split_name, year_of
from chitragupta.errors import WorkspaceError

__all__ = ["Ledger", "LedgerRow", "STATUSES", "SCHEMA_VERSION", "COLUMNS", "ledger_error", "authors_json",
           "names_json", "year_text"]

_log = logging.getLogger(__name__)

SCHEMA_VERSION = 3  # 2: authors and year; 3: venue, type, doi, author_names (an older ledger gains them
# when a writer opens it, and is read as it is until then)
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
    updated_at      REAL NOT NULL,
    authors         TEXT,
    year            TEXT,
    venue           TEXT,
    type            TEXT,
    doi             TEXT,
    author_names    TEXT
);
CREATE TABLE IF NOT EXISTS ref_lists (citekey TEXT PRIMARY KEY, fingerprint BLOB NOT NULL, rules INTEGER NOT NULL,
    located INTEGER NOT NULL, notes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ref_entries (citekey TEXT NOT NULL, n INTEGER NOT NULL, text TEXT NOT NULL,
    authors TEXT NOT NULL, year INTEGER, title TEXT, venue TEXT, doi TEXT, arxiv TEXT, url TEXT, names TEXT NOT NULL,
    PRIMARY KEY (citekey, n)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ref_links (citekey TEXT NOT NULL, n INTEGER NOT NULL, target TEXT, why TEXT, work INTEGER,
    PRIMARY KEY (citekey, n)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS sources_changed_upd AFTER UPDATE ON sources
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'; END;
CREATE TRIGGER IF NOT EXISTS sources_changed_del AFTER DELETE ON sources
BEGIN UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'; END;
"""

_COLUMNS = (
    "citekey", "title", "abstract", "keywords", "status", "reason", "parsed_path", "origin",
    "source_path", "source_size", "source_mtime_ns", "source_hash", "backend", "updated_at", "authors", "year",
    "venue", "type", "doi", "author_names",
)
# columns each schema version added: NULL when reading an older ledger
_ADDED = {2: ("authors", "year"), 3: ("venue", "type", "doi", "author_names")}
COLUMNS = _COLUMNS  # the order of ``Ledger.upsert_values``' tuples
_NUMBERS = frozenset({"source_size", "source_mtime_ns", "updated_at"})


def _as_text(col: str) -> str:
    """A column read as text whatever a hand edit stored there (a BLOB's bytes, a number's digits)."""
    return col if col == "citekey" or col in _NUMBERS else f"CAST({col} AS TEXT)"


def _select(schema: int) -> str:
    """The columns of ``_COLUMNS`` as a ledger of ``schema`` can give them (NULL for what it lacks)."""
    missing = {c for v, cols in _ADDED.items() if v > schema for c in cols}
    return ", ".join("NULL" if c in missing else _as_text(c) for c in _COLUMNS)


_SELECT = _select(SCHEMA_VERSION)
_META = ("authors", "year", "venue", "type", "doi", "author_names")  # import_state's metadata, in this order
_VIEW = f"citekey, {_as_text('title')}, {_as_text('status')}, {_as_text('parsed_path')}"
_KEYED = "typeof(citekey) = 'text'"
# The rows whose citekey is not text, as ranges of the citekey index (NULLs sort first, then numbers,
# then text from '', then BLOBs): counted without reading the table.
_UNKEYED = "(citekey IS NULL OR citekey < '' OR citekey >= X'')"


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
    authors: tuple[str, ...] = ()  # as the source gives them ("Last, First" or "First Last"), in order
    year: int | None = None  # ``metadata.year_of`` of what the source wrote ("2020a" is 2020; "in press" None)
    venue: str | None = None  # journal, booktitle, or a thesis's or report's issuer (``metadata``)
    type: str | None = None  # the BibTeX entry type, lower case
    doi: str | None = None  # normalised: no URL or "doi:" prefix, lower case
    author_names: tuple[tuple[str, str], ...] = ()  # (family, given) per author, "others" left out

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not one of {', '.join(STATUSES)}")

    def _values(self) -> tuple:
        return (
            self.citekey, self.title, self.abstract,
            json.dumps(list(self.keywords), ensure_ascii=False) if self.keywords else None,
            self.status, self.reason, self.parsed_path, self.origin, self.source_path,
            self.source_size, self.source_mtime_ns, self.source_hash, self.backend,
            self.updated_at or time.time(), authors_json(self.authors), year_text(self.year),
            self.venue, self.type, self.doi, names_json(self.author_names),
        )

    @classmethod
    def _from_sql(cls, r: tuple) -> "LedgerRow":
        d = dict(zip(_COLUMNS, r))
        for col in ("source_size", "source_mtime_ns"):
            if not isinstance(d[col], int):  # text where a number belongs (a hand edit): unknown
                d[col] = None
        if not isinstance(d["updated_at"], (int, float)):
            d["updated_at"] = 0.0
        if d["title"] is None:
            d["title"] = ""
        if d["origin"] is None:
            d["origin"] = ""
        keywords = _string_list(d.pop("keywords"))
        d["authors"] = _string_list(d["authors"])
        d["year"] = year_of(d["year"])  # a hand edit or an older ledger's "in press": None
        d["author_names"] = _names(d["author_names"], d["authors"])
        for col in ("venue", "type", "doi"):
            if not isinstance(d[col], str) or not d[col]:
                d[col] = None
        if d["status"] not in STATUSES:  # only a damaged file gets past the CHECK constraint
            d["reason"] = f"damaged ledger row (status {d['status']!r}); run sync or import again"
            d["status"] = "failed"
        return cls(keywords=keywords, **d)

    def with_(self, **changes) -> "LedgerRow":
        return replace(self, **changes)


def authors_json(authors) -> str | None:
    """Authors as the ledger stores them (a JSON list; None for none), as keywords are."""
    return json.dumps(list(authors), ensure_ascii=False) if authors else None


def year_text(year: int | None) -> str | None:
    """A year as the ledger stores it (its ``year`` column is text): the integer's digits, or None."""
    return None if year is None else str(year)


def names_json(names) -> str | None:
    """(family, given) pairs as the ledger stores them (a JSON list of pairs; None for none)."""
    return json.dumps([list(n) for n in names], ensure_ascii=False) if names else None


def _names(stored, authors) -> tuple[tuple[str, str], ...]:
    """The stored (family, given) pairs; where there are none (a ledger from before schema 3, until a sync
    or import fills them), the display names split as BibTeX would (``split_name``), braces dropped.
    ``authors``: the display names, or their stored JSON (read only when needed)."""
    if stored:
        try:
            got = json.loads(stored)
        except (ValueError, RecursionError, TypeError):
            got = None
        if type(got) is list:  # (what json.loads makes: exact types)
            return tuple((p[0], p[1]) for p in got
                         if type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is str)
    out = []
    for a in (authors if isinstance(authors, tuple) else _string_list(authors)):
        if a.strip().lower() == "others":
            continue
        fam, given = split_name(a)
        out.append((fam.replace("{", "").replace("}", ""), given.replace("{", "").replace("}", "")))
    return tuple(out)


def _string_list(stored) -> tuple[str, ...]:
    """A JSON list of strings as stored; () for none, and for anything else (a hand-edited or damaged row)."""
    if not stored:
        return ()
    try:
        got = json.loads(stored)
    except (ValueError, RecursionError, TypeError):
        return ()
    return tuple(k for k in got if isinstance(k, str)) if isinstance(got, list) else ()


_DECODE = "Could not decode to UTF-8"  # sqlite3's message for TEXT that is not UTF-8


def ledger_error(path: Path, err: Exception) -> "WorkspaceError":
    """The one-line error for a sqlite3 failure on the ledger at ``path``: what it means, what to do."""
    msg = str(err) or type(err).__name__
    low = msg.lower()
    if "readonly" in low or "read-only" in low:
        return WorkspaceError(f"{path}: cannot write the ledger ({msg}): the workspace is read-only; searching "
                              "works as it is, writing needs a writable copy of the workspace")
    if "locked" in low or "busy" in low:
        return WorkspaceError(f"{path}: the ledger is locked by another process ({msg}); try again when it finishes")
    if "full" in low or "i/o error" in low or "out of memory" in low:
        return WorkspaceError(f"{path}: the ledger could not be written ({msg}); nothing was half-written: free "
                              "space (or fix the disk) and run the command again")
    if "unable to open" in low:
        return WorkspaceError(f"{path}: cannot open the ledger ({msg}); check that the file and its folder are "
                              "readable (and writable, to sync or import)")
    return WorkspaceError(
        f"{path}: the ledger is damaged or not a chitragupta ledger ({msg}); move it aside "
        f"(mv {path} {path}.damaged) and run `chitragupta sync` or `chitragupta import FILE.jsonl` again to "
        f"rebuild it (the sqlite3 shell's `.recover` may save its rows)")


def _checked(method):
    """Run a Ledger method with sqlite3's failures turned into ``ledger_error``; a read that meets text
    that is not UTF-8 is run again with the bad bytes decoded as U+FFFD (logged once)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.OperationalError, UnicodeDecodeError) as err:
            if (isinstance(err, UnicodeDecodeError) or _DECODE in str(err)) and self._lenient():
                return run(self, *args, **kwargs)
            raise ledger_error(self.path, err) from None
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # a bug in this code's SQL, not the file's fault
        except sqlite3.DatabaseError as err:
            raise ledger_error(self.path, err) from None

    return run


_WARNED: set[tuple[str, str]] = set()  # (ledger, what) this process has warned about


def _replace_decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


class Ledger:
    """The SQLite ledger at ``content/ledger.sqlite``. Use as a context manager, or call ``close``.

    ``create=False``: the ledger must exist, and is opened read-only (see the module docstring)."""

    def __init__(self, path: Path, *, create: bool = True, shared: bool = False):
        """``shared``: the connection may be used from other threads (the caller serializes access)."""
        self.path = Path(path)
        self.problems: list[str] = []  # what was read around (text that is not UTF-8), once each
        if not create and not self.path.exists():
            raise WorkspaceError(
                f"{self.path}: no ledger yet; run `chitragupta sync` (BibTeX) or `chitragupta import FILE.jsonl` first"
            )
        if not create and self.path.is_dir():
            raise WorkspaceError(f"{self.path}: is a directory, not a ledger; move it aside and run sync or import")
        self._db = None
        self._schema = SCHEMA_VERSION
        self._select = _SELECT
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                           check_same_thread=not shared)
                self._setup()
            else:
                self._db = self._open_readonly(shared)
        except sqlite3.DatabaseError as err:
            if self._db is not None:
                self._db.close()
            raise ledger_error(self.path, err) from None
        except WorkspaceError:
            if self._db is not None:
                self._db.close()
            raise

    def _setup(self) -> None:
        db = self._db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_DDL)
        got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if got is None:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif self._check_schema(got[0]) < SCHEMA_VERSION:
            self._migrate(self._schema)
        self._schema = SCHEMA_VERSION
        if db.execute("SELECT value FROM meta WHERE key='ledger_id'").fetchone() is None:
            # a ledger from before the change stamp (or a new one): its counter starts here
            db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                           [("ledger_id", secrets.token_hex(8)), ("changes", "0")])

    def _check_schema(self, value) -> int:
        """The ledger's schema version; WorkspaceError unless this code reads it (this one or older)."""
        try:
            version = int(str(value))
        except ValueError:
            version = -1
        if not 1 <= version <= SCHEMA_VERSION:
            raise WorkspaceError(f"{self.path}: ledger schema {str(value)[:40]} is not one this version reads "
                                 f"(1 to {SCHEMA_VERSION}); a newer chitragupta wrote it, or it is damaged")
        self._schema = version
        self._select = _select(version)
        return version

    def _migrate(self, version: int) -> None:
        """Bring a ledger of schema ``version`` to ``SCHEMA_VERSION`` in one transaction (the columns
        later versions added, NULL until a sync or import fills them)."""
        with self.transaction():
            have = {r[1] for r in self._db.execute("PRAGMA table_info(sources)")}
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for col in _ADDED.get(v, ()):
                    if col not in have:
                        self._db.execute(f"ALTER TABLE sources ADD COLUMN {col} TEXT")
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))
        self._select = _select(SCHEMA_VERSION)

    def _open_readonly(self, shared: bool) -> sqlite3.Connection:
        """A connection that never writes: an ordinary one with ``query_only`` set (so closing it tidies the
        write-ahead log as a writer's would); where the folder or file cannot be written, ``mode=ro``; where
        even that cannot read a write-ahead-log database (it needs a ``-shm`` file it cannot make),
        ``immutable=1``."""
        uri = "file:" + urllib.parse.quote(str(self.path.absolute()))
        first: sqlite3.DatabaseError | None = None
        for target, as_uri in ((str(self.path), False), (uri + "?mode=ro", True), (uri + "?mode=ro&immutable=1", True)):
            if target.endswith("immutable=1"):
                wal = Path(f"{self.path}-wal")
                try:
                    pending = wal.stat().st_size > 0
                except OSError:
                    pending = False
                if pending:  # immutable would read around the log's committed writes
                    raise WorkspaceError(
                        f"{self.path}: cannot be read in this read-only folder: its write-ahead log ({wal.name}) "
                        f"holds writes not yet in the ledger ({first}); open the workspace once where it can "
                        "be written (any chitragupta command), or copy it somewhere writable")
            db = None
            try:
                db = sqlite3.connect(target, uri=as_uri, timeout=30.0, isolation_level=None,
                                     check_same_thread=not shared)
                db.execute("PRAGMA query_only = ON")
                got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                db.execute("SELECT citekey FROM sources LIMIT 0").fetchall()
            except sqlite3.OperationalError as err:
                if db is not None:
                    db.close()
                low = str(err).lower()
                if not target.endswith("immutable=1") and ("readonly" in low or "read-only" in low
                                                           or "unable to open" in low):
                    first = first or err  # a read-only folder or file: the next, more careful way
                    continue
                if not target.endswith("immutable=1") and ("disk i/o" in low or "full" in low):
                    # a full disk: reading a write-ahead-log database needs room for its -shm index. A
                    # reader never writes: read the ledger as it was before the log's writes, and say so
                    db = self._immutable(uri, shared, err)
                    if db is not None:
                        return db
                raise
            except sqlite3.DatabaseError:
                if db is not None:
                    db.close()
                raise
            if got is not None:
                try:
                    self._check_schema(got[0])
                except WorkspaceError:
                    db.close()
                    raise
            return db
        raise first  # pragma: no cover - the loop returns or raises

    def _immutable(self, uri: str, shared: bool, err: Exception):
        """The ledger opened ``immutable=1`` (its file alone, never written), with a warning when a
        write-ahead log is left out; None when even that cannot be read."""
        try:
            db = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=30.0, isolation_level=None,
                                 check_same_thread=not shared)
            db.execute("PRAGMA query_only = ON")
            got = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            db.execute("SELECT citekey FROM sources LIMIT 0").fetchall()
        except sqlite3.DatabaseError:
            return None
        if got is not None:
            self._check_schema(got[0])
        try:
            pending = Path(f"{self.path}-wal").stat().st_size > 0
        except OSError:
            pending = False
        if pending:
            self._warn_once("wal", f"{self.path}: its latest writes (the write-ahead log {self.path.name}-wal) "
                                   f"cannot be read here ({err}: a full disk?); read as it was before them; free "
                                   "space and they are read again")
        return db

    def _lenient(self) -> bool:
        """Switch to decoding text with U+FFFD for bad bytes (once); False when already switched."""
        if self._db.text_factory is _replace_decode:
            return False
        self._db.text_factory = _replace_decode
        self._warn_once("utf-8", f"{self.path}: some rows hold text that is not UTF-8 (a hand edit or a damaged "
                                 "page?); read with the bad bytes as U+FFFD; run sync or import again to rewrite them")
        return True

    def _warn_once(self, what: str, note: str) -> None:
        """``note`` in ``problems`` (once per connection) and logged once per process and ledger: a
        command opens the ledger more than once."""
        if note in self.problems:
            return
        self.problems.append(note)
        if (str(self.path), what) not in _WARNED:
            _WARNED.add((str(self.path), what))
            _log.warning(note)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all. A failure to begin or commit (locked, a full
        disk, a damaged file) is ``ledger_error``; after any failure nothing of the transaction is kept."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as err:
            raise ledger_error(self.path, err) from None
        try:
            yield
        except BaseException:
            self._rollback()
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as err:
            self._rollback()
            raise ledger_error(self.path, err) from None

    def _rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolls a failed transaction back itself; a rollback that fails has nothing left

    # -- reads ----------------------------------------------------------------------------------
    def _keyed(self, where: str = "") -> str:
        """A WHERE clause for the rows a reader may see: ``where`` (SQL, or ""), and only rows whose
        citekey is text when the ledger holds others (warned about once)."""
        if self.unkeyed():
            where = f"{where} AND {_KEYED}" if where else _KEYED
        return f" WHERE {where}" if where else ""

    @_checked
    def unkeyed(self) -> int:
        """How many rows have a citekey that is not text (NULL or a BLOB: a hand edit); readers skip
        them, and the first call that finds some logs a warning."""
        n = self._count_unkeyed()
        if n:
            self._warn_once("unkeyed", f"{self.path}: {n} row(s) have a citekey that is not text (NULL or a BLOB: "
                                       "a hand edit?) and are skipped; `chitragupta sync` or `import` drops them")
        return n

    def _count_unkeyed(self) -> int:
        return int(self._db.execute(f"SELECT COUNT(*) FROM sources WHERE {_UNKEYED}").fetchone()[0])

    @_checked
    def rows(self, origin: str | None = None) -> list[LedgerRow]:
        """Every row (or those from one origin), in citekey order."""
        args: tuple = ()
        where = ""
        if origin is not None:
            where, args = "origin = ?", (origin,)
        sql = f"SELECT {self._select} FROM sources" + self._keyed(where)
        rows = [LedgerRow._from_sql(r) for r in self._db.execute(sql, args)]
        rows.sort(key=lambda r: r.citekey)
        return rows

    @_checked
    def index_view(self) -> list[tuple[str, str, str, str | None]]:
        """(citekey, title, status, parsed_path) of every row, in citekey order: what the index reads."""
        got = self._db.execute(f"SELECT {_VIEW} FROM sources" + self._keyed()).fetchall()
        got.sort(key=itemgetter(0))
        return got

    @_checked
    def get(self, citekey: str) -> LedgerRow | None:
        r = self._db.execute(f"SELECT {self._select} FROM sources WHERE citekey = ?", (citekey,)).fetchone()
        return LedgerRow._from_sql(r) if r else None

    @_checked
    def citekeys(self) -> list[str]:
        return sorted(r[0] for r in self._db.execute("SELECT citekey FROM sources" + self._keyed()))

    @_checked
    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM sources" + self._keyed()).fetchone()[0])

    @_checked
    def change_stamp(self) -> str:
        """``<ledger_id>:<changes>:<schema cookie>``: changes whenever any row is written, or the tables or
        triggers are redefined (see the module docstring)."""
        got = dict(self._db.execute("SELECT key, value FROM meta WHERE key IN ('ledger_id', 'changes')").fetchall())
        cookie = self._db.execute("PRAGMA schema_version").fetchone()[0]
        return f"{got.get('ledger_id', '-')}:{got.get('changes', '-')}:{cookie}"

    @_checked
    def index_rows(self, citekeys: Iterable[str]) -> dict[str, tuple[str, str, str, str | None]]:
        """``index_view``'s (citekey, title, status, parsed_path) for the given citekeys that exist."""
        out = {}
        for key in citekeys:
            r = self._db.execute(f"SELECT {_VIEW} FROM sources WHERE citekey = ?", (key,)).fetchone()
            if r is not None:
                out[key] = r
        return out

    @_checked
    def cited_as(self, citekeys: Iterable[str]) -> dict[str, tuple[tuple[str, ...], int | None]]:
        """citekey -> (the family names of its authors, as ``LedgerRow.author_names`` reads them; its year)
        for the given citekeys that exist: what a hit carries to be cited ("Lo et al. (2020)")."""
        keys = list(dict.fromkeys(citekeys))
        cols = ", ".join("NULL" if c in self._missing() else _as_text(c) for c in ("authors", "author_names", "year"))
        out = {}
        for at in range(0, len(keys), 500):  # within SQLite's bound on a statement's parameters
            part = keys[at:at + 500]
            sql = f"SELECT citekey, {cols} FROM sources WHERE citekey IN ({', '.join('?' * len(part))})"
            for key, authors, names, year in self._db.execute(sql, part):
                out[key] = (tuple(f for f, _g in _names(names, _string_list(authors))), year_of(year))
        return out

    @_checked
    def import_state(self) -> dict[str, tuple]:
        """citekey -> (origin, status, parsed_path, source_hash, keywords, then the metadata as stored:
        authors, year, venue, type, doi, author_names) of every row: what ``import`` compares a record with,
        without building a ``LedgerRow`` per row. A column an older ledger lacks reads as None."""
        out = {}
        shared: dict[str, str] = {}  # one string object per distinct origin and status
        added = self._missing()
        cols = ", ".join("NULL" if c in added else _as_text(c)
                         for c in ("origin", "status", "parsed_path", "source_hash", "keywords") + _META)
        for key, origin, status, *rest in self._db.execute(f"SELECT citekey, {cols} FROM sources" + self._keyed()):
            out[key] = (shared.setdefault(origin, origin), shared.setdefault(status, status), *rest)
        return out

    @_checked
    def packed_texts(self) -> list[tuple[str, str]]:
        """(citekey, parsed_path) of every row whose parsed path is a packed text's reference
        (``chitragupta.engine.library.texts``): what reclaiming the packs' garbage reads."""
        where = "typeof(parsed_path) = 'text' AND substr(parsed_path, 1, 21) = 'content/parsed/packs/'"
        return self._db.execute("SELECT citekey, parsed_path FROM sources" + self._keyed(where)).fetchall()

    @_checked
    def packed_bytes(self) -> dict[str, int]:
        """pack file name -> the bytes the rows' packed references (``packed_texts``) take in it, summed in
        SQL (``<pack>#<offset>+<length>``: a pack's name is 20 characters, the length follows the '+')."""
        where = ("typeof(parsed_path) = 'text' AND substr(parsed_path, 1, 21) = 'content/parsed/packs/' "
                 "AND substr(parsed_path, 42, 1) = '#' AND instr(parsed_path, '+') > 0")
        return dict(self._db.execute(
            "SELECT substr(parsed_path, 22, 20), SUM(CAST(substr(parsed_path, instr(parsed_path, '+') + 1) AS INTEGER)) "
            "FROM sources" + self._keyed(where) + " GROUP BY 1").fetchall())

    def _missing(self) -> set[str]:
        return {c for v, cols in _ADDED.items() if v > self._schema for c in cols}

    @_checked
    def metadata_view(self) -> list[tuple]:
        """(citekey, author_names, year, keywords, venue, type, doi) of every row, in citekey order, read as
        ``LedgerRow`` reads them (an older ledger's names split from its display strings): what
        ``metadata.facets`` folds."""
        added = self._missing()
        cols = ", ".join("NULL" if c in added else _as_text(c)
                         for c in ("authors", "author_names", "year", "keywords", "venue", "type", "doi"))
        out = []
        for key, authors, names, year, kws, venue, typ, doi in self._db.execute(
                f"SELECT citekey, {cols} FROM sources" + self._keyed()):
            out.append((key, _names(names, authors), year_of(year), _string_list(kws),
                        venue or None, typ or None, doi or None))
        out.sort(key=itemgetter(0))
        return out

    @_checked
    def metadata_digest(self) -> str:
        """A digest of every row's citekey and the metadata ``metadata_view`` reads for filters (authors,
        author_names, year, keywords, venue, type) as stored: it changes when any of them does. Joined by
        SQLite a page of rows at a time, no Python object per row (~3.5 us a row on this host, a fifth
        of ``metadata_view``)."""
        added = self._missing()
        row = " || char(31) || ".join(f"coalesce({'NULL' if c in added else _as_text(c)}, char(30))" for c in
                                      ("citekey", "authors", "author_names", "year", "keywords", "venue", "type"))
        h = hashlib.blake2b(digest_size=16)
        after = None
        while True:
            where = self._keyed("" if after is None else "citekey > ?")
            last, text, n = self._db.execute(
                f"SELECT max(k), group_concat(x, char(29)), count(*) FROM (SELECT citekey AS k, {row} AS x "
                f"FROM sources{where} ORDER BY citekey LIMIT 65536)", () if after is None else (after,)).fetchone()
            if not n:
                return h.hexdigest()
            h.update(text.encode("utf-8", "surrogatepass") + b"\x1d")
            after = last

    @_checked
    def get_meta(self, key: str) -> str | None:
        r = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return r[0] if r else None

    # -- writes (call inside ``transaction``) ---------------------------------------------------
    @_checked
    def upsert(self, rows: Iterable[LedgerRow]) -> None:
        marks = ", ".join("?" for _ in _COLUMNS)
        self._db.executemany(
            f"INSERT OR REPLACE INTO sources ({', '.join(_COLUMNS)}) VALUES ({marks})",
            [r._values() for r in rows],
        )
        self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'")

    @_checked
    def upsert_values(self, values: list[tuple]) -> None:
        """``upsert`` for rows given as tuples in ``COLUMNS`` order, keywords already JSON (what
        ``LedgerRow._values`` returns): the bulk import's path, without a ``LedgerRow`` per row."""
        if not values:
            return
        marks = ", ".join("?" for _ in _COLUMNS)
        self._db.executemany(f"INSERT OR REPLACE INTO sources ({', '.join(_COLUMNS)}) VALUES ({marks})", values)
        self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'changes'")

    @_checked
    def move_texts(self, moves: list[tuple[str, str, str]]) -> None:
        """(citekey, old parsed path, new parsed path): each row still at the old path pointed at the new
        one (its text moved, unchanged); nothing else of the row changes."""
        if not moves:
            return
        self._db.executemany("UPDATE sources SET parsed_path = ? WHERE citekey = ? AND parsed_path = ?",
                             [(new, key, old) for key, old, new in moves])

    @_checked
    def delete(self, citekeys: Iterable[str]) -> None:
        self._db.executemany("DELETE FROM sources WHERE citekey = ?", [(k,) for k in citekeys])

    @_checked
    def drop_unkeyed(self) -> int:
        """Delete the rows whose citekey is not text (which no reader shows and no command can name);
        the number deleted. Their parsed files are left where they are."""
        if not self._count_unkeyed():
            return 0
        with self.transaction():
            return self._db.execute(f"DELETE FROM sources WHERE {_UNKEYED}").rowcount

    @_checked
    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @_checked
    def delete_meta(self, key: str) -> None:
        self._db.execute("DELETE FROM meta WHERE key = ?", (key,))

    # -- reference lists (``engine.index.references`` writes them, ``engine.citations`` reads them) ----
    def _has_references(self) -> bool:  # (an older ledger opened read-only has no tables until a writer opens it)
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'ref_links'").fetchone() is not None

    @_checked
    def reference_lists(self, citekey: str | None = None) -> dict[str, tuple[bytes, int, int, list[str]]]:
        """citekey -> (fingerprint, rules, located: 1 or 0, notes) of every stored list (or of one)."""
        where, args = ("WHERE citekey = ?", (citekey,)) if citekey is not None else ("", ())
        return {k: (fp, r, loc, [n for n in notes.split("\n") if n]) for k, fp, r, loc, notes in self._db.execute(
            f"SELECT * FROM ref_lists {where}", args)} if self._has_references() else {}

    @_checked
    def reference_counts(self) -> tuple[int, int, int]:
        """(sources with a stored list, sources stored without one, entries stored)."""
        if not self._has_references():
            return 0, 0, 0
        n, located = self._db.execute("SELECT COUNT(*), COALESCE(SUM(located), 0) FROM ref_lists").fetchone()
        return int(located), int(n - located), int(self._db.execute("SELECT COUNT(*) FROM ref_entries").fetchone()[0])

    @_checked
    def reference_rows(self, table: str, citekey: str | None = None) -> list[tuple]:
        """The rows of ``ref_entries`` or ``ref_links`` (of one source), in (citekey, n) order."""
        assert table in ("ref_entries", "ref_links")
        where, args = ("WHERE citekey = ?", (citekey,)) if citekey is not None else ("", ())
        return self._db.execute(f"SELECT * FROM {table} {where} ORDER BY citekey, n", args).fetchall() \
            if self._has_references() else []

    @_checked
    def put_references(self, lists: list[tuple]) -> None:
        """Store parsed lists (inside ``transaction``), each (citekey, fingerprint, rules, entries or None: no
        list, notes), replacing the citekey's; entries as ``reference_rows`` gives them, less the citekey."""
        db = self._db
        db.executemany("DELETE FROM ref_entries WHERE citekey = ?", [(k,) for k, *_ in lists])
        db.executemany("INSERT OR REPLACE INTO ref_lists VALUES (?, ?, ?, ?, ?)",
                       [(k, fp, rules, int(got is not None), "\n".join(notes)) for k, fp, rules, got, notes in lists])
        db.executemany("INSERT INTO ref_entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       [(k, *e) for k, _fp, _r, got, _n in lists for e in got or ()])
        db.execute("DELETE FROM meta WHERE key = 'links'")  # the kept resolution is stale

    @_checked
    def prune_references(self) -> None:
        """Drop the stored lists of citekeys the ledger no longer holds (inside ``transaction``)."""
        for table in ("ref_lists", "ref_entries", "ref_links"):
            self._db.execute(f"DELETE FROM {table} WHERE citekey NOT IN (SELECT citekey FROM sources)")

    @_checked
    def put_links(self, rows: list[tuple], key: str) -> None:
        """Replace the kept resolution (inside ``transaction``), made for ``key`` (``meta.links``)."""
        self._db.execute("DELETE FROM ref_links")
        self._db.executemany("INSERT INTO ref_links VALUES (?, ?, ?, ?, ?)", rows)
        self.set_meta("links", key)

    @_checked
    def cache_for_bulk(self, mib: int = 64) -> None:
        """A larger page cache for this connection (a bulk write into a big ledger touches many index pages)."""
        self._db.execute(f"PRAGMA cache_size = {-int(mib) * 1024}")
