"""``chitragupta import FILE.jsonl``: a BEIR-style corpus as the workspace's sources."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("file", metavar="FILE.jsonl", help='one {"_id", "title", "text", "keywords"?} object per line')


def run(args) -> int:
    from pathlib import Path

    from chitragupta.cli._common import open_workspace, print_problems, progress_bar
    from chitragupta.engine.corpus.sync import import_jsonl

    ws = open_workspace(args, create=True)
    with ws.lock("import"), progress_bar("importing") as cb:
        report = import_jsonl(ws, Path(args.file), progress=cb)
    print_problems(report.problems)
    print(f"import: {report.summary()}")
    return 0
