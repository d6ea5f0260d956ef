"""sync (BibTeX + PDFs) and import (JSONL) into the ledger and content/parsed/."""

import dataclasses
import json
import os
import sqlite3
from pathlib import Path

import pytest
from chitragupta.engine.library.committer import (
    REWRITE_PENDING,
    UNLINK_PENDING,
    ParsedFolder,
)
from chitragupta.engine.library.demo.tinypdf import write_pdf
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import sync
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import CorpusError

from helpers import (
    bib_workspace_at,
    deadline,
    import_jsonl,  # one file a record, the layout these tests pin (packs: test_import_packed)
    ledger_rows,
    run_main,
    write_jsonl,
)


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


# -- hostile bibliographies: attachments, odd file fields and citekeys, FIFOs, name collisions ---------------
def test_zotero_snapshot_before_pdf_parses_the_pdf(tmp_path):
    files = tmp_path / "papers" / "files" / "1"
    files.mkdir(parents=True)
    (files / "snap.html").write_text("<html><body>snapshot</body></html>")
    write_pdf(files / "paper.pdf", ["Paper", "uniqueword in the pdf"])
    ws = bib_workspace_at(tmp_path, "@misc{z, title={Z}, file = {Snapshot:files/1/snap.html:text/html;"
                           "Full Text PDF:files/1/paper.pdf:application/pdf}}\n")
    rep = sync(ws)
    r = ledger_rows(ws)["z"]
    assert rep.parsed == 1 and r.status == "parsed", (r, rep.failed)
    assert r.source_path.endswith("paper.pdf")
    assert "uniqueword" in (ws.root / r.parsed_path).read_text()


def test_attachments_fall_back_to_the_next_one_the_parser_reads(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "fake.pdf").write_text("not a pdf at all")
    write_pdf(papers / "real.pdf", ["Real", "fallbackword"])
    ws = bib_workspace_at(tmp_path, "@misc{f, title={F}, file = {A:missing.pdf:PDF;B:fake.pdf:PDF;Snap:x.html:text/html;"
                           "C:real.pdf:PDF}}\n")
    sync(ws)
    r = ledger_rows(ws)["f"]
    assert r.status == "parsed" and r.source_path.endswith("real.pdf"), r


