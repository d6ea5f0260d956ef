"""Issue 16's hostile inputs on the reading side: JSON an adversary writes (lone surrogates, 5,000-digit
integers, ids a TREC run cannot carry, endless lines, devices and pipes), a full disk during import, a
damaged or undecodable ledger, a read-only workspace, a FIFO where a parsed text is expected; and the
plain-text reference cut. Each one gets a clear line and the command goes on or stops cleanly: never a
traceback, a hang, or unbounded memory."""

from __future__ import annotations

import errno
import json
import re
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import chitragupta.engine.corpus.jsonl as jsonl
from chitragupta.engine.corpus.jsonl import iter_jsonl, read_queries
from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.corpus.sidecar import SidecarError, read_sidecar
from chitragupta.engine.corpus.sync import import_jsonl
from chitragupta.engine.index.source import FLAG_TEXT_MISSING, load_body, read_text
from chitragupta.engine.text.refcut import cut_plain, plain_reference_cut
from chitragupta.engine.workspace import Workspace
from chitragupta.errors import ChitraguptaError, CorpusError, WorkspaceError
from conftest import ROOT, SHARED, run_main

HUGE = "9" * 5000  # over Python's 4,300-digit int conversion limit


def _lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _workspace(tmp_path: Path, n: int = 6) -> Path:
    """An imported and indexed workspace of ``n`` small documents (all holding "twin")."""
    src = _lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "title": f"title {i}",
                                                     "text": f"twin model number {i} sensor"}) for i in range(n)))
    ws = tmp_path / "ws"
    assert run_main("import", "-w", ws, src).returncode == 0
    assert run_main("index", "-w", ws).returncode == 0
    return ws


_PROGRESS = re.compile(r"^[\w ]+: (\d+ \w+ to do|\d+/\d+ \w+ \(\d+%\).*)$")


def _one_clear_error(p, *needles: str) -> None:
    assert p.returncode == 1, (p.returncode, p.stderr)
    # progress lines (stderr not a terminal) may come first; then exactly one error line
    err = "".join(line + "\n" for line in p.stderr.splitlines() if not _PROGRESS.match(line))
    assert err.startswith("error: ") and err.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    for needle in needles:
        assert needle in p.stderr, (needle, p.stderr)


# -- 1. lone surrogates --------------------------------------------------------------------------------

def test_a_lone_surrogate_in_a_query_id_skips_that_query_and_the_run_is_written(tmp_path):
    ws = _workspace(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin \\ud800 model"}\n{"_id": "q\\ud800", "text": "twin"}\n'
                 '{"_id": "q3", "text": "sensor"}\n', encoding="ascii")
    problems: list[str] = []
    assert read_queries(q, problems) == [("q1", "twin \ufffd model"), ("q3", "sensor")]
    assert any(f"{q}:2: '_id'" in p and "lone surrogate" in p for p in problems), problems
    assert any(f"{q}:1:" in p and "'text'" in p and "U+FFFD" in p for p in problems), problems
    run = tmp_path / "out.trec"
    p = run_main("search", "-w", ws, "--queries", q, "--run", run)
    assert p.returncode == 0, p.stderr  # was: error: query id 'q\ud800' is not valid Unicode
    qids = {line.split()[0] for line in run.read_text().splitlines()}
    assert qids == {"q1", "q3"}


