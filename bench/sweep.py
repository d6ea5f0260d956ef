"""A parameter sweep on one arm in one batched call, written as a table (Markdown and CSV) and a heat map.

    python -m bench sweep --arm scifact --k1 0.5:3:0.25 --b 0:1:0.1 [--title 1] [--abstract 1]
                          [--metric nDCG@10] [--k 100] [--out bench/out/sweeps]

The built-in arms go through the same code as ``chitragupta sweep`` on one's own data
(``chitragupta.engine.evaluation.sweep``): every grid point is scored from one pass over the postings
(``chitragupta.kernels.sweep``), the index is not rebuilt between points, each point's run is evaluated by
``chitragupta.engine.evaluation.measure`` (ir-measures), and the same writer makes the table, CSV and heat map. A
range is START:STOP:STEP (STOP included) or a comma list.
"""

from __future__ import annotations

import argparse

from bench import arms as arms_mod
from bench.data import WORK
from bench.timer import wall_clock


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--k1", default="1.5")
    ap.add_argument("--b", default="0.75")
    ap.add_argument("--title", default="1")
    ap.add_argument("--abstract", default="1")
    ap.add_argument("--metric", default="nDCG@10")
    ap.add_argument("--k", type=int, default=100, help="ranking depth (default 100)")
    ap.add_argument("--out", default=str(WORK / "sweeps"))
    args = ap.parse_args(argv)
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.evaluation.sweep import file_stem, parse_range, run_sweep, write_sweep

    t0 = wall_clock()
    k1s, bs = parse_range(args.k1, "k1"), parse_range(args.b, "b", high=1.0)
    ts, as_ = parse_range(args.title, "title"), parse_range(args.abstract, "abstract")
    arm = arms_mod.get(args.arm, args.data)
    r = Retriever.open(arm.workspace())
    result = run_sweep(r, arm.queries, arm.qrels, k1s, bs, args.metric, titles=ts, abstracts=as_, k=args.k)
    stem = file_stem(args.metric, prefix=args.arm)
    paths, notes = write_sweep(result, args.out, stem, title=f"{args.arm}: {args.metric}")
    best = result.best
    print(f"{args.arm}: {len(result.points)} grid points x {result.n_queries} queries; sweep {result.seconds:.2f} s, "
          f"total {wall_clock() - t0:.2f} s (index load and the arm included)")
    print(f"best {args.metric} {best.value:.4f} at k1={best.k1:g} b={best.b:g} title={best.weight_title:g} "
          f"abstract={best.weight_abstract:g}")
    for note in notes:
        print(note)
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