def test_mendeley_leading_slash_and_file_urls(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    docs = tmp_path / "elsewhere dir"
    docs.mkdir()
    write_pdf(docs / "men.pdf", ["Mendeley", "mendeleyword"])
    write_pdf(docs / "url doc.pdf", ["Url", "urlword"])
    write_pdf(docs / "Smith_2010.pdf", ["Smith", "smithword"])
    rel_abs = str(docs)[1:]  # what Mendeley writes: the absolute path without its leading slash
    ws = bib_workspace_at(tmp_path, f"@misc{{m, title={{M}}, file={{:{rel_abs}/men.pdf:pdf}}}}\n"
                           f"@misc{{u, title={{U}}, file={{file://{str(docs).replace(' ', '%20')}/url%20doc.pdf}}}}\n"
                           f"@misc{{e, title={{E}}, file={{:{rel_abs}/Smith{{\\_}}2010.pdf:pdf}}}}\n")
    sync(ws)
    r = ledger_rows(ws)
    assert r["m"].status == "parsed" and r["m"].source_path == str((docs / "men.pdf").resolve()), r["m"]
    assert r["u"].status == "parsed" and r["u"].source_path == str((docs / "url doc.pdf").resolve()), r["u"]
    assert r["e"].status == "parsed", r["e"]


def test_citekeys_with_whitespace_or_control_characters_are_skipped(tmp_path):
    bib = ("@misc{good, title={Good}}\n"
           "@misc{a b, title={Space}}\n"
           "@misc{tab\tkey, title={Tab}}\n"
           "@misc{nb\u00a0sp, title={NBSP}}\n"
           "@misc{ctl\x07x, title={Bell}}\n"
           "@misc{ , title={Blank}}\n")
    ws = bib_workspace_at(tmp_path, bib)
    rep = sync(ws)
    assert set(ledger_rows(ws)) == {"good"}
    text = "\n".join(rep.problems)
    for line, what in ((2, "white space"), (3, "white space"), (4, "white space"), (5, "control character"),
                       (6, "empty")):
        assert any(f"bibliography.bib:{line}:" in p and what in p for p in rep.problems), (line, text)
    p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 0 and "'a b' holds white space" in p.stderr, p.stderr


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200f", "\u200b", "\u2060", "\ufeff", "\u00ad"])
def test_a_citekey_with_an_invisible_or_bidi_character_is_refused_naming_it_escaped(tmp_path, char):
    # "smith2020<RLO>fdp.exe" would show in a table, a DOT label or a run as another key than it is
    key = f"smith2020{char}fdp"
    ws = bib_workspace_at(tmp_path, f"@misc{{good, title={{Good}}}}\n@misc{{{key}, title={{Spoofed}}}}\n")
    rep = sync(ws)
    assert set(ledger_rows(ws)) == {"good"}
    assert any("bibliography.bib:2:" in p and repr(key) in p and f"U+{ord(char):04X}" in p
               and "invisible format character" in p for p in rep.problems), rep.problems
    p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 0 and repr(key) in p.stderr and char not in p.stderr, p.stderr  # shown escaped
    src = write_jsonl(tmp_path / "c.jsonl", [{"_id": key, "text": "twin"}, {"_id": "ok", "text": "twin"}])
    p = run_main("import", "-w", tmp_path / "imported", src)
    assert p.returncode == 0 and "import: 1 entry" in p.stdout, p.stderr
    assert f"{src}:1: '_id' {key!r} holds an invisible format character" in p.stderr and char not in p.stderr


def test_a_batch_search_over_a_synced_bib_with_a_spaced_key_works(tmp_path):
    ws = bib_workspace_at(tmp_path, "@misc{ok, title={Twin bridges}}\n@misc{bad key, title={Twin rivers}}\n")
    sync(ws)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin"}\n')
    p = run_main("search", "-w", tmp_path, "--queries", q, "--run", tmp_path / "out.trec", "-k", "5")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.trec").read_text().split()[2] == "ok"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_where_a_pdf_is_expected_fails_that_entry_only(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    os.mkfifo(papers / "pipe.pdf")
    os.symlink(papers / "pipe.pdf", papers / "link.pdf")
    write_pdf(papers / "ok.pdf", ["Ok", "okword"])
    ws = bib_workspace_at(tmp_path, "@misc{p, title={P}, file={pipe.pdf}}\n@misc{l, title={L}, file={link.pdf}}\n"
                           "@misc{ok, title={Ok}, file={ok.pdf}}\n")
    with deadline(20):
        rep = sync(ws)
    r = ledger_rows(ws)
    assert r["ok"].status == "parsed"
    for k in "pl":
        assert r[k].status == "failed" and "is a pipe (FIFO)" in r[k].reason, r[k]
    assert {k for k, _ in rep.failed} == {"p", "l"}


def test_a_name_too_long_fails_only_its_entry(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    write_pdf(papers / "ok.pdf", ["Ok", "okword"])
    long = "x" * 300 + ".pdf"
    ws = bib_workspace_at(tmp_path, f"@misc{{long, title={{L}}, file={{{long}}}}}\n"
                           f"@misc{{longer, title={{L2}}, file={{Snap:{'y' * 4000}/a.pdf:PDF;B:ok.pdf:PDF}}}}\n"
                           "@misc{ok, title={Ok}, file={ok.pdf}}\n")
    rep = sync(ws)
    r = ledger_rows(ws)
    assert r["ok"].status == "parsed" and r["longer"].status == "parsed"
    assert r["long"].status == "failed" and "too long" in r["long"].reason.lower(), r["long"]
    assert [k for k, _ in rep.failed] == ["long"]


def _collision_ws(tmp_path: Path) -> Workspace:
    papers = tmp_path / "papers"
    papers.mkdir(exist_ok=True)
    write_pdf(papers / "a.pdf", ["Upper", "upperword"])
    write_pdf(papers / "b.pdf", ["Lower", "lowerword"])
    ws = bib_workspace_at(tmp_path, "@misc{Smith, title={Upper}, file={a.pdf}}\n")
    sync(ws)
    assert ledger_rows(ws)["Smith"].parsed_path == "content/parsed/Smith.txt"
    (ws.bibliography).write_text("@misc{Smith, title={Upper}, file={a.pdf}}\n@misc{smith, title={Lower}, "
                                 "file={b.pdf}}\n", encoding="utf-8")
    return ws


def _every_row_has_its_file(ws: Workspace) -> None:
    for r in ledger_rows(ws).values():
        if r.status == "parsed":
            assert (ws.root / r.parsed_path).is_file(), f"{r.citekey} points at a missing {r.parsed_path}"


def test_a_crash_before_the_commit_of_a_rename_leaves_every_row_its_file(tmp_path, monkeypatch):
    ws = _collision_ws(tmp_path)

    def killed(self, rows):
        raise KeyboardInterrupt("killed before the commit")

    monkeypatch.setattr(Ledger, "upsert_values", killed)
    with pytest.raises(KeyboardInterrupt):
        sync(ws)
    monkeypatch.undo()
    _every_row_has_its_file(ws)  # the old code had renamed Smith.txt away already
    sync(ws)
    r = ledger_rows(ws)
    _every_row_has_its_file(ws)
    assert r["Smith"].parsed_path != r["smith"].parsed_path
    assert "upperword" in (ws.root / r["Smith"].parsed_path).read_text()
    assert not (ws.parsed_dir / "Smith.txt").exists()


def test_a_crash_after_the_commit_of_a_rename_is_finished_by_the_next_run(tmp_path, monkeypatch):
    ws = _collision_ws(tmp_path)

    def killed(self, rel):
        raise KeyboardInterrupt("killed before the unlink")

    monkeypatch.setattr(ParsedFolder, "remove", killed)
    with pytest.raises(KeyboardInterrupt):
        sync(ws)
    monkeypatch.undo()
    _every_row_has_its_file(ws)
    db = sqlite3.connect(ws.ledger_path)
    assert db.execute("SELECT value FROM meta WHERE key='unlink_pending'").fetchone() is not None
    db.close()
    assert (ws.parsed_dir / "Smith.txt").exists()  # committed away, not yet unlinked
    rep = sync(ws)
    assert rep.unchanged == 2
    assert not (ws.parsed_dir / "Smith.txt").exists()
    _every_row_has_its_file(ws)


def test_switch_to_docling_without_models_keeps_the_parsed_text(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    n = 23
    for i in range(n):
        write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"keptword number{i}"])
    bib = "".join(f"@misc{{p{i}, title={{P{i}}}, file={{p{i}.pdf}}}}\n" for i in range(n))
    ws = bib_workspace_at(tmp_path, bib)
    assert sync(ws).parsed == n
    before = {k: (r.parsed_path, (ws.root / r.parsed_path).read_text()) for k, r in ledger_rows(ws).items()}
    ws = bib_workspace_at(tmp_path, bib, config='[parser]\nbackend = "docling"\n')
    rep = sync(ws)
    assert len(rep.failed) == n and rep.kept == n and rep.parsed == 0
    assert all("docling_artifacts_path" in why for _, why in rep.failed)
    r = ledger_rows(ws)
    for k, (rel, text) in before.items():
        assert r[k].status == "parsed" and r[k].parsed_path == rel and (ws.root / rel).read_text() == text
        assert r[k].backend == "pdftotext" and "kept" in r[k].reason
    from chitragupta.engine.search.bm25 import Retriever

    hits = Retriever.open(tmp_path, backend="numpy").search("keptword number7", k=3).hits
    assert hits and hits[0].citekey == "p7"
    p = run_main("sync", "-w", tmp_path)
    warn = [line for line in p.stderr.splitlines() if ": failed: " in line]
    assert p.returncode == 3 and len(warn) == 20 and all("\n" not in w for w in warn), p.stderr
    assert f"... and {n - 20} more failed" in p.stderr
    assert f"{n} failed ({n} keep the text parsed before)" in p.stdout
    # back to pdftotext: nothing to re-parse, the kept rows are current again
    ws = bib_workspace_at(tmp_path, bib, config='[parser]\nbackend = "pdftotext"\n')
    again = sync(ws)
    assert again.unchanged == n and not again.failed
    assert all(row.reason is None for row in ledger_rows(ws).values())


# -- killed syncs and imports whose files swapped: one rerun equals a clean build ----------------------------
KEYS = ["Lo2020", "lo2020", "LO2020"]


class Killed(BaseException):
    """A kill, as far as the code under test can tell: nothing after it runs."""


def _meta(ws: Workspace, key: str):
    with Ledger(ws.ledger_path) as led:
        return led.get_meta(key)


def _state(ws: Workspace) -> tuple:
    """Rows (paths made relative to the workspace) and parsed files, comparable across folders."""
    root = str(ws.root)
    rows = sorted((k, r.title, r.status, r.reason, r.parsed_path, (r.source_path or "").replace(root, "<ws>"),
                   r.source_size, r.source_mtime_ns, r.source_hash) for k, r in ledger_rows(ws).items())
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
    for key, row in ledger_rows(ws).items():
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
    for key, row in ledger_rows(ws).items():  # every row still points at a whole file
        assert (ws.root / row.parsed_path).is_file()
    assert set(json.loads(_meta(ws, REWRITE_PENDING))) == {r.parsed_path for r in ledger_rows(ws).values()}
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
    assert ledger_rows(ws)["lo2020"].parsed_path != "content/parsed/lo2020.txt"
    _bib(papers, {"lo2020": 1})
    rep = sync(ws)
    assert rep.removed == 1 and rep.unchanged == 1
    assert ledger_rows(ws)["lo2020"].parsed_path == "content/parsed/lo2020.txt"
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
        assert (ws.root / ledger_rows(ws)[key].parsed_path).read_text() == texts[i]
    assert import_jsonl(ws, src).unchanged == 3 and _meta(ws, REWRITE_PENDING) is None


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


def _sync_twin(root: Path, papers: Path, keys: str, jobs: int) -> Workspace:
    (root / "papers").mkdir(parents=True, exist_ok=True)
    bib = "".join(f"@misc{{{k}, title={{T{k}}}, file={{{papers / (k + '.pdf')}}}}}\n" for k in keys)
    bib += f"@misc{{gone, title={{Gone}}, file={{{papers / 'gone.pdf'}}}}}\n@misc{{nofile, title={{No file}}}}\n"
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    ws = Workspace.open(root)
    sync(ws, jobs=jobs)
    return ws


def _rows_and_texts(ws) -> dict:
    """Every ledger row but where it came from (the bibliography's path) and when, and every parsed file."""
    out = {}
    for k, r in rows(ws).items():
        d = dataclasses.asdict(r)
        del d["origin"], d["updated_at"]
        text = (ws.root / r.parsed_path).read_bytes() if r.parsed_path else None
        out[k] = (d, text)
    return out


def test_sync_with_two_jobs_equals_one_job(tmp_path):
    papers = tmp_path / "shared"
    papers.mkdir()
    keys = "abcdefghij"
    for k in keys:
        write_pdf(papers / f"{k}.pdf", [f"Paper {k}", f"words of paper {k} " * 3])
    (papers / "e.pdf").write_text("not a pdf at all")  # a failure among the parses
    one = _sync_twin(tmp_path / "one", papers, keys, 1)
    two = _sync_twin(tmp_path / "two", papers, keys, 2)
    assert _rows_and_texts(one) == _rows_and_texts(two)
    assert sum(r.status == "parsed" for r in rows(two).values()) == 9
    # again after a source changed and a parsed file went (that one parsed in place, not ahead)
    write_pdf(papers / "a.pdf", ["Paper a", "new words"])
    for ws in (one, two):
        (ws.root / rows(ws)["b"].parsed_path).unlink()
    r1, r2 = sync(one, jobs=1), sync(two, jobs=2)
    assert (r1.parsed, r1.unchanged, r1.failed) == (r2.parsed, r2.unchanged, r2.failed) and r2.parsed == 2
    assert _rows_and_texts(one) == _rows_and_texts(two)
    assert b"new words" in _rows_and_texts(two)["a"][1]


def test_sync_jobs_flag(tmp_path):
    (tmp_path / "papers").mkdir()
    write_pdf(tmp_path / "papers" / "a.pdf", ["A", "text"])
    bib_workspace(tmp_path, "@misc{a, title={A}, file={a.pdf}}\n")
    assert run_main("sync", "-w", tmp_path, "--jobs", "2").returncode == 0
    bad = run_main("sync", "-w", tmp_path, "--jobs", "x")
    assert bad.returncode == 2 and "--jobs wants a whole number" in bad.stderr
