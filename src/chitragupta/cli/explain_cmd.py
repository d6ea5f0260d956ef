"""``chitragupta explain KEY "QUERY"`` (or ``explain "QUERY" --citekey KEY``): each query term's tf, idf and contribution to that
document's BM25 score (they sum to the score), and where the document ranks."""

from __future__ import annotations


def add_arguments(p) -> None:
    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the document to explain", query=True)
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.add_argument("--no-update", action="store_true", help="explain against the index as it is")


def _fmt(ex) -> str:
    fields = [n for n, _w in ex.field_weights.items()]
    head = ["term", "from", "tf", *[f"tf_{f}" for f in fields], "tf'", "df", "idf", "contribution"]
    rows = [[t.term, t.origin, str(t.tf), *[str(t.tf_fields.get(f, 0)) for f in fields],
             f"{t.tf_weighted:g}", str(t.df), f"{t.idf:.4f}", f"{t.contribution:.4f}"] for t in ex.terms]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    weights = ", ".join(f"weight_{n} {w:g}" for n, w in ex.field_weights.items())
    out = [f"{ex.citekey}: {ex.title}",
           f"BM25 k1 {ex.k1:g}, b {ex.b:g}, {weights}; document length {ex.doc_len} (average {ex.avgdl:.1f}); "
           f"norm = k1 x (1 - b + b x dl / avgdl) = {ex.norm:.4f}; {ex.n_docs} documents",
           "", line(head), *(line(r) for r in rows), ""]
    if ex.constraints:
        out.append("constraints:")
        out += [f"  {c['item']}: {c['found']} ({'met' if c['met'] else 'NOT met'})" for c in ex.constraints]
        out.append("")
    failed = [c for c in ex.constraints if not c["met"]]
    if ex.rank:
        where = f"rank {ex.rank} of the {ex.hits} documents the query matches"
    elif failed:
        where = (f"not a hit: it fails {', '.join(c['item'] for c in failed)} "
                 f"({ex.hits} documents match)")
    else:
        where = f"not a hit: it holds none of the query's terms ({ex.hits} documents match)"
    out.append(f"score {ex.score:.4f} (the sum of the contributions); {where}")
    if ex.dropped:
        out.append("not indexed (stopwords, short): " + ", ".join(ex.dropped))
    if ex.unknown:
        out.append("in no document: " + ", ".join(ex.unknown))
    return "\n".join(out)


def run(args) -> int:
    import json

    from chitragupta.cli._common import citekey_and_query, open_workspace, progress_bar
    from chitragupta.engine.search.explain import explain
    from chitragupta.service import open_searcher
    from chitragupta.service.request import Limits

    citekey, query = citekey_and_query(args, "explain")
    ws = open_workspace(args)
    Limits.of(ws.config).check_queries([query])  # the server's explain tool refuses alike
    with progress_bar("indexing") as cb:
        retriever = open_searcher(ws, "bm25", update=not args.no_update, progress=cb)
    ex = explain(retriever, query, citekey)
    print(json.dumps(ex.to_dict(), ensure_ascii=False, indent=1) if args.json else _fmt(ex))
    return 0
