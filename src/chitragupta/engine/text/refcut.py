"""The reference-list cut: a paper's own bibliography is neither indexed nor shown.

The span is found structurally, in the corpus layer's sidecar: the *last* ``section_header`` item whose
whole text is References / Bibliography / Works Cited / Literature Cited (any case, optionally numbered:
``7 References``, ``VII. REFERENCES``), and everything from it to the end of the document. "Reference
architecture" is not such a heading, and neither is the same word under another label. With no sidecar
nothing is cut. One function, used by the document index, the passage index, every snippet and every
evidence window.
"""

from __future__ import annotations

import re

from chitragupta.engine.corpus.sidecar import EXCLUDED_LABELS

__all__ = ["is_reference_heading", "reference_cut", "kept_items"]

_HEADING = re.compile(
    r"^\s*(?:(?:\d+(?:\.\d+)*|[ivxlcdm]+|[a-z])[.):]?\s+)?"
    r"(?:references|bibliography|works\s+cited|literature\s+cited)\s*[.:]?\s*$",
    re.IGNORECASE,
)


def is_reference_heading(item: dict) -> bool:
    return item.get("label") == "section_header" and bool(_HEADING.match(item.get("text", "")))


def reference_cut(items: list[dict]) -> int | None:
    """Position of the last reference heading in ``items``, or None when there is none."""
    for i in range(len(items) - 1, -1, -1):
        if is_reference_heading(items[i]):
            return i
    return None


def kept_items(items: list[dict]) -> list[tuple[int, dict]]:
    """(item number, item) of everything before the cut, excluded labels left out, in order."""
    cut = reference_cut(items)
    end = len(items) if cut is None else cut
    return [(i, it) for i, it in enumerate(items[:end]) if it["label"] not in EXCLUDED_LABELS]
