"""``chitragupta demo``: the README's main job, end to end on the built-in sample corpus.

Builds a workspace (PDFs + BibTeX), syncs it, indexes it, shows one query, then runs the sample queries
as a batch to a TREC run file, scores it against the sample judgments, and says what to try next.
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
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.demo.build import MARKER, build_sources, load_queries
    from chitragupta.errors import UsageError
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.evaluation.measure import first_relevant, mean_reciprocal_rank, read_trec_run
    from chitragupta.files import atomic_write_text
    from chitragupta.engine.search.runfile import open_output
    from chitragupta.engine.library.workspace import Workspace

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
    atomic_write_text(qpath, "".join(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n" for q in queries),
                      durable=False, mode=0o666)
    ranked = retriever.rank_many([q["text"] for q in queries], k=10)
    run_path = root / "content" / "demo.trec"
    with open_output(str(run_path)) as f:  # the run file as `search --run` writes it
        for chunk in ranked.run_chunks([q["_id"] for q in queries]):
            f.write(chunk)
    # scored as `chitragupta eval` reads a run (read back from the file), without the eval extra
    ranks = first_relevant(read_trec_run(run_path).ranked, {q["_id"]: dict.fromkeys(q["relevant"], 1) for q in queries},
                           depth=10)
    n = len(queries)
    hit1 = sum(1 for r in ranks.values() if r == 1)
    hit3 = sum(1 for r in ranks.values() if 1 <= r <= 3)
    print(f"\n$ chitragupta search --queries {qpath.relative_to(root)} --run {run_path.relative_to(root)} -k 10")
    print(f"batch: {n} queries -> {run_path}; a relevant paper first for {hit1}/{n}, "
          f"in the top 3 for {hit3}/{n}; MRR@10 {mean_reciprocal_rank(ranks):.3f}")
    print(_next_steps(root, resp.hits[0].citekey if resp.hits else "KEY", args.query))
    return 0


def _next_steps(root, key: str, query: str) -> str:
    """What to try next in the demo workspace: each command with the flags it needs, ready to paste."""
    import shlex

    w, q = f"-w {shlex.quote(str(root))}", shlex.quote(query)
    steps = [(f"search {w} {q}", "one query: hits with snippets"),
             (f"search {w} --unit passage {q}", "paragraphs, each with its page"),
             (f"evidence {w} {key} {q}", "one paper's passages on the query"),
             (f"similar {w} {key}", "papers like this one"),
             (f"explain {w} {key} {q}", "why it ranks where it does"),
             (f"refs {w} {key}", "its reference list, resolved to the library")]
    width = max(len(what) for _, what in steps)
    return "\ntry next:\n" + "\n".join(f"  {what + ':':<{width + 1}}  chitragupta {c}" for c, what in steps)
