"""Backend choice, in one place.

``BACKENDS`` names every backend; config validation, CLI choices and error messages are built from its
keys so they cannot drift. A backend module is imported only when resolved, so importing ``kernels``
costs neither numba's nor torch's import time.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Callable

from kernels.types import BM25Params, Postings, QueryBatch, TopK

__all__ = ["BACKENDS", "Backend", "resolve", "score_topk", "set_threads"]

log = logging.getLogger(__name__)

# name -> (module, what it is). "auto" is resolved, never run.
BACKENDS: dict[str, str] = {
    "auto": "numba when available (the production CPU path)",
    "numba": "kernels.cpu: numba, parallel over queries",
    "numpy": "kernels.reference: plain numpy, one query at a time (the slow truth)",
}

_MODULES = {"numba": "kernels.cpu", "numpy": "kernels.reference"}


@dataclass(frozen=True)
class Backend:
    """A resolved backend: its name and its ``score_topk(postings, queries, params, k, **cached)``."""

    name: str
    score_topk: Callable[..., TopK]
    accepts_cached: bool


def resolve(name: str = "auto") -> Backend:
    """Turn a backend name into the backend that will run; raises ValueError for an unknown name."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    chosen = "numba" if name == "auto" else name
    try:
        module = importlib.import_module(_MODULES[chosen])
    except ImportError as err:
        if name != "auto":
            raise
        # auto may change speed, never results: the reference gives the same rankings.
        log.warning("numba is not importable (%s); falling back to the numpy reference backend", err)
        chosen, module = "numpy", importlib.import_module(_MODULES["numpy"])
    if name == "auto":
        log.info("backend auto -> %s", chosen)
    return Backend(name=chosen, score_topk=module.score_topk, accepts_cached=chosen == "numba")


def set_threads(threads: int) -> None:
    """Set numba's thread count for the next calls (0: leave numba's default). Never done on import."""
    if threads and threads > 0:
        import numba

        numba.set_num_threads(min(int(threads), numba.config.NUMBA_NUM_THREADS))


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               backend: str | Backend = "auto", **cached) -> TopK:
    """Score a batch on the chosen backend. ``k`` must be >= 1."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    b = backend if isinstance(backend, Backend) else resolve(backend)
    if b.accepts_cached:
        return b.score_topk(postings, queries, params, k, **cached)
    return b.score_topk(postings, queries, params, k)
