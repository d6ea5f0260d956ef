"""Authors and year in the ledger (schema 2): read from BibTeX (``author``, else ``editor``; ``year``, else a
biblatex ``date``) and from a JSONL record (top level or BEIR's ``metadata``); a schema-1 ledger is read as
it is and gains the columns when a writer opens it; a re-sync or re-import fills them without re-parsing."""

from __future__ import annotations

import json
import sqlite3

from chitragupta.engine.library.bibtex import MAX_AUTHORS, read_bibtex
from chitragupta.engine.library.demo.tinypdf import write_pdf
from chitragupta.engine.library.ledger import SCHEMA_VERSION, Ledger
from chitragupta.engine.library.sync import import_jsonl, sync
from chitragupta.engine.library.workspace import Workspace

from helpers import run_cli, write_jsonl


def _rows(ws):
    with Ledger(ws.ledger_path, create=False) as led:
        return {r.citekey: r for r in led.rows()}


def test_bibtex_authors_and_year(tmp_path):
    bib = tmp_path / "b.bib"
    many = " and ".join(f"Name{i}, A." for i in range(MAX_AUTHORS + 20))
    bib.write_text(
        "@article{a, title={A}, author={M{\\\"u}ller, J{\\'o}rg and {Barnes and Noble} and Smith, J. and others},"
        " year={2020}}\n"
        "@book{b, title={B}, editor={Doe, Jane}, date={2019-05-01}}\n"
        "@misc{c, title={C}, year = {{in press}}}\n"
        "@misc{d, title={D}}\n"
        f"@misc{{e, title={{E}}, author={{{many}}}, year=1999}}\n", encoding="utf-8")
    got, problems = read_bibtex(bib)
    e = {x.citekey: x for x in got}
    assert e["a"].authors == ("Müller, Jórg", "Barnes and Noble", "Smith, J.", "others") and e["a"].year == 2020
    assert e["a"].author_names == (("Müller", "Jórg"), ("Barnes and Noble", ""), ("Smith", "J."))
    assert e["b"].authors == ("Doe, Jane",) and e["b"].year == 2019
    assert e["c"].authors == () and e["c"].year is None  # "in press" is no year: noted, left empty
    assert [p for p in problems if "'c'" in p] == [f"{bib}:3: 'c': field 'year' 'in press' is not a year; left empty"]
    assert e["d"].authors == () and e["d"].year is None
    assert len(e["e"].authors) == MAX_AUTHORS + 1 and e["e"].authors[-1] == "others" and e["e"].year == 1999
    assert len(e["e"].author_names) == MAX_AUTHORS and e["e"].author_names[-1] == (f"Name{MAX_AUTHORS - 1}", "A.")


def test_sync_records_them_and_a_resync_fills_them_without_reparsing(tmp_path):
    (tmp_path / "papers").mkdir()
    write_pdf(tmp_path / "papers" / "a.pdf", ["Alpha", "Digital twin fidelity."])
    bib = tmp_path / "papers" / "bibliography.bib"
    bib.write_text("@article{alpha, title={Alpha}, file={a.pdf}}\n", encoding="utf-8")
    ws = Workspace.open(tmp_path)
    sync(ws)
    assert _rows(ws)["alpha"].authors == () and _rows(ws)["alpha"].year is None
    bib.write_text("@article{alpha, title={Alpha}, author={Doe, Jane and Roe, R.}, year={2021}, file={a.pdf}}\n",
                   encoding="utf-8")
    rep = sync(ws)
    row = _rows(ws)["alpha"]
    assert row.authors == ("Doe, Jane", "Roe, R.") and row.year == 2021
    assert rep.parsed == 0 and rep.unchanged == 1  # the text was not parsed again


