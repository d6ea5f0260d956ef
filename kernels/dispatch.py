"""Backend choice, in one place.

``BACKENDS`` names every backend and ``DEVICES`` every place torch may run; config validation, CLI
choices and error messages are built from their keys so they cannot drift. A backend module is imported
only when resolved, so importing ``kernels`` costs neither numba's nor torch's import time.

``resolve("auto")`` picks torch on CUDA when torch is installed and an NVIDIA device is present, else
numba, and logs the choice at info. It is speed only: auto runs torch in float64, which sums in the
reference's order and ranks exactly as numba does; an explicit ``"torch"`` on CUDA defaults to float32
(about 1e-6 relative from the reference, so near-ties may order differently: stated, not silent). It looks cheaply first -- is torch installed, is an NVIDIA device node there -- and imports
torch (about 2 s) only when both hold, so a CLI query on a machine without a GPU never pays for it.
"""

from __future__ import annotations

import functools
import glob
import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from typing import Callable

from kernels.types import BM25Params, Postings, QueryBatch, TopK

__all__ = ["BACKENDS", "DEVICES", "Backend", "resolve", "resolve_torch_device", "nvidia_device_present",
           "import_torch_backend", "score_topk", "set_threads"]

log = logging.getLogger(__name__)

# name -> (module, what it is). "auto" is resolved, never run.
BACKENDS: dict[str, str] = {
    "auto": "torch on CUDA when torch and an NVIDIA GPU are present, else numba",
    "numba": "kernels.cpu: numba, parallel over queries",
    "numpy": "kernels.reference: plain numpy, one query at a time (the slow truth)",
    "torch": "kernels.torch_backend: torch on the chosen device (CUDA, or the CPU)",
}

# Where the torch backend runs; "auto": CUDA when torch sees a device, else the CPU.
DEVICES: dict[str, str] = {
    "auto": "CUDA when torch sees a device, else the CPU",
    "cpu": "torch's CPU device",
    "cuda": "the current CUDA device; an error when there is none",
}

_MODULES = {"numba": "kernels.cpu", "numpy": "kernels.reference", "torch": "kernels.torch_backend"}


@dataclass(frozen=True)
class Backend:
    """A resolved backend: its name, its ``score_topk(postings, queries, params, k, **cached)`` and, for
    torch, the device it runs on (``"cpu"`` or ``"cuda"``; None for the others)."""

    name: str
    score_topk: Callable[..., TopK]
    accepts_cached: bool
    device: str | None = None


def nvidia_device_present() -> bool:
    """A cheap look for an NVIDIA GPU, without importing torch: a device node or a driver entry.

    ``CUDA_VISIBLE_DEVICES`` set to "" (or "-1") hides every device, as it does from CUDA itself.
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (visible.strip() == "" or visible.strip().startswith("-1")):
        return False
    try:
        if any(os.scandir("/proc/driver/nvidia/gpus")):
            return True
    except OSError:
        pass
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _usage_error(message: str) -> Exception:
    from engine.errors import UsageError  # light; imported here so kernels does not depend on engine

    return UsageError(message)


def import_torch_backend():
    """kernels.torch_backend, or MissingExtra naming the ``gpu`` extra when torch is not installed."""
    try:
        return importlib.import_module(_MODULES["torch"])
    except ImportError as err:
        if importlib.util.find_spec("torch") is not None:
            raise  # torch is there but broken: its own error says more
        from enrich._optional import require

        require("torch", "gpu", "the torch scoring backend")  # raises MissingExtra, chaining the cause
        raise


def resolve_torch_device(device: str = "auto") -> str:
    """``"cuda"`` or ``"cpu"`` for the torch backend (imports torch). ``"cuda"`` without a CUDA device is
    a UsageError, never a silent fallback to the CPU."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if device == "cpu":
        return "cpu"
    import_torch_backend()
    import torch

    has_cuda = bool(torch.cuda.is_available())
    if device == "cuda" and not has_cuda:
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        why = f" (CUDA_VISIBLE_DEVICES={hidden!r})" if hidden is not None else ""
        raise _usage_error(f'device "cuda" was asked for but torch {torch.__version__} sees no CUDA device{why}; '
                           'use device "auto" or "cpu"')
    return "cuda" if has_cuda else "cpu"


def _auto_wants_cuda(device: str) -> bool:
    """Whether backend "auto" goes to torch on CUDA. Imports torch only when torch is installed and an
    NVIDIA device is there (or when device "cuda" is asked for explicitly)."""
    if device == "cpu":
        return False
    if device == "cuda":
        return True  # resolve_torch_device says clearly when there is none
    if importlib.util.find_spec("torch") is None or not nvidia_device_present():
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve(name: str = "auto", device: str = "auto") -> Backend:
    """Turn a backend name (and, for torch, a device) into the backend that will run.

    Raises ValueError for an unknown name or device, engine.errors.UsageError for device "cuda" without
    one, engine.errors.MissingExtra for torch when it is not installed. numba and numpy ignore the device.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)}")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if name == "torch" or (name == "auto" and _auto_wants_cuda(device)):
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
               backend: str | Backend = "auto", device: str = "auto", **cached) -> TopK:
    """Score a batch on the chosen backend (and, for torch, device). ``k`` must be >= 1."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    b = backend if isinstance(backend, Backend) else resolve(backend, device)
    if b.accepts_cached:
        return b.score_topk(postings, queries, params, k, **cached)
    return b.score_topk(postings, queries, params, k)
