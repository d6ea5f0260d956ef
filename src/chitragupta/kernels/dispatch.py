"""Which form of a job runs -- numpy, or a compiled numba kernel (or torch on a GPU) -- decided in one place.

Every job that has both forms asks ``compiled(job, work)``: the numba kernel runs when the work is at least
``NUMBA_FROM[job]``, else the numpy form, which gives the same results (each pair is held equal by the
tests). The work is counted in the job's own unit, and for the jobs whose numpy form is fast enough to
matter (scoring a batch, a sweep's grid) the threshold depends on whether numba's cache already holds the
compiled kernel (``cached``): loading a cached kernel costs numba's start, about half a second of CPU;
compiling it first costs tens of seconds, which numpy's form undercuts up to a much larger job. Nothing
depends on what a process imported before: the same work gives the same choice in every process. When a
kernel is about to be compiled, one line says so first (the ``chitragupta.progress`` logger, which the CLI
prints on stderr).

``BACKENDS`` names every scoring backend and ``DEVICES`` every place torch may run; config validation, CLI
choices and error messages are built from their keys so they cannot drift. A backend module is imported
only when resolved, so importing ``kernels`` costs neither numba's nor torch's import time. ``"auto"`` is
read by one function, ``backend_name``: numpy below the job's threshold; above it, for a batch ("batch"),
torch on CUDA when ``chitragupta.device`` finds one, else numba; for a sweep's grid ("grid"), numba. It is
speed only: auto runs torch in float64, which sums in the reference's order and ranks exactly as numba
does; an explicit ``"torch"`` on CUDA defaults to float32 (about 1e-6 relative from the reference, so
near-ties may order differently: stated, not silent), and the sweep's torch grid is float32 only, so a
sweep's auto never takes it. Kernels import nothing above them: only the bottom layer (errors, extras,
device).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from chitragupta.device import DEVICES, resolve_device
from chitragupta.extras import require
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK

__all__ = ["BACKENDS", "DEVICES", "AUTO", "NUMBA_FROM", "Backend", "backend_name", "compiled", "cached", "tell", "resolve",
           "resolve_torch_device", "import_torch_backend", "score_topk", "set_threads"]

log = logging.getLogger(__name__)
say = logging.getLogger("chitragupta.progress")  # first-run lines (the CLI prints them on stderr)

# name -> (module, what it is). "auto" is resolved, never run.
BACKENDS: dict[str, str] = {
    "auto": "numpy for a batch too small to be worth numba's start (NUMBA_FROM), else torch on CUDA when torch "
            "and an NVIDIA GPU are present, else numba",
    "numba": "chitragupta.kernels.cpu: numba, parallel over queries",
    "numpy": "chitragupta.kernels.reference: numpy, the batch as one sparse product (no JIT)",
    "torch": "chitragupta.kernels.torch_backend: torch on the chosen device (CUDA, or the CPU)",
}

# "auto" for each scoring job (see the module docstring); ``backend_name`` applies it.
AUTO: dict[str, str] = {
    "batch": "numpy below NUMBA_FROM['batch'], else torch (float64) on CUDA when torch and an NVIDIA GPU are "
             "present, else numba (numpy when numba does not import)",
    "grid": "numpy below NUMBA_FROM['grid'], else numba: the torch grid is float32 only, which could reorder "
            "near-ties in a sweep's figures",
}

# job -> (what its work counts, the numba kernel that tells whether the job's kernels are in numba's cache,
# from how much work numba runs when they are, from how much when they would be compiled first).
NUMBA_FROM: dict[str, tuple[str, str, int, int]] = {
    # numpy about 30 ns a cell, numba's start about a second of CPU, its compile of the scoring kernels
    # 20-60 s (scifact on a 2-core host, bench/LOG.md 2026-12-07); a job past the second figure compiles, so
    # that the kernels are cached for the next (a job that never got there would never warm the cache)
    "batch": ("score cells: queries x documents", "cpu._topk_from_table", 1 << 25, 1 << 26),
    "grid": ("score cells: grid points x queries x documents", "_sweep_numba.sweep_kernel", 1 << 25, 1 << 28),
    "check": ("postings an open-time integrity pass reads", "_integrity_numba._scan_range", 1 << 21, 1 << 21),
    "strings": ("strings of a table an order check reads", "_integrity_numba._first_unsorted", 1 << 17, 1 << 17),
    "phrase": ("ids a phrase scan reads from an anchor", "_phrase_numba.anchored", 1 << 18, 1 << 18),
}

# What each job's first compile is called in its line.
_WHAT = {"batch": "the scoring kernels", "grid": "the sweep kernel", "check": "the index checks", "strings": "the index checks",
         "phrase": "the phrase scan"}
_told: set[str] = set()  # the jobs ``tell`` looked at in this process

_MODULES = {"numba": "chitragupta.kernels.cpu", "numpy": "chitragupta.kernels.reference", "torch": "chitragupta.kernels.torch_backend"}


def cached(kernel: str) -> bool:
    """Whether numba's cache holds the kernel ``"<module>.<function>"`` of ``chitragupta.kernels``: its index
    file where numba would look (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the source, else the user's
    cache folder). An entry of an older source counts too: auto then compiles once more (speed, never
    results)."""
    module = kernel.split(".")[0]
    src = Path(os.path.abspath(__file__)).with_name(module + ".py")  # (as numba names it: no symlink resolved)
    if os.environ.get("NUMBA_CACHE_DIR"):
        folders = [Path(os.environ["NUMBA_CACHE_DIR"])]
    else:
        folders = [src.parent / "__pycache__", Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"]
    sub = f"{src.parent.name}_{hashlib.sha1(str(src.parent).encode()).hexdigest()}"
    for folder in folders:
        for where in (folder, folder / sub):
            if any(where.glob(f"{kernel}-*.nbi")):
                return True
    return False


def compiled(job: str, work: int | None) -> bool:
    """Whether ``work`` (in ``NUMBA_FROM[job]``'s unit; None: as much as it takes) of ``job`` runs as a numba
    kernel (see the module docstring). Says once per process, before numba compiles the job's kernels, that
    it is about to."""
    if job not in NUMBA_FROM:
        raise ValueError(f"unknown job {job!r}; allowed: {', '.join(NUMBA_FROM)}")
    _unit, kernel, warm, cold = NUMBA_FROM[job]
    if work is not None and (work < warm or (work < cold and not cached(kernel))):
        return False
    tell(job)
    return True


def tell(job: str) -> None:
    """Say, once per process, that ``job``'s numba kernels are about to be compiled, when they are not in
    numba's cache (a line on the ``chitragupta.progress`` logger)."""
    if job in _told:
        return
    _told.add(job)  # (looked at once a process: a kernel is compiled once)
    if not cached(NUMBA_FROM[job][1]) and importlib.util.find_spec("numba") is not None:
        say.info("compiling %s with numba, first run only (numba keeps them in its cache)", _WHAT[job])


@dataclass(frozen=True)
class Backend:
    """A resolved backend: its name, its ``score_topk(postings, queries, params, k, **cached)`` and, for
    torch, the device it runs on (``"cpu"`` or ``"cuda"``; None for the others). ``accepts_allowed``:
    its ``score_topk`` takes ``allowed=`` masks (numpy and numba; the torch backend does not, and a
    masked batch meant for it is scored by numba: ``score_topk`` here, ``engine.scoring``)."""

    name: str
    score_topk: Callable[..., TopK]
    accepts_cached: bool
    device: str | None = None
    accepts_allowed: bool = False


def import_torch_backend():
    """kernels.torch_backend, or MissingExtra naming the ``gpu`` extra when torch is not installed."""
    try:
        return importlib.import_module(_MODULES["torch"])
    except ImportError:
        if importlib.util.find_spec("torch") is not None:
            raise  # torch is there but broken: its own error says more
        require("torch", "gpu", "the torch scoring backend")  # raises MissingExtra, chaining the cause
        raise


def resolve_torch_device(device: str = "auto") -> str:
    """``"cuda"`` or ``"cpu"`` for the torch backend: ``chitragupta.device.resolve_device``, torch required."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    import_torch_backend()
    return resolve_device(device, purpose="the torch scoring backend")


def backend_name(name: str, device: str = "auto", *, job: str = "batch", work: int | None = None) -> str:
    """The backend ``name`` runs as for ``job`` ("batch" or "grid") of ``work`` (its ``NUMBA_FROM`` unit;
    None: large): ``name`` itself, unless it is "auto", which is what ``AUTO`` says for the job (for "batch"
    this asks ``chitragupta.device`` whether torch sees a GPU on ``device``)."""
    if job not in AUTO:
        raise ValueError(f"unknown job {job!r}; allowed: {', '.join(AUTO)}")
    if name == "auto":
        if not compiled(job, work):
            return "numpy"
        name = "numba" if job == "grid" or resolve_device(device, purpose="the torch scoring backend") != "cuda" \
            else "torch"
    if name == "numba":
        tell(job)
    return name


def resolve(name: str = "auto", device: str = "auto", *, job: str = "batch", work: int | None = None) -> Backend:
    """Turn a backend name (and, for torch, a device) into the backend that will run ``work`` of ``job``
    (``backend_name``: what "auto" is).

    Raises ValueError for an unknown name or device, UsageError for device "cuda" without one,
    MissingExtra for torch when it is not installed. numba and numpy ignore the device.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    chosen = backend_name(name, device, job=job, work=work)
    said = name == "auto" and job == "batch"  # the choice worth a log line
    if chosen == "torch":
        module = import_torch_backend()
        where = resolve_torch_device(device)
        extra = {}
        if name == "auto":
            # auto may change speed, never results: float64 on the device sums in the reference's order
            # and so ranks exactly as numba does; float32 is for an explicit backend = "torch".
            import torch

            extra["dtype"] = torch.float64
            log.info("backend auto -> torch on %s (float64)", where)
        return Backend(name="torch", score_topk=functools.partial(module.score_topk, device=where, **extra),
                       accepts_cached=False, device=where)
    try:
        module = importlib.import_module(_MODULES[chosen])
    except ImportError as err:
        if name != "auto":
            raise
        # auto may change speed, never results: the reference gives the same rankings.
        log.warning("numba is not importable (%s); falling back to the numpy reference backend", err)
        chosen, module = "numpy", importlib.import_module(_MODULES["numpy"])
    if said:
        log.info("backend auto -> %s", chosen)
    return Backend(name=chosen, score_topk=module.score_topk, accepts_cached=chosen == "numba", accepts_allowed=True)


def set_threads(threads: int) -> None:
    """Set numba's thread count for the next calls (0: leave numba's default). Never done on import."""
    if threads and threads > 0:
        import numba

        numba.set_num_threads(min(int(threads), numba.config.NUMBA_NUM_THREADS))


def score_topk(postings: Postings, queries: QueryBatch, params: BM25Params, k: int,
               backend: str | Backend = "auto", device: str = "auto", allowed=None, **arrays) -> TopK:
    """Score a batch on the chosen backend (and, for torch, device). ``k`` must be >= 1. ``allowed``
    (``kernels.types.allowed_rows``): per query, the only documents that may be hits; a backend that
    does not take masks (torch) hands a masked batch to numba. ``arrays``: what the numba backend may be
    handed precomputed (``idf``, ``norm``)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    b = backend if isinstance(backend, Backend) else resolve(backend, device, work=queries.n_queries * postings.n_docs)
    if allowed is not None:
        if not b.accepts_allowed:
            log.info("the %s backend takes no masks: this masked batch is scored by numba", b.name)
            b = resolve("numba")
        if b.accepts_cached:
            return b.score_topk(postings, queries, params, k, allowed=allowed, **arrays)
        return b.score_topk(postings, queries, params, k, allowed=allowed)
    if b.accepts_cached:
        return b.score_topk(postings, queries, params, k, **arrays)
    return b.score_topk(postings, queries, params, k)
