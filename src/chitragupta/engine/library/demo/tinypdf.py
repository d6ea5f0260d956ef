"""A minimal PDF writer: pages of plain text lines in Helvetica, with a real text layer.

Enough for the demo and the tests to produce genuine PDFs that the ``pdftotext`` backend must extract,
without a PDF library dependency. Characters outside Latin-1 are written as ``?``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["write_pdf", "pdf_bytes", "paginate"]

_LINES_PER_PAGE = 52
_WRAP = 95


def _escape(line: str) -> bytes:
    data = line.encode("latin-1", errors="replace")
    return data.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def paginate(paragraphs: list[str], wrap: int = _WRAP, lines_per_page: int = _LINES_PER_PAGE) -> list[list[str]]:
    """Wrap paragraphs into lines (a paragraph's own line breaks are kept) and cut them into pages."""
    lines: list[str] = []
    for para in paragraphs:
        for raw in para.split("\n"):
            if raw.startswith("|"):
                lines.append(raw)  # table rows stay whole
            else:
                lines += textwrap.wrap(raw, wrap) or [""]
        lines.append("")
    pages = [lines[i:i + lines_per_page] for i in range(0, len(lines), lines_per_page)]
    return pages or [[]]


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF document whose page i shows ``pages[i]`` line by line."""
    objects: list[bytes] = []
    n_pages = len(pages)
    font_id = 3
    page_ids = [4 + 2 * i for i in range(n_pages)]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % p for p in page_ids)
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n_pages)
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, lines in enumerate(pages):
        stream = [b"BT", b"/F1 9 Tf", b"11 TL", b"50 760 Td"]
        for line in lines:
            stream.append(b"(" + _escape(line) + b") Tj T*")
        stream.append(b"ET")
        body = b"\n".join(stream)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> "
            b"/Contents %d 0 R >>" % (font_id, page_ids[i] + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def write_pdf(path: Path, paragraphs: list[str]) -> None:
    Path(path).write_bytes(pdf_bytes(paginate(paragraphs)))
