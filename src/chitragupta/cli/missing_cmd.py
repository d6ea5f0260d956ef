"""``chitragupta missing``: works that at least ``--min`` sources of the library cite and the library lacks,
most-cited first, each with its citing citekeys; ``--bib FILE`` also writes them as BibTeX entries (title,
authors, year, venue, DOI where the citing entries print them). The filter flags of ``search`` choose which
citing sources count. ``--json``: one ``{"title", "year", "authors", "citing", "count"}`` per work."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli.search_cmd import add_filter_arguments

    p.add_argument("--min", type=int, default=2, dest="min_count", metavar="N",
                   help="cited by at least N sources (default 2)")
    p.add_argument("-k", type=int, default=50, help="at most this many works (default 50)")
    p.add_argument("--bib", metavar="FILE", help="also write the works as BibTeX entries to FILE (- for stdout)")
    p.add_argument("--json", action="store_true", help="print one JSON object per work (JSON lines)")
    add_filter_arguments(p)


def _table(rows: list[dict]) -> str:
    from chitragupta.cli.refs_cmd import short

    if not rows:
        return "no missing work"
    lines = []
    for r in rows:
        who = ", ".join(r["authors"][:3]) + (" et al." if len(r["authors"]) > 3 else "")
        year = r["year"] if r["year"] is not None else "----"
        lines.append(f"{r['count']:>4}  {year}  {short(r['title'], 90)}" + (f"  ({who})" if who else ""))
        lines.append(f"{'':>10}cited by {', '.join(r['citing'])}")
    return "\n".join(lines)


def run(args) -> int:
    import sys

    from chitragupta.cli._common import open_workspace
    from chitragupta.cli.refs_cmd import print_rows
    from chitragupta.cli.search_cmd import filters_of
    from chitragupta.engine.search.runfile import check_destination, describe, open_output
    from chitragupta.service import citations

    f = filters_of(args)
    if args.bib:
        check_destination(args.bib, "--bib")
    ws = open_workspace(args)
    got = citations.missing(ws, args.min_count, args.k, f)
    if args.bib:
        g = citations.citation_graph(ws)
        text = g.missing_bibtex(g.missing(args.min_count, args.k, f))
        if args.bib == "-":  # the BibTeX is the answer; the works' notes still go to stderr
            from chitragupta.cli._common import print_notes
            from chitragupta.cli.refs_cmd import check_stdout

            check_stdout()
            print_notes(got["notes"])
            sys.stdout.write(text)
            return 0
        with open_output(args.bib, "--bib") as out:
            out.write(text.encode("utf-8"))
        print(f"missing: {len(got['missing'])} BibTeX entries written to {describe(args.bib)}", file=sys.stderr)
    print_rows(got["missing"], got["notes"], args.json, _table)
    return 0
