"""``chitragupta search``: one query as a table or JSON, or a batch of queries to a run file, for every
engine of the service registry (``chitragupta.service.registry``). The request is checked once
(``service.request.SearchRequest``) and run on the searcher the registry opens -- every engine has the
same calls -- so there is one single-query path and one batch path."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from chitragupta.device import DEVICES
    from chitragupta.engine.search.searcher import UNIT_HELP
    from chitragupta.kernels.dispatch import BACKENDS
    from chitragupta.service import registry

    p.add_argument("query", nargs="?", help='the query (omit with --queries); for BM25, "an exact phrase", '
                   "+required and -excluded words or -\"phrases\" narrow the sources (docs/search.md)")
    p.add_argument("-k", type=int, default=None, help="hits per query (default 10; 100 with --queries)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list of hits instead of a table; with --queries, write JSON lines "
                        '({"qid", "rank", "citekey", "score"}) instead of a TREC run')
    p.add_argument("--queries", metavar="Q.jsonl", help='batch mode: BEIR queries, one {"_id", "text"} per line')
    p.add_argument("--run", metavar="OUT.trec",
                   help="batch mode: where to write the run (- for stdout; a FIFO or device is written directly)")
    p.add_argument("--syntax", action="store_true",
                   help='batch mode: read the queries\' "phrases", +required and -excluded words (a malformed query '
                        "is read as plain words, with a note); without it a query file is plain words, as IR "
                        "toolkits read one")
    p.add_argument("--backend", choices=list(BACKENDS), default=None,
                   help="BM25's scoring backend (default: [retrieval].backend)")
    p.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where torch runs: BM25's torch backend ([retrieval].device), or the embedding model "
                        "for --engine embed / hybrid ([enrich].device)")
    p.add_argument("--snippet-chars", type=int, default=None,
                   help="snippet width (default: [retrieval].snippet_chars; 0: no snippet)")
    p.add_argument("--unit", choices=list(registry.all_units()), default=None,
                   help="what is ranked (default: the engine's first): " + "; ".join(
                       f"{u}: {UNIT_HELP.get(u, u)} (--engine {' or '.join(s.name for s in registry.ENGINES.values() if u in s.units)})"
                       for u in registry.all_units()))
    p.add_argument("--engine", choices=list(registry.names()), default=registry.DEFAULT_ENGINE,
                   help="; ".join(f"{s.name}: {s.help}" for s in registry.ENGINES.values()))
    p.add_argument("--no-update", action="store_true", help="search the index as it is, even if the ledger changed")
    p.add_argument("--log", metavar="DRAFT", help="append each query to content/dossiers/DRAFT/retrieval.md")
    add_filter_arguments(p, topic=True)


KEYS_BYTES = 64 << 20  # a --keys file at most (a million citekeys take about 16 MiB)
KEYS_LINES = 1_000_000  # and at most this many citekeys


def add_filter_arguments(p, *, topic: bool = False) -> None:
    """The metadata filter flags (``engine/search/filters.py``); ``filters_of(args)`` reads them. ``topic``:
    with ``--topic`` (a command whose engines read ``content/topics.json``)."""
    g = p.add_argument_group("filters", "only sources whose metadata match (different flags: all must hold; a "
                             "source with no value for a filtered field is excluded, and a note says how many)")
    g.add_argument("--year", metavar="RANGE", help="a year (2019) or a range: 2015..2020, 2015.., ..2020")
    g.add_argument("--author", metavar="NAME", action="append",
                   help="an author's family name, case- and accent-insensitive (repeatable: any of them)")
    g.add_argument("--keyword", metavar="K", action="append", help="a keyword (repeatable: any of them)")
    g.add_argument("--venue", metavar="TEXT", help="text the venue (journal, proceedings) holds, case-insensitive")
    g.add_argument("--type", metavar="TYPE", action="append",
                   help="a BibTeX entry type: article, inproceedings, ... (repeatable: any of them)")
    g.add_argument("--keys", metavar="FILE", help=f"only the citekeys listed in FILE, one a line (at most "
                   f"{KEYS_BYTES >> 20} MiB and {KEYS_LINES:,} of them)")
    if topic:
        g.add_argument("--topic", metavar="N", type=int, action="append",
                       help="a topic id of `chitragupta enrich --stages bertopic` (content/topics.json; -1: the "
                            "outliers; repeatable: any of them)")


def read_keys(path: str) -> list[str]:
    """The citekeys of a ``--keys`` file, one a line (blank lines skipped). What is not a regular file (a
    device, a pipe, a folder) is refused by what it is and never read, a file past ``KEYS_BYTES`` before a
    byte is read, one past ``KEYS_LINES`` lines before it is split: one UsageError line each, naming the cap."""
    from chitragupta.errors import UsageError
    from chitragupta.files import FileRefused, read_limited

    where, cap = f"--keys {path}", f"at most {KEYS_BYTES >> 20} MiB and {KEYS_LINES:,} lines"
    try:
        text = read_limited(path, KEYS_BYTES, follow=True).decode("utf-8-sig")
    except FileRefused as err:
        what = (f"{err.kind}, not a file of citekeys" if err.kind else
                f"{err.size:,} bytes" if err.size >= 0 else "growing past the cap")
        raise UsageError(f"{where}: it is {what} ({cap})") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{where}: not UTF-8 text at byte {err.start} ({err.reason})") from None
    except OSError as err:
        raise UsageError(f"{where}: cannot read it ({err.strerror or err})") from None
    if text.count("\n") > KEYS_LINES:
        raise UsageError(f"{where}: more than {KEYS_LINES:,} lines ({cap})")
    return [k for k in map(str.strip, text.splitlines()) if k]


def filters_of(args):
    """The filters the flags ask for (a ``Filters``), or None."""
    from chitragupta.engine.search.filters import to_filters

    d = {name: getattr(args, name) for name in ("year", "author", "keyword", "venue", "type", "topic")
         if getattr(args, name, None) is not None}
    if getattr(args, "keys", None) is not None:
        d["keys"] = read_keys(args.keys)
    return to_filters(d, "--")


def _table(resp, scores: bool = True) -> str:
    """The hits as lines: rank, score (unless not ``scores``: the rank alone), id, title, page, snippet."""
    if not resp.hits:
        return "no hits"
    lines = []
    keys = [h.citekey + (f"#{h.passage}" if h.passage is not None else "") for h in resp.hits]
    width = max(len(k) for k in keys)
    for rank, (h, key) in enumerate(zip(resp.hits, keys), start=1):
        title = h.title if len(h.title) <= 90 else h.title[:87] + "..."
        where = f"  (p. {h.page})" if h.page else ""
        score = f"{h.score:8.4f}  " if scores else ""
        lines.append(f"{rank:>3}  {score}{key:<{width}}  {title}{where}")
        if h.snippet:
            for line in h.snippet.split("\n"):
                lines.append(f"{'':>{15 if scores else 5}}{line}")
    return "\n".join(lines)


def print_response(resp, as_json: bool, engine: str | None = None) -> None:
    """One query's notes on stderr, then its hits as a table or a JSON list; ``engine``: whose hits (a
    table shows the scores of an engine whose ``table_scores`` a person reads)."""
    import json

    from chitragupta.cli._common import print_notes

    if sys.stdout is None:  # started with stdout closed (>&-): the hits would vanish without a word
        from chitragupta.errors import OutputError

        raise OutputError("cannot print the hits: stdout is closed; redirect it to a file (or /dev/null)")
    print_notes(resp.notes)
    if as_json:
        print(json.dumps([h.to_dict() for h in resp.hits], ensure_ascii=False, indent=1))
    else:
        from chitragupta.service import registry

        print(_table(resp, engine is None or registry.engine(engine).table_scores))


def _command(args) -> str:
    from chitragupta.service.registry import DEFAULT_ENGINE

    cmd = "search" if args.engine == DEFAULT_ENGINE else f"search --engine {args.engine}"
    return cmd + (" --queries" if args.queries else "")


def _unit_label(req) -> str:
    from chitragupta.service.registry import DEFAULT_ENGINE

    unit = req.resolved_unit
    return unit if req.engine == DEFAULT_ENGINE else f"{req.engine} {unit}"


def _single(args, req, searcher, ws) -> int:
    resp = req.run_one(searcher, args.query)
    print_response(resp, args.json, req.engine)
    if args.log:
        from chitragupta.engine.library.dossier import LogRow, append_rows, expanded_text, payload_chars

        append_rows(ws, args.log, [LogRow(_command(args), _unit_label(req), args.query, expanded_text(resp.notes),
                                          req.k_for(False), len(resp.hits), payload_chars(resp.hits))])
    return 0


def _batch(args, req, searcher, ws) -> int:
    from pathlib import Path

    from chitragupta.cli._common import print_notes, print_problems
    from chitragupta.engine.library.jsonl import read_queries
    from chitragupta.engine.search.filters import to_filters
    from chitragupta.engine.search.runfile import check_destination, describe, open_output

    check_destination(args.run)  # before the work: a run that cannot be written is said now
    problems: list[str] = []
    own: list = []  # each query's own filters (a line's "filters")
    lines: list[int] = []  # each query's line in the file
    queries = read_queries(Path(args.queries), problems, own, to_filters, lines)
    longest = req.limits(searcher).max_query_chars
    if any(len(text) > longest for _, text in queries):  # refused, as a bad line is: the rest are answered
        keep = [i for i, (_, text) in enumerate(queries) if len(text) <= longest]
        problems += [f"{args.queries}:{lines[i]}: query {qid!r} is {len(text):,} characters long; at most "
                     f"{longest:,} ([serve].max_query_chars); line skipped"
                     for i, (qid, text) in enumerate(queries) if len(text) > longest]
        queries, own, lines = [queries[i] for i in keep], [own[i] for i in keep], [lines[i] for i in keep]
    if not queries:  # one line: the first refusal says why
        from chitragupta.errors import UsageError

        why = "it holds no query" if not problems else (
            f"every line was refused ({problems[0]}" + (f"; and {len(problems) - 1} more)" if len(problems) > 1 else ")"))
        raise UsageError(f"{args.queries}: no query to run: {why}; "
                         + ("nothing written to stdout" if args.run == "-" else f"{args.run} left as it was"))
    print_problems(problems)
    k = req.k_for(True)
    qids = [qid for qid, _ in queries]
    unit = req.resolved_unit
    texts = [text for _, text in queries]
    ranked = req.run_many(searcher, texts, own, syntax="lenient" if args.syntax else "plain")
    with open_output(args.run) as out:
        for chunk in ranked.run_chunks(qids, fmt="jsonl" if args.json else "trec"):
            out.write(chunk)
    counts = ranked.counts()
    notes = searcher.index_notes(unit)
    if args.log:
        from chitragupta.engine.library.dossier import LogRow, append_rows, expanded_text
        from chitragupta.engine.search.runfile import format_run_lines

        all_notes = ranked.notes
        append_rows(ws, args.log, [
            LogRow(_command(args), ranked.label, text, expanded_text(all_notes[q]), k, int(counts[q]),
                   sum(len(x) + 1 for x in format_run_lines(qid, ranked.docids(q))))
            for q, (qid, text) in enumerate(queries)])
    unmatched = ranked.unmatched() if ranked.engine == "bm25" else 0
    if unmatched:
        notes.append(f"{unmatched} of {len(queries)} queries had no indexable term that the index holds, and got no hits")
    from chitragupta.engine.search.filters import filter_notes

    notes.extend(dict.fromkeys(n.text for q in range(len(queries)) for n in filter_notes(ranked, q)))
    print_notes(notes)
    what = "JSON lines" if args.json else "TREC run"
    engine = "" if args.engine == "bm25" else f", engine {args.engine}"
    groups = _batch_groups(ranked, texts, args.syntax)
    said = "; ".join(f"{len(qs)} {name}" for name, qs in groups if qs)
    verbose = bool(getattr(args, "verbose", False))
    print(f"search: {len(queries)} queries, {int(counts.sum())} hits (k={k}{engine}) written to {describe(args.run)} "
          f"({what})" + (f"; {said}" + ("" if verbose else " (-v names them)") if said else ""), file=sys.stderr)
    if verbose:
        for name, qs in groups:
            for q, why in qs:
                print(f"  {name}: {qids[q]} ({args.queries}:{lines[q]})" + (f": {why}" if why else ""), file=sys.stderr)
    return 0


def _batch_groups(ranked, texts: list[str], syntax: bool) -> list[tuple[str, list[tuple[int, str]]]]:
    """The queries a batch's summary counts, by what befell them: (name, [(query, why or "")]) in order --
    a malformed syntax read as plain words, no hits, narrowed by the syntax, and (without ``--syntax``)
    syntax read as plain words."""
    import numpy as np

    from chitragupta.engine.search.constraints import syntax_rows

    plan = ranked.plan
    malformed = sorted(plan.malformed.items()) if plan is not None else []
    narrowed = [(q, "") for q in plan.narrowed()] if plan is not None else []
    empty = [(int(q), "") for q in np.flatnonzero(ranked.counts() == 0)]
    plain = [] if syntax else [(q, "") for q in syntax_rows(texts)]
    return [("malformed, read as plain words", malformed), ("with no hits", empty),
            ("narrowed by the query syntax", narrowed),
            ("with quotes or signs read as plain words (--syntax reads them)", plain)]


def run(args) -> int:
    from chitragupta.cli._common import open_workspace, progress_bar
    from chitragupta.errors import UsageError
    from chitragupta.service import open_searcher
    from chitragupta.service.request import SearchRequest

    if args.queries or args.run:
        if not (args.queries and args.run):
            raise UsageError("batch mode needs both --queries Q.jsonl and --run OUT.trec (--run - for stdout)")
        if args.query:
            raise UsageError("give either a QUERY or --queries, not both")
    elif args.syntax:
        raise UsageError("--syntax is for a --queries batch; one QUERY reads the syntax as [retrieval].query_syntax says")
    elif not args.query:
        raise UsageError('give a QUERY, e.g. chitragupta search "digital twin fidelity", or --queries Q.jsonl --run OUT.trec')
    req = SearchRequest.checked(flags=True, engine=args.engine, unit=args.unit, k=args.k,
                                snippet_chars=args.snippet_chars, filters=filters_of(args))
    ws = open_workspace(args)
    with progress_bar("indexing") as cb:
        searcher = open_searcher(ws, req.engine, update=not args.no_update, backend=args.backend,
                                 device=args.device, progress=cb)
    return _batch(args, req, searcher, ws) if args.queries else _single(args, req, searcher, ws)
