"""Where enrichment runs, decided in one place: ``[enrich].device = "auto" | "cuda" | "cpu"``.

"auto" picks CUDA when torch sees a device, else the CPU, and logs the choice at info: for encoding,
rerank and exact FAISS search that changes speed only. Capabilities are detected, not package names:
faiss-cpu and faiss-gpu are the same ``faiss`` module with different classes present, and cuML is
used for UMAP/HDBSCAN only when it imports and a device is there (its numerics differ from umap-learn's,
so a fallback from it warns and is recorded by the caller).
"""

from __future__ import annotations

import logging

from engine.errors import UsageError
from enrich._optional import require

__all__ = ["resolve_device", "faiss_gpu_available", "cuml_available"]

log = logging.getLogger(__name__)

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(setting: str = "auto") -> str:
    """``"cuda"`` or ``"cpu"``. ``"cuda"`` without a usable device is an error, never a silent fallback."""
    if setting not in DEVICES:
        raise UsageError(f"unknown device {setting!r}; allowed: {', '.join(DEVICES)}")
    if setting == "cpu":
        return "cpu"
    torch = require("torch", "enrich", "the enrichment layer")
    has_cuda = bool(torch.cuda.is_available())
    if setting == "cuda":
        if not has_cuda:
            raise UsageError("[enrich].device = \"cuda\" but torch sees no CUDA device; use \"auto\" or \"cpu\"")
        return "cuda"
    chosen = "cuda" if has_cuda else "cpu"
    log.info("enrich device auto -> %s", chosen)
    return chosen


def faiss_gpu_available() -> bool:
    """True when the installed faiss has GPU classes and sees at least one GPU."""
    try:
        import faiss
    except ImportError:
        return False
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "get_num_gpus"):
        return False
    try:
        return faiss.get_num_gpus() > 0
    except Exception:  # a GPU build on a machine without a driver
        return False


def cuml_available() -> bool:
    """True when cuML imports (it needs a CUDA device and driver to import at all)."""
    try:
        import cuml  # noqa: F401
        from cuml.manifold import UMAP  # noqa: F401
        from cuml.cluster import HDBSCAN  # noqa: F401
    except Exception:
        return False
    return True
