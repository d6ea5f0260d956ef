"""A BM25 batch on Ray beside the same batch in one process: wall time and run equality.

    python -m bench ray_batch --ws /work/scale-ws/c34-100k [--queries 20000] [-k 100] [--actors 2]
                              [--repeats 3] [--out bench/out/ray_batch.json]

The workspace must be indexed already (``chitragupta index``); this bench writes its shard set
(``index --shards N`` through ``engine.index.shards.refresh``) and removes it at the end.

In process, warm (``paired_time``'s alternating rounds, one untimed call of each first: page cache, numba's
cache, the actors started and their index opened):
  one      ``BM25Searcher.rank_many(queries, k)``: the batch in this process, numba on ``[retrieval].threads``
  whole    ``RaySearcher(searcher, address).rank_many(...)``: ``--actors`` actors over the whole index, query blocks
  shards   the same after ``index --shards N`` (N = ``--actors``): one actor per shard, the driver merges
Each Ray batch's ids and scores are compared with the one-process batch (``equal``: every row, to the bit).

Whole process: ``chitragupta search --queries Q --run R -k K`` against the same with ``--ray HOST:PORT`` (a local
head started for the bench with ``ray start --head --num-cpus N``, stopped at the end), alternating rounds;
the run files compared byte for byte. Each ``--ray`` process connects to the running head, starts its actors,
opens the index in each and scores: what a user's command costs.

Queries: ``bench.scale``'s seeded stress set (windows of 4-16 words cut from random documents).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.timer import paired_time, run_timed


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _equal(a, b) -> bool:
    import numpy as np

    return bool(np.array_equal(a.topk.ids, b.topk.ids) and np.array_equal(a.topk.scores, b.topk.scores))


def in_process(ws_root: Path, texts: list[str], k: int, actors: int, repeats: int) -> dict:
    import ray

    from chitragupta.engine.index import shards
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.ray_search import RaySearcher

    ray.init(num_cpus=actors, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        searcher = BM25Searcher.open(ws_root)
        ws = searcher.workspace
        shards.refresh(ws, searcher.scorer.index, 0)
        want = searcher.rank_many(texts, k)
        out = {}
        for mode in ("whole", "shards"):
            if mode == "shards":
                shards.refresh(ws, searcher.scorer.index, actors)
            remote = RaySearcher(searcher, "auto", actors=actors)
            try:
                got = remote.rank_many(texts, k)  # untimed: actors started, their index opened
                equal = _equal(got, want)
                print(json.dumps({"in_process": {mode: {"equal": equal, "load": _load()}}}), flush=True)
                ones, rays = paired_time(lambda: searcher.rank_many(texts, k), lambda: remote.rank_many(texts, k),
                                         repeats)
                out[mode] = {"one_wall_s": statistics.median(w for w, _c in ones),
                             "ray_wall_s": statistics.median(w for w, _c in rays),
                             "rounds": [[round(a[0], 3), round(b[0], 3)] for a, b in zip(ones, rays)],
                             "equal": equal,
                             "described": remote.describe, "load": _load()}
                print(json.dumps({"in_process": {mode: out[mode]}}), flush=True)  # kept if a later mode is stopped
            finally:
                remote.close()
        shards.refresh(ws, searcher.scorer.index, 0)
        return out
    finally:
        ray.shutdown()


def whole_process(ws_root: Path, qfile: Path, k: int, actors: int, repeats: int, out_dir: Path) -> dict:
    exe = Path(sys.executable).with_name("chitragupta")
    ray_exe = Path(sys.executable).with_name("ray")
    port = 6390
    tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    # Ray (2.60 here) turns token authentication on for a head started by `ray start`, and a client that finds no
    # token is refused ("Authentication token is missing or incorrect"); the bench's own head on 127.0.0.1
    # and its clients run without it.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    subprocess.run([str(ray_exe), "start", "--head", f"--port={port}", f"--num-cpus={actors}",
                    "--include-dashboard=false", "--node-ip-address=127.0.0.1", f"--temp-dir={tmp}"],
                   check=True, capture_output=True, env=env)
    try:
        out = {}
        for mode in ("whole", "shards"):
            run_timed([exe, "index", "-w", ws_root, "--unit", "document", "--shards",
                       str(actors if mode == "shards" else 0)], env=env)
            one_out, ray_out = out_dir / "one.trec", out_dir / f"ray-{mode}.trec"
            base = [exe, "search", "-w", ws_root, "--queries", qfile, "-k", str(k)]
            cmds = {"one": base + ["--run", one_out], "ray": base + ["--run", ray_out, "--ray", f"127.0.0.1:{port}"]}
            for c in cmds.values():  # untimed
                run_timed(c, env=env)
            got = {"one": [], "ray": []}
            for i in range(repeats):
                for name in (("one", "ray") if i % 2 == 0 else ("ray", "one")):
                    got[name].append(run_timed(cmds[name], env=env)["wall_s"])
            out[mode] = {"one_wall_s": statistics.median(got["one"]), "ray_wall_s": statistics.median(got["ray"]),
                         "rounds": [[round(a, 3), round(b, 3)] for a, b in zip(got["one"], got["ray"])],
                         "run_equal": one_out.read_bytes() == ray_out.read_bytes(), "load": _load()}
            print(json.dumps({"whole_process": {mode: out[mode]}}), flush=True)
        run_timed([exe, "index", "-w", ws_root, "--unit", "document", "--shards", "0"], env=env)
        return out
    finally:
        subprocess.run([str(ray_exe), "stop", "--force"], capture_output=True, env=env)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench ray_batch", description=__doc__.split("\n")[0])
    ap.add_argument("--ws", required=True, type=Path, help="an indexed workspace (its shard set is written and removed)")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("-k", type=int, default=100)
    ap.add_argument("--actors", type=int, default=2, help="Ray CPUs, actors over the whole index, and shards")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip", choices=["in_process", "whole_process"], action="append", default=[])
    ap.add_argument("--out", type=Path, default=Path("bench/out/ray_batch.json"))
    args = ap.parse_args(argv)
    from bench.scale import stress_queries

    out_dir = args.out.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = stress_queries(args.ws, args.queries)
    qfile = out_dir / f"ray-q{args.queries}.jsonl"
    qfile.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(texts)),
                     encoding="utf-8")
    res = {"machine": f"{platform.node()}, {os.cpu_count()} cores", "python": platform.python_version(),
           "ws": str(args.ws), "queries": args.queries, "k": args.k, "actors": args.actors}
    if "in_process" not in args.skip:
        res["in_process"] = in_process(args.ws, texts, args.k, args.actors, args.repeats)
    if "whole_process" not in args.skip:
        res["whole_process"] = whole_process(args.ws, qfile, args.k, args.actors, args.repeats, out_dir)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(report(res))
    return 0


def report(res: dict) -> str:
    lines = [f"{res['machine']}; {res['queries']:,} queries, k={res['k']}, {res['actors']} Ray CPUs", "",
             "| where | index | one process (s) | --ray (s) | ratio | equal | load |", "|---|---|---|---|---|---|---|"]
    for where in ("in_process", "whole_process"):
        for mode, r in res.get(where, {}).items():
            eq = r.get("equal", r.get("run_equal"))
            lines.append(f"| {where.replace('_', ' ')} | {mode} | {r['one_wall_s']:.2f} | {r['ray_wall_s']:.2f} | "
                         f"{r['one_wall_s'] / r['ray_wall_s']:.2f}x | {'yes' if eq else 'NO'} | {r['load']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
