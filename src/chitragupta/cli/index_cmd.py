"""``chitragupta index``: build or update the BM25 indexes (documents, and their paragraphs as passages)."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="re-tokenize every document")
    p.add_argument("--unit", choices=["all", "document", "passage"], default="all",
                   help="which index to build (default: both)")
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
                   help="processes that tokenize the document index (default: the cores available); "
                        "the index is the same for any N")


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
    from chitragupta.cli._common import open_workspace, print_notes, progress_bar
    from chitragupta.engine.citations.store import summary_line
    from chitragupta.service.index import build

    report = build(open_workspace(args), unit=args.unit, force=args.force, jobs=args.jobs, progress=progress_bar)
    verbose = bool(getattr(args, "verbose", False))
    for unit, got in report.units.items():
        print_notes(got.notes)
        r = got.build
        if unit == "document":
            print(f"index: up to date ({got.size})" if r is None else
                  f"index: {got.size}; {r.retokenized} tokenized, {r.reused} reused, {r.removed} removed, "
                  f"in {r.seconds:.2f} s")
            if r is not None and r.cuts:
                _print_cuts(r.cuts, r.retokenized, verbose)
            if verbose:
                print(f"index: {_abstract_line(*got.abstracts)}")
            if got.title_only:
                print_notes([f"{got.title_only} parsed source(s) have no parsed text on disk and were ranked on "
                             "their title alone; `chitragupta sync` (or `import` again) writes it back"])
            if got.unparsed:
                print_notes([f"{got.unparsed} source(s) without parsed text (no file field, a file missing, or a "
                             "parse that failed) are indexed on their title alone; `chitragupta sync -v` names "
                             "each and why"])
        else:
            print(f"passages: up to date ({got.size})" if r is None else
                  f"passages: {got.size}; {r.retokenized} documents read, {r.reused} reused, in {r.seconds:.2f} s")
    if report.hybrid is not None:
        stemmer, seconds = report.hybrid
        print(f"index: hybrid's BM25 index (stemmer {stemmer}) "
              + ("up to date" if seconds is None else f"built in {seconds:.2f} s"))
    refs = report.references
    if refs is not None:
        print_notes(refs["notes"][:10] + [f"... and {len(refs['notes']) - 10} more notes"] * (len(refs["notes"]) > 10))
        print(summary_line(refs))
    return 0


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


def _abstract_line(n: int, with_sidecar: int, with_abstract: int) -> str:
    """What the index's abstract field holds, said as what it is: the Abstract section of a docling
    sidecar (a BibTeX ``abstract`` is kept in the ledger, not indexed)."""
    line = (f"{with_abstract} of {n} documents have an Abstract section in their docling sidecar, the field "
            "[retrieval].weight_abstract weighs (BibTeX abstracts are kept in the ledger, not indexed)")
    if not with_sidecar:
        line += "; no document has a sidecar here (the docling parser writes them), so the weight is inert"
    return line
