"""The built-in sample workspace: PDFs and a BibTeX file made from the packaged sample corpus.

The sample corpus (``sample_corpus.jsonl``) is the project's own: three dozen short papers on six
themes, some with a Markdown table and some with a reference list. ``build_sources`` writes each paper
as a real PDF (``chitragupta.engine.library.demo.tinypdf``) and one BibTeX entry per paper pointing at it, plus one entry
with no file, so that ``sync`` does the same work it does on a researcher's bibliography.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from chitragupta.engine.library.demo.tinypdf import paginate, pdf_bytes
from chitragupta.files import atomic_write_bytes, atomic_write_text

__all__ = ["load_corpus", "load_queries", "build_sources", "paper_paragraphs", "MARKER"]

MARKER = ".chitragupta-demo"


def _read_jsonl(name: str) -> list[dict]:
    text = resources.files("chitragupta.engine.library.demo").joinpath(name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_corpus() -> list[dict]:
    return _read_jsonl("sample_corpus.jsonl")


def load_queries() -> list[dict]:
    return _read_jsonl("sample_queries.jsonl")


def paper_paragraphs(paper: dict) -> list[str]:
    """A paper's text as the PDF shows it: title, authors, abstract, then each section."""
    paras = [paper["title"], paper["author"].replace(" and ", ", "), "Abstract", paper["abstract"]]
    for sec in paper["sections"]:
        paras.append(sec["heading"])
        paras += sec["paragraphs"]
    return paras


def _bib_escape(s: str) -> str:
    return s.replace("{", "").replace("}", "").replace("&", r"\&").replace("%", r"\%")


def _write_if_changed(path: Path, data: bytes) -> None:
    """Leave an identical file alone, so a second demo run re-parses nothing."""
    if not (path.is_file() and path.read_bytes() == data):
        atomic_write_bytes(path, data, durable=False, mode=0o666)


def build_sources(root: Path) -> Path:
    """Write ``papers/*.pdf`` and ``papers/bibliography.bib`` under ``root``; returns the .bib path."""
    papers = root / "papers"
    papers.mkdir(parents=True, exist_ok=True)
    entries = []
    for paper in load_corpus():
        key = paper["citekey"]
        _write_if_changed(papers / f"{key}.pdf", pdf_bytes(paginate(paper_paragraphs(paper))))
        entries.append(
            f"@article{{{key},\n"
            f"  title = {{{_bib_escape(paper['title'])}}},\n"
            f"  author = {{{_bib_escape(paper['author'])}}},\n"
            f"  journal = {{{_bib_escape(paper.get('journal', ''))}}},\n"
            f"  year = {{{paper['year']}}},\n"
            f"  abstract = {{{_bib_escape(paper['abstract'])}}},\n"
            f"  keywords = {{{', '.join(paper['keywords'])}}},\n"
            f"  file = {{{key}.pdf}}\n}}\n"
        )
    entries.append(
        "@book{demo2024unfiled,\n  title = {A Book Catalogued Without Its PDF},\n"
        "  author = {Reader, Ada},\n  year = {2024}\n}\n"
    )
    bib = papers / "bibliography.bib"
    _write_if_changed(bib, "\n".join(entries).encode("utf-8"))
    atomic_write_text(root / MARKER, "built by `chitragupta demo`; safe to delete\n", durable=False, mode=0o666)
    return bib
