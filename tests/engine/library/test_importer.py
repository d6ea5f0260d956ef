"""``import`` of a JSONL corpus: rows, files, re-imports, changed and removed records, case-folded name
collisions, and what a run interrupted at any point leaves (every row's file whole, a rerun finishing
the job). The SIGKILL campaign itself is ``tools/tests/test_reliability.py``; here the interruptions are
exceptions raised at chosen steps, which leave the same on-disk state a kill there would."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from collections import defaultdict
from pathlib import Path

import chitragupta.engine.library.importer as importer_mod
import pytest
from chitragupta.engine.library.committer import ParsedFolder
from chitragupta.engine.library.jsonl import iter_jsonl
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import assign_names, text_hash
from chitragupta.engine.library.workspace import (
    Workspace,
    hashed_name,
    replace_in_folder,
    safe_name,
)

from helpers import (
    import_jsonl,
    one_error_line_after_progress,
    random_docs,
    run_main,
    write_jsonl,
    write_lines,
)


class Boom(Exception):
    pass




def _ws(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws", create=True)


def _rows(ws):
    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


def _pending(ws):
    with Ledger(ws.ledger_path) as led:
        return led.get_meta("unlink_pending")


def _state(ws) -> dict:
    """What a reader sees: rows (less updated_at) and every file under content/parsed/ with its bytes."""
    from chitragupta.engine.index.source import read_text
    from chitragupta.engine.library.texts import split_ref

    def where(rel):  # a packed text by its text (a pack's name is drawn at random), a file by its path
        return ("packed", read_text(ws.root / rel)) if rel and split_ref(rel) else rel

    rows = {k: (r.title, r.abstract, r.keywords, r.status, where(r.parsed_path), r.origin, r.source_hash, r.backend)
            for k, r in _rows(ws).items()}
    files = {p.name: p.read_bytes() for p in sorted(ws.parsed_dir.iterdir()) if p.is_file()}
    return {"rows": rows, "files": files}


def _consistent(ws, records: list[dict] | None = None) -> None:
    """Every parsed row's file exists, whole, and is the text its row's hash stands for."""
    by_key = {str(r["_id"]): r for r in records} if records else {}
    for key, row in _rows(ws).items():
        assert row.status == "parsed" and row.backend == "jsonl"
        p = ws.root / row.parsed_path
        assert p.is_file(), f"{key}: row points at a missing file {row.parsed_path}"
        text = p.read_text(encoding="utf-8")
        assert text_hash(row.title, text, row.abstract) == row.source_hash, f"{key}: file is not the row's text"
        if key in by_key:
            assert text == by_key[key]["text"]


def _clean_state(tmp_path: Path, name: str, *versions: list[dict]) -> dict:
    """The state after importing ``versions`` one after another, uninterrupted, in a fresh workspace
    (the corpus inside it, so rows name it by a relative path and states compare across folders)."""
    ws = Workspace.open(tmp_path / name, create=True)
    src = ws.root / "c.jsonl"
    for records in versions:
        import_jsonl(ws, write_jsonl(src, records))
    return _state(ws)


def _docs(n: int, seed: int = 0) -> list[dict]:
    return random_docs(seed, n)


def _changed(docs: list[dict], seed: int) -> list[dict]:
    """Some texts changed, some records removed, some new ones."""
    rng = random.Random(seed)
    out = []
    for d in docs:
        u = rng.random()
        if u < 0.1:
            continue
        if u < 0.3:
            d = dict(d, text=d["text"] + " revised")
        out.append(d)
    return out + [{"_id": f"new{i}", "title": "new", "text": f"new text {i}"} for i in range(7)]


# -- rows and files ---------------------------------------------------------------------------------

def test_fresh_import_writes_one_file_per_row(tmp_path):
    docs = _docs(300)
    docs[5]["keywords"] = ["k one", "k two"]
    docs[6]["abstract"] = "an abstract"
    ws = _ws(tmp_path)
    calls = []
    rep = import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", docs), progress=lambda d, t: calls.append((d, t)))
    assert (rep.entries, rep.parsed, rep.unchanged, rep.removed) == (300, 300, 0, 0)
    assert calls[0] == (0, 300) and calls[-1] == (300, 300)
    rows = _rows(ws)
    assert list(rows) == sorted(d["_id"] for d in docs)
    for d in docs:
        r = rows[d["_id"]]
        assert r.parsed_path == f"content/parsed/{d['_id']}.txt" and r.origin == str((tmp_path / "c.jsonl").resolve())
        assert r.title == d["title"] and r.source_hash == text_hash(d["title"], d["text"], d.get("abstract"))
    assert rows["d0005"].keywords == ("k one", "k two") and rows["d0006"].abstract == "an abstract"
    _consistent(ws, docs)
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(f"{d['_id']}.txt" for d in docs)
    assert _pending(ws) is None


def test_unchanged_reimport_touches_nothing(tmp_path):
    docs = _docs(200)
    ws = _ws(tmp_path)
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    import_jsonl(ws, src)
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in ws.parsed_dir.iterdir()}
    with Ledger(ws.ledger_path) as led:
        stamp = led.change_stamp()
    rep = import_jsonl(ws, src)
    assert (rep.parsed, rep.unchanged, rep.removed) == (0, 200, 0)
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in ws.parsed_dir.iterdir()} == before
    with Ledger(ws.ledger_path) as led:
        assert led.change_stamp() == stamp  # no row written: the index's stamp stays valid


def test_changed_removed_and_new_records(tmp_path):
    v0 = _docs(300, seed=1)
    v1 = _changed(v0, seed=2)
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, v0))
    rep = import_jsonl(ws, write_jsonl(src, v1))
    changed = sum(1 for d in v1 if d["text"].endswith(" revised"))
    assert rep.parsed == changed + 7 and rep.unchanged == len(v1) - changed - 7
    assert rep.removed == len(v0) - (len(v1) - 7)
    assert set(_rows(ws)) == {d["_id"] for d in v1}
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(f"{d['_id']}.txt" for d in v1)
    _consistent(ws, v1)
    assert _state(ws)["files"] == _clean_state(tmp_path, "clean", v1)["files"]


def test_keywords_only_change_rewrites_the_row_not_the_file(tmp_path):
    docs = _docs(20)
    ws = _ws(tmp_path)
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    import_jsonl(ws, src)
    p = ws.parsed_dir / "d0003.txt"
    ino = p.stat().st_ino
    docs[3]["keywords"] = "alpha; beta"
    rep = import_jsonl(ws, write_jsonl(src, docs))
    assert rep.parsed == 0 and rep.unchanged == 20
    assert _rows(ws)["d0003"].keywords == ("alpha", "beta") and p.stat().st_ino == ino


def test_a_changed_record_replaces_its_file_atomically(tmp_path):
    """The new text arrives by rename: a reader holding the old file keeps reading it whole, and the path
    shows the old bytes or the new ones, never a mix -- also when the run dies just before the rename."""
    docs = _docs(10)
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs))
    p = ws.parsed_dir / "d0004.txt"
    old_bytes = p.read_bytes()
    docs[4]["text"] = "entirely new words " * 500
    write_jsonl(src, docs)

    real_rename = os.rename

    def die_before_rename(a, b):
        if str(b).endswith("d0004.txt"):
            assert Path(a).read_text() == docs[4]["text"]  # the temp file is complete before the rename
            raise Boom
        return real_rename(a, b)

    with open(p, "rb") as held:
        os.rename = die_before_rename
        try:
            with pytest.raises(Boom):
                import_jsonl(ws, src)
        finally:
            os.rename = real_rename
        assert p.read_bytes() == old_bytes  # the old file, whole
        assert not any(q.name.startswith(".") for q in ws.parsed_dir.iterdir())  # its temp file removed
        assert _rows(ws)["d0004"].source_hash == text_hash(docs[4]["title"], old_bytes.decode(), None)
        ino = p.stat().st_ino
        import_jsonl(ws, src)
        assert p.read_text() == docs[4]["text"] and p.stat().st_ino != ino  # a new file renamed into place
        assert held.read() == old_bytes  # the old one, still whole for whoever had it open
    _consistent(ws, docs)


def test_replace_in_folder_never_writes_through_a_symlink(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.txt").symlink_to(outside)
    (folder / ".b.txt.7.tmp").symlink_to(outside)
    replace_in_folder(str(folder), "a.txt", b"new a", "7")
    replace_in_folder(str(folder), "b.txt", b"new b", "7")
    assert outside.read_text() == "keep"
    assert (folder / "a.txt").read_bytes() == b"new a" and not (folder / "a.txt").is_symlink()
    assert (folder / "b.txt").read_bytes() == b"new b"
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt", "b.txt"]
    for bad in ("", ".", "..", "x/y", "x\x00y"):
        with pytest.raises(ValueError):
            replace_in_folder(str(folder), bad, b"", "7")


# -- names ------------------------------------------------------------------------------------------

def _assign_names_reference(citekeys) -> dict[str, str]:
    """The rule, written the plain way: every member of a case-folded group of more than one is hashed."""
    names = {k: safe_name(k) for k in citekeys}
    groups = defaultdict(list)
    for k, n in names.items():
        groups[n.casefold()].append(k)
    for members in groups.values():
        if len(members) > 1:
            for k in members:
                names[k] = hashed_name(k)
    return names


def test_assign_names_matches_the_rule():
    rng = random.Random(4)
    alphabet = "aAbB._-/ \u00e9\u0130i"
    for _ in range(300):
        keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 30))]
        keys += ["CON", "con", "Smith2020", "smith2020", "x" * 81]
        assert assign_names(keys) == _assign_names_reference(keys)
        assert assign_names(set(keys)) == _assign_names_reference(set(keys))


def test_case_folded_collisions_in_one_file_and_across_runs(tmp_path):
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    v0 = [{"_id": "Smith2020", "title": "A", "text": "upper smith"}, {"_id": "jones", "text": "jones text"}]
    import_jsonl(ws, write_jsonl(src, v0))
    assert _rows(ws)["Smith2020"].parsed_path == "content/parsed/Smith2020.txt"
    # a key that folds to the same name arrives: both move to hashed names, the old file goes
    v1 = v0 + [{"_id": "smith2020", "title": "B", "text": "lower smith"}, {"_id": "JONES2", "text": "j2"},
               {"_id": "jones2", "text": "j2 lower"}]
    rep = import_jsonl(ws, write_jsonl(src, v1))
    rows = _rows(ws)
    names = {rows[k].parsed_path.rsplit("/", 1)[1] for k in rows}
    assert len({n.casefold() for n in names}) == 5  # unique even on a case-insensitive file system
    assert rows["Smith2020"].parsed_path == f"content/parsed/{hashed_name('Smith2020')}.txt"
    assert rows["smith2020"].parsed_path == f"content/parsed/{hashed_name('smith2020')}.txt"
    assert rows["jones"].parsed_path == "content/parsed/jones.txt"
    assert rep.parsed == 4 and rep.unchanged == 1  # Smith2020 rewritten under its new name
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(names)
    _consistent(ws, v1)
    assert _pending(ws) is None
    # the colliding key leaves: once its row is removed, Smith2020 gets its plain name back, in the same run
    rep = import_jsonl(ws, write_jsonl(src, v0))
    assert rep.removed == 3 and rep.parsed == 1 and rep.unchanged == 1
    assert _rows(ws)["Smith2020"].parsed_path == "content/parsed/Smith2020.txt"
    _consistent(ws, v0)
    rep = import_jsonl(ws, src)  # and the next run finds nothing to do
    assert rep.parsed == 0 and rep.unchanged == 2
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == ["Smith2020.txt", "jones.txt"]
    _consistent(ws, v0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_names_found_in_one_read_equal_assign_names(tmp_path, seed):
    """Keys that fold together arriving in any order, over successive imports (some kept, some gone, some
    new): each import ends with exactly ``assign_names(ledger kept | file)`` (here: the file's keys), one
    file per row, and a second import of the same file changes nothing."""
    rng = random.Random(seed)
    stems = ["ab", "cd", "x.y", "con", "q"]
    pool = sorted({"".join(c.upper() if rng.random() < 0.5 else c for c in s) + t
                   for s in stems for t in ("", "1") for _ in range(3)})
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    others = rng.sample(pool, 2)  # another source's keys: they stay, and count
    import_jsonl(ws, write_jsonl(tmp_path / "other.jsonl", [{"_id": k, "text": "other"} for k in others]))
    other_files = {k: r.parsed_path for k, r in _rows(ws).items()}
    for round_ in range(4):
        keys = [k for k in rng.sample(pool, rng.randint(1, len(pool))) if k not in others]
        records = [{"_id": k, "title": k, "text": f"{k} text {round_ % 2}"} for k in keys]
        import_jsonl(ws, write_jsonl(src, records))
        want = assign_names(set(others) | set(keys))
        rows = _rows(ws)
        assert set(rows) == set(keys) | set(others)
        for k in keys:
            assert rows[k].parsed_path == f"content/parsed/{want[k]}.txt", (round_, k)
        assert {k: rows[k].parsed_path for k in others} == other_files  # another source's files untouched
        assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(
            [f"{want[k]}.txt" for k in keys] + [p.rsplit("/", 1)[1] for p in other_files.values()])
        _consistent(ws)
        assert _pending(ws) is None
        again = import_jsonl(ws, src)
        assert again.parsed == 0 and again.unchanged == len(keys)


def test_hostile_ids_stay_inside_parsed(tmp_path):
    docs = [{"_id": k, "text": f"text of {k!r}"} for k in ("../../x", "a/b", "CON", ".hidden", "k" * 300, "ok")]
    ws = _ws(tmp_path)
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", docs))
    _consistent(ws, docs)
    for r in _rows(ws).values():
        assert (ws.root / r.parsed_path).resolve().parent == ws.parsed_dir.resolve()
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "x").exists()


# -- interrupted runs -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("step", ["write", "rename", "commit", "unlink"])
def test_an_interrupted_import_leaves_whole_files_and_a_rerun_finishes(tmp_path, monkeypatch, step):
    """Interrupt the v0 -> v1 import at every occurrence of ``step`` in turn (a few rows per batch, so
    commits happen throughout): each time, every row points at its whole file, and a rerun gives what an
    uninterrupted import gives."""
    v0 = _docs(60, seed=5)
    v1 = _changed(v0, seed=6)
    v1.append({"_id": "D0001", "text": "folds onto d0001"})  # moves d0001 to a hashed name
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 7)
    want = _clean_state(tmp_path, "clean", v0, v1)
    base = tmp_path / "start"
    ws0 = Workspace.open(base, create=True)
    import_jsonl(ws0, write_jsonl(base / "c.jsonl", v0))
    write_jsonl(base / "c.jsonl", v1)

    new_text = {d["_id"]: d["text"] for d in v1}
    real = {"write": os.write, "rename": os.rename, "unlink": os.unlink}
    real_commit = Ledger.transaction
    hits = {"n": 0, "at": 0}

    def hit():
        hits["n"] += 1
        if hits["n"] == hits["at"]:
            raise Boom

    def fake(name):
        def f(*a, **kw):
            if step == name:
                hit()
            return real[name](*a, **kw)
        return f

    def transaction(self):
        if step == "commit":
            hit()
        return real_commit(self)

    at = 1
    while True:
        trial = tmp_path / f"t{at}"
        shutil.copytree(base, trial)
        ws = Workspace.open(trial)
        hits.update(n=0, at=at)
        for name in real:
            monkeypatch.setattr(os, name, fake(name))
        monkeypatch.setattr(Ledger, "transaction", transaction)
        try:
            import_jsonl(ws, trial / "c.jsonl")
            interrupted = False
        except Boom:
            interrupted = True
        finally:
            for name, fn in real.items():
                monkeypatch.setattr(os, name, fn)
            monkeypatch.setattr(Ledger, "transaction", real_commit)
        if not interrupted:
            break
        # Right after the interruption: no row without its file, and each file whole -- the text its row
        # stands for, or (a changed record whose row was not committed yet) that record's new text.
        for key, row in _rows(ws).items():
            p = ws.root / row.parsed_path
            assert p.is_file(), f"{step} #{at}: {key} -> missing {row.parsed_path}"
            text = p.read_text(encoding="utf-8")
            if text_hash(row.title, text, row.abstract) != row.source_hash:
                assert text == new_text.get(key), f"{step} #{at}: {key}: neither its row's text nor its new one"
        import_jsonl(ws, trial / "c.jsonl")
        assert _state(ws) == want, f"{step} #{at}: the rerun differs from a clean run"
        assert _pending(ws) is None
        at += 1 if at < 8 else 5
    assert at > 1 or step == "unlink"


@pytest.mark.slow
def test_sigkill_at_seeded_writes_with_moves_and_late_collisions(tmp_path):
    """Real SIGKILLs (``tools/_faults``' hook, just before the Nth write in the workspace) during an import
    that rewrites, removes, adds, and renames files for keys that fold together -- some of them found
    only late in the file: a reader finds every row's file, and a rerun equals an uninterrupted run."""
    import numpy as np
    from chitragupta.engine.index.source import has_text, read_text
    from tools.reliability import cli

    v0 = _docs(40, seed=8) + [{"_id": "Late", "text": "late upper"}]
    v1 = _changed(v0, seed=9) + [{"_id": "D0002", "text": "folds onto d0002"}, {"_id": "late", "text": "l"},
                                 {"_id": "NEWa", "text": "x"}, {"_id": "newA", "text": "y"}]
    new_text = {d["_id"]: d["text"] for d in v1}
    start = tmp_path / "start"  # one file per record, then the CLI's import (packed) moves what changed
    import_jsonl(Workspace.open(start, create=True), write_jsonl(start / "c.jsonl", v0))
    write_jsonl(start / "c.jsonl", v1)
    argv = ["import", "-w", ".", "c.jsonl"]
    clean = tmp_path / "clean"
    shutil.copytree(start, clean)
    p = cli(argv, cwd=clean, fault_root=clean, count_file=tmp_path / "writes")
    assert p.returncode == 0, p.stderr
    writes = int((tmp_path / "writes").read_text())
    want = _state(Workspace.open(clean))
    rng = np.random.default_rng(0)
    points = sorted({1, writes, *(int(x) for x in rng.integers(2, writes, size=8))})
    for at in points:
        trial = tmp_path / f"kill{at}"
        shutil.copytree(start, trial)
        p = cli(argv, cwd=trial, fault_root=trial, kill_at=at)
        assert p.returncode == -9, f"write {at} of {writes}: not killed ({p.returncode}) {p.stderr[-300:]}"
        ws = Workspace.open(trial)
        for key, row in _rows(ws).items():
            f = ws.root / row.parsed_path
            assert has_text(f), f"write {at}: {key} -> missing {row.parsed_path}"
            text = read_text(f)
            if text_hash(row.title, text, row.abstract) != row.source_hash:
                assert text == new_text.get(key), f"write {at}: {key}: neither its row's text nor its new one"
        again = cli(argv, cwd=trial)
        assert again.returncode == 0, again.stderr
        assert _state(ws) == want, f"killed at write {at} of {writes}: the rerun differs from a clean run"
        assert _pending(ws) is None
        shutil.rmtree(trial)


def test_a_kill_between_commit_and_unlink_is_finished_by_the_next_import(tmp_path, monkeypatch):
    v0 = _docs(30)
    v1 = v0[:20]
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, v0))

    def die(self, rel):
        raise Boom

    monkeypatch.setattr(ParsedFolder, "remove", die)
    with pytest.raises(Boom):
        import_jsonl(ws, write_jsonl(src, v1))
    monkeypatch.undo()
    assert set(_rows(ws)) == {d["_id"] for d in v1}  # the rows went first ...
    assert len(list(ws.parsed_dir.iterdir())) == 30  # ... their files are still there, listed as pending
    assert len(json.loads(_pending(ws))) == 10
    _consistent(ws, v1)
    rep = import_jsonl(ws, src)
    assert rep.parsed == 0 and rep.unchanged == 20
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(f"{d['_id']}.txt" for d in v1)
    assert _pending(ws) is None


