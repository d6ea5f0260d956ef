"""docling as a converter: a source document in, a ``DoclingDocument`` (and sidecar items) out.

The one place the engine talks to docling; ``sync`` (through the ``docling`` parser backend) and the
enrich stage both call it. Public API:

    detect_format(path) -> str | None        the kind by content: "pdf", "docx", "html", "xml_jats",
                                             "json_docling", "latex", "md" (suffix + UTF-8 text), or None
    convert(path, *, artifacts_path, kind=None) -> DoclingDocument
    document_items(doc) -> list[dict]        the sidecar's items: {"text", "label", "page"} in reading order
    to_markdown(doc) -> str                  the whole document as Markdown
    to_json(doc) -> str                      the whole document as docling's DoclingDocument JSON

Every format but PDF is read by docling's declarative backends, built directly (no models, no torch,
no network: local and remote resource fetching stay off). PDF needs docling's layout models from a
local folder (``[parser].docling_artifacts_path``); they are never downloaded at run time, and a PDF
without that folder fails with a message saying how to provide it, never falling back to another
parser. A source that cannot be converted raises ``ParseError`` (its message is the ledger's failure
reason); docling itself missing raises ``MissingExtra``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from chitragupta.engine.library.parsed import ParseError
from chitragupta.engine.text.sidecar import EXCLUDED_LABELS
from chitragupta.files import read_head
from chitragupta.extras import INSTALL_HINT as EXTRA_HINTS, missing

if TYPE_CHECKING:  # pragma: no cover
    from docling_core.types.doc import DoclingDocument

__all__ = ["FORMATS", "INSTALL_HINT", "PDF_INSTALL_HINT", "detect_format", "convert", "document_items",
           "to_markdown", "to_json"]

# Every kind detect_format can answer, in the order it checks them.
FORMATS = ("pdf", "docx", "json_docling", "xml_jats", "html", "md", "latex")
INSTALL_HINT = EXTRA_HINTS["docling"]
PDF_INSTALL_HINT = EXTRA_HINTS["docling-pdf"]
MD_SUFFIXES = frozenset({".md", ".markdown"})

_HEAD = 64 * 1024
_HTML_RE = re.compile(r"<!doctype\s+html|<html[\s>/]", re.IGNORECASE)
_PROLOGUE_RE = re.compile(r"(?:\s|<\?.*?\?>|<!--.*?-->)*", re.DOTALL)
# The first element of an XML document, after its declaration, comments, PIs and DOCTYPE.
_XML_ROOT_RE = re.compile(
    r"^(?:\s|<\?.*?\?>|<!--.*?-->|<!DOCTYPE(?:[^\[>]|\[.*?\])*>)*<([A-Za-z_][\w.:-]*)", re.DOTALL | re.IGNORECASE
)
_JATS_DOCTYPE_RE = re.compile(r"<!DOCTYPE\s+article[^>]*(?:JATS|NLM)", re.IGNORECASE)
_JATS_MARKER_RE = re.compile(r"<article-meta[\s>]|<front[\s>]")
_DOCLING_SCHEMA_RE = re.compile(r'"schema_name"\s*:\s*"DoclingDocument"')
_LATEX_RE = re.compile(r"\\documentclass|\\begin\s*\{document\}")


# -- detection ----------------------------------------------------------------------------------

def _read_head(path: Path, n: int = _HEAD) -> bytes | None:
    """The first bytes of a regular file; None for anything else (a FIFO is never waited on)."""
    return read_head(path, n)


def _is_docx(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return "word/document.xml" in z.namelist()
    except (OSError, zipfile.BadZipFile, ValueError, RuntimeError):
        return False


def _head_text(head: bytes) -> str | None:
    """The head as UTF-8 text (a character cut at the end tolerated), or None if it is not text."""
    if b"\x00" in head:
        return None
    if len(head) >= _HEAD:  # possibly cut inside a multi-byte character
        for cut in range(4):
            try:
                return head[: len(head) - cut].decode("utf-8").lstrip("\ufeff")
            except UnicodeDecodeError:
                continue
        return None
    try:
        return head.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        return None


def _is_docling_json(path: Path, text: str) -> bool:
    """Plausible from the head (an object naming the schema), then confirmed by parsing the file."""
    if not text.lstrip().startswith("{") or not _DOCLING_SCHEMA_RE.search(text):
        return False
    try:
        with open(path, "rb") as f:
            obj = json.load(f)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("schema_name") == "DoclingDocument"


def _is_jats(text: str) -> bool:
    m = _XML_ROOT_RE.match(text)
    if m is None or m.group(1) != "article":
        return False
    return bool(_JATS_DOCTYPE_RE.search(text[: m.start(1)]) or _JATS_MARKER_RE.search(text))


def detect_format(path: str | os.PathLike) -> str | None:
    """The document's kind, by its content (Markdown: UTF-8 text named ``.md``/``.markdown``); None
    for anything docling should not be handed (a password file, a plain ``.txt``, an image, ...)."""
    path = Path(path)
    head = _read_head(path)
    if head is None:
        return None
    # The PDF header may follow a little junk; readers accept it within the first kilobyte.
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "docx" if _is_docx(path) else None
    text = _head_text(head)
    if text is None:
        return None
    if _is_docling_json(path, text):
        return "json_docling"
    if _is_jats(text):
        return "xml_jats"
    if _HTML_RE.match(text, _first_tag(text)):
        return "html"
    # Markdown cannot be recognised by content; its name decides, before the (textual) LaTeX test,
    # so notes that quote \documentclass in a code block stay Markdown.
    if path.suffix.lower() in MD_SUFFIXES:
        return "md"
    if _LATEX_RE.search(text):
        return "latex"
    return None


def _first_tag(text: str) -> int:
    """Where an HTML page's first markup starts: after whitespace, an XML declaration, comments."""
    return _PROLOGUE_RE.match(text).end()


