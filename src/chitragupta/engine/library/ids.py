"""What an id may hold: a citekey (BibTeX) or an ``_id`` (a JSONL record or query) is written into TREC run
lines, which are split on white space. One rule for both readers (``bibtex.py`` and ``jsonl.py``)."""

from __future__ import annotations

import unicodedata

__all__ = ["bad_id"]


def bad_id(key: str) -> str | None:
    """Why ``key`` cannot be an ``_id`` (a citekey or a query id a TREC run carries), or None when it can:
    empty, white space (which splits a TREC line), a control character, an invisible format character (a
    right-to-left override, a zero-width space: a key shown spoofed), or a lone surrogate."""
    if not key:
        return "is empty"
    if key.isascii() and key.isprintable() and " " not in key:
        return None  # the common case, decided without a scan
    for c in key:
        if "\ud800" <= c <= "\udfff":
            return f"holds a lone surrogate escape U+{ord(c):04X} (not Unicode text)"
        if c.isspace():
            return f"holds white space (U+{ord(c):04X}), which a TREC run cannot carry"
        if c == "\x00":
            return "holds a NUL byte"
        cat = unicodedata.category(c)
        if cat == "Cc":
            return f"holds a control character (U+{ord(c):04X})"
        if cat == "Cf":  # bidi controls (U+202E), zero-width and other invisible characters
            return (f"holds an invisible format character (U+{ord(c):04X} {unicodedata.name(c, '')}), which would "
                    "show the key as other than it is")
    return None
