"""``chitragupta import FILE.jsonl``: a BEIR-style corpus as the workspace's sources."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("file", metavar="FILE.jsonl", help='one {"_id", "title", "text", "keywords"?} object per line')


def run(args) -> int:
    from pathlib import Path

    from chitragupta.cli._common import open_workspace, print_problems, progress_bar
    from chitragupta.engine.library.jsonl import open_input
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.errors import WorkspaceError

    path = Path(args.file)
    # What the file is, said before anything is written: a folder, a device, a pipe (import reads its
    # file more than once) is named as such, not "not found".
    open_input(path, "corpus").close()
    try:
        ws = open_workspace(args, create=True)
        with ws.lock("import"), progress_bar("importing") as cb:
            report = import_jsonl(ws, path, progress=cb)
    except OSError as err:  # a full disk, a read-only folder, an I/O error: what was committed is whole
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        raise WorkspaceError(f"{args.workspace}: import stopped: {err.strerror or err}{where}; the sources committed "
                             "before it are kept whole, nothing is half-written; fix that and run the import "
                             "again to finish") from None
    print_problems(report.problems)
    print(f"import: {report.summary()}")
    return 0
