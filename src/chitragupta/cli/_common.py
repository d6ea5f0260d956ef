"""Helpers the subcommands share: opening the workspace, progress bars, printing notes."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterable, Iterator


def open_workspace(args, *, create: bool = False):
    from chitragupta.engine.workspace import Workspace

    return Workspace.open(args.workspace, args.config, create=create)


@contextmanager
def progress_bar(desc: str, unit: str = "doc") -> Iterator:
    """A ``(done, total)`` callback drawing a tqdm bar on stderr when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int | None) -> None:
        nonlocal bar
        if bar is None:
            if total is not None and total < 200:
                return  # short work needs no bar
            bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, mininterval=0.2)
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def print_notes(notes: Iterable, prefix: str = "[note] ") -> None:
    for n in notes:
        print(f"{prefix}{n}", file=sys.stderr)


def print_problems(problems: list[str], limit: int = 20) -> None:
    for p in problems[:limit]:
        print(f"[warn] {p}", file=sys.stderr)
    if len(problems) > limit:
        print(f"[warn] ... and {len(problems) - limit} more", file=sys.stderr)
