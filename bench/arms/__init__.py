"""Arms: a query set with judgments over one collection, and the workspace it is searched in.

Each arm family is a small module here exposing ``ARMS: dict[name, factory]``, where
``factory(data_dir) -> Arm``; adding an arm is adding a file (or an entry). ``get(name)`` finds it.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["Arm", "get", "names"]


@dataclass
class Arm:
    """queries: qid -> text; qrels: qid -> {citekey: grade}; ``workspace()`` builds (once) and returns
    the folder the arm is searched in."""

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    build: Callable[[], Path]
    note: str = ""
    _root: Path | None = field(default=None, repr=False)

    def workspace(self) -> Path:
        if self._root is None:
            self._root = self.build()
        return self._root


def _registry() -> dict[str, Callable]:
    reg: dict[str, Callable] = {}
    for mod in pkgutil.iter_modules(__path__):
        m = importlib.import_module(f"{__name__}.{mod.name}")
        reg.update(getattr(m, "ARMS", {}))
    return reg


def names() -> list[str]:
    return sorted(_registry())


def get(name: str, data: Path | None = None) -> Arm:
    from bench.data import data_dir

    reg = _registry()
    if name not in reg:
        raise SystemExit(f"unknown arm {name!r}; known: {', '.join(sorted(reg))}")
    return reg[name](data_dir(data))
