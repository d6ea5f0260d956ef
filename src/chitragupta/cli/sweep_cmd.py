"""``chitragupta sweep``: BM25's k1 x b grid scored on one's own queries and judgments in one batched pass
over the document index, written as a Markdown table, a CSV and a heat map."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("--queries", metavar="Q.jsonl", required=True, help='BEIR queries, one {"_id", "text"} per line')
    p.add_argument("--qrels", metavar="QRELS", required=True,
                   help="judgments: BEIR TSV (header line) or TREC qrels (qid 0 docid rel)")
    p.add_argument("--k1", metavar="RANGE", required=True,
                   help="START:STOP:STEP (STOP included) or a comma list, within [0, 1000] as [retrieval].k1, "
                        "e.g. 0.5:2:0.25")
    p.add_argument("--b", metavar="RANGE", required=True, help="as --k1, within [0, 1], e.g. 0.3:0.9:0.1")
    p.add_argument("--weight-title", metavar="RANGE", default=None,
                   help="title weights to sweep too (default: [retrieval].weight_title alone)")
    p.add_argument("--weight-abstract", metavar="RANGE", default=None,
                   help="abstract weights to sweep too (default: [retrieval].weight_abstract alone)")
    p.add_argument("--metric", default="nDCG@10", help="the measure, in ir-measures syntax (default nDCG@10)")
    p.add_argument("-k", "--k", dest="k", type=int, default=100, help="ranking depth at every point (default 100)")
    p.add_argument("--out", metavar="DIR", required=True,
                   help="folder for sweep-<metric>.md, .csv and .png (created if needed)")
    p.add_argument("--skip-missing", action="store_true",
                   help="leave out judged queries that are not in Q.jsonl (default: they score 0)")


def run(args) -> int:
    from pathlib import Path

    from chitragupta.cli._common import open_workspace, print_notes, print_problems, progress_bar
    from chitragupta.engine.library.jsonl import read_queries
    from chitragupta.engine.evaluation.measure import parse_measures, read_qrels
    from chitragupta.engine.search.searcher import check_k
    from chitragupta.service import open_searcher
    from chitragupta.engine.evaluation.sweep import (MAX_GRID_POINTS, check_grid_size, check_out_dir, file_stem,
                                          judged_queries, parse_range, run_sweep, write_sweep)
    from chitragupta.errors import UsageError

    check_k(args.k, "-k")
    # every argument checked before the index is opened or anything is scored; the config's bounds
    k1s = parse_range(args.k1, "k1")
    bs = parse_range(args.b, "b", high=1.0)
    titles = parse_range(args.weight_title, "weight-title") if args.weight_title is not None else None
    abstracts = parse_range(args.weight_abstract, "weight-abstract") if args.weight_abstract is not None else None
    check_grid_size(k1s, bs, titles or [0], abstracts or [0], max_points=MAX_GRID_POINTS)
    check_out_dir(args.out)
    parse_measures([args.metric])
    qrels = read_qrels(args.qrels)
    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    if not queries:
        raise UsageError(f"{args.queries}: no queries")
    judged_queries(queries, qrels.judgments, skip_missing=args.skip_missing)  # none judged: an error, not zeros
    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        retriever = open_searcher(ws, "bm25", progress=cb)
    result = run_sweep(retriever, queries, qrels.judgments, k1s, bs, args.metric, titles=titles,
                       abstracts=abstracts, k=args.k, skip_missing=args.skip_missing)
    paths, notes = write_sweep(result, args.out, file_stem(args.metric),
                               title=f"{Path(ws.root).name}: {args.metric} ({result.n_queries} queries)")
    print_notes(qrels.notes + result.notes + notes)
    best, cur = result.best, result.current
    print(f"sweep: {len(result.points)} grid points x {result.n_queries} queries (k={result.k}) "
          f"in {result.seconds:.2f} s")
    print(f"best    {args.metric} {best.value:.4f} at {best.label()}")
    if cur is not None:
        where = "" if cur in result.points else ", off the grid"
        print(f"current {args.metric} {cur.value:.4f} at {cur.label()} (the workspace's config{where})")
    print("wrote " + ", ".join(str(p) for p in paths))
    sys.stdout.flush()
    return 0
