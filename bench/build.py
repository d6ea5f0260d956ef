"""The document index build against bm25s's, with ``--jobs``, positions on and off, in rounds that alternate.

    python -m bench.build --ws /work/scale-ws/synth-100k [--jobs 1,2] [--rounds 2] [--positions on,off]
                          [--out DIR] [--whole] [--no-bm25s] [--json out.json]

Every measurement is its own process (so its peak RSS is its own), and the rounds alternate the arms
(ours --jobs 1, ours --jobs 2, ..., bm25s) so a load that changes on a shared host falls on each alike;
the 1-minute load average is printed beside each figure.

  ours, in process   ``engine.index.doc.build`` of the workspace's rows into ``--out`` (never into the
                     workspace: a shared corpus is read only), timed from the call to its return: read
                     every parsed file, tokenize, the CSR, the positions, write + fsync. The stages are
                     timed too (wrapping the functions the build calls): tokenize (the time the build
                     waits for blocks: all of it with one job), merge (local ids -> the build's), csr
                     (``Accumulator.finish``: vocabulary sort, term-major placement), positions
                     (``Sequences.finish`` + ``by_term``; both write their arrays into the new generation as they go),
                     finish (csr and positions together: with ``--jobs`` > 1 they run at once, positions in a
                     thread), save (``store.NewGeneration.commit``: fsync, manifest, rename).
                     ``cpu``: the CPU seconds of the same stages in this process (csr and positions: of
                     the thread that ran each), the scan's and the
                     build's, and ``workers``: the worker processes' (all of it, user + system): figures
                     that a loaded host changes less than the wall times.
  ours, whole        ``--whole``: ``chitragupta index --force --unit document --jobs N`` on the workspace,
                     start to exit (this writes the workspace's index: use it on a workspace of your own),
                     run as the CLI's ``main`` in a child of this script (``--child whole``: the same
                     command, its process also imports this small module) that times the step after the
                     index, ``references`` (``build_references``: wall, and CPU of the process and of its
                     workers), so ``index_step`` is the whole less that step.
  bm25s, in process  ``bm25s`` tokenize + index of the same titles and texts, read from ``corpus.jsonl``
                     beforehand (not timed), wall and CPU (``build_cpu``: this process's, every thread);
                     whole: the child from start to exit, reading included.
``--cold-refs``: remove the workspace's references store (``content/refs``) before each whole run, so its
references step parses every list as a first ``index`` does (else a run after the first finds them current).
``--drop-out``: remove ``--out`` after each in-process build (a 1M index with positions is ~6 GB; with
``--whole`` the workspace holds another).
Peak RSS: the child's own (``wait4``); ``workers`` is the largest of its worker processes;
``peak_mib_after_tokenize`` the child's peak when the last block was merged (the finish's share is the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

from bench import timer


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def child_ours(ws_root: Path, out: Path, jobs: int, positions: bool) -> dict:
    from chitragupta.engine.index import csr, doc, segments, store
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.index.source import fingerprints
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.kernels import phrase

    stages = {"tokenize": 0.0, "merge": 0.0, "csr": 0.0, "positions": 0.0, "finish": 0.0, "save": 0.0}
    cpu = dict.fromkeys(stages, 0.0)  # this process's CPU seconds in each (the workers' are not in it)
    # csr and positions may run at once (positions in a thread beside the CSR with --jobs > 1): their
    # CPU is the calling thread's (``thread_time``; the CSR's own range threads, without positions, are
    # not in it), and ``finish`` is the two together, from the vocabulary sort to the save, wall and
    # the whole process's CPU.
    by_thread = {"csr", "positions"}
    clock = {"finish": None}

    def add(name, t, c):
        stages[name] += time.perf_counter() - t
        cpu[name] += (time.thread_time() if name in by_thread else time.process_time()) - c

    def timed(name, fn):
        def wrapper(*a, **k):
            t, c = time.perf_counter(), (time.thread_time() if name in by_thread else time.process_time())
            try:
                return fn(*a, **k)
            finally:
                add(name, t, c)
        return wrapper

    real_ranks = csr.Accumulator.ranks

    def ranks(self):
        if clock["finish"] is None:
            clock["finish"] = (time.perf_counter(), time.process_time())
        return real_ranks(self)

    real_commit = store.NewGeneration.commit

    def commit(self, manifest):
        if clock["finish"] is not None:
            add("finish", *clock["finish"])
            clock["finish"] = None
        return real_commit(self, manifest)

    real_blocks = segments.tokenize_blocks
    peak = {"tokenize": None}

    def blocks(*a, **k):
        it = real_blocks(*a, **k)
        while True:
            t, c = time.perf_counter(), time.process_time()
            try:
                b = next(it)
            except StopIteration:
                add("tokenize", t, c)
                # the peak so far: what tokenizing and merging held (the finish's share is the rest)
                peak["tokenize"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                return
            add("tokenize", t, c)
            yield b

    segments.tokenize_blocks = blocks
    segments.merge_block = timed("merge", segments.merge_block)
    csr.Accumulator.finish = timed("csr", csr.Accumulator.finish)
    csr.Sequences.finish = timed("positions", csr.Sequences.finish)
    phrase.by_term = timed("positions", phrase.by_term)
    csr.Accumulator.ranks = ranks
    store.NewGeneration.commit = timed("save", commit)  # fsync, manifest, rename: the
    # arrays themselves are written inside the csr and positions stages (a term range at a time)

    ws = Workspace.open(ws_root)
    settings = dict(ws.config.index_settings(), **{"retrieval.positions": positions})
    t0, c0 = time.perf_counter(), time.process_time()
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.index_view()
    scanned = fingerprints(ws.root, rows)
    scan_s, scan_cpu = time.perf_counter() - t0, time.process_time() - c0
    t, c = time.perf_counter(), time.process_time()
    _index, report = doc.build(ws.root, rows, out, settings, scanned=scanned, jobs=jobs)
    build_s, build_cpu = time.perf_counter() - t, time.process_time() - c
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"n_docs": report.n_docs, "nnz": report.nnz, "scan_s": scan_s, "build_s": build_s,
            "stages": {k: round(v, 3) for k, v in stages.items()},
            "cpu": {"scan": round(scan_cpu, 3), "build": round(build_cpu, 3), **{k: round(v, 3) for k, v in cpu.items()},
                    "workers": round(kids.ru_utime + kids.ru_stime, 3)},
            "workers_peak_mib": kids.ru_maxrss / 1024, "peak_mib_after_tokenize": peak["tokenize"],
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_whole(ws_root: Path, jobs: int) -> dict:
    from chitragupta.cli import main as cli
    from chitragupta.engine.citations import store as citations

    real = citations.build_references
    got = {}

    def timed(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            return real(*a, **k)
        finally:
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            got.update(references_s=time.perf_counter() - t, references_cpu=time.process_time() - c,
                       references_workers_cpu=now.ru_utime + now.ru_stime - kids.ru_utime - kids.ru_stime)

    citations.build_references = timed
    rc = cli.main(["index", "-w", str(ws_root), "--force", "--unit", "document", "--jobs", str(jobs)])
    if rc:
        raise SystemExit(rc)
    return {k: round(v, 3) for k, v in got.items()}


def child_bm25s(ws_root: Path) -> dict:
    from bench.data import read_jsonl
    from bench.peers import Bm25s

    texts = [d.get("title", "") + "\n" + d.get("text", "") for d in read_jsonl(ws_root / "corpus.jsonl")]
    peer = Bm25s()
    t, c = time.perf_counter(), time.process_time()
    peer.build(texts)
    return {"n_docs": len(texts), "build_s": time.perf_counter() - t, "build_cpu": time.process_time() - c}


def _run(argv: list) -> dict:
    got = timer.run_timed([sys.executable, "-m", "bench.build", *argv], cwd=Path(__file__).resolve().parents[1])
    res = json.loads(got["stdout"].strip().splitlines()[-1]) if got["stdout"].strip() else {}
    res.update(wall_s=got["wall_s"], cpu_s=got["cpu_s"], peak_rss_mib=got["peak_rss_mib"])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ws", required=True)
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--positions", default="on,off")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None, help="where the in-process builds write (default: WS/../<name>-build-out)")
    ap.add_argument("--whole", action="store_true", help="also `chitragupta index --force` on WS (writes WS's index)")
    ap.add_argument("--no-bm25s", action="store_true")
    ap.add_argument("--drop-out", action="store_true", help="remove --out after each in-process build")
    ap.add_argument("--cold-refs", action="store_true", help="remove WS/content/refs before each whole run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", choices=["ours", "bm25s", "whole"], help=argparse.SUPPRESS)
    ap.add_argument("--child-jobs", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--child-positions", default="on", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    ws = Path(args.ws)
    out = Path(args.out) if args.out else ws.parent / f"{ws.name}-build-out"
    if args.child == "ours":
        print(json.dumps(child_ours(ws, out, args.child_jobs, args.child_positions == "on")))
        return 0
    if args.child == "whole":
        print(json.dumps(child_whole(ws, args.child_jobs)))
        return 0
    if args.child == "bm25s":
        print(json.dumps(child_bm25s(ws)))
        return 0
    jobs = [int(j) for j in args.jobs.split(",")]
    arms = [("ours", j, p) for p in args.positions.split(",") for j in jobs]
    rows = []
    for r in range(args.rounds):
        for _kind, j, p in arms:
            load = _load()
            res = _run(["--ws", ws, "--out", out, "--child", "ours", "--child-jobs", j, "--child-positions", p])
            if args.drop_out:
                shutil.rmtree(out, ignore_errors=True)
            rows.append(dict(res, arm=f"ours jobs={j} positions={p}", mode="in process", round=r, load=load))
            print(json.dumps(rows[-1]), flush=True)
            if args.whole:
                (ws / "config.toml").write_text(f"[retrieval]\npositions = {'true' if p == 'on' else 'false'}\n")
                if args.cold_refs:  # (the lists live in the ledger now, parsed again by the forced index pass)
                    shutil.rmtree(ws / "content" / "refs", ignore_errors=True)
                load = _load()
                got = _run(["--ws", ws, "--child", "whole", "--child-jobs", j])
                got["index_step_s"] = round(got["wall_s"] - got["references_s"], 3)
                rows.append({"arm": f"ours jobs={j} positions={p}", "mode": "whole process", "round": r,
                             "load": load, **got})
                print(json.dumps(rows[-1]), flush=True)
        if not args.no_bm25s:
            load = _load()
            res = _run(["--ws", ws, "--child", "bm25s"])
            rows.append(dict(res, arm="bm25s", mode="in process / whole", round=r, load=load))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
