"""``chitragupta cited-by CITEKEY``: the library sources that cite a source, each with its citing entry's
text; the filter flags of ``search`` choose the citing sources (e.g. ``--year 2019..``). ``--json``: one
``{"citekey", "title", "text"}`` per edge."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli.search_cmd import add_filter_arguments

    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the cited source")
    p.add_argument("--json", action="store_true", help="print one JSON object per edge (JSON lines)")
    add_filter_arguments(p)


def run(args) -> int:
    from chitragupta.cli._common import citekey_of

    args.citekey = citekey_of(args, "cited-by")
    from chitragupta.cli._common import open_workspace
    from chitragupta.cli.refs_cmd import edge_table, print_rows
    from chitragupta.cli.search_cmd import filters_of
    from chitragupta.service import citations

    f = filters_of(args)
    got = citations.cited_by(open_workspace(args), args.citekey, f)
    empty = f"no source of the library{' that the filters allow' if f is not None else ''} cites {args.citekey}"
    print_rows(got["cited_by"], got["notes"], args.json, lambda rows: edge_table(rows, empty))
    return 0
