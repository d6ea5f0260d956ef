"""``similar`` against pasting a paper into ``search``: does "papers like this one" find the other sources
judged relevant to the same query?

For every judged query of an arm with at least two relevant sources, each relevant source in turn is the
seed; the others are what a researcher holding it wants. Two ways to ask, both with the seed left out:
``similar(seed, k)`` and ``search(title + " " + text of the seed, k + 1)``. Reported: the mean recall@k of
the other relevant sources, and the mean reciprocal rank of the first of them, over every seed.

    python -m bench similar --arms scifact,cisi,cranfield [--engines bm25,embed,hybrid] [-k 10] [--similar-only]
"""

from __future__ import annotations

import argparse
import statistics

from bench.data import qrels_arm, read_jsonl, workspace_for


def _texts(arm) -> dict[str, str]:
    return {str(d["_id"]): f"{d.get('title', '')} {d.get('text', '')}".strip() for d in read_jsonl(arm.corpus)}


def measure(arm_name: str, engine: str = "bm25", k: int = 10, data=None, qrels_file: str = "qrels.tsv",
            pasted: bool = True) -> dict:
    from chitragupta import open_searcher
    from chitragupta.engine.evaluation.measure import source_of
    from chitragupta.errors import UsageError

    arm = qrels_arm(arm_name, data, qrels_file=qrels_file)
    searcher = open_searcher(workspace_for(arm.corpus, arm_name), engine)
    texts = _texts(arm)
    seeds = [(q, s, set(rel) - {s}) for q, rel in arm.qrels.items() if len(rel) >= 2 for s in rel if s in texts]
    rec = {"similar": [], "search": []}
    missing = 0
    mrr = {"similar": [], "search": []}
    for _q, seed, want in seeds:
        try:
            like = list(dict.fromkeys(map(source_of, searcher.rank_similar(seed, k).keys()[0])))  # chunks: sources
        except UsageError:  # a source the engine has nothing of (no text, so no chunk): nothing found
            like, missing = [], missing + 1
        got_pasted = [k_ for k_ in dict.fromkeys(map(source_of, searcher.rank_many([texts[seed]], k + 1).keys()[0]))
                      if k_ != seed][:k] if pasted else []
        for name, got in (("similar", like), ("search", got_pasted))[:1 + pasted]:
            rec[name].append(len(want & set(got)) / len(want))
            first = next((i for i, key in enumerate(got, start=1) if key in want), None)
            mrr[name].append(1.0 / first if first else 0.0)
    return {"arm": arm_name, "engine": engine, "seeds": len(seeds), "k": k, "missing": missing,
            **{f"recall_{n}": statistics.fmean(v) if v else float("nan") for n, v in rec.items()},
            **{f"mrr_{n}": statistics.fmean(v) if v else float("nan") for n, v in mrr.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench similar", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="scifact,cisi,cranfield")
    ap.add_argument("--engines", default="bm25")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--data", default=None)
    ap.add_argument("--qrels", default="qrels.tsv", help="the judgments file of each arm (scifact: qrels_train.tsv too)")
    ap.add_argument("--similar-only", action="store_true", help="skip pasting each seed into search (the slow half)")
    args = ap.parse_args(argv)
    print(f"| arm | engine | seeds | recall@{args.k} similar | recall@{args.k} pasted search | "
          f"MRR similar | MRR pasted search |")
    print("|---|---|---|---|---|---|---|")
    for arm in [a for a in args.arms.split(",") if a]:
        for engine in [e for e in args.engines.split(",") if e]:
            m = measure(arm, engine, args.k, args.data, args.qrels, pasted=not args.similar_only)
            seeds = f"{m['seeds']}" + (f" ({m['missing']} not in the engine's index)" if m["missing"] else "")
            print(f"| {arm} | {engine} | {seeds} | {m['recall_similar']:.4f} | {m['recall_search']:.4f} | "
                  f"{m['mrr_similar']:.4f} | {m['mrr_search']:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
