"""The docling parser backend: format detection, conversion to sidecar items, and sync with it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("docling")

from chitragupta.engine.library import docling_convert as dc  # noqa: E402
from chitragupta.engine.library.demo.tinypdf import write_pdf  # noqa: E402
from chitragupta.engine.library.docling_convert import (  # noqa: E402
    convert,
    detect_format,
    document_items,
    to_markdown,
)
from chitragupta.engine.library.ledger import Ledger  # noqa: E402
from chitragupta.engine.library.parsers import PARSERS, ParseError, parse  # noqa: E402
from chitragupta.engine.library.sync import sync  # noqa: E402
from chitragupta.engine.library.workspace import Workspace  # noqa: E402
from chitragupta.engine.text.sidecar import EXCLUDED_LABELS, join_items, read_sidecar  # noqa: E402

DOCLING_DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "pdfs" / "docling"

MD_PAPER = """# A Study of Digital Twins

## Abstract

Digital twin fidelity matters for bridges.

## 1 Introduction

We study sensor models in water networks.

| Model | Score |
|-------|-------|
| alpha | 0.91 |
| beta  | 0.85 |

- first point about leaks
- second point about leaks

## References

[1] Someone. A paper on twins. 2020.
"""

HTML_PAGE = """\ufeff
  <!DOCTYPE html><html><head><title>Ocean</title></head><body>
<header>Site banner words</header>
<h1>Ocean Heat</h1><p>Ocean heat content rises every decade.</p>
<h2>Methods</h2><p>We measured soil microbes in cores.</p>
<table><caption>Tablecaption words</caption><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>
<figure><img src="x.png"><figcaption>Figurecaption words</figcaption></figure>
<footer>Footer boilerplate</footer>
</body></html>"""

LATEX_PAPER = r"""\documentclass{article}
\title{Climate Models}
\begin{document}
\maketitle
\section{Introduction}
Climate ocean heat is studied here.
\begin{table}\caption{Latexcaption words}\begin{tabular}{ll} a & b \\ c & d \end{tabular}\end{table}
\section{Method}
We use a coupled simulation.
\end{document}
"""

JATS_ARTICLE = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2 20190208//EN" "JATS-archivearticle1.dtd">
<article article-type="research-article"><front><article-meta><title-group>
<article-title>Soil Microbes</article-title></title-group>
<abstract><p>Microbe yield abstract.</p></abstract></article-meta></front>
<body><sec><title>Introduction</title><p>Soil microbe text in fields.</p></sec></body></article>"""


def _write_docx(path: Path) -> Path:
    docx = pytest.importorskip("docx")
    d = docx.Document()
    d.add_heading("Vaccine Cohort Study", level=1)
    d.add_paragraph("Cohort yield results are reported here.")
    d.add_heading("Results", level=2)
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "h1", (0, 1): "h2", (1, 0): "v1", (1, 1): "v2"}.items():
        t.cell(r, c).text = v
    d.sections[0].header.paragraphs[0].text = "Running header words"
    d.save(path)
    return path


def _write_docling_json(path: Path, md_source: Path) -> Path:
    """A converted document, given pages, provenance, a page header and a caption, exported to JSON."""
    from docling_core.types.doc import (
        BoundingBox,
        ContentLayer,
        DocItemLabel,
        ProvenanceItem,
        Size,
    )

    doc = convert(md_source)
    doc.add_page(page_no=1, size=Size(width=600, height=800))
    doc.add_page(page_no=2, size=Size(width=600, height=800))
    for i, (item, _) in enumerate(doc.iterate_items()):
        item.prov = [ProvenanceItem(page_no=1 if i < 4 else 2, bbox=BoundingBox(l=0, t=10, r=100, b=0),
                                    charspan=(0, 0))]
    doc.add_text(label=DocItemLabel.PAGE_HEADER, text="Journal running head", content_layer=ContentLayer.FURNITURE)
    table = next(it for it, _ in doc.iterate_items() if str(it.label) == "table")
    cap = doc.add_text(label=DocItemLabel.CAPTION, text="Jsoncaption words", parent=table)
    table.captions.append(cap.get_ref())
    path.write_text(json.dumps(doc.export_to_dict()), encoding="utf-8")
    return path


def _ws(root: Path, bib: str, backend: str = "docling", artifacts: str = "") -> Workspace:
    (root / "papers").mkdir(parents=True, exist_ok=True)
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    (root / "config.toml").write_text(
        f'[parser]\nbackend = "{backend}"\ndocling_artifacts_path = "{artifacts}"\n', encoding="utf-8")
    return Workspace.open(root)


