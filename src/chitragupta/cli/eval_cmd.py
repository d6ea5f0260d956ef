"""``chitragupta eval``: a TREC run scored against relevance judgments (BEIR TSV or TREC qrels) with
ir-measures (the ``eval`` extra)."""

from __future__ import annotations

import sys

DEFAULT_METRICS = "nDCG@10,R@100,MRR@10"


def add_arguments(p) -> None:
    p.add_argument("run", metavar="RUN", help="a TREC run: qid Q0 docid rank score tag (- for stdin)")
    p.add_argument("--qrels", metavar="QRELS", required=True,
                   help="judgments: BEIR TSV (query-id corpus-id score, header line) or TREC qrels "
                        "(qid 0 docid rel), told apart by content")
    p.add_argument("--metrics", metavar="M1,M2", default=DEFAULT_METRICS,
                   help=f"measures in ir-measures syntax (default {DEFAULT_METRICS}; e.g. P@5, AP, R(rel=2)@100)")
    p.add_argument("--by-source", action="store_true",
                   help="doc ids are passages or chunks (citekey#n, from --unit passage or --engine embed): "
                        "score each citekey at its best-ranked passage (max-P) before evaluating")
    p.add_argument("--skip-missing", action="store_true",
                   help="average over the judged queries the run has (default: a judged query with no run "
                        "lines scores 0, as trec_eval -c)")
    p.add_argument("--per-query", action="store_true", help="also print each query's values")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def run(args) -> int:
    import json

    from chitragupta.cli._common import print_notes
    from chitragupta.engine.evaluation.measure import (collapse_by_source, evaluate, parse_measures, passage_hint,
                                               read_qrels, read_trec_run, split_measures)

    measures = parse_measures(split_measures(args.metrics))
    qrels = read_qrels(args.qrels)
    trec = read_trec_run(args.run)
    notes = qrels.notes + trec.notes
    by_source = args.by_source
    if not by_source:  # a chunk or passage run against qrels of sources would score 0: score it by source
        hint = passage_hint(trec.ranked, qrels.judgments)
        if hint:
            notes.append(hint)
            by_source = True
    ranked = collapse_by_source(trec.ranked) if by_source else trec.ranked
    result = evaluate(ranked, qrels.judgments, measures, skip_missing=args.skip_missing)
    notes.append(result.summary())
    if args.by_source:
        notes.append("--by-source: passage hits collapsed to their citekeys, each at its best rank (max-P)")
    print_notes(notes)
    if args.json:
        obj = {"run": args.run, "qrels": args.qrels, "qrels_format": qrels.format, "by_source": by_source,
               "measures": result.means, "queries": len(result.queries), "missing": len(result.missing),
               "skip_missing": args.skip_missing, "unjudged_run_queries": result.unjudged}
        if args.per_query:
            obj["per_query"] = result.per_query
        print(json.dumps(obj, ensure_ascii=False, indent=1))
        return 0
    width = max(len(label) for label in result.means)
    out = []
    if args.per_query:
        qw = max(len(q) for q in result.queries)
        for label, values in result.per_query.items():
            out += [f"{label:<{width}}  {q:<{qw}}  {v:.4f}" for q, v in values.items()]
        out += [f"{label:<{width}}  {'all':<{qw}}  {v:.4f}" for label, v in result.means.items()]
    else:
        out += [f"{label:<{width}}  {v:.4f}" for label, v in result.means.items()]
    sys.stdout.write("\n".join(out) + "\n")
    return 0
