"""``Note``: something a caller should be told beside an answer (a dropped query word, a source ranked on
its title alone, a rebuilt cache). Library code never prints; every surface shows notes its own way (the
CLI on stderr as ``[note] ...``, the MCP server as objects ``{kind, text}``: ``note_dicts``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Note", "note_dicts"]


@dataclass(frozen=True)
class Note:
    """Something the caller should be told; ``kind`` lets a caller filter (``title-only``, ``dropped``,
    ``no-terms``, ``unknown-terms``, ``index``, ``expansion``)."""

    kind: str
    text: str

    def __str__(self) -> str:
        return self.text


def note_dicts(notes) -> list[dict]:
    """Notes as JSON objects ``{"kind", "text"}``, the one shape every reply gives them: a ``Note``'s own, a
    plain string (or anything else) as ``{"kind": "note", "text": str(it)}``, an object of that shape kept."""
    out = []
    for n in notes:
        if isinstance(n, dict) and set(n) == {"kind", "text"}:
            out.append(n)
        else:
            out.append({"kind": n.kind, "text": n.text} if isinstance(n, Note) else {"kind": "note", "text": str(n)})
    return out
