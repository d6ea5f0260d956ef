"""Where enrichment runs: ``[enrich].device = "auto" | "cuda" | "cpu"``, resolved by ``chitragupta.device``
(the one resolver), and what the installed packages can do there.

"auto" picks CUDA when torch sees a device, else the CPU, and logs the choice at info: for encoding,
rerank and exact FAISS search that changes speed only. Capabilities are detected, not package names:
faiss-cpu and faiss-gpu are the same ``faiss`` module with different classes present, and cuML is
used for UMAP/HDBSCAN only when it imports and a device is there (its numerics differ from umap-learn's,
so a fallback from it warns and is recorded by the caller).
"""

from __future__ import annotations

import logging

from chitragupta.device import resolve_device as _resolve

__all__ = ["resolve_device", "faiss_gpu_available", "cuml_available"]

log = logging.getLogger(__name__)


def resolve_device(requested: str = "auto") -> str:
    """``[enrich].device`` through the one resolver (``chitragupta.device``); torch is the enrich extra's."""
    return _resolve(requested, setting="[enrich].device", extra="enrich", purpose="the enrichment layer")


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
