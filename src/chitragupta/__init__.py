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

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Retriever": "chitragupta.engine.search",
    "Ranked": "chitragupta.engine.search",
    "SearchResult": "chitragupta.engine.results",
    "SearchResponse": "chitragupta.engine.results",
    "Note": "chitragupta.engine.results",
    "Workspace": "chitragupta.engine.workspace",
    "Config": "chitragupta.engine.config",
    "load_config": "chitragupta.engine.config",
    "ChitraguptaError": "chitragupta.errors",
    "ConfigError": "chitragupta.errors",
    "CorpusError": "chitragupta.errors",
    "UsageError": "chitragupta.errors",
    "WorkspaceError": "chitragupta.errors",
    "WorkspaceBusy": "chitragupta.errors",
    "MissingExtra": "chitragupta.errors",
    "tokenize": "chitragupta.engine.tokenize",
    "sync": "chitragupta.engine.corpus.sync",
    "import_jsonl": "chitragupta.engine.corpus.sync",
    "refresh_index": ("chitragupta.engine.index.manage", "refresh"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'chitragupta' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
