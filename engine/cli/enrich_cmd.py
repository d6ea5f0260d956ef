"""``chitragupta enrich``: the optional enrichment layer (docling conversions, embeddings, topics)."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("--stages", default="docling,embed", metavar="LIST",
                   help="comma-separated, run in this order whatever the order given: docling (content/docling/), "
                        "embed (content/faiss/), bertopic (content/topics.json); default: docling,embed")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                   help="where encoding and topics run (default: [enrich].device)")


def run(args) -> int:
    from engine.cli._common import open_workspace, progress_bar
    from enrich.run import parse_stages, run as run_pipeline

    stages = parse_stages(args.stages)  # an unknown stage is refused before the workspace is touched
    ws = open_workspace(args)
    run_pipeline(ws, stages, device=args.device, echo=lambda line: print(line, flush=True),
                 progress=lambda desc, unit: progress_bar(desc, unit))
    sys.stdout.flush()
    return 0


def search_embed(args) -> int:
    """``chitragupta search --engine embed``: one query as a table or JSON, or a batch to a TREC run
    (doc ids ``<citekey>#<chunk>``). Called by search_cmd after its own argument checks."""
    from pathlib import Path

    from engine.cli._common import open_workspace, print_notes, print_problems
    from engine.cli.search_cmd import print_response
    from engine.errors import UsageError
    from enrich.search import EmbedSearcher

    if args.unit != "document":
        raise UsageError(f"--unit {args.unit} is for --engine bm25; --engine embed ranks its own unit, "
                         "200-word chunks (each hit names its chunk as citekey#n)")
    if args.backend is not None:
        raise UsageError("--backend chooses BM25's scoring backend; --engine embed does not use it "
                         "(its device is [enrich].device)")
    device = getattr(args, "device", None)
    ws = open_workspace(args)
    searcher = EmbedSearcher.open(ws, device=device if device in ("auto", "cpu", "cuda") else None)
    if not args.queries:
        k = args.k or 10
        resp = searcher.search(args.query, k=k, snippet_chars=args.snippet_chars)
        print_response(resp, args.json)
        if args.log:
            from engine.dossier import LogRow, append_rows, payload_chars

            append_rows(ws, args.log, [LogRow("search --engine embed", searcher.UNIT, args.query, "", k,
                                              len(resp.hits), payload_chars(resp.hits))])
        return 0

    from engine.corpus.jsonl import read_queries
    from engine.trec import format_run_lines
    from engine.workspace import atomic_write_text

    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    k = args.k or 100
    ranked = searcher.rank_many([q for _, q in queries], k)
    lines: list[str] = []
    for (qid, _text), hits in zip(queries, ranked):
        lines += format_run_lines(qid, [(searcher.docid(r), s) for r, s in hits])
    out = Path(args.run)
    atomic_write_text(out, "\n".join(lines) + ("\n" if lines else ""), durable=False)
    if args.log:
        from engine.dossier import LogRow, append_rows

        append_rows(ws, args.log, [LogRow("search --engine embed --queries", searcher.UNIT, text, "", k, len(h), 0)
                                   for (_qid, text), h in zip(queries, ranked)])
    print_notes(searcher.index_notes())
    print(f"search: {len(queries)} queries, {len(lines)} hits (k={k}, engine embed) written to {out}",
          file=sys.stderr)
    return 0
