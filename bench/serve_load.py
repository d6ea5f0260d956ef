"""The MCP server under load, as agents use it: several calls in flight on one session while another
process re-indexes the workspace.

    python -m bench serve_load [--corpus scifact] [--docs 1000] [--extra 100] [--clients 4] [--calls 500]
                               [--idle 50] [--parts idle,pipelined,during,load] [--no-embed] [--work DIR]
                               [--out bench/out/serve_load.json]

The workspace: the first ``--docs`` records of the collection's corpus.jsonl imported, indexed, and (unless
``--no-embed``) embedded (``enrich --stages embed --device cpu``: hybrid calls need the store); it is
built once under ``--work`` and rebuilt when it is missing or ``--fresh`` is given.

  idle    ``--idle`` sequential BM25 calls (the collection's queries), one at a time: p50 and p99 of the
          round trip through the MCP SDK's own stdio client.
  during  the same BM25 calls, one at a time, while a second task keeps a hybrid call in flight the whole
          time: p50 and p99, and the ratio of the p50 to idle's. Idle and during alternate in 5 blocks.
  pipelined  the same BM25 calls sent at once (median wall of 3 rounds), and its ratio to idle's p50.
  load    ``--clients`` tasks on one session, each making ``--calls`` calls drawn in turn from bm25, passage,
          hybrid and filtered (a ``keys`` filter allowing half the sources), while a separate process
          re-indexes twice: at a third of the calls ``import`` adds ``--extra`` records and ``index`` builds
          generation B; at two thirds ``index --force`` builds B again. Every reply is checked: not an
          error, and its hits equal to what the CLI answers (``SearchRequest.run_one`` on a searcher opened
          afresh, the code ``chitragupta search --json`` runs) against the generation it used. A reply is
          matched to generation A (before the import) or B (after); it must equal that generation's answer,
          and that generation must have been current at some moment between the call's send and its reply
          (A until the first re-index ended, B from when it began). p50 and p99 per kind of call.

Machine, date and the command go with the figures (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("bm25", "passage", "hybrid", "filtered")
WORK = Path(os.environ.get("BENCH_WORK", "/tmp/chitragupta-bench"))


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))] if xs else float("nan")


def _cli(*args, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if check and p.returncode:
        raise SystemExit(f"chitragupta {' '.join(map(str, args[:3]))}: {p.stderr.strip()[-500:]}")
    return p


def _write_jsonl(path: Path, records) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def build(root: Path, records: list[dict], extra: list[dict], *, embed: bool, config: str = "") -> dict:
    """The workspace ``root/ws`` holding ``records`` (generation A), and ``root/b.jsonl`` (records + extra: B)."""
    ws = root / "ws"
    a = _write_jsonl(root / "a.jsonl", records)
    b = _write_jsonl(root / "b.jsonl", records + extra)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "config.toml").write_text("[retrieval]\nquery_syntax = false\n" + config, encoding="utf-8")
    _cli("import", "-w", ws, a)
    _cli("index", "-w", ws)
    if embed:
        _cli("enrich", "-w", ws, "--stages", "embed", "--device", "cpu")
    return {"ws": ws, "a": a, "b": b}


def call_args(kind: str, query: str, keys: list[str]) -> dict:
    args = {"query": query, "k": 10}
    if kind == "passage":
        args["unit"] = "passage"
    elif kind == "hybrid":
        args["engine"] = "hybrid"
    elif kind == "filtered":
        args["filters"] = {"keys": keys}
    return args


def expected(ws: Path, queries: list[str], keys: list[str], kinds=KINDS) -> dict:
    """{(kind, query): hits} as ``chitragupta search --json`` answers them now (a searcher opened afresh per
    engine, ``SearchRequest.run_one``: the CLI's code)."""
    from chitragupta.service import open_searcher
    from chitragupta.service.request import SearchRequest

    out, opened = {}, {}
    for kind in kinds:
        for q in queries:
            a = call_args(kind, q, keys)
            req = SearchRequest.checked(engine=a.get("engine", "bm25"), unit=a.get("unit"), k=a["k"],
                                        filters=a.get("filters"))
            s = opened.get(req.engine)
            if s is None:
                s = opened[req.engine] = open_searcher(ws, req.engine, device="cpu")
            out[(kind, q)] = [h.to_dict() for h in req.run_one(s, q).hits]
    return out


def _params(ws: Path, env: dict | None = None):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "chitragupta.cli.main", "serve", "-w", str(ws),
                                                               "--device", "cpu"],
                                 env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                                      **(env or {})})


async def _timed_call(c, args: dict) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    r = await c.call_tool("search", args)
    return t0, time.perf_counter(), r


