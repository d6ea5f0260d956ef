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
    p.add_argument("--ray", metavar="auto|ADDRESS", default=None,
                   help="encode the embed and bertopic stages' chunks on a Ray cluster: auto (the cluster this "
                        "machine is in, else a local Ray) or HOST:6379 / ray://HOST:10001 (default: "
                        "[enrich].ray_address; empty: encode here); the actors get --device; needs the ray extra")


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.enrich.run import parse_stages
    from chitragupta.service.enrich import enrich

    parse_stages(args.stages)  # an unknown stage is refused before the workspace is touched
    ws = open_workspace(args)
    # SIGTERM stops the run as Ctrl-C does: the embed stage commits the documents it has finished on
    # the way out (a SIGKILL loses at most one commit interval), then "interrupted", exit 130.
    restore = _on_sigterm()
    try:
        enrich(ws, args.stages, device=args.device, ray=args.ray, echo=lambda line: print(line, flush=True),
               progress=lambda desc, unit: progress_bar(desc, unit))
    finally:
        restore()
    sys.stdout.flush()
    return 0


def _on_sigterm():
    """Make SIGTERM raise KeyboardInterrupt in the main thread; returns what puts the previous handler
    back (nothing to put back when it could not be set: not the main thread)."""
    import signal

    def stop(_signum, _frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
