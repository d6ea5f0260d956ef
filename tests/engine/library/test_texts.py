"""``import`` into packs (``engine.library.texts``): the default layout. The same corpus imported packed and
one file a record gives the same index arrays, hits, snippets, evidence, reference lists and embed input;
re-imports append (old bytes become garbage, reclaimed past half the packs); a run stopped at any step
leaves no row pointing at bytes that are not there; a pack gone or cut short reads as missing text."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import chitragupta.engine.library.importer as importer_mod
import chitragupta.engine.library.texts as texts_mod
import numpy as np
import pytest
from chitragupta.engine.index.manage import refresh
from chitragupta.engine.index.source import (
    FLAG_TEXT_MISSING,
    fingerprints,
    read_text,
    row_body,
)
from chitragupta.engine.library.importer import import_jsonl
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import text_hash
from chitragupta.engine.library.texts import (
    PACKS_DIR,
    PackWriter,
    is_ref,
    read_ref,
    split_ref,
)
from chitragupta.engine.library.workspace import Workspace

from helpers import (
    PAPER_BODY,
    PAPER_REFS,
    assert_same_bytes,
    npy_bytes,
    random_docs,
    run_main,
    write_jsonl,
)


class Boom(Exception):
    pass


def _ws(root: Path) -> Workspace:
    return Workspace.open(root, create=True)


def _rows(ws) -> dict:
    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


def _packs(ws) -> dict[str, int]:
    folder = ws.root / PACKS_DIR
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def _whole(ws, records: list[dict] | None = None) -> None:
    """Every row's text is there, whole, and is the text its hash stands for (and the record's)."""
    by_key = {str(r["_id"]): r for r in records} if records else {}
    for key, row in _rows(ws).items():
        data = read_ref(ws.root / row.parsed_path) if is_ref(row.parsed_path) else (ws.root / row.parsed_path).read_bytes()
        assert data is not None, f"{key}: row points at bytes that are not there ({row.parsed_path})"
        text = data.decode("utf-8")
        assert text_hash(row.title, text, row.abstract) == row.source_hash, key
        if key in by_key:
            assert text == by_key[key]["text"]


def _corpus() -> list[dict]:
    docs = random_docs(5, 120, vocab=150)
    docs[3]["text"] = PAPER_BODY + "References\n" + PAPER_REFS  # a reference list: evidence and citations read it
    docs[7]["abstract"] = "an abstract of seven"
    docs[8]["text"] = "caf\u00e9 na\u00efve \u6f22\u5b57 multi-byte text, one-\nline hyphen"
    return docs


def test_a_packed_import_writes_packs_and_rows_that_point_into_them(tmp_path):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    rep = import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", docs))
    assert (rep.entries, rep.parsed, rep.unchanged, rep.garbage) == (120, 120, 0, 0)
    assert list(_packs(ws)) and [p.name for p in ws.parsed_dir.iterdir()] == ["packs"]  # no file per record
    rows = _rows(ws)
    refs = [split_ref(rows[str(d["_id"])].parsed_path) for d in docs]
    assert all(refs) and sum(r[2] for r in refs) == sum(_packs(ws).values())  # no byte but the texts
    _whole(ws, docs)
    assert read_text(ws.root / rows[str(docs[8]["_id"])].parsed_path) == docs[8]["text"]
    again = import_jsonl(ws, tmp_path / "c.jsonl")  # the same file again: a no-op
    assert (again.parsed, again.unchanged) == (0, 120)
    assert _rows(ws) == rows and sum(_packs(ws).values()) == sum(r[2] for r in refs)


def test_packed_and_per_file_imports_give_the_same_outputs(tmp_path):
    docs = _corpus()
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    a, b = _ws(tmp_path / "packed"), _ws(tmp_path / "files")
    import_jsonl(a, src)
    import_jsonl(b, src, packed=False)
    assert all(is_ref(r.parsed_path) for r in _rows(a).values())
    assert not any(is_ref(r.parsed_path) for r in _rows(b).values())
    for ws in (a, b):
        refresh(ws, force=True)
    one, two = npy_bytes(a), npy_bytes(b)
    assert one.pop("fingerprints.npy") != two.pop("fingerprints.npy")  # (they name where the texts are)
    for got in (one, two):  # the manifest but the fingerprints' checksum
        manifest = json.loads(got["manifest.json"])
        del manifest["files"]["fingerprints"]["crc32"]
        got["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    assert_same_bytes(one, two)  # every other array, and the manifest, to the byte
    from chitragupta.engine.index.source import row_body
    from chitragupta.enrich.chunking import document_text

    def reference_text(root, path):
        return row_body(root, path, lists=True).references

    ra, rb = _rows(a), _rows(b)
    for key in ra:
        assert document_text(a, key, ra[key].parsed_path) == document_text(b, key, rb[key].parsed_path)
        assert reference_text(a.root, ra[key].parsed_path) == reference_text(b.root, rb[key].parsed_path)
    assert reference_text(a.root, ra[str(docs[3]["_id"])].parsed_path)  # (the list is there to compare)
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": f"q{i}", "text": t} for i, t in
                                           enumerate(["digital twin fidelity", "cited work venue", "caf\u00e9"])])
    outs = []
    for ws in (a, b):
        run = tmp_path / f"{ws.root.name}.jsonl"
        p = run_main("search", "-w", ws.root, "--queries", q, "--run", run, "--json", "-k", "20")
        assert p.returncode == 0, p.stderr
        p1 = run_main("search", "-w", ws.root, "digital twin fidelity", "--json", "-k", "5")
        p2 = run_main("evidence", "-w", ws.root, "--citekey", str(docs[3]["_id"]), "twin fidelity", "--json")
        p3 = run_main("refs", "-w", ws.root, str(docs[3]["_id"]))
        outs.append((run.read_text(), p1.stdout, p2.stdout, p3.stdout, p3.returncode))
    assert outs[0] == outs[1]
    assert "fidelity" in outs[0][1] and "fidelity" in outs[0][2]


def test_a_changed_record_is_appended_and_garbage_is_reclaimed_past_half(tmp_path):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs))
    first = _packs(ws)
    v1 = [dict(d, text=d["text"] + " changed") if i < 10 else d for i, d in enumerate(docs)]
    rep = import_jsonl(ws, write_jsonl(src, v1))
    assert (rep.parsed, rep.unchanged, rep.reclaimed) == (10, 110, 0)
    assert rep.garbage == sum(len(d["text"].encode()) for d in docs[:10])  # the replaced texts, not reclaimed
    assert list(_packs(ws)) == list(first)  # appended to the same pack
    _whole(ws, v1)
    v2 = [dict(d, text=d["text"] + " again") for d in v1[:100]]  # 20 removed, 100 changed: most bytes dead
    rep = import_jsonl(ws, write_jsonl(src, v2))
    assert rep.removed == 20 and rep.reclaimed > 0 and rep.garbage == 0
    packs = _packs(ws)
    assert len(packs) == 1 and not set(packs) & set(first)  # the old pack replaced whole by a new one
    assert sum(packs.values()) == sum(len(d["text"].encode()) for d in v2)
    _whole(ws, v2)
    with Ledger(ws.ledger_path) as led:
        assert led.get_meta("unlink_pending") is None
    assert "reclaimed" in rep.summary()


def test_a_kill_between_reclaim_commit_and_removal_is_finished_by_the_next_import(tmp_path, monkeypatch):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs))
    old = set(_packs(ws))
    v1 = [dict(d, text=f"short text {i}") for i, d in enumerate(docs)]  # the old texts: most of the bytes
    real = importer_mod.discard

    def boom(path):
        if str(path).endswith(".pack"):
            raise Boom()
        return real(path)

    monkeypatch.setattr(importer_mod, "discard", boom)
    with pytest.raises(Boom):
        import_jsonl(ws, write_jsonl(src, v1))
    monkeypatch.setattr(importer_mod, "discard", real)
    _whole(ws, v1)  # the rows point at the new pack, committed
    assert old <= set(_packs(ws))
    rep = import_jsonl(ws, src)
    assert rep.parsed == 0 and not old & set(_packs(ws))  # begin finished the removal
    _whole(ws, v1)


@pytest.mark.parametrize("step", ["sync", "commit"])
def test_an_interrupted_import_leaves_no_row_pointing_at_missing_bytes(tmp_path, monkeypatch, step):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs[:50]))
    monkeypatch.setattr(importer_mod, "_PACKED_BATCH_ROWS", 20)
    calls = {"n": 0}
    if step == "sync":
        real = PackWriter.sync

        def hit(self):
            calls["n"] += 1
            if calls["n"] == 3:
                raise Boom()  # (a kill: appended bytes not yet synced, their rows not committed)
            return real(self)

        monkeypatch.setattr(PackWriter, "sync", hit)
    else:
        real = Ledger.upsert_values

        def hit(self, values):
            calls["n"] += 1
            if calls["n"] == 3:
                raise Boom()
            return real(self, values)

        monkeypatch.setattr(Ledger, "upsert_values", hit)
    v1 = [dict(d, text=d["text"] + " v1") for d in docs]
    with pytest.raises(Boom):
        import_jsonl(ws, write_jsonl(src, v1))
    monkeypatch.undo()
    _whole(ws)  # every committed row's text whole: the old ones' or v1's
    rows = _rows(ws)
    assert 0 < sum(str(d["_id"]) in rows and rows[str(d["_id"])].source_hash ==
                   text_hash(d["title"], d["text"], d.get("abstract")) for d in v1) < len(v1)
    rep = import_jsonl(ws, src)  # a rerun finishes the job
    _whole(ws, v1)
    assert len(_rows(ws)) == len(v1) and rep.garbage > 0  # what the killed run appended is garbage


def test_a_full_disk_is_one_line_and_gives_the_appended_bytes_back(tmp_path, monkeypatch):
    docs = _corpus()
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    ws_dir = tmp_path / "ws"
    import_jsonl(_ws(ws_dir), write_jsonl(tmp_path / "c0.jsonl", docs[:30]))  # a pack some rows use already
    before = _packs(_ws(ws_dir))
    monkeypatch.setattr(importer_mod, "_PACKED_BATCH_ROWS", 20)
    monkeypatch.setattr(texts_mod, "_BUFFER", 1)
    real = os.write
    calls = {"n": 0}

    def full(fd, data):
        calls["n"] += 1
        if calls["n"] > 45:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(texts_mod.os, "write", full)
    p = run_main("import", "-w", ws_dir, src)
    monkeypatch.setattr(texts_mod.os, "write", real)
    assert p.returncode == 1 and "No space left on device" in p.stderr and "import stopped" in p.stderr
    assert "Traceback" not in p.stderr
    ws = _ws(ws_dir)
    _whole(ws)
    committed = len(_rows(ws)) - 30
    assert 0 < committed < len(docs)
    packs = _packs(ws)
    assert list(packs) == list(before)  # the one pack, cut back to what committed rows reach
    assert sum(packs.values()) == sum(split_ref(r.parsed_path)[2] for r in _rows(ws).values())
    p = run_main("import", "-w", ws_dir, src)
    assert p.returncode == 0, p.stderr
    _whole(ws, docs)


def test_a_pack_gone_or_cut_short_reads_as_missing_text(tmp_path):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", docs))
    refresh(ws, force=True)
    (pack,) = _packs(ws)
    path = ws.root / PACKS_DIR / pack
    rows = _rows(ws)
    last = max(rows.values(), key=lambda r: split_ref(r.parsed_path)[1])
    os.truncate(path, path.stat().st_size - 1)  # the last text cut short
    opened = refresh(ws)
    assert opened.index.keys_with_flag(FLAG_TEXT_MISSING) == [last.citekey]
    assert row_body(ws.root, last.parsed_path).text == "" and read_text(ws.root / last.parsed_path) == ""
    path.unlink()  # the pack gone: every row's text missing, no crash
    opened = refresh(ws)
    assert len(opened.index.keys_with_flag(FLAG_TEXT_MISSING)) == len(docs)
    p = run_main("search", "-w", ws.root, str(docs[0]["title"]), "-k", "3")
    assert p.returncode == 0 and "have no parsed text" in p.stderr
    os.mkfifo(path)  # a FIFO where the pack was is never opened
    assert read_text(ws.root / last.parsed_path) == "" and row_body(ws.root, last.parsed_path).text == ""
    rep = import_jsonl(ws, tmp_path / "c.jsonl")  # a re-import writes the missing texts again
    assert rep.parsed == len(docs)


def test_fingerprints_of_packed_rows_hold_while_the_pack_grows(tmp_path):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs[:60]))
    with Ledger(ws.ledger_path) as led:
        view = led.index_view()
    fps, flags, sources = fingerprints(ws.root, view)
    import_jsonl(ws, write_jsonl(src, docs))  # 60 more appended to the same pack
    fps2, flags2, _ = fingerprints(ws.root, view)
    assert np.array_equal(fps, fps2) and np.array_equal(flags, flags2)
    assert all(s.text_file is not None and is_ref(s.text_file) for s in sources)
    changed = [dict(d, text="other") if i == 0 else d for i, d in enumerate(docs)]
    import_jsonl(ws, write_jsonl(src, changed))
    with Ledger(ws.ledger_path) as led:
        view3 = led.index_view()
    fps3, _f, _s = fingerprints(ws.root, view3)
    key0 = str(docs[0]["_id"])
    i0 = [v[0] for v in view3].index(key0)
    assert not np.array_equal(fps3[i0], fps2[[v[0] for v in view].index(key0)])


def test_a_per_file_workspace_moves_into_packs_only_what_changes(tmp_path):
    docs = _corpus()
    ws = _ws(tmp_path / "ws")
    src = tmp_path / "c.jsonl"
    import_jsonl(ws, write_jsonl(src, docs), packed=False)
    files = {p.name for p in ws.parsed_dir.iterdir()}
    before = _rows(ws)
    rep = import_jsonl(ws, src)  # the same file, packed: a no-op, the files kept
    assert (rep.parsed, rep.unchanged) == (0, len(docs)) and {p.name for p in ws.parsed_dir.iterdir()} == files
    v1 = [dict(d, text=d["text"] + " changed") if i < 5 else d for i, d in enumerate(docs)]
    rep = import_jsonl(ws, write_jsonl(src, v1))
    assert rep.parsed == 5
    rows = _rows(ws)
    assert sum(is_ref(r.parsed_path) for r in rows.values()) == 5
    moved = {Path(before[str(d["_id"])].parsed_path).name for d in docs[:5]}
    assert {p.name for p in ws.parsed_dir.iterdir()} == (files - moved) | {"packs"}  # their files removed
    assert len(list(ws.parsed_dir.glob("*.txt"))) == len(docs) - 5
    _whole(ws, v1)


@pytest.mark.slow
def test_a_packed_import_killed_at_any_moment_then_rerun_equals_a_clean_run(tmp_path):
    """The SIGKILL campaign (tools/reliability.py) at seeded moments of a packed import's wall time, not
    only at its few counted writes (a pack's appends and fsyncs are none): kills land between batches,
    inside an append, between a pack's fsync and its rows' commit."""
    from tools.reliability import kill_campaign

    outcomes = kill_campaign("import", tmp_path, 6, seed=13, n_docs=8000, mode="time")
    assert len(outcomes) == 6
    for o in outcomes:
        where = f"import killed at {o.kill_at} ms of {o.writes}"
        assert o.torn == [], f"{where}: a reader saw {o.torn}"
        assert o.rerun_rc == 0, f"{where}: rerun failed: {o.rerun_err}"
        assert o.differences == [], f"{where}: differs from a clean run: {o.differences}"
        assert o.leftovers == [], where
    assert sum(o.killed for o in outcomes) >= 3  # (a kill after the run ended kills nothing)