def test_lone_surrogates_in_a_corpus_import_and_a_run_can_be_written(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text('{"_id": "a", "title": "t \\udc00", "text": "twin \\ud800 y"}\n'
                   '{"_id": "b\\udfff", "text": "twin"}\n{"_id": "c", "text": "twin"}\n', encoding="ascii")
    ws = tmp_path / "ws"
    p = run_main("import", "-w", ws, src)
    assert p.returncode == 0 and "import: 2 entries" in p.stdout, p.stderr
    assert f"{src}:2: '_id'" in p.stderr and f"{src}:1: lone surrogate" in p.stderr
    q = _lines(tmp_path / "q.jsonl", json.dumps({"_id": "q1", "text": "twin"}))
    run = tmp_path / "out.trec"
    assert run_main("search", "-w", ws, "--queries", q, "--run", run).returncode == 0
    assert sorted(line.split()[2] for line in run.read_text().splitlines()) == ["a", "c"]


# -- 2. integers over Python's digit limit -------------------------------------------------------------

def test_a_huge_integer_never_stops_the_import(tmp_path):
    src = _lines(tmp_path / "c.jsonl",
                 '{"_id": "ignored", "text": "twin", "n": ' + HUGE + '}',
                 '{"_id": ' + HUGE + ', "text": "twin"}',
                 '{"_id": "title", "title": ' + HUGE + ', "text": "twin"}',
                 '{"_id": "kw", "text": "twin", "keywords": [' + HUGE + ']}',
                 '{"_id": 42, "text": "twin"}')
    problems: list[str] = []
    assert [r.citekey for r in iter_jsonl(src, problems)] == ["ignored", "42"]  # was: ValueError
    assert any(f"{src}:2: '_id' is an integer of 5000 digits" in p for p in problems), problems
    assert any(f"{src}:3: field 'title' must be a string, got an integer of 5000 digits" in p for p in problems)
    assert any(f"{src}:4: 'keywords'" in p for p in problems)
    p = run_main("import", "-w", tmp_path / "ws", src)
    assert p.returncode == 0 and "import: 2 entries" in p.stdout, p.stderr


def test_a_huge_integer_in_a_queries_file_skips_only_its_line(tmp_path):
    q = _lines(tmp_path / "q.jsonl", '{"_id": "q1", "text": "twin", "n": ' + HUGE + '}',
               '{"_id": ' + HUGE + ', "text": "twin"}', '{"_id": "q3", "text": ' + HUGE + '}',
               '{"_id": "q4", "text": "model"}')
    problems: list[str] = []
    assert read_queries(q, problems) == [("q1", "twin"), ("q4", "model")]  # was: ValueError
    assert [p.split(": ", 1)[0] for p in problems] == [f"{q}:2", f"{q}:3"]
    assert "'_id' is an integer of 5000 digits" in problems[0] and "'text' must be a string" in problems[1]


# -- 3. endless lines, devices, pipes, a full disk -----------------------------------------------------

def test_a_line_over_the_cap_stops_the_read_naming_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1000)
    src = _lines(tmp_path / "c.jsonl", '{"_id": "a", "text": "x"}', '{"_id": "b", "text": "' + "y" * 5000 + '"}')
    with pytest.raises(CorpusError, match=rf"{src}:2: line longer than"):
        list(iter_jsonl(src, []))
    with pytest.raises(CorpusError, match=rf"{src}:2: line longer than"):
        read_queries(src, [])
    exact = _lines(tmp_path / "d.jsonl", '{"_id": "a", "text": "' + "z" * (1000 - 24) + '"}')
    assert len(exact.read_bytes()) == 1001  # 1,000 bytes and the newline: at the cap, read
    assert [r.citekey for r in iter_jsonl(exact, [])] == ["a"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_dev_zero_as_queries_or_corpus_is_refused_in_bounded_memory(tmp_path):
    """Run in a child with its address space capped at 1 GiB and a time limit: reading /dev/zero whole
    (what ``read_queries`` did) dies there instead of taking the machine."""
    code = ("import resource, sys; from pathlib import Path\n"
            "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
            "from chitragupta.engine.corpus.jsonl import read_queries, iter_jsonl\n"
            "from chitragupta.errors import CorpusError\n"
            "for f in (lambda: read_queries(Path('/dev/zero'), []), lambda: list(iter_jsonl(Path('/dev/zero'), []))):\n"
            "    try:\n        f()\n    except CorpusError as e:\n        print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout.splitlines() == ["/dev/zero: is a character device, not a queries file (JSON lines)",
                                     "/dev/zero: is a character device, not a corpus file (JSON lines)"]


def test_what_the_input_is_is_said_not_file_not_found(tmp_path):
    ws = _workspace(tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    _one_clear_error(run_main("import", "-w", ws, tmp_path), "is a folder, not a corpus file")
    _one_clear_error(run_main("import", "-w", ws, fifo), "is a pipe (FIFO); a corpus file is read more than once", "save the stream to a file first")
    _one_clear_error(run_main("import", "-w", ws, "/dev/null"), "is a character device")
    _one_clear_error(run_main("import", "-w", ws, tmp_path / "nope.jsonl"), "corpus file not found")
    _one_clear_error(run_main("search", "-w", ws, "--queries", tmp_path, "--run", "-"),
                     "is a folder, not a queries file")
    _one_clear_error(run_main("search", "-w", ws, "--queries", "/dev/null", "--run", "-"), "is a character device")


@pytest.mark.slow  # a subprocess
def test_queries_from_a_pipe_are_read_once(tmp_path):
    ws = _workspace(tmp_path)
    fifo = tmp_path / "q.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w") as f:
            f.write('{"_id": "q1", "text": "twin"}\n{"_id": "q2", "text": "sensor"}\n')

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert read_queries(fifo, []) == [("q1", "twin"), ("q2", "sensor")]
    t.join(5)
    p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--queries",
                        "/dev/stdin", "--run", "-"], input='{"_id": "q1", "text": "twin"}\n', capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 6 and {line.split()[0] for line in p.stdout.splitlines()} == {"q1"}


