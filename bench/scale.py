"""Speed at scale, side by side with bm25s: queries/s, index build, peak memory, first CLI query.

    python -m bench scale [--sizes scifact,100k,1m] [--queries 1000,10000] [--ks 10,1000] [--threads 1,2]
                          [--repeats 3] [--ws-root /work/scale-ws] [--out bench/out/scale.json]

Corpora: ``scifact`` is the real collection (5,183 documents, the workspace ``bench.speed`` uses); ``100k``
and ``1m`` (any ``<n>k`` / ``<n>m``) are ``bench.synth`` workspaces under ``--ws-root``
(``synth-100k``, ...), generated from scifact's statistics with seed 0 when missing.

Per corpus, each in its own subprocess so that peak RSS is its own:
  build    ours: ``refresh(force=True)`` -- read every parsed file, tokenize, CSR, write + fsync the cache
           bm25s: read corpus.jsonl, tokenize, index (in memory), in the paired child below
  queries  a seeded stress set of 10,000 windows of 4-16 words cut from random documents (bench.speed's
           stress set, drawn from the parsed files); the 1,000-query set is its first 1,000. End to end:
           query strings -> top-k citekeys (tokenization, vocabulary lookup, id -> key included), per k
           and thread count, as queries per wall second and per CPU second of the process (all threads).
           Ours (numba backend, acronym expansion off, so both engines score the same tokens) and bm25s
           run in one process in alternating rounds (ours, bm25s; bm25s, ours; ...) after a warm-up of
           each on the set's last 200 queries and one untimed call on the set; each engine's figure is the
           median of ``--repeats`` rounds (a round repeats a call shorter than 0.5 s and averages) and
           every round's ratio is kept. k=10 is measured again, ours alone, with the shipped
           defaults (expansion on) unless ``--no-shipped``.
  first    the wall (and CPU) time of ``chitragupta search -w WS "..."`` from process start to exit, the
           first call (after the build, unless ``--no-build``) and the median of 3 more; once with numba's
           cache pointed at an empty folder (a fresh install's first query: every kernel it needs
           compiled); and once with the stamp removed (the full up-to-date check that every open paid
           before: every ledger row read, every parsed file statted).
The load average is recorded beside every figure: the host is shared.
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
import tempfile
import time
from pathlib import Path


from bench.data import REPO, WORK, data_dir
from bench.timer import median_time, paired_time, run_timed, stopwatch

N_QUERIES = 10_000
WARM = 200  # warm-up queries (JIT, page cache): the stress set's last 200
DEFAULT_WS_ROOT = Path(os.environ.get("CHITRAGUPTA_SCALE_WS", "/work/scale-ws"))


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def size_docs(size: str) -> int | None:
    s = size.lower()
    if s == "scifact":
        return None
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1])
    if mult is None or not s[:-1].isdigit():
        raise SystemExit(f"unknown size {size!r}: scifact, or <n>k / <n>m")
    return int(s[:-1]) * mult


def workspace(size: str, ws_root: Path) -> Path:
    """The workspace for a size (synthetic ones generated when missing; not indexed here)."""
    n = size_docs(size)
    if n is None:
        from bench.data import workspace_for

        return workspace_for(data_dir() / "scifact" / "corpus.jsonl", "scifact")
    root = ws_root / f"synth-{size.lower()}"
    if not root.exists():
        from bench import synth

        stats = synth.fit(data_dir() / "scifact")
        synth.write_workspace(stats, n, root, seed=0, log=lambda m: print(m, file=sys.stderr, flush=True))
    return root


def _settle(ws_root: Path) -> None:
    """Wait until content/parsed/ is ``RACY_NS`` old: a build that starts sooner (a workspace generated a
    moment ago) cannot record its stamp (``chitragupta.engine.index.manage``), so the first query would pay the full
    check that ``first_query`` measures on its own."""
    from chitragupta.engine.index.manage import RACY_NS

    for folder in (ws_root / "content" / "parsed", ws_root / "content" / "parsed" / "packs"):  # (import's packs)
        if folder.is_dir():
            age = time.time_ns() - os.stat(folder).st_mtime_ns
            if age < RACY_NS:
                time.sleep((RACY_NS - age) / 1e9 + 0.05)


def stress_queries(ws_root: Path, n: int = N_QUERIES, seed: int = 0) -> list[str]:
    """``bench.speed``'s stress set drawn from a workspace's parsed files: windows of 4-16 words."""
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws_root / "content" / "ledger.sqlite", create=False) as led:
        rows = [r for r in led.index_view() if r[2] == "parsed" and r[3]]
    from bench.speed import stress_queries as windows
    from chitragupta.engine.index.source import read_text

    class _Texts:  # read a parsed file only when the draw picks it
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return read_text(ws_root / rows[i][3])  # a parsed file, or a packed text (the one text path)

    return windows(_Texts(), n, seed)


def _figures(n: int, wall: float, cpu: float) -> dict:
    return {"e2e_qps": n / wall, "qps_per_cpu_s": n / cpu, "load": _load()}


# -- children ----------------------------------------------------------------------------------------------
def child_build(ws_root: Path) -> dict:
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.workspace import Workspace

    ws = Workspace.open(ws_root)
    with stopwatch() as took:
        opened = refresh(ws, force=True)
    rep = opened.report
    return {"n_docs": rep.n_docs, "n_terms": rep.n_terms, "nnz": rep.nnz, "build_s": took.wall,
            "peak_rss_mb": _peak_mb(), "load": _load()}


def _retriever(ws_root: Path, expansion: bool):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.library.workspace import Workspace

    cfg = ws_root / "config.toml"
    config = load_config(cfg if cfg.is_file() else None, overrides={"retrieval": {"acronym_expansion": expansion}})
    return Retriever.open(Workspace.open(ws_root, config), backend="numba")


def child_ours(ws_root: Path, qfile: Path, plan: dict) -> dict:
    """Same tokens as bm25s (acronym expansion off); then k=10 with the shipped defaults (expansion on)."""
    import numba

    queries = json.loads(qfile.read_text())
    out = {"engine": "chitragupta (numba)", "batch": {}, "shipped": {}}
    # beside bm25s, the expansion-off rows are timed in the paired child instead (child_pair)
    runs = ([] if plan.get("paired") else [(False, "batch", plan["ks"])]) + (
        [(True, "shipped", [min(plan["ks"])])] if plan.get("shipped", True) else [])
    for expansion, table, ks in runs:
        r = _retriever(ws_root, expansion)
        keys = r.index.citekeys.to_list()
        out["n_docs"] = r.index.n_docs
        for nq in plan["queries"]:
            qs = queries[:nq]
            for k in ks:
                def e2e(qs=qs, k=k):
                    ids = r.rank_many(qs, k).topk.ids
                    return [[keys[i] for i in row if i >= 0] for row in ids.tolist()]

                for threads in plan["threads"]:
                    numba.set_num_threads(threads)
                    wall, cpu = median_time(e2e, plan["repeats"], warm=lambda: e2e(queries[-WARM:], k))
                    out[table][f"q{nq}/k{k}/t{threads}"] = _figures(nq, wall, cpu)
    out["peak_rss_mb"] = _peak_mb()
    return out


def _read_corpus(ws_root: Path) -> tuple[list[str], list[str]]:
    """Citekeys and title + newline + text, from the corpus.jsonl the workspace was imported from."""
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws_root / "content" / "ledger.sqlite", create=False) as led:
        origin = led.get_meta("last_source")
    path = Path(origin) if Path(origin).is_absolute() else ws_root / origin
    keys, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                keys.append(str(d["_id"]))
                texts.append((d.get("title") or "") + "\n" + (d.get("text") or ""))
    return keys, texts


def child_pair(ws_root: Path, qfile: Path, plan: dict) -> dict:
    """bm25s built here and ours opened beside it in this one process; each (queries, k, threads) timed in
    alternating rounds, so the ratio compares runs seconds apart, not minutes (this host's speed swings by a
    third between minutes). Ours with acronym expansion off: both engines score the same tokens."""
    import numba

    from bench.peers import Bm25s

    queries = json.loads(qfile.read_text())
    with stopwatch() as read:
        keys, texts = _read_corpus(ws_root)
    read_s = read.wall
    peer = Bm25s()
    with stopwatch() as build:
        peer.build(texts)
    build_s = build.wall
    del texts
    out = {"engine": f"bm25s {peer.version} (numba)", "n_docs": len(keys), "build_s": build_s, "read_s": read_s,
           "build_peak_rss_mb": _peak_mb(), "batch": {}, "ours": {}}
    r = _retriever(ws_root, False)
    ours_keys = r.index.citekeys.to_list()
    for nq in plan["queries"]:
        qs = queries[:nq]
        for k in plan["ks"]:
            for threads in plan["threads"]:
                def theirs(qs=qs, k=k, threads=threads):
                    found, _scores = peer.search(qs, k, threads, distinct=False)
                    return [[keys[i] for i in row] for row in found.tolist()]

                def ours(qs=qs, k=k):
                    ids = r.rank_many(qs, k).topk.ids
                    return [[ours_keys[i] for i in row if i >= 0] for row in ids.tolist()]

                numba.set_num_threads(threads)
                ours(queries[-WARM:])
                theirs(queries[-WARM:])
                o, p = paired_time(ours, theirs, plan["repeats"])
                key = f"q{nq}/k{k}/t{threads}"
                med = lambda xs, j: statistics.median(x[j] for x in xs)  # noqa: E731
                out["ours"][key] = _figures(nq, med(o, 0), med(o, 1))
                out["batch"][key] = _figures(nq, med(p, 0), med(p, 1))
                out["ours"][key]["round_ratios"] = [pw / ow for (ow, _), (pw, _) in zip(o, p)]
    out["peak_rss_mb"] = _peak_mb()
    return out


def first_query(ws_root: Path, query: str) -> dict:
    from chitragupta.engine.index.manage import verified_path
    from chitragupta.engine.library.workspace import Workspace

    exe = Path(sys.executable).with_name("chitragupta")
    cmd = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "chitragupta.cli.main"]),
           "search", "-w", str(ws_root), query, "-k", "10"]

    cpu: list[float] = []

    def once(env=None) -> float:
        took = run_timed(cmd, env=env)
        cpu.append(took["cpu_s"])
        return took["wall_s"]

    load = _load()
    first = once()
    warm = [once() for _ in range(3)]
    with tempfile.TemporaryDirectory() as empty:  # numba's cache empty: a fresh install's first query
        cold = once({**os.environ, "NUMBA_CACHE_DIR": empty})
    verified_path(Workspace.open(ws_root), "document").unlink(missing_ok=True)
    full = once()  # the full check (and it records the stamp again)
    after = once()
    return {"command": "chitragupta " + " ".join(cmd[-6:]), "first_s": first, "first_cpu_s": cpu[0],
            "median_s": statistics.median(warm), "median_cpu_s": statistics.median(cpu[1:4]), "jit_cold_s": cold,
            "jit_cold_cpu_s": cpu[4], "full_check_s": full, "full_check_cpu_s": cpu[5], "after_full_s": after,
            "load": load}


def _child(kind: str, ws_root: str, qfile: str | None, plan: str) -> dict:
    plan_d = json.loads(plan)
    if kind == "build":
        return child_build(Path(ws_root))
    return {"ours": child_ours, "bm25s": child_pair}[kind](Path(ws_root), Path(qfile), plan_d)


def _run_child(kind: str, ws_root: Path, qfile: Path | None, plan: dict) -> dict:
    args = [sys.executable, "-m", "bench.scale", "--child", kind, "--child-ws", str(ws_root),
            "--child-plan", json.dumps(plan)] + (["--child-queries", str(qfile)] if qfile else [])
    with stopwatch() as took:
        p = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:], "wall_s": took.wall}
    got = json.loads(p.stdout.strip().splitlines()[-1])
    got["wall_s"] = took.wall
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="scifact,100k,1m")
    ap.add_argument("--queries", default="1000,10000", help="query-set sizes (prefixes of one stress set)")
    ap.add_argument("--ks", default="10,1000")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default="ours,bm25s")
    ap.add_argument("--no-shipped", action="store_true", help="skip the shipped-defaults (expansion on) rows")
    ap.add_argument("--no-build", action="store_true", help="reuse the current index (no build figures)")
    ap.add_argument("--ws-root", default=str(DEFAULT_WS_ROOT))
    ap.add_argument("--out", default=str(WORK / "scale.json"))
    ap.add_argument("--child", choices=["build", "ours", "bm25s"], help=argparse.SUPPRESS)
    ap.add_argument("--child-ws", help=argparse.SUPPRESS)
    ap.add_argument("--child-queries", help=argparse.SUPPRESS)
    ap.add_argument("--child-plan", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.child_ws, args.child_queries, args.child_plan)))
        return 0
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    engines = args.engines.split(",")
    plan = {"queries": ints(args.queries), "ks": ints(args.ks), "threads": ints(args.threads), "repeats": args.repeats,
            "shipped": not args.no_shipped, "paired": "bm25s" in engines}
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    results = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                           "cpus": os.cpu_count()}, "plan": plan, "command": "python -m bench scale " + " ".join(
                               sys.argv[1:] if argv is None else argv), "sizes": {}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in args.sizes.split(","):
        ws_root = workspace(size, Path(args.ws_root))
        res = results["sizes"][size] = {"workspace": str(ws_root)}
        if not args.no_build:
            _settle(ws_root)
            log(f"[{size}] building the index ...")
            res["build"] = _run_child("build", ws_root, None, plan)
            log(f"[{size}] build: {json.dumps(res['build'])}")
        queries = stress_queries(ws_root, max(plan["queries"]))
        qfile = out.parent / f"scale-queries-{size}.json"
        qfile.write_text(json.dumps(queries))
        if "ours" in engines:
            res["first_query"] = first_query(ws_root, queries[0])
            log(f"[{size}] first query: {json.dumps(res['first_query'])}")
        for engine in engines:
            if engine == "ours" and not plan["shipped"] and plan["paired"]:
                continue  # nothing left for ours alone: its expansion-off rows are timed beside bm25s
            log(f"[{size}] {engine} queries ...")
            res[engine] = _run_child(engine, ws_root, qfile, plan)
            log(f"[{size}] {engine}: {json.dumps(res[engine])}")
            out.write_text(json.dumps(results, indent=1))
    out.write_text(json.dumps(results, indent=1))
    print(report(results))
    return 0


def report(res: dict) -> str:
    plan = res["plan"]
    lines = ["Ours and bm25s timed in one process, in alternating rounds (median of the rounds; the ratio's range "
             "is over the rounds):", "",
             "| corpus | queries | k | threads | ours e2e q/s | bm25s e2e q/s | ratio (range) | ours q per CPU-s | "
             "bm25s q per CPU-s | ratio | load (1 min) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for size, r in res["sizes"].items():
        ours, peer = r.get("ours", {}), r.get("bm25s", {})
        n = ours.get("n_docs") or peer.get("n_docs") or "?"
        for key, o in (peer.get("ours") or ours.get("batch", {})).items():
            p = peer.get("batch", {}).get(key)
            nq, k, t = key.split("/")
            pq = f"{p['e2e_qps']:,.0f}" if p else "-"
            rr = o.get("round_ratios") or []
            span = f" ({min(rr):.2f}-{max(rr):.2f})" if rr else ""
            ratio = f"{o['e2e_qps'] / p['e2e_qps']:.2f}x{span}" if p else "-"
            pc = f"{p['qps_per_cpu_s']:,.0f}" if p else "-"
            cratio = f"{o['qps_per_cpu_s'] / p['qps_per_cpu_s']:.2f}x" if p else "-"
            lines.append(f"| {size} ({n:,} docs) | {nq[1:]} | {k[1:]} | {t[1:]} | {o['e2e_qps']:,.0f} | {pq} | {ratio} "
                         f"| {o['qps_per_cpu_s']:,.0f} | {pc} | {cratio} | {o['load'][0]} |")
    lines += ["", "Shipped defaults (acronym expansion on; the rows above have it off, the same tokens as bm25s):", "",
              "| corpus | queries | k | threads | ours e2e q/s, expansion on | q per CPU-s |", "|---|---|---|---|---|---|"]
    for size, r in res["sizes"].items():
        for key, o in r.get("ours", {}).get("shipped", {}).items():
            nq, k, t = key.split("/")
            lines.append(f"| {size} | {nq[1:]} | {k[1:]} | {t[1:]} | {o['e2e_qps']:,.0f} | {o['qps_per_cpu_s']:,.0f} |")
    lines += ["", "| corpus | ours build s | ours build peak RSS MB | postings | bm25s build s (+ read) | "
                  "bm25s peak RSS MB (build / all) | first CLI query s, wall (first / median of 3) | full check instead | "
                  "numba cache empty |",
              "|---|---|---|---|---|---|---|---|---|"]
    for size, r in res["sizes"].items():
        b, p, f = r.get("build", {}), r.get("bm25s", {}), r.get("first_query", {})
        lines.append(
            f"| {size} | {b.get('build_s', float('nan')):.1f} | {b.get('peak_rss_mb', float('nan')):,.0f} | "
            f"{b.get('nnz', 0):,} | {p.get('build_s', float('nan')):.1f} (+{p.get('read_s', float('nan')):.1f}) | "
            f"{p.get('build_peak_rss_mb', float('nan')):,.0f} / {p.get('peak_rss_mb', float('nan')):,.0f} | "
            f"{f.get('first_s', float('nan')):.2f} / {f.get('median_s', float('nan')):.2f} (CPU "
            f"{f.get('first_cpu_s', float('nan')):.2f} / {f.get('median_cpu_s', float('nan')):.2f}) | "
            f"{f.get('full_check_s', float('nan')):.2f} (CPU {f.get('full_check_cpu_s', float('nan')):.2f}) | "
            f"{f.get('jit_cold_s', float('nan')):.2f} (CPU {f.get('jit_cold_cpu_s', float('nan')):.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
