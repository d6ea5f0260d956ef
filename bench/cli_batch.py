"""What users run, beside bm25s doing the same: a whole-process CLI batch, and the API from strings to keys.

    python -m bench cli_batch [--corpora scifact,1m] [--queries 20000] [--ks 10,100] [--repeats 3]
                              [--ws-root /work/scale-ws] [--out bench/out/cli_batch.json]

CLI batch (whole process, wall and CPU from process start to exit, as a shell user times it):
  ours    ``chitragupta search -w WS --queries Q.jsonl --run OUT -k K`` with the shipped config (acronym
          expansion on; ``[retrieval].threads = 0``: every core)
  bm25s   ``python -m bench cli_batch --peer-run DIR Q.jsonl OUT K BACKEND``: the same job written for
          bm25s 0.3 -- load the index saved by ``bm25s.BM25.save`` (mmap) and its tokenizer's vocabulary
          (our splitter and stopwords, so both score the same tokens), read the queries, tokenize,
          ``retrieve(k, n_threads=2)``, write the TREC run (hits with a positive score). Both backends:
          ``numpy`` (no JIT) and ``numba`` (bm25s compiles its kernel in every process: it keeps no
          numba cache), each reported; the ratio quoted is against the faster.
  The two commands run in alternating rounds (ours, bm25s, ...; then the other order), so a swing of
  the shared host's speed lands on both; the median of ``--repeats`` rounds is reported, and every
  round's ratio is kept. Before timing, one untimed run of each (page cache, numba cache).
  The two runs are compared: the share of queries whose ranked citekey lists are identical (bm25s's
  float32 scores can order near-ties differently), and our run checked byte for byte against the
  per-line reference writer on its first 200 queries.

API (in one process, warm, alternating rounds as above):
  ours    ``Retriever.open(ws).rank_many(queries, k).keys()``: strings to citekeys, shipped config
  bm25s   ``tokenize`` + ``retrieve(n_threads=2)`` + document ids from its index positions (a list)

Queries: ``bench.scale``'s seeded stress set (windows of 4-16 words cut from random documents).
Corpora: ``scifact`` (5,183 documents) and ``bench.synth`` workspaces (``100k``, ``1m``) under ``--ws-root``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

from bench.timer import paired_time, run_timed

STOPWORDS = "a an and are as at be by for from in is of on that the to was with".split()


# -- the peer's CLI job (imports only bm25s) -------------------------------------------------------------
def peer_run(index_dir: str, qfile: str, out: str, k: int, backend: str, threads: int = 2) -> None:
    import bm25s
    from bm25s.tokenization import Tokenizer

    tok = Tokenizer(lower=True, splitter=r"[a-z0-9]{2,}", stopwords=STOPWORDS)
    tok.load_vocab(index_dir)
    model = bm25s.BM25.load(index_dir, mmap=True, override_params={"backend": backend}, show_progress=False)
    with open(Path(index_dir) / "keys.json", encoding="utf-8") as f:
        keys = json.load(f)
    qids, texts = [], []
    with open(qfile, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                qids.append(str(o["_id"]))
                texts.append(o["text"])
    ids = tok.tokenize(texts, update_vocab=False, return_as="ids", show_progress=False)
    docs, scores = model.retrieve(ids, k=k, n_threads=threads, show_progress=False)
    with open(out, "w", encoding="utf-8") as f:
        for qid, row, srow in zip(qids, docs.tolist(), scores.tolist()):
            f.write("".join(f"{qid} Q0 {keys[d]} {r} {s:.10g} bm25s\n"
                            for r, (d, s) in enumerate(zip(row, srow), start=1) if s > 0))


# -- preparation -----------------------------------------------------------------------------------------
def _peer_index(ws_root: Path, folder: Path) -> Path:
    """bm25s's index of the workspace's corpus, built once and saved beside our outputs."""
    if (folder / "keys.json").exists():
        return folder
    from bench.peers import Bm25s
    from bench.scale import _read_corpus

    keys, texts = _read_corpus(ws_root)
    peer = Bm25s()
    peer.build(texts)
    del texts
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    peer.model.save(str(tmp))
    peer.tokenizer.save_vocab(str(tmp))
    (tmp / "keys.json").write_text(json.dumps(keys), encoding="utf-8")
    os.replace(tmp, folder)
    return folder


def _query_file(ws_root: Path, n: int, folder: Path, name: str) -> tuple[Path, list[str]]:
    from bench.scale import stress_queries

    path = folder / f"{name}-q{n}.jsonl"
    if not path.exists():
        qs = stress_queries(ws_root, n)
        path.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(qs)),
                        encoding="utf-8")
    texts = [json.loads(x)["text"] for x in path.read_text(encoding="utf-8").splitlines()]
    return path, texts


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one command, run to its end."""
    took = run_timed(cmd)
    return took["wall_s"], took["cpu_s"]


