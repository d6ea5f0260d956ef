"""The BM25 document index: building it, updating it incrementally, and opening it for search.

Layout (all arrays, see ``engine.index.store``): the vocabulary and the citekeys as sorted string tables
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
from collections import defaultdict
from itertools import chain, count, repeat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from engine.index import store
from engine.index.source import FLAG_NOT_PARSED, FLAG_TEXT_MISSING, DocSource, fingerprints, read_text
from engine.index.strings import StringTable
from engine.tokenize import _SEPARATE, DROPPED_RUNS, TOKENIZER_ID, iter_runs_bytes, runs_bytes
from kernels.types import Postings, QueryBatch, bm25_idf, length_norm

__all__ = ["DocIndex", "IndexReport", "SCHEMA_VERSION", "build", "open_index", "expected_manifest", "is_current",
           "citekeys_digest"]

SCHEMA_VERSION = 1
KIND = "doc"

Progress = Callable[[int, int | None], None]

_FLUSH_TOKENS = 1 << 21  # pending (doc, term) pairs before they are reduced to counts
_NUMBA_LOOKUP_MIN = 32  # queries; below this the lookup's hash table is not worth building


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
    notes: list[str] = field(default_factory=list)


class DocIndex:
    """An opened document index (arrays possibly memory-mapped) with its query-time caches."""

    def __init__(self, arrays: dict[str, np.ndarray], manifest: dict, path: Path | None = None):
        self.manifest = manifest
        self.path = path
        self.citekeys = StringTable(arrays["citekeys_blob"], arrays["citekeys_offsets"])
        self.vocab = StringTable(arrays["vocab_blob"], arrays["vocab_offsets"])
        self.postings = Postings(
            indptr=arrays["indptr"], indices=arrays["indices"], tf=arrays["tf"], doc_len=arrays["doc_len"],
        )
        self.fingerprints = arrays["fingerprints"]
        self.flags = arrays["flags"]
        self._idf: np.ndarray | None = None
        self._slots = None
        self._norms: dict[tuple[float, float], np.ndarray] = {}

    # -- sizes and notes ------------------------------------------------------------------------
    @property
    def n_docs(self) -> int:
        return self.postings.n_docs

    def count_flag(self, flag: int) -> int:
        return int(np.count_nonzero(np.asarray(self.flags) & flag))

    def keys_with_flag(self, flag: int) -> list[str]:
        return [self.citekeys[int(i)] for i in np.flatnonzero(np.asarray(self.flags) & flag)]

    # -- query-time caches ----------------------------------------------------------------------
    @property
    def idf_(self) -> np.ndarray:
        if self._idf is None:
            self._idf = bm25_idf(self.postings.df(), self.n_docs)
        return self._idf

    def norm(self, k1: float, b: float) -> np.ndarray:
        """BM25's per-document ``k1 * (1 - b + b * dl / avgdl)``, cached per (k1, b)."""
        key = (float(k1), float(b))
        got = self._norms.get(key)
        if got is None:
            if len(self._norms) > 32:
                self._norms.clear()
            got = self._norms[key] = length_norm(self.postings.doc_len, self.postings.avgdl(), k1, b)
        return got

    def query_batch(self, term_lists: list[list[str]]) -> QueryBatch:
        """Distinct known term ids per query (unknown terms dropped), as a CSR batch."""
        flat = [t for terms in term_lists for t in terms]
        lengths = np.fromiter((len(t) for t in term_lists), dtype=np.int64, count=len(term_lists))
        return self._batch(np.asarray(self.vocab.find_many(flat), dtype=np.int64), lengths)

    def query_batch_from_strings(self, queries) -> QueryBatch:
        """Tokenize raw query strings and look their terms up, for a whole batch at once.

        The same terms as ``query_batch([query_terms(q)[0] for q in queries])``: stopwords and short
        runs are never in the vocabulary, so a vocabulary miss drops them without a separate pass.
        Large batches go through the numba lookup (``kernels.lookup``) when numba is importable.
        """
        encoded = [q.lower().encode("ascii", "replace") for q in queries]
        if len(encoded) >= _NUMBA_LOOKUP_MIN and self._lookup_slots() is not None:
            from kernels.lookup import lookup_batch

            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
            starts = np.zeros(len(encoded) + 1, dtype=np.int64)
            np.cumsum(lengths + 1, out=starts[1:])
            buf = np.frombuffer(b"\n".join(encoded) + b"\n", dtype=np.uint8)
            indptr, terms = lookup_batch(buf, starts, np.asarray(self.vocab.blob), np.asarray(self.vocab.offsets),
                                         self._slots)
            return QueryBatch(indptr=indptr, terms=terms)
        runs = [q.translate(_SEPARATE).split() for q in encoded]  # the runs_bytes rule
        lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        flat = list(chain.from_iterable(runs))
        ids = np.asarray(self.vocab.find_many([t.decode("ascii") for t in flat]), dtype=np.int64)
        return self._batch(ids, lengths)

    def _lookup_slots(self):
        """The vocabulary's hash table for the numba lookup, built once; None without numba."""
        if self._slots is None:
            try:
                from kernels.lookup import build_table
            except ImportError:
                self._slots = False
            else:
                self._slots = build_table(np.asarray(self.vocab.blob), np.asarray(self.vocab.offsets))
        return None if self._slots is False else self._slots

    def _batch(self, ids: np.ndarray, lengths: np.ndarray) -> QueryBatch:
        n = lengths.shape[0]
        qid = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keep = ids >= 0
        keys = np.sort((qid[keep] << 32) | ids[keep])  # by query, then term
        if keys.size:
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # distinct
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys >> 32, minlength=n), out=indptr[1:])
        return QueryBatch(indptr=indptr, terms=(keys & 0xFFFFFFFF).astype(np.int32))

    def doc_id(self, citekey: str) -> int:
        return self.citekeys.find(citekey)

    def matrix(self):
        """The term-frequency matrix as a scipy ``csr_array`` (terms x documents)."""
        from scipy import sparse

        p = self.postings
        return sparse.csr_array((p.tf, p.indices, p.indptr), shape=(p.n_terms, p.n_docs))


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


