"""Speed side by side with bm25s, in one run: batch queries/s, index build, peak memory, CLI wall time.

    python -m bench speed [--collection scifact] [--repeats 5] [--out bench/out/speed.json]

Each engine is measured in its own subprocess (so peak RSS is its own), on the same machine, corpus,
tokens and k. Batch figures are medians of ``--repeats`` timed runs after a warm-up:
  end-to-end  query strings -> top-10 citekeys (tokenization, vocabulary lookup, id -> key included)
  scoring     pre-tokenized queries -> top-10 (ours: QueryBatch -> kernels; bm25s: token ids -> retrieve)
Query sets: every query in queries.jsonl, and a seeded stress set of 2,000 windows of 4-16 words cut
from random documents. Ours applies k1 and b at query time; bm25s precomputes them into its matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench import timer
from bench.timer import median_wall
from bench.data import REPO, WORK, data_dir, read_jsonl, workspace_for

K = 10


def stress_queries(texts, n: int = 2000, seed: int = 0) -> list[str]:
    """Seeded windows of 4-16 words cut from random texts. ``texts``: any sequence (len and indexing),
    so a caller may read each text lazily."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        words = texts[int(rng.integers(len(texts)))].split()
        if len(words) < 4:
            continue
        size = int(rng.integers(4, 17))
        start = int(rng.integers(0, max(1, len(words) - size)))
        out.append(" ".join(words[start:start + size]))
    return out


def _query_sets(collection: Path, texts: list[str]) -> dict[str, list[str]]:
    return {"all": [q["text"] for q in read_jsonl(collection / "queries.jsonl")], "stress2000": stress_queries(texts)}


def measure_ours(collection: Path, repeats: int) -> dict:
    import numba

    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.text.tokenize import query_terms
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.kernels.dispatch import score_topk

    ws_root = workspace_for(collection / "corpus.jsonl", collection.name)
    ws = Workspace.open(ws_root)
    import scipy.sparse  # noqa: F401  (imported before timing, as bm25s's import has already done)

    builds = []
    for _ in range(3):
        with timer.stopwatch() as took:
            refresh(ws, force=True)
        builds.append(took.wall)
    build_s = statistics.median(builds)
    r = Retriever.open(ws)
    texts = [d["text"] for d in read_jsonl(collection / "corpus.jsonl")]
    out = {"engine": "chitragupta (numba)", "n_docs": r.index.n_docs, "build_s": build_s,
           "build_docs_per_s": r.index.n_docs / build_s, "batch": {}}
    for name, qs in _query_sets(collection, texts).items():
        batch = r.index.query_batch([query_terms(q)[0] for q in qs])
        keys = r.index.citekeys.to_list()

        def e2e_fn():
            ids = r.rank_many(qs, K).topk.ids
            return [[keys[i] for i in row if i >= 0] for row in ids.tolist()]

        idf, norm = r.index.idf_, r.index.norm(r.params.k1, r.params.b)
        for threads in (1, 2):
            numba.set_num_threads(threads)
            e2e = median_wall(e2e_fn, repeats)
            score = median_wall(lambda: score_topk(r.index.postings, batch, r.params, K, backend=r.backend,
                                                    idf=idf, norm=norm), repeats)
            out["batch"][f"{name}/t{threads}"] = {"queries": len(qs), "e2e_qps": len(qs) / e2e,
                                                  "scoring_qps": len(qs) / score}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def measure_bm25s(collection: Path, repeats: int) -> dict:
    from bench.peers import Bm25s

    docs = list(read_jsonl(collection / "corpus.jsonl"))
    texts = [d["title"] + "\n" + d["text"] for d in docs]
    builds = []
    for _ in range(3):
        peer = Bm25s()
        with timer.stopwatch() as took:
            peer.build(texts)
        builds.append(took.wall)
    build_s = statistics.median(builds)
    out = {"engine": f"bm25s {peer.version} (numba)", "n_docs": len(docs), "build_s": build_s,
           "build_docs_per_s": len(docs) / build_s, "batch": {}}
    keys = [str(d["_id"]) for d in docs]
    for name, qs in _query_sets(collection, [d["text"] for d in docs]).items():
        ids = peer.tokenize(qs, distinct=False)

        def e2e_fn():
            found, _scores = peer.search(qs, K, threads, distinct=False)
            return [[keys[i] for i in row] for row in found.tolist()]

        for threads in (1, 2):
            e2e = median_wall(e2e_fn, repeats)
            score = median_wall(lambda: peer.retrieve(ids, K, threads), repeats)
            out["batch"][f"{name}/t{threads}"] = {"queries": len(qs), "e2e_qps": len(qs) / e2e,
                                                  "scoring_qps": len(qs) / score}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def cli_wall(collection: Path, repeats: int) -> dict:
    ws_root = workspace_for(collection / "corpus.jsonl", collection.name)
    exe = Path(sys.executable).with_name("chitragupta")
    cmd = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "chitragupta.cli.main"]),
           "search", "-w", str(ws_root), "vitamin D deficiency and bone density", "-k", "10"]
    subprocess.run(cmd, capture_output=True, check=True)  # warm: index current, numba cache written
    times = []
    for _ in range(repeats):
        times.append(timer.run_timed(cmd)["wall_s"])
    return {"cli_query_s_median": statistics.median(times), "cli_query_s_max": max(times)}