def test_jsonl_authors_and_year_top_level_or_metadata(tmp_path):
    ws = Workspace.open(tmp_path / "ws", create=True)
    src = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "A", "text": "twin", "authors": ["Doe, Jane", " ", "Roe, R."], "year": 2020},
        {"_id": "b", "title": "B", "text": "twin", "metadata": {"authors": "Smith, J.; Li, W.", "year": "2019a"}},
        {"_id": "c", "title": "C", "text": "twin", "authors": 7, "year": [1]},
        {"_id": "d", "title": "D", "text": "twin"},
    ])
    rep = import_jsonl(ws, src)
    r = _rows(ws)
    assert r["a"].authors == ("Doe, Jane", "Roe, R.") and r["a"].year == 2020
    assert r["b"].authors == ("Smith, J.", "Li, W.") and r["b"].year == 2019  # "2019a"
    assert r["c"].authors == () and r["c"].year is None and r["c"].status == "parsed"  # kept, fields ignored
    assert any("'authors' must be" in p for p in rep.problems) and any("'year' must be" in p for p in rep.problems)
    assert r["d"].authors == () and r["d"].year is None
    # the same texts with new authors: rows rewritten, files not
    src = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "A", "text": "twin", "authors": ["Doe, Jane"], "year": 2020},
        {"_id": "b", "title": "B", "text": "twin", "metadata": {"authors": "Smith, J.; Li, W.", "year": "2019a"}},
        {"_id": "c", "title": "C", "text": "twin"}, {"_id": "d", "title": "D", "text": "twin", "year": 1987},
    ])
    rep = import_jsonl(ws, src)
    r = _rows(ws)
    assert rep.parsed == 0 and rep.unchanged == 4
    assert r["a"].authors == ("Doe, Jane",) and r["d"].year == 1987


def _schema1_ledger(path):
    """A ledger as version 1 wrote it: no authors or year columns, schema 1."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sources (citekey TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', abstract TEXT, keywords TEXT,
            status TEXT NOT NULL CHECK (status IN ('parsed', 'no-file', 'failed')), reason TEXT, parsed_path TEXT,
            origin TEXT NOT NULL, source_path TEXT, source_size INTEGER, source_mtime_ns INTEGER, source_hash TEXT,
            backend TEXT, updated_at REAL NOT NULL);
        INSERT INTO meta VALUES ('schema', '1'), ('ledger_id', 'abc'), ('changes', '0');
        INSERT INTO sources (citekey, title, status, origin, updated_at) VALUES ('k1', 'Old', 'no-file', 'x.bib', 1.0);
    """)
    db.commit()
    db.close()


def test_a_schema1_ledger_is_read_as_it_is_and_migrated_by_a_writer(tmp_path):
    path = tmp_path / "ledger.sqlite"
    _schema1_ledger(path)
    with Ledger(path, create=False) as led:  # a reader: nothing written
        row = led.get("k1")
        assert row.title == "Old" and row.authors == () and row.year is None
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == "1"
    db.close()
    with Ledger(path) as led:  # a writer: the columns are added, the rows kept
        assert led.get("k1").title == "Old"
    db = sqlite3.connect(path)
    cols = {r[1] for r in db.execute("PRAGMA table_info(sources)")}
    assert {"authors", "year"} <= cols
    assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0] == str(SCHEMA_VERSION)
    db.close()


def test_a_ledger_from_a_newer_version_is_one_line(tmp_path):
    import pytest
    from chitragupta.errors import WorkspaceError

    path = tmp_path / "ledger.sqlite"
    _schema1_ledger(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()
    db.close()
    for create in (False, True):
        with pytest.raises(WorkspaceError, match="ledger schema 99 is not one this version reads"):
            Ledger(path, create=create)


def test_the_source_of_a_hit_carries_them(tmp_path):
    from chitragupta.engine.search.bm25 import Retriever

    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "A twin", "text": "digital twin", "authors": ["Doe, Jane"], "year": 2020}]))
    row = Retriever.open(ws).source("a")
    assert row.authors == ("Doe, Jane",) and row.year == 2020
    assert json.loads(json.dumps(list(row.authors))) == ["Doe, Jane"]


def _to_schema2(path):
    """The ledger at ``path`` taken back to what version 2 wrote: schema 2, without the columns 3 added."""
    db = sqlite3.connect(path)
    for col in ("venue", "type", "doi", "author_names"):
        db.execute(f"ALTER TABLE sources DROP COLUMN {col}")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    db.commit()
    db.close()


