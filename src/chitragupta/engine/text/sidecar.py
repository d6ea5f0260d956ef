"""The corpus layer's structural sidecar: ``content/parsed/<name>.passages.json``.

Written by ``sync`` with ``[parser].backend = "docling"`` beside ``<name>.txt``. Schema (version 1):

    [                                   a JSON list: the document's items in reading order
      {"text":  "1 Introduction",       the item's text (a table: a Markdown pipe table)
       "label": "section_header",       docling's label: title, section_header, text, list_item,
                                        table, formula, footnote, code, paragraph, ...
       "page":  1},                     1-based page number where the source has pages; absent
      ...                               (or null) where it has none
    ]

Figure captions, page headers and page footers are never written (a journal name repeated on every
page must not match a claim), and pictures have no text. ``<name>.txt`` is the same items' text in
order, joined by blank lines. An item's position in the list is its *item number*, the passage unit's
``<citekey>#<item>``.

Readers validate: a sidecar that is not JSON, not a list, or holds an item without a string ``text``
and a non-empty string ``label``, or with a page that is not a positive integer, raises SidecarError
naming the file; callers index the ``.txt`` uncut and say so.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from chitragupta.files import kind_of

__all__ = ["SidecarError", "EXCLUDED_LABELS", "HEADING_LABELS", "read_sidecar", "dump_sidecar", "join_items"]

# Never part of what BM25 reads or shows, even in a hand-made sidecar.
EXCLUDED_LABELS = frozenset({"caption", "page_header", "page_footer", "picture"})
# Structure, not prose: never a passage of its own.
HEADING_LABELS = frozenset({"title", "section_header"})
ITEM_SEPARATOR = "\n\n"


class SidecarError(Exception):
    """A sidecar that is not the documented shape; the message names the file and the problem."""


def _validate(items, where: str) -> list[dict]:
    if not isinstance(items, list):
        raise SidecarError(f"{where}: expected a JSON list of items, got {type(items).__name__}")
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise SidecarError(f"{where}: item {i} is a {type(it).__name__}, expected an object")
        text, label, page = it.get("text"), it.get("label"), it.get("page")
        if not isinstance(text, str):
            raise SidecarError(f"{where}: item {i} has no string 'text'")
        if not isinstance(label, str) or not label:
            raise SidecarError(f"{where}: item {i} has no 'label' (a docling label such as 'text')")
        if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
            raise SidecarError(f"{where}: item {i} has page {page!r}; allowed: a positive integer or none")
        out.append({"text": text, "label": label, "page": page})
    return out


def read_sidecar(path: Path) -> list[dict]:
    """The validated items of a sidecar (each with text, label, page-or-None); SidecarError if broken,
    or when it is not a regular file (a FIFO there is never opened: opening it would wait for a writer)."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise SidecarError(f"{path}: not a regular file ({kind_of(mode)}); expected a JSON list of items")
        raw = Path(path).read_bytes()
    except OSError as err:
        raise SidecarError(f"{path}: unreadable ({err.strerror or err})") from None
    try:
        items = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as err:
        raise SidecarError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:  # json's own nesting limit: ``[[[[...`` a hundred thousand deep
        raise SidecarError(f"{path}: not valid JSON (nested too deeply)") from None
    return _validate(items, str(path))


def dump_sidecar(items: list[dict]) -> str:
    """Serialise items (validated) in the documented shape; ``page`` left out where there is none."""
    _validate(items, "<sidecar>")
    rows = []
    for it in items:
        row = {"text": it["text"], "label": it["label"]}
        if it.get("page") is not None:
            row["page"] = it["page"]
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False, indent=0)


def join_items(items: list[dict]) -> str:
    """The ``.txt`` form of items: their text in order, joined by blank lines."""
    return ITEM_SEPARATOR.join(it["text"] for it in items)
