"""The one process pool of the engine (``index --jobs``, ``sync --jobs``): workers that die with the process
that started them.

A worker forked by a ``sync`` or an ``index`` that is then killed (SIGKILL, the OOM killer) would live on,
holding the command's stdout and stderr open and its CPU busy; a caller waiting for the command's output
(a shell pipeline, a test, an agent) would wait forever. On Linux each worker asks the kernel for SIGKILL
when its parent dies (``PR_SET_PDEATHSIG``) and exits at once if the parent is already gone; elsewhere the
executor's own shutdown is all there is.
"""

from __future__ import annotations

import os
import sys

__all__ = ["process_pool"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl in this libc: the pool's shutdown only
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def process_pool(jobs: int):
    """A ``ProcessPoolExecutor`` of ``jobs`` workers (fork where the platform has it, else spawn), each
    killed by the kernel when the process that made the pool dies."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_die_with_parent,
                               initargs=(os.getpid(),))
