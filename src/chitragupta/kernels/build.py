"""The index build's array passes, and which module runs them: ``passes()``.

Two modules hold the same passes under the same names and signatures, with the same results to the byte:
``kernels._build_numba`` (numba counting sorts, each one pass over its input in place of a numpy stable
argsort) and ``kernels.build_numpy`` (those argsorts and ``bincount`` s). A build calls
``passes().<name>``; ``numpy_passes()`` is held around a small build (``engine.index.doc.build``, below
``segments.POOL_FROM_BYTES`` of text), whose passes take about a millisecond each in numpy against the
half second numba takes to start in a process. Everything else -- and a large build -- gets the numba
module. Importing this module imports neither; ``kernels.build.<name>`` is the numba pass (as before).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from types import ModuleType

__all__ = ["passes", "numpy_passes", "uses_numpy"]

_lock = threading.Lock()
_numpy_holders = 0  # builds now inside ``numpy_passes``


def uses_numpy() -> bool:
    """True while a small build holds ``numpy_passes``."""
    return _numpy_holders > 0


def passes() -> ModuleType:
    """The module whose passes a build calls now (see the module docstring)."""
    if _numpy_holders > 0:
        from chitragupta.kernels import build_numpy

        return build_numpy
    from chitragupta.kernels import _build_numba

    return _build_numba


@contextmanager
def numpy_passes(on: bool = True):
    """Within it (when ``on``), ``passes()`` is the numpy module. Process-wide: a large build running at
    once in another thread then gets the numpy passes too, the same arrays, slower."""
    global _numpy_holders
    if not on:
        yield
        return
    with _lock:
        _numpy_holders += 1
    try:
        yield
    finally:
        with _lock:
            _numpy_holders -= 1


_PASSES = frozenset(("tally", "spread", "split_by_range", "place", "place_ranked", "count_terms", "count_terms_ranked",
                     "rows_sorted", "align", "map_count", "map_ids", "count_ids", "fill_positions", "remap"))


def __getattr__(name: str):
    if name not in _PASSES:  # (a probe for ``__path__`` and the like starts nothing)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from chitragupta.kernels import _build_numba

    return getattr(_build_numba, name)
