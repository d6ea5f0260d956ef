"""``chitragupta demo``: the README's main job, end to end on the built-in sample corpus.

Builds a workspace (PDFs + BibTeX), syncs it, indexes it, shows one query, then runs the sample queries
as a batch to a TREC run file and scores it against the sample judgments.
"""

from __future__ import annotations

DEFAULT_DIR = "chitragupta-demo"
QUERY = "digital twin fidelity in manufacturing"


def add_arguments(p) -> None:
    p.add_argument("--query", default=QUERY, help=f"the single query to show (default: {QUERY!r})")
    p.add_argument("-k", type=int, default=5, help="hits to show for the single query (default 5)")


def run(args) -> int:
    import json
    from pathlib import Path

    from chitragupta.cli._common import print_notes, print_problems
    from chitragupta.cli.search_cmd import _table
    from chitragupta.engine.corpus.sync import sync
    from chitragupta.engine.demo.build import MARKER, build_sources, load_queries
    from chitragupta.errors import UsageError
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.search import Retriever
    from chitragupta.engine.runfile import format_run_lines
    from chitragupta.engine.workspace import Workspace

    root = Path(DEFAULT_DIR if args.workspace == "." else args.workspace).expanduser()
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise UsageError(f"{root} is not empty and is not a demo workspace; pass --workspace NEW_DIR")
    root.mkdir(parents=True, exist_ok=True)
    bib = build_sources(root)
    print(f"demo workspace: {root.resolve()}  ({bib.relative_to(root)} and its PDFs)")

    ws = Workspace.open(root, args.config)
    with ws.lock("demo sync"):
        report = sync(ws)
    print_problems(report.problems)
    print(f"sync: {report.summary()}")
    opened = refresh(ws)
    idx = opened.index
    took = f" in {opened.report.seconds:.2f} s" if opened.report else " (up to date)"
    print(f"index: {idx.n_docs} documents, {len(idx.vocab)} terms, {idx.postings.nnz} postings{took}")

    retriever = Retriever.open(ws)
    print(f'\n$ chitragupta search "{args.query}" -k {args.k}')
    resp = retriever.search(args.query, k=args.k)
    print_notes(resp.notes)
    print(_table(resp))

    queries = load_queries()
    qpath = root / "content" / "demo-queries.jsonl"
    qpath.write_text("".join(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n" for q in queries),
                     encoding="utf-8")
    ranked = retriever.rank_many([q["text"] for q in queries], k=10)
    lines, hit1, hit3, rr = [], 0, 0, 0.0
    for i, q in enumerate(queries):
        keys = [retriever.citekey(d) for d in ranked.topk.ids[i] if d >= 0]
        lines += format_run_lines(q["_id"], zip(keys, ranked.topk.scores[i]))
        rel = set(q["relevant"])
        ranks = [n for n, key in enumerate(keys, start=1) if key in rel]
        hit1 += bool(ranks and ranks[0] == 1)
        hit3 += bool(ranks and ranks[0] <= 3)
        rr += 1.0 / ranks[0] if ranks else 0.0
    run_path = root / "content" / "demo.trec"
    run_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    n = len(queries)
    print(f"\n$ chitragupta search --queries {qpath.relative_to(root)} --run {run_path.relative_to(root)} -k 10")
    print(f"batch: {n} queries -> {run_path}; a relevant paper first for {hit1}/{n}, "
          f"in the top 3 for {hit3}/{n}; MRR@10 {rr / n:.3f}")
    return 0
