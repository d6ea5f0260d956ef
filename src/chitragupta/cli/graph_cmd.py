"""``chitragupta graph``: the library's whole citation graph -- its sources (ids: citekeys) and the works
at least ``--min`` of them cite that it lacks, as nodes; citations as edges -- as JSON (``{"nodes",
"edges"}``), GraphML (networkx, Gephi), DOT (Graphviz) or a self-contained HTML page to open in a browser
(``chitragupta.pages.render_graph``: sources with their ledger authors, missing works with their BibTeX up
to ``BIBTEX_LIMIT`` of them -- beyond, the page names the ``missing --bib`` command), to stdout or
``--out FILE``."""

from __future__ import annotations

BIBTEX_LIMIT = 1000  # missing works whose BibTeX entries the page carries (4,853 cost seconds to write)


def add_arguments(p) -> None:
    p.add_argument("--format", choices=("json", "graphml", "dot", "html"), default="json",
                   help="the format (default json; html: a page to open in a browser, offline)")
    p.add_argument("--out", metavar="FILE", default="-", help="where to write it (default: - for stdout)")
    p.add_argument("--min", type=int, default=2, dest="min_count", metavar="N",
                   help="missing works cited by at least N sources become nodes (default 2)")


def run(args) -> int:
    import json
    import sys

    from chitragupta.cli._common import open_workspace, print_notes
    from chitragupta.engine.search.runfile import check_destination, describe, open_output
    from chitragupta.errors import UsageError
    from chitragupta.service import citations

    if args.min_count < 1:
        raise UsageError(f"--min must be >= 1, got {args.min_count}")
    check_destination(args.out, "--out")
    ws = open_workspace(args)
    g = citations.citation_graph(ws)
    print_notes(g.notes())
    if args.format == "html":
        text = _page(ws, g, args.min_count)
    elif args.format == "json":
        text = json.dumps(g.to_json(args.min_count), ensure_ascii=False) + "\n"
    elif args.format == "graphml":
        text = g.to_graphml(args.min_count)
    else:
        text = g.to_dot(args.min_count)
    if args.out == "-":
        from chitragupta.cli.refs_cmd import check_stdout

        check_stdout()
        sys.stdout.write(text)
        return 0
    with open_output(args.out, "--out") as out:
        out.write(text.encode("utf-8"))
    print(f"graph: written to {describe(args.out)} ({args.format})", file=sys.stderr)
    return 0


def _page(ws, g, min_count: int) -> str:
    """The graph's page: its JSON, each source node given the ledger's authors, and the missing works'
    BibTeX (``missing --bib``'s entries, in the JSON's order) when there are at most ``BIBTEX_LIMIT``."""
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.pages import render_graph

    data = g.to_json(min_count)
    with Ledger(ws.ledger_path, create=False) as ledger:
        authors = {r.citekey: list(r.authors) for r in ledger.rows()}
    for nd in data["nodes"]:
        if nd["kind"] == "source":
            nd.setdefault("authors", authors.get(nd["id"], []))
    k = sum(nd["kind"] == "missing" for nd in data["nodes"])
    bib = g.missing_bibtex(g.missing(min_count, k)) if 0 < k <= BIBTEX_LIMIT else None
    return render_graph(data, title=f"Citation graph: {ws.root.resolve().name}", bibtex=bib,
                        command=f"chitragupta missing --min {min_count} -k {max(k, 1)} --bib missing.bib")
