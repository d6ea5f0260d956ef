"""The ``--stages`` pipeline: read the ledger, say what it will work on, run the stages in order.

    lines = run(ws, ["docling", "embed"], echo=print)

Stages run in the fixed order docling -> embed -> bertopic whatever order they are named in, because
each may read what the one before wrote (embed prefers docling's Markdown). Every stage is a module
with ``run_stage(ws, rows, *, device, progress=None) -> list[str]``, imported only when it runs. Only
ledger rows are ever processed, so everything the enrichment layer holds is citable. The whole run
holds the workspace's write lock.
"""

from __future__ import annotations

import importlib
import logging
from collections import Counter
from contextlib import nullcontext
from typing import Callable, ContextManager, Iterable

from chitragupta.errors import UsageError
from chitragupta.engine.library.workspace import Workspace

__all__ = ["STAGES", "parse_stages", "corpus_header", "run"]

# stage name -> the module holding its run_stage (the order is the run order)
STAGES: dict[str, str] = {
    "docling": "chitragupta.enrich.docling_stage",
    "embed": "chitragupta.enrich.embed",
    "bertopic": "chitragupta.enrich.topics",
}
# stages that never touch torch: the device is not resolved for them alone
_NO_DEVICE = {"docling"}
say_now = logging.getLogger("chitragupta.progress")  # a step about to take seconds (the CLI prints it on stderr)


def parse_stages(spec: str | Iterable[str]) -> list[str]:
    """``"docling,embed"`` (or a list) -> the named stages in run order; UsageError for an unknown name."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [s for s in names if s]
    if not names:
        raise UsageError(f"--stages is empty; allowed: {', '.join(STAGES)} (comma-separated)")
    for s in names:
        if s not in STAGES:
            raise UsageError(f"unknown stage {s!r}; allowed: {', '.join(STAGES)} (comma-separated)")
    return [s for s in STAGES if s in names]


def corpus_header(ws: Workspace, rows) -> str:
    """``Corpus: 42 doc(s) from papers/bibliography.bib`` (every origin named, with counts when several)."""
    origins = Counter(r.origin for r in rows)
    if not origins:
        return "Corpus: 0 doc(s) (the ledger is empty)"
    if len(origins) == 1:
        return f"Corpus: {len(rows)} doc(s) from {next(iter(origins))}"
    parts = ", ".join(f"{o} ({n})" for o, n in sorted(origins.items()))
    return f"Corpus: {len(rows)} doc(s) from {parts}"


def _no_bar(_desc: str, _unit: str = "doc") -> ContextManager:
    return nullcontext(None)


def run(ws: Workspace, stages: str | Iterable[str], *, device: str | None = None,
        echo: Callable[[str], None] | None = None,
        progress: Callable[[str, str], ContextManager] | None = None, encode_stream=None) -> list[str]:
    """Run ``stages`` over every ledger row; returns every report line (each also passed to ``echo`` as
    it is produced, the corpus header first). ``device`` overrides ``[enrich].device``; ``progress`` is
    ``(description, unit) -> context manager yielding a (done, total) callback or None`` (the CLI's:
    a tqdm bar on a terminal, else a line every ~10 s or 5 %). ``encode_stream``: the embed and bertopic
    stages' encoding step (``chitragupta.enrich.stream.EncodeStream``, e.g. a Ray cluster's); None: the
    local model."""
    from chitragupta.engine.library.ledger import Ledger

    names = parse_stages(stages)
    say = echo or (lambda _line: None)
    bar = progress or _no_bar
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        say(line)

    with ws.lock("enrich"):
        with Ledger(ws.ledger_path, create=False) as ledger:
            rows = ledger.rows()
        emit(corpus_header(ws, rows))
        if not rows:
            emit("enrich: nothing to do; run `chitragupta sync` (BibTeX) or `chitragupta import FILE.jsonl` first")
            return lines
        chosen = "cpu"
        # a stream that encodes elsewhere (Ray actors) resolves its own device: only a local fit needs one here
        if any(s not in _NO_DEVICE and (encode_stream is None or s == "bertopic") for s in names):
            from chitragupta.enrich.device import resolve_device

            say_now.info("enrich: loading torch to choose the device ([enrich].device = %s)",
                         device or ws.config.enrich.device)
            chosen = resolve_device(device or ws.config.enrich.device)
        for name in names:
            say_now.info("enrich: the %s stage on %d source(s)%s", name, len(rows),
                         "" if name in _NO_DEVICE else f" ({chosen})")
            module = importlib.import_module(STAGES[name])
            unit = "chunk" if name in ("embed", "bertopic") else "doc"
            extra = {"encode_stream": encode_stream} if name != "docling" and encode_stream is not None else {}
            with bar(name, unit) as cb:
                for line in module.run_stage(ws, rows, device=chosen, progress=cb, **extra):
                    emit(line)
    return lines
