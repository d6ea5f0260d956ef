"""The BM25 document index: building it, updating it incrementally, and opening it for search.

Layout (all arrays, see ``chitragupta.engine.index.store``): the vocabulary and the citekeys as sorted string tables
(term id = vocabulary position, document id = citekey position, so ties by id are ties by citekey); a
term-major CSR of raw term frequencies (``indptr``, ``indices``, ``tf``: a term's row is its posting
list); document lengths; one fingerprint and one flag byte per document. BM25 itself is applied at query
time, so k1 and b change without a rebuild.

An update re-tokenizes only documents whose fingerprint changed and rebuilds the arrays canonically
(sorted vocabulary, citekey order, ascending document ids per term), so an incrementally updated index
is identical to a fresh build.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from chitragupta.engine.index import store
from chitragupta.engine.index.source import (FLAG_BAD_SIDECAR, FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR, FLAG_NOT_PARSED,
                                 FLAG_TEXT_MISSING, Body, DocSource, fingerprints, load_body, read_text)
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.index.csr import Accumulator, add_reused, matching_documents
from chitragupta.engine.index.terms import TermIndex
from chitragupta.engine.stem import NONE, get_stemmer
from chitragupta.engine.tokenize import TOKENIZER_ID, iter_runs_bytes, runs_bytes

__all__ = ["DocIndex", "IndexReport", "SCHEMA_VERSION", "build", "open_index", "expected_manifest", "is_current",
           "citekeys_digest"]

SCHEMA_VERSION = 4  # 2: the reference cut; 3: title and abstract field counts; 4: the vocabulary lookup table
FIELDS = ("title", "abstract")
KIND = "doc"

Progress = Callable[[int, int | None], None]



@dataclass
class IndexReport:
    """What an index refresh did."""

    n_docs: int = 0
    n_terms: int = 0
    nnz: int = 0
    retokenized: int = 0
    reused: int = 0
    removed: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    text_missing: int = 0
    not_parsed: int = 0
    with_abstract: int = 0
    notes: list[str] = field(default_factory=list)


class DocIndex(TermIndex):
    """An opened document index (arrays possibly memory-mapped) with its query-time caches."""

    def __init__(self, arrays: dict[str, np.ndarray], manifest: dict, path: Path | None = None):
        super().__init__(arrays, manifest)
        self.postings.fields.update({f: arrays[f"tf_{f}"] for f in FIELDS})
        self.manifest = manifest
        self.path = path
        self.where = f"the document index ({path})" if path else "the document index"
        self.citekeys = StringTable(arrays["citekeys_blob"], arrays["citekeys_offsets"])
        self.fingerprints = arrays["fingerprints"]
        self.flags = arrays["flags"]

    # -- sizes and notes ------------------------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return self.postings.n_docs

    def count_flag(self, flag: int) -> int:
        return int(np.count_nonzero(np.asarray(self.flags) & flag))

    def keys_with_flag(self, flag: int) -> list[str]:
        return [self.citekeys[int(i)] for i in np.flatnonzero(np.asarray(self.flags) & flag)]

    def doc_id(self, citekey: str) -> int:
        return self.citekeys.find(citekey)


def expected_manifest(settings: dict) -> dict:
    """The manifest keys an index must match to be reused."""
    return {"kind": KIND, "schema": SCHEMA_VERSION, "tokenizer": TOKENIZER_ID, "settings": settings}


def open_index(folder: Path, settings: dict) -> DocIndex:
    """Open the current index under ``folder``; ``store.IndexCorrupt`` if absent, broken or stale-schema."""
    stored = store.load(folder, expect=expected_manifest(settings))
    try:
        return DocIndex(stored.arrays, stored.manifest, stored.path)
    except KeyError as err:
        raise store.IndexCorrupt(f"array {err} is missing from the manifest") from None


def citekeys_digest(rows) -> str:
    """A digest of the citekey sequence: with the fingerprints, what decides that a cache is current."""
    h = hashlib.blake2b(digest_size=16)
    for r in rows:
        b = r[0].encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(4, "little"))
        h.update(b)
    return h.hexdigest()


def is_current(index: DocIndex, rows, fps: np.ndarray) -> bool:
    """True when ``index`` was built from exactly these rows with these fingerprints."""
    return (
        index.n_docs == len(rows)
        and index.manifest.get("citekeys_digest") == citekeys_digest(rows)
        and np.array_equal(np.asarray(index.fingerprints), fps)
    )


def build(root: Path, rows, folder: Path, settings: dict, *, old: DocIndex | None = None,
          progress: Progress | None = None, scanned=None) -> tuple[DocIndex, IndexReport]:
    """Build (or update from ``old``) the index of ``rows`` and save it under ``folder``.

    rows: the ledger's (citekey, title, status, parsed_path) in citekey order; ``scanned``: their
    ``fingerprints(root, rows)`` if already computed. The caller holds the workspace lock. Returns the
    opened new index and a report.
    """
    t0 = time.perf_counter()
    report = IndexReport(rebuilt=True)
    fps, flags, sources = scanned if scanned is not None else fingerprints(root, rows)
    n = len(rows)
    acc = Accumulator(fields=FIELDS, stem=get_stemmer(settings.get("retrieval.stemmer", NONE)))

    reuse_new, reuse_old, report.removed = matching_documents(old, sources, fps)
    reused = np.zeros(n, dtype=bool)
    if reuse_new.size:
        reused[reuse_new] = True
        add_reused(acc, old.postings, old.vocab, reuse_new, reuse_old, fields=FIELDS)
        # a reused document keeps what its last tokenization found about its sidecar
        flags[reuse_new] |= np.asarray(old.flags)[reuse_old] & (FLAG_BAD_SIDECAR | FLAG_HAS_ABSTRACT)
    report.reused = int(reused.sum())

    todo = np.flatnonzero(~reused)
    for step, i in enumerate(todo):
        src: DocSource = sources[int(i)]
        title_runs = runs_bytes(src.title)
        acc.add_runs(int(i), title_runs)
        acc.add_runs(int(i), title_runs, field="title")
        if src.text_file is not None:
            # the scan found no sidecar: the .txt as it is (a sidecar written since changes the fingerprint)
            body = Body(read_text(src.text_file)) if src.flags & FLAG_NO_SIDECAR else load_body(src.text_path)
            if body.problem:
                flags[i] |= FLAG_BAD_SIDECAR
                report.notes.append(f"{body.problem}; indexed from its .txt without the reference cut")
            for runs in iter_runs_bytes(body.text):
                acc.add_runs(int(i), runs)
            if body.abstract:
                flags[i] |= FLAG_HAS_ABSTRACT
                acc.add_runs(int(i), runs_bytes(body.abstract), field="abstract")
        if progress and step % 64 == 0:
            progress(step, len(todo))
    if progress:
        progress(len(todo), len(todo))
    report.retokenized = len(todo)

    vocab, arrays = acc.finish(n)
    citekeys = StringTable.from_sorted([s.citekey for s in sources])
    from chitragupta.kernels.lookup import build_table  # numba: imported only when an index is built

    vt = StringTable.from_sorted(vocab)
    arrays.update(
        citekeys_blob=citekeys.blob, citekeys_offsets=citekeys.offsets,
        vocab_blob=vt.blob, vocab_offsets=vt.offsets, vocab_slots=build_table(vt.blob, vt.offsets),
        fingerprints=fps, flags=flags,
    )
    report.n_docs, report.n_terms, report.nnz = n, len(vocab), int(arrays["indices"].shape[0])
    report.text_missing = int(np.count_nonzero(flags & FLAG_TEXT_MISSING))
    report.with_abstract = int(np.count_nonzero(flags & FLAG_HAS_ABSTRACT))
    report.not_parsed = int(np.count_nonzero(flags & FLAG_NOT_PARSED))
    manifest = dict(
        expected_manifest(settings),
        citekeys_digest=citekeys_digest(rows),
        stats={"n_docs": n, "n_terms": len(vocab), "nnz": report.nnz,
               "avgdl": float(arrays["doc_len"].mean()) if n else 0.0,
               "text_missing": report.text_missing, "not_parsed": report.not_parsed,
               "with_abstract": report.with_abstract},
    )
    gen = store.save(folder, manifest, arrays)
    report.seconds = time.perf_counter() - t0
    index = DocIndex(arrays, dict(manifest), gen)
    return index, report
