"""``chitragupta similar CITEKEY``: "papers like this one" -- the sources most like one of the library's,
by any engine of the service registry, printed as ``search`` prints its hits (a table, or ``--json``).
BM25 asks the index for the source's most distinctive terms, the embedding index for the mean of its chunk
vectors, hybrid fuses both; the source itself is never among the hits."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli.search_cmd import add_filter_arguments
    from chitragupta.device import DEVICES
    from chitragupta.service import registry

    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the source to start from")
    p.add_argument("-k", type=int, default=None, help="hits (default 10)")
    p.add_argument("--engine", choices=list(registry.names()), default=registry.DEFAULT_ENGINE,
                   help="; ".join(f"{s.name}: {s.help}" for s in registry.ENGINES.values()))
    p.add_argument("--json", action="store_true", help="print a JSON list of hits instead of a table")
    p.add_argument("--snippet-chars", type=int, default=None,
                   help="snippet width (default: [retrieval].snippet_chars; 0: no snippet)")
    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where the embedding model runs for --engine embed / hybrid ([enrich].device)")
    p.add_argument("--no-update", action="store_true", help="use the index as it is, even if the ledger changed")
    add_filter_arguments(p, topic=True)


def run(args) -> int:
    from chitragupta.cli._common import citekey_of

    args.citekey = citekey_of(args, "similar")
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.cli.search_cmd import filters_of, print_response
    from chitragupta.service import open_searcher
    from chitragupta.service.request import SearchRequest

    req = SearchRequest.checked(flags=True, engine=args.engine, k=args.k, snippet_chars=args.snippet_chars,
                                filters=filters_of(args))
    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        searcher = open_searcher(ws, req.engine, update=not args.no_update, device=args.device, progress=cb)
    print_response(req.run_similar(searcher, args.citekey), args.json, req.engine)
    return 0
