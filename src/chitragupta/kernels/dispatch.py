"""Backend choice, in one place.

``BACKENDS`` names every backend and ``DEVICES`` every place torch may run; config validation, CLI
choices and error messages are built from their keys so they cannot drift. A backend module is imported
only when resolved, so importing ``kernels`` costs neither numba's nor torch's import time.

``"auto"`` means one thing, said once in ``AUTO`` and applied by one function, ``backend_name``: the
fastest backend that ranks exactly as the reference does, for the job at hand -- a batch ("batch"): torch
on CUDA when ``chitragupta.device`` finds one, else numba (numpy when numba does not import); a few
queries in a process that has not loaded numba ("few", decided by ``chitragupta.engine.search.bm25``): numpy,
which loads no JIT kernel; a sweep's grid ("grid"): numba. ``resolve`` logs the choice at info. It is
speed only: auto runs torch in float64, which sums in the reference's order and ranks exactly as numba
does; an explicit ``"torch"`` on CUDA defaults to float32 (about 1e-6 relative from the reference, so
near-ties may order differently: stated, not silent), and the sweep's torch grid is float32 only, so a
sweep's auto never takes it.
Kernels import nothing above them: only the bottom layer (errors, extras, device).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
from dataclasses import dataclass
from typing import Callable

from chitragupta.device import DEVICES, resolve_device
from chitragupta.extras import require
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch, TopK

__all__ = ["BACKENDS", "DEVICES", "AUTO", "Backend", "backend_name", "resolve", "resolve_torch_device",
           "import_torch_backend", "score_topk", "set_threads"]

log = logging.getLogger(__name__)

# name -> (module, what it is). "auto" is resolved, never run.
BACKENDS: dict[str, str] = {
    "auto": "the fastest exact backend for the job (AUTO): for a batch, torch on CUDA when torch and an NVIDIA "
            "GPU are present, else numba",
    "numba": "chitragupta.kernels.cpu: numba, parallel over queries",
    "numpy": "chitragupta.kernels.reference: plain numpy, one query at a time (the slow truth)",
    "torch": "chitragupta.kernels.torch_backend: torch on the chosen device (CUDA, or the CPU)",
}

# "auto" for each job (see the module docstring); ``backend_name`` applies it.
AUTO: dict[str, str] = {
    "batch": "torch (float64) on CUDA when torch and an NVIDIA GPU are present, else numba (numpy when numba "
             "does not import)",
    "few": "numpy: a small batch before numba is loaded reads only its terms' postings and loads no JIT kernel",
    "grid": "numba: the torch grid is float32 only, which could reorder near-ties in a sweep's figures",
}

_MODULES = {"numba": "chitragupta.kernels.cpu", "numpy": "chitragupta.kernels.reference", "torch": "chitragupta.kernels.torch_backend"}


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


def backend_name(name: str, device: str = "auto", *, job: str = "batch") -> str:
    """The backend ``name`` runs as for ``job`` ("batch", "few" or "grid"): ``name`` itself, unless it is
    "auto", which is what ``AUTO`` says for the job (for "batch" this asks ``chitragupta.device`` whether
    torch sees a GPU on ``device``)."""
    if job not in AUTO:
        raise ValueError(f"unknown job {job!r}; allowed: {', '.join(AUTO)}")
    if name != "auto":
        return name
    if job == "few":
        return "numpy"
    if job == "grid":
        return "numba"
    return "torch" if resolve_device(device, purpose="the torch scoring backend") == "cuda" else "numba"


def resolve(name: str = "auto", device: str = "auto", *, job: str = "batch") -> Backend:
    """Turn a backend name (and, for torch, a device) into the backend that will run for ``job``
    (``backend_name``: what "auto" is).

    Raises ValueError for an unknown name or device, UsageError for device "cuda" without one,
    MissingExtra for torch when it is not installed. numba and numpy ignore the device.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    chosen = backend_name(name, device, job=job)
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
               backend: str | Backend = "auto", device: str = "auto", allowed=None, **cached) -> TopK:
    """Score a batch on the chosen backend (and, for torch, device). ``k`` must be >= 1. ``allowed``
    (``kernels.types.allowed_rows``): per query, the only documents that may be hits; a backend that
    does not take masks (torch) hands a masked batch to numba."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    b = backend if isinstance(backend, Backend) else resolve(backend, device)
    if allowed is not None:
        if not b.accepts_allowed:
            log.info("the %s backend takes no masks: this masked batch is scored by numba", b.name)
            b = resolve("numba")
        if b.accepts_cached:
            return b.score_topk(postings, queries, params, k, allowed=allowed, **cached)
        return b.score_topk(postings, queries, params, k, allowed=allowed)
    if b.accepts_cached:
        return b.score_topk(postings, queries, params, k, **cached)
    return b.score_topk(postings, queries, params, k)
