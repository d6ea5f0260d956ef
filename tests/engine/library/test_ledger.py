"""engine/library/ledger.py: the SQLite ledger read as it is found -- hand-edited, damaged, not a ledger,
not UTF-8, a full disk -- gives one clear line or a note, never a traceback, and a reader never writes it."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import import_jsonl
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import WorkspaceError

from helpers import (
    imported_workspace,
    one_error_line_after_progress,
    run_main,
    write_jsonl,
    write_lines,
)

EDITS = {
    "citekey NULL": "UPDATE sources SET citekey = NULL WHERE citekey = 'd1'",
    "citekey BLOB": "UPDATE sources SET citekey = X'6431' WHERE citekey = 'd1'",
    "title BLOB": "UPDATE sources SET title = X'426c6f62207469746c65' WHERE citekey = 'd1'",
    "title BLOB, not UTF-8": "UPDATE sources SET title = X'ff00fe' WHERE citekey = 'd1'",
    "path BLOB, keywords BLOB": "UPDATE sources SET parsed_path = X'6431', keywords = X'5b5d' WHERE citekey = 'd1'",
    "size as text": "UPDATE sources SET source_size = 'big', updated_at = X'00' WHERE citekey = 'd1'",
}


def _edited(tmp_path: Path, edit: str) -> Path:
    ws_dir = tmp_path / "ws"
    src = write_jsonl(tmp_path / "c.jsonl", [{"_id": f"d{i}", "title": f"Title {i}", "text": f"twin model {i}"}
                                             for i in range(4)])
    import_jsonl(Workspace.open(ws_dir, create=True), src)
    db = sqlite3.connect(ws_dir / "content" / "ledger.sqlite")
    db.execute(edit)
    db.commit()
    db.close()
    return ws_dir


@pytest.mark.slow
@pytest.mark.parametrize("what", list(EDITS))
def test_a_hand_edited_ledger_is_read_around_never_a_traceback(tmp_path, what, caplog):
    ws_dir = _edited(tmp_path, EDITS[what])
    unkeyed = what.startswith("citekey")
    with caplog.at_level(logging.WARNING), Ledger(ws_dir / "content" / "ledger.sqlite", create=False) as led:
        rows = led.rows()
        view = led.index_view()
        assert [r.citekey for r in rows] == [v[0] for v in view] == led.citekeys()
        assert all(isinstance(v, str) for r in view for v in r[:3])
        assert len(rows) == led.count() == len(led.import_state()) == (3 if unkeyed else 4)
        assert all(isinstance(r.title, str) for r in rows)
        assert set(led.index_rows(["d0", "d1"])) == ({"d0"} if unkeyed else {"d0", "d1"})
        if unkeyed:
            assert led.unkeyed() == 1 and any("not text" in p for p in led.problems)
        else:
            got = led.get("d1")
            assert isinstance(got.title, str) and (got.source_size is None or isinstance(got.source_size, int))
    if what == "title BLOB":
        assert view[1][1] == "Blob title"
    for argv in (["index", "-w", ws_dir], ["search", "-w", ws_dir, "twin"], ["explain", "-w", ws_dir, "twin",
                                                                          "--citekey", "d0"]):
        p = run_main(*argv)
        assert p.returncode == 0 and "Traceback" not in p.stderr, (argv, p.stderr)
    p = run_main("import", "-w", ws_dir, tmp_path / "c.jsonl")
    assert p.returncode == 0, p.stderr
    if unkeyed:
        assert "dropped 1 row(s) whose citekey was not text" in p.stderr
    with Ledger(ws_dir / "content" / "ledger.sqlite", create=False) as led:
        assert led.unkeyed() == 0 and led.citekeys() == ["d0", "d1", "d2", "d3"]


def test_a_full_disk_in_the_ledger_is_one_line(tmp_path, monkeypatch):
    """SQLite's own SQLITE_FULL, from a page limit set on the import's connection."""
    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "title": "t" * 2000, "text": f"twin {i}"})
                                         for i in range(200)))
    real = Ledger.cache_for_bulk

    def small_disk(self, mib=64):
        real(self, mib)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages + 4}")

    monkeypatch.setattr(Ledger, "cache_for_bulk", small_disk)
    p = run_main("import", "-w", tmp_path / "ws", src)  # was: a sqlite3.OperationalError traceback
    one_error_line_after_progress(p, "ledger.sqlite", "database or disk is full", "free space")
    monkeypatch.undo()
    with Ledger(tmp_path / "ws" / "content" / "ledger.sqlite") as led:
        assert led.count() == 0  # the failed transaction left nothing


@pytest.fixture()
def big_workspace(tmp_path) -> Path:
    """Enough rows that the ledger spans many pages, so bytes overwritten mid-file hit table pages."""
    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i:04d}", "title": f"title {i} twin " * 3,
                                                     "text": "twin model"}) for i in range(1500)))
    ws = tmp_path / "ws"
    assert run_main("import", "-w", ws, src).returncode == 0
    assert run_main("index", "-w", ws).returncode == 0
    return ws


def test_garbage_mid_ledger_is_one_line_naming_it_and_what_to_do(big_workspace, tmp_path):
    ledger = big_workspace / "content" / "ledger.sqlite"
    size = ledger.stat().st_size
    assert size > 64 * 1024
    with open(ledger, "r+b") as f:
        f.seek(size // 2 - (size // 2) % 4096)
        f.write(bytes(range(256)) * 32)
    for args in (("search", "-w", big_workspace, "twin"), ("index", "-w", big_workspace),
                 ("import", "-w", big_workspace, tmp_path / "c.jsonl")):
        p = run_main(*args)  # was: sqlite3.DatabaseError: database disk image is malformed
        one_error_line_after_progress(p, str(ledger), "damaged", "move it aside", "chitragupta sync")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty-sqlite"])
def test_a_ledger_that_is_not_one_is_one_line(tmp_path, damage):
    ws = imported_workspace(tmp_path)
    ledger = ws / "content" / "ledger.sqlite"
    if damage == "garbage":
        ledger.write_bytes(os.urandom(20000))
    elif damage == "truncated":
        ledger.write_bytes(ledger.read_bytes()[:5000])
    else:
        ledger.unlink()
        sqlite3.connect(ledger).execute("CREATE TABLE other (x)").connection.commit()
    for args in (("search", "-w", ws, "twin"), ("index", "-w", ws)):
        one_error_line_after_progress(run_main(*args), str(ledger), "move it aside")


def test_a_row_that_is_not_utf8_is_read_with_replacement_and_noted(tmp_path, caplog):
    ws = imported_workspace(tmp_path)
    ledger = ws / "content" / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.execute("UPDATE sources SET title = CAST(x'54776966ff20746974' AS TEXT) WHERE citekey = 'd1'")
    db.commit()
    db.close()
    with Ledger(ledger, create=False) as led:
        rows = {r.citekey: r for r in led.rows()}  # was: sqlite3.OperationalError: Could not decode to UTF-8
        assert rows["d1"].title == "Twif\ufffd tit"
        assert led.problems and "not UTF-8" in led.problems[0]
    p = run_main("search", "-w", ws, "twin", "-k", "10")
    assert p.returncode == 0 and "Twif\ufffd tit" in p.stdout, p.stderr
    assert "Traceback" not in p.stderr


def test_a_reader_never_writes_the_ledger(tmp_path):
    ws = imported_workspace(tmp_path)
    ledger = ws / "content" / "ledger.sqlite"
    db = sqlite3.connect(ledger)
    db.execute("DELETE FROM meta WHERE key IN ('ledger_id', 'changes')")  # a ledger from before the stamp
    db.commit()
    db.close()
    with Ledger(ledger, create=False) as led:
        assert led.count() == 6 and led.change_stamp().startswith("-:-:")
        with pytest.raises(WorkspaceError, match="read-only"):
            with led.transaction():
                led.set_meta("x", "y")
    db = sqlite3.connect(ledger)
    assert db.execute("SELECT COUNT(*) FROM meta WHERE key IN ('ledger_id', 'changes', 'x')").fetchone() == (0,)
    db.close()


def _schema2_ledger(path: Path) -> None:
    """A ledger as version 2 wrote it (authors and year, no venue, type, doi or author_names), built by hand."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sources (citekey TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', abstract TEXT, keywords TEXT,
            status TEXT NOT NULL CHECK (status IN ('parsed', 'no-file', 'failed')), reason TEXT, parsed_path TEXT,
            origin TEXT NOT NULL, source_path TEXT, source_size INTEGER, source_mtime_ns INTEGER, source_hash TEXT,
            backend TEXT, updated_at REAL NOT NULL, authors TEXT, year TEXT);
        INSERT INTO meta VALUES ('schema', '2'), ('ledger_id', 'abc'), ('changes', '0');
    """)
    db.executemany("INSERT INTO sources (citekey, title, status, origin, updated_at, authors, year, keywords) "
                   "VALUES (?, ?, 'no-file', 'x.bib', 1.0, ?, ?, ?)",
                   [(f"k{i}", f"T{i}", json.dumps(["Müller, Jörg", "Ada Lovelace"]), year, '["twin"]')
                    for i, year in enumerate(["2020a", "in press", None, "1999"])])
    db.commit()
    db.close()


def test_a_schema2_ledger_is_read_as_it_is_and_a_writer_migrates_it_keeping_every_row(tmp_path):
    from chitragupta.engine.library.ledger import SCHEMA_VERSION

    path = tmp_path / "ledger.sqlite"
    _schema2_ledger(path)
    before = path.read_bytes()
    with Ledger(path, create=False) as led:  # a reader: read as it is, nothing written
        rows = {r.citekey: r for r in led.rows()}
        assert [rows[k].year for k in sorted(rows)] == [2020, None, None, 1999]
        assert rows["k0"].authors == ("Müller, Jörg", "Ada Lovelace")
        assert rows["k0"].author_names == (("Müller", "Jörg"), ("Lovelace", "Ada"))  # from the display names
        assert rows["k0"].venue is rows["k0"].type is rows["k0"].doi is None and rows["k0"].keywords == ("twin",)
        assert len(led.import_state()["k0"]) == 11
    assert path.read_bytes() == before
    assert SCHEMA_VERSION == 3
    with Ledger(path) as led:  # a writer: the columns are added, every row kept as it was
        assert {r.citekey: r for r in led.rows()} == rows
    db = sqlite3.connect(path)
    cols = [r[1] for r in db.execute("PRAGMA table_info(sources)")]
    assert cols[-4:] == ["venue", "type", "doi", "author_names"]
    assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "3"
    assert db.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 4
    db.close()


@pytest.mark.parametrize("edit, field, want", [
    ("year = 'nineteen'", "year", None), ("year = X'32303230'", "year", 2020), ("author_names = '{\"a\": 1}'",
                                                                               "author_names", ()),
    ("author_names = '[[\"Doe\"], [\"Roe\", \"R.\"], [1, 2]]'", "author_names", (("Roe", "R."),)),
    ("venue = 12", "venue", "12"), ("doi = X'00'", "doi", "\x00"), ("type = ''", "type", None),
])
def test_a_hand_edited_metadata_value_is_read_around(tmp_path, edit, field, want):
    ws_dir = _edited(tmp_path, f"UPDATE sources SET {edit} WHERE citekey = 'd1'")
    with Ledger(ws_dir / "content" / "ledger.sqlite", create=False) as led:
        assert getattr(led.get("d1"), field) == want
        assert len(led.metadata_view()) == 4


@pytest.mark.parametrize("edit, moves", [(EDITS["title BLOB"], False), (EDITS["size as text"], False),
                                         (EDITS["path BLOB, keywords BLOB"], True), (EDITS["citekey BLOB"], True),
                                         ("UPDATE sources SET year = '1999' WHERE citekey = 'd2'", True),
                                         ("UPDATE sources SET venue = 'Nature' WHERE citekey = 'd2'", True),
                                         ("DELETE FROM sources WHERE citekey = 'd3'", True)])
def test_the_metadata_digest_follows_what_filters_read_and_nothing_else(tmp_path, edit, moves):
    ws_dir = _edited(tmp_path, "SELECT 1")
    path = ws_dir / "content" / "ledger.sqlite"
    with Ledger(path, create=False) as led:
        before = led.metadata_digest()
    db = sqlite3.connect(path)
    db.execute(edit)
    db.commit()
    db.close()
    with Ledger(path, create=False) as led:
        assert (led.metadata_digest() != before) == moves
