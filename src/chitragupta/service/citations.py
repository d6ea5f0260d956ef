"""The citation graph for every surface -- the CLI (``refs``, ``cites``, ``cited-by``, ``missing``, ``graph``),
the MCP tools (``references``, ``cited_by``, ``missing``) and the Python API:

    from chitragupta import citation_graph
    g = citation_graph("my-review")            # a CitationGraph (engine/citations/graph.py)
    g.cited_by("smith2020", filters={"year": "2019.."})

Each question first brings the stored reference lists up to date, as a search brings the index
(``store.build_references``: the document index built or updated when stale, its pass parsing the lists,
then the kept resolution; under the workspace lock). A workspace that cannot be written, or is busy, is
answered from what it stores, with a note; one that stores no lists at all is an error, never an empty
answer. ``references`` and ``cites`` ask about one source and read only its entries
(``CitationGraph.of_source``); the whole graph is kept per workspace folder while the ledger stays as it is.
The answers are JSON-ready dicts: what the CLI's ``--json`` prints line by line and what the MCP tools return.
A list is paged (``k`` items from ``offset``; ``max_bytes``: as many as fit in that much JSON), and says
how many items there are in all (``total``) and how many follow the page (``remaining``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

__all__ = ["citation_graph", "references", "cites", "cited_by", "missing", "graph_notes"]

_CACHE: dict[str, tuple[str, object]] = {}
_LOCK = threading.Lock()


def _workspace(workspace, config=None):
    from chitragupta.engine.library.workspace import Workspace

    return workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)


def _ready(ws, links: bool) -> list[str]:
    """Bring the stored lists (and, with ``links``, the kept resolution) up to date; the notes to say."""
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.errors import WorkspaceError

    try:
        build_references(ws, links=links)
        return []
    except WorkspaceError as err:
        with Ledger(ws.ledger_path, create=False) as ledger:
            located, without, _entries = ledger.reference_counts()
        if not located + without:
            raise WorkspaceError(f"{ws.root}: no reference lists are stored and they could not be built now ({err}); "
                                 "run `chitragupta index` where the workspace can be written") from None
        return [f"the reference lists could not be brought up to date ({err}); answered from those stored"]


def citation_graph(workspace=".", *, config=None):
    """The ``CitationGraph`` of a workspace (a path or an open ``Workspace``), its lists brought up to date
    first, kept while the ledger stays as it is."""
    from chitragupta.engine.citations.graph import CitationGraph
    from chitragupta.engine.library.ledger import Ledger

    ws = _workspace(workspace, config)
    notes = _ready(ws, links=True)
    with Ledger(ws.ledger_path, create=False) as ledger:
        sig = f"{ledger.get_meta('links')}|{ledger.change_stamp()}"
    key = str(Path(ws.root).resolve())
    with _LOCK:
        got = _CACHE.get(key)
    if got is None or got[0] != sig or notes:
        got = (sig, CitationGraph.open(ws))
        got[1]._notes = notes
        with _LOCK:
            _CACHE[key] = got
    return got[1]


def graph_notes(g) -> list[str]:
    """What a user should know about the graph as a whole (its entries never built)."""
    return g.notes()


def _page(items: list, k: int | None, offset: int, max_bytes: int | None, name: str) -> dict:
    """``{name: items[offset:offset + k], "total", "offset", "remaining"}``, the page cut short where its JSON
    would pass ``max_bytes`` (at least one item, its ``text`` shortened when it alone would pass)."""
    from chitragupta.errors import UsageError

    for what, v in (("k", k), ("offset", offset)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < (1 if what == "k" else 0)):
            raise UsageError(f"{what} must be a whole number >= {1 if what == 'k' else 0}, got {v!r}")
    page = items[offset:] if k is None else items[offset:offset + k]
    if max_bytes is not None:
        size, kept = 200, []
        for it in page:
            n = len(json.dumps(it, ensure_ascii=False).encode("utf-8")) + 2
            if n > max_bytes // 2 and isinstance(it.get("text"), str):
                it = dict(it, text=it["text"][:max_bytes // 8] + "...", text_cut=True)
                n = len(json.dumps(it, ensure_ascii=False).encode("utf-8")) + 2
            if kept and size + n > max_bytes:
                break
            kept.append(it)
            size += n
        page = kept
    return {name: page, "total": len(items), "offset": offset, "remaining": max(0, len(items) - offset - len(page))}


def references(workspace, citekey: str, k: int | None = None, offset: int = 0, max_bytes: int | None = None) -> dict:
    """``{"references": [refs objects], "total", "offset", "remaining", "notes": [...]}``: one source's
    entries alone (nobody else's read)."""
    from chitragupta.engine.citations.graph import CitationGraph

    ws = _workspace(workspace)
    notes = _ready(ws, links=False)
    g = CitationGraph.of_source(ws, citekey)
    return dict(_page(g.refs(citekey), k, offset, max_bytes, "references"),
                notes=notes + graph_notes(g) + g.refs_notes(citekey))


def cites(workspace, citekey: str) -> dict:
    """``{"cites": [{"citekey", "title", "text"}], "notes": [...]}``."""
    from chitragupta.engine.citations.graph import CitationGraph

    ws = _workspace(workspace)
    notes = _ready(ws, links=False)
    g = CitationGraph.of_source(ws, citekey)
    return {"cites": g.cites(citekey), "notes": notes + graph_notes(g) + g.refs_notes(citekey, parse=False)}


def cited_by(workspace, citekey: str, filters=None, k: int | None = None, offset: int = 0,
             max_bytes: int | None = None) -> dict:
    """``{"cited_by": [{"citekey", "title", "text"}], "total", "offset", "remaining", "notes": [...]}``:
    only citing sources ``filters`` allow."""
    from chitragupta.engine.search.filters import to_filters

    f = to_filters(filters)
    g = citation_graph(workspace)
    return dict(_page(g.cited_by(citekey, f), k, offset, max_bytes, "cited_by"),
                notes=graph_notes(g) + g.filter_notes(f))


def missing(workspace, min_count: int = 2, k: int | None = 50, filters=None, offset: int = 0,
            max_bytes: int | None = None) -> dict:
    """``{"missing": [{"title", "year", "authors", "citing", "count"}], "total", "offset", "remaining",
    "notes": [...]}``: works cited by at least ``min_count`` of the sources ``filters`` allow, most cited
    first."""
    from chitragupta.engine.search.filters import to_filters

    f = to_filters(filters)
    g = citation_graph(workspace)
    works = g.missing(min_count, max(1, len(g.resolution.missing)), f)
    return dict(_page([m.to_dict() for m in works], k, offset, max_bytes, "missing"),
                notes=graph_notes(g) + g.filter_notes(f))
