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
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.enrich.run import parse_stages, run as run_pipeline

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

    from chitragupta.cli._common import open_workspace, print_notes, print_problems
    from chitragupta.cli.search_cmd import print_response
    from chitragupta.errors import UsageError
    from chitragupta.enrich.search import EmbedSearcher

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
            from chitragupta.engine.dossier import LogRow, append_rows, payload_chars

            append_rows(ws, args.log, [LogRow("search --engine embed", searcher.UNIT, args.query, "", k,
                                              len(resp.hits), payload_chars(resp.hits))])
        return 0

    import numpy as np

    from chitragupta.engine.corpus.jsonl import read_queries
    from chitragupta.engine.index.strings import StringTable
    from chitragupta.engine.output import describe, open_output
    from chitragupta.engine.trec import run_chunks

    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    k = args.k or 100
    ranked = searcher.rank_many([q for _, q in queries], k)
    chunk_rows = np.asarray([r for hits in ranked for r, _s in hits], dtype=np.int64)
    keys = [searcher.citekey(r) for r in chunk_rows.tolist()]
    table = StringTable.from_sorted(sorted(set(keys)))
    rows = np.asarray(table.find_many(keys), dtype=np.int64)
    items = np.asarray(searcher.store.chunk_no, dtype=np.int64)[chunk_rows]  # docid: <citekey>#<chunk>
    scores = np.asarray([s for hits in ranked for _r, s in hits], dtype=np.float64)
    counts = np.asarray([len(hits) for hits in ranked], dtype=np.int64)
    out = args.run
    with open_output(out) as f:
        for chunk in run_chunks([qid for qid, _ in queries], counts, rows, scores, table, items,
                                fmt="jsonl" if args.json else "trec", item_field="chunk"):
            f.write(chunk)
    lines = keys
    if args.log:
        from chitragupta.engine.dossier import LogRow, append_rows

        append_rows(ws, args.log, [LogRow("search --engine embed --queries", searcher.UNIT, text, "", k, len(h), 0)
                                   for (_qid, text), h in zip(queries, ranked)])
    print_notes(searcher.index_notes())
    print(f"search: {len(queries)} queries, {len(lines)} hits (k={k}, engine embed) written to {describe(out)}",
          file=sys.stderr)
    return 0