def _rows(ws):
    with Ledger(ws.ledger_path) as l:
        return {r.citekey: r for r in l.rows()}


def _sidecar(ws, row) -> Path:
    return ws.root / row.parsed_path.replace(".txt", ".passages.json")


@pytest.fixture()
def sources(tmp_path) -> dict[str, Path]:
    p = tmp_path / "papers"
    p.mkdir()
    (p / "paper.md").write_text(MD_PAPER, encoding="utf-8")
    (p / "page.html").write_text(HTML_PAGE, encoding="utf-8")
    (p / "paper.tex").write_text(LATEX_PAPER, encoding="utf-8")
    (p / "art.xml").write_text(JATS_ARTICLE, encoding="utf-8")
    _write_docx(p / "doc.docx")
    _write_docling_json(p / "doc.json", p / "paper.md")
    return {"md": p / "paper.md", "html": p / "page.html", "latex": p / "paper.tex", "xml_jats": p / "art.xml",
            "docx": p / "doc.docx", "json_docling": p / "doc.json"}


# -- detection ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_detect_format_by_content(tmp_path, sources):
    for kind, path in sources.items():
        assert detect_format(path) == kind, path
    write_pdf(tmp_path / "x.bin", ["pdf text"])
    assert detect_format(tmp_path / "x.bin") == "pdf"
    # refused: a password file, plain text, Markdown without its name, a zip that is not a DOCX,
    # JSON that is not a DoclingDocument, binary junk, a missing file
    if Path("/etc/passwd").is_file():
        shutil.copy("/etc/passwd", tmp_path / "passwd.md.txt")
        assert detect_format(tmp_path / "passwd.md.txt") is None
    (tmp_path / "notes.txt").write_text(MD_PAPER)
    assert detect_format(tmp_path / "notes.txt") is None
    import zipfile
    with zipfile.ZipFile(tmp_path / "a.docx", "w") as z:
        z.writestr("hello.txt", "hi")
    assert detect_format(tmp_path / "a.docx") is None
    (tmp_path / "o.json").write_text('{"schema_name": "Other", "x": 1}')
    assert detect_format(tmp_path / "o.json") is None
    (tmp_path / "fake.json").write_text('{"schema_name": "DoclingDocument", "broken": ')
    assert detect_format(tmp_path / "fake.json") is None
    (tmp_path / "bin.md").write_bytes(b"# title\x00\xff\xfe")
    assert detect_format(tmp_path / "bin.md") is None
    assert detect_format(tmp_path / "absent.md") is None
    # XML that is not JATS, HTML in an XML prologue, LaTeX quoted inside Markdown stays Markdown
    (tmp_path / "o.xml").write_text('<?xml version="1.0"?><article><p>x</p></article>')
    assert detect_format(tmp_path / "o.xml") is None
    (tmp_path / "x.xhtml").write_text('<?xml version="1.0"?>\n<!-- c -->\n<html xmlns="http://www.w3.org/1999/xhtml">')
    assert detect_format(tmp_path / "x.xhtml") == "html"
    (tmp_path / "tex.md").write_text("# Notes\n\n```\n\\documentclass{article}\n```\n")
    assert detect_format(tmp_path / "tex.md") == "md"


def test_convert_refuses_unknown_and_exports_markdown(tmp_path, sources):
    (tmp_path / "plain.txt").write_text("just words")
    with pytest.raises(ParseError, match="not a document docling reads"):
        convert(tmp_path / "plain.txt")
    md = to_markdown(convert(sources["md"]))
    assert "## 1 Introduction" in md and "| alpha" in md


# -- items ----------------------------------------------------------------------------------------

def test_items_labels_tables_pages_and_exclusions(sources):
    md_items = document_items(convert(sources["md"]))
    labels = {it["text"]: it["label"] for it in md_items}
    assert labels["Abstract"] == "section_header" and labels["1 Introduction"] == "section_header"
    assert labels["References"] == "section_header"
    assert labels["Digital twin fidelity matters for bridges."] == "text"
    assert labels["first point about leaks"] == "list_item"
    tables = [it for it in md_items if it["label"] == "table"]
    assert len(tables) == 1 and tables[0]["text"].startswith("|") and "alpha" in tables[0]["text"]
    assert all(it["page"] is None for it in md_items)  # Markdown has no pages

    js_items = document_items(convert(sources["json_docling"]))
    assert [it["text"] for it in js_items] == [it["text"] for it in md_items]  # caption, header left out
    assert {it["page"] for it in js_items} == {1, 2}
    assert not any("Jsoncaption" in it["text"] or "running head" in it["text"] for it in js_items)

    for kind, absent in [("html", ("Site banner", "Footer boilerplate", "Tablecaption", "Figurecaption")),
                         ("docx", ("Running header",)), ("latex", ("Latexcaption",))]:
        items = document_items(convert(sources[kind]))
        text = join_items(items)
        assert not any(a in text for a in absent), (kind, text)
        assert not {it["label"] for it in items} & EXCLUDED_LABELS
        assert any(it["label"] == "table" and it["text"].startswith("|") for it in items), kind
        assert any(it["label"] == "section_header" for it in items), kind
    jats = document_items(convert(sources["xml_jats"]))
    assert ("Introduction", "section_header") in [(it["text"], it["label"]) for it in jats]


