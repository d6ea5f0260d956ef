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
               old_units: np.ndarray, fields: tuple[str, ...] = ()) -> None:
    """Copy the term counts (and the named field counts) of ``old_units`` (positions in the old index)
    to ``new_units``."""
    if new_units.size == 0:
        return
    prov = np.full(len(old_vocab), -1, dtype=np.int64)
    streams = [("", old_postings.tf)] + [(f, old_postings.fields[f]) for f in fields]
    for name, data in streams:
        p = Postings(old_postings.indptr, old_postings.indices, np.asarray(data), old_postings.doc_len)
        f_indptr, f_terms, f_counts = forward_rows(p)
        lengths = f_indptr[old_units + 1] - f_indptr[old_units]
        starts = np.repeat(f_indptr[old_units], lengths)
        within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        pos = starts + within
        old_terms, old_counts = f_terms[pos], f_counts[pos]
        keep = old_counts > 0
        old_terms, old_counts, units = old_terms[keep], old_counts[keep], np.repeat(new_units, lengths)[keep]
        missing = np.unique(old_terms[prov[old_terms] < 0])
        if missing.size:
            prov[missing] = acc.provisional_ids([old_vocab[int(t)] for t in missing])
        acc.add_counts(units, prov[old_terms], old_counts, field=name)


