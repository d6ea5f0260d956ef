"""``python -m bench COMMAND [options]``: the one entry point of the instrument; ``python -m bench`` lists the
commands, ``python -m bench COMMAND -h`` a command's options. (``python -m bench.COMMAND`` still runs one.)"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "quality": ("bench.quality", "quality of the shipped defaults on every arm"),
    "smoke": ("bench.smoke", "what CI runs: every arm against reference figures, bm25s parity, real PDFs"),
    "speed": ("bench.speed", "side by side with bm25s: queries/s, build, memory, CLI wall time"),
    "cli_batch": ("bench.cli_batch", "what users run beside bm25s: a whole-process CLI batch, the API strings -> citekeys"),
    "interactive": ("bench.interactive", "one query at a time: a whole process per query (cold), a warm MCP server"),
    "batch1m": ("bench.batch1m", "where a large BM25 batch spends its time (parse, kernel, top-k, run), beside bm25s in process and as a CLI batch"),
    "scale": ("bench.scale", "100k / 1M documents beside bm25s: queries/s, build memory, first CLI query"),
    "ingest": ("bench.ingest", "import and index at scale, whole process: fresh, unchanged, 1% changed"),
    "synth": ("bench.synth", "a seeded synthetic workspace drawn from a collection's statistics"),
    "sweep": ("bench.sweep", "a (k1, b, field weight) grid on one arm in one batched call"),
    "units": ("bench.units", "the reference cut, snippet shares and passage-unit costs"),
    "passages": ("bench.passages", "the passage unit on plain text (pdftotext, full-text imports): quality and index cost"),
    "experiments": ("bench.experiments", "re-run the spec's experiments on the real arms"),
    "refcut": ("bench.refcut", "the plain-text reference cut against docling's and hand-read truth"),
    "dense": ("bench.dense", "dense retrieval (MiniLM in FAISS) beside BM25 on the qrels arms; encode, search, rerank cost"),
    "hybrid": ("bench.hybrid", "hybrid search (BM25 + MiniLM, fused per source) beside its parts on the qrels arms"),
    "chunks": ("bench.chunks", "chunks against the encoder's window: truncated share under the word rule and the token rule"),
    "fusion": ("bench.fusion", "hybrid's default fusion chosen on training queries (rrf k, weights, minmax/zscore, depth, stemming)"),
    "rerank": ("bench.rerank", "embedding search with and without a local cross-encoder (the tests' tiny one): ms/query, nDCG@10"),
    "encode_speed": ("bench.encode_speed", "the embed stage's encoding throughput beside a bare SentenceTransformer.encode"),
    "resume": ("bench.resume", "the embed stage killed at 60% of its time, then resumed: resume CPU / fresh CPU"),
    "topics": ("bench.topics", "the bertopic stage on scifact: wall time, outlier share, reproducibility"),
    "gpu": ("bench.gpu", "one prepared GPU run: gpu tests, torch CUDA q/s at 5k/100k/1M, the 11x11 grid"),
    "similar": ("bench.similar", "papers like this one against pasting the paper into search: the other relevant sources found"),
    "refs_graph": ("bench.refs_graph", "the citation graph on the seven real PDFs (hand labels) and its cost beside indexing"),
    "filters": ("bench.filters", "what metadata filters cost a 20,000-query CLI batch: one filter, and one per query"),
    "phrase": ("bench.phrase", "phrase queries warm, positions array against reading candidates' texts (1M synthetic)"),
    "serve_load": ("bench.serve_load", "the MCP server under load: idle and busy BM25 latency, 4 clients while re-indexing"),
    "build": ("bench.build", "the index build beside bm25s: --jobs, positions on/off, in process and whole process, per stage"),
    "ab": ("bench.ab", "a refactor against the code before it: a cold CLI query and a CLI batch, CPU and wall ratios"),
    "firstrun": ("bench.firstrun", "first runs from an empty numba cache: the seven PDFs' index, a first scifact batch against a warm one"),
    "fuzz": ("bench.fuzz", "coverage-guided fuzzing of the BibTeX, sidecar and JSONL readers (atheris)"),
    "refs_entries": ("bench.refs_entries", "reference entries found per paper against hand counts, fields against hand labels"),
    "pages": ("bench.pages", "the graph's page for a synthetic library in headless Chromium: size, command cost, time to scripts done"),
    "check": ("bench.check", "chitragupta check on drafts of SciFact claims: support AUC, statuses, alternatives, uncited, cost"),
}


def usage() -> str:
    lines = ["usage: python -m bench COMMAND [options]   (python -m bench COMMAND -h: its options)", "", "commands:"]
    lines += [f"  {name:<13} {help_text}" for name, (_m, help_text) in COMMANDS.items()]
    lines += ["", "The reliability campaign (SIGKILLs, concurrent writers, hostile input) is not a measurement: "
              "python -m tools.reliability."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0].replace("-", "_") if argv else ""
    if name not in COMMANDS:
        print(usage(), file=sys.stdout if not argv or argv[0] in ("-h", "--help") else sys.stderr)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\npython -m bench: no command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0
    sys.argv = [f"python -m bench {name}", *argv[1:]]  # what a command's argparse shows as its prog
    return int(importlib.import_module(COMMANDS[name][0]).main(argv[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
