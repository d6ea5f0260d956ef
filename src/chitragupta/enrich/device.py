"""Where enrichment runs: ``[enrich].device = "auto" | "cuda" | "cpu"``, resolved by ``chitragupta.device``
(the one resolver), and what the installed packages can do there.

"auto" picks CUDA when torch sees a device, else the CPU: for encoding, rerank and exact FAISS search that
changes speed only. Where the GPU builds are installed but no device is visible (a workstation's install
on a machine without a GPU) it runs on the CPU with one warning naming them. "cuda" without a device is
one error line naming torch's build, why there is no device, and which GPU builds of faiss and cuML are
installed or missing.

Capabilities are detected, not package names: faiss-cpu and faiss-gpu-cu12 are the same ``faiss`` module
with different classes present, and cuML is used for UMAP/HDBSCAN only when it imports and a device is
there (its numerics differ from umap-learn's, so a fallback from it warns and is recorded by the caller).
``faiss_gpu_status`` and ``cuml_status`` say in words why one cannot be used (None: it can); the
``*_builds`` functions read installed distributions' metadata only (no import, milliseconds).
"""

from __future__ import annotations

import logging
from importlib import metadata

from chitragupta.device import resolve_device as _resolve
from chitragupta.errors import UsageError

__all__ = ["resolve_device", "faiss_gpu_available", "cuml_available", "faiss_gpu_status", "cuml_status",
           "faiss_builds", "cuml_builds", "gpu_builds"]

log = logging.getLogger(__name__)

# Distributions that install the ``faiss`` module (they overwrite one another's files), and cuML's.
FAISS_DISTS = ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu11", "faiss-gpu-cu12", "faiss-gpu-cu13",
               "faiss-gpu-cuvs", "faiss-gpu-cu12-cuvs", "faiss-gpu-cu13-cuvs")
CUML_DISTS = ("cuml-cu13", "cuml-cu12", "cuml-cu11", "cuml")
GPU_EXTRA_HINT = "the gpu extra brings torch's CUDA build, faiss-gpu-cu12 and cuml-cu13 (README: GPU workstations)"


def _installed(names) -> list[str]:
    out = []
    for name in names:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
        except Exception:  # a broken dist-info: still say it is there
            out.append(name)
    return out


def faiss_builds() -> list[str]:
    """Installed faiss distributions, ``["faiss-gpu-cu12 1.14.1.post1"]``; two at once share one module."""
    return _installed(FAISS_DISTS)


def cuml_builds() -> list[str]:
    """Installed cuML distributions, ``["cuml-cu13 26.10.0"]``."""
    return _installed(CUML_DISTS)


def gpu_builds() -> list[str]:
    """The GPU builds of faiss and cuML installed, in words (torch's build is ``chitragupta.device``'s)."""
    return [f"{b} (FAISS search)" for b in faiss_builds() if not b.startswith("faiss-cpu")] + \
        [f"{b} (topics: UMAP/HDBSCAN)" for b in cuml_builds()]


def _both_faiss(builds: list[str]) -> str | None:
    if len(builds) > 1:
        names = [b.split()[0] for b in builds]
        gpu = [n for n in names if n != "faiss-cpu"] or names[-1:]
        return (f"{' and '.join(builds)} are all installed and overwrite one faiss module; keep one: pip uninstall -y "
                f"{' '.join(names)} && pip install {gpu[0]}")
    return None


def _gpu_summary() -> str:
    """What the enrichment layer would use on a GPU, installed or missing: for the "cuda" error."""
    faiss, cuml = faiss_builds(), cuml_builds()
    gpu_faiss = [b for b in faiss if not b.startswith("faiss-cpu")]
    parts = [f"FAISS: {', '.join(gpu_faiss)}" if gpu_faiss else
             "FAISS: no GPU build installed (search would run on the CPU)"]
    clash = _both_faiss(faiss)
    if clash:
        parts[0] += f" ({clash})"
    parts.append(f"topics: {', '.join(cuml)}" if cuml else
                 "topics: cuML not installed (UMAP/HDBSCAN would run on the CPU)")
    return "; ".join(parts)


def resolve_device(requested: str = "auto") -> str:
    """``[enrich].device`` through the one resolver (``chitragupta.device``); torch is the enrich extra's.

    "cuda" without a device: one UsageError naming torch's build, why there is no device, and the faiss
    and cuML builds installed or missing. "auto" without a device while GPU builds are installed: the CPU,
    with one warning naming them."""
    try:
        return _resolve(requested, setting="[enrich].device", extra="enrich", purpose="the enrichment layer",
                        gpu_builds=gpu_builds)
    except UsageError as err:
        msg = str(err)
        tail = '; use "auto" or "cpu"'
        if requested != "cuda" or not msg.endswith(tail):
            raise
        raise UsageError(f"{msg[:-len(tail)]}; installed for the GPU: {_gpu_summary()}{tail}") from None


def faiss_gpu_status() -> str | None:
    """None when the installed faiss has GPU classes and sees a GPU; else why not, in words."""
    builds = faiss_builds()
    clash = _both_faiss(builds)
    try:
        import faiss
    except Exception as err:  # a GPU build whose CUDA libraries do not load raises OSError-like errors too
        if not builds:
            return "faiss is not installed"
        first = str(err).splitlines()[0][:200] if str(err) else ""
        return f"{', '.join(builds)} does not import ({type(err).__name__}: {first})"
    what = ", ".join(builds) or f"faiss {getattr(faiss, '__version__', '?')}"
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "get_num_gpus"):
        return f"{what} is a CPU-only build" + (f" ({clash})" if clash else f" ({GPU_EXTRA_HINT})")
    try:
        n = int(faiss.get_num_gpus())
    except Exception as err:  # a GPU build on a machine without a driver
        return f"{what} is a GPU build but cannot count GPUs ({type(err).__name__}: {err})"
    if n < 1:
        return f"{what} is a GPU build but sees no GPU"
    return None


def faiss_gpu_available() -> bool:
    """True when the installed faiss has GPU classes and sees at least one GPU."""
    return faiss_gpu_status() is None


def cuml_status() -> str | None:
    """None when cuML's UMAP and HDBSCAN import; else why not, in words, naming the install. cuml-cu13 26.10
    imports on a machine without a GPU too, so this is asked only where a device was resolved."""
    builds = cuml_builds()
    try:
        import cuml  # noqa: F401
        from cuml.cluster import HDBSCAN  # noqa: F401
        from cuml.manifold import UMAP  # noqa: F401
    except Exception as err:
        if not builds and isinstance(err, ImportError) and getattr(err, "name", None) == "cuml":
            return f"cuML is not installed ({GPU_EXTRA_HINT})"
        first = str(err).splitlines()[0][:200] if str(err) else ""
        what = ", ".join(builds) or "cuml"
        return f"{what} does not import its UMAP/HDBSCAN ({type(err).__name__}: {first})"
    return None


def cuml_available() -> bool:
    """True when cuML's UMAP and HDBSCAN import (``cuml_status`` says why not)."""
    return cuml_status() is None
