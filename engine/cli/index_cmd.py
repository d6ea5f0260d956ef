"""``chitragupta index``: build or update the BM25 document index."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="re-tokenize every document")


def run(args) -> int:
    from engine.cli._common import open_workspace, print_notes, progress_bar
    from engine.index.manage import refresh

    ws = open_workspace(args)
    with progress_bar("tokenizing") as cb:
        opened = refresh(ws, force=args.force, progress=cb)
    print_notes(opened.notes)
    r = opened.report
    if r.rebuilt:
        print(f"index: {r.n_docs} documents, {r.n_terms} terms, {r.nnz} postings; "
              f"{r.retokenized} tokenized, {r.reused} reused, {r.removed} removed, in {r.seconds:.2f} s")
    else:
        print(f"index: up to date ({r.n_docs} documents, {r.n_terms} terms, {r.nnz} postings)")
    idx = opened.index
    from engine.index.source import FLAG_NOT_PARSED, FLAG_TEXT_MISSING

    missing, unparsed = idx.count_flag(FLAG_TEXT_MISSING), idx.count_flag(FLAG_NOT_PARSED)
    if missing:
        print_notes([f"{missing} parsed source(s) have no parsed text on disk and were ranked on their title "
                     "alone; `chitragupta sync` re-parses them."])
    if unparsed:
        print_notes([f"{unparsed} source(s) without parsed text (no file, or parsing failed) are indexed on their "
                     "title alone; `chitragupta sync` reports why"])
    return 0
