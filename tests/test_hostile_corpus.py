"""Hostile inputs and faults on the corpus side (issue 20): killed runs over case-colliding citekeys whose
documents swap (item 1), and a ledger edited by hand: citekeys NULL or BLOBs, BLOB titles (item 7)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from chitragupta.engine.corpus.committer import REWRITE_PENDING, UNLINK_PENDING, ParsedFolder
from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.corpus.sync import import_jsonl, sync
from chitragupta.engine.demo.tinypdf import write_pdf
from chitragupta.engine.workspace import Workspace
from conftest import run_main, write_jsonl

KEYS = ["Lo2020", "lo2020", "LO2020"]


class Killed(BaseException):
    """A kill, as far as the code under test can tell: nothing after it runs."""


def _rows(ws: Workspace) -> dict:
    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


def _meta(ws: Workspace, key: str):
    with Ledger(ws.ledger_path) as led:
        return led.get_meta(key)


def _state(ws: Workspace) -> tuple:
    """Rows (paths made relative to the workspace) and parsed files, comparable across folders."""
    root = str(ws.root)
    rows = sorted((k, r.title, r.status, r.reason, r.parsed_path, (r.source_path or "").replace(root, "<ws>"),
                   r.source_size, r.source_mtime_ns, r.source_hash) for k, r in _rows(ws).items())
    files = {p.name: p.read_bytes() for p in sorted(ws.parsed_dir.iterdir())}
    return rows, files


def _kill_at_commit(monkeypatch, method: str = "upsert_values", after: int = 0):
    """Make the ``after+1``-th call of ``Ledger.<method>`` a kill."""
    real = getattr(Ledger, method)
    calls = {"n": 0}

    def maybe_die(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] > after:
            raise Killed
        return real(self, *a, **kw)

    monkeypatch.setattr(Ledger, method, maybe_die)


# -- 1: a killed sync over case-colliding keys whose PDFs swap ---------------------------------------------

def _papers(root: Path, n: int = 3) -> Path:
    papers = root / "papers"
    papers.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"uniqueword{i} twin model"])
    return papers


def _bib(papers: Path, assign: dict[str, int]) -> None:
    (papers / "bibliography.bib").write_text(
        "".join(f"@misc{{{k}, title={{T {k}}}, file={{p{i}.pdf}}}}\n" for k, i in assign.items()), encoding="utf-8")


V1 = dict(zip(KEYS, (0, 1, 2)))
V2 = dict(zip(KEYS, (1, 2, 0)))  # every key points at another key's PDF


def _clean(tmp_path: Path, assign: dict[str, int], n: int = 3) -> tuple:
    root = tmp_path / f"clean{sorted(assign.items())}"
    papers = _papers(root, n)
    for p in papers.glob("*.pdf"):  # the same files (size and mtime) as the workspace under test
        p.write_bytes((tmp_path / "ws" / "papers" / p.name).read_bytes())
        st = (tmp_path / "ws" / "papers" / p.name).stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    _bib(papers, assign)
    ws = Workspace.open(root)
    sync(ws)
    return _state(ws)


def _each_key_holds_its_pdf(ws: Workspace, assign: dict[str, int]) -> None:
    for key, row in _rows(ws).items():
        text = (ws.root / row.parsed_path).read_text(encoding="utf-8")
        assert f"uniqueword{assign[key]}" in text, f"{key} holds another paper's text: {text!r}"


@pytest.mark.parametrize("kill", ["rows", "intent"])
def test_a_killed_sync_whose_pdfs_swapped_then_one_rerun_on_the_old_bib_equals_a_clean_build(tmp_path, monkeypatch,
                                                                                               kill):
    """v1 synced; v2 (the PDFs swapped between the keys) killed after its new texts were written but before
    their rows were committed; v1 again: one sync must give each key its own PDF's text. The old code
    overwrote the files in place before the commit and then trusted them by name (the row still named
    the unchanged v1 PDF): every key kept another paper's text."""
    papers = _papers(tmp_path / "ws")
    _bib(papers, V1)
    ws = Workspace.open(tmp_path / "ws")
    sync(ws)
    _bib(papers, V2)
    if kill == "rows":  # the new texts written, the commit of their rows never happens
        _kill_at_commit(monkeypatch)
    else:  # killed right after the intent was committed, before any file was rewritten
        def die(self, name, data):
            raise Killed

        monkeypatch.setattr(ParsedFolder, "write", die)
    with pytest.raises(Killed):
        sync(ws)
    monkeypatch.undo()
    for key, row in _rows(ws).items():  # every row still points at a whole file
        assert (ws.root / row.parsed_path).is_file()
    assert set(json.loads(_meta(ws, REWRITE_PENDING))) == {r.parsed_path for r in _rows(ws).values()}
    _bib(papers, V1)
    sync(ws)
    _each_key_holds_its_pdf(ws, V1)
    assert _meta(ws, REWRITE_PENDING) is None and _meta(ws, UNLINK_PENDING) is None
    assert _state(ws) == _clean(tmp_path, V1)