def _rows_and_files_whole(ws_dir: Path) -> None:
    ws = Workspace.open(ws_dir)
    with Ledger(ws.ledger_path) as led:
        rows = led.rows()
    for r in rows:
        assert (ws.root / r.parsed_path).read_text(encoding="utf-8").startswith("twin"), r.citekey
    assert not [p.name for p in ws.parsed_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_during_import_is_one_line_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    import chitragupta.engine.corpus.committer as committer_mod
    import chitragupta.engine.corpus.importer as importer_mod

    src = _lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "text": f"twin {i}"}) for i in range(50)))
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 10)
    real = committer_mod.replace_in_folder
    calls = {"n": 0}

    def full(folder, name, data, tag):
        calls["n"] += 1
        if calls["n"] > 25:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{folder}/{name}")
        return real(folder, name, data, tag)

    monkeypatch.setattr(committer_mod, "replace_in_folder", full)
    p = run_main("import", "-w", tmp_path / "ws", src)  # was: an OSError traceback
    _one_clear_error(p, "No space left on device", "import stopped", "run the import again")
    _rows_and_files_whole(tmp_path / "ws")
    monkeypatch.setattr(committer_mod, "replace_in_folder", real)
    p = run_main("import", "-w", tmp_path / "ws", src)
    assert p.returncode == 0 and "import: 50 entries" in p.stdout
    _rows_and_files_whole(tmp_path / "ws")


def test_a_full_disk_in_the_ledger_is_one_line(tmp_path, monkeypatch):
    """SQLite's own SQLITE_FULL, from a page limit set on the import's connection."""
    src = _lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "title": "t" * 2000, "text": f"twin {i}"})
                                         for i in range(200)))
    real = Ledger.cache_for_bulk

    def small_disk(self, mib=64):
        real(self, mib)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages + 4}")

    monkeypatch.setattr(Ledger, "cache_for_bulk", small_disk)
    p = run_main("import", "-w", tmp_path / "ws", src)  # was: a sqlite3.OperationalError traceback
    _one_clear_error(p, "ledger.sqlite", "database or disk is full", "free space")
    monkeypatch.undo()
    with Ledger(tmp_path / "ws" / "content" / "ledger.sqlite") as led:
        assert led.count() == 0  # the failed transaction left nothing


# -- 8. ids a TREC run cannot carry --------------------------------------------------------------------

@pytest.mark.parametrize("key", ["a b", "tab\tkey", "nbsp\u00a0key", "ideo\u3000key", "", "   ", "ctl\x01key",
                                 "del\x7fkey", "c1\x85key", "nl\nkey"])