def test_a_pending_path_that_a_row_took_since_is_kept(tmp_path):
    ws = _ws(tmp_path)
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, [{"_id": "a", "text": "a text"}]))
    with Ledger(ws.ledger_path) as led, led.transaction():
        led.set_meta("unlink_pending", json.dumps(["content/parsed/a.txt", "content/parsed/gone.txt",
                                                   "../outside.txt", "content/../../x.txt"]))
    (ws.parsed_dir / "gone.txt").write_text("orphan")
    (tmp_path / "outside.txt").write_text("keep")
    import_jsonl(ws, src)
    assert (ws.parsed_dir / "a.txt").read_text() == "a text" and not (ws.parsed_dir / "gone.txt").exists()
    assert (tmp_path / "outside.txt").read_text() == "keep" and _pending(ws) is None


def test_stale_temp_files_and_sidecars_are_removed(tmp_path):
    docs = _docs(5)
    ws = _ws(tmp_path)
    ws.parsed_dir.mkdir(parents=True)
    (ws.parsed_dir / ".d0001.txt.99999.tmp").write_text("half")
    (ws.parsed_dir / ".d0002.txt.abc123.tmp").write_text("half")
    (ws.parsed_dir / "d0003.passages.json").write_text("[]")
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", docs))
    assert sorted(p.name for p in ws.parsed_dir.iterdir()) == sorted(f"{d['_id']}.txt" for d in docs)