def _child(engine: str, collection: str, repeats: int) -> dict:
    coll = data_dir() / collection
    return {"ours": measure_ours, "bm25s": measure_bm25s}[engine](coll, repeats)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="speed side by side with bm25s")
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(WORK / "speed.json"))
    ap.add_argument("--child", choices=["ours", "bm25s"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.collection, args.repeats)))
        return 0
    results = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                           "cpus": os.cpu_count()}, "collection": args.collection}
    for engine in ("ours", "bm25s"):
        p = subprocess.run([sys.executable, "-m", "bench.speed", "--child", engine, "--collection", args.collection,
                            "--repeats", str(args.repeats)], capture_output=True, text=True, cwd=REPO)
        if p.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{p.stderr}")
        results[engine] = json.loads(p.stdout.strip().splitlines()[-1])
    results["cli"] = cli_wall(data_dir() / args.collection, args.repeats)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(report(results))
    return 0


def report(res: dict) -> str:
    ours, peer = res["ours"], res["bm25s"]
    lines = [f"corpus {res['collection']} ({ours['n_docs']} docs), k={K}, {res['machine']['cpus']} cores, "
             f"python {res['machine']['python']}",
             "", "| query set / threads | ours e2e q/s | bm25s e2e q/s | ratio | ours scoring q/s | bm25s scoring q/s | ratio |",
             "|---|---|---|---|---|---|---|"]
    for key, o in ours["batch"].items():
        p = peer["batch"][key]
        lines.append(f"| {key} ({o['queries']} q) | {o['e2e_qps']:,.0f} | {p['e2e_qps']:,.0f} | "
                     f"{o['e2e_qps'] / p['e2e_qps']:.2f}x | {o['scoring_qps']:,.0f} | {p['scoring_qps']:,.0f} | "
                     f"{o['scoring_qps'] / p['scoring_qps']:.2f}x |")
    lines += ["", "| | ours | bm25s |", "|---|---|---|",
              f"| index build, docs/s (median of 3) | {ours['build_docs_per_s']:,.0f} ({ours['build_s']:.2f} s: read "
              f"parsed files, tokenize, CSR, write + fsync the cache) | {peer['build_docs_per_s']:,.0f} "
              f"({peer['build_s']:.2f} s: tokenize + index, in memory) |",
              f"| peak RSS, MB | {ours['peak_rss_mb']:.0f} | {peer['peak_rss_mb']:.0f} |",
              f"| one CLI query, whole process (median / max of runs) | {res['cli']['cli_query_s_median']:.2f} s / "
              f"{res['cli']['cli_query_s_max']:.2f} s | - |"]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
