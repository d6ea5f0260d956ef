"""``chitragupta enrich``: the optional enrichment layer (docling conversions, embeddings, topics)."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from chitragupta.device import DEVICES

    p.add_argument("--stages", default="docling,embed", metavar="LIST",
                   help="comma-separated, run in this order whatever the order given: docling (content/docling/), "
                        "embed (content/faiss/), bertopic (content/topics.json); default: docling,embed")
    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where encoding and topics run (default: [enrich].device)")


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.enrich.run import parse_stages, run as run_pipeline

    stages = parse_stages(args.stages)  # an unknown stage is refused before the workspace is touched
    ws = open_workspace(args)
    run_pipeline(ws, stages, device=args.device, echo=lambda line: print(line, flush=True),
                 progress=lambda desc, unit: progress_bar(desc, unit))
    sys.stdout.flush()
    return 0
