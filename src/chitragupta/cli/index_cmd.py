"""``chitragupta index``: build or update the BM25 indexes (documents, and passages from sidecars)."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="re-tokenize every document")
    p.add_argument("--unit", choices=["all", "document", "passage"], default="all",
                   help="which index to build (default: both)")
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
                   help="processes that tokenize the document index (default: the cores available); "
                        "the index is the same for any N")
    p.add_argument("--shards", type=shards_arg, default=None, metavar="N",
                   help="also write the document index as N shards of consecutive documents with the whole "
                        "index's statistics, for `search --ray` (one actor per shard); kept, and cut again by "
                        "later runs, until --shards 0 removes them")


def shards_arg(text: str) -> int:
    """``--shards``: a whole number >= 0 (0: no shards)."""
    import argparse

    from chitragupta.engine.index.shards import MAX_SHARDS

    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"--shards wants a whole number of shards within 0..{MAX_SHARDS}, not {text!r}")
    return n


def jobs_arg(text: str) -> int:
    """``--jobs``: a whole number >= 1 (``index`` and ``sync``)."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs wants a whole number of processes >= 1, not {text!r}")
    return n


def run(args) -> int:
    from chitragupta.cli._common import open_workspace

    ws = open_workspace(args)
    # One hold of the lock for the whole command: between its steps (the indexes, the shards, the references)
    # another writer could otherwise take the workspace, and this one would end "busy" half done.
    with ws.lock("index"):
        return _run(args, ws)


def _run(args, ws) -> int:
    from chitragupta.cli._common import print_notes, progress_bar
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.index.source import FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR, FLAG_NOT_PARSED, FLAG_TEXT_MISSING

    from chitragupta.engine.index.segments import available_cores

    jobs = args.jobs or available_cores()
    units = ["document", "passage"] if args.unit == "all" else [args.unit]
    for unit in units:
        with progress_bar(f"{unit} index") as cb:
            opened = refresh(ws, unit=unit, force=args.force, progress=cb, jobs=jobs)
        print_notes(opened.notes)
        r, idx = opened.report, opened.index
        if unit == "document":
            size = f"{idx.n_docs} documents, {len(idx.vocab)} terms, {idx.postings.nnz} postings"
            if r is None:
                print(f"index: up to date ({size})")
            else:
                print(f"index: {size}; {r.retokenized} tokenized, {r.reused} reused, {r.removed} removed, "
                      f"in {r.seconds:.2f} s")
            if r is not None and r.cuts:
                _print_cuts(r.cuts, r.retokenized, bool(getattr(args, "verbose", False)))
            print(f"index: {_abstract_line(idx, FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR | FLAG_TEXT_MISSING | FLAG_NOT_PARSED)}")
            from chitragupta.engine.index.shards import refresh as refresh_shards

            got, done = refresh_shards(ws, idx, getattr(args, "shards", None))
            if done == "removed" or got is not None:
                print("index: shards removed" if done == "removed" else
                      f"index: {got.count} shards of about {idx.n_docs // got.count} documents "
                      + ("cut" if done == "cut" else "up to date"))
            missing, unparsed = idx.count_flag(FLAG_TEXT_MISSING), idx.count_flag(FLAG_NOT_PARSED)
            if missing:
                print_notes([f"{missing} parsed source(s) have no parsed text on disk and were ranked on their "
                             "title alone; `chitragupta sync` (or `import` again) writes it back"])
            if unparsed:
                print_notes([f"{unparsed} source(s) without parsed text (no file field, a file missing, or a "
                             "parse that failed) are indexed on their title alone; `chitragupta sync -v` names "
                             "each and why"])
        else:
            size = (f"{idx.n_passages} passages from {len(set(idx.p_doc.tolist()))} documents, "
                    f"{len(idx.vocab)} terms")
            print(f"passages: up to date ({size})" if r is None else
                  f"passages: {size}; {r.retokenized} documents read, {r.reused} reused, in {r.seconds:.2f} s")
    own = None
    if args.unit in ("all", "document") and _may_fuse_own_index(ws):
        from chitragupta.enrich.hybrid import own_index_to_build

        own = own_index_to_build(ws)
    if own is not None:  # [hybrid].bm25_stemmer: hybrid search fuses a document index of its own
        with progress_bar("hybrid's BM25 index") as cb:
            r = refresh(own, unit="document", force=args.force, progress=cb, jobs=jobs).report
        print(f"index: hybrid's BM25 index (stemmer {own.config.retrieval.stemmer}) "
              + ("up to date" if r is None else f"built in {r.seconds:.2f} s"))
    from chitragupta.engine.citations.store import build_references, summary_line

    with progress_bar("references") as cb:
        refs = build_references(ws, progress=cb, jobs=jobs)
    print_notes(refs["notes"][:10] + [f"... and {len(refs['notes']) - 10} more notes"] * (len(refs["notes"]) > 10))
    print(summary_line(refs))
    return 0


def _may_fuse_own_index(ws) -> bool:
    """False when ``enrich.hybrid.own_index_to_build`` is surely None, told without importing hybrid search:
    ``[hybrid].bm25_stemmer`` is "same" or the plain index's stemmer, or no embedding store exists (the
    folder every model's store sits in is missing)."""
    if ws.config.hybrid.bm25_stemmer in ("same", ws.config.retrieval.stemmer):
        return False
    from chitragupta.enrich.store import store_folder

    return store_folder(ws.content, "any model").parent.is_dir()


def _print_cuts(cuts: list[tuple[str, int, int]], tokenized: int, verbose: bool) -> None:
    """How much of each document the reference cut took, and what it kept after the list (appendices):
    one summary line, and one line a source with ``-v``."""
    cut = sum(c[1] for c in cuts)
    kept = [c for c in cuts if c[2]]
    print(f"index: reference lists cut from {len(cuts)} of {tokenized} document(s) read ({cut} words); "
          f"text after the list kept in {len(kept)} (appendices, {sum(c[2] for c in kept)} words)"
          + ("" if verbose else "; -v names each"))
    if verbose:
        for key, ref_words, after_words in cuts:
            print(f"  {key}: {ref_words} words of reference list cut, {after_words} words after it kept")


def _abstract_line(idx, has_abstract: int, no_sidecar: int) -> str:
    """What the index's abstract field holds, said as what it is: the Abstract section of a docling
    sidecar (a BibTeX ``abstract`` is kept in the ledger, not indexed)."""
    n = idx.n_docs
    with_sidecar = n - idx.count_flag(no_sidecar)
    with_abstract = idx.count_flag(has_abstract)
    line = (f"{with_abstract} of {n} documents have an Abstract section in their docling sidecar, the field "
            "[retrieval].weight_abstract weighs (BibTeX abstracts are kept in the ledger, not indexed)")
    if not with_sidecar:
        line += "; no document has a sidecar here (the docling parser writes them), so the weight is inert"
    return line