def test_an_id_a_trec_run_cannot_carry_is_refused_at_import(tmp_path, key):
    src = _lines(tmp_path / "c.jsonl", json.dumps({"_id": key, "text": "twin"}), json.dumps({"_id": "ok", "text": "twin"}))
    problems: list[str] = []
    assert [r.citekey for r in iter_jsonl(src, problems)] == ["ok"]
    assert len(problems) == 1 and problems[0].startswith(f"{src}:1: '_id' ") and "line skipped" in problems[0]
    q = _lines(tmp_path / "q.jsonl", json.dumps({"_id": key, "text": "twin"}), json.dumps({"_id": "q2", "text": "twin"}))
    qp: list[str] = []
    assert read_queries(q, qp) == [("q2", "twin")]
    assert len(qp) == 1 and qp[0].startswith(f"{q}:1: '_id' ")


def test_after_an_import_with_bad_ids_every_batch_search_succeeds(tmp_path):
    src = _lines(tmp_path / "c.jsonl", *(json.dumps({"_id": k, "text": "twin"}) for k in
                                         ["a b", "x\u0001y", " ", "ok", "a\u00a0b", "tab\t", "fine-2"]))
    ws = tmp_path / "ws"
    p = run_main("import", "-w", ws, src)
    assert p.returncode == 0 and "import: 2 entries" in p.stdout
    assert p.stderr.count("'_id'") == 5
    q = _lines(tmp_path / "q.jsonl", json.dumps({"_id": "q1", "text": "twin"}))
    run = tmp_path / "out.trec"
    p = run_main("search", "-w", ws, "--queries", q, "--run", run)  # was: citekey 'a b' holds whitespace
    assert p.returncode == 0, p.stderr
    assert sorted(line.split()[2] for line in run.read_text().splitlines()) == ["fine-2", "ok"]


# -- 15. a damaged ledger --------------------------------------------------------------------------------

@pytest.fixture()
def big_workspace(tmp_path) -> Path:
    """Enough rows that the ledger spans many pages, so bytes overwritten mid-file hit table pages."""
    src = _lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i:04d}", "title": f"title {i} twin " * 3,
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
        _one_clear_error(p, str(ledger), "damaged", "move it aside", "chitragupta sync")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty-sqlite"])
def test_a_ledger_that_is_not_one_is_one_line(tmp_path, damage):
    ws = _workspace(tmp_path)
    ledger = ws / "content" / "ledger.sqlite"
    if damage == "garbage":
        ledger.write_bytes(os.urandom(20000))
    elif damage == "truncated":
        ledger.write_bytes(ledger.read_bytes()[:5000])
    else:
        ledger.unlink()
        sqlite3.connect(ledger).execute("CREATE TABLE other (x)").connection.commit()
    for args in (("search", "-w", ws, "twin"), ("index", "-w", ws)):
        _one_clear_error(run_main(*args), str(ledger), "move it aside")


def test_a_row_that_is_not_utf8_is_read_with_replacement_and_noted(tmp_path, caplog):
    ws = _workspace(tmp_path)
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


# -- 16. a read-only workspace ---------------------------------------------------------------------------

def test_a_reader_never_writes_the_ledger(tmp_path):
    ws = _workspace(tmp_path)
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


def test_search_on_a_read_only_workspace_simulated(tmp_path, monkeypatch):
    """What a read-only folder does to SQLite (root ignores file modes, so it is simulated): a write-
    ahead-log ledger opened any way but ``immutable`` cannot even be read there."""
    import chitragupta.engine.corpus.ledger as ledger_mod

    ws = _workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0  # the stamp recorded: no rebuild needed
    real = sqlite3.connect

    def readonly_folder(database, *args, **kwargs):
        if "immutable=1" not in str(database):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real(database, *args, **kwargs)

    monkeypatch.setattr(ledger_mod.sqlite3, "connect", readonly_folder)
    p = run_main("search", "-w", ws, "twin", "-k", "3")  # was: not a usable ledger database ... move it aside
    assert p.returncode == 0 and "d0" in p.stdout, p.stderr
    p = run_main("import", "-w", ws, tmp_path / "c.jsonl")
    _one_clear_error(p, "read-only")
    assert "move it aside" not in p.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes; the simulated test covers this")
