"""Where a large BM25 batch spends its time, and the batch beside bm25s, in process and as a CLI batch.

    python -m bench batch1m --ws /work/scale-ws/synth-1m [--queries 20000] [--ks 10,100] [--threads 1,2]
                            [--repeats 3] [--parts profile,api,cli] [--peer-dir DIR] [--out FILE]

profile  ours alone, one call at a time, per thread count: the seconds of query parsing and lookup
         (``Retriever.plan``), of the scoring kernel (``kernels.dispatch.score_topk`` with the engine's
         cached idf and norm), of the id -> citekey / run writing (``Ranked.run_chunks``, every
         byte of the TREC run, into memory); the postings of each query's terms; the bytes those reads
         stream (indices and tf, 8 bytes a posting) against the machine's streaming bandwidth, measured
         here as one numpy sum over a 1 GiB float64 array (one thread, median of 3). The share of that
         limit a thread reaches is (those bytes / kernel seconds / threads) / (sum's bytes / sum's seconds).
api      query strings -> TREC run bytes in process: ours ``rank_many`` + ``run_chunks``; bm25s (numba
         backend, its index loaded from ``--peer-dir``) ``tokenize`` + ``retrieve`` + the same lines by
         f-strings, as ``bench.cli_batch``'s peer job writes them. Alternating rounds
         (``bench.timer.paired_time``), per k and thread count; ours with the workspace's config.
cli      ``chitragupta search -w WS --queries Q --run R -k K`` (NUMBA_NUM_THREADS = threads) beside
         ``python -m bench batch1m --peer-run ...`` (bm25s: load the saved index, tokenize, retrieve with
         that many threads, write the run), alternating rounds, whole process wall and CPU.

The queries are ``bench.scale``'s seeded stress set; the bm25s index is built once (``--peer-dir``,
default ``bench/out/batch1m/bm25s-<ws name>``) from the workspace's corpus.jsonl. At 1M documents run it
under ``flock /work/wt/heavy.lock``. The load average is recorded beside every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.timer import paired_time, run_timed, stopwatch

BYTES_PER_POSTING = 8  # int32 document id + int32 tf


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def stream_bandwidth(n_bytes: int = 1 << 30, repeats: int = 3) -> float:
    """Bytes per second one thread streams: a numpy sum over an ``n_bytes`` float64 array (median)."""
    a = np.ones(n_bytes // 8)
    a.sum()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a.sum()
        times.append(time.perf_counter() - t)
    return a.nbytes / statistics.median(times)


def _queries(ws_root: Path, n: int, folder: Path) -> tuple[Path, list[str]]:
    from bench.scale import stress_queries

    path = folder / f"{ws_root.name}-q{n}.jsonl"
    if not path.exists():
        qs = stress_queries(ws_root, n)
        path.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(qs)),
                        encoding="utf-8")
    return path, [json.loads(x)["text"] for x in path.read_text(encoding="utf-8").splitlines()]


def _peer_index(ws_root: Path, folder: Path) -> Path:
    if (folder / "keys.json").exists():
        return folder
    from bench.cli_batch import _peer_index as build

    return build(ws_root, folder)


def _retriever(ws_root: Path):
    from chitragupta.engine.search.bm25 import Retriever

    return Retriever.open(ws_root, update=False, backend="numba")


def _run_bytes(ranked, qids) -> int:
    n = 0
    for chunk in ranked.run_chunks(qids, fmt="trec"):
        n += len(chunk)
    return n


def profile(ws_root: Path, texts: list[str], ks, threads_list, repeats: int) -> dict:
    import numba

    from chitragupta.kernels.dispatch import score_topk

    bw = stream_bandwidth()
    r = _retriever(ws_root)
    index = r.index
    qids = [f"q{i}" for i in range(len(texts))]
    out = {"stream_gb_s": bw / 1e9, "n_docs": index.n_docs, "queries": len(texts), "rows": []}
    df = np.diff(np.asarray(index.postings.indptr))
    plan = r.plan(texts)
    batch = plan.batch
    per_q = np.add.reduceat(np.append(df[batch.terms], 0), batch.indptr[:-1]) if batch.terms.size else \
        np.zeros(batch.n_queries, dtype=np.int64)
    per_q = np.where(np.diff(batch.indptr) > 0, per_q, 0)
    out["terms_per_query"] = float(np.diff(batch.indptr).mean())
    out["postings_per_query"] = float(per_q.mean())
    out["postings_per_query_p50_p90"] = [float(np.percentile(per_q, 50)), float(np.percentile(per_q, 90))]
    idf, params = index.idf_, r.params
    norm = index.norm(params.k1, params.b)
    for k in ks:
        for threads in threads_list:
            numba.set_num_threads(threads)
            _run_bytes(r.rank_many(texts[-200:], k), qids[-200:])  # warm: kernels loaded
            rows = {"plan": [], "score": [], "ranked": [], "write": []}
            for i in range(repeats):
                with stopwatch() as t_plan:
                    p = r.plan(texts)
                with stopwatch() as t_score:
                    score_topk(index.postings, p.batch, params, k, backend=r.backend, idf=idf, norm=norm)
                with stopwatch() as t_ranked:
                    ranked = r.rank_many(texts, k)
                with stopwatch() as t_write:
                    n_bytes = _run_bytes(ranked, qids)
                for name, t in (("plan", t_plan), ("score", t_score), ("ranked", t_ranked), ("write", t_write)):
                    rows[name].append((t.wall, t.cpu))
            med = {n: statistics.median(w for w, _ in v) for n, v in rows.items()}
            med_cpu = {f"{n}_cpu_s": statistics.median(c for _, c in v) for n, v in rows.items()}
            streamed = float(per_q.sum()) * BYTES_PER_POSTING
            row = {"k": k, "threads": threads, "load": _load(), **{f"{n}_s": v for n, v in med.items()}, **med_cpu,
                   "rank_many_other_s": med["ranked"] - med["plan"] - med["score"],
                   "run_bytes": n_bytes, "streamed_gb_s": streamed / med["score"] / 1e9,
                   "share_of_stream_per_thread": streamed / med["score"] / threads / bw}
            out["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def api(ws_root: Path, peer_dir: Path, texts: list[str], ks, threads_list, repeats: int) -> list[dict]:
    import numba

    from bench.peers import Bm25s

    r = _retriever(ws_root)
    qids = [f"q{i}" for i in range(len(texts))]
    peer = Bm25s()
    peer.tokenizer.load_vocab(str(peer_dir))
    import bm25s

    peer.model = bm25s.BM25.load(str(peer_dir), mmap=False, override_params={"backend": "numba"},
                                 show_progress=False)
    keys = json.loads((peer_dir / "keys.json").read_text(encoding="utf-8"))
    rows = []
    for k in ks:
        for threads in threads_list:
            def ours(k=k):
                return _run_bytes(r.rank_many(texts, k), qids)

            def theirs(k=k, threads=threads):
                docs, scores = peer.search(texts, k, threads, distinct=False)
                text = "".join("".join(f"{qid} Q0 {keys[d]} {n} {s:.10g} bm25s\n"
                                       for n, (d, s) in enumerate(zip(row, srow), start=1) if s > 0)
                               for qid, row, srow in zip(qids, docs.tolist(), scores.tolist()))
                return len(text)

            numba.set_num_threads(threads)
            o, p = paired_time(ours, theirs, repeats)  # one untimed call of each first (JIT, caches)
            wo, wp = statistics.median(x[0] for x in o), statistics.median(x[0] for x in p)
            row = {"k": k, "threads": threads, "ours_s": wo, "bm25s_s": wp, "ratio": wp / wo,
                   "round_ratios": [round(pw / ow, 3) for (ow, _), (pw, _) in zip(o, p)], "load": _load()}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def peer_run(index_dir: str, qfile: str, out: str, k: int, threads: int) -> None:
    """bm25s as a whole-process batch: ``bench.cli_batch.peer_run`` (numba backend) with ``threads``."""
    from bench.cli_batch import peer_run as run

    run(index_dir, qfile, out, k, "numba", threads)


def cli(ws_root: Path, peer_dir: Path, qfile: Path, ks, threads_list, repeats: int, folder: Path) -> list[dict]:
    exe = Path(sys.executable).with_name("chitragupta")
    rows = []
    for k in ks:
        for threads in threads_list:
            env = {**os.environ, "NUMBA_NUM_THREADS": str(threads)}
            cmds = {"ours": [str(exe), "search", "-w", str(ws_root), "--queries", str(qfile), "--run",
                             str(folder / "ours.trec"), "-k", str(k)],
                    "bm25s": [sys.executable, "-m", "bench.batch1m", "--peer-run", str(peer_dir), str(qfile),
                              str(folder / "bm25s.trec"), str(k), str(threads)]}
            for c in cmds.values():  # untimed: page cache, numba's cache
                run_timed(c, env=env)
            got = {n: [] for n in cmds}
            load = _load()
            for i in range(repeats):
                for n in (("ours", "bm25s") if i % 2 == 0 else ("bm25s", "ours")):
                    t = run_timed(cmds[n], env=env)
                    got[n].append((t["wall_s"], t["cpu_s"]))
            med = {n: statistics.median(w for w, _ in v) for n, v in got.items()}
            row = {"k": k, "threads": threads, "ours_s": med["ours"], "bm25s_s": med["bm25s"],
                   "ratio": med["bm25s"] / med["ours"],
                   "round_ratios": [round(b[0] / o[0], 3) for o, b in zip(got["ours"], got["bm25s"])],
                   "ours_cpu_s": statistics.median(c for _, c in got["ours"]),
                   "bm25s_cpu_s": statistics.median(c for _, c in got["bm25s"]), "load": load, "load_after": _load()}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--peer-run"]:
        d, q, out, k, threads = argv[1:6]
        peer_run(d, q, out, int(k), int(threads))
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench batch1m", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ws", type=Path, default=Path("/work/scale-ws/synth-1m"))
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="profile,api,cli")
    ap.add_argument("--peer-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from bench.data import WORK

    folder = WORK / "batch1m"
    folder.mkdir(parents=True, exist_ok=True)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ks, threads = ints(args.ks), ints(args.threads)
    parts = set(args.parts.split(","))
    qfile, texts = _queries(args.ws, args.queries, folder)
    res = {"ws": str(args.ws), "queries": len(texts), "cpus": os.cpu_count(), "command": "python -m bench batch1m "
           + " ".join(argv)}
    if "profile" in parts:
        res["profile"] = profile(args.ws, texts, ks, threads, args.repeats)
    if parts & {"api", "cli"}:
        peer_dir = _peer_index(args.ws, args.peer_dir or folder / f"bm25s-{args.ws.name}")
        if "api" in parts:
            res["api"] = api(args.ws, peer_dir, texts, ks, threads, args.repeats)
        if "cli" in parts:
            res["cli"] = cli(args.ws, peer_dir, qfile, ks, threads, args.repeats, folder)
    out = args.out or folder / f"batch1m-{args.ws.name}.json"
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
