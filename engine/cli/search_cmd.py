"""``chitragupta search``: one query as a table or JSON, or a batch of queries to a TREC run file."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from kernels.dispatch import BACKENDS

    p.add_argument("query", nargs="?", help="the query (omit with --queries)")
    p.add_argument("-k", type=int, default=None, help="hits per query (default 10; 100 with --queries)")
    p.add_argument("--json", action="store_true", help="print a JSON list of hits instead of a table")
    p.add_argument("--queries", metavar="Q.jsonl", help='batch mode: BEIR queries, one {"_id", "text"} per line')
    p.add_argument("--run", metavar="OUT.trec", help="batch mode: where to write the TREC run")
    p.add_argument("--backend", choices=list(BACKENDS), default=None,
                   help="scoring backend (default: [retrieval].backend)")
    p.add_argument("--snippet-chars", type=int, default=None, help="snippet width (default: [retrieval].snippet_chars)")
    p.add_argument("--no-update", action="store_true", help="search the index as it is, even if the ledger changed")


def _table(resp) -> str:
    if not resp.hits:
        return "no hits"
    lines = []
    width = max(len(h.citekey) for h in resp.hits)
    for rank, h in enumerate(resp.hits, start=1):
        title = h.title if len(h.title) <= 90 else h.title[:87] + "..."
        lines.append(f"{rank:>3}  {h.score:8.4f}  {h.citekey:<{width}}  {title}")
        if h.snippet:
            lines.append(f"{'':>15}{h.snippet}")
    return "\n".join(lines)


def _single(args, retriever) -> int:
    import json

    from engine.cli._common import print_notes

    resp = retriever.search(args.query, k=args.k or 10, snippet_chars=args.snippet_chars)
    print_notes(resp.notes)
    if args.json:
        print(json.dumps([h.to_dict() for h in resp.hits], ensure_ascii=False, indent=1))
    else:
        print(_table(resp))
    return 0


def _batch(args, retriever) -> int:
    from pathlib import Path

    from engine.cli._common import print_notes, print_problems
    from engine.corpus.jsonl import read_queries
    from engine.trec import format_run_lines
    from engine.workspace import atomic_write_text

    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    k = args.k or 100
    ranked = retriever.rank_many([q for _, q in queries], k)
    lines: list[str] = []
    no_terms = 0
    keys = retriever.index.citekeys
    for q, (qid, _text) in enumerate(queries):
        ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
        hits = [(keys[int(d)], float(s)) for d, s in zip(ids, scores) if d >= 0]
        lines += format_run_lines(qid, hits)
        no_terms += not ranked.terms[q]
    out = Path(args.run)
    atomic_write_text(out, "\n".join(lines) + ("\n" if lines else ""), durable=False)
    notes = retriever.index_notes()
    if no_terms:
        notes.append(f"{no_terms} of {len(queries)} queries had no indexable term and got no hits")
    print_notes(notes)
    print(f"search: {len(queries)} queries, {len(lines)} hits (k={k}) written to {out}", file=sys.stderr)
    return 0


def run(args) -> int:
    from engine.cli._common import open_workspace, progress_bar
    from engine.errors import UsageError
    from engine.search import Retriever

    if args.k is not None and args.k < 1:
        raise UsageError(f"-k must be >= 1, got {args.k}")
    if args.queries or args.run:
        if not (args.queries and args.run):
            raise UsageError("batch mode needs both --queries Q.jsonl and --run OUT.trec")
        if args.query:
            raise UsageError("give either a QUERY or --queries, not both")
    elif not args.query:
        raise UsageError('give a QUERY, e.g. chitragupta search "digital twin fidelity", or --queries Q.jsonl --run OUT.trec')
    if args.snippet_chars is not None and args.snippet_chars < 1:
        raise UsageError(f"--snippet-chars must be >= 1, got {args.snippet_chars}")
    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        retriever = Retriever.open(ws, update=not args.no_update, backend=args.backend, progress=cb)
    return _batch(args, retriever) if args.queries else _single(args, retriever)