class _Accumulator:
    """Streams documents' tokens into (doc, term, count) triples with a provisional vocabulary.

    Runs arrive as bytes (``engine.tokenize.runs_bytes``); the never-indexed runs (short ones and
    stopwords) are seeded as the first provisional ids and masked out in bulk, so the per-token work is
    one C-level dictionary lookup.
    """

    def __init__(self):
        self.vocab: dict[bytes, int] = defaultdict(count().__next__)
        for run in DROPPED_RUNS:
            self.vocab[run]
        self.n_dropped = len(self.vocab)
        self.pend_docs: list[np.ndarray] = []
        self.pend_terms: list[int] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add_runs(self, doc: int, runs: list[bytes]) -> None:
        if not runs:
            return
        self.pend_terms.extend(map(self.vocab.__getitem__, runs))
        self.pend_docs.append(np.full(len(runs), doc, dtype=np.int64))
        if len(self.pend_terms) >= _FLUSH_TOKENS:
            self.flush()

    def add_counts(self, docs: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> None:
        """Already-counted triples (reused documents); ``terms`` are provisional ids."""
        self.flush()
        self.chunks.append((docs.astype(np.int64), terms.astype(np.int64), counts.astype(np.int64)))

    def provisional_ids(self, strings: list[str]) -> np.ndarray:
        get = self.vocab.__getitem__
        return np.fromiter((get(t.encode("ascii")) for t in strings), dtype=np.int64, count=len(strings))

    def flush(self) -> None:
        if not self.pend_terms:
            return
        docs = np.concatenate(self.pend_docs)
        terms = np.asarray(self.pend_terms, dtype=np.int64)
        keep = terms >= self.n_dropped
        keys = np.sort((docs[keep] << 32) | terms[keep])
        if keys.size:
            starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            counts = np.diff(np.append(starts, keys.size))
            keys = keys[starts]
        else:
            counts = np.zeros(0, dtype=np.int64)
        self.chunks.append((keys >> 32, keys & 0xFFFFFFFF, counts.astype(np.int64)))
        self.pend_docs, self.pend_terms = [], []

    def finish(self, n_docs: int) -> tuple[list[str], dict[str, np.ndarray]]:
        """Sorted vocabulary and the canonical term-major CSR arrays."""
        self.flush()
        # Provisional id order; the dropped runs never occur in a triple, so they get no rank.
        terms_prov = [t.decode("ascii") for t in self.vocab]
        d = self.n_dropped
        order = sorted(range(d, len(terms_prov)), key=terms_prov.__getitem__)
        rank = np.full(len(terms_prov), -1, dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
        vocab = [terms_prov[i] for i in order]
        if self.chunks:
            docs = np.concatenate([c[0] for c in self.chunks])
            terms = rank[np.concatenate([c[1] for c in self.chunks])]
            counts = np.concatenate([c[2] for c in self.chunks])
        else:
            docs = terms = counts = np.zeros(0, dtype=np.int64)
        n_terms = len(vocab)
        if counts.size and counts.max() > np.iinfo(np.int32).max:
            raise OverflowError("a term frequency exceeds 2**31 - 1")
        doc_len = np.bincount(docs, weights=counts, minlength=n_docs).astype(np.int64)
        if doc_len.size and doc_len.max() > np.iinfo(np.int32).max:
            raise OverflowError("a document exceeds 2**31 - 1 tokens")
        # Term-major CSR by a counting sort (scipy's COO -> CSR), then documents ascending per term.
        from scipy import sparse

        m = sparse.csr_matrix(
            (counts.astype(np.int32), (terms.astype(np.int32), docs.astype(np.int32))), shape=(n_terms, n_docs)
        )
        m.sort_indices()
        indptr, indices, tf = m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data.astype(np.int32)
        return vocab, {"indptr": indptr, "indices": indices, "tf": tf, "doc_len": doc_len.astype(np.int32)}


def _forward_rows(old: DocIndex):
    """The old index's document-major view: (indptr, term ids, counts) per old document."""
    m = old.matrix().T.tocsr()
    m.sort_indices()
    return m.indptr, m.indices, m.data


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
    acc = _Accumulator()

    reuse_new: list[int] = []
    reuse_old: list[int] = []
    if old is not None:
        old_map = old.citekeys.mapping()
        old_fps = np.asarray(old.fingerprints)
        for i, src in enumerate(sources):
            j = old_map.get(src.citekey)
            if j is not None and old_fps[j, 0] == fps[i, 0] and old_fps[j, 1] == fps[i, 1]:
                reuse_new.append(i)
                reuse_old.append(j)
        report.removed = len(set(old_map) - {s.citekey for s in sources})
    reused = np.zeros(n, dtype=bool)
    if reuse_new:
        rn = np.asarray(reuse_new, dtype=np.int64)
        ro = np.asarray(reuse_old, dtype=np.int64)
        reused[rn] = True
        f_indptr, f_terms, f_counts = _forward_rows(old)
        lengths = f_indptr[ro + 1] - f_indptr[ro]
        starts = np.repeat(f_indptr[ro], lengths)
        within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        pos = starts + within
        old_terms = f_terms[pos]
        used = np.unique(old_terms)
        old_vocab = old.vocab
        prov = np.full(len(old_vocab), -1, dtype=np.int64)
        prov[used] = acc.provisional_ids([old_vocab[int(t)] for t in used])
        acc.add_counts(np.repeat(rn, lengths), prov[old_terms], f_counts[pos])
    report.reused = int(reused.sum())

    todo = np.flatnonzero(~reused)
    for step, i in enumerate(todo):
        src: DocSource = sources[int(i)]
        acc.add_runs(int(i), runs_bytes(src.title))
        if src.text_path is not None:
            for runs in iter_runs_bytes(read_text(src.text_path)):
                acc.add_runs(int(i), runs)
        if progress and step % 64 == 0:
            progress(step, len(todo))
    if progress:
        progress(len(todo), len(todo))
    report.retokenized = len(todo)

    vocab, arrays = acc.finish(n)
    citekeys = StringTable.from_sorted([s.citekey for s in sources])
    vt = StringTable.from_sorted(vocab)
    arrays.update(
        citekeys_blob=citekeys.blob, citekeys_offsets=citekeys.offsets,
        vocab_blob=vt.blob, vocab_offsets=vt.offsets,
        fingerprints=fps, flags=flags,
    )
    report.n_docs, report.n_terms, report.nnz = n, len(vocab), int(arrays["indices"].shape[0])
    report.text_missing = int(np.count_nonzero(flags & FLAG_TEXT_MISSING))
    report.not_parsed = int(np.count_nonzero(flags & FLAG_NOT_PARSED))
    manifest = dict(
        expected_manifest(settings),
        citekeys_digest=citekeys_digest(rows),
        stats={"n_docs": n, "n_terms": len(vocab), "nnz": report.nnz,
               "avgdl": float(arrays["doc_len"].mean()) if n else 0.0,
               "text_missing": report.text_missing, "not_parsed": report.not_parsed},
    )
    gen = store.save(folder, manifest, arrays)
    report.seconds = time.perf_counter() - t0
    index = DocIndex(arrays, dict(manifest), gen)
    return index, report