# -- conversion ---------------------------------------------------------------------------------

def _declarative_backend(kind: str):
    """(InputFormat, backend class) for a non-PDF kind; MissingExtra when docling is not installed."""
    try:
        from docling.datamodel.base_models import InputFormat
        if kind == "md":
            from docling.backend.md_backend import MarkdownDocumentBackend as backend
        elif kind == "html":
            from docling.backend.html_backend import HTMLDocumentBackend as backend
        elif kind == "docx":
            from docling.backend.msword_backend import MsWordDocumentBackend as backend
        elif kind == "latex":
            from docling.backend.latex import LatexDocumentBackend as backend
        elif kind == "xml_jats":
            from docling.backend.xml.jats_backend import JatsDocumentBackend as backend
        elif kind == "json_docling":
            from docling.backend.json.docling_json_backend import DoclingJSONBackend as backend
        else:  # pragma: no cover - callers pass detect_format's kinds
            raise ParseError(f"docling: unknown document kind {kind!r}")
    except ImportError as err:
        raise missing("docling", "the docling backend needs docling", err) from err
    return InputFormat(kind), backend


def _convert_declarative(path: Path, kind: str) -> "DoclingDocument":
    fmt, backend = _declarative_backend(kind)
    from docling.datamodel.document import InputDocument

    try:
        in_doc = InputDocument(path_or_stream=path, format=fmt, backend=backend)
    except ImportError as err:  # a backend's own optional dependency (marko, bs4, python-docx, ...)
        raise missing("docling", f"docling's {kind} reader is not installed", err) from err
    except Exception as err:  # a broken file surfaces as whatever its parser raises
        raise ParseError(f"docling could not open this {kind} document ({type(err).__name__}: {err})") from err
    if not in_doc.valid or not in_doc._backend.is_valid():
        rejection = getattr(in_doc, "_rejection", None)
        why = getattr(rejection, "message", None) or "the document backend could not parse the input"
        raise ParseError(f"docling could not read this {kind} document ({why})")
    try:
        return in_doc._backend.convert()
    except ImportError as err:
        raise missing("docling", f"docling's {kind} reader is not installed", err) from err
    except Exception as err:
        raise ParseError(f"docling failed to convert this {kind} document ({type(err).__name__}: {err})") from err


def _models_howto(what: str) -> str:
    return (f"docling needs its PDF layout models and {what}; they are never downloaded while parsing. "
            "To provide them: on a connected machine with docling installed, run "
            "`docling-tools models download -o DIR`, copy DIR to this machine, and set "
            "[parser].docling_artifacts_path = \"DIR\" in config.toml (other formats need no models)")


@contextmanager
def _offline() -> Iterator[None]:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE set for the duration, then restored."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    for k in keys:
        os.environ[k] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_PDF_CONVERTERS: dict[str, Any] = {}
_PDF_LOCK = threading.Lock()


def _pdf_converter(folder: Path):
    """One DocumentConverter per artifacts folder (its models load once, on first use)."""
    key = str(folder)
    with _PDF_LOCK:
        conv = _PDF_CONVERTERS.get(key)
        if conv is not None:
            return conv
        try:
            import docling  # noqa: F401
        except ImportError as err:
            raise missing("docling", "the docling backend needs docling", err) from err
        try:
            import torch  # noqa: F401  (named first: docling's PDF pipeline cannot run without it)
            from docling.datamodel.base_models import InputFormat
            from docling.datamodel.pipeline_options import PdfPipelineOptions
            from docling.document_converter import DocumentConverter, PdfFormatOption
        except Exception as err:  # ImportError, or an import-time failure inside an optional piece
            raise ParseError(
                f"docling's PDF conversion is not installed ({PDF_INSTALL_HINT}): {type(err).__name__}: {err}"
            ) from err
        try:
            opts = PdfPipelineOptions(artifacts_path=str(folder), do_ocr=False)
            conv = DocumentConverter(
                allowed_formats=[InputFormat.PDF],
                format_options={InputFormat.PDF: PdfFormatOption(pipeline_options=opts)},
            )
        except Exception as err:
            raise ParseError(f"docling's PDF converter could not start ({type(err).__name__}: {err})") from err
        _PDF_CONVERTERS[key] = conv
        return conv


