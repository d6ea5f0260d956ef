"""The citation graph for every surface -- the CLI (``refs``, ``cites``, ``cited-by``, ``missing``, ``graph``),
the MCP tools (``references``, ``cited_by``, ``missing``) and the Python API:

    from chitragupta import citation_graph
    g = citation_graph("my-review")            # a CitationGraph (engine/citations/graph.py)
    g.cited_by("smith2020", filters={"year": "2019.."})

The graph is built from the ledger and the per-source entries ``chitragupta index`` stores under
``content/refs/``, and kept (per workspace folder) while neither changes: the ledger's change stamp and
the refs folder's own stamp (a file written or removed there renames into it) are compared on each call,
which costs two stats and one query; a new process reads the resolution ``CitationGraph.open`` kept
in ``content/citation_graph.json`` while neither has changed. ``references`` and ``cites`` ask about one
source: without a current kept graph they resolve that source's entries alone
(``CitationGraph.of_source``), so a one-off command does not read every source's entries. The answers as JSON-ready dicts (``references``, ``cites``,
``cited_by``, ``missing``) are what the CLI's ``--json`` prints line by line and what the MCP tools return.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["citation_graph", "references", "cites", "cited_by", "missing", "graph_notes"]

_CACHE: dict[str, tuple[tuple, object]] = {}
_LOCK = threading.Lock()


def _workspace(workspace, config=None):
    from chitragupta.engine.library.workspace import Workspace

    return workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)


def _signature(ws) -> tuple:
    from chitragupta.engine.citations.store import refs_folder
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws.ledger_path, create=False) as ledger:
        stamp = ledger.change_stamp()
    try:
        st = os.stat(refs_folder(ws))
        refs = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        refs = None
    return stamp, refs


def citation_graph(workspace=".", *, config=None):
    """The ``CitationGraph`` of a workspace (a path or an open ``Workspace``), kept while its ledger and
    stored entries stay as they are."""
    from chitragupta.engine.citations.graph import CitationGraph

    ws = _workspace(workspace, config)
    key = str(Path(ws.root).resolve())
    sig = _signature(ws)
    with _LOCK:
        got = _CACHE.get(key)
        if got is not None and got[0] == sig:
            return got[1]
    g = CitationGraph.open(ws)
    with _LOCK:
        _CACHE[key] = (sig, g)
    return g


def _graph_of_source(workspace, citekey: str):
    """The kept graph when it is current, else one built for ``citekey`` alone (``CitationGraph.of_source``):
    ``refs`` and ``cites`` from the command line need no one else's entries."""
    from chitragupta.engine.citations.graph import CitationGraph

    ws = _workspace(workspace)
    with _LOCK:
        got = _CACHE.get(str(Path(ws.root).resolve()))
    if got is not None and got[0] == _signature(ws):
        return got[1]
    return CitationGraph.of_source(ws, citekey)


def graph_notes(g) -> list[str]:
    """What a user should know about the graph as a whole (its entries never built)."""
    return g.notes()


def references(workspace, citekey: str) -> dict:
    """``{"references": [refs objects], "notes": [...]}``."""
    g = _graph_of_source(workspace, citekey)
    return {"references": g.refs(citekey), "notes": graph_notes(g) + g.refs_notes(citekey)}


def cites(workspace, citekey: str) -> dict:
    """``{"cites": [{"citekey", "title", "text"}], "notes": [...]}``."""
    g = _graph_of_source(workspace, citekey)
    return {"cites": g.cites(citekey), "notes": graph_notes(g) + g.refs_notes(citekey)}


def cited_by(workspace, citekey: str, filters=None) -> dict:
    """``{"cited_by": [{"citekey", "title", "text"}], "notes": [...]}``: only citing sources ``filters``
    allow."""
    from chitragupta.engine.search.filters import to_filters

    f = to_filters(filters)
    g = citation_graph(workspace)
    return {"cited_by": g.cited_by(citekey, f), "notes": graph_notes(g) + g.filter_notes(f)}


def missing(workspace, min_count: int = 2, k: int = 50, filters=None) -> dict:
    """``{"missing": [{"title", "year", "authors", "citing", "count"}], "notes": [...]}``: counting only
    citing sources ``filters`` allow."""
    from chitragupta.engine.search.filters import to_filters

    f = to_filters(filters)
    g = citation_graph(workspace)
    return {"missing": [m.to_dict() for m in g.missing(min_count, k, f)],
            "notes": graph_notes(g) + g.filter_notes(f)}
