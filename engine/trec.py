"""TREC run files: ``qid Q0 docid rank score tag``, one line per hit."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from engine.errors import UsageError

__all__ = ["format_run_lines", "read_run", "RUN_TAG"]

RUN_TAG = "chitragupta"


def format_run_lines(qid: str, hits: Iterable[tuple[str, float]], tag: str = RUN_TAG) -> list[str]:
    """Lines for one query's (docid, score) hits, ranked from 1. A docid with whitespace is refused."""
    out = []
    for rank, (doc, score) in enumerate(hits, start=1):
        if not doc or any(c.isspace() for c in doc):
            raise UsageError(f"citekey {doc!r} holds whitespace and cannot be written to a TREC run")
        out.append(f"{qid} Q0 {doc} {rank} {score:.10g} {tag}")
    return out


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """A run file as qid -> [(docid, score)] in file order (ranks as written)."""
    run: dict[str, list[tuple[str, float]]] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise UsageError(f"{path}:{n}: a TREC run line has 6 fields, got {len(parts)}")
        run.setdefault(parts[0], []).append((parts[2], float(parts[4])))
    return run
