"""chitragupta: citable retrieval over a bibliography -- BM25 over documents and paragraphs, embeddings,
topics.

    from chitragupta import Retriever, open_searcher
    hits = Retriever.open("my-workspace").search("digital twin fidelity", k=10)    # BM25
    hits = open_searcher("my-workspace", engine="hybrid").search("digital twin fidelity", k=10)

One namespace over four layers, each importing only the ones below it (ARCHITECTURE.md):

    chitragupta.cli        the command line (``chitragupta ...``)
    chitragupta.service    the one registry of engines, request checks, warm engines (CLI, MCP, API)
    chitragupta.enrich     docling, embeddings, rerank, topics (the heavy optional extras)
    chitragupta.engine     workspace, corpus, indexes, search API
    chitragupta.kernels    arrays in, arrays out: scoring, top-k, the index build's passes
    chitragupta.errors, chitragupta.extras, chitragupta.device   errors, optional imports, device choice

Names here are loaded on first use, so ``import chitragupta`` stays instant (no numba, torch or faiss).
"""

from __future__ import annotations

import chitragupta.engine as _engine  # light: its names too are loaded on first use

__version__ = _engine.__version__
_SERVICE = ("open_searcher", "SearchRequest", "citation_graph")
__all__ = sorted(list(_engine.__all__) + list(_SERVICE))


def __getattr__(name: str):
    if name in _SERVICE:
        import chitragupta.service as _service

        value = getattr(_service, name)
    elif name in _engine.__all__:
        value = getattr(_engine, name)
    else:
        raise AttributeError(f"module 'chitragupta' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return __all__
