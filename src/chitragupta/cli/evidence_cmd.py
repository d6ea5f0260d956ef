"""``chitragupta evidence KEY "QUERY"`` (or ``evidence "QUERY" --citekey KEY``): one document's passages
bearing on the query; ``KEY#N`` (a passage hit's id) prints that passage whole."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the document to zoom in on (KEY#N: its passage N whole)", query=True)
    p.add_argument("-n", type=int, default=2, help="passages to return (default 2)")
    p.add_argument("--width", type=int, default=600, help="characters per passage (default 600; a table may exceed it)")
    p.add_argument("--json", action="store_true", help="print a JSON list of passages")
    p.add_argument("--log", metavar="DRAFT", help="append this call to content/dossiers/DRAFT/retrieval.md")


def run(args) -> int:
    import json

    from chitragupta.cli._common import citekey_and_query, open_workspace, print_notes
    from chitragupta.engine.library.dossier import LogRow, append_rows, expanded_text, payload_chars
    from chitragupta.engine.search.searcher import check_k
    from chitragupta.service import open_searcher
    from chitragupta.service.request import Limits

    citekey, query = citekey_and_query(args, "evidence")
    check_k(args.n, "-n")
    check_k(args.width, "--width")
    ws = open_workspace(args)
    Limits.of(ws.config).check_queries([query])  # the server's evidence tool refuses alike
    retriever = open_searcher(ws, "bm25")
    resp = retriever.evidence(query, citekey, n=args.n, width=args.width)
    print_notes(retriever.index_notes() + resp.notes)
    if args.json:
        print(json.dumps([h.to_dict() for h in resp.hits], ensure_ascii=False, indent=1))
    else:
        print(f"{citekey}  {resp.hits[0].title if resp.hits else retriever.title(citekey)}")
        for i, h in enumerate(resp.hits, start=1):
            where = f" (page {h.page})" if h.page else ""
            print(f"\n[{i}]{where}\n{h.snippet}")
        if not resp.hits:
            print("no passage bears on the query")
    if args.log:
        append_rows(ws, args.log, [LogRow("evidence", "evidence", query, expanded_text(resp.notes), args.n,
                                          len(resp.hits), payload_chars(resp.hits))])
    return 0

