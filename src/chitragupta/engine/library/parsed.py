"""What a parser backend gives back: a ``ParseResult``, or a ``ParseError`` whose message is the ledger's
failure reason. Every backend (``chitragupta.engine.library.parsers``' pdftotext, ``docling_convert``) and the
stages that call one share these, so no backend imports the registry that lists it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ParseError", "ParseResult"]


class ParseError(Exception):
    """The document could not be turned into text; the message is the ledger's failure reason."""


@dataclass(frozen=True)
class ParseResult:
    """``text``: the document's plain text (pages separated by form feeds where it has pages).
    ``items``: the structural sidecar's records, for backends that produce one; None otherwise."""

    text: str
    items: list[dict] | None = None
