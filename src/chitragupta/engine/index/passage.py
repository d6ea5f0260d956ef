"""The BM25 passage index: every parsed source's paragraphs.

A passage is a paragraph of the text the document index read (``engine.index.source.load_body``: the
reference list cut, hyphens joined): with a valid sidecar (``content/parsed/<name>.passages.json``, never
``content/docling/``), one of its items; without one (a pdftotext parse, an import), one of the
paragraphs ``engine.text.paragraphs.plain_paragraphs`` finds, page by page. Either way a passage is not a
``title`` or ``section_header`` and holds at least ``[retrieval].min_passage_tokens`` indexed tokens; its
item number is its position in ``passage_items(body)``. Passages are laid out in (citekey, item number)
order, so ties by passage id are ties by citekey, then item. N, document frequencies and avgdl are
computed over passages, so its scores are not comparable with the document unit's.

An imported text (``chitragupta import``'s packs) is not split (``FLAG_IMPORTED``): a BEIR-style corpus is
abstracts, one paragraph a document, and splitting costs about a millisecond a document in Python (a
million imported abstracts: minutes added to every ``index``) for a unit that would repeat the document
unit. Its own cache (``content/index/passage/``) and schema version; updated incrementally on the same
per-document fingerprints as the document index. A sidecar that is not the documented shape is skipped
and counted (its source's ``.txt`` is not split either: the document unit reads it uncut).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from chitragupta.engine.text.sidecar import HEADING_LABELS
from chitragupta.engine.index import store
from chitragupta.engine.index.csr import Accumulator, add_reused, matching_documents
from chitragupta.engine.index.doc import citekeys_digest
from chitragupta.engine.index.source import (FLAG_BAD_SIDECAR, FLAG_NO_SIDECAR, FLAG_NOT_PARSED, FLAG_TEXT_MISSING,
                                 fingerprints, load_body)
from chitragupta.engine.text.paragraphs import plain_paragraphs
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.library.texts import is_ref
from chitragupta.engine.index.terms import TermIndex, array_of, check_arrays, check_string_table, table_arrays
from chitragupta.engine.text.stem import NONE, get_stemmer
from chitragupta.engine.text.refcut import kept_items
from chitragupta.engine.text.tokenize import DROPPED_RUNS, TOKENIZER_ID, runs_bytes

__all__ = ["PassageIndex", "PassageReport", "SCHEMA_VERSION", "FLAG_IMPORTED", "build_passages", "open_passages",
           "passage_items"]

SCHEMA_VERSION = 5  # 2: the vocabulary lookup table; 3: appendices after the reference list, hyphens joined;
# 4: paragraphs of plain text; 5: no lookup table
KIND = "passage"
FLAG_IMPORTED = 32  # (the passage index's own flag, beside engine.index.source's) an imported text: not split
_DROPPED = frozenset(DROPPED_RUNS)

Progress = Callable[[int, int | None], None]

# checksummed on every open (see chitragupta.engine.index.doc); the per-posting arrays get check_arrays
CHECKSUMMED_EVERY_OPEN = frozenset({"indptr", "doc_len", "vocab_blob", "vocab_offsets", "citekeys_blob",
                                    "citekeys_offsets", "flags", "p_doc", "p_item"})


@dataclass
class PassageReport:
    n_passages: int = 0
    n_docs: int = 0
    n_terms: int = 0
    retokenized: int = 0  # documents whose sidecar was read again
    reused: int = 0
    no_sidecar: int = 0  # sources split by the plain-text rule (no sidecar)
    bad_sidecar: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class PassageIndex(TermIndex):
    """An opened passage index: postings over passages plus each passage's (document, item)."""

    def __init__(self, arrays: dict[str, np.ndarray], manifest: dict, path: Path | None = None, *,
                 deep_checked: bool = True):
        super().__init__(arrays, manifest, deep_checked=deep_checked)
        self.manifest = manifest
        self.path = path
        self.where = f"the passage index ({path})" if path else "the passage index"
        self.citekeys = StringTable(arrays["citekeys_blob"], arrays["citekeys_offsets"])
        self.fingerprints = arrays["fingerprints"]
        self.flags = arrays["flags"]
        self.p_doc = arrays["p_doc"]  # (n_passages,) int32 document position (citekey order)
        self.p_item = arrays["p_item"]  # (n_passages,) int32 item number in the sidecar

    @property
    def n_passages(self) -> int:
        return self.postings.n_docs

    def keys_with_flag(self, flag: int) -> list[str]:
        return [self.citekeys[int(i)] for i in np.flatnonzero(np.asarray(self.flags) & flag)]

    def passages_of(self, doc: int) -> tuple[int, int]:
        """[start, end) of a document's passages (they are contiguous, in item order)."""
        p_doc = np.asarray(self.p_doc)
        return int(np.searchsorted(p_doc, doc, "left")), int(np.searchsorted(p_doc, doc, "right"))


def passage_items(body) -> list[dict]:
    """Every item of a ``Body``, numbered as the passage unit numbers them: a sidecar's items (uncut),
    else the paragraphs of its plain text (``plain_paragraphs``; the reference list already blanked)."""
    return list(body.items) if body.from_sidecar else plain_paragraphs(body.text)


def _kept(body) -> list[tuple[int, dict]]:
    """(item number, item) of a body's items that may be passages: outside the reference span."""
    return kept_items(list(body.items)) if body.from_sidecar else list(enumerate(passage_items(body)))


def expected_manifest(settings: dict) -> dict:
    return {"kind": KIND, "schema": SCHEMA_VERSION, "tokenizer": TOKENIZER_ID, "settings": settings}