# -- the reader -------------------------------------------------------------------------------------

def test_lone_surrogate_escapes_are_replaced_or_skip_the_line(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text('{"_id": "a", "title": "t \\udc00", "text": "x \\ud800 y \\ud83d\\ude00", "keywords": ["\\ud801"]}\n'
                   '{"_id": "b\\ud800", "text": "q"}\n'
                   '{"_id": "c", "text": "caf\\u00e9 \\\\ud800"}\n', encoding="ascii")
    problems: list[str] = []
    recs = list(iter_jsonl(src, problems))
    assert [r.citekey for r in recs] == ["a", "c"]
    assert recs[0].text == "x \ufffd y \U0001F600" and recs[0].title == "t \ufffd" and recs[0].keywords == ("\ufffd",)
    assert recs[1].text == "caf\u00e9 \\ud800"
    assert [p.split(":")[1] for p in problems] == ["1", "2"]
    ws = _ws(tmp_path)
    rep = import_jsonl(ws, src)  # used to stop with a UnicodeEncodeError traceback
    assert rep.parsed == 2
    assert (ws.root / _rows(ws)["a"].parsed_path).read_text(encoding="utf-8") == "x \ufffd y \U0001F600"


def test_the_reader_judges_lines_as_json_loads_does(tmp_path):
    """The fast path (json's C scanner) accepts exactly what ``json.loads`` accepts, and a bad line gets
    ``json.loads``' own message."""
    lines = ['  {"_id": "lead", "text": "t"}', '{"_id": "trail", "text": "t"} \t\r',
             '{"_id": "nbsp", "text": "t"}\u00a0', '{"_id": "two", "text": "t"} {"_id": "x"}',
             '\ufeff{"_id": "bom", "text": "t"}', '{"_id": "ok", "text": "t"}',
             '{"_id": "nan", "text": "t", "n": NaN}', '{"_id": "cut", "text": "t"', '[1, 2]', '"just a string"']
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems: list[str] = []
    got = [r.citekey for r in iter_jsonl(src, problems)]
    want, want_problems = [], []
    for n, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line + "\n")  # the line as read, its newline included
        except json.JSONDecodeError as err:
            want_problems.append(f"{src}:{n}: not valid JSON ({err.msg} at column {err.colno}); line skipped")
            continue
        if isinstance(obj, dict):
            want.append(obj["_id"])
        else:
            want_problems.append(f"{src}:{n}: expected a JSON object, got {type(obj).__name__}; line skipped")
    assert got == want == ["lead", "trail", "ok", "nan"]
    assert problems == want_problems