def _alternate(cmds: dict[str, list[str]], repeats: int) -> dict[str, list[tuple[float, float]]]:
    names = list(cmds)
    for name in names:  # untimed: page cache, numba's on-disk cache
        _timed(cmds[name])
    got: dict[str, list] = {n: [] for n in names}
    for i in range(repeats):
        for name in (names if i % 2 == 0 else names[::-1]):
            got[name].append(_timed(cmds[name]))
    return got


def _run_lists(path: Path) -> dict[str, list[str]]:
    run: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            run.setdefault(parts[0], []).append(parts[2])
    return run


# -- the measurements ------------------------------------------------------------------------------------
def cli_batch(ws_root: Path, peer_dir: Path, qfile: Path, k: int, repeats: int, out_dir: Path,
              backends=("numpy", "numba")) -> dict:
    exe = Path(sys.executable).with_name("chitragupta")
    ours_out, theirs_out = out_dir / "ours.trec", out_dir / "bm25s.trec"
    cmds = {"ours": [str(exe), "search", "-w", str(ws_root), "--queries", str(qfile), "--run", str(ours_out),
                     "-k", str(k)]}
    for backend in backends:
        cmds[f"bm25s-{backend}"] = [sys.executable, "-m", "bench.cli_batch", "--peer-run", str(peer_dir), str(qfile),
                                    str(theirs_out.with_suffix(f".{backend}.trec")), str(k), backend]
    load = [round(x, 2) for x in os.getloadavg()]
    got = _alternate(cmds, repeats)
    med = {n: {"wall_s": statistics.median(x[0] for x in v), "cpu_s": statistics.median(x[1] for x in v),
               "rounds_wall_s": [round(x[0], 3) for x in v]} for n, v in got.items()}
    best = min((f"bm25s-{b}" for b in backends), key=lambda n: med[n]["wall_s"])
    ratios = [b[0] / o[0] for o, b in zip(got["ours"], got[best])]
    ours_run = _run_lists(ours_out)
    theirs_run = _run_lists(theirs_out.with_suffix(f".{best.split('-')[1]}.trec"))
    same = sum(ours_run.get(q) == v for q, v in theirs_run.items()) / max(1, len(theirs_run))
    return {"k": k, "load": load, **med, "peer": best, "ratio_wall": med[best]["wall_s"] / med["ours"]["wall_s"],
            "round_ratios": [round(r, 3) for r in ratios], "identical_lists": same,
            "ours_hits": sum(map(len, ours_run.values())), "bm25s_hits": sum(map(len, theirs_run.values()))}


def check_reference(ws_root: Path, qfile: Path, run_path: Path, k: int, n: int = 200) -> bool:
    """Our run's first ``n`` queries, byte for byte, against the per-line reference writer."""
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.search.runfile import format_run_lines

    rows = [json.loads(x) for x in qfile.read_text(encoding="utf-8").splitlines()[:n]]
    r = Retriever.open(ws_root)
    top = r.rank_many([row["text"] for row in rows], k).topk
    want = "".join(x + "\n" for i, row in enumerate(rows) for x in format_run_lines(
        row["_id"], [(r.index.citekeys[int(d)], float(s)) for d, s in zip(top.ids[i], top.scores[i]) if d >= 0]))
    have = run_path.read_text(encoding="utf-8")
    return have.startswith(want) and (len(want) == len(have) or have[len(want):].split(" ", 1)[0] == f"q{n}")


