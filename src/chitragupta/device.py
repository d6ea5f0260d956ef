"""Where torch runs, decided in one place for every layer: ``"auto" | "cpu" | "cuda"``.

The torch scoring backend (``[retrieval].device``), the encoders, the reranker and FAISS search
(``[enrich].device``) all ask ``resolve_device``. ``"auto"`` is CUDA when torch sees a device, else the
CPU; it looks cheaply first -- is torch installed, is an NVIDIA device node or driver entry there -- and
imports torch (about 2 s) only when both hold, so a machine without a GPU never pays for it. ``"cuda"``
without a usable device is an error, never a silent fallback. Capabilities of other packages (a GPU
build of faiss, cuML) are checked where they are used (``chitragupta.enrich.device``).
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["DEVICES", "resolve_device", "nvidia_device_present"]

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
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (visible.strip() == "" or visible.strip().startswith("-1")):
        return False
    try:
        if any(os.scandir("/proc/driver/nvidia/gpus")):
            return True
    except OSError:
        pass
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def resolve_device(requested: str = "auto", *, setting: str = "device", extra: str = "gpu",
                   purpose: str = "") -> str:
    """``"cuda"`` or ``"cpu"``. ``setting`` names the option in messages (``[enrich].device``); ``extra``
    the extra that brings torch when CUDA is asked for and torch is missing (MissingExtra)."""
    if requested not in DEVICES:
        raise UsageError(f"unknown {setting} {requested!r}; allowed: {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu"
    if requested == "cuda":
        torch = require("torch", extra, purpose or "CUDA")
        if not torch.cuda.is_available():
            hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
            why = f" (CUDA_VISIBLE_DEVICES={hidden!r})" if hidden is not None else ""
            raise UsageError(f'{setting} "cuda" was asked for but torch {torch.__version__} sees no CUDA device'
                             f'{why}; use "auto" or "cpu"')
        return "cuda"
    chosen = "cpu"
    if importlib.util.find_spec("torch") is not None and nvidia_device_present():
        import torch

        chosen = "cuda" if torch.cuda.is_available() else "cpu"
    log.info("%s auto -> %s", setting, chosen)
    return chosen
