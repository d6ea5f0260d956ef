"""``chitragupta sync``: the bibliography into the ledger and content/parsed/.

Exit status: 0 when every entry that names a document has its text; ``EXIT_INCOMPLETE`` (3) when the
sync finished -- the ledger matches the bibliography -- but some entries name a document that could not
be read: its file is missing (a moved PDF), or it is not a document the backend reads, or its parse
failed (the text of an earlier parse is then kept). Each is named on stderr (20, then a count; all with
``-v``); entries with no ``file`` field are not failures, named with ``-v``. 1 is an error: nothing, or
only what was committed before it, was done.
"""

from __future__ import annotations

import sys

_SHOWN = 20  # failing entries named one by one (without -v); the rest are counted
EXIT_INCOMPLETE = 3


def add_arguments(p) -> None:
    p.epilog = ("exit status: 0 all entries that name a document have its text; 3 finished, but some entries' "
                "documents are missing or could not be parsed (named on stderr); 1 an error. -v also names "
                "the entries without a file field.")
    from chitragupta.cli.index_cmd import jobs_arg

    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
                   help="processes that parse documents (default: the cores available); the ledger is the same "
                        "for any N")


def _name(items: list[tuple[str, str]], what: str, more: str, limit: int | None) -> None:
    shown = items if limit is None else items[:limit]
    for key, reason in shown:
        print(f"[warn] {key}: {what}{' '.join(reason.split())}", file=sys.stderr)
    if len(items) > len(shown):
        print(f"[warn] ... and {len(items) - len(shown)} more {more} (`chitragupta sync -v` names each; each row's "
              "reason is in content/ledger.sqlite)", file=sys.stderr)


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, print_problems, progress_bar
    from chitragupta.service.library import sync

    ws = open_workspace(args)
    with progress_bar("parsing") as cb:
        report = sync(ws, progress=cb, jobs=getattr(args, "jobs", None))
    verbose = bool(getattr(args, "verbose", False))
    limit = None if verbose else _SHOWN
    print_problems(report.problems)
    _name(report.missing, "", "whose file is missing", limit)  # the reason reads "file not found: PATH"
    _name(report.failed, "failed: ", "failed entries", limit)
    if verbose:
        for key in report.no_file_field:
            print(f"[note] {key}: no file field (indexed on its title alone)", file=sys.stderr)
    print(f"sync: {report.summary()}")
    if report.no_file_field and not verbose:
        print(f"[note] {len(report.no_file_field)} entr{'y has' if len(report.no_file_field) == 1 else 'ies have'} "
              "no file field; `chitragupta sync -v` names them", file=sys.stderr)
    if report.incomplete:
        n = len(report.missing) + len(report.failed)
        print(f"[note] exit status {EXIT_INCOMPLETE}: the ledger matches the bibliography, but {n} entr"
              f"{'y' if n == 1 else 'ies'} named a document that could not be read (above)", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0
