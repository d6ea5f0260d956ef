"""``chitragupta serve -w WS``: the MCP server over stdio (``chitragupta.serve``), engines kept warm."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.device import DEVICES

    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where the embedding model runs for engine embed / hybrid (default: [enrich].device)")
    p.add_argument("--no-update", action="store_true",
                   help="answer from the index as it is, even if the ledger changed (never write the workspace)")


def run(args) -> int:
    from chitragupta.serve.server import serve

    serve(args.workspace, args.config, update=not args.no_update, device=args.device)
    return 0