def test_two_killed_syncs_swapping_back_and_forth_then_one_rerun_equals_a_clean_build(tmp_path, monkeypatch):
    papers = _papers(tmp_path / "ws", 4)
    a = {"Lo2020": 0, "lo2020": 1, "LO2020": 2, "Kim2019": 3}
    b = {"Lo2020": 2, "lo2020": 0, "kim2019": 1, "Kim2019": 3}  # LO2020 leaves, kim2019 joins Kim2019's group
    _bib(papers, a)
    ws = Workspace.open(tmp_path / "ws")
    sync(ws)
    for version, after in ((b, 1), (a, 0)):  # b: its removal of LO2020 committed, the rest not
        _bib(papers, version)
        _kill_at_commit(monkeypatch, after=after)
        with pytest.raises(Killed):
            sync(ws)
        monkeypatch.undo()
    for final in (b, a):
        _bib(papers, final)
        sync(ws)
        _each_key_holds_its_pdf(ws, final)
        assert _state(ws) == _clean(tmp_path, final, 4)


def test_a_case_group_that_loses_members_gets_its_final_names_in_one_sync(tmp_path):
    """Lo2020 and lo2020 have hashed names; once Lo2020 leaves the bibliography, lo2020's name is plain in
    a clean build -- and after one sync (the old code named the files before removing Lo2020's row, so the
    plain name came only with a second sync)."""
    papers = _papers(tmp_path / "ws", 2)
    _bib(papers, {"Lo2020": 0, "lo2020": 1})
    ws = Workspace.open(tmp_path / "ws")
    sync(ws)
    assert _rows(ws)["lo2020"].parsed_path != "content/parsed/lo2020.txt"
    _bib(papers, {"lo2020": 1})
    rep = sync(ws)
    assert rep.removed == 1 and rep.unchanged == 1
    assert _rows(ws)["lo2020"].parsed_path == "content/parsed/lo2020.txt"
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == ["lo2020.txt"]
    assert _state(ws) == _clean(tmp_path, {"lo2020": 1}, 2)


def test_a_rewrite_intent_that_is_not_a_list_distrusts_every_file(tmp_path):
    papers = _papers(tmp_path / "ws")
    _bib(papers, V1)
    ws = Workspace.open(tmp_path / "ws")
    sync(ws)
    with Ledger(ws.ledger_path) as led, led.transaction():
        led.set_meta(REWRITE_PENDING, "{not json")
    rep = sync(ws)
    assert rep.parsed == 3 and rep.unchanged == 0
    assert _meta(ws, REWRITE_PENDING) is None
    assert sync(ws).unchanged == 3


# -- 1, the same for import ---------------------------------------------------------------------------

def test_a_killed_import_whose_texts_swapped_then_one_rerun_on_the_old_file_holds_each_its_own(tmp_path, monkeypatch):
    ws = Workspace.open(tmp_path / "ws", create=True)
    src = tmp_path / "c.jsonl"
    texts = ["first text", "second text", "third text"]

    def version(order):
        return [{"_id": k, "title": "T", "text": texts[i]} for k, i in zip(KEYS, order)]

    import_jsonl(ws, write_jsonl(src, version((0, 1, 2))))
    _kill_at_commit(monkeypatch)
    with pytest.raises(Killed):
        import_jsonl(ws, write_jsonl(src, version((1, 2, 0))))
    monkeypatch.undo()
    rep = import_jsonl(ws, write_jsonl(src, version((0, 1, 2))))
    assert rep.parsed == 3  # the listed files are rewritten, not trusted by their names
    for key, i in zip(KEYS, (0, 1, 2)):
        assert (ws.root / _rows(ws)[key].parsed_path).read_text() == texts[i]
    assert import_jsonl(ws, src).unchanged == 3 and _meta(ws, REWRITE_PENDING) is None


# -- 7: a ledger edited by hand -----------------------------------------------------------------------------

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




def test_files_no_row_points_at_are_removed_and_a_row_named_by_an_odd_path_keeps_its(tmp_path):
    """What a killed run wrote for rows it never committed is no one's: the next run removes it, so a
    rerun leaves the files a clean build would. A file a row names by a path in another form (a hand
    edit) is kept."""
    ws = Workspace.open(tmp_path / "ws", create=True)
    other = write_jsonl(tmp_path / "other.jsonl", [{"_id": "b", "text": "b text"}])
    import_jsonl(ws, other)
    (ws.parsed_dir / "b.txt").rename(ws.parsed_dir / "odd.txt")
    with Ledger(ws.ledger_path) as led, led.transaction():
        led._db.execute("UPDATE sources SET parsed_path = 'content/parsed/../parsed/odd.txt' WHERE citekey = 'b'")
    (ws.parsed_dir / "never-committed.txt").write_text("orphan")
    (ws.parsed_dir / "never-committed.passages.json").write_text("[]")
    (ws.parsed_dir / "odd.passages.json").write_text("[]")
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", [{"_id": "a", "text": "a text"}]))
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == ["a.txt", "odd.passages.json", "odd.txt"]
    assert (ws.parsed_dir / "odd.txt").read_text() == "b text"
