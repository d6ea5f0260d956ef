"""The pages (chitragupta/pages.py and page_assets/): the layout, what each page carries and what it cannot
reach, and each page opened in a headless Chromium with the network off (the ``browser`` fixture), asserted
on the DOM its scripts build."""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest
from chitragupta.pages import layout, render_check, render_graph, render_topics

from helpers import open_page


def data_of(page: str) -> dict:
    """The data a page carries (gzip in base64 inside ``<script id="data">``)."""
    blob = re.search(r'<script type="application/gzip\+base64" id="data">([^<]*)</script>', page).group(1)
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def graph_json(n_sources: int = 10, n_missing: int = 4, seed: int = 0) -> dict:
    """A graph in ``graph --format json``'s shape: sources citing each other and missing works."""
    rng = np.random.default_rng(seed)
    nodes = [{"id": f"src{i:02d}", "kind": "source", "title": f"Source paper number {i}", "year": 2000 + i % 7,
              "authors": [f"Author{i}", "Second"]} for i in range(n_sources)]
    nodes.append({"id": "undated", "kind": "source", "title": "A source without a year", "year": None})
    edges = []
    for i in range(n_sources):
        for j in rng.choice(n_sources, size=2, replace=False):
            if j != i:
                edges.append({"source": f"src{i:02d}", "target": f"src{j:02d}", "kind": "cites", "n": 1,
                              "text": f"Author{j}. Source paper number {j}. Venue, {2000 + j % 7}."})
    for m in range(n_missing):
        citing = [f"src{i:02d}" for i in range(m, n_sources, 3)]
        nodes.append({"id": f"missing:{m + 1}", "kind": "missing", "title": f"Missing work </script> {m} & co",
                      "year": 1990 + m, "authors": ["Gone", "Away"], "count": len(citing)})
        edges += [{"source": c, "target": f"missing:{m + 1}", "kind": "cites", "n": 2,
                   "text": f"Gone and Away. Missing work {m}, as {c} cites it."} for c in citing]
    return {"nodes": nodes, "edges": edges}


# -- the layout -------------------------------------------------------------------------------------

def test_layout_is_seeded_finite_and_keeps_nodes_apart():
    links = [(i, (i + 1) % 12) for i in range(12)]
    a, b = layout(12, links), layout(12, links)
    assert a.shape == (12, 2) and np.isfinite(a).all() and np.array_equal(a, b)
    assert not np.array_equal(a, layout(12, links, seed=1))
    d = np.sqrt(((a[:, None] - a[None]) ** 2).sum(-1)) + np.eye(12) * 1e9
    assert d.min() > 0.3  # no two nodes on top of each other
    assert layout(0, []).shape == (0, 2) and layout(1, []).shape == (1, 2)


def test_layout_puts_linked_nodes_together_and_groups_apart():
    """Two cliques with no link between them: every node nearer its own group's centre than the other's."""
    links = [(i, j) for g in (range(0, 15), range(15, 30)) for i in g for j in g if i < j]
    xy = layout(30, links)
    centres = xy[:15].mean(0), xy[15:].mean(0)
    own = np.array([np.linalg.norm(xy[i] - centres[i >= 15]) for i in range(30)])
    other = np.array([np.linalg.norm(xy[i] - centres[i < 15]) for i in range(30)])
    assert (own < other).all()
    length = [np.linalg.norm(xy[i] - xy[j]) for i, j in links]
    assert np.median(length) < 0.5 * np.linalg.norm(centres[0] - centres[1])


# -- what the pages carry ---------------------------------------------------------------------------