def test_other_origins_and_damaged_files_are_respected(tmp_path):
    ws = _ws(tmp_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    import_jsonl(ws, write_jsonl(a, [{"_id": "x", "text": "from a"}, {"_id": "y", "text": "y"}]))
    rep = import_jsonl(ws, write_jsonl(b, [{"_id": "x", "text": "from b"}]))
    assert rep.parsed == 0 and "already in the ledger" in rep.problems[0]
    assert (ws.parsed_dir / "x.txt").read_text() == "from a"
    a.write_text('{"_id": "x", "text": "from a"}\n{"_id": "y", "te', encoding="utf-8")  # truncated
    rep = import_jsonl(ws, a)
    assert rep.removed == 0 and set(_rows(ws)) == {"x", "y"} and any("were kept" in p for p in rep.problems)


# -- hostile input: a full disk, ids a run cannot carry, keys that are paths ---------------------------------
def _rows_and_files_whole(ws_dir: Path) -> None:
    ws = Workspace.open(ws_dir)
    with Ledger(ws.ledger_path) as led:
        rows = led.rows()
    for r in rows:
        assert (ws.root / r.parsed_path).read_text(encoding="utf-8").startswith("twin"), r.citekey
    assert not [p.name for p in ws.parsed_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_during_import_is_one_line_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    import chitragupta.engine.library.committer as committer_mod
    import chitragupta.engine.library.importer as importer_mod

    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "text": f"twin {i}"}) for i in range(50)))
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 10)
    real = committer_mod.replace_in_folder
    calls = {"n": 0}

    def full(folder, name, data, tag):
        calls["n"] += 1
        if calls["n"] > 25:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{folder}/{name}")
        return real(folder, name, data, tag)

    monkeypatch.setattr(committer_mod, "replace_in_folder", full)
    import chitragupta.engine.library.sync as sync_mod
    monkeypatch.setattr(sync_mod, "import_jsonl", import_jsonl)  # the CLI's import, per file
    p = run_main("import", "-w", tmp_path / "ws", src)  # was: an OSError traceback
    one_error_line_after_progress(p, "No space left on device", "import stopped", "run the import again")
    _rows_and_files_whole(tmp_path / "ws")
    monkeypatch.setattr(committer_mod, "replace_in_folder", real)
    p = run_main("import", "-w", tmp_path / "ws", src)
    assert p.returncode == 0 and "import: 50 entries" in p.stdout
    _rows_and_files_whole(tmp_path / "ws")


