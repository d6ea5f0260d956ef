"""Optional dependencies, one path: a missing package becomes a ``MissingExtra`` that names the extra to
install and how.

Every optional import in the package goes through ``require`` (a module) or ``missing`` (a message for
an import that failed deeper, e.g. one of docling's readers), so the hint for an extra is written once.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from chitragupta.errors import MissingExtra

__all__ = ["require", "missing", "INSTALL_HINT"]

INSTALL_HINT = {
    "enrich": "pip install torch==2.13.0 && pip install 'chitragupta[enrich]'  (CPU; on a GPU workstation use "
              "environment.yml)",
    "gpu": "pip install 'chitragupta[gpu]'  (torch; on a GPU workstation use environment.yml)",
    "docling": "pip install 'chitragupta[docling]'",
    "docling-pdf": "pip install 'chitragupta[docling-pdf]'  (brings torch and docling's model runtime)",
    "eval": "pip install 'chitragupta[eval]'",
    "serve": "pip install 'chitragupta[serve]'  (the MCP Python SDK)",
}


def _hint(extra: str) -> str:
    return INSTALL_HINT.get(extra, f"pip install 'chitragupta[{extra}]'")


def missing(extra: str | None, what: str, err: BaseException | None = None) -> MissingExtra:
    """The one MissingExtra: ``what`` (e.g. "the docling backend needs docling"), the extra and its hint;
    ``extra`` None for one of chitragupta's own dependencies (a broken install)."""
    cause = f" ({err})" if err is not None else ""
    if extra is None:
        return MissingExtra(f"{what}; it is one of chitragupta's own dependencies: reinstall chitragupta{cause}")
    return MissingExtra(f"{what}; install the {extra!r} extra: {_hint(extra)}{cause}")


def require(module: str, extra: str | None = "enrich", purpose: str = "") -> ModuleType:
    """Import ``module`` or raise MissingExtra naming the extra to install (the ImportError chained)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        what = f" for {purpose}" if purpose else ""
        raise missing(extra, f"{module} is not installed{what}", err) from err
