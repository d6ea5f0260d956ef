"""Parser backends: a source document in, its plain text (and, for structural backends, items) out.

``PARSERS`` names every backend (config validation and messages are built from its keys). A backend
checks the document's type by its content, never by its name alone, so a ``file`` field pointing at
``/etc/passwd`` is refused rather than parsed. Only regular files are read: a FIFO, a device, a socket or
a folder is refused by its type (``not_regular``) and never opened for reading, so it cannot hang a sync.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from chitragupta.engine.library.parsed import ParseError, ParseResult
from chitragupta.files import FOLDER, kind_of, read_head

__all__ = ["PARSERS", "DOCLING_KINDS", "ParseResult", "ParseError", "parse", "sniff_kind", "document_kind",
           "refusal", "not_regular", "read_head"]


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (``"is a folder, not a file"``, ``"is a pipe
    (FIFO), not a regular file"``, ...; the words are ``chitragupta.files.kind_of``'s), as the
    end of a sentence naming it; None for a regular file."""
    kind = kind_of(mode)
    if kind is None:
        return None
    if kind == FOLDER:
        return f"is {kind}, not a file"
    return f"is {kind}, not a regular file" if kind.startswith("a ") else f"is {kind}"


def sniff_kind(path: Path) -> str | None:
    """The document type by its first bytes: ``"pdf"`` or None for anything this build cannot parse."""
    head = read_head(path, 1024)
    if head is None:
        return None
    # The PDF header may follow a little junk; readers accept it within the first kilobyte.
    if b"%PDF-" in head:
        return "pdf"
    return None


def _pdftotext(path: Path) -> ParseResult:
    """The plain text of a PDF's text layer, pages joined by form feeds, through pdfium."""
    try:
        import pypdfium2 as pdfium
    except ImportError as err:  # a core dependency; say which
        raise ParseError("the pdftotext backend needs pypdfium2 (pip install pypdfium2)") from err
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as err:
        raise ParseError(f"not a readable PDF ({err})") from err
    try:
        pages = []
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            try:
                text = textpage.get_text_range()
            finally:
                textpage.close()
                page.close()
            # pdfium marks a hyphen at a line break as U+FFFE and drops the break after it; the page shows a
            # hyphen and a new line there, and so does the text (engine/text/hyphens.py joins the word)
            pages.append(text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-\n"))
    except pdfium.PdfiumError as err:
        raise ParseError(f"PDF text extraction failed ({err})") from err
    finally:
        pdf.close()
    text = "\f".join(pages)
    if not text.strip():
        raise ParseError("the PDF has no text layer (a scan? OCR it first)")
    return ParseResult(text=text)


DOCLING_KINDS = ("pdf", "docx", "html", "xml_jats", "json_docling", "latex", "md")


def _docling(path: Path, *, kind: str | None = None, docling_artifacts_path: str = "") -> ParseResult:
    """docling's reading-ordered items (labels, pages) and their joined text; see docling_convert."""
    from chitragupta.engine.library.docling_convert import convert, document_items
    from chitragupta.engine.text.sidecar import join_items

    doc = convert(path, artifacts_path=docling_artifacts_path or None, kind=kind)
    items = document_items(doc)
    if not items:
        raise ParseError(f"docling found no text in {path.name} ({kind or 'document'}: no text items)")
    return ParseResult(text=join_items(items), items=items)


def _docling_kind(path: Path) -> str | None:
    from chitragupta.engine.library.docling_convert import detect_format

    return detect_format(path)


# name -> (the document kinds it reads, the function)
PARSERS: dict[str, tuple[tuple[str, ...], Callable[..., ParseResult]]] = {
    "pdftotext": (("pdf",), _pdftotext),
    "docling": (DOCLING_KINDS, _docling),
}
# name -> its content sniffer, where it is not sniff_kind
_SNIFFERS: dict[str, Callable[[Path], str | None]] = {"docling": _docling_kind}


def document_kind(path: Path, backend: str) -> str | None:
    """The kind of ``path`` by its content when ``backend`` reads it, else None (read only if it is a
    regular file)."""
    kinds = PARSERS[backend][0]
    kind = _SNIFFERS.get(backend, sniff_kind)(path)
    return kind if kind in kinds else None


def refusal(path: Path, backend: str) -> str:
    """The reason given for a document ``backend`` does not read."""
    kinds = PARSERS[backend][0]
    return f"{path} is not a document the {backend} backend reads ({', '.join(kinds)}; checked by content)"


def parse(path: Path, backend: str, *, docling_artifacts_path: str = "", kind: str | None = None) -> ParseResult:
    """Parse one document with ``backend``; ParseError with a reason the ledger records.

    ``docling_artifacts_path``: the folder of docling's PDF layout models (``[parser]`` config), used
    by the docling backend for PDF sources only. ``kind``: the document's kind when the caller has
    already checked it (``document_kind``); sniffed otherwise."""
    kinds, fn = PARSERS[backend]
    try:
        what = not_regular(os.stat(path).st_mode)
    except OSError as err:
        raise ParseError(f"{path}: {err.strerror or err}") from err
    if what:
        raise ParseError(f"{path} {what}")
    if kind is None or kind not in kinds:
        kind = document_kind(path, backend)
    if kind is None:
        raise ParseError(refusal(path, backend))
    if backend == "docling":
        return fn(path, kind=kind, docling_artifacts_path=docling_artifacts_path)
    return fn(path)