async def idle_and_during(ws: Path, queries: list[str], n: int, parts: list[str], rounds: int = 5) -> dict:
    """BM25 round trips, one at a time: idle, and while a hybrid call is always in flight, in ``rounds``
    alternating blocks (so that the machine's load and the scorer's warm-up fall on both alike)."""
    from mcp import Client

    out = {}
    async with Client(_params(ws)) as c:
        for warm_kind in ("bm25", "hybrid"):  # the engines open (and numba compiles) before any timing
            await c.call_tool("search", call_args(warm_kind, queries[0], []))
        qs = [queries[i % len(queries)] for i in range(n)]
        blocks = [qs[i::rounds] for i in range(rounds)]

        async def sequential(block: list[str], lat: list[float]) -> None:
            for q in block:
                t0, t1, r = await _timed_call(c, {"query": q, "k": 10})
                assert not r.is_error, r.content
                lat.append(t1 - t0)

        idle, during, hybrid_lat = [], [], []
        for block in blocks:
            if "idle" in parts:
                await sequential(block, idle)
            if "during" in parts:
                stop = asyncio.Event()

                async def hybrid_forever():
                    i = 0
                    while not stop.is_set():
                        t0, t1, r = await _timed_call(c, call_args("hybrid", queries[i % len(queries)], []))
                        assert not r.is_error, r.content
                        hybrid_lat.append(t1 - t0)
                        i += 1

                task = asyncio.create_task(hybrid_forever())
                await asyncio.sleep(0.05)
                await sequential(block, during)
                stop.set()
                await task
        if idle:
            out["idle"] = {"n": len(idle), "p50_ms": 1e3 * _pct(idle, 50), "p99_ms": 1e3 * _pct(idle, 99)}
        if during:
            out["during"] = {"n": len(during), "p50_ms": 1e3 * _pct(during, 50), "p99_ms": 1e3 * _pct(during, 99),
                             "hybrid_calls": len(hybrid_lat), "hybrid_p50_ms": 1e3 * _pct(hybrid_lat, 50)}
            if idle:
                out["during"]["p50_over_idle"] = out["during"]["p50_ms"] / out["idle"]["p50_ms"]
        if "pipelined" in parts:  # all sent at once, as an agent fanning out: the wall of the whole batch
            walls = []
            for _ in range(3):
                t0 = time.perf_counter()
                got = await asyncio.gather(*(c.call_tool("search", {"query": q, "k": 10}) for q in qs))
                walls.append(time.perf_counter() - t0)
                assert not any(r.is_error for r in got)
            out["pipelined"] = {"n": n, "wall_ms": 1e3 * statistics.median(walls)}
            if "idle" in out:
                out["pipelined"]["over_one_p50"] = out["pipelined"]["wall_ms"] / out["idle"]["p50_ms"]
    return out