def api(ws_root: Path, peer_dir: Path, texts: list[str], k: int, repeats: int) -> dict:
    import numba

    from bench.peers import Bm25s
    from chitragupta.engine.search.bm25 import Retriever

    r = Retriever.open(ws_root)  # the shipped config: acronym expansion on
    peer = Bm25s()
    peer.tokenizer.load_vocab(str(peer_dir))
    import bm25s

    peer.model = bm25s.BM25.load(str(peer_dir), mmap=False, override_params={"backend": "numba"},
                                 show_progress=False)
    keys = json.loads((peer_dir / "keys.json").read_text(encoding="utf-8"))
    threads = numba.config.NUMBA_NUM_THREADS

    def ours():
        return r.rank_many(texts, k).keys()

    def theirs():
        found, _scores = peer.search(texts, k, threads, distinct=False)
        return [[keys[i] for i in row] for row in found.tolist()]

    ours()
    theirs()
    o, p = paired_time(ours, theirs, repeats)
    wall_o = statistics.median(x[0] for x in o)
    wall_p = statistics.median(x[0] for x in p)
    return {"k": k, "queries": len(texts), "threads": threads, "ours_qps": len(texts) / wall_o,
            "bm25s_qps": len(texts) / wall_p, "ratio": wall_p / wall_o,
            "round_ratios": [round(pw / ow, 3) for (ow, _), (pw, _) in zip(o, p)],
            "load": [round(x, 2) for x in os.getloadavg()]}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--peer-run"]:
        d, q, out, k, backend = argv[1:6]
        peer_run(d, q, out, int(k), backend)
        return 0
    ap = argparse.ArgumentParser(prog="python -m bench cli_batch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", default="scifact,1m")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="cli,api")
    ap.add_argument("--peer-backends", default="numpy,numba",
                    help="bm25s backends for the CLI job (at 1M its numpy backend takes ~19 ms a query: numba alone)")
    ap.add_argument("--ws-root", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    from bench.data import WORK
    from bench.scale import DEFAULT_WS_ROOT, _settle, workspace
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.workspace import Workspace

    ws_root_dir = args.ws_root or DEFAULT_WS_ROOT
    out_dir = WORK / "cli_batch"
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    res = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "python": platform.python_version(), "queries": args.queries, "corpora": {}}
    for corpus in args.corpora.split(","):
        ws_root = workspace(corpus, ws_root_dir)
        _settle(ws_root)
        refresh(Workspace.open(ws_root))
        peer_dir = _peer_index(ws_root, out_dir / f"bm25s-{corpus}")
        qfile, texts = _query_file(ws_root, args.queries, out_dir, corpus)
        entry = res["corpora"][corpus] = {"cli": [], "api": []}
        for k in map(int, args.ks.split(",")):
            if "cli" in parts:
                got = cli_batch(ws_root, peer_dir, qfile, k, args.repeats, out_dir,
                                tuple(args.peer_backends.split(",")))
                got["reference_ok"] = check_reference(ws_root, qfile, out_dir / "ours.trec", k)
                entry["cli"].append(got)
                print(json.dumps({corpus: got}), file=sys.stderr, flush=True)
            if "api" in parts:
                got = api(ws_root, peer_dir, texts, k, args.repeats)
                entry["api"].append(got)
                print(json.dumps({corpus: got}), file=sys.stderr, flush=True)
    out = args.out or (out_dir / "cli_batch.json")
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(report(res))
    return 0


def report(res: dict) -> str:
    lines = [f"machine: {res['machine']}; {res['queries']:,} queries per batch", "",
             "| corpus | k | ours CLI s | bm25s numpy s | bm25s numba s | ratio (vs faster) | rounds | same lists | ref |",
             "|---|---|---|---|---|---|---|---|---|"]
    for corpus, e in res["corpora"].items():
        for c in e["cli"]:
            peer = {b: f"{c[b]['wall_s']:.2f}" if b in c else "-" for b in ("bm25s-numpy", "bm25s-numba")}
            lines.append(f"| {corpus} | {c['k']} | {c['ours']['wall_s']:.2f} | {peer['bm25s-numpy']} | "
                         f"{peer['bm25s-numba']} | {c['ratio_wall']:.2f}x | "
                         f"{', '.join(f'{r:.2f}' for r in c['round_ratios'])} | {c['identical_lists']:.3f} | "
                         f"{'ok' if c.get('reference_ok') else 'DIFF'} |")
    lines += ["", "| corpus | k | ours strings->citekeys q/s | bm25s strings->ids q/s | ratio | rounds |", "|---|---|---|---|---|---|"]
    for corpus, e in res["corpora"].items():
        for a in e["api"]:
            lines.append(f"| {corpus} | {a['k']} | {a['ours_qps']:,.0f} | {a['bm25s_qps']:,.0f} | {a['ratio']:.2f}x | "
                         f"{', '.join(f'{r:.2f}' for r in a['round_ratios'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