# -- sync -----------------------------------------------------------------------------------------

BIB_ALL = "".join(
    f"@misc{{{k}, title={{T {k}}}, file={{{f}}}}}\n"
    for k, f in [("md", "paper.md"), ("html", "page.html"), ("latex", "paper.tex"), ("jats", "art.xml"),
                 ("docx", "doc.docx"), ("json", "doc.json")]
)


def test_sync_docling_parses_every_format(tmp_path, sources):
    assert "docling" in PARSERS
    ws = _ws(tmp_path, BIB_ALL)
    rep = sync(ws)
    assert rep.parsed == 6 and not rep.failed, rep.failed
    r = _rows(ws)
    for key, row in r.items():
        assert row.status == "parsed" and row.backend == "docling", key
        items = read_sidecar(_sidecar(ws, row))
        assert items, key
        assert (ws.root / row.parsed_path).read_text(encoding="utf-8") == join_items(items)
        assert not {it["label"] for it in items} & EXCLUDED_LABELS
    md = read_sidecar(_sidecar(ws, r["md"]))
    assert all(it["page"] is None for it in md)
    assert "page" not in json.loads(_sidecar(ws, r["md"]).read_text())[0]
    js = read_sidecar(_sidecar(ws, r["json"]))
    assert all(isinstance(it["page"], int) for it in js)
    assert any(it["label"] == "table" and it["text"].startswith("|") for it in js)
    # unchanged: nothing re-parsed; a deleted sidecar forces its source's re-parse
    again = sync(ws)
    assert again.parsed == 0 and again.unchanged == 6
    _sidecar(ws, r["html"]).unlink()
    third = sync(ws)
    assert third.parsed == 1 and third.unchanged == 5
    assert read_sidecar(_sidecar(ws, _rows(ws)["html"]))


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_pdf_without_models_fails_with_how_to(tmp_path, sources):
    write_pdf(tmp_path / "papers" / "a.pdf", ["Alpha title", "Digital twin fidelity."])
    ws = _ws(tmp_path, "@misc{pdf, title={P}, file={a.pdf}}\n@misc{md, title={M}, file={paper.md}}\n")
    papers_before = _tree(tmp_path / "papers")
    rep = sync(ws)
    r = _rows(ws)
    assert r["pdf"].status == "failed" and r["md"].status == "parsed"
    reason = r["pdf"].reason
    assert "docling-tools models download -o DIR" in reason and "docling_artifacts_path" in reason
    assert rep.failed == [("pdf", reason)]
    assert _tree(tmp_path / "papers") == papers_before
    parsed = sorted(p.name for p in ws.parsed_dir.iterdir())
    assert parsed == ["md.passages.json", "md.txt"]
    # a configured folder that does not exist says so too
    ws = _ws(tmp_path, (tmp_path / "papers" / "bibliography.bib").read_text(), artifacts="no/such/dir")
    sync(ws)
    assert "is not a folder" in _rows(ws)["pdf"].reason