class _Stream:
    """Pending (unit, provisional term) pairs of one stream, reduced to counted triples in chunks."""

    def __init__(self, n_dropped: int):
        self.n_dropped = n_dropped
        self.pend_units: list[np.ndarray] = []
        self.pend_terms: list[int] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def flush(self) -> None:
        if not self.pend_terms:
            return
        units = np.concatenate(self.pend_units)
        terms = np.asarray(self.pend_terms, dtype=np.int64)
        keep = terms >= self.n_dropped
        keys, counts = _count_keys((units[keep] << 32) | terms[keep])
        self.chunks.append((keys >> 32, keys & 0xFFFFFFFF, counts))
        self.pend_units, self.pend_terms = [], []

    def triples(self, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.flush()
        if not self.chunks:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        return (np.concatenate([c[0] for c in self.chunks]), rank[np.concatenate([c[1] for c in self.chunks])],
                np.concatenate([c[2] for c in self.chunks]))


def _count_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct int64 keys (sorted) and how often each occurs."""
    keys = np.sort(keys)
    if not keys.size:
        return keys, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[starts], np.diff(np.append(starts, keys.size)).astype(np.int64)


_PRESTEMMED = b"\x00"  # prefix of a provisional key that is already an indexed term (reused units)


class Accumulator:
    """Streams units' tokens into (unit, term, count) triples with a provisional vocabulary.

    Runs arrive as bytes (``engine.tokenize.runs_bytes``); the never-indexed runs (short ones and
    stopwords) are seeded as the first provisional ids and masked out in bulk, so the per-token work is
    one C-level dictionary lookup. Besides the main stream, named *field* streams (title, abstract)
    count the tokens a unit has inside that field; ``finish`` aligns them with the main postings. A
    ``stem`` function maps a surface token to its indexed term; it is applied once per distinct token.
    """

    def __init__(self, fields: tuple[str, ...] = (), stem=None, dropped=DROPPED_RUNS):
        self.vocab: dict[bytes, int] = defaultdict(count().__next__)
        for run in dropped:  # (a bench tokenizer variant may drop other runs)
            self.vocab[run]
        self.n_dropped = len(self.vocab)
        self.stem = stem
        self.streams = {"": _Stream(self.n_dropped), **{f: _Stream(self.n_dropped) for f in fields}}

    def add_runs(self, unit: int, runs: list[bytes], field: str = "") -> None:
        """Count ``runs`` for ``unit`` in the main stream, or only in ``field``'s stream."""
        if not runs:
            return
        st = self.streams[field]
        st.pend_terms.extend(map(self.vocab.__getitem__, runs))
        st.pend_units.append(np.full(len(runs), unit, dtype=np.int64))
        if len(st.pend_terms) >= _FLUSH_TOKENS:
            st.flush()

    def add_counts(self, units: np.ndarray, terms: np.ndarray, counts: np.ndarray, field: str = "") -> None:
        """Already-counted triples (reused units); ``terms`` are provisional ids."""
        st = self.streams[field]
        st.flush()
        st.chunks.append((units.astype(np.int64), terms.astype(np.int64), counts.astype(np.int64)))

    def provisional_ids(self, terms: list[str]) -> np.ndarray:
        """Provisional ids for terms that are already indexed terms (stemmed, if stemming)."""
        get = self.vocab.__getitem__
        return np.fromiter((get(_PRESTEMMED + t.encode("ascii")) for t in terms), dtype=np.int64, count=len(terms))

    def _ranks(self) -> tuple[list[str], np.ndarray]:
        keys = list(self.vocab)
        d = self.n_dropped
        terms = []
        for k in keys[d:]:
            if k.startswith(_PRESTEMMED):
                terms.append(k[1:].decode("ascii"))
            else:
                t = k.decode("ascii")
                terms.append(self.stem(t) if self.stem else t)
        vocab = sorted(set(terms))
        pos = {t: i for i, t in enumerate(vocab)}
        rank = np.full(len(keys), -1, dtype=np.int64)
        rank[d:] = np.fromiter((pos[t] for t in terms), dtype=np.int64, count=len(terms))
        return vocab, rank

    def finish(self, n_units: int) -> tuple[list[str], dict[str, np.ndarray]]:
        """Sorted vocabulary and the canonical term-major CSR arrays (plus ``tf_<field>`` aligned with
        ``tf`` for every field stream)."""
        vocab, rank = self._ranks()
        units, terms, counts = self.streams[""].triples(rank)
        n_terms = len(vocab)
        doc_len = np.bincount(units, weights=counts, minlength=n_units).astype(np.int64)
        if doc_len.size and doc_len.max() > np.iinfo(np.int32).max:
            raise OverflowError("a document exceeds 2**31 - 1 tokens")
        # Term-major CSR by a counting sort (scipy's COO -> CSR; it also sums the triples of tokens that
        # share a stem), then units ascending per term.
        from scipy import sparse

        m = sparse.csr_matrix((counts, (terms, units)), shape=(n_terms, n_units))
        m.sum_duplicates()
        m.sort_indices()
        if m.data.size and m.data.max() > np.iinfo(np.int32).max:
            raise OverflowError("a term frequency exceeds 2**31 - 1")
        arrays = {"indptr": m.indptr.astype(np.int64), "indices": m.indices.astype(np.int32),
                  "tf": m.data.astype(np.int32), "doc_len": doc_len.astype(np.int32)}
        if len(self.streams) > 1:
            width = max(n_units, 1)
            rows = np.repeat(np.arange(n_terms, dtype=np.int64), np.diff(arrays["indptr"]))
            main_keys = rows * width + arrays["indices"]
            for name, st in self.streams.items():
                if not name:
                    continue
                f_units, f_terms, f_counts = st.triples(rank)
                f = sparse.csr_matrix((f_counts, (f_terms, f_units)), shape=(n_terms, n_units))
                f.sum_duplicates()
                f.sort_indices()
                keys = np.repeat(np.arange(n_terms, dtype=np.int64), np.diff(f.indptr)) * width + f.indices
                where = np.searchsorted(main_keys, keys)
                if keys.size and ((where >= main_keys.size).any() or (main_keys[np.minimum(where, main_keys.size - 1)] != keys).any()):
                    raise AssertionError(f"field {name!r} counts a token its unit does not have")
                aligned = np.zeros(main_keys.shape[0], dtype=np.int32)
                aligned[where] = f.data
                arrays[f"tf_{name}"] = aligned
        return vocab, arrays
