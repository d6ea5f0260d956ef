"""A parameter sweep on one arm in one batched call, written as a table (Markdown and CSV) and a heat map.

    python -m bench sweep --arm scifact --k1 0.5:3:0.25 --b 0:1:0.1 [--title 1] [--abstract 1]
                          [--metric nDCG@10] [--k 100] [--out bench/out/sweeps]
    chitragupta bench sweep ...        (the same, through the CLI)

Every grid point is scored from one pass over the postings (``chitragupta.kernels.sweep``); the index is not
rebuilt between points. A range is START:STOP:STEP (STOP included) or a comma list.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from bench import arms as arms_mod
from bench.data import WORK
from bench.metrics import evaluate


def parse_range(text: str) -> list[float]:
    if ":" in text:
        start, stop, step = (float(x) for x in text.split(":"))
        n = int(round((stop - start) / step)) + 1
        return [round(start + i * step, 10) for i in range(n)]
    return [float(x) for x in text.split(",")]


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
    from bench.runs import sweep_runs
    from chitragupta.kernels.sweep import grid_of

    t0 = time.perf_counter()
    arm = arms_mod.get(args.arm, args.data)
    k1s, bs = parse_range(args.k1), parse_range(args.b)
    ts, as_ = parse_range(args.title), parse_range(args.abstract)
    grid = grid_of(k1s, bs, ts, as_)
    arm.workspace()
    t1 = time.perf_counter()
    runs = sweep_runs(arm, grid, args.k)
    t2 = time.perf_counter()
    rows = []
    for params, r in zip(grid, runs):
        fw = dict(params.field_weights)
        scores = evaluate(r, arm.qrels, [args.metric])
        rows.append((params.k1, params.b, fw.get("title", 1.0), fw.get("abstract", 1.0), scores[args.metric]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.arm}-{args.metric.replace('@', '')}"
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["k1", "b", "weight_title", "weight_abstract", args.metric])
        w.writerows(rows)
    (out / f"{stem}.md").write_text(markdown(rows, args.metric, k1s, bs))
    png = heatmap(rows, args.metric, k1s, bs, out / f"{stem}.png", title=f"{args.arm}: {args.metric}")
    best = max(rows, key=lambda r: r[-1])
    print(f"{args.arm}: {len(grid)} grid points x {len(arm.queries)} queries; sweep {t2 - t1:.2f} s, "
          f"total {time.perf_counter() - t0:.2f} s (index load and the arm included)")
    print(f"best {args.metric} {best[-1]:.4f} at k1={best[0]:g} b={best[1]:g} title={best[2]:g} abstract={best[3]:g}")
    print(f"wrote {out / (stem + '.md')}, {out / (stem + '.csv')}" + (f", {png}" if png else ""))
    return 0


def markdown(rows, metric: str, k1s, bs) -> str:
    """A k1 x b table when the grid is 2-D in (k1, b); otherwise one row per point."""
    if len(rows) == len(k1s) * len(bs):
        val = {(r[0], r[1]): r[-1] for r in rows}
        lines = [f"| k1 \\ b | " + " | ".join(f"{b:g}" for b in bs) + " |", "|---|" + "---|" * len(bs)]
        for k1 in k1s:
            lines.append(f"| {k1:g} | " + " | ".join(f"{val[(k1, b)]:.4f}" for b in bs) + " |")
        return "\n".join(lines) + "\n"
    lines = [f"| k1 | b | weight_title | weight_abstract | {metric} |", "|---|---|---|---|---|"]
    lines += [f"| {a:g} | {b:g} | {c:g} | {d:g} | {v:.4f} |" for a, b, c, d, v in rows]
    return "\n".join(lines) + "\n"


def heatmap(rows, metric: str, k1s, bs, path: Path, title: str) -> Path | None:
    """A PNG heat map of the metric over (k1, b); None when matplotlib is absent or the grid is not 2-D."""
    if len(rows) != len(k1s) * len(bs) or len(k1s) < 2 or len(bs) < 2:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    grid = np.array([[next(r[-1] for r in rows if r[0] == k1 and r[1] == b) for b in bs] for k1 in k1s])
    fig, ax = plt.subplots(figsize=(1 + 0.7 * len(bs), 1 + 0.45 * len(k1s)))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(bs)), [f"{b:g}" for b in bs])
    ax.set_yticks(range(len(k1s)), [f"{k:g}" for k in k1s])
    ax.set_xlabel("b")
    ax.set_ylabel("k1")
    ax.set_title(title)
    i, j = np.unravel_index(np.argmax(grid), grid.shape)
    ax.plot(j, i, marker="*", color="white", markersize=12)
    fig.colorbar(im, ax=ax, label=metric)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
