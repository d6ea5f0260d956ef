"""The index build's array passes, and which module runs them: ``passes(n)``.

Two modules hold the same passes under the same names and signatures, with the same results to the byte:
``kernels._build_numba`` (numba counting sorts, each one pass over its input in place of a numpy stable
argsort) and ``kernels.build_numpy`` (those argsorts and ``bincount`` s). A build says which it wants for
all its passes (``numpy_passes(on)``: ``engine.index.doc.build`` from the size of its text against
``kernels.dispatch.NUMBA_FROM["build"]``; a small build's passes take about a millisecond each in
numpy against the half second numba takes to start in a process). A pass that no build spoke for (another
thread's, the passage index's) takes the module its own input's size calls for
(``kernels.dispatch.compiled("passes", n)``). The choice is this thread's own (a context variable), never
the process's. Importing this module imports neither.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

from chitragupta.kernels.dispatch import compiled

__all__ = ["passes", "numpy_passes", "uses_numpy"]

_said: ContextVar[bool | None] = ContextVar("chitragupta_numpy_passes", default=None)  # what the build said


def uses_numpy() -> bool:
    """True while a small build holds ``numpy_passes`` in this thread."""
    return _said.get() is True


def passes(n: int | None = None) -> ModuleType:
    """The module whose passes a build calls now for a pass over ``n`` items (None: many)."""
    said = _said.get()
    if said if said is not None else not compiled("passes", n):
        from chitragupta.kernels import build_numpy

        return build_numpy
    from chitragupta.kernels import _build_numba

    return _build_numba


@contextmanager
def numpy_passes(on: bool = True):
    """Within it, in this thread, ``passes()`` is the numpy module when ``on``, else the numba one."""
    token = _said.set(bool(on))
    try:
        yield
    finally:
        _said.reset(token)