def test_a_resync_of_a_schema2_ledger_fills_the_new_fields_without_reparsing(tmp_path):
    (tmp_path / "papers").mkdir()
    write_pdf(tmp_path / "papers" / "a.pdf", ["Alpha", "Digital twin fidelity."])
    bib = tmp_path / "papers" / "bibliography.bib"
    bib.write_text("@InProceedings{alpha, title={Alpha}, author={{\\\"U}ber, Hans and M\\\"{u}ller, Karl},"
                   " booktitle={Proc. {\\\"O}}, year={2021}, doi={doi:10.1234/ABC.5}, file={a.pdf}}\n",
                   encoding="utf-8")
    ws = Workspace.open(tmp_path)
    sync(ws)
    _to_schema2(ws.ledger_path)
    old = _rows(ws)["alpha"]
    assert old.venue is None and old.author_names == (("Über", "Hans"), ("Müller", "Karl"))  # from display names
    rep = sync(ws)
    assert rep.parsed == 0 and rep.unchanged == 1  # the PDF was not parsed again
    row = _rows(ws)["alpha"]
    assert (row.venue, row.type, row.doi, row.year) == ("Proc. Ö", "inproceedings", "10.1234/abc.5", 2021)
    assert row.authors == ("Über, Hans", "Müller, Karl")
    assert row.author_names == (("Über", "Hans"), ("Müller", "Karl"))
    assert sync(ws).unchanged == 1  # and a third sync writes nothing new


def _text_file(ws, parsed_path):
    """The file holding a row's text: its own parsed file, or the pack its reference names."""
    from chitragupta.engine.library.texts import split_ref

    ref = split_ref(parsed_path)
    return ws.root / (ref[0] if ref else parsed_path)


def test_a_reimport_into_a_schema2_ledger_fills_the_new_fields_without_rewriting_texts(tmp_path):
    ws = Workspace.open(tmp_path / "ws", create=True)
    src = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "A", "text": "twin", "authors": "Doe, Jane and Richard Roe", "year": "2020",
         "venue": "Nature", "type": "Article", "doi": "https://doi.org/10.1000/X", "keywords": "Twin; Model"},
        {"_id": "b", "title": "B", "text": "twin", "metadata": {"venue": "Science", "doi": "10.2000/y"}}])
    import_jsonl(ws, src)
    _to_schema2(ws.ledger_path)
    before = _rows(ws)["a"].parsed_path
    text = _text_file(ws, before).stat()
    rep = import_jsonl(ws, src)
    assert rep.parsed == 0 and rep.unchanged == 2 and not rep.problems
    r = _rows(ws)
    after = _text_file(ws, r["a"].parsed_path).stat()
    assert r["a"].parsed_path == before
    assert (after.st_mtime_ns, after.st_size) == (text.st_mtime_ns, text.st_size)
    assert r["a"].author_names == (("Doe", "Jane"), ("Roe", "Richard"))
    assert r["a"].authors == ("Doe, Jane", "Richard Roe")
    assert (r["a"].year, r["a"].venue, r["a"].type, r["a"].doi, r["a"].keywords) == (
        2020, "Nature", "article", "10.1000/x", ("Twin", "Model"))
    assert (r["b"].venue, r["b"].doi) == ("Science", "10.2000/y")


def test_the_source_tool_reports_the_new_fields_and_keeps_the_old_keys(tmp_path):
    from chitragupta.service.warm import WarmEngines

    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "A twin", "text": "digital twin", "authors": ["Müller, Jörg", "Ada Lovelace"],
         "year": "2020", "venue": "Nature", "type": "article", "doi": "10.1000/x"}]))
    run_cli("index", "-w", ws.root, check=True)
    got = WarmEngines(ws.root).source("a")
    assert got["authors"] == ["Müller, Jörg", "Ada Lovelace"] and got["year"] == 2020
    assert got["author_names"] == [{"family": "Müller", "given": "Jörg"}, {"family": "Lovelace", "given": "Ada"}]
    assert (got["venue"], got["type"], got["doi"]) == ("Nature", "article", "10.1000/x")
    assert json.loads(json.dumps(got)) == got