def test_after_an_import_with_bad_ids_every_batch_search_succeeds(tmp_path):
    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": k, "text": "twin"}) for k in
                                         ["a b", "x\u0001y", " ", "ok", "a\u00a0b", "tab\t", "fine-2"]))
    ws = tmp_path / "ws"
    p = run_main("import", "-w", ws, src)
    assert p.returncode == 0 and "import: 2 entries" in p.stdout
    assert p.stderr.count("'_id'") == 5
    q = write_lines(tmp_path / "q.jsonl", json.dumps({"_id": "q1", "text": "twin"}))
    run = tmp_path / "out.trec"
    p = run_main("search", "-w", ws, "--queries", q, "--run", run)  # was: citekey 'a b' holds whitespace
    assert p.returncode == 0, p.stderr
    assert sorted(line.split()[2] for line in run.read_text().splitlines()) == ["fine-2", "ok"]


def test_hostile_citekeys_end_to_end_stay_citable(tmp_path):
    """Keys that are paths, device names or 10,000 characters: imported, indexed, found, written to a
    TREC run under their real names, and every file they produced is inside content/parsed."""
    from chitragupta.engine.search.bm25 import Retriever

    keys = ["../../x", "CON", "a/b", "k" * 10_000, "/etc/y", "nul.txt", "..", "x\\y"]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"_id": k, "title": f"T{i}", "text": f"uniqword{i} twin"}) + "\n"
                           for i, k in enumerate(keys)), encoding="utf-8")
    ws = tmp_path / "ws"
    from helpers import run_cli

    run_cli("import", "-w", ws, src, check=True)
    for i, k in enumerate(keys):
        hits = Retriever.open(ws, backend="numpy").search(f"uniqword{i}", k=3).hits
        assert [h.citekey for h in hits] == [k]
    parsed = {p.resolve().parent for p in (ws / "content" / "parsed").iterdir()}
    assert parsed == {(ws / "content" / "parsed").resolve()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "ws"]
