"""``chitragupta import FILE.jsonl``: a BEIR-style corpus as the workspace's sources."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("file", metavar="FILE.jsonl", help='one {"_id", "title", "text", "keywords"?} object per line')


def run(args) -> int:
    from chitragupta.cli._common import print_problems, progress_bar
    from chitragupta.service.library import import_corpus

    with progress_bar("importing") as cb:
        report = import_corpus(args.workspace, args.file, progress=cb, config=args.config)
    print_problems(report.problems)
    print(f"import: {report.summary()}")
    return 0
