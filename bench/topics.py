"""The bertopic stage on a real corpus: encoding time, BERTopic wall time, topics and outlier share.

    python -m bench.topics [--data ../shared/data] [--arm scifact] [--workspace DIR] [--cold] [--refits 2]

Imports the arm's ``corpus.jsonl`` into a workspace under /tmp (as ``chitragupta import`` does), then runs
the stage (``chitragupta.enrich.topics.run_stage``) once with whatever encoding cache the workspace holds (``--cold``
deletes it first, so the first run encodes every chunk), then ``--refits`` more times with the cache warm:
those runs encode nothing and re-fit the whole corpus, which is what every later ``enrich`` run costs.
Reports the fit's wall time (UMAP + HDBSCAN + c-TF-IDF, timed around ``fit_topics``: the first run's,
which includes numba compiling umap-learn's kernels, and the median of the refits), the encoding time
of the first run, the topic count, the outlier share, peak RSS, and whether every run wrote the same
``topics.json`` apart from ``created``. JSON goes to ``bench/out/topics-<arm>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.data import WORK, data_dir


def _machine() -> str:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({model}){mem}, {platform.system()}, Python {platform.python_version()}"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for pkg in ("bertopic", "umap-learn", "hdbscan", "scikit-learn", "sentence-transformers", "torch", "numba"):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg} absent")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.topics", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--arm", default="scifact")
    ap.add_argument("--workspace", type=Path, default=None, help="default /tmp/chitragupta-bench-topics/<arm>")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--cold", action="store_true", help="delete the encoding cache first")
    ap.add_argument("--refits", type=int, default=2, help="warm-cache runs after the first (default 2)")
    args = ap.parse_args(argv)

    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich import topics as tm
    from chitragupta.enrich.device import resolve_device
    from chitragupta.enrich.encoders import load_encoder

    corpus = data_dir(args.data) / args.arm / "corpus.jsonl"
    root = args.workspace or Path("/tmp/chitragupta-bench-topics") / args.arm
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace.open(root)
    with ws.lock("bench topics import"):
        t0 = time.perf_counter()
        report = import_jsonl(ws, corpus)
        t_import = time.perf_counter() - t0
    print(f"imported {report.entries} records from {corpus} into {root} ({t_import:.1f} s)", file=sys.stderr)
    with Ledger(ws.ledger_path) as ledger:
        rows = ledger.rows()
    if args.cold:
        shutil.rmtree(ws.content / tm.CACHE_DIR, ignore_errors=True)

    device = resolve_device(args.device)
    encoder = load_encoder(ws.config.enrich, device)

    fit_times: list[float] = []
    real_fit = tm.fit_topics

    def timed_fit(*a, **k):
        t = time.perf_counter()
        try:
            return real_fit(*a, **k)
        finally:
            fit_times.append(time.perf_counter() - t)

    tm.fit_topics = timed_fit  # this process only: time the fit apart from the encoding

    last_print = [0.0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last_print[0] > 15 or done == total:
            last_print[0] = now
            print(f"  encoded {done}/{total} chunks", file=sys.stderr)

    runs = []
    outputs = []
    try:
        for i in range(1 + max(0, args.refits)):
            t0 = time.perf_counter()
            with ws.lock("bench topics"):
                lines = tm.run_stage(ws, rows, device=device, progress=progress, encoder=encoder)
            wall = time.perf_counter() - t0
            for line in lines:
                print(line, file=sys.stderr)
            doc = json.loads((ws.content / tm.TOPICS_NAME).read_text(encoding="utf-8"))
            doc.pop("created")
            outputs.append(json.dumps(doc, sort_keys=True))
            runs.append({"wall_s": round(wall, 2), "fit_s": round(fit_times[-1], 2), "report": lines})
    finally:
        tm.fit_topics = real_fit

    doc = json.loads((ws.content / tm.TOPICS_NAME).read_text(encoding="utf-8"))
    sizes = sorted((t["size"] for t in doc["topics"] if t["id"] != -1), reverse=True)
    result = {
        "arm": args.arm, "device": device, "backend": doc["backend"], "fallback": doc["fallback"],
        "n_docs": doc["n_docs"], "n_topics": doc["n_topics"], "n_outliers": doc["n_outliers"],
        "outlier_share": round(doc["n_outliers"] / doc["n_docs"], 4),
        "largest_topics": sizes[:10], "median_topic_size": statistics.median(sizes) if sizes else 0,
        "first_run": runs[0], "refits": runs[1:],
        # The first fit also compiles umap-learn's numba kernels; the refits are the steady cost.
        "refit_s_median": round(statistics.median(r["fit_s"] for r in runs[1:]), 2) if runs[1:] else None,
        "identical_outputs": len(set(outputs)) == 1,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "torch_threads": __import__("torch").get_num_threads(),
        "params": doc["params"], "machine": _machine(), "versions": _versions(),
        "top_words": [{"id": t["id"], "size": t["size"], "words": t["words"][:6]} for t in doc["topics"][:8]],
    }
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"topics-{args.arm}.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("params", "top_words")}, indent=1))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
