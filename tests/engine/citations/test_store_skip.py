"""The references step's shortcuts for sources without a reference list (``engine.citations.store``:
``_quick_page`` for a page of packed texts none of which is stored yet, ``_no_list`` for such texts among
others) write what the per-source loop writes: the same files, records and report, whatever mix of texts
with and without a list, pages, stored records and stale files a build meets."""

from __future__ import annotations

import random

import pytest
from chitragupta.engine.citations import store as S
from chitragupta.engine.library.workspace import Workspace

from helpers import make_workspace

LIST = "\n\nReferences\n" + "".join(f"[{j}] A. Author. Title {j}. Journal, 19{50 + j}.\n" for j in range(6))


def _docs(seed: int, n: int, with_lists: int) -> list[dict]:
    rng = random.Random(seed)
    words = ["ocean", "heat", "Works", "Cited", "naïve", "İstanbul", "日本", "sum-\nmaries", "Ref", "B", "x"]
    docs = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
        if i % with_lists == 3:
            text += LIST
        if i % 11 == 5:
            text += " Bibliography of nothing (a heading word, no list)"
        docs.append({"_id": f"s{i:04d}", "title": f"t {i}", "text": text})
    return docs


def _refs(ws: Workspace) -> dict[str, bytes]:
    folder = S.refs_folder(ws)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def _build(ws: Workspace, monkeypatch, quick: bool, jobs: int = 1) -> tuple[dict, dict, list]:
    calls = []
    real_quick, real_no_list = S._quick_page, S._no_list
    if quick:
        monkeypatch.setattr(S, "_quick_page", lambda *a: calls.append("quick") or real_quick(*a))
        monkeypatch.setattr(S, "_no_list", lambda *a: calls.append("no_list") or real_no_list(*a))
    else:
        monkeypatch.setattr(S, "_quick_page", lambda *a: None)
        monkeypatch.setattr(S, "_no_list", lambda *a: {})
    got = []
    report = S.build_references(ws, progress=lambda done, total: got.append((done, total)), jobs=jobs)
    monkeypatch.setattr(S, "_quick_page", real_quick)
    monkeypatch.setattr(S, "_no_list", real_no_list)
    return report, _refs(ws), got


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("with_lists", [10**6, 7])
def test_the_shortcuts_write_what_the_loop_writes(tmp_path, monkeypatch, packed, with_lists):
    ws = Workspace.open(make_workspace(tmp_path, _docs(3, 90, with_lists), packed=packed))
    monkeypatch.setattr(S, "_PAGE", 16)  # several pages: some all without lists, some with one
    plain = _build(ws, monkeypatch, quick=False)
    S.refs_folder(ws).exists() and [p.unlink() for p in S.refs_folder(ws).iterdir()]
    fast = _build(ws, monkeypatch, quick=True)
    assert fast[0] == plain[0] and fast[1] == plain[1]
    assert fast[2] == plain[2]  # the progress said alike
    assert plain[0]["none"] > 40 and (plain[0]["sources"] > 5) == (with_lists == 7)
    # run again with the records stored (the loop keeps them), and with one text changed since
    again = _build(ws, monkeypatch, quick=True)
    assert again[1] == fast[1] and again[0]["kept"] == fast[0]["built"] + fast[0]["kept"]


def test_a_cold_build_of_packed_texts_without_lists_takes_the_page_shortcut(tmp_path, monkeypatch):
    ws = Workspace.open(make_workspace(tmp_path, _docs(5, 60, 10**6), packed=True))
    monkeypatch.setattr(S, "_PAGE", 16)
    read = []
    real_input = S._input
    monkeypatch.setattr(S, "_input", lambda *a: read.append(a[1]) or real_input(*a))
    report, files, _progress = _build(ws, monkeypatch, quick=True)
    # pages holding a heading word go through the loop (each of their texts to ``_input``), the others not
    assert 0 < len(read) < report["none"] + report["sources"] and S.UNLOCATED in files
    [p.unlink() for p in S.refs_folder(ws).iterdir()]
    plain = _build(ws, monkeypatch, quick=False)
    assert plain[1] == files and plain[0] == report


def test_a_pack_that_reads_short_is_left_to_the_loop(tmp_path, monkeypatch):
    """A pack cut short by hand: the texts past its end are not read by the shortcuts (the loop finds
    them missing, as before), and the report and files are the loop's."""
    from chitragupta.engine.library.texts import split_ref

    ws = Workspace.open(make_workspace(tmp_path, _docs(6, 40, 10**6), packed=True))
    pack = next(ws.root.joinpath("content/parsed/packs").glob("*.pack"))
    size = pack.stat().st_size
    with open(pack, "r+b") as f:
        f.truncate(size // 2)
    plain = _build(ws, monkeypatch, quick=False)
    [p.unlink() for p in S.refs_folder(ws).iterdir()]
    fast = _build(ws, monkeypatch, quick=True)
    assert fast[:2] == plain[:2]
    assert split_ref("content/parsed/packs/" + pack.name + "#0+1") is not None
