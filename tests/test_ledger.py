"""engine/corpus/ledger.py: the SQLite ledger read as it is found -- hand-edited, damaged, not a ledger,
not UTF-8, a full disk -- gives one clear line or a note, never a traceback, and a reader never writes it."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.corpus.sync import import_jsonl
from chitragupta.engine.workspace import Workspace
from conftest import run_main, write_jsonl


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
