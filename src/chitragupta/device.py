"""Where torch runs, decided in one place for every layer: ``"auto" | "cpu" | "cuda"``.

The torch scoring backend (``[retrieval].device``), the encoders, the reranker and FAISS search
(``[enrich].device``) all ask ``resolve_device``. ``"auto"`` is CUDA when torch sees a device, else the
CPU; it looks cheaply first -- is torch installed, is an NVIDIA device node or driver entry there -- and
imports torch (about 2 s) only when both hold, so a machine without a GPU never pays for it. ``"cuda"``
without a usable device is an error, never a silent fallback. Capabilities of other packages (a GPU
build of faiss, cuML) are checked where they are used (``chitragupta.enrich.device``).

Messages name what is missing. ``"cuda"`` without a device says which torch is installed (a CPU-only
build, or a CUDA build that sees no device, and why: no NVIDIA device node or driver entry, or
``CUDA_VISIBLE_DEVICES`` hiding them). ``"auto"`` falling back to the CPU is logged at info, except where
GPU builds are installed and unused (a GPU workstation's install on a machine without a GPU): then one
warning per process says so.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import re
from typing import Callable

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["DEVICES", "resolve_device", "nvidia_device_present", "torch_build", "why_no_device"]

log = logging.getLogger(__name__)

DEVICES: dict[str, str] = {
    "auto": "CUDA when torch sees a device, else the CPU",
    "cpu": "torch's CPU device",
    "cuda": "the current CUDA device; an error when there is none",
}


def nvidia_device_present() -> bool:
    """A cheap look for an NVIDIA GPU, without importing torch: a device node or a driver entry.

    ``CUDA_VISIBLE_DEVICES`` set to "" (or "-1") hides every device, as it does from CUDA itself.
    """
    if _hidden_by_env():
        return False
    try:
        if any(os.scandir("/proc/driver/nvidia/gpus")):
            return True
    except OSError:
        pass
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _hidden_by_env() -> bool:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and (visible.strip() == "" or visible.strip().startswith("-1"))


_VERSION_LINE = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)
_CUDA_LINE = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*(?:['"]([^'"]+)['"]|None)""", re.M)


def torch_build() -> tuple[str, str | None] | None:
    """``(torch's version, the CUDA version it was built for or None)``, read from ``torch/version.py``
    without importing torch; None when torch is not installed. ``("2.13.0+cpu", None)`` is a CPU-only
    build; ``("2.13.0", "13.0")`` PyPI's default CUDA build."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as f:
                text = f.read(65536)
        except OSError:
            continue
        v, c = _VERSION_LINE.search(text), _CUDA_LINE.search(text)
        if v:
            return v.group(1), (c.group(1) if c and c.group(1) else None)
    return "unknown version", None


def why_no_device() -> str:
    """Why CUDA has no device here, in words, without importing torch."""
    if _hidden_by_env():
        return f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r} hides every device"
    if not nvidia_device_present():
        return "no NVIDIA device or driver is visible (no /dev/nvidia<N>, no /proc/driver/nvidia/gpus)"
    return ("an NVIDIA device node is there but CUDA does not initialise (a driver older than the CUDA "
            "version torch was built for? `nvidia-smi` shows the driver's)")


def _describe_torch(build: tuple[str, str | None]) -> str:
    version, cuda = build
    return f"torch {version} (CUDA {cuda} build)" if cuda else f"torch {version} (a CPU-only build)"


_NOTED: set[str] = set()


def resolve_device(requested: str = "auto", *, setting: str = "device", extra: str = "gpu",
                   purpose: str = "", gpu_builds: Callable[[], list[str]] | None = None) -> str:
    """``"cuda"`` or ``"cpu"``. ``setting`` names the option in messages (``[enrich].device``); ``extra``
    the extra that brings torch when CUDA is asked for and torch is missing (MissingExtra);
    ``gpu_builds``: the caller's other GPU packages, in words (``["faiss-gpu-cu12 1.14.1"]``), for the
    note when ``"auto"`` leaves them unused."""
    if requested not in DEVICES:
        raise UsageError(f"unknown {setting} {requested!r}; allowed: {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu"
    if requested == "cuda":
        torch = require("torch", extra, purpose or "CUDA")
        if not torch.cuda.is_available():
            cuda = getattr(torch.version, "cuda", None)
            if cuda:
                why = f"torch {torch.__version__} (CUDA {cuda} build) sees none: {why_no_device()}"
            else:
                from chitragupta.extras import INSTALL_HINT

                why = (f"torch {torch.__version__} is a CPU-only build (a CUDA build comes with the gpu extra: "
                       f"{INSTALL_HINT['gpu'].split('  ')[0]})")
            raise UsageError(f'{setting} "cuda" was asked for but there is no CUDA device: {why}; '
                             f'use "auto" or "cpu"')
        return "cuda"
    chosen = "cpu"
    build = torch_build()
    if build is not None and nvidia_device_present():
        import torch

        chosen = "cuda" if torch.cuda.is_available() else "cpu"
    if chosen == "cpu":
        unused = ([_describe_torch(build)] if build is not None and build[1] else []) + \
            (list(gpu_builds()) if gpu_builds is not None else [])
        if unused and not _NOTED:  # once per process: BM25's and the embeddings' resolvers alike
            _NOTED.add(setting)
            log.warning("%s auto -> cpu: %s; GPU builds installed and unused: %s", setting, why_no_device(),
                        ", ".join(unused))
            return chosen
    log.info("%s auto -> %s", setting, chosen)
    return chosen