def test_pdf_with_models_folder_needs_the_pdf_extra(tmp_path, monkeypatch):
    """Without torch (docling's PDF pipeline needs it) the error names the extra to install. Torch is made
    unimportable here (None in sys.modules: ``import torch`` raises ImportError), whether it is installed
    or not, so the message is checked on every install."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError):
        import torch  # noqa: F401
    monkeypatch.setattr(dc, "_PDF_CONVERTERS", {})
    (tmp_path / "models").mkdir()
    write_pdf(tmp_path / "a.pdf", ["text"])
    env = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    with pytest.raises(ParseError, match=r"chitragupta\[docling-pdf\]"):
        parse(tmp_path / "a.pdf", "docling", docling_artifacts_path=str(tmp_path / "models"))
    assert {k: os.environ.get(k) for k in env} == env  # the offline switches are restored


def test_text_files_and_empty_documents_are_refused(tmp_path):
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "plain.txt").write_text("A plain text file with words.\n")
    (tmp_path / "papers" / "empty.md").write_text("\n\n   \n")
    bib = ("@misc{plain, title={P}, file={plain.txt}}\n@misc{empty, title={E}, file={empty.md}}\n"
           "@misc{passwd, title={W}, file={/etc/passwd}}\n")
    ws = _ws(tmp_path, bib)
    sync(ws)
    r = _rows(ws)
    assert r["plain"].status == "failed" and "not a document the docling backend reads" in r["plain"].reason
    assert "checked by content" in r["plain"].reason
    assert r["empty"].status == "failed" and "no text" in r["empty"].reason
    if Path("/etc/passwd").is_file():
        assert r["passwd"].status == "failed" and "not a document" in r["passwd"].reason
    assert list(ws.parsed_dir.iterdir()) == []


def test_switching_backend_removes_the_sidecar(tmp_path, sources, monkeypatch):
    write_pdf(tmp_path / "papers" / "a.pdf", ["Alpha title", "Digital twin fidelity in bridges."])
    bib = "@misc{pdf, title={P}, file={a.pdf}}\n@misc{md, title={M}, file={paper.md}}\n"
    # stand in for docling's PDF models: any PDF converts to the Markdown fixture's document
    md_doc = convert(sources["md"])
    monkeypatch.setattr(dc, "_convert_pdf", lambda path, artifacts_path: md_doc)
    ws = _ws(tmp_path, bib)
    sync(ws)
    r = _rows(ws)
    assert r["pdf"].status == "parsed" and _sidecar(ws, r["pdf"]).is_file() and _sidecar(ws, r["md"]).is_file()
    ws = _ws(tmp_path, bib, backend="pdftotext")
    rep = sync(ws)
    r = _rows(ws)
    assert rep.parsed == 1 and r["pdf"].status == "parsed" and r["pdf"].backend == "pdftotext"
    assert not _sidecar(ws, r["pdf"]).exists()
    assert "Digital twin fidelity" in (ws.root / r["pdf"].parsed_path).read_text()
    assert r["md"].status == "failed" and not (ws.parsed_dir / "md.passages.json").exists()
    assert not (ws.parsed_dir / "md.txt").exists()
    # and back: docling writes it again; removing the entry removes its sidecar
    ws = _ws(tmp_path, bib)
    assert sync(ws).parsed == 2 and _sidecar(ws, _rows(ws)["pdf"]).is_file()
    ws = _ws(tmp_path, "@misc{md, title={M}, file={paper.md}}\n")
    assert sync(ws).removed == 1 and not (ws.parsed_dir / "pdf.passages.json").exists()


# -- the real docling test documents (read in place) -------------------------------------------

real = pytest.mark.skipif(not DOCLING_DATA.is_dir(), reason=f"{DOCLING_DATA} is absent")


@real
@pytest.mark.parametrize("name", ["2206.01062.md", "2203.01017v2.md", "2305.03393v1.md"])
def test_real_groundtruth_markdown(name):
    path = DOCLING_DATA / "groundtruth" / name
    assert detect_format(path) == "md"
    items = parse(path, "docling").items
    heads = [it["text"] for it in items if it["label"] == "section_header"]
    assert any(h.strip().lower() == "references" for h in heads), heads
    assert any(it["label"] == "table" and it["text"].startswith("|") for it in items)
    assert all(it["page"] is None for it in items)
    if name == "2206.01062.md":
        assert "ACMReference Format:" in heads


@real
def test_real_docling_json_has_pages_and_a_table():
    path = DOCLING_DATA / "groundtruth" / "2305.03393v1-pg9.json"
    assert detect_format(path) == "json_docling"
    res = parse(path, "docling")
    assert res.text == join_items(res.items)
    assert all(isinstance(it["page"], int) and it["page"] >= 1 for it in res.items)
    tables = [it for it in res.items if it["label"] == "table"]
    assert tables and tables[0]["text"].startswith("|")
    assert "Table 1." not in res.text  # the table's caption is not indexed
    assert "5.1 Hyper Parameter Optimization" in [it["text"] for it in res.items if it["label"] == "section_header"]


@real
def test_real_latex_converts_with_section_headers():
    path = DOCLING_DATA / "latex" / "2305.03393" / "main.tex"
    assert detect_format(path) == "latex"
    items = parse(path, "docling").items
    heads = [it["text"] for it in items if it["label"] == "section_header"]
    assert len(heads) >= 5, heads
    assert not {it["label"] for it in items} & EXCLUDED_LABELS
