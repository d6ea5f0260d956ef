"""Pages a person opens instead of reading JSON: the citation graph, the topic map and a checked draft, each
one self-contained HTML file (styles, scripts and data inlined; a Content-Security-Policy of
``default-src 'none'`` so the page cannot fetch anything; no web server).

    render_graph(g.to_json(2), bibtex=g.missing_bibtex(works), command="chitragupta missing --bib FILE")
    render_topics({"topics": [...], "documents": [...]})      # cli/topics_cmd.py builds the dict
    render_check(check_json, draft_text)                      # the ``check`` command's JSON and its draft

This module renders dicts the project already produces and imports no engine code. The assets are plain
JavaScript and CSS in ``page_assets/`` (package data): ``view.js`` (data loading, a pannable and zoomable
canvas, hit testing) shared by ``graph.js`` and ``topics.js``; ``check.js``. No JavaScript library is
inlined. Each page marks ``<html data-ready>`` (milliseconds since navigation) once its scripts are done.

The data travels as gzip in base64 (the page inflates it with the browser's ``DecompressionStream``): a
citation graph's entry texts are most of its weight and compress about fourfold.

The graph's layout is computed here (``layout``), so a page opens drawn: force-directed in the manner of
Fruchterman and Reingold, with attraction ``d^2`` along each link and repulsion ``1/d`` between every pair
of nodes computed on a 64 x 64 grid by one FFT convolution per step (particle-mesh: O(n + links) a step, not
O(n^2)); nodes in one grid cell do not repel each other. 150 steps, seeded: the same graph gives the same
picture.
"""

from __future__ import annotations

import base64
import gzip
import json
from importlib import resources

__all__ = ["render_graph", "render_topics", "render_check", "layout"]

GRID = 64
STEPS = 150


def _asset(name: str) -> str:
    return (resources.files("chitragupta") / "page_assets" / name).read_text(encoding="utf-8")


def _page(title: str, body: str, data: dict, script: str) -> str:
    """The page: ``body`` (an asset's markup), the data as gzip+base64 in ``<script id="data">``, and the
    scripts; the title escaped."""
    import html

    blob = base64.b64encode(gzip.compress(json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                                          .encode("utf-8"), 6, mtime=0)).decode("ascii")
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data: blob:"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{html.escape(title)}</title>'
            f'<style>{_asset("page.css")}</style></head>\n<body>{body}\n'
            f'<noscript>This page draws itself with JavaScript; enable it to see the page.</noscript>\n'
            f'<script type="application/gzip+base64" id="data">{blob}</script>\n'
            f'<script>{_asset("view.js")}\n{_asset(script)}</script>\n</body></html>\n')


def layout(n: int, links, seed: int = 0, steps: int = STEPS):
    """Positions for ``n`` nodes joined by ``links`` (pairs of node numbers; direction and repeats ignored):
    float64 ``(n, 2)``. See the module docstring."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1, 1, (2, n)) * np.sqrt(max(n, 1))
    if n < 2:
        return np.zeros((n, 2))
    e = np.asarray(links, dtype=np.int64).reshape(-1, 2)
    a, b = (np.ascontiguousarray(c) for c in np.unique(np.sort(e[e[:, 0] != e[:, 1]], axis=1), axis=0).T)
    side = 2 * GRID  # twice the grid: the circular convolution of a GRID-wide mass never wraps onto itself
    d = np.fft.fftfreq(side, 1 / side)
    dx, dy = np.meshgrid(d, d, indexing="ij")
    r2 = np.maximum(dx * dx + dy * dy, 1)
    kx, ky = np.fft.rfft2(dx / r2), np.fft.rfft2(dy / r2)
    heat = np.sqrt(n) / 2
    for _ in range(steps):
        x0, y0 = x.min(), y.min()
        h = max(x.max() - x0, y.max() - y0, 1e-6) / (GRID - 1)
        flat = np.minimum((x - x0) / h, GRID - 1).astype(np.int64) * side + \
            np.minimum((y - y0) / h, GRID - 1).astype(np.int64)
        mass = np.fft.rfft2(np.bincount(flat, minlength=side * side).reshape(side, side))
        mx, my = (np.fft.irfft2(mass * k, s=(side, side)).ravel()[flat] / h for k in (kx, ky))
        dx, dy = x[a] - x[b], y[a] - y[b]
        r = np.hypot(dx, dy)
        dx *= r
        dy *= r
        # the pull along the links, and a weak pull to the centre that keeps separate parts in view
        mx += np.bincount(b, dx, n) - np.bincount(a, dx, n) - 0.02 * x
        my += np.bincount(b, dy, n) - np.bincount(a, dy, n) - 0.02 * y
        length = np.maximum(np.hypot(mx, my), 1e-9)
        step = np.minimum(length, heat) / length
        x += mx * step
        y += my * step
        heat = max(heat * 0.97, 0.01)
    return np.stack([x - x.mean(), y - y.mean()], axis=1)


def render_graph(graph: dict, *, title: str = "Citation graph", bibtex: str | None = None,
                 command: str | None = None) -> str:
    """The citation graph's page from ``graph``, the shape ``chitragupta graph --format json`` prints
    (``{"nodes": [{"id", "kind", "title", "year", "authors"?, "count"?}], "edges": [{"source", "target",
    "text"}]}``): sources and missing works (``kind`` "missing", sized by ``count``), citations as links,
    each with its entry's text as evidence; ``bibtex`` the missing works' entries (offered for download),
    ``command`` the command that writes them."""
    nodes, edges = graph["nodes"], graph["edges"]
    at = {nd["id"]: i for i, nd in enumerate(nodes)}
    texts: dict[str, int] = {}
    flat: list[int] = []  # (source, target, text number) per citation
    for e in edges:
        if e["source"] in at and e["target"] in at:
            flat += [at[e["source"]], at[e["target"]], texts.setdefault(e.get("text") or "", len(texts))]
    xy = layout(len(nodes), list(zip(flat[0::3], flat[1::3]))).round(3).tolist()
    data = {"id": [nd["id"] for nd in nodes], "missing": [int(nd.get("kind") == "missing") for nd in nodes],
            "title": [nd.get("title") or "" for nd in nodes], "year": [nd.get("year") for nd in nodes],
            "authors": [list(nd.get("authors") or ()) for nd in nodes],
            "count": [nd.get("count") for nd in nodes], "xy": xy, "edges": flat, "texts": list(texts),
            "bibtex": bibtex, "command": command, "title_": title}
    return _page(title, _asset("graph.html"), data, "graph.js")


def render_topics(topics: dict, *, title: str = "Topics") -> str:
    """The topic map's page from ``{"topics": [{"id", "label", "size", "words", "examples": [{"citekey",
    "title"}]}], "documents": [{"citekey", "title", "topic", "x", "y"}], ...}`` (``topics --json``'s rows
    and the documents' 2-D coordinates): documents as points coloured by topic, each topic labelled."""
    return _page(title, _asset("topics.html"), {**topics, "title_": title}, "topics.js")


def render_check(check: dict, draft: str, *, title: str = "Checked draft") -> str:
    """A checked draft's page from the ``check`` command's JSON (``{"citations": [{"key", "line",
    "sentence", "status", "support", "evidence", "alternatives", "did_you_mean"}], "uncited": [...],
    "engine", "notes"}``) and the draft's text: each citation marked by status where it stands, its evidence
    and alternatives beside its line."""
    return _page(title, _asset("check.html"), {"check": check, "draft": draft, "title_": title}, "check.js")
