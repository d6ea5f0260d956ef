"""The docling stage: each ledger row's source document converted to Markdown and DoclingDocument JSON.

    content/docling/<name>.md      docling's Markdown export (for reading: no stage reads it)
    content/docling/<name>.json    docling's full DoclingDocument JSON (the richer structural sidecar)
    content/docling/manifest.json  per citekey: the file name and the source's path, size and mtime

``<name>`` is the row's parsed-file stem (``safe_name`` of the citekey unless sync had to break a case
collision). Conversion goes through ``chitragupta.engine.library.docling_convert``, the converter the docling parser
backend uses. A source is converted again only when its path, size or mtime changed or an output is
missing. Rows imported from a JSONL corpus have no source document and are skipped, and so is a PDF when
``[parser].docling_artifacts_path`` does not hold docling's models (the converter says how to get them).

BM25 never reads this folder: the corpus layer's own parse stays what it ranks.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from chitragupta.engine.library.parsers import ParseError
from chitragupta.engine.library.sync import docling_artifacts_path
from chitragupta.engine.library.workspace import Workspace, atomic_write_text

__all__ = ["run_stage", "MANIFEST"]

MANIFEST = "manifest.json"
_SAVE_EVERY_S = 10.0


def _load_manifest(path: Path) -> dict:
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    docs = got.get("documents") if isinstance(got, dict) else None
    return docs if isinstance(docs, dict) else {}


def _save_manifest(path: Path, docs: dict) -> None:
    atomic_write_text(path, json.dumps({"schema": 1, "documents": docs}, indent=1, ensure_ascii=False),
                      durable=False)


def _names(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _unlink(*paths: Path) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def is_imported(row) -> bool:
    """A row from an imported JSONL corpus (its text came with it; there is no source document)."""
    return row.backend == "jsonl" or str(row.origin).lower().endswith(".jsonl")


def run_stage(ws: Workspace, rows, *, device: str, progress=None) -> list[str]:
    """Convert every row's source document that changed; returns the report lines. ``device`` is unused
    (docling's PDF models choose their own), kept for the one stage signature."""
    from chitragupta.engine.library import docling_convert as dc
    from chitragupta.enrich.chunking import docling_paths

    folder = ws.inside_content(ws.content / "docling")
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / MANIFEST
    docs = _load_manifest(manifest_path)
    artifacts = docling_artifacts_path(ws)
    imported, no_source, unchanged, converted = [], [], 0, 0
    failed: dict[str, list[str]] = {}
    keys = {r.citekey for r in rows}
    dirty, last_save = False, time.monotonic()
    total = len(rows)
    for i, row in enumerate(rows):
        if progress:
            progress(i, total)
        md, js = docling_paths(ws, row.citekey, row.parsed_path)
        if is_imported(row):
            imported.append(row.citekey)
            continue
        src = Path(row.source_path) if row.source_path else None
        if src is None or not src.is_file():
            no_source.append(row.citekey)
            if docs.pop(row.citekey, None) is not None:
                _unlink(md, js)
                dirty = True
            continue
        st = src.stat()
        entry = {"name": md.stem, "source_path": str(src), "source_size": st.st_size,
                 "source_mtime_ns": st.st_mtime_ns}
        if docs.get(row.citekey) == entry and md.is_file() and js.is_file():
            unchanged += 1
            continue
        try:
            doc = dc.convert(src, artifacts_path=artifacts)
            markdown, as_json = dc.to_markdown(doc), dc.to_json(doc)
        except ParseError as err:
            failed.setdefault(str(err), []).append(row.citekey)
            if docs.pop(row.citekey, None) is not None:
                _unlink(md, js)
                dirty = True
            continue
        # The JSON first and the manifest last: a run killed in between converts this source again.
        atomic_write_text(js, as_json, durable=False)
        atomic_write_text(md, markdown, durable=False)
        old = docs.get(row.citekey)
        if old and old.get("name") != md.stem:  # the row's file name moved: drop the old outputs
            _unlink(ws.inside_content(folder / f"{old.get('name')}.md"),
                    ws.inside_content(folder / f"{old.get('name')}.json"))
        docs[row.citekey] = entry
        converted += 1
        dirty = True
        if time.monotonic() - last_save > _SAVE_EVERY_S:
            _save_manifest(manifest_path, docs)
            dirty, last_save = False, time.monotonic()
    gone = [k for k in docs if k not in keys]
    for k in gone:
        name = docs.pop(k).get("name")
        if name:
            _unlink(ws.inside_content(folder / f"{name}.md"), ws.inside_content(folder / f"{name}.json"))
        dirty = True
    if dirty or not manifest_path.exists():
        _save_manifest(manifest_path, docs)
    if progress:
        progress(total, total)
    lines = [f"docling: {converted} converted, {unchanged} unchanged, {len(gone)} removed "
             f"({len(docs)} in content/docling/)"]
    if imported:
        lines.append(f"docling: skipped {len(imported)} source(s) imported from a JSONL corpus: they have no "
                     f"source document to convert")
    if no_source:
        lines.append(f"docling: skipped {len(no_source)} source(s) with no source file (no file field, or the "
                     f"file is gone): {_names(no_source)}")
    for reason, keys_failed in failed.items():
        lines.append(f"docling: skipped {len(keys_failed)} source(s) ({_names(keys_failed)}): {reason}")
    return lines