def test_graph_page_is_self_contained_and_carries_the_graph():
    g = graph_json()
    page = render_graph(g, bibtex="@misc{gone1990missing,\n title = {Missing work}\n}\n", command="chitragupta missing")
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!data:|#)""", page)  # nothing to fetch
    assert "default-src 'none'" in page and "http://" not in page and "https://" not in page
    d = data_of(page)
    assert d["id"] == [nd["id"] for nd in g["nodes"]]
    assert d["missing"] == [int(nd["kind"] == "missing") for nd in g["nodes"]]
    assert len(d["edges"]) == 3 * len(g["edges"]) and len(d["xy"]) == len(g["nodes"])
    at = {nd["id"]: i for i, nd in enumerate(g["nodes"])}
    got = [(d["id"][s], d["id"][t], d["texts"][k]) for s, t, k in zip(*[iter(d["edges"])] * 3)]
    assert got == [(e["source"], e["target"], e["text"]) for e in g["edges"]]
    assert d["authors"][at["undated"]] == [] and d["bibtex"].startswith("@misc")
    assert render_graph({"nodes": [], "edges": []})  # an empty library is a page too


def test_topics_and_check_pages_carry_their_data():
    topics = {"topics": [{"id": 0, "label": "a, b", "size": 1, "words": ["a"], "examples": []}],
              "documents": [{"citekey": "k", "title": "T </script>", "topic": 0, "x": 1.0, "y": 2.0}]}
    assert data_of(render_topics(topics))["documents"] == topics["documents"]
    check = {"citations": [], "uncited": [], "engine": "bm25", "notes": []}
    assert data_of(render_check(check, "a draft </script>"))["draft"] == "a draft </script>"


# -- in the browser ---------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("n_sources,n_missing", [(10, 4), (300, 120)])
def test_graph_page_in_a_browser_names_every_source_and_marks_the_missing(browser, tmp_path, n_sources, n_missing):
    g = graph_json(n_sources, n_missing)
    page = tmp_path / "graph.html"
    page.write_text(render_graph(g, bibtex="@misc{gone1990missing,\n title = {Missing work}\n}\n",
                                 command="chitragupta missing --bib missing.bib"), encoding="utf-8")
    open_page(browser, page)
    ev = browser.evaluate
    sources = [nd for nd in g["nodes"] if nd["kind"] == "source"]
    missing = [nd for nd in g["nodes"] if nd["kind"] == "missing"]
    assert ev("[...document.querySelectorAll('#source-list li')].map(li => li.dataset.id)") == \
        sorted(nd["id"] for nd in sources)
    assert ev("[...document.querySelectorAll('#source-list li')].map(li => li.textContent)")[0].startswith("src00")
    rows = ev("[...document.querySelectorAll('#missing-list li')].map(li => [li.className, li.textContent])")
    assert [r[1].split("cited by")[0] for r in rows] == [nd["title"] for nd in missing]  # titles, as text
    assert all(r[0] == "missing" and f"cited by {nd['count']}" in r[1] for r, nd in zip(rows, missing))
    # every node painted inside the canvas on opening
    assert ev("[...'sources missing'.split(' ')].map(k => Number(canvas.dataset[k]))") == [len(sources), len(missing)]
    # a click on a missing work shows its citing entries as evidence
    ev("document.querySelector('#missing-list li').click()")
    details = ev("document.getElementById('details').textContent")
    assert missing[0]["title"] in details and "not in your library" in details
    assert "Missing work 0, as src00 cites it." in details
    # the click centred it: a pointer there shows its title, authors, year and count
    x, y = ev("(r => [r.x + r.width / 2, r.y + r.height / 2])(canvas.getBoundingClientRect())")
    browser.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x, y=y)
    assert ev("document.getElementById('tip').style.display") == "block"
    assert ev("document.getElementById('tip').textContent") == f"{missing[0]['title']}Gone, Away1990 \u00b7 not in your library \u00b7 cited by " \
                                    f"{missing[0]['count']} of your sources"
    # the search box and the year filter
    ev("q.value = 'number 3'; q.dispatchEvent(new Event('input'))")
    assert ev("[...document.querySelectorAll('#source-list li:not(.hidden)')].map(li => li.dataset.id)") == \
        sorted(nd["id"] for nd in sources if "number 3" in nd["title"])
    ev("q.value = ''; q.dispatchEvent(new Event('input')); y0.value = '2004'; y0.dispatchEvent(new Event('input'))")
    shown = ev("[...document.querySelectorAll('#source-list li:not(.hidden)')].map(li => li.dataset.id)")
    assert shown == sorted(nd["id"] for nd in sources if nd["year"] is None or nd["year"] >= 2004)
    assert ev("document.getElementById('bibtex').textContent").startswith("@misc{gone1990missing")
    assert ev("document.getElementById('missing').textContent").count("chitragupta missing --bib missing.bib") == 1
    assert browser.errors == []


