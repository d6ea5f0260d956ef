"""``--log DRAFT``: what a retrieval call cost, appended to that draft's dossier.

    content/dossiers/<draft>/retrieval.md

A Markdown table with the columns time, command, unit, query, expanded, k, hits, payload chars; the
header is written when the file is new, and a batch run logs one row per query. The draft name is made
path-safe like a citekey. ``payload chars`` is the characters of text handed back (titles and snippets
or passages), which is what makes the cost of retrieval for a draft a measurement.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from chitragupta.engine.library.workspace import Workspace, safe_name
from chitragupta.errors import OutputError

__all__ = ["LogRow", "COLUMNS", "append_rows", "dossier_path", "payload_chars", "expanded_text"]

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


def expanded_text(notes) -> str:
    """What acronym expansion added, from a query's notes (the ``expanded`` column): ``dt -> digital twin``."""
    return "; ".join(n.text.split(": ", 1)[1] for n in notes if n.kind == "expansion")


def payload_chars(hits) -> int:
    return sum(len(h.title) + len(h.snippet) for h in hits)


def dossier_path(ws: Workspace, draft: str) -> Path:
    return ws.inside_content(ws.content / "dossiers" / safe_name(draft) / "retrieval.md")


def _text(value) -> str:
    """``value`` as text that encodes to UTF-8: a query that came in as undecodable bytes (a non-UTF-8
    argv byte is a lone surrogate on Linux) has them replaced by U+FFFD, as does any other lone surrogate."""
    s = str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    try:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that did not come from a byte (a JSON "\\ud800")
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _cell(value) -> str:
    return _text(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def append_rows(ws: Workspace, draft: str, rows: list[LogRow]) -> Path:
    """Append ``rows`` to the draft's retrieval.md (header first if the file is new). One write call.
    OutputError (one line) when the dossier cannot be written (a full disk, a read-only workspace)."""
    path = dossier_path(ws, draft)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as err:
        raise OutputError(f"cannot write the --log dossier {path}: {err.strerror or err}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"cannot write the --log dossier {path}: it is not a regular file")
        lines = []
        if st.st_size == 0:
            lines.append("| " + " | ".join(COLUMNS) + " |")
            lines.append("|" + "---|" * len(COLUMNS))
        for r in rows:
            cells = (stamp, r.command, r.unit, r.query, r.expanded, r.k, r.hits, r.payload_chars)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        data = memoryview(("\n".join(lines) + "\n").encode("utf-8"))
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except OSError as err:
            raise OutputError(f"cannot write the --log dossier {path}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    return path
