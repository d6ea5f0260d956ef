"""``python -m bench resume``: what a rerun of the embed stage costs after a run killed part-way (issue 32:
resuming after a kill at 60% of a fresh run's time must cost < 65% of that fresh run's CPU).

    python -m bench resume                  # the first 1,000 scifact abstracts, killed at 60%
    python -m bench resume --docs 300 --at 0.5 --json

What it does, each run a whole ``chitragupta enrich --stages embed --device cpu`` process (the packaged
MiniLM, ``HF_HUB_OFFLINE=1``) whose own CPU time (user + sys) comes from ``os.wait4``:

1. imports the first ``--docs`` documents of ``../shared/data/scifact/corpus.jsonl`` into two fresh
   workspaces under ``bench/out/resume/``;
2. **fresh**: the stage runs to its end in the first; its wall time W and CPU time C;
3. **killed**: the stage starts in the second and is SIGKILLed ``--at`` x W seconds after its start (a kill,
   not Ctrl-C: nothing is committed on the way out); the chunks its committed segments hold are counted;
4. **resume**: the stage runs again in the second, to its end; its CPU time R. The figure is R / C.

The resumed store is checked against the fresh one (same documents and chunks, vectors within 1e-5):
a resume that kept wrong vectors would not count. The machine may be shared: the figures are CPU
seconds, which another process's load moves less than wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.data import DEFAULT_DATA, REPO, WORK, first_lines
from bench.timer import run_timed


def _env() -> dict:
    src = str(REPO / "src")
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p))


def _argv(ws: Path) -> list[str]:
    return [sys.executable, "-m", "chitragupta.cli.main", "enrich", "-w", str(ws), "--stages", "embed",
            "--device", "cpu"]


def _killed(ws: Path, after_s: float) -> dict:
    """The stage in ``ws``, SIGKILLed ``after_s`` seconds after its start: its wall and CPU seconds."""
    t = time.perf_counter()
    p = subprocess.Popen(_argv(ws), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=after_s)  # it finished first: the figure below says so
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
    _pid, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return {"wall_s": time.perf_counter() - t, "cpu_s": ru.ru_utime + ru.ru_stime, "rc": p.returncode}


def _committed(ws: Path) -> tuple[int, int, int]:
    """(segments, documents, chunks) the committed embed segments hold (``content/faiss/.<slug>.segments/``)."""
    segs = docs = chunks = 0
    for folder in (ws / "content" / "faiss").glob(".*.segments"):
        for p in folder.glob("seg-*.json"):
            body = json.loads(p.read_text(encoding="utf-8"))["body"]
            segs += 1
            docs += len(body["docs"])
            chunks += sum(len(d["starts"]) for d in body["docs"])
    return segs, docs, chunks


def _encoded(stdout: str) -> int | None:
    m = re.search(r"^embed: \d+ doc\(s\) encoded \((\d+) chunks\)", stdout, re.MULTILINE)
    return int(m.group(1)) if m else None


def _same_store(a: Path, b: Path) -> float:
    """The largest difference between the two workspaces' stores' vectors; ValueError when their
    documents or chunks differ."""
    import numpy as np

    from chitragupta.enrich.store import load_store

    def store(ws: Path):
        folder = next(p for p in (ws / "content" / "faiss").iterdir() if not p.name.startswith("."))
        return load_store(folder)

    x, y = store(a), store(b)
    if x.citekeys != y.citekeys or x.count != y.count or not np.array_equal(x.char_start, y.char_start) \
            or not np.array_equal(x.char_end, y.char_end):
        raise ValueError("the resumed store's documents or chunks differ from the fresh run's")
    return float(np.abs(x.vectors - y.vectors).max()) if x.count else 0.0


def measure(n_docs: int, at: float, *, work: Path | None = None) -> dict:
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    work = (work or WORK) / "resume"
    shutil.rmtree(work, ignore_errors=True)
    corpus = first_lines(DEFAULT_DATA / "scifact" / "corpus.jsonl", n_docs, work / "corpus.jsonl")
    fresh_ws, killed_ws = work / "fresh", work / "killed"
    for ws in (fresh_ws, killed_ws):
        import_jsonl(Workspace.open(ws, create=True), corpus)
    fresh = run_timed(_argv(fresh_ws), env=_env())
    chunks = _encoded(fresh["stdout"])
    killed = _killed(killed_ws, at * fresh["wall_s"])
    segs, kept_docs, kept_chunks = _committed(killed_ws)
    resume = run_timed(_argv(killed_ws), env=_env())
    diff = _same_store(fresh_ws, killed_ws)
    return {
        "docs": n_docs, "chunks": chunks, "kill_at": at, "cpus": os.cpu_count(),
        "fresh_wall_s": round(fresh["wall_s"], 1), "fresh_cpu_s": round(fresh["cpu_s"], 1),
        "killed_after_s": round(killed["wall_s"], 1), "killed_cpu_s": round(killed["cpu_s"], 1),
        "killed_rc": killed["rc"], "segments": segs, "committed_docs": kept_docs, "committed_chunks": kept_chunks,
        "committed_share": round(kept_chunks / chunks, 3) if chunks else None,
        "resume_wall_s": round(resume["wall_s"], 1), "resume_cpu_s": round(resume["cpu_s"], 1),
        "resume_encoded_chunks": _encoded(resume["stdout"]),
        "resume_over_fresh_cpu": round(resume["cpu_s"] / fresh["cpu_s"], 3),
        "max_abs_diff": diff,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench resume", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000, help="scifact documents (default 1,000)")
    ap.add_argument("--at", type=float, default=0.6, help="the kill, as a share of the fresh run's wall time")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    if not 0 < args.at < 1:
        ap.error("--at must be between 0 and 1")
    r = measure(args.docs, args.at)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"resume after a kill: the first {r['docs']} scifact documents ({r['chunks']} chunks), embed stage on "
          f"the CPU ({r['cpus']} CPUs)")
    print(f"  fresh run        {r['fresh_wall_s']:7.1f} s wall {r['fresh_cpu_s']:7.1f} s CPU")
    print(f"  killed run       {r['killed_after_s']:7.1f} s wall {r['killed_cpu_s']:7.1f} s CPU "
          f"(SIGKILL at {r['kill_at']:.0%} of the fresh wall time; exit {r['killed_rc']})")
    print(f"  committed        {r['segments']} segment(s): {r['committed_docs']} docs, {r['committed_chunks']} chunks "
          f"({r['committed_share']:.0%})")
    print(f"  resume           {r['resume_wall_s']:7.1f} s wall {r['resume_cpu_s']:7.1f} s CPU "
          f"({r['resume_encoded_chunks']} chunks encoded)")
    print(f"  resume / fresh   {r['resume_over_fresh_cpu']:.3f} of the CPU (target < 0.65); largest vector "
          f"difference from the fresh store {r['max_abs_diff']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
