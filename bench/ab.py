"""A refactor's speed against the code before it: the same two user paths -- one cold ``chitragupta search``
(a whole process) and a whole-process CLI batch -- run alternately by two source trees, and their CPU and
wall times compared as ratios measured in one run.

    git worktree add /tmp/before <rev>          # the code before the change
    python -m bench ab --before /tmp/before/src --ws WS --queries Q.jsonl

Each tree gets its own copy of the workspace (``WS`` copied twice, each index built by its own code: a
schema bump must not make the two rebuild each other's index), one untimed run of each path first (numba's
caches, the page cache), then ``--rounds`` rounds, alternating which tree goes first. The outputs of the
two trees must be identical (the hits of the cold query, the batch's run file): a speed figure of a
changed answer is refused.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.timer import run_timed

ROOT = Path(__file__).resolve().parents[1]


def _cli(src: Path, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
    return run_timed([sys.executable, "-m", "chitragupta.cli.main", *args], env=env)


def _summary(name: str, runs: dict) -> str:
    def med(label, key):
        return statistics.median(r[key] for r in runs[label])

    parts = []
    for key in ("cpu_s", "wall_s"):
        b, a = med("before", key), med("after", key)
        parts.append(f"{key} median before {b:.3f}, after {a:.3f} (after/before {a / b:.3f})")
    lo_b, lo_a = (min(r["cpu_s"] for r in runs[x]) for x in ("before", "after"))
    parts.append(f"cpu_s min before {lo_b:.3f}, after {lo_a:.3f} (after/before {lo_a / lo_b:.3f})")
    return f"{name} ({len(runs['after'])} rounds): " + "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the src/ folder of the code before the change")
    ap.add_argument("--after", type=Path, default=ROOT / "src", help="the src/ folder after it (default: this checkout's)")
    ap.add_argument("--ws", type=Path, required=True, help="a workspace (copied; never written)")
    ap.add_argument("--queries", type=Path, required=True, help="the batch's queries (BEIR JSONL)")
    ap.add_argument("--query", default="coronary heart disease statins", help="the cold query")
    ap.add_argument("-k", type=int, default=100, help="the batch's k (default 100)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--parts", default="cold,batch")
    args = ap.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        spaces = {}
        for label, src in trees.items():
            ws = spaces[label] = Path(tmp) / f"ws-{label}"
            shutil.copytree(args.ws, ws, symlinks=True)
            _cli(src, ["index", "-w", str(ws)])
        paths = {
            "cold": lambda label: ["search", "-w", str(spaces[label]), args.query, "-k", "10", "--json"],
            "batch": lambda label: ["search", "-w", str(spaces[label]), "--queries", str(args.queries),
                                    "--run", str(Path(tmp) / f"run-{label}.trec"), "-k", str(args.k)],
        }
        for part in [p for p in args.parts.split(",") if p]:
            runs = {"before": [], "after": []}
            said = {}
            for label in trees:  # untimed first runs
                _cli(trees[label], paths[part](label))
            for i in range(args.rounds):
                for label in (("before", "after") if i % 2 == 0 else ("after", "before")):
                    got = _cli(trees[label], paths[part](label))
                    runs[label].append(got)
                    said[label] = got["stdout"] if part == "cold" else (Path(tmp) / f"run-{label}.trec").read_bytes()
            if said["before"] != said["after"]:
                print(f"{part}: the two trees answer differently; no speed figure", file=sys.stderr)
                return 1
            print(_summary(part, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