def _convert_pdf(path: Path, artifacts_path: str | None) -> "DoclingDocument":
    if not artifacts_path or not str(artifacts_path).strip():
        raise ParseError(_models_howto("[parser].docling_artifacts_path is not set"))
    folder = Path(artifacts_path).expanduser()
    if not folder.is_dir():
        raise ParseError(_models_howto(f"[parser].docling_artifacts_path = {str(artifacts_path)!r} is not a folder"))
    folder = folder.resolve()
    with _offline():
        conv = _pdf_converter(folder)
        try:
            from docling.datamodel.base_models import ConversionStatus

            res = conv.convert(path, raises_on_error=False)
        except Exception as err:
            raise ParseError(f"docling failed to convert this PDF ({type(err).__name__}: {err})") from err
    if res.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        why = "; ".join(e.error_message for e in (res.errors or [])) or str(res.status.value)
        raise ParseError(f"docling could not convert this PDF ({why})")
    return res.document


def convert(path: str | os.PathLike, *, artifacts_path: str | None = None,
            kind: str | None = None) -> "DoclingDocument":
    """``path`` as a DoclingDocument. ``kind`` (from detect_format) is sniffed when not given;
    ``artifacts_path`` is the folder of docling's PDF models (only PDF needs it).
    ParseError for a source that is not a supported document or cannot be converted."""
    path = Path(path)
    if kind is None:
        kind = detect_format(path)
    if kind is None:
        raise ParseError(f"{path} is not a document docling reads ({', '.join(FORMATS)}; checked by content)")
    if kind == "pdf":
        return _convert_pdf(path, artifacts_path)
    return _convert_declarative(path, kind)


# -- output -------------------------------------------------------------------------------------

def _table_markdown(item, doc) -> str:
    """A table as a Markdown pipe table, without its caption (captions are never indexed)."""
    from docling_core.transforms.serializer.markdown import MarkdownDocSerializer, MarkdownParams
    from docling_core.types.doc import DocItemLabel

    labels = set(MarkdownParams().labels) - {DocItemLabel.CAPTION, DocItemLabel.FOOTNOTE}
    ser = MarkdownDocSerializer(doc=doc, params=MarkdownParams(labels=labels, escape_underscores=False))
    return ser.serialize(item=item).text


def document_items(doc: "DoclingDocument") -> list[dict]:
    """The document's body items in reading order as sidecar records ``{"text", "label", "page"}``.

    ``label`` is docling's label value (``section_header``, ``text``, ``list_item``, ``table``, ...);
    a table's text is a Markdown pipe table; ``page`` is the first provenance's 1-based page, or None.
    Captions, page headers/footers, pictures and items without text are left out, as is furniture.
    """
    from docling_core.types.doc import ContentLayer, TableItem

    # A caption is a caption whatever its label says (some readers label a table's caption "text").
    captions = {ref.cref for it, _ in doc.iterate_items(included_content_layers={ContentLayer.BODY})
                for ref in (getattr(it, "captions", None) or ())}
    items: list[dict] = []
    for item, _level in doc.iterate_items(included_content_layers={ContentLayer.BODY}):
        label = getattr(item, "label", None)
        if label is None or item.self_ref in captions:
            continue
        label = str(getattr(label, "value", label))
        if label in EXCLUDED_LABELS:
            continue
        if isinstance(item, TableItem):
            text = _table_markdown(item, doc)
        else:
            text = getattr(item, "text", None)
        if not isinstance(text, str) or not text.strip():
            continue
        page = None
        prov = getattr(item, "prov", None)
        if prov:
            p = getattr(prov[0], "page_no", None)
            if isinstance(p, int) and not isinstance(p, bool) and p >= 1:
                page = p
        items.append({"text": text, "label": label, "page": page})
    return items


def to_markdown(doc: "DoclingDocument") -> str:
    """The whole document as Markdown (docling's own export)."""
    return doc.export_to_markdown()


def to_json(doc: "DoclingDocument") -> str:
    """The whole document as docling's own JSON export (``DoclingDocument`` schema), for the enrich stage."""
    return json.dumps(doc.export_to_dict(), ensure_ascii=False)
