"""The one timer of bench: a stopwatch for a stretch of code, the median of repeated calls, two calls timed in
alternating rounds, and a whole command run as a child process.

Wall seconds are ``time.perf_counter``; CPU seconds of in-process work are ``time.process_time`` (this
process, every thread); a child's CPU seconds and peak RSS are its own ``rusage``, read when it is reaped.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["wall_clock", "Took", "stopwatch", "median_time", "median_wall", "paired_time", "run_timed"]


def wall_clock() -> float:
    """Wall seconds from an arbitrary start: for a budget or a progress line (``stopwatch`` times a stretch)."""
    return time.perf_counter()


@dataclass
class Took:
    """Seconds a ``stopwatch`` stretch took: wall and CPU (both 0.0 until the stretch ends)."""

    wall: float = 0.0
    cpu: float = 0.0


@contextmanager
def stopwatch():
    """``with stopwatch() as took: ...``; then ``took.wall`` and ``took.cpu`` are the stretch's seconds."""
    took = Took()
    c = time.process_time()
    t = time.perf_counter()
    try:
        yield took
    finally:
        took.wall = time.perf_counter() - t
        took.cpu = time.process_time() - c


def median_time(fn, repeats: int, warm=None) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds of ``fn`` over ``repeats`` calls, after one untimed call of
    ``warm`` (``fn`` itself when None: JIT, caches, page cache)."""
    (warm or fn)()
    walls, cpus = [], []
    for _ in range(repeats):
        with stopwatch() as took:
            fn()
        walls.append(took.wall)
        cpus.append(took.cpu)
    return statistics.median(walls), statistics.median(cpus)


def median_wall(fn, repeats: int, warm=None) -> float:
    """``median_time``'s wall seconds alone."""
    return median_time(fn, repeats, warm)[0]


def paired_time(a, b, repeats: int, min_round_s: float = 0.5) -> tuple[list, list]:
    """(wall, CPU) seconds a call of ``a`` and of ``b`` in ``repeats`` rounds, the order alternating (a b,
    b a, ...), so that a swing of the host's speed lands on both engines alike. A call shorter than
    ``min_round_s`` is repeated within its round (the count from one untimed call of each) and averaged."""
    once = []
    for fn in (a, b):
        with stopwatch() as took:
            fn()
        once.append(took.wall)
    reps = max(1, math.ceil(min_round_s / max(min(once), 1e-6)))
    got: dict = {a: [], b: []}
    for i in range(repeats):
        for fn in ((a, b) if i % 2 == 0 else (b, a)):
            with stopwatch() as took:
                for _ in range(reps):
                    fn()
            got[fn].append((took.wall / reps, took.cpu / reps))
    return got[a], got[b]


def run_timed(argv: list, *, env: dict | None = None, cwd=None) -> dict:
    """Run ``argv`` to its end as a child: ``wall_s``, its own ``user_s`` / ``sys_s`` / ``cpu_s`` and
    ``peak_rss_mib`` (its ``rusage``, itself and what it waited for), ``stdout`` and ``stderr``. A non-zero
    exit raises ``RuntimeError`` with the command and the ends of both streams."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([str(x) for x in argv], stdout=out, stderr=err, env=env, cwd=cwd)
        _pid, status, ru = os.wait4(p.pid, 0)  # this child's own rusage, reaped here
        wall = time.perf_counter() - t
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        said, errors = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    if rc != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit {rc}\n{said[-2000:]}\n{errors[-3000:]}")
    return {"wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mib": ru.ru_maxrss / 1024, "stdout": said, "stderr": errors}
