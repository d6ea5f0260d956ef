"""``python -m bench COMMAND ...``: quality, speed, smoke, sweep, units, experiments."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "quality": ("bench.quality", "quality of the shipped defaults on every arm"),
    "speed": ("bench.speed", "side by side with bm25s: queries/s, build, memory, CLI wall time"),
    "smoke": ("bench.smoke", "what CI runs: every arm against reference figures, bm25s parity, real PDFs"),
    "sweep": ("bench.sweep", "a (k1, b, field weight) grid on one arm in one batched call"),
    "units": ("bench.units", "the reference cut, snippet shares and passage-unit costs"),
    "experiments": ("bench.experiments", "re-run the spec's experiments on the real arms"),
    "synth": ("bench.synth", "a seeded synthetic workspace drawn from a collection's statistics"),
    "ingest": ("bench.ingest", "import and index at scale, whole process: fresh, unchanged, 1% changed"),
    "cli_batch": ("bench.cli_batch", "what users run beside bm25s: a whole-process CLI batch, the API strings -> citekeys"),
    "scale": ("bench.scale", "100k / 1M documents beside bm25s: queries/s, build memory, first CLI query"),
    "reliability": ("bench.reliability", "SIGKILL campaigns, concurrent writers, hostile input: the reliability table"),
    "dense": ("bench.dense", "dense retrieval (MiniLM in FAISS) beside BM25 on the qrels arms; encode, search, rerank cost"),
    "topics": ("bench.topics", "the bertopic stage on scifact: wall time, outlier share, reproducibility"),
    "gpu": ("bench.gpu", "one prepared GPU run: gpu tests, torch CUDA q/s at 5k/100k/1M, the 11x11 grid"),
    "refcut": ("bench.refcut", "the plain-text reference cut against docling's and hand-read truth"),
    "hybrid": ("bench.hybrid", "hybrid search (BM25 + MiniLM, fused per source) beside its parts on the qrels arms"),
    "fuzz": ("bench.fuzz", "coverage-guided fuzzing of the BibTeX, sidecar and JSONL readers (atheris)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print("usage: python -m bench COMMAND [options]\n\ncommands:")
        for name, (_m, help_text) in COMMANDS.items():
            print(f"  {name:<12} {help_text}")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return int(importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
