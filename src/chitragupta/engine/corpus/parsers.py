"""Parser backends: a source document in, its plain text (and, for structural backends, items) out.

``PARSERS`` names every backend (config validation and messages are built from its keys). A backend
checks the document's type by its content, never by its name alone, so a ``file`` field pointing at
``/etc/passwd`` is refused rather than parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

__all__ = ["PARSERS", "DOCLING_KINDS", "ParseResult", "ParseError", "parse", "sniff_kind"]


class ParseError(Exception):
    """The document could not be turned into text; the message is the ledger's failure reason."""


@dataclass(frozen=True)
class ParseResult:
    """``text``: the document's plain text (pages separated by form feeds where it has pages).
    ``items``: the structural sidecar's records, for backends that produce one; None otherwise."""

    text: str
    items: list[dict] | None = None


def sniff_kind(path: Path) -> str | None:
    """The document type by its first bytes: ``"pdf"`` or None for anything this build cannot parse."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
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
            # pdfium marks a hyphen at a line break as U+FFFE; the page shows a hyphen there.
            pages.append(text.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffe", "-"))
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
    from chitragupta.engine.corpus.docling_convert import convert, document_items
    from chitragupta.engine.corpus.sidecar import join_items

    doc = convert(path, artifacts_path=docling_artifacts_path or None, kind=kind)
    items = document_items(doc)
    if not items:
        raise ParseError(f"docling found no text in {path.name} ({kind or 'document'}: no text items)")
    return ParseResult(text=join_items(items), items=items)


def _docling_kind(path: Path) -> str | None:
    from chitragupta.engine.corpus.docling_convert import detect_format

    return detect_format(path)


# name -> (the document kinds it reads, the function)
PARSERS: dict[str, tuple[tuple[str, ...], Callable[..., ParseResult]]] = {
    "pdftotext": (("pdf",), _pdftotext),
    "docling": (DOCLING_KINDS, _docling),
}
# name -> its content sniffer, where it is not sniff_kind
_SNIFFERS: dict[str, Callable[[Path], str | None]] = {"docling": _docling_kind}


def parse(path: Path, backend: str, *, docling_artifacts_path: str = "") -> ParseResult:
    """Parse one document with ``backend``; ParseError with a reason the ledger records.

    ``docling_artifacts_path``: the folder of docling's PDF layout models (``[parser]`` config), used
    by the docling backend for PDF sources only."""
    kinds, fn = PARSERS[backend]
    kind = _SNIFFERS.get(backend, sniff_kind)(path)
    if kind not in kinds:
        raise ParseError(
            f"{path} is not a document the {backend} backend reads ({', '.join(kinds)}; checked by content)"
        )
    if backend == "docling":
        return fn(path, kind=kind, docling_artifacts_path=docling_artifacts_path)
    return fn(path)
