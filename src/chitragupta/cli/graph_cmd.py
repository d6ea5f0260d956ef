"""``chitragupta graph``: the library's whole citation graph -- its sources (ids: citekeys) and the works
at least ``--min`` of them cite that it lacks, as nodes; citations as edges -- as JSON (``{"nodes",
"edges"}``), GraphML (networkx, Gephi) or DOT (Graphviz), to stdout or ``--out FILE``."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--format", choices=("json", "graphml", "dot"), default="json", help="the format (default json)")
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
    g = citations.citation_graph(open_workspace(args))
    print_notes(g.notes())
    if args.format == "json":
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
