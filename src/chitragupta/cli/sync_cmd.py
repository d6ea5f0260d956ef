"""``chitragupta sync``: the bibliography into the ledger and content/parsed/."""

from __future__ import annotations

import sys

_SHOWN = 20  # failing entries named one by one; the rest are counted


def add_arguments(p) -> None:
    pass


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, print_problems, progress_bar
    from chitragupta.engine.corpus.sync import sync

    ws = open_workspace(args)
    with ws.lock("sync"), progress_bar("parsing") as cb:
        report = sync(ws, progress=cb)
    print_problems(report.problems)
    for key, reason in report.failed[:_SHOWN]:
        print(f"[warn] {key}: failed: {' '.join(reason.split())}", file=sys.stderr)
    if len(report.failed) > _SHOWN:
        print(f"[warn] ... and {len(report.failed) - _SHOWN} more failed entries (each row's reason is in "
              "content/ledger.sqlite)", file=sys.stderr)
    print(f"sync: {report.summary()}")
    return 0
