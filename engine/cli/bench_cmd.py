"""``chitragupta bench ...``: hands off to the ``bench`` package (``python -m bench``) when it is installed.

The engine never imports bench for its own work; this subcommand is a doorway for the measurement
harness, resolved by name only when it is invoked.
"""

from __future__ import annotations

import argparse


def add_arguments(p) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER, help="quality | speed | smoke | sweep | units | experiments, and its options")


def run(args) -> int:
    import importlib

    from engine.errors import MissingExtra

    try:
        entry = importlib.import_module("bench.__main__")
    except ImportError as err:
        raise MissingExtra("the bench harness is not installed; from a checkout: pip install -e '.[bench]'") from err
    return entry.main(list(args.rest))
