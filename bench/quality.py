"""Retrieval quality of the shipped defaults on the real collections.

    python -m bench.quality [--data ../shared/data] [--arms scifact,cranfield,...]

qrels arms: nDCG@10 and Recall@100 over judged queries (relevant = grade >= 1). Keyword self-retrieval
arms: Recall@1/5, MRR@5, nDCG@5 with a document's keywords as the query and that document the answer.
"""

from __future__ import annotations

import argparse
import time

from bench.data import KEYWORD_ARMS, QRELS_ARMS, keyword_arm, qrels_arm, workspace_for
from bench.metrics import evaluate

QRELS_MEASURES = ("nDCG@10", "R@100")
KEYWORD_MEASURES = ("R@1", "R@5", "MRR@5", "nDCG@5")


def run_arm(arm, k: int = 100, retriever=None):
    """The engine's run on an arm: qid -> ranked citekeys."""
    from engine.search import Retriever

    r = retriever or Retriever.open(workspace_for(arm.corpus))
    qids = list(arm.queries)
    ranked = r.rank_many([arm.queries[q] for q in qids], k)
    keys = r.index.citekeys
    return {q: [keys[int(d)] for d in ranked.topk.ids[i] if d >= 0] for i, q in enumerate(qids)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--arms", default=",".join([*QRELS_ARMS, *KEYWORD_ARMS]))
    args = ap.parse_args(argv)
    print("| arm | queries | " + " | ".join(QRELS_MEASURES + KEYWORD_MEASURES) + " | seconds |")
    print("|---|---|" + "---|" * (len(QRELS_MEASURES) + len(KEYWORD_MEASURES) + 1))
    for name in args.arms.split(","):
        t = time.perf_counter()
        if name in QRELS_ARMS:
            arm, measures = qrels_arm(name, args.data), QRELS_MEASURES
        else:
            arm, measures = keyword_arm(name, args.data), KEYWORD_MEASURES
        scores = evaluate(run_arm(arm), arm.qrels, measures)
        cells = [f"{scores[m]:.4f}" if m in scores else "" for m in QRELS_MEASURES + KEYWORD_MEASURES]
        print(f"| {name} | {len(arm.queries)} | " + " | ".join(cells) + f" | {time.perf_counter() - t:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
