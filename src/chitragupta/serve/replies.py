"""A tool's answer as the MCP server sends it: what an agent can afford to read.

    reply = finished(answer, root=ws.root, limit=ws.config.serve.max_reply_chars)

- notes are objects ``{kind, text}`` in every reply (``chitragupta.notes.note_dicts``), whatever the tool;
- no text names the workspace's absolute folder (a path in a note is given relative to it: ``relative_text``);
- the reply's JSON text, as the SDK writes it (indented, the same JSON as the structured content), is at
  most ``limit`` characters: past it, the reply's longest list is cut to the items that fit, and a note
  ("truncated") says how many of how many were kept and how to ask for less; a reply that cannot be cut
  to fit is a ``ReplyTooLarge`` error saying so.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from chitragupta.errors import UsageError
from chitragupta.notes import note_dicts

__all__ = ["finished", "relative_text", "reply_chars", "ReplyTooLarge"]


class ReplyTooLarge(UsageError):
    pass


def reply_chars(reply) -> int:
    """The characters of ``reply``'s JSON text as the SDK writes it (``pydantic_core.to_json``, indent 2)."""
    import pydantic_core

    return len(pydantic_core.to_json(reply, fallback=str, indent=2).decode("utf-8"))


def relative_text(text: str, root) -> str:
    """``text`` with the workspace folder ``root`` (absolute) written relative to it (``root/x`` as ``x``,
    ``root`` alone as ``.``)."""
    base = str(root)
    if base not in text:
        return text
    sep = re.escape(os.sep)
    return re.sub(re.escape(base) + f"(?:{sep}|(?![^\\s{sep}:;,)'\"]))", lambda m: "" if m.group(0) != base else ".", text)


def finished(reply: dict, *, root=None, limit: int | None = None) -> dict:
    """``reply`` (a tool's JSON-ready answer) as sent: notes as objects, paths relative to ``root``, and
    within ``limit`` characters (None: no cap)."""
    if "notes" in reply:
        notes = note_dicts(reply["notes"])
        if root is not None:
            notes = [dict(n, text=relative_text(n["text"], Path(root))) for n in notes]
        reply = dict(reply, notes=notes)
    return reply if limit is None else capped(reply, limit)


def capped(reply: dict, limit: int) -> dict:
    """``reply`` itself when its JSON text is within ``limit`` characters; else with its longest list cut to
    the most items that fit beside a note saying so; ReplyTooLarge when even none of them fit."""
    size = reply_chars(reply)
    if size <= limit:
        return reply
    lists = [k for k, v in reply.items() if k != "notes" and isinstance(v, list) and v]
    key = max(lists, key=lambda k: len(reply[k]), default=None)

    def cut(n: int) -> dict:
        items = reply[key]
        note = {"kind": "truncated", "text": (
            f"the reply is cut to the first {n:,} of {len(items):,} {key} to stay within [serve].max_reply_chars "
            f"= {limit:,} characters (the whole reply: {size:,}); ask for fewer (a smaller k or n, a page of "
            "the list, a smaller snippet_chars or width, narrower filters)")}
        return dict(reply, **{key: items[:n]}, notes=note_dicts(reply.get("notes", [])) + [note])

    if key is None or reply_chars(cut(0)) > limit:
        raise ReplyTooLarge(f"the reply would be {size:,} characters, past [serve].max_reply_chars = {limit:,}; "
                            "ask for less, or raise [serve].max_reply_chars in the workspace's config.toml")
    lo, hi = 0, len(reply[key]) - 1  # the most items that fit: cut(lo) fits, cut(hi + 1) does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if reply_chars(cut(mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return cut(lo)
