"""Building term-major CSR indexes: the streaming accumulator and reuse of unchanged units.

Shared by the document index and the passage index. A *unit* is what a row of postings points at (a
document, or a passage); units get their final positions before any token is added, so the arrays come
out canonical: sorted vocabulary, ascending unit ids per term, and an update equal to a fresh build.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import count

import numpy as np

from engine.tokenize import DROPPED_RUNS
from kernels.types import Postings

__all__ = ["Accumulator", "add_reused", "matching_documents", "postings_matrix", "forward_rows"]

_FLUSH_TOKENS = 1 << 21  # pending (unit, term) pairs before they are reduced to counts


def postings_matrix(p: Postings):
    """Postings as a scipy ``csr_array`` (terms x units)."""
    from scipy import sparse

    return sparse.csr_array((p.tf, p.indices, p.indptr), shape=(p.n_terms, p.n_docs))


def forward_rows(p: Postings):
    """The unit-major view: (indptr, term ids, counts) per unit."""
    m = postings_matrix(p).T.tocsr()
    m.sort_indices()
    return m.indptr, m.indices, m.data


def matching_documents(old, sources, fps) -> tuple[np.ndarray, np.ndarray, int]:
    """(new positions, old positions) of documents whose citekey and fingerprint are unchanged since
    ``old`` was built, and how many of ``old``'s citekeys are gone."""
    if old is None:
        z = np.zeros(0, dtype=np.int64)
        return z, z, 0
    old_map = old.citekeys.mapping()
    old_fps = np.asarray(old.fingerprints)
    new, prev = [], []
    for i, src in enumerate(sources):
        j = old_map.get(src.citekey)
        if j is not None and old_fps[j, 0] == fps[i, 0] and old_fps[j, 1] == fps[i, 1]:
            new.append(i)
            prev.append(j)
    removed = len(set(old_map) - {s.citekey for s in sources})
    return np.asarray(new, dtype=np.int64), np.asarray(prev, dtype=np.int64), removed


def add_reused(acc: "Accumulator", old_postings: Postings, old_vocab, new_units: np.ndarray,
               old_units: np.ndarray) -> None:
    """Copy the term counts of ``old_units`` (positions in the old index) to ``new_units``."""
    if new_units.size == 0:
        return
    f_indptr, f_terms, f_counts = forward_rows(old_postings)
    lengths = f_indptr[old_units + 1] - f_indptr[old_units]
    starts = np.repeat(f_indptr[old_units], lengths)
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pos = starts + within
    old_terms = f_terms[pos]
    used = np.unique(old_terms)
    prov = np.full(len(old_vocab), -1, dtype=np.int64)
    prov[used] = acc.provisional_ids([old_vocab[int(t)] for t in used])
    acc.add_counts(np.repeat(new_units, lengths), prov[old_terms], f_counts[pos])


class Accumulator:
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


