"""chitragupta's engine: a workspace's corpus, ledger, BM25 indexes and search API.

    from chitragupta.engine import Retriever   # also: from chitragupta import Retriever
    hits = Retriever.open("my-workspace").search("digital twin fidelity", k=10)

Names are loaded on first use, so ``import chitragupta.engine`` stays instant; nothing here imports
numba, torch or faiss. The engine imports ``chitragupta.kernels`` and the bottom layer (errors, extras,
device), never ``chitragupta.enrich`` or the CLI.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Retriever": "chitragupta.engine.search.bm25",
    "BM25Searcher": "chitragupta.engine.search.bm25",
    "Searcher": "chitragupta.engine.search.searcher",
    "Ranked": "chitragupta.engine.search.results",
    "SearchResult": "chitragupta.engine.search.results",
    "SearchResponse": "chitragupta.engine.search.results",
    "Note": "chitragupta.notes",
    "Workspace": "chitragupta.engine.library.workspace",
    "Config": "chitragupta.engine.library.config",
    "load_config": "chitragupta.engine.library.config",
    "ChitraguptaError": "chitragupta.errors",
    "ConfigError": "chitragupta.errors",
    "CorpusError": "chitragupta.errors",
    "UsageError": "chitragupta.errors",
    "WorkspaceError": "chitragupta.errors",
    "WorkspaceBusy": "chitragupta.errors",
    "MissingExtra": "chitragupta.errors",
    "tokenize": "chitragupta.engine.text.tokenize",
    "sync": "chitragupta.engine.library.sync",
    "import_jsonl": "chitragupta.engine.library.sync",
    "refresh_index": ("chitragupta.engine.index.manage", "refresh"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'chitragupta.engine' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