def open_passages(folder: Path, settings: dict, *, verify: bool = False, deep: bool = True) -> PassageIndex:
    """Open the current passage index; ``store.IndexCorrupt`` if absent, broken, stale-schema or failing
    its checks (``check_arrays``, and every passage's document inside the citekey table); ``deep`` as
    for ``chitragupta.engine.index.doc.open_index``."""
    stored = store.load(folder, expect=expected_manifest(settings), verify=verify, always=CHECKSUMMED_EVERY_OPEN)
    arrays = stored.arrays
    n_units = check_arrays(arrays, deep=deep)
    n_docs = check_string_table(arrays, "citekeys", deep=deep)
    fps = array_of(arrays, "fingerprints", np.uint64, ndim=2, length=n_docs)
    if fps.shape[1] != 2:
        raise store.IndexCorrupt("array fingerprints is not (documents, 2)")
    array_of(arrays, "flags", np.uint8, length=n_docs)
    p_doc = array_of(arrays, "p_doc", np.int32, length=n_units)
    p_item = array_of(arrays, "p_item", np.int32, length=n_units)
    if n_units and (int(p_doc[0]) < 0 or int(p_doc[-1]) >= n_docs or (np.diff(p_doc) < 0).any()
                    or int(p_item.min()) < 0):
        raise store.IndexCorrupt("a passage names a document or item outside the index")
    try:
        return PassageIndex(arrays, stored.manifest, stored.path, deep_checked=deep)
    except KeyError as err:
        raise store.IndexCorrupt(f"array {err} is missing from the manifest") from None


def is_current(index: PassageIndex, rows, fps: np.ndarray) -> bool:
    return (index.citekeys.__len__() == len(rows)
            and index.manifest.get("citekeys_digest") == citekeys_digest(rows)
            and np.array_equal(np.asarray(index.fingerprints), fps))


def build_passages(root: Path, rows, folder: Path, settings: dict, *, old: PassageIndex | None = None,
                   progress: Progress | None = None, scanned=None) -> tuple[PassageIndex, PassageReport]:
    """Build (or update from ``old``) the passage index of the ledger ``rows`` (citekey order)."""
    t0 = time.perf_counter()
    report = PassageReport(rebuilt=True)
    min_tokens = int(settings["retrieval.min_passage_tokens"])
    fps, flags, sources = scanned if scanned is not None else fingerprints(root, rows)
    flags = flags.copy()
    reuse_new, reuse_old, _removed = matching_documents(old, sources, fps)
    reuse_of = dict(zip(reuse_new.tolist(), reuse_old.tolist()))
    acc = Accumulator(stem=get_stemmer(settings.get("retrieval.stemmer", NONE)))
    p_doc: list[int] = []
    p_item: list[int] = []
    vocab, arrays = _add_all(acc, sources, flags, reuse_of, old, report, min_tokens, progress, p_doc, p_item)
    n = len(p_doc)
    arrays.update(table_arrays([s.citekey for s in sources], vocab), fingerprints=fps, flags=flags,
                  p_doc=np.asarray(p_doc, dtype=np.int32), p_item=np.asarray(p_item, dtype=np.int32))
    with_text = (flags & (FLAG_TEXT_MISSING | FLAG_NOT_PARSED)) == 0
    report.no_sidecar = int(np.count_nonzero(with_text & ((flags & FLAG_NO_SIDECAR) != 0)))
    report.bad_sidecar = int(np.count_nonzero(flags & FLAG_BAD_SIDECAR))
    report.n_passages, report.n_docs, report.n_terms = n, len(set(p_doc)), len(vocab)
    manifest = dict(expected_manifest(settings), citekeys_digest=citekeys_digest(rows),
                    stats={"n_passages": n, "n_docs_with_passages": report.n_docs, "n_terms": len(vocab),
                           "nnz": int(arrays["indices"].shape[0]), "no_sidecar": report.no_sidecar,
                           "bad_sidecar": report.bad_sidecar})
    gen = store.save(folder, manifest, arrays)
    report.seconds = time.perf_counter() - t0
    return PassageIndex(arrays, dict(manifest), gen), report


def _add_all(acc, sources, flags, reuse_of, old, report, min_tokens, progress, p_doc, p_item):
    """Every source's passages into ``acc`` (reused ones copied from ``old``); the finished arrays."""
    new_units: list[np.ndarray] = []
    old_units: list[np.ndarray] = []
    for i, src in enumerate(sources):
        if src.text_file is not None and is_ref(src.text_file):
            flags[i] |= FLAG_IMPORTED
            continue
        j = reuse_of.get(i)
        if j is not None:
            a, b = old.passages_of(j)
            flags[i] |= np.asarray(old.flags)[j] & FLAG_BAD_SIDECAR
            new_units.append(np.arange(len(p_doc), len(p_doc) + (b - a), dtype=np.int64))
            old_units.append(np.arange(a, b, dtype=np.int64))
            p_doc += [i] * (b - a)
            p_item += np.asarray(old.p_item)[a:b].tolist()
            report.reused += 1
            continue
        if src.text_path is None:
            continue
        body = load_body(src.text_path)
        report.retokenized += 1
        if body.problem:
            flags[i] |= FLAG_BAD_SIDECAR
            report.notes.append(f"{body.problem}; no passages from it")
            continue
        for number, item in _kept(body):
            if item["label"] in HEADING_LABELS:
                continue
            runs = runs_bytes(item["text"])
            if len(runs) - sum(map(_DROPPED.__contains__, runs)) < min_tokens:
                continue
            acc.add_runs(len(p_doc), runs)
            p_doc.append(i)
            p_item.append(number)
        if progress and i % 64 == 0:
            progress(i, len(sources))
    if old_units:
        add_reused(acc, old.postings, old.vocab, np.concatenate(new_units), np.concatenate(old_units))
    return acc.finish(len(p_doc))
