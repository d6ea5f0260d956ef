"""``chitragupta search --engine hybrid``: BM25 and the embedding index fused per source
(``chitragupta.enrich.hybrid``). Called by search_cmd after its own argument checks."""

from __future__ import annotations

import sys


def search_hybrid(args) -> int:
    """One query as a table or JSON, or a batch to a run file (doc ids: citekeys, one line per source)."""
    from pathlib import Path

    from chitragupta.cli._common import open_workspace, print_notes, print_problems, progress_bar
    from chitragupta.cli.search_cmd import print_response
    from chitragupta.enrich.hybrid import HybridSearcher

    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        searcher = HybridSearcher.open(ws, unit=args.unit, update=not args.no_update, backend=args.backend,
                                       device=args.device, progress=cb)
    command = f"search --engine hybrid --unit {args.unit}"
    if not args.queries:
        k = args.k or 10
        resp = searcher.search(args.query, k=k, snippet_chars=args.snippet_chars)
        print_response(resp, args.json)
        if args.log:
            from chitragupta.engine.dossier import LogRow, append_rows, payload_chars

            append_rows(ws, args.log, [LogRow(command, resp.unit, args.query, "", k, len(resp.hits),
                                              payload_chars(resp.hits))])
        return 0

    from chitragupta.engine.corpus.jsonl import read_queries
    from chitragupta.engine.output import describe, open_output

    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    k = args.k or 100
    hr = searcher.rank_many([text for _, text in queries], k)
    with open_output(args.run) as out:
        for chunk in hr.run_chunks([qid for qid, _ in queries], fmt="jsonl" if args.json else "trec"):
            out.write(chunk)
    counts = hr.fused.counts()
    if args.log:
        from chitragupta.engine.dossier import LogRow, append_rows

        append_rows(ws, args.log, [LogRow(command + " --queries", hr.unit, text, "", k, int(counts[q]), 0)
                                   for q, (_qid, text) in enumerate(queries)])
    print_notes(searcher.index_notes())
    what = "JSON lines" if args.json else "TREC run"
    print(f"search: {len(queries)} queries, {int(counts.sum())} hits (k={k}, engine hybrid) written to "
          f"{describe(args.run)} ({what})", file=sys.stderr)
    return 0