def test_search_on_a_read_only_workspace(tmp_path):
    ws = _workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0
    modes = {}
    for p in [ws, *ws.rglob("*")]:
        modes[p] = p.stat().st_mode
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        p = run_main("search", "-w", ws, "twin", "-k", "3")
        assert p.returncode == 0 and "d0" in p.stdout, p.stderr
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


@pytest.mark.slow  # a subprocess in a mount namespace
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1) here")
def test_search_on_a_read_only_mount(tmp_path):
    """A real read-only file system: the workspace bind-mounted read-only in a private mount namespace
    (root only; skipped where the namespace or the mount is not allowed)."""
    ws = _workspace(tmp_path)
    assert run_main("search", "-w", ws, "twin").returncode == 0
    mnt = tmp_path / "ro"
    mnt.mkdir()
    script = (f"mount --bind {ws} {mnt} && mount -o remount,ro,bind {mnt} || exit 77; "
              f"touch {mnt}/probe 2>/dev/null && exit 78; "
              f"exec {sys.executable} -m chitragupta.cli.main search -w {mnt} twin -k 3")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    if p.returncode in (77, 78) or "unshare failed" in p.stderr or "Operation not permitted" in p.stderr:
        pytest.skip(f"cannot make a read-only mount here ({p.stderr.strip()[:120]})")
    assert p.returncode == 0 and "d0" in p.stdout, p.stderr  # was: not a usable ledger database ... move it aside


# -- 10. a FIFO where a parsed text is expected ------------------------------------------------------------

