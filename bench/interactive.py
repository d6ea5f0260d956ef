"""One query at a time, as a person at the CLI or an agent skill asks: a whole process per query (cold),
and a query through a warm MCP server (warm), each beside what it is compared with.

    python -m bench interactive [--corpora scifact,cranfield,cisi] [--cold 15] [--warm 200]
                                [--parts cold,warm] [--engines bm25,hybrid] [--ws scifact=/work/ws/scifact]
                                [--out bench/out/interactive.json]

Cold (whole process; CPU = user + sys of the child, from ``getrusage``; wall from spawn to exit):
  ours bm25    ``chitragupta search -w WS "QUERY" -k 10`` (a table with 500-character snippets: more than
               the peer prints)
  ours hybrid  the same with ``--engine hybrid`` (BM25 fused with the embedding index; only for a workspace
               whose store is built: ``chitragupta enrich --stages embed``)
  bm25s        ``python -m bench interactive --peer-one DIR "QUERY" 10 BACKEND``: bm25s 0.3 loads the index
               ``bm25s.BM25.save`` wrote (mmap) and its tokenizer vocabulary (our splitter and stopwords),
               answers the query, prints the keys and scores. Backends ``numpy`` and ``numba`` (bm25s keeps no
               numba cache, so numba compiles in every process); the ratio is against the faster.
  Each query is run by every command in turn, the order alternating query by query; one untimed run of
  each first (page cache, numba's cache). Medians over the queries are reported, and the ratio of medians.

Warm (one process kept running; per query, wall, p50 and p99):
  mcp          the query through ``chitragupta serve`` with the MCP SDK's own stdio client (``Client``),
               JSON out and parsed back: what a skill pays
  in-process   ``Retriever.search`` (and ``HybridSearcher.search``) on an open engine, snippets included
  The first 5 answers of each are compared with ``chitragupta search --json`` for the same query.

Queries: the collection's own queries.jsonl, in file order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from bench.cli_batch import STOPWORDS
from bench.timer import run_timed, stopwatch


# -- the peer's one-query job (imports only bm25s) --------------------------------------------------------
def peer_one(index_dir: str, query: str, k: int, backend: str) -> None:
    import bm25s
    from bm25s.tokenization import Tokenizer

    tok = Tokenizer(lower=True, splitter=r"[a-z0-9]{2,}", stopwords=STOPWORDS)
    tok.load_vocab(index_dir)
    model = bm25s.BM25.load(index_dir, mmap=True, override_params={"backend": backend}, show_progress=False)
    with open(Path(index_dir) / "keys.json", encoding="utf-8") as f:
        keys = json.load(f)
    ids = tok.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
    docs, scores = model.retrieve(ids, k=k, n_threads=1, show_progress=False)
    for d, s in zip(docs[0].tolist(), scores[0].tolist()):
        if s > 0:
            print(f"{keys[d]}\t{s:.6f}")


# -- timing ------------------------------------------------------------------------------------------------
def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one command."""
    took = run_timed(cmd, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    return took["wall_s"], took["cpu_s"]


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def cold(ws: Path, peer_dir: Path, queries: list[str], engines: list[str], backends=("numpy", "numba")) -> dict:
    exe = str(Path(sys.executable).with_name("chitragupta"))
    cmds = {}
    if "bm25" in engines:
        cmds["ours-bm25"] = lambda q: [exe, "search", "-w", str(ws), q, "-k", "10"]
    if "hybrid" in engines:
        cmds["ours-hybrid"] = lambda q: [exe, "search", "-w", str(ws), q, "-k", "10", "--engine", "hybrid"]
    for b in backends:
        cmds[f"bm25s-{b}"] = (lambda b: lambda q: [sys.executable, "-m", "bench.interactive", "--peer-one",
                                                   str(peer_dir), q, "10", b])(b)
    names = list(cmds)
    for n in names:  # untimed: page cache, numba's on-disk cache
        _timed(cmds[n](queries[0]))
    got: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    load0 = os.getloadavg()[0]
    for i, q in enumerate(queries):
        for n in (names if i % 2 == 0 else names[::-1]):
            got[n].append(_timed(cmds[n](q)))
    med = {n: {"wall_s": statistics.median(w for w, _ in v), "cpu_s": statistics.median(c for _, c in v)}
           for n, v in got.items()}
    out = {"queries": len(queries), "load": [round(load0, 2), round(os.getloadavg()[0], 2)], **med}
    if backends:
        peer = out["peer"] = min((f"bm25s-{b}" for b in backends), key=lambda n: med[n]["cpu_s"])
        for n in names:
            if n.startswith("ours"):
                out[f"{n}_cpu_ratio"] = med[n]["cpu_s"] / med[peer]["cpu_s"]
    return out


async def _mcp_latencies(ws: Path, queries: list[str], engine: str) -> tuple[list[float], list[dict], list[float]]:
    """Per query, the search tool's round trip; its first 5 answers; and the round trips of the ``source``
    tool for the first hit, as many times (one ledger read, ~0.7 ms in process: about the SDK's own cost,
    the floor under any tool)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=str(Path(sys.executable).with_name("chitragupta")),
                                   args=["serve", "-w", str(ws)], env={"HF_HUB_OFFLINE": "1"})
    lat, first = [], []
    async with Client(params) as c:
        await c.call_tool("search", {"query": queries[0], "engine": engine})  # opens the engines
        for q in queries:
            with stopwatch() as took:
                r = await c.call_tool("search", {"query": q, "k": 10, "engine": engine})
            lat.append(took.wall)
            if r.is_error:
                raise SystemExit(f"serve: {r.content[0].text}")
            if len(first) < 5:
                first.append(r.structured_content)
        floor = []
        hit = next((h["citekey"] for a in first for h in a["hits"]), None)
        for _ in queries if hit else ():
            with stopwatch() as took:
                await c.call_tool("source", {"citekey": hit})
            floor.append(took.wall)
    return lat, first, floor


def warm(ws: Path, queries: list[str], engines: list[str]) -> dict:
    from chitragupta.engine.search.bm25 import Retriever

    out = {}
    for engine in engines:
        lat, first, floor = asyncio.run(_mcp_latencies(ws, queries, engine))
        if engine == "bm25":
            searcher = Retriever.open(ws)
        else:
            from chitragupta.enrich.hybrid import HybridSearcher

            searcher = HybridSearcher.open(ws)
        searcher.search(queries[0], 10)
        inproc = []
        for q in queries:
            with stopwatch() as took:
                searcher.search(q, 10)
            inproc.append(took.wall)
        same = []
        exe = str(Path(sys.executable).with_name("chitragupta"))
        for q, got in zip(queries, first):
            cli = subprocess.run([exe, "search", "-w", str(ws), q, "-k", "10", "--json", "--engine", engine],
                                 capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
            same.append(json.loads(cli.stdout) == got["hits"])
        out[engine] = {"queries": len(queries), "mcp_p50_ms": 1e3 * _pct(lat, 0.5), "mcp_p99_ms": 1e3 * _pct(lat, 0.99),
                       "inproc_p50_ms": 1e3 * _pct(inproc, 0.5), "inproc_p99_ms": 1e3 * _pct(inproc, 0.99),
                       "same_as_cli": f"{sum(same)}/{len(same)}", "load": round(os.getloadavg()[0], 2),
                       "mcp_floor_p50_ms": 1e3 * _pct(floor, 0.5) if floor else None}
        print(json.dumps({engine: out[engine]}), file=sys.stderr, flush=True)
    return out


def _has_store(ws: Path) -> bool:
    return any((ws / "content" / "faiss").glob("*/manifest.json"))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--peer-one"]:
        d, q, k, backend = argv[1:5]
        peer_one(d, q, int(k), backend)
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench interactive", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", default="scifact,cranfield,cisi")
    ap.add_argument("--cold", type=int, default=15, help="queries run as a whole process each (default 15)")
    ap.add_argument("--warm", type=int, default=200, help="queries through the warm server (default 200)")
    ap.add_argument("--parts", default="cold,warm")
    ap.add_argument("--engines", default="bm25,hybrid")
    ap.add_argument("--ws", action="append", default=[], metavar="NAME=DIR",
                    help="use this workspace for a corpus (e.g. one whose embedding store is built)")
    ap.add_argument("--no-peer", default="", metavar="LIST",
                    help="corpora whose cold queries run without bm25s beside them (its index takes long to build)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    from bench.cli_batch import _peer_index
    from bench.data import WORK, data_dir, read_jsonl, workspace_for
    from bench.scale import _settle
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.workspace import Workspace

    given = dict(x.split("=", 1) for x in args.ws)
    parts, engines = set(args.parts.split(",")), args.engines.split(",")
    out_dir = WORK / "interactive"
    out_dir.mkdir(parents=True, exist_ok=True)
    res = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "python": platform.python_version(), "corpora": {}}
    for corpus in args.corpora.split(","):
        folder = data_dir() / corpus
        ws = Path(given[corpus]) if corpus in given else workspace_for(folder / "corpus.jsonl", corpus)
        _settle(ws)
        refresh(Workspace.open(ws))
        if (folder / "queries.jsonl").is_file():
            queries = [str(r["text"]) for r in read_jsonl(folder / "queries.jsonl")]
        else:  # a synthetic workspace (bench.synth): windows of 4-16 words cut from its documents
            from bench.scale import stress_queries

            queries = stress_queries(ws, max(args.cold, args.warm) + 1)
        eng = [e for e in engines if e != "hybrid" or _has_store(ws)]
        entry = res["corpora"][corpus] = {"engines": eng}
        if "cold" in parts:
            peer = corpus not in args.no_peer.split(",")
            peer_dir = _peer_index(ws, out_dir / f"bm25s-{corpus}") if peer else None
            entry["cold"] = cold(ws, peer_dir, queries[:args.cold], eng, ("numpy", "numba") if peer else ())
            print(json.dumps({corpus: entry["cold"]}), file=sys.stderr, flush=True)
        if "warm" in parts:
            entry["warm"] = warm(ws, queries[:args.warm], eng)
    out = args.out or (out_dir / "interactive.json")
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(report(res))
    return 0


def report(res: dict) -> str:
    lines = [f"machine: {res['machine']}", "",
             "| corpus | queries | ours bm25 CPU s (wall) | ours hybrid CPU s (wall) | bm25s numpy CPU s | bm25s numba CPU s "
             "| bm25 / bm25s | load |", "|---|---|---|---|---|---|---|---|"]
    for corpus, e in res["corpora"].items():
        c = e.get("cold")
        if not c:
            continue
        cell = lambda n: f"{c[n]['cpu_s']:.3f} ({c[n]['wall_s']:.3f})" if n in c else "-"  # noqa: E731
        peer = lambda n: f"{c[n]['cpu_s']:.3f}" if n in c else "-"  # noqa: E731
        ratio = f"{c['ours-bm25_cpu_ratio']:.2f}x" if "ours-bm25_cpu_ratio" in c else "-"
        lines.append(f"| {corpus} | {c['queries']} | {cell('ours-bm25')} | {cell('ours-hybrid')} | "
                     f"{peer('bm25s-numpy')} | {peer('bm25s-numba')} | {ratio} | {c['load']} |")
    lines += ["", "| corpus | engine | queries | MCP p50 ms | MCP p99 ms | in-process p50 ms | in-process p99 ms | same as CLI "
              "| MCP floor p50 ms (`source`) |", "|---|---|---|---|---|---|---|---|---|"]
    for corpus, e in res["corpora"].items():
        for engine, w in (e.get("warm") or {}).items():
            lines.append(f"| {corpus} | {engine} | {w['queries']} | {w['mcp_p50_ms']:.1f} | {w['mcp_p99_ms']:.1f} | "
                         f"{w['inproc_p50_ms']:.1f} | {w['inproc_p99_ms']:.1f} | {w['same_as_cli']} | "
                         + (f"{w['mcp_floor_p50_ms']:.1f} |" if w.get("mcp_floor_p50_ms") is not None else "- |"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
