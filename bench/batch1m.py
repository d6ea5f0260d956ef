"""Where a large BM25 batch spends its time, and the batch beside bm25s, in process and as a CLI batch.

    python -m bench batch1m --ws /work/scale-ws/synth-1m [--queries 20000] [--ks 10,100] [--threads 1,2]
                            [--repeats 3] [--parts profile,api,cli,bounds] [--peer-dir DIR] [--out FILE]
                            [--blocks 256,1024,4096,32768] [--sample 2000] [--orders id,length]

profile  ours alone, one call at a time, per thread count: the seconds of query parsing and lookup
         (``Retriever.plan``), of the scoring kernel (``kernels.dispatch.score_topk`` with the engine's
         cached idf, norm and bounds), of the id -> citekey / run writing (``Ranked.run_chunks``, every
         byte of the TREC run, into memory); the postings of each query's terms (all, and those the
         pruned kernel read in full, streamed past its candidate bitmap, probed: its ``counters``); the
         bytes those reads stream (indices and tf, 8 bytes a posting read in full, 4 a posting streamed)
         against the machine's streaming bandwidth, measured here as one numpy sum over a 1 GiB float64
         array (one thread, median of 3). The share of that limit a thread reaches
         is (those bytes / kernel seconds / threads) / (sum's bytes / sum's seconds).
api      query strings -> TREC run bytes in process: ours ``rank_many`` + ``run_chunks``; bm25s (numba
         backend, its index loaded from ``--peer-dir``) ``tokenize`` + ``retrieve`` + the same lines by
         f-strings, as ``bench.cli_batch``'s peer job writes them. Alternating rounds
         (``bench.timer.paired_time``), per k and thread count; ours with the workspace's config.
cli      ``chitragupta search -w WS --queries Q --run R -k K`` (NUMBA_NUM_THREADS = threads) beside
         ``python -m bench batch1m --peer-run ...`` (bm25s: load the saved index, tokenize, retrieve with
         that many threads, write the run), alternating rounds, whole process wall and CPU.
bounds   what block-max bounds could prune, before any kernel is written for them: for the first
         ``--sample`` queries taking the dense path and each k, the exact k-th score (theta, from the
         kernel) is taken as known in advance -- the best any pruning order can do -- and per block size B
         of ``--blocks`` it reports the share of the query's postings and blocks a block-max pass (BMP:
         a block is read when the sum of the query terms' block maxima reaches theta) must still read,
         and the share of postings MaxScore's essential terms hold with global term bounds against
         per-block bounds (a block's essential terms: those past the smallest whose summed block
         maxima stay below theta), and the share MaxScore's kernel reads in full once theta is reached (the
         essential terms and the one it marks). Beside them, at a k the engine prunes, the share its MaxScore
         kernel read in full (its counters), whose threshold rises tile by tile. Bounds are inflated
         and theta deflated by 1e-9 relative, as the kernel does. Per order of ``--orders``, blocks are cut
         from the documents in that order, simulated (no index is rewritten): ``id``, the index's own;
         ``length``, documents by length ascending, ties by id -- a block then holds documents of one length,
         whose norms, and so whose contributions at a given tf, are alike.

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

    from chitragupta.kernels.types import N_COUNTERS
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
    from chitragupta.kernels import cpu

    dense = cpu.TILED_DENSITY * per_q >= index.n_docs
    out["dense_queries"] = int(dense.sum())
    out["postings_per_dense_query"] = float(per_q[dense].mean()) if dense.any() else 0.0
    out["postings_per_query_p50_p90"] = [float(np.percentile(per_q, 50)), float(np.percentile(per_q, 90))]
    idf, params = index.idf_, r.params
    norm, bounds = index.norm(params.k1, params.b), index.bounds(params)
    for k in ks:
        for threads in threads_list:
            numba.set_num_threads(threads)
            _run_bytes(r.rank_many(texts[-200:], k), qids[-200:])  # warm: kernels loaded
            rows = {"plan": [], "score": [], "ranked": [], "write": []}
            counters = np.zeros(N_COUNTERS, dtype=np.int64)
            for i in range(repeats):
                with stopwatch() as t_plan:
                    p = r.plan(texts)
                c = np.zeros(N_COUNTERS, dtype=np.int64)
                with stopwatch() as t_score:
                    top = score_topk(index.postings, p.batch, params, k, backend=r.backend, idf=idf, norm=norm,
                                     bounds=bounds, counters=c)
                counters = c
                with stopwatch() as t_ranked:
                    ranked = r.rank_many(texts, k)
                with stopwatch() as t_write:
                    n_bytes = _run_bytes(ranked, qids)
                for name, t in (("plan", t_plan), ("score", t_score), ("ranked", t_ranked), ("write", t_write)):
                    rows[name].append((t.wall, t.cpu))
            med = {n: statistics.median(w for w, _ in v) for n, v in rows.items()}
            med_cpu = {f"{n}_cpu_s": statistics.median(c for _, c in v) for n, v in rows.items()}
            read = int(counters[3])
            touched = read + int(counters[4])  # read in full, plus streamed past the candidate bitmap (ids only)
            streamed = read * BYTES_PER_POSTING + int(counters[4]) * 4
            row = {"k": k, "threads": threads, "load": _load(), **{f"{n}_s": v for n, v in med.items()}, **med_cpu,
                   "rank_many_other_s": med["ranked"] - med["plan"] - med["score"],
                   "run_bytes": n_bytes, "postings_read": read, "postings_read_per_query": read / len(texts),
                   "postings_touched_per_query": touched / len(texts), "probes_per_query": int(counters[5]) / len(texts),
                   "counters": counters.tolist(), "streamed_gb_s": streamed / med["score"] / 1e9,
                   "share_of_stream_per_thread": streamed / med["score"] / threads / bw,
                   "share_all_postings_per_thread": float(per_q.sum()) * BYTES_PER_POSTING / med["score"] / threads / bw}
            out["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return out


def _block_coverage_fn():
    from numba import njit

    @njit(cache=False)
    def split(bounds, margin, th):
        """MaxScore's split: the terms in ascending bound, and how many of the first ones are non-essential
        (their bounds' sum, inflated by margin, stays below th)."""
        order = np.argsort(bounds)
        s = 0.0
        ne = 0
        while ne < bounds.shape[0] and (s + bounds[order[ne]]) * margin < th:
            s += bounds[order[ne]]
            ne += 1
        return order, ne

    @njit(cache=False)
    def cover(indptr, indices, tf, fa, da, fb, db, idf, norm, k1p1, q_indptr, q_terms, theta, base, mults, rank,
              out):
        """Per query q: out[q, 0] its postings; per block size base * mults[i], out[q, 1 + 4 i ...] the
        postings and blocks in blocks whose summed maxima reach theta[q], MaxScore's essential postings
        with global bounds and with that block's bounds; last, the essential postings with global bounds
        plus those of the term the kernel marks (the largest non-essential one). Document d lies in block
        rank[d] // base."""
        n_docs = norm.shape[0]
        nb = (n_docs + base - 1) // base
        margin = 1.0 + 1e-9
        for q in range(q_indptr.shape[0] - 1):
            a = q_indptr[q]
            nt = q_indptr[q + 1] - a
            bm = np.zeros((nt, nb))
            cnt = np.zeros((nt, nb), dtype=np.int64)
            tot = 0
            for j in range(nt):
                t = q_terms[a + j]
                w = idf[t]
                for p in range(indptr[t], indptr[t + 1]):
                    d = indices[p]
                    f = np.float64(tf[p])
                    if da != 0.0:
                        f += da * fa[p]
                    if db != 0.0:
                        f += db * fb[p]
                    c = w * f * k1p1 / (f + norm[d]) if f > 0.0 else 0.0
                    b = rank[d] // base
                    bm[j, b] = max(bm[j, b], c)
                    cnt[j, b] += 1
                tot += indptr[t + 1] - indptr[t]
            out[q, 0] = tot
            th = theta[q] / margin
            g = np.zeros(nt)
            for j in range(nt):
                for b in range(nb):
                    g[j] = max(g[j], bm[j, b])
            order, ne = split(g, margin, th)
            ess_g = 0
            for i in range(ne, nt):
                t = q_terms[a + order[i]]
                ess_g += indptr[t + 1] - indptr[t]
            marked = 0
            if 0 < ne < nt:  # the kernel also reads the largest non-essential term in full (its bitmap)
                t = q_terms[a + order[ne - 1]]
                marked = indptr[t + 1] - indptr[t]
            out[q, 1 + 4 * mults.shape[0]] = ess_g + marked
            for i in range(mults.shape[0]):
                m = mults[i]
                vp = 0
                vb = 0
                ess_b = 0
                ub = np.zeros(nt)
                for b0 in range(0, nb, m):
                    ub[:] = 0.0
                    c_all = np.zeros(nt, dtype=np.int64)
                    for j in range(nt):
                        for b in range(b0, min(b0 + m, nb)):
                            ub[j] = max(ub[j], bm[j, b])
                            c_all[j] += cnt[j, b]
                    if ub.sum() * margin >= th:
                        vb += 1
                        vp += c_all.sum()
                    order, ne = split(ub, margin, th)
                    for r in range(ne, nt):
                        ess_b += c_all[order[r]]
                out[q, 1 + 4 * i] = vp
                out[q, 2 + 4 * i] = vb
                out[q, 3 + 4 * i] = ess_g
                out[q, 4 + 4 * i] = ess_b
    return cover


def block_coverage(postings, batch, theta, idf, norm, params, blocks, rank=None) -> np.ndarray:
    """``bounds``'s figures per query (the module docstring): an (n_queries, 2 + 4 * len(blocks)) int64
    array -- postings; then per block size, postings and blocks a block-max pass reads, MaxScore's
    essential postings with global bounds and with per-block bounds; last, the postings MaxScore's kernel
    reads in full once theta is reached (the essential ones and the marked term's). ``blocks`` are multiples of the
    smallest; theta the k-th score each query is known to reach (0 where it has fewer than k hits).
    ``rank`` (a permutation of the document ids; None: the identity) is the position of each document in
    the order blocks are cut from: the counts an index renumbered by it would give (``doc_order``)."""
    base = min(blocks)
    if any(b % base for b in blocks):
        raise ValueError(f"block sizes must be multiples of the smallest, got {blocks}")
    fields = [(np.ascontiguousarray(postings.fields[name], dtype=np.int32), float(delta))
              for name, delta in params.active_fields()]
    if len(fields) > 2:
        raise ValueError(f"at most 2 weighted fields, got {len(fields)}")
    empty = np.zeros(0, dtype=np.int32)
    while len(fields) < 2:
        fields.append((empty, 0.0))
    n_docs = postings.n_docs
    rank = np.arange(n_docs, dtype=np.int64) if rank is None else np.asarray(rank, dtype=np.int64)
    if rank.shape != (n_docs,) or not np.array_equal(np.sort(rank), np.arange(n_docs)):
        raise ValueError(f"rank must be a permutation of the {n_docs} document ids")
    out = np.zeros((batch.n_queries, 2 + 4 * len(blocks)), dtype=np.int64)
    _block_coverage_fn()(np.asarray(postings.indptr), np.asarray(postings.indices), np.asarray(postings.tf),
                         fields[0][0], fields[0][1], fields[1][0], fields[1][1], idf, norm,
                         float(params.k1 + 1.0), batch.indptr.astype(np.int64), batch.terms.astype(np.int64),
                         np.asarray(theta, dtype=np.float64), int(base),
                         np.array([b // base for b in blocks], dtype=np.int64), rank, out)
    return out


ORDERS = ("id", "length")


def doc_order(postings, order: str) -> np.ndarray:
    """The rank (new position) of each document under ``order`` (``ORDERS``): ``id``, the identity;
    ``length``, ascending document length, ties by ascending id."""
    n = postings.n_docs
    if order == "id":
        return np.arange(n, dtype=np.int64)
    if order == "length":
        perm = np.lexsort((np.arange(n), np.asarray(postings.doc_len)))  # documents in the new order
        rank = np.empty(n, dtype=np.int64)
        rank[perm] = np.arange(n, dtype=np.int64)
        return rank
    raise ValueError(f"unknown document order {order!r}; expected one of {', '.join(ORDERS)}")


def bounds(ws_root: Path, texts: list[str], ks, blocks, sample: int, orders=("id",)) -> dict:
    from chitragupta.kernels import cpu
    from chitragupta.kernels.dispatch import score_topk
    from chitragupta.kernels.types import N_COUNTERS, QueryBatch

    r = _retriever(ws_root)
    index = r.index
    postings = index.postings
    df = np.diff(np.asarray(postings.indptr))
    plan = r.plan(texts)
    batch = plan.batch
    lens = np.diff(batch.indptr)
    per_q = np.array([int(df[batch.terms[batch.indptr[i]:batch.indptr[i + 1]]].sum()) for i in range(batch.n_queries)])
    rows = np.flatnonzero((cpu.TILED_DENSITY * per_q >= index.n_docs) & (lens > 0))[:sample]
    q_indptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lens[rows], out=q_indptr[1:])
    terms = np.concatenate([batch.terms[batch.indptr[i]:batch.indptr[i + 1]] for i in rows]) if rows.size else \
        batch.terms[:0]
    sub = QueryBatch(indptr=q_indptr, terms=terms)
    params = r.params
    idf, norm = index.idf_, index.norm(params.k1, params.b)
    out = {"n_docs": index.n_docs, "queries": int(rows.size), "blocks": list(blocks), "rows": []}
    ranks = {o: doc_order(postings, o) for o in orders}
    for k in ks:
        c = np.zeros(N_COUNTERS, dtype=np.int64)
        top = score_topk(postings, sub, params, k, backend=r.backend, idf=idf, norm=norm, bounds=index.bounds(params),
                         counters=c)
        theta = np.where(np.isfinite(top.scores[:, k - 1]), top.scores[:, k - 1], 0.0)
        for order in orders:
            cov = block_coverage(postings, sub, theta, idf, norm, params, blocks, rank=ranks[order])
            total = float(cov[:, 0].sum())
            for i, b in enumerate(blocks):
                n_blocks = rows.size * -(-index.n_docs // b)
                row = {"k": k, "order": order, "block": b, "load": _load(),
                       "bmp_postings_share": float(cov[:, 1 + 4 * i].sum()) / total,
                       "bmp_blocks_share": float(cov[:, 2 + 4 * i].sum()) / n_blocks,
                       "maxscore_essential_share_global": float(cov[:, 3 + 4 * i].sum()) / total,
                       "maxscore_essential_share_block": float(cov[:, 4 + 4 * i].sum()) / total,
                       "maxscore_read_share_at_theta": float(cov[:, -1].sum()) / total,
                       "kernel_read_in_full_share": float(c[3]) / total if c[3] else None}
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
    ap.add_argument("--blocks", default="256,1024,4096,32768", help="bounds: block sizes (documents)")
    ap.add_argument("--sample", type=int, default=2000, help="bounds: dense queries analysed")
    ap.add_argument("--orders", default="id",
                    help=f"bounds: document orders blocks are cut from ({', '.join(ORDERS)})")
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
    if "bounds" in parts:
        orders = [o for o in args.orders.split(",") if o]
        bad = [o for o in orders if o not in ORDERS]
        if bad:
            ap.error(f"unknown --orders {', '.join(bad)}; expected {', '.join(ORDERS)}")
        res["bounds"] = bounds(args.ws, texts, ks, ints(args.blocks), args.sample, orders)
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
