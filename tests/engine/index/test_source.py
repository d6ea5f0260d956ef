"""engine/index/source.py: the text a document is indexed and quoted from -- a FIFO where a parsed text was is
missing text, not a hang; a parsed text without a sidecar is read up to its reference list."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from chitragupta.engine.index.source import FLAG_TEXT_MISSING, load_body, read_text
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.text.sidecar import SidecarError, read_sidecar

from helpers import PAPER_BODY, PAPER_REFS, run_main, write_lines


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


def _per_file_workspace(tmp_path: Path, n: int = 6) -> Path:
    """``imported_workspace`` with one parsed file a record (``import_jsonl(packed=False)``, the layout
    before packs, which workspaces imported then keep)."""
    from chitragupta.engine.library.importer import import_jsonl

    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "title": f"title {i}",
                                                     "text": f"twin model number {i} sensor"}) for i in range(n)))
    ws_dir = tmp_path / "ws"
    import_jsonl(Workspace.open(ws_dir, create=True), src, packed=False)
    assert run_main("index", "-w", ws_dir).returncode == 0
    return ws_dir


def test_a_fifo_for_a_parsed_text_is_missing_text_not_a_hang(tmp_path):
    from chitragupta.engine.index.manage import refresh

    ws_dir = _per_file_workspace(tmp_path)
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


def test_a_parsed_text_without_a_sidecar_is_read_before_its_references(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text(PAPER_BODY + "References\n" + PAPER_REFS, encoding="utf-8")
    body = load_body(p)
    assert body.text.rstrip() == PAPER_BODY.rstrip() and len(body.text) == len(PAPER_BODY + "References\n" + PAPER_REFS)
    assert body.ref_words == len(("References\n" + PAPER_REFS).split()) and body.after_words == 0
    assert not load_body(p).from_sidecar


def test_snippets_of_a_text_without_a_sidecar_never_quote_its_references(tmp_path):
    from chitragupta.engine.search.bm25 import Retriever

    refs = "".join(f"[{i}] A. Author. {2000 + i}. Zebrafish cited work number {i}. Proc. venue.\n" for i in range(1, 25))
    text = PAPER_BODY + "References\n" + refs
    src = write_lines(tmp_path / "c.jsonl", json.dumps({"_id": "paper", "title": "A paper", "text": text}),
                 json.dumps({"_id": "other", "title": "Other", "text": "twin zebrafish"}))
    ws = tmp_path / "ws"
    assert run_main("import", "-w", ws, src).returncode == 0
    hits = {h.citekey: h for h in Retriever.open(ws).search("twin zebrafish", k=5, snippet_chars=300).hits}
    assert "paper" in hits and "twin" in hits["paper"].snippet.lower()
    assert "zebrafish" not in hits["paper"].snippet.lower()  # was: the window holding both, in the references
