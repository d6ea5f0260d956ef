"""What metadata filters cost a whole-process CLI batch (issue 30, item 5): the same 20,000 queries
unfiltered, with one year filter that allows half the sources, and with each query its own year range
(a batch line's ``"filters"``), in alternating rounds; the median CPU of each, as a ratio to unfiltered.

    python -m bench filters --arm scifact --queries 20000 --rounds 5

The arm's corpus is copied with a seeded year (2000-2019, uniform) on every source, imported into a
scratch workspace (``query_syntax = false``: the collection's queries are plain words) and indexed once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path

from bench.data import WORK, data_dir, read_jsonl
from bench.timer import run_timed


def _prepare(arm: str, n_queries: int, seed: int) -> tuple[Path, Path, Path]:
    folder = WORK / "filters" / arm
    folder.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    corpus = folder / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as out:
        for d in read_jsonl(data_dir() / arm / "corpus.jsonl"):
            out.write(json.dumps({**d, "year": rnd.randint(2000, 2019)}) + "\n")
    texts = [q["text"] for q in read_jsonl(data_dir() / arm / "queries.jsonl")]
    plain, own = folder / "queries.jsonl", folder / "queries-own-filters.jsonl"
    with open(plain, "w", encoding="utf-8") as p, open(own, "w", encoding="utf-8") as o:
        for i in range(n_queries):
            lo = rnd.randint(2000, 2019)
            hi = min(2019, lo + rnd.randint(0, 12))
            p.write(json.dumps({"_id": f"q{i}", "text": texts[i % len(texts)]}) + "\n")
            o.write(json.dumps({"_id": f"q{i}", "text": texts[i % len(texts)], "filters": {"year": f"{lo}..{hi}"}}) + "\n")
    ws = folder / "ws"
    cli = [sys.executable, "-m", "chitragupta.cli.main"]
    if not (ws / "content" / "ledger.sqlite").exists():
        run_timed(cli + ["init", "-w", str(ws)])
        (ws / "config.toml").write_text("[retrieval]\nquery_syntax = false\n", encoding="utf-8")
    run_timed(cli + ["import", "-w", str(ws), str(corpus)])
    run_timed(cli + ["index", "-w", str(ws)])
    return ws, plain, own


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench filters", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", default="scifact")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-k", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    ws, plain, own = _prepare(args.arm, args.queries, args.seed)
    run = [sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--run", str(ws / "out.trec"),
           "-k", str(args.k)]
    cases = {"unfiltered": run + ["--queries", str(plain)],
             "one year filter, half the sources (--year 2010..2019)": run + ["--queries", str(plain), "--year", "2010..2019"],
             "each query its own year range": run + ["--queries", str(own)]}
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for argv_ in cases.values():
        run_timed(argv_, env=env)  # untimed: numba's caches, the page cache
    got: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(args.rounds):
        for name in (list(cases) if i % 2 == 0 else list(reversed(cases))):
            got[name].append(run_timed(cases[name], env=env)["cpu_s"])
    ref = statistics.median(got["unfiltered"])
    print(f"{args.arm}, {args.queries} queries, k = {args.k}, {args.rounds} rounds (median CPU of the whole process):")
    for name, v in got.items():
        m = statistics.median(v)
        print(f"  {name}: {m:.3f} s, {m / ref:.2f}x unfiltered (rounds {', '.join(f'{x:.2f}' for x in v)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
