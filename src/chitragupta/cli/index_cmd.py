"""``chitragupta index``: build or update the BM25 indexes (documents, and passages from sidecars)."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="re-tokenize every document")
    p.add_argument("--unit", choices=["all", "document", "passage"], default="all",
                   help="which index to build (default: both)")


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, print_notes, progress_bar
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.index.source import FLAG_HAS_ABSTRACT, FLAG_NOT_PARSED, FLAG_TEXT_MISSING

    ws = open_workspace(args)
    units = ["document", "passage"] if args.unit == "all" else [args.unit]
    for unit in units:
        with progress_bar(f"{unit} index") as cb:
            opened = refresh(ws, unit=unit, force=args.force, progress=cb)
        print_notes(opened.notes)
        r, idx = opened.report, opened.index
        if unit == "document":
            size = f"{idx.n_docs} documents, {len(idx.vocab)} terms, {idx.postings.nnz} postings"
            if r is None:
                print(f"index: up to date ({size})")
            else:
                print(f"index: {size}; {r.retokenized} tokenized, {r.reused} reused, {r.removed} removed, "
                      f"in {r.seconds:.2f} s")
            with_abstract = idx.count_flag(FLAG_HAS_ABSTRACT)
            print(f"index: {with_abstract} of {idx.n_docs} documents have an abstract field"
                  + ("" if with_abstract else " ([retrieval].weight_abstract is inert here: no docling sidecars)"))
            missing, unparsed = idx.count_flag(FLAG_TEXT_MISSING), idx.count_flag(FLAG_NOT_PARSED)
            if missing:
                print_notes([f"{missing} parsed source(s) have no parsed text on disk and were ranked on their "
                             "title alone; `chitragupta sync` re-parses them."])
            if unparsed:
                print_notes([f"{unparsed} source(s) without parsed text (no file, or parsing failed) are indexed "
                             "on their title alone; `chitragupta sync` reports why"])
        else:
            size = (f"{idx.n_passages} passages from {len(set(idx.p_doc.tolist()))} documents, "
                    f"{len(idx.vocab)} terms")
            print(f"passages: up to date ({size})" if r is None else
                  f"passages: {size}; {r.retokenized} documents read, {r.reused} reused, in {r.seconds:.2f} s")
    return 0
