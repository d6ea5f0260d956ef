"""A window that lands in a table keeps the whole table.

Docling serialises a table as a Markdown pipe table. A chosen window that touches a run of two or more
consecutive lines beginning with ``|`` widens to that whole block, rendered line by line (not through
whitespace normalisation, which would collapse every row onto one line). Over ``TABLE_CAP`` characters,
whole rows are dropped from the end, so the header row -- first -- is the last to go. A window touching
no table is left exactly as it was.
"""

from __future__ import annotations

import re

__all__ = ["TABLE_CAP", "table_blocks", "render_block"]

TABLE_CAP = 4000
_BLOCK = re.compile(r"(?m)^\|[^\n]*(?:\n\|[^\n]*)+")


def table_blocks(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of two or more consecutive lines that begin with ``|``."""
    if "|" not in text:
        return []
    return [(m.start(), m.end()) for m in _BLOCK.finditer(text)]


def render_block(text: str, start: int, end: int, cap: int = TABLE_CAP) -> str:
    """The block's rows, one per line (trailing spaces removed), whole rows dropped from the end past ``cap``."""
    rows = [r.rstrip() for r in text[start:end].split("\n")]
    total = sum(len(r) for r in rows) + len(rows) - 1
    while len(rows) > 1 and total > cap:
        total -= len(rows.pop()) + 1
    return "\n".join(rows)
