"""What the embed and topic stages read for one document, and how it is cut into overlapping word chunks.

    document_text(ws, citekey, parsed_path) -> str     the text BM25 indexes after the row's title:
                                                       chitragupta.engine.index.source.row_body (the
                                                       reference cut, the appendix rule, the hyphen join)
    chunk_spans(text, words=200, overlap=40) -> [(start, end), ...]   character offsets into ``text``

One text path: whether a row's text came from pdftotext, docling (a sidecar) or a JSONL import, the chunks
that are embedded and the documents topics see are cut from the very string the document index tokenizes
and the snippets quote. The docling stage's Markdown (``content/docling/<name>.md``) is not read here.

A chunk is ``words`` whitespace-separated words; consecutive chunks share ``overlap`` words, so the step
is ``words - overlap``. Offsets are kept so a hit's snippet is cut from the very text that was encoded.
Pure Python: nothing here imports the enrich extra.
"""

from __future__ import annotations

import re
from pathlib import Path

from chitragupta.engine.index.source import row_body
from chitragupta.engine.workspace import Workspace, safe_name

__all__ = ["chunk_spans", "document_text", "docling_name", "docling_paths", "CHUNK_WORDS", "CHUNK_OVERLAP"]

CHUNK_WORDS = 200  # words per chunk, the spec's rule (the embed and topic stages cut with these)
CHUNK_OVERLAP = 40  # words a chunk shares with the one before it

_WORD = re.compile(r"\S+")


def chunk_spans(text: str, words: int = CHUNK_WORDS, overlap: int = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of ``words``-word chunks of ``text`` overlapping by ``overlap`` words.

    The first chunk starts at the first word, each next one ``words - overlap`` words later, and the last
    one is the first that reaches the final word (so no word is left out and no chunk lies wholly inside
    its predecessor). ``end`` is the end of a chunk's last word; ``text[start:end]`` is the chunk. Empty
    or all-whitespace text gives ``[]``.
    """
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"words must be an integer >= 1, got {words!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < words:
        raise ValueError(f"overlap must be an integer with 0 <= overlap < words ({words}), got {overlap!r}")
    bounds = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    n = len(bounds)
    spans: list[tuple[int, int]] = []
    step = words - overlap
    first = 0
    while first < n:
        last = min(first + words, n) - 1
        spans.append((bounds[first][0], bounds[last][1]))
        if last == n - 1:
            break
        first += step
    return spans


def docling_name(citekey: str, parsed_path: str | None) -> str:
    """The file-name stem the docling stage uses for a row: the parsed file's stem (sync assigns it
    collision-free), else ``safe_name(citekey)``."""
    if parsed_path:
        stem = Path(parsed_path).name
        if stem.endswith(".txt"):
            return stem[:-4]
    return safe_name(citekey)


def docling_paths(ws: Workspace, citekey: str, parsed_path: str | None) -> tuple[Path, Path]:
    """``(content/docling/<name>.md, content/docling/<name>.json)``, checked to stay inside content/."""
    name = docling_name(citekey, parsed_path)
    folder = ws.content / "docling"
    return ws.inside_content(folder / f"{name}.md"), ws.inside_content(folder / f"{name}.json")


def document_text(ws: Workspace, citekey: str, parsed_path: str | None) -> str:
    """The text the embed (and topic) stage reads for one ledger row: exactly the text the document index
    reads after the row's title (``chitragupta.engine.index.source.row_body``: its reference span cut,
    appendices kept, line-end hyphens joined); "" when the row has no text on disk. ``citekey`` is unused:
    the parsed path names the file."""
    return row_body(ws.root, parsed_path).text
