"""``--log DRAFT``: what a retrieval call cost, appended to that draft's dossier.

    content/dossiers/<draft>/retrieval.md

A Markdown table with the columns time, command, unit, query, expanded, k, hits, payload chars; the
header is written when the file is new, and a batch run logs one row per query. The draft name is made
path-safe like a citekey. ``payload chars`` is the characters of text handed back (titles and snippets
or passages), which is what makes the cost of retrieval for a draft a measurement.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from chitragupta.engine.workspace import Workspace, safe_name

__all__ = ["LogRow", "COLUMNS", "append_rows", "dossier_path", "payload_chars"]

COLUMNS = ("time", "command", "unit", "query", "expanded", "k", "hits", "payload chars")


@dataclass(frozen=True)
class LogRow:
    command: str
    unit: str
    query: str
    expanded: str
    k: int
    hits: int
    payload_chars: int


def payload_chars(hits) -> int:
    return sum(len(h.title) + len(h.snippet) for h in hits)


def dossier_path(ws: Workspace, draft: str) -> Path:
    return ws.inside_content(ws.content / "dossiers" / safe_name(draft) / "retrieval.md")


def _cell(value) -> str:
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def append_rows(ws: Workspace, draft: str, rows: list[LogRow]) -> Path:
    """Append ``rows`` to the draft's retrieval.md (header first if the file is new). One write call."""
    path = dossier_path(ws, draft)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    lines = []
    if not path.exists() or path.stat().st_size == 0:
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
    for r in rows:
        cells = (stamp, r.command, r.unit, r.query, r.expanded, r.k, r.hits, r.payload_chars)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    data = ("\n".join(lines) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path
