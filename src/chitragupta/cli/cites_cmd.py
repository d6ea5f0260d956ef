"""``chitragupta cites CITEKEY``: the library sources a source cites (its entries that resolve to one), with
the entry's text as evidence; ``--json``: one ``{"citekey", "title", "text"}`` per edge."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the citing source")
    p.add_argument("--json", action="store_true", help="print one JSON object per edge (JSON lines)")


def run(args) -> int:
    from chitragupta.cli._common import citekey_of

    args.citekey = citekey_of(args, "cites")
    from chitragupta.cli._common import open_workspace
    from chitragupta.cli.refs_cmd import edge_table, print_rows
    from chitragupta.service import citations

    got = citations.cites(open_workspace(args), args.citekey)
    print_rows(got["cites"], got["notes"], args.json,
               lambda rows: edge_table(rows, f"{args.citekey} cites no source of the library"))
    return 0
