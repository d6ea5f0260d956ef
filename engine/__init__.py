"""chitragupta's engine: a workspace's corpus, ledger, BM25 indexes and search API.

    from engine import Retriever
    hits = Retriever.open("my-workspace").search("digital twin fidelity", k=10)

Names are loaded on first use, so ``import engine`` (and the CLI's ``--help``) stays instant; nothing
here imports torch or faiss.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Retriever": "engine.search",
    "Ranked": "engine.search",
    "SearchResult": "engine.results",
    "SearchResponse": "engine.results",
    "Note": "engine.results",
    "Workspace": "engine.workspace",
    "Config": "engine.config",
    "load_config": "engine.config",
    "ChitraguptaError": "engine.errors",
    "ConfigError": "engine.errors",
    "CorpusError": "engine.errors",
    "UsageError": "engine.errors",
    "WorkspaceError": "engine.errors",
    "WorkspaceBusy": "engine.errors",
    "tokenize": "engine.tokenize",
    "sync": "engine.corpus.sync",
    "import_jsonl": "engine.corpus.sync",
    "refresh_index": ("engine.index.manage", "refresh"),
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
