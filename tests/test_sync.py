"""sync (BibTeX + PDFs) and import (JSONL) into the ledger and content/parsed/."""

import os
import sqlite3
from pathlib import Path

import pytest

from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.corpus.sync import import_jsonl, sync
from chitragupta.engine.demo.tinypdf import write_pdf
from chitragupta.errors import CorpusError
from chitragupta.engine.workspace import Workspace
from conftest import write_jsonl


def bib_workspace(tmp_path, entries: str) -> Workspace:
    (tmp_path / "papers").mkdir(exist_ok=True)
    (tmp_path / "papers" / "bibliography.bib").write_text(entries, encoding="utf-8")
    return Workspace.open(tmp_path)


def rows(ws):
    with Ledger(ws.ledger_path) as l:
        return {r.citekey: r for r in l.rows()}


def test_sync_parses_pdfs_and_records_statuses(tmp_path):
    (tmp_path / "papers").mkdir()
    write_pdf(tmp_path / "papers" / "a.pdf", ["Alpha title", "Digital twin fidelity in bridges.", "Second page text."])
    (tmp_path / "papers" / "notpdf.pdf").write_text("just text pretending")
    ws = bib_workspace(tmp_path, f"""
@article{{alpha, title={{Alpha}}, abstract={{Abs}}, keywords={{k1, k2}}, file={{a.pdf}}}}
@article{{nofile, title={{No File}}}}
@article{{missing, title={{Missing}}, file={{gone.pdf}}}}
@article{{fake, title={{Fake}}, file={{notpdf.pdf}}}}
@article{{passwd, title={{Passwd}}, file={{/etc/passwd}}}}
@article{{../../evil, title={{Evil}}, file={{a.pdf}}}}
""")
    report = sync(ws)
    r = rows(ws)
    assert r["alpha"].status == "parsed" and r["alpha"].abstract == "Abs" and r["alpha"].keywords == ("k1", "k2")
    text = (ws.root / r["alpha"].parsed_path).read_text()
    assert "Digital twin fidelity" in text
    assert r["nofile"].status == "no-file" and r["nofile"].reason == "no file field"
    assert r["missing"].status == "no-file" and "file not found" in r["missing"].reason
    assert r["fake"].status == "failed" and "checked by content" in r["fake"].reason
    assert r["passwd"].status == "failed" and "not a document" in r["passwd"].reason
    evil = r["../../evil"]
    assert evil.status == "parsed"
    assert (ws.root / evil.parsed_path).resolve().parent == ws.parsed_dir.resolve()
    assert report.parsed == 2 and report.no_file == 2 and len(report.failed) == 2
    assert not (tmp_path.parent / "evil.txt").exists()


def test_resync_reparses_only_what_changed(tmp_path):
    (tmp_path / "papers").mkdir()
    for k in "abc":
        write_pdf(tmp_path / "papers" / f"{k}.pdf", [f"paper {k} text"])
    ws = bib_workspace(tmp_path, "".join(f"@misc{{{k}, title={{T{k}}}, file={{{k}.pdf}}}}\n" for k in "abc"))
    assert sync(ws).parsed == 3
    again = sync(ws)
    assert again.parsed == 0 and again.unchanged == 3
    # a changed source, a deleted parsed file, and a changed backend each force a re-parse
    write_pdf(tmp_path / "papers" / "a.pdf", ["paper a has new words"])
    os.utime(tmp_path / "papers" / "a.pdf", ns=(1, 1))
    (ws.root / rows(ws)["b"].parsed_path).unlink()
    db = sqlite3.connect(ws.ledger_path)
    db.execute("UPDATE sources SET backend='other' WHERE citekey='c'")
    db.commit()
    db.close()
    third = sync(ws)
    assert third.parsed == 3 and third.unchanged == 0
    assert "new words" in (ws.root / rows(ws)["a"].parsed_path).read_text()


def test_removed_entries_leave_the_ledger(tmp_path):
    (tmp_path / "papers").mkdir()
    write_pdf(tmp_path / "papers" / "a.pdf", ["a"])
    ws = bib_workspace(tmp_path, "@misc{a, title={A}, file={a.pdf}}\n@misc{b, title={B}}\n")
    sync(ws)
    parsed = ws.root / rows(ws)["a"].parsed_path
    bib_workspace(tmp_path, "@misc{b, title={B renamed}}\n")
    rep = sync(ws)
    r = rows(ws)
    assert set(r) == {"b"} and r["b"].title == "B renamed" and rep.removed == 1
    assert not parsed.exists()


def test_missing_bibliography_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="bibliography not found"):
        sync(Workspace.open(tmp_path))


def test_import_jsonl_bad_lines_and_reimport(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_bytes(
        b'{"_id": "d1", "title": "One", "text": "first text", "keywords": ["x y"]}\n'
        b'not json\n'
        b'["a list"]\n'
        b'{"title": "no id"}\n'
        b'{"_id": "d1", "title": "dup", "text": "dup"}\n'
        b'{"_id": 7, "title": "Seven", "text": "caf\xe9 text"}\n'
        b'{"_id": "d3", "title": 3, "text": "x"}\n'
        b'\n'
        b'{"_id": "../../x", "title": "Evil", "text": "evil text"}\n'
    )
    ws = Workspace.open(tmp_path / "ws", create=True)
    rep = import_jsonl(ws, src)
    r = rows(ws)
    assert set(r) == {"d1", "7", "../../x"}
    assert r["d1"].keywords == ("x y",) and r["7"].title == "Seven"
    assert "\ufffd" in (ws.root / r["7"].parsed_path).read_text()
    lines = sorted(int(p.split(":")[1]) for p in rep.problems)
    assert lines == [2, 3, 4, 5, 6, 7], rep.problems
    assert (ws.root / r["../../x"].parsed_path).resolve().parent == ws.parsed_dir.resolve()
    # unchanged re-import writes nothing; a changed record is rewritten; a vanished one is removed
    before = (ws.root / r["d1"].parsed_path).stat().st_mtime_ns
    again = import_jsonl(ws, src)
    assert again.parsed == 0 and again.unchanged == 3
    assert (ws.root / r["d1"].parsed_path).stat().st_mtime_ns == before
    write_jsonl(src, [{"_id": "d1", "title": "One", "text": "changed"}])
    third = import_jsonl(ws, src)
    assert third.parsed == 1 and third.removed == 2 and set(rows(ws)) == {"d1"}


def test_import_missing_file(tmp_path):
    with pytest.raises(CorpusError, match="not found"):
        import_jsonl(Workspace.open(tmp_path), tmp_path / "nope.jsonl")
