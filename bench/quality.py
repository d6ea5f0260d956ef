"""Retrieval quality of the shipped defaults on the real collections.

    python -m bench quality [--arms scifact,cranfield,...]

qrels arms: nDCG@10 and Recall@100 over judged queries (relevant = grade >= 1, binary gains). Keyword
self-retrieval arms: Recall@1/5, MRR@5, nDCG@5 with a document's keywords as the query, and nDCG@10 and
Recall@100 as for the qrels arms (a change to the defaults is held to every arm on those two).
"""

from __future__ import annotations

import argparse

from bench import arms as arms_mod
from bench.metrics import evaluate
from bench.runs import run
from bench.timer import stopwatch

QRELS_ARMS = ("scifact", "cranfield", "cisi")
KEYWORD_ARMS = ("www", "semeval2010", "inspec")
QRELS_MEASURES = ("nDCG@10", "R@100")
KEYWORD_MEASURES = ("R@1", "R@5", "MRR@5", "nDCG@5")


def measures_for(name: str) -> tuple[str, ...]:
    return QRELS_MEASURES if name in QRELS_ARMS or name.startswith("scifact") else KEYWORD_MEASURES + QRELS_MEASURES


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench quality", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--arms", default=",".join([*QRELS_ARMS, *KEYWORD_ARMS]))
    args = ap.parse_args(argv)
    cols = QRELS_MEASURES + KEYWORD_MEASURES
    print("| arm | queries | " + " | ".join(cols) + " | seconds |")
    print("|---|---|" + "---|" * (len(cols) + 1))
    for name in args.arms.split(","):
        with stopwatch() as took:
            arm = arms_mod.get(name, args.data)
            scores = evaluate(run(arm), arm.qrels, measures_for(name))
        cells = [f"{scores[m]:.4f}" if m in scores else "" for m in cols]
        print(f"| {name} | {len(arm.queries)} | " + " | ".join(cells) + f" | {took.wall:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
