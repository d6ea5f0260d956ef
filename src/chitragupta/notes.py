"""``Note``: something a caller should be told beside an answer (a dropped query word, a source ranked on
its title alone, a rebuilt cache). Library code never prints; every surface shows notes its own way (the
CLI on stderr as ``[note] ...``, the MCP server as objects)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Note"]


@dataclass(frozen=True)
class Note:
    """Something the caller should be told; ``kind`` lets a caller filter (``title-only``, ``dropped``,
    ``no-terms``, ``unknown-terms``, ``index``, ``expansion``)."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text