async def load(built: dict, queries: list[str], keys: list[str], clients: int, calls: int, *, seed: int = 0,
               kinds=KINDS, env: dict | None = None) -> dict:
    """``clients`` tasks x ``calls`` calls on one session while the workspace is re-indexed twice; the
    records of every call (kind, query, send and reply times, error, hits) and of the two re-indexes."""
    from mcp import Client

    ws = built["ws"]
    total = clients * calls
    done = [0]
    rebuilds: list[dict] = []
    records: list[dict] = []
    rng = random.Random(seed)
    plans = [[(kinds[(i + j) % len(kinds)], rng.choice(queries)) for i in range(calls)] for j in range(clients)]

    marks = (calls // 3, 2 * calls // 3)  # where each client waits for a re-index to begin (and the first to end)
    started, ended = [asyncio.Event(), asyncio.Event()], [asyncio.Event(), asyncio.Event()]

    async def client(j: int, c):
        for i, (kind, q) in enumerate(plans[j]):
            if i == marks[0]:
                await started[0].wait()  # the next third runs while generation B is built
            elif i == marks[1]:
                await ended[0].wait()  # the last third runs on B, while B is built again
                await started[1].wait()
            t0, t1, r = await _timed_call(c, call_args(kind, q, keys))
            text = r.content[0].text if r.content else ""
            records.append({"client": j, "kind": kind, "query": q, "t0": t0, "t1": t1, "error": bool(r.is_error),
                            "text": text[:300] if r.is_error else "",
                            "hits": None if r.is_error else r.structured_content["hits"]})
            done[0] += 1

    async def rebuilder():
        for step, argvs in enumerate(([("import", "-w", ws, built["b"]), ("index", "-w", ws)],
                                      [("index", "-w", ws, "--force")])):
            while done[0] < clients * marks[step]:
                await asyncio.sleep(0.01)
            t0 = time.perf_counter()
            started[step].set()
            for argv in argvs:
                p = await asyncio.to_thread(_cli, *argv, check=False)
                if p.returncode:
                    raise SystemExit(f"re-index {argv[0]}: {p.stderr.strip()[-500:]}")
            rebuilds.append({"t0": t0, "t1": time.perf_counter(), "argv": [" ".join(map(str, a[:1] + a[3:]))
                                                                            for a in argvs]})
            ended[step].set()

    async with Client(_params(ws, env)) as c:
        for kind in kinds:  # opened before the clock starts, as a warm server's would be
            await c.call_tool("search", call_args(kind, queries[0], keys))
        t_start = time.perf_counter()
        await asyncio.gather(rebuilder(), *(client(j, c) for j in range(clients)))
        wall = time.perf_counter() - t_start
    return {"records": records, "rebuilds": rebuilds, "wall_s": wall}


def check(got: dict, want_a: dict, want_b: dict) -> dict:
    """Each record matched to generation A or B (module docstring): the wrong answers and the errors."""
    first = got["rebuilds"][0]
    wrong, errors, gens = [], [], {"A": 0, "B": 0, "both": 0}
    for r in got["records"]:
        if r["error"]:
            errors.append(r)
            continue
        key = (r["kind"], r["query"])
        is_a, is_b = r["hits"] == want_a[key], r["hits"] == want_b[key]
        ok_a = is_a and r["t0"] < first["t1"]  # A was current until the first re-index ended
        ok_b = is_b and r["t1"] > first["t0"]  # B was current from when it began
        if not (ok_a or ok_b):
            wrong.append({k: r[k] for k in ("client", "kind", "query", "t0", "t1")} | {"is_a": is_a, "is_b": is_b})
        if is_a or is_b:
            gens["both" if is_a and is_b else "A" if is_a else "B"] += 1
    return {"wrong": wrong, "errors": errors, "generations": gens}


def latencies(records: list[dict]) -> dict:
    out = {}
    for kind in sorted({r["kind"] for r in records}):
        lat = [r["t1"] - r["t0"] for r in records if r["kind"] == kind]
        out[kind] = {"n": len(lat), "p50_ms": 1e3 * _pct(lat, 50), "p99_ms": 1e3 * _pct(lat, 99)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench serve_load", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="scifact")
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--extra", type=int, default=100)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--idle", type=int, default=50)
    ap.add_argument("--queries", type=int, default=40, help="distinct queries drawn from (the collection's first)")
    ap.add_argument("--parts", default="idle,pipelined,during,load")
    ap.add_argument("--no-embed", action="store_true", help="no embedding store: no hybrid calls")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.data import data_dir, read_jsonl

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    src = data_dir() / args.corpus
    records = list(read_jsonl(src / "corpus.jsonl"))
    queries = [q["text"] for q in read_jsonl(src / "queries.jsonl")][:args.queries]
    root = args.work or WORK / f"serve_load-{args.corpus}-{args.docs}"
    kinds = tuple(k for k in KINDS if not (args.no_embed and k == "hybrid"))
    res = {"command": "python -m bench serve_load " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "docs": args.docs}
    import shutil

    if args.fresh or not (root / "ws" / "content").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        build(root, records[:args.docs], records[args.docs:args.docs + args.extra], embed=not args.no_embed)
    ws = root / "ws"  # generation A, kept as built: the load runs on a copy
    if {"idle", "pipelined", "during"} & set(parts):
        res.update(asyncio.run(idle_and_during(ws, queries, args.idle, parts)))
        print(json.dumps({k: res[k] for k in ("idle", "pipelined", "during") if k in res}), file=sys.stderr)
    if "load" in parts:
        keys = sorted(r["_id"] for r in records[:args.docs])[::2]
        run = root / "run"
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir()
        built = {"ws": run / "ws", "b": root / "b.jsonl"}
        shutil.copytree(ws, built["ws"])
        want_a = expected(built["ws"], queries, keys, kinds)
        got = asyncio.run(load(built, queries, keys, args.clients, args.calls, kinds=kinds))
        want_b = expected(built["ws"], queries, keys, kinds)
        verdict = check(got, want_a, want_b)
        res["load"] = {"clients": args.clients, "calls": args.calls, "wall_s": got["wall_s"],
                       "answered": len(got["records"]), "errors": len(verdict["errors"]),
                       "wrong": len(verdict["wrong"]), "generations": verdict["generations"],
                       "rebuilds": [{"s": r["t1"] - r["t0"], "argv": r["argv"]} for r in got["rebuilds"]],
                       "latency": latencies(got["records"]),
                       "first_errors": [e["text"] for e in verdict["errors"][:3]], "first_wrong": verdict["wrong"][:3]}
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    ld = res.get("load")
    return 1 if ld and (ld["errors"] or ld["wrong"] or ld["answered"] != args.clients * args.calls) else 0


if __name__ == "__main__":
    raise SystemExit(main())
