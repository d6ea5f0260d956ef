"""Hostile BibTeX and documents for ``sync`` (issue 16): reference-manager ``file`` fields, escaping,
macros, citekeys a TREC run cannot carry, FIFOs and devices, long names, quadratic decoding, a crash in
a case-collision rename, and a parser switch that must not wipe the parsed texts."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from chitragupta.engine.corpus import bibtex
from chitragupta.engine.corpus.committer import ParsedFolder
from chitragupta.engine.corpus.bibtex import file_field_paths, latex_to_text, read_bibtex
from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.corpus.parsers import ParseError, parse
from chitragupta.engine.corpus.sync import sync
from chitragupta.engine.demo.tinypdf import write_pdf
from chitragupta.engine.workspace import Workspace
from chitragupta.errors import CorpusError
from conftest import run_main


def make_ws(root: Path, bib: str, config: str = "") -> Workspace:
    (root / "papers").mkdir(parents=True, exist_ok=True)
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    if config:
        (root / "config.toml").write_text(config, encoding="utf-8")
    return Workspace.open(root)


def rows(ws: Workspace) -> dict:
    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the block takes longer than ``seconds``."""
    def boom(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (blocked on a FIFO?)")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- 5: a snapshot listed before the PDF -------------------------------------------------------------

def test_zotero_snapshot_before_pdf_parses_the_pdf(tmp_path):
    files = tmp_path / "papers" / "files" / "1"
    files.mkdir(parents=True)
    (files / "snap.html").write_text("<html><body>snapshot</body></html>")
    write_pdf(files / "paper.pdf", ["Paper", "uniqueword in the pdf"])
    ws = make_ws(tmp_path, "@misc{z, title={Z}, file = {Snapshot:files/1/snap.html:text/html;"
                           "Full Text PDF:files/1/paper.pdf:application/pdf}}\n")
    rep = sync(ws)
    r = rows(ws)["z"]
    assert rep.parsed == 1 and r.status == "parsed", (r, rep.failed)
    assert r.source_path.endswith("paper.pdf")
    assert "uniqueword" in (ws.root / r.parsed_path).read_text()


def test_attachments_fall_back_to_the_next_one_the_parser_reads(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "fake.pdf").write_text("not a pdf at all")
    write_pdf(papers / "real.pdf", ["Real", "fallbackword"])
    ws = make_ws(tmp_path, "@misc{f, title={F}, file = {A:missing.pdf:PDF;B:fake.pdf:PDF;Snap:x.html:text/html;"
                           "C:real.pdf:PDF}}\n")
    sync(ws)
    r = rows(ws)["f"]
    assert r.status == "parsed" and r.source_path.endswith("real.pdf"), r


def test_pdf_attachments_are_tried_first(tmp_path):
    got = file_field_paths("Snapshot:s.html:text/html;Notes:n.txt:;Full Text PDF:p.pdf:application/pdf;"
                           "Other:q.PDF", tmp_path)
    assert got == (tmp_path / "p.pdf", tmp_path / "Other:q.PDF", tmp_path / "q.PDF", tmp_path / "s.html",
                   tmp_path / "n.txt")


# -- 6: the file field is read raw, escapes undone, split by a documented rule --------------------------

NASTY = "x~y--z%w''&v.pdf"


def test_file_field_is_not_latex_decoded(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    write_pdf(papers / NASTY, ["Nasty", "nastyword"])
    write_pdf(papers / "a:b:c.pdf", ["Colons", "colonword"])
    write_pdf(papers / "semi;colon.pdf", ["Semi", "semiword"])
    ws = make_ws(tmp_path, f"@misc{{n, title={{N}}, file={{{NASTY}}}}}\n"
                           "@misc{c, title={C}, file={a:b:c.pdf}}\n"
                           "@misc{s, title={S}, file={Desc:semi\\;colon.pdf:PDF}}\n")
    entries, problems = read_bibtex(ws.bibliography)
    assert [e.files[0].name for e in entries] == [NASTY, "a:b:c.pdf", "semi;colon.pdf"], problems
    sync(ws)
    r = rows(ws)
    assert {k: r[k].status for k in "ncs"} == {"n": "parsed", "c": "parsed", "s": "parsed"}, r


def test_jabref_and_zotero_escaping(tmp_path):
    b = tmp_path
    assert file_field_paths(r"Desc:C\:\\Users\\me\\a.pdf:PDF", b) == (b / "C:\\Users\\me\\a.pdf",)
    assert file_field_paths(r"C:\Users\me\a.pdf", b) == (b / "C:\\Users\\me\\a.pdf",)  # a drive colon
    assert file_field_paths(r"Full Text:a\:b.pdf:application/pdf", b) == (b / "a:b.pdf",)
    assert file_field_paths("Full Text:a:b:c.pdf:application/pdf", b) == (b / "a:b:c.pdf",)
    assert file_field_paths("a:b:c.pdf", b) == (b / "a:b:c.pdf",)  # no type at the end: all path
    assert file_field_paths("notes:v2.pdf", b) == (b / "notes:v2.pdf", b / "v2.pdf")
    assert file_field_paths(r"one\;two.pdf;three.pdf", b) == (b / "one;two.pdf", b / "three.pdf")
    assert file_field_paths(r"dir\\x.pdf", b) == (b / "dir\\x.pdf",)


# -- 7: Mendeley and file:// URLs --------------------------------------------------------------------------

def test_mendeley_leading_slash_and_file_urls(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    docs = tmp_path / "elsewhere dir"
    docs.mkdir()
    write_pdf(docs / "men.pdf", ["Mendeley", "mendeleyword"])
    write_pdf(docs / "url doc.pdf", ["Url", "urlword"])
    write_pdf(docs / "Smith_2010.pdf", ["Smith", "smithword"])
    rel_abs = str(docs)[1:]  # what Mendeley writes: the absolute path without its leading slash
    ws = make_ws(tmp_path, f"@misc{{m, title={{M}}, file={{:{rel_abs}/men.pdf:pdf}}}}\n"
                           f"@misc{{u, title={{U}}, file={{file://{str(docs).replace(' ', '%20')}/url%20doc.pdf}}}}\n"
                           f"@misc{{e, title={{E}}, file={{:{rel_abs}/Smith{{\\_}}2010.pdf:pdf}}}}\n")
    sync(ws)
    r = rows(ws)
    assert r["m"].status == "parsed" and r["m"].source_path == str((docs / "men.pdf").resolve()), r["m"]
    assert r["u"].status == "parsed" and r["u"].source_path == str((docs / "url doc.pdf").resolve()), r["u"]
    assert r["e"].status == "parsed", r["e"]


# -- 8: citekeys a TREC run cannot carry ---------------------------------------------------------------

def test_citekeys_with_whitespace_or_control_characters_are_skipped(tmp_path):
    bib = ("@misc{good, title={Good}}\n"
           "@misc{a b, title={Space}}\n"
           "@misc{tab\tkey, title={Tab}}\n"
           "@misc{nb\u00a0sp, title={NBSP}}\n"
           "@misc{ctl\x07x, title={Bell}}\n"
           "@misc{ , title={Blank}}\n")
    ws = make_ws(tmp_path, bib)
    rep = sync(ws)
    assert set(rows(ws)) == {"good"}
    text = "\n".join(rep.problems)
    for line, what in ((2, "white space"), (3, "white space"), (4, "white space"), (5, "control character"),
                       (6, "empty")):
        assert any(f"bibliography.bib:{line}:" in p and what in p for p in rep.problems), (line, text)
    p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 0 and "'a b' holds white space" in p.stderr, p.stderr


def test_a_batch_search_over_a_synced_bib_with_a_spaced_key_works(tmp_path):
    ws = make_ws(tmp_path, "@misc{ok, title={Twin bridges}}\n@misc{bad key, title={Twin rivers}}\n")
    sync(ws)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin"}\n')
    p = run_main("search", "-w", tmp_path, "--queries", q, "--run", tmp_path / "out.trec", "-k", "5")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out.trec").read_text().split()[2] == "ok"


# -- 9: @string macros and # concatenation ---------------------------------------------------------------

def test_string_macros_and_concatenation(tmp_path):
    bib = tmp_path / "b.bib"
    bib.write_text(
        '@string{foo = "Foo"}\n'
        "@STRING{Bar = {Bar {X}}}\n"
        '@string{a = "x" # bar}\n'
        '@string(b = a # " y")\n'
        '@misc{k1, title = foo # " and " # bar, abstract = "Issue " # 12 # ", " # jan # " " # 2020}\n'
        "@misc{k2, title = a # b, keywords = foo # {, } # BAR}\n"
        '@misc{k3, title = "He said {"}hi{"} to " # undefinedmacro}\n'
        "@misc{k4, title = {Caf{\\'e} -- {Na{\\\"i}ve}}}\n",
        encoding="utf-8")
    entries, problems = read_bibtex(bib)
    got = {e.citekey: e for e in entries}
    assert got["k1"].title == "Foo and Bar X", problems
    assert got["k1"].abstract == "Issue 12, January 2020"
    assert got["k2"].title == "xBar XxBar X y"
    assert got["k2"].keywords == ("Foo", "Bar X")
    assert got["k3"].title == 'He said "hi" to undefinedmacro'
    assert got["k4"].title == "Café – Naïve"


def test_macros_doubling_each_other_are_cut_not_exploded(tmp_path):
    bib = tmp_path / "b.bib"
    lines = ['@string{m0 = "xy"}'] + [f"@string{{m{i} = m{i - 1} # m{i - 1}}}" for i in range(1, 64)]
    bib.write_text("\n".join(lines) + "\n@misc{k, title = m63}\n", encoding="utf-8")
    t = time.perf_counter()
    entries, problems = read_bibtex(bib)
    assert time.perf_counter() - t < 5
    assert len(entries[0].title) <= bib.stat().st_size + 1024
    assert any("cut there" in p for p in problems)


# -- 10 / 17: FIFOs, folders and devices -------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_bibliography_is_refused_without_hanging(tmp_path):
    ws = make_ws(tmp_path, "")
    bib = ws.bibliography
    bib.unlink()
    os.mkfifo(bib)
    with deadline(10), pytest.raises(CorpusError, match=r"is a pipe \(FIFO\)"):
        read_bibtex(bib)
    with deadline(10):
        p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "is a pipe (FIFO), not a regular file" in p.stderr


def test_directory_and_device_bibliographies_say_what_they_are(tmp_path):
    d = tmp_path / "dir.bib"
    d.mkdir()
    with pytest.raises(CorpusError, match="is a folder"):
        read_bibtex(d)
    if Path("/dev/null").exists():
        with deadline(10), pytest.raises(CorpusError, match="is a character device"):
            read_bibtex(Path("/dev/null"))
    with pytest.raises(CorpusError, match="bibliography not found"):
        read_bibtex(tmp_path / "nope.bib")
    ws = make_ws(tmp_path / "w", "")
    ws.bibliography.unlink()
    ws.bibliography.mkdir()
    p = run_main("sync", "-w", tmp_path / "w")
    assert p.returncode == 1 and "is a folder" in p.stderr and "not found" not in p.stderr, p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_where_a_pdf_is_expected_fails_that_entry_only(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    os.mkfifo(papers / "pipe.pdf")
    os.symlink(papers / "pipe.pdf", papers / "link.pdf")
    write_pdf(papers / "ok.pdf", ["Ok", "okword"])
    ws = make_ws(tmp_path, "@misc{p, title={P}, file={pipe.pdf}}\n@misc{l, title={L}, file={link.pdf}}\n"
                           "@misc{ok, title={Ok}, file={ok.pdf}}\n")
    with deadline(20):
        rep = sync(ws)
    r = rows(ws)
    assert r["ok"].status == "parsed"
    for k in "pl":
        assert r[k].status == "failed" and "is a pipe (FIFO)" in r[k].reason, r[k]
    assert {k for k, _ in rep.failed} == {"p", "l"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_parsers_never_open_a_fifo(tmp_path):
    fifo = tmp_path / "x.pdf"
    os.mkfifo(fifo)
    from chitragupta.engine.corpus.docling_convert import detect_format

    with deadline(10):
        for backend in ("pdftotext", "docling"):
            with pytest.raises(ParseError, match=r"is a pipe \(FIFO\)"):
                parse(fifo, backend)
        assert detect_format(fifo) is None


# -- 3: a path component over 255 bytes ----------------------------------------------------------------------

def test_a_name_too_long_fails_only_its_entry(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    write_pdf(papers / "ok.pdf", ["Ok", "okword"])
    long = "x" * 300 + ".pdf"
    ws = make_ws(tmp_path, f"@misc{{long, title={{L}}, file={{{long}}}}}\n"
                           f"@misc{{longer, title={{L2}}, file={{Snap:{'y' * 4000}/a.pdf:PDF;B:ok.pdf:PDF}}}}\n"
                           "@misc{ok, title={Ok}, file={ok.pdf}}\n")
    rep = sync(ws)
    r = rows(ws)
    assert r["ok"].status == "parsed" and r["longer"].status == "parsed"
    assert r["long"].status == "failed" and "too long" in r["long"].reason.lower(), r["long"]
    assert [k for k, _ in rep.failed] == ["long"]


# -- 11: decoding is lazy and linear -------------------------------------------------------------------------

def test_unused_fields_are_not_decoded_and_a_huge_author_list_is_fast(tmp_path):
    bib = tmp_path / "b.bib"
    authors = " and ".join(f"M{{\\\"u}}ller{i}, J{{\\'o}}rg" for i in range(100_000))
    bib.write_text("@article{huge, title = {A {Digital} Twin -- Caf{\\'e}}, author = {" + authors + "}}\n",
                   encoding="utf-8")
    t = time.perf_counter()
    entries, _ = read_bibtex(bib)
    took = time.perf_counter() - t
    assert entries[0].title == "A Digital Twin – Café"
    assert took < 8, took  # was ~35 s here: every field of every entry went through pylatexenc


def test_long_values_decode_piecewise_as_a_whole(monkeypatch):
    text = ("Caf{\\'e} and {B}ridges -- ``quoted'' \\emph {word} $x + y$ 50\\% ~ tie " * 40).strip()
    whole = latex_to_text(text)
    monkeypatch.setattr(bibtex, "_PIECE", 30)
    assert len(bibtex._pieces(text)) > 20
    assert latex_to_text(text) == whole
    assert latex_to_text("plain text, nothing to decode") == "plain text, nothing to decode"


# -- 18: a crash in a case-collision rename ------------------------------------------------------------------

def _collision_ws(tmp_path: Path) -> Workspace:
    papers = tmp_path / "papers"
    papers.mkdir(exist_ok=True)
    write_pdf(papers / "a.pdf", ["Upper", "upperword"])
    write_pdf(papers / "b.pdf", ["Lower", "lowerword"])
    ws = make_ws(tmp_path, "@misc{Smith, title={Upper}, file={a.pdf}}\n")
    sync(ws)
    assert rows(ws)["Smith"].parsed_path == "content/parsed/Smith.txt"
    (ws.bibliography).write_text("@misc{Smith, title={Upper}, file={a.pdf}}\n@misc{smith, title={Lower}, "
                                 "file={b.pdf}}\n", encoding="utf-8")
    return ws


def _every_row_has_its_file(ws: Workspace) -> None:
    for r in rows(ws).values():
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
    r = rows(ws)
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


# -- 19: a parser switch that fails keeps the parsed texts ---------------------------------------------------

def test_switch_to_docling_without_models_keeps_the_parsed_text(tmp_path):
    papers = tmp_path / "papers"
    papers.mkdir()
    n = 23
    for i in range(n):
        write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"keptword number{i}"])
    bib = "".join(f"@misc{{p{i}, title={{P{i}}}, file={{p{i}.pdf}}}}\n" for i in range(n))
    ws = make_ws(tmp_path, bib)
    assert sync(ws).parsed == n
    before = {k: (r.parsed_path, (ws.root / r.parsed_path).read_text()) for k, r in rows(ws).items()}
    ws = make_ws(tmp_path, bib, config='[parser]\nbackend = "docling"\n')
    rep = sync(ws)
    assert len(rep.failed) == n and rep.kept == n and rep.parsed == 0
    assert all("docling_artifacts_path" in why for _, why in rep.failed)
    r = rows(ws)
    for k, (rel, text) in before.items():
        assert r[k].status == "parsed" and r[k].parsed_path == rel and (ws.root / rel).read_text() == text
        assert r[k].backend == "pdftotext" and "kept" in r[k].reason
    from chitragupta.engine.search import Retriever

    hits = Retriever.open(tmp_path, backend="numpy").search("keptword number7", k=3).hits
    assert hits and hits[0].citekey == "p7"
    p = run_main("sync", "-w", tmp_path)
    warn = [line for line in p.stderr.splitlines() if ": failed: " in line]
    assert p.returncode == 3 and len(warn) == 20 and all("\n" not in w for w in warn), p.stderr
    assert f"... and {n - 20} more failed" in p.stderr
    assert f"{n} failed ({n} keep the text parsed before)" in p.stdout
    # back to pdftotext: nothing to re-parse, the kept rows are current again
    ws = make_ws(tmp_path, bib, config='[parser]\nbackend = "pdftotext"\n')
    again = sync(ws)
    assert again.unchanged == n and not again.failed
    assert all(row.reason is None for row in rows(ws).values())


def test_a_resync_decodes_only_the_values_that_changed(tmp_path, monkeypatch):
    bib = "".join(f"@misc{{k{i}, title={{Caf{{\\'e}} number {i} -- {{B}}ridges}}, abstract={{plain {i}}}}}\n"
                  for i in range(30))
    ws = make_ws(tmp_path, bib)
    sync(ws)
    calls = []
    real = bibtex._decode
    monkeypatch.setattr(bibtex, "_decode", lambda v: calls.append(v) or real(v))
    assert sync(ws).unchanged == 0 and calls == []  # every title from the cache, none decoded again
    ws.bibliography.write_text(bib.replace("number 7 --", "number seven --"), encoding="utf-8")
    sync(ws)
    assert len(calls) == 1 and "seven" in calls[0]
    assert rows(ws)["k7"].title == "Café number seven – Bridges"
    # a damaged cache is not used (and does not stop the sync); nor is one that is not a regular file
    cache = ws.content / "bibtex_decoded.json"
    cache.write_text('{"decoder": "x", "texts": {"a": 1}')
    calls.clear()
    sync(ws)
    assert len(calls) == 30 and rows(ws)["k3"].title == "Café number 3 – Bridges"
    if hasattr(os, "mkfifo"):
        cache.unlink()
        os.mkfifo(cache)
        with deadline(10):
            sync(ws)
