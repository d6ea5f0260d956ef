"""chitragupta: citable retrieval over a bibliography -- BM25 over documents and paragraphs, embeddings,
topics.

    from chitragupta import Retriever
    hits = Retriever.open("my-workspace").search("digital twin fidelity", k=10)

One namespace over four layers, each importing only the ones below it (ARCHITECTURE.md):

    chitragupta.cli        the command line (``chitragupta ...``)
    chitragupta.enrich     docling, embeddings, rerank, topics (the heavy optional extras)
    chitragupta.engine     workspace, corpus, indexes, search API
    chitragupta.kernels    arrays in, arrays out: scoring, top-k, lookup, run formatting
    chitragupta.errors, chitragupta.extras, chitragupta.device   errors, optional imports, device choice

Names here are loaded on first use, so ``import chitragupta`` stays instant (no numba, torch or faiss).
"""

from __future__ import annotations

import chitragupta.engine as _engine  # light: its names too are loaded on first use

__version__ = _engine.__version__
__all__ = list(_engine.__all__)


def __getattr__(name: str):
    if name not in _engine.__all__:
        raise AttributeError(f"module 'chitragupta' has no attribute {name!r}")
    value = getattr(_engine, name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
