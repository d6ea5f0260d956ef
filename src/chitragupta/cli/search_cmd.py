"""``chitragupta search``: one query as a table or JSON, or a batch of queries to a TREC run file."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from chitragupta.kernels.dispatch import BACKENDS, DEVICES

    p.add_argument("query", nargs="?", help="the query (omit with --queries)")
    p.add_argument("-k", type=int, default=None, help="hits per query (default 10; 100 with --queries)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list of hits instead of a table; with --queries, write JSON lines "
                        '({"qid", "rank", "citekey", "score"}) instead of a TREC run')
    p.add_argument("--queries", metavar="Q.jsonl", help='batch mode: BEIR queries, one {"_id", "text"} per line')
    p.add_argument("--run", metavar="OUT.trec",
                   help="batch mode: where to write the run (- for stdout; a FIFO or device is written directly)")
    p.add_argument("--backend", choices=list(BACKENDS), default=None,
                   help="scoring backend (default: [retrieval].backend)")
    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where the torch backend runs (default: [retrieval].device)")
    p.add_argument("--snippet-chars", type=int, default=None, help="snippet width (default: [retrieval].snippet_chars)")
    p.add_argument("--unit", choices=["document", "passage"], default="document",
                   help="rank whole documents (default) or the sidecar's paragraphs")
    p.add_argument("--engine", choices=["bm25", "embed", "hybrid"], default="bm25",
                   help="bm25 (default); embed: the embedding index `chitragupta enrich --stages embed` builds "
                        "(ranks chunks; needs the enrich extra); hybrid: both fused per source ([hybrid] in the "
                        "config; BM25 alone, with a note, when the embedding index is missing)")
    p.add_argument("--no-update", action="store_true", help="search the index as it is, even if the ledger changed")
    p.add_argument("--log", metavar="DRAFT", help="append each query to content/dossiers/DRAFT/retrieval.md")


def _table(resp) -> str:
    if not resp.hits:
        return "no hits"
    lines = []
    keys = [h.citekey + (f"#{h.passage}" if h.passage is not None else "") for h in resp.hits]
    width = max(len(k) for k in keys)
    for rank, (h, key) in enumerate(zip(resp.hits, keys), start=1):
        title = h.title if len(h.title) <= 90 else h.title[:87] + "..."
        where = f"  (p. {h.page})" if h.page else ""
        lines.append(f"{rank:>3}  {h.score:8.4f}  {key:<{width}}  {title}{where}")
        if h.snippet:
            for line in h.snippet.split("\n"):
                lines.append(f"{'':>15}{line}")
    return "\n".join(lines)


def print_response(resp, as_json: bool) -> None:
    """One query's notes on stderr, then its hits as a table or a JSON list (every search engine)."""
    import json

    from chitragupta.cli._common import print_notes

    print_notes(resp.notes)
    if as_json:
        print(json.dumps([h.to_dict() for h in resp.hits], ensure_ascii=False, indent=1))
    else:
        print(_table(resp))


def _expanded(notes) -> str:
    return "; ".join(n.text.split(": ", 1)[1] for n in notes if n.kind == "expansion")


def _single(args, retriever) -> int:
    k = args.k or 10
    resp = retriever.search(args.query, k=k, unit=args.unit, snippet_chars=args.snippet_chars)
    print_response(resp, args.json)
    if args.log:
        from chitragupta.engine.dossier import LogRow, append_rows, payload_chars

        append_rows(retriever.workspace, args.log, [LogRow("search", args.unit, args.query, _expanded(resp.notes),
                                                           k, len(resp.hits), payload_chars(resp.hits))])
    return 0


def _batch(args, retriever) -> int:
    from pathlib import Path

    from chitragupta.cli._common import print_notes, print_problems
    from chitragupta.engine.corpus.jsonl import read_queries
    from chitragupta.engine.output import describe, open_output

    problems: list[str] = []
    queries = read_queries(Path(args.queries), problems)
    print_problems(problems)
    k = args.k or 100
    qids = [qid for qid, _ in queries]
    ranked = retriever.rank_many([text for _, text in queries], k, unit=args.unit)
    with open_output(args.run) as out:
        for chunk in ranked.run_chunks(qids, fmt="jsonl" if args.json else "trec"):
            out.write(chunk)
    n_hits = int(ranked.topk.counts().sum())
    notes = retriever.index_notes(args.unit)
    if args.log:
        from chitragupta.engine.dossier import LogRow, append_rows
        from chitragupta.engine.trec import format_run_lines

        all_notes = ranked.notes
        counts = ranked.topk.counts()
        append_rows(retriever.workspace, args.log, [
            LogRow("search --queries", args.unit, text, _expanded(all_notes[q]), k, int(counts[q]),
                   sum(len(x) + 1 for x in format_run_lines(qid, ranked.docids(q))))
            for q, (qid, text) in enumerate(queries)])
    unmatched = ranked.unmatched()
    if unmatched:
        notes.append(f"{unmatched} of {len(queries)} queries had no indexable term that the index holds, and got no hits")
    print_notes(notes)
    what = "JSON lines" if args.json else "TREC run"
    print(f"search: {len(queries)} queries, {n_hits} hits (k={k}) written to {describe(args.run)} ({what})",
          file=sys.stderr)
    return 0


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.errors import UsageError
    from chitragupta.engine.search import Retriever

    if args.k is not None and args.k < 1:
        raise UsageError(f"-k must be >= 1, got {args.k}")
    if args.queries or args.run:
        if not (args.queries and args.run):
            raise UsageError("batch mode needs both --queries Q.jsonl and --run OUT.trec (--run - for stdout)")
        if args.query:
            raise UsageError("give either a QUERY or --queries, not both")
    elif not args.query:
        raise UsageError('give a QUERY, e.g. chitragupta search "digital twin fidelity", or --queries Q.jsonl --run OUT.trec')
    if args.snippet_chars is not None and args.snippet_chars < 1:
        raise UsageError(f"--snippet-chars must be >= 1, got {args.snippet_chars}")
    if args.engine == "embed":
        from chitragupta.cli.enrich_cmd import search_embed

        return search_embed(args)
    if args.engine == "hybrid":
        from chitragupta.cli.hybrid_cmd import search_hybrid

        return search_hybrid(args)
    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        retriever = Retriever.open(ws, update=not args.no_update, backend=args.backend, device=args.device,
                                   progress=cb)
    return _batch(args, retriever) if args.queries else _single(args, retriever)
