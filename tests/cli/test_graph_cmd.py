"""``chitragupta graph --format html`` (cli/graph_cmd.py): the page holds the graph ``--format json`` gives,
the ledger's authors and ``missing --bib``'s entries, and opens in a headless Chromium (the ``browser``
fixture) with every source named and every missing work marked; the seven real PDFs too."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest

from helpers import DOCS, SHARED, make_workspace, open_page, run_main

PAPERMAGE = SHARED / "data" / "pdfs" / "papermage"


def data_of(page: str) -> dict:
    blob = re.search(r'<script type="application/gzip\+base64" id="data">([^<]*)</script>', page).group(1)
    return json.loads(gzip.decompress(base64.b64decode(blob)))


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    records = [{**d, "metadata": {**d["metadata"], "authors": [f"{d['_id'][:-4].title()}, A.", "Other, B."]}}
               for d in DOCS]
    root = make_workspace(tmp_path_factory.mktemp("graph-html"), records)
    assert run_main("index", "-w", root).returncode == 0
    return root


def test_the_page_holds_the_graph_the_authors_and_the_bibtex(ws, tmp_path):
    got = run_main("graph", "-w", ws, "--format", "html", "--out", tmp_path / "g.html")
    assert got.returncode == 0 and "written to" in got.stderr
    d = data_of((tmp_path / "g.html").read_text(encoding="utf-8"))
    g = json.loads(run_main("graph", "-w", ws).stdout)
    assert d["id"] == [nd["id"] for nd in g["nodes"]] and len(d["edges"]) == 3 * len(g["edges"])
    assert d["authors"][d["id"].index("devlin2019")] == ["Devlin, A.", "Other, B."]
    works = [json.loads(x) for x in run_main("missing", "-w", ws, "--json").stdout.splitlines()]
    assert [t for t, k in zip(d["title"], d["missing"]) if k] == [w["title"] for w in works] and works
    assert d["bibtex"] == run_main("missing", "-w", ws, "--bib", "-").stdout
    assert d["command"] == f"chitragupta missing --min 2 -k {len(works)} --bib missing.bib"
    assert run_main("graph", "-w", ws, "--format", "html").stdout.startswith("<!DOCTYPE html>")


def test_the_page_in_a_browser(ws, tmp_path, browser):
    assert run_main("graph", "-w", ws, "--format", "html", "--out", tmp_path / "g.html").returncode == 0
    open_page(browser, tmp_path / "g.html")
    listed = browser.evaluate("[...document.querySelectorAll('#source-list li')].map(li => li.dataset.id)")
    assert listed == sorted(d["_id"] for d in DOCS)
    missing = browser.evaluate("[...document.querySelectorAll('#missing-list li.missing')].length")
    assert missing == len(run_main("missing", "-w", ws, "--json").stdout.splitlines()) > 0


@pytest.mark.slow  # parses seven PDFs
@pytest.mark.skipif(not PAPERMAGE.is_dir(), reason="../shared/data/pdfs is absent")
def test_the_seven_pdfs_render_offline_with_every_source_and_missing_work(tmp_path, browser):
    from bench.refs_graph import LIBRARY, _bib

    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "bibliography.bib").write_text(_bib(PAPERMAGE), encoding="utf-8")
    assert run_main("sync", "-w", tmp_path).returncode == 0
    assert run_main("index", "-w", tmp_path).returncode == 0
    assert run_main("graph", "-w", tmp_path, "--format", "html", "--out", tmp_path / "g.html").returncode == 0
    open_page(browser, tmp_path / "g.html")
    works = [json.loads(x) for x in run_main("missing", "-w", tmp_path, "--json", "-k", "1000").stdout.splitlines()]
    ev = browser.evaluate
    assert ev("[...document.querySelectorAll('#source-list li')].map(li => li.dataset.id)") == \
        sorted(key for key, *_ in LIBRARY.values())
    rows = ev("[...document.querySelectorAll('#missing-list li.missing')].map(li => li.firstChild.textContent)")
    assert rows == [w["title"] for w in works] and len(works) >= 35  # 39 on the day this was written
    assert ev("['sources', 'missing'].map(k => Number(canvas.dataset[k]))") == [7, len(works)]
