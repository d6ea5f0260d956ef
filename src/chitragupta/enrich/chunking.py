"""What the embed stage reads for one document, and how it is cut into overlapping word chunks.

    document_text(ws, citekey, parsed_path) -> str     content/docling/<name>.md when the docling stage
                                                       wrote one, else the parsed text before the
                                                       reference cut (chitragupta.engine.index.source.load_body)
    chunk_spans(text, words=200, overlap=40) -> [(start, end), ...]   character offsets into ``text``

A chunk is ``words`` whitespace-separated words; consecutive chunks share ``overlap`` words, so the step
is ``words - overlap``. Offsets are kept so a hit's snippet is cut from the very text that was encoded.
Pure Python: nothing here imports the enrich extra.
"""

from __future__ import annotations

import re
from pathlib import Path

from chitragupta.engine.index.source import load_body, read_text
from chitragupta.engine.text.refcut import is_appendix_heading, is_reference_heading
from chitragupta.engine.workspace import Workspace, safe_name

__all__ = ["chunk_spans", "document_text", "docling_name", "docling_paths", "cut_markdown_references"]

_WORD = re.compile(r"\S+")
_MD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$", re.MULTILINE)


def chunk_spans(text: str, words: int = 200, overlap: int = 40) -> list[tuple[int, int]]:
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


def cut_markdown_references(md: str) -> str:
    """Markdown without its reference list: from its last heading whose text is a reference heading
    (References, Bibliography, ...) up to the first later heading that opens an appendix, the rule the
    corpus layer applies to a sidecar (``chitragupta.engine.text.refcut``); unchanged when there is none."""
    cut = None
    heads = list(_MD_HEADING.finditer(md))
    for n, m in enumerate(heads):
        if is_reference_heading({"label": "section_header", "text": m.group(2)}):
            cut = n
    if cut is None:
        return md
    start = heads[cut].start()
    for m in heads[cut + 1:]:
        if is_appendix_heading({"label": "section_header", "text": m.group(2)}):
            return md[:start] + md[m.start():]
    return md[:start].rstrip()


def document_text(ws: Workspace, citekey: str, parsed_path: str | None) -> str:
    """The text the embed (and topic) stage reads for one ledger row.

    ``content/docling/<name>.md`` when present (better reading order), cut at its reference heading;
    else the parsed text with the corpus layer's reference cut when it has a sidecar
    (``content/parsed/<name>.passages.json``); "" when the row has no text on disk.
    """
    md, _json = docling_paths(ws, citekey, parsed_path)
    if md.is_file():
        return cut_markdown_references(read_text(md))
    if not parsed_path:
        return ""
    path = ws.absolute(parsed_path)
    if not path.is_file():
        return ""
    return load_body(path).text
