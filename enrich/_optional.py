"""One helper for the enrich extra's heavy imports: a missing package names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from engine.errors import MissingExtra

__all__ = ["require", "INSTALL_HINT"]

INSTALL_HINT = {
    "enrich": "pip install torch==2.13.0 && pip install 'chitragupta[enrich]'  (CPU; on a GPU workstation use "
              "environment.yml)",
    "gpu": "pip install 'chitragupta[gpu]'  (torch; on a GPU workstation use environment.yml)",
    "docling": "pip install 'chitragupta[docling]'",
}


def require(module: str, extra: str = "enrich", purpose: str = "") -> ModuleType:
    """Import ``module`` or raise MissingExtra naming the extra to install (the ImportError chained)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        what = f" for {purpose}" if purpose else ""
        raise MissingExtra(f"{module} is not installed{what}; install the {extra!r} extra: "
                           f"{INSTALL_HINT.get(extra, f'pip install chitragupta[{extra}]')} ({err})") from err