def test_topics_page_in_a_browser_labels_every_topic(browser, tmp_path):
    rng = np.random.default_rng(0)
    topics = [{"id": t, "label": f"label{t}, words", "size": 20, "words": [f"w{t}"],
               "examples": [{"citekey": f"d{t}-0", "title": f"Example title {t}"}]} for t in range(12)]
    topics.append({"id": -1, "label": "outliers (no topic)", "size": 20, "words": [], "examples": []})
    docs = [{"citekey": f"d{t}-{i}", "title": f"Document {i} of topic {t}", "topic": t,
             "x": float(t % 4 * 5 + rng.normal()), "y": float(t // 4 * 5 + rng.normal())}
            for t in range(-1, 12) for i in range(20)]
    page = tmp_path / "topics.html"
    page.write_text(render_topics({"topics": topics, "documents": docs, "n_outliers": 20}), encoding="utf-8")
    open_page(browser, page)
    labels = browser.evaluate("(() => { const s = document.getElementById('stage').getBoundingClientRect();"
                              "return [...document.querySelectorAll('.topic-label')].map(d => { const r = "
                              "d.getBoundingClientRect(); return [d.textContent, r.left >= s.left && r.right <= "
                              "s.right && r.top >= s.top && r.bottom <= s.bottom]; }); })()")
    assert sorted(labels) == sorted([f"label{t}, words", True] for t in range(12))
    legend = browser.evaluate("document.getElementById('topic-list').textContent")
    assert all(f"Example title {t}" in legend for t in range(12)) and "outliers (no topic)" in legend


def test_check_page_in_a_browser_marks_each_citation_where_it_stands(browser, tmp_path):
    draft = ("\\section{Intro}\n"
             "Dense retrieval beats BM25 \\citep{karpukhin2020, smith2020}.\n"
             "Transformers are everywhere.\n"
             "See [@nope2021; @karpukhin2020, p. 3] and @karpukhin2020x.\n")
    cite = {"sentence": "s", "evidence": None, "alternatives": [], "did_you_mean": []}
    check = {"citations": [
        {**cite, "key": "karpukhin2020", "line": 2, "status": "supported", "support": 0.8,
         "evidence": {"text": "DPR beats BM25 <b>by far</b>", "page": 3}},
        {**cite, "key": "smith2020", "line": 2, "status": "unsupported", "support": 0.05,
         "alternatives": [{"citekey": "karpukhin2020", "support": 0.8}]},
        {**cite, "key": "nope2021", "line": 4, "status": "unknown", "support": None, "did_you_mean": ["nope2020"]},
        {**cite, "key": "karpukhin2020", "line": 4, "status": "weak", "support": 0.3},
        {**cite, "key": "karpukhin2020x", "line": 4, "status": "no-text", "support": None}],
        "uncited": [{"line": 3, "sentence": "Transformers are everywhere.",
                     "candidates": [{"citekey": "vaswani2017", "support": 0.6}]}],
        "engine": "bm25", "notes": []}
    page = tmp_path / "check.html"
    page.write_text(render_check(check, draft), encoding="utf-8")
    open_page(browser, page, region="#draft")
    marks = browser.evaluate("[...document.querySelectorAll('a.cite')].map(a => [a.textContent, a.dataset.status, "
                             "a.closest('.tx').previousElementSibling.textContent])")
    assert marks == [[c["key"], c["status"], str(c["line"])] for c in check["citations"]]
    cards = browser.evaluate("[...document.querySelectorAll('.card')].map(c => c.className + ': ' + c.textContent)")
    assert len(cards) == 6 and "DPR beats BM25 <b>by far</b> (page 3)" in cards[0]
    assert "better supported by:" in cards[1] and "nope2020" in cards[3] and "vaswani2017" in cards[2]
    assert cards[2].startswith("card s-uncited")  # the claim without a citation, beside its line
