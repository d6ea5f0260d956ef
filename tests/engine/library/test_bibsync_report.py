"""What ``sync`` and ``index`` say about sources without text (issue 20, item 12): entries with no file
field, a moved PDF and a failed parse named and counted apart, sync's exit status 3 when some entry's
document could not be read, and the index's abstract count said as what it counts."""

from __future__ import annotations

from pathlib import Path

from chitragupta.engine.library.demo.tinypdf import write_pdf
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace

from helpers import run_main


def _papers(root: Path, n: int) -> Path:
    papers = root / "papers"
    papers.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"uniqueword{i} twin model"])
    return papers


def _rows(ws: Workspace) -> dict:
    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


def test_sync_names_and_counts_apart_what_has_no_text_and_exits_3(tmp_path):
    papers = _papers(tmp_path, 2)
    (papers / "moved.pdf").write_bytes((papers / "p1.pdf").read_bytes())
    (papers / "notes.pdf").write_text("plain text pretending to be a PDF")
    bib = ("@misc{good, title={Good}, file={p0.pdf}}\n"
           "@misc{nofield, title={No field}}\n"
           "@misc{moved, title={Moved}, file={moved.pdf}}\n")
    (papers / "bibliography.bib").write_text(bib, encoding="utf-8")
    p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 0, p.stderr  # every entry that names a document has its text
    assert "1 without a file field" in p.stdout and "sync -v` names them" in p.stderr
    (papers / "moved.pdf").rename(papers / "elsewhere.pdf")  # a PDF moved by the reference manager
    (papers / "bibliography.bib").write_text(bib + "@misc{fake, title={Fake}, file={notes.pdf}}\n", encoding="utf-8")
    p = run_main("sync", "-w", tmp_path)
    assert p.returncode == 3, p.stderr
    out = p.stdout.strip()
    assert out.startswith("sync: 4 entries") and "1 without a file field" in out and "1 whose file is missing" in out \
        and "1 failed" in out, out
    warn = [line for line in p.stderr.splitlines() if line.startswith("[warn]")]
    assert any(line.startswith("[warn] moved: file not found: ") and "moved.pdf" in line for line in warn), warn
    assert any(line.startswith("[warn] fake: failed: ") for line in warn), warn
    assert not any("nofield" in line for line in p.stderr.splitlines()), p.stderr  # not a failure: -v names it
    assert "exit status 3" in p.stderr and "Traceback" not in p.stderr
    v = run_main("sync", "-w", tmp_path, "-v")
    assert v.returncode == 3 and "[note] nofield: no file field" in v.stderr, v.stderr
    rows = _rows(Workspace.open(tmp_path))
    assert rows["moved"].status == "no-file" and rows["moved"].reason.startswith("file not found")
    assert rows["nofield"].reason == "no file field" and rows["fake"].status == "failed"


def test_index_says_the_abstract_it_counts_is_the_sidecars(tmp_path):
    papers = _papers(tmp_path, 1)
    (papers / "bibliography.bib").write_text(
        "@misc{a, title={A}, abstract={A BibTeX abstract about twins}, file={p0.pdf}}\n@misc{b, title={B}}\n",
        encoding="utf-8")
    assert run_main("sync", "-w", tmp_path).returncode == 0
    assert "Abstract section" not in run_main("index", "-w", tmp_path).stdout  # said with -v only
    p = run_main("index", "-w", tmp_path, "-v")
    assert p.returncode == 0, p.stderr
    line = next(line for line in p.stdout.splitlines() if "Abstract section" in line)
    assert line.startswith("index: 0 of 2 documents have an Abstract section in their docling sidecar")
    assert "BibTeX abstracts are kept in the ledger, not indexed" in line and "no document has a sidecar" in line
    assert "`chitragupta sync -v` names each" in p.stderr  # b: the one source without text