def _finishes(fn, fifos: list[Path], seconds: float = 20.0):
    """Run ``fn`` in a thread; if it is still running after ``seconds`` (blocked opening a FIFO), open
    each FIFO for writing once so it can end, and fail."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            out["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    hung = t.is_alive()
    while t.is_alive():
        for f in fifos:
            try:
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        t.join(0.2)
    assert not hung, "blocked opening a FIFO"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_a_fifo_for_a_parsed_text_is_missing_text_not_a_hang(tmp_path):
    from chitragupta.engine.index.manage import refresh

    ws_dir = _workspace(tmp_path)
    ws = Workspace.open(ws_dir)
    txt = ws.parsed_dir / "d2.txt"
    txt.unlink()
    os.mkfifo(txt)
    side = ws.parsed_dir / "d3.passages.json"
    os.mkfifo(side)
    opened = _finishes(lambda: refresh(ws, force=True), [txt, side])
    index = opened.index
    assert index.keys_with_flag(FLAG_TEXT_MISSING) == ["d2"]
    assert _finishes(lambda: read_text(txt), [txt]) == ""
    assert _finishes(lambda: load_body(txt).text, [txt]) == ""
    body = _finishes(lambda: load_body(ws.parsed_dir / "d3.txt"), [side])
    assert body.text.startswith("twin") and not body.from_sidecar
    with pytest.raises(SidecarError, match="not a regular file"):
        _finishes(lambda: read_sidecar(side), [side])
    p = _finishes(lambda: run_main("search", "-w", ws_dir, "twin", "-k", "10"), [txt, side])
    assert p.returncode == 0 and "d3" in p.stdout and "1 parsed source(s) have no parsed text" in p.stderr


# -- the plain-text reference cut ------------------------------------------------------------------------

BODY = "".join(f"Paragraph {i} of the paper body, discussing digital twin fidelity at length.\n" for i in range(40))
REFS = "".join(f"[{i}] A. Author and B. Author. {2000 + i}. A cited work. In Proc. of a venue, pp. 1-10.\n"
               for i in range(1, 25))


@pytest.mark.parametrize("heading", ["References", "REFERENCES", "7 References", "VII. REFERENCES", "References:",
                                     "Bibliography", "Literature Cited", "WORKS CITED", "\fReferences", "A. References ",
                                     "References\r"])
def test_plain_cut_at_a_reference_heading(heading):
    text = BODY + heading + "\n" + REFS
    cut = plain_reference_cut(text)
    assert cut == len(BODY)
    blanked = cut_plain(text)
    # blanked, not removed: the same length and lines, nothing of the list left
    assert len(blanked) == len(text) and blanked.count("\n") == text.count("\n")
    assert blanked[:cut] == BODY and not blanked[cut:].strip()


@pytest.mark.parametrize("text", [
    # a table of contents: the heading in the first 30%
    "Contents\n1 Introduction\n2 Method\nReferences\n" + "[1] x 2001 y [2] z 2002 [3] 2003 [4] 2004\n" + BODY * 3,
    # a lower-case "references" alone on a line: a wrapped sentence
    BODY + "these\nreferences\n" + REFS,
    # a heading followed by prose, not by a list
    BODY + "References\n" + BODY,
    # not a heading: more words on the line
    BODY + "Reference architecture\n" + REFS,
    BODY + "References to prior work\n" + REFS,
    # no heading at all
    BODY + REFS,
])
def test_plain_cut_leaves_what_is_not_a_reference_list(text):
    assert plain_reference_cut(text) is None
    assert cut_plain(text) == text


def test_plain_cut_takes_the_last_heading_and_the_appendix_after_it():
    text = BODY + "References\nsee below\n" + BODY + "REFERENCES\n" + REFS + "Appendix A\nMore prose.\n"
    assert plain_reference_cut(text) == len(BODY + "References\nsee below\n" + BODY)
    # an earlier heading that passes while the last one does not: the earlier one
    text = BODY + "References\n" + REFS + "Appendix\nReferences\n" + BODY
    assert plain_reference_cut(text) == len(BODY)


def test_a_parsed_text_without_a_sidecar_is_read_before_its_references(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text(BODY + "References\n" + REFS, encoding="utf-8")
    body = load_body(p)
    assert body.text.rstrip() == BODY.rstrip() and len(body.text) == len(BODY + "References\n" + REFS)
    assert body.ref_words == len(("References\n" + REFS).split()) and body.after_words == 0
    assert not load_body(p).from_sidecar


PAPERMAGE = SHARED / "data" / "pdfs" / "papermage"


@pytest.mark.slow
@pytest.mark.skipif(not PAPERMAGE.is_dir(), reason="../shared/data/pdfs is absent")
def test_plain_cut_on_real_pdfs_is_at_the_reference_heading():
    from chitragupta.engine.corpus.parsers import parse

    from bench.refcut import FIRST_ENTRY

    for pdf in sorted(PAPERMAGE.glob("*.pdf")):
        text = parse(pdf, "pdftotext").text
        cut = plain_reference_cut(text)
        assert cut is not None, pdf.name
        entry = text.index(FIRST_ENTRY[pdf.stem])
        assert text[cut:entry].strip() in ("References", "REFERENCES"), pdf.name


def test_snippets_of_a_text_without_a_sidecar_never_quote_its_references(tmp_path):
    from chitragupta.engine.search import Retriever

    refs = "".join(f"[{i}] A. Author. {2000 + i}. Zebrafish cited work number {i}. Proc. venue.\n" for i in range(1, 25))
    text = BODY + "References\n" + refs
    src = _lines(tmp_path / "c.jsonl", json.dumps({"_id": "paper", "title": "A paper", "text": text}),
                 json.dumps({"_id": "other", "title": "Other", "text": "twin zebrafish"}))
    ws = tmp_path / "ws"
    assert run_main("import", "-w", ws, src).returncode == 0
    hits = {h.citekey: h for h in Retriever.open(ws).search("twin zebrafish", k=5, snippet_chars=300).hits}
    assert "paper" in hits and "twin" in hits["paper"].snippet.lower()
    assert "zebrafish" not in hits["paper"].snippet.lower()  # was: the window holding both, in the references
