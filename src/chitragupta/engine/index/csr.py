"""Building term-major CSR indexes: the streaming accumulator and reuse of unchanged units.

Shared by the document index and the passage index. A *unit* is what a row of postings points at (a
document, or a passage); units get their final positions before any token is added, so the arrays come
out canonical: sorted vocabulary, ascending unit ids per term, and an update equal to a fresh build.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import count

import numpy as np

from chitragupta.engine.tokenize import DROPPED_RUNS
from chitragupta.kernels.types import Postings

__all__ = ["Accumulator", "Sequences", "add_reused", "matching_documents", "postings_matrix", "forward_rows",
           "SEQ_BREAK"]

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
    """Pending (unit, provisional term) pairs of one stream, reduced to counted triples in chunks.

    A chunk is three int32 arrays (unit, provisional term, count), sorted by unit then term: 12 bytes
    per distinct pair, the only per-token state kept between flushes.
    """

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
        self.chunks.append(_chunk(keys >> 32, keys & 0xFFFFFFFF, counts))
        self.pend_units, self.pend_terms = [], []

    def term_major(self, rank: np.ndarray, n_terms: int, n_units: int,
                   doc_len: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stream as a canonical term-major CSR: (indptr int64, indices int32, counts int32), units
        ascending per term, pairs that meet twice (a unit split across flushes, tokens sharing a stem)
        summed. The chunks are released as they are placed, so the peak is about the triples plus the
        output, never a second copy of either. ``doc_len`` (float64, per unit) is incremented by counts."""
        self.flush()
        chunks, self.chunks = self.chunks, []
        per_term = np.zeros(n_terms, dtype=np.int64)
        for ch in chunks:
            per_term += np.bincount(rank[_arrays(ch)[1]], minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(per_term, out=indptr[1:])
        total = int(indptr[-1])
        indices = np.empty(total, dtype=np.int32)
        counts = np.empty(total, dtype=np.int32)
        nxt = indptr[:-1].copy()
        chunks.reverse()
        while chunks:
            u, t, c = _arrays(chunks.pop())
            if doc_len is not None:
                doc_len += np.bincount(u, weights=c, minlength=n_units)
            r = rank[t]
            # a stable sort by term keeps the chunk's unit order inside each term
            order = np.argsort(r, kind="stable")
            rs = r[order]
            dest = nxt[rs] + (np.arange(rs.size, dtype=np.int64) - np.searchsorted(rs, rs, side="left"))
            indices[dest] = u[order]
            counts[dest] = c[order]
            nxt += np.bincount(r, minlength=n_terms)
            del u, t, c, r, order, rs, dest
        return _canonical(indptr, indices, counts, n_terms, n_units)


class ChunkFile:
    """A chunk of counted triples written to disk (a segmented build's spill), read back when placed:
    ``load()`` -> (units, terms, counts) int32, read whole into memory (not mapped) and dropped after."""

    def __init__(self, path, units: np.ndarray, terms: np.ndarray, counts: np.ndarray):
        self.path, self.n = path, int(units.shape[0])
        with open(path, "wb") as f:
            for a in (units, terms, counts):
                f.write(np.ascontiguousarray(a, dtype=np.int32).tobytes())

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raw = np.fromfile(self.path, dtype=np.int32, count=3 * self.n)
        return raw[:self.n], raw[self.n:2 * self.n], raw[2 * self.n:]


def _arrays(ch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return ch.load() if isinstance(ch, ChunkFile) else ch


def _chunk(units: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if units.size and (units.max() > _I32 or terms.max() > _I32):
        raise OverflowError("more than 2**31 - 1 units or distinct runs")
    return units.astype(np.int32), terms.astype(np.int32), np.minimum(counts, _I32).astype(np.int32)


_I32 = np.iinfo(np.int32).max


def _canonical(indptr, indices, counts, n_terms: int, n_units: int):
    """Sort each row's units and sum repeated (term, unit) pairs, in place where it can."""
    starts = np.zeros(indices.size, dtype=bool)
    starts[indptr[:-1][indptr[:-1] < indices.size]] = True
    descending = (indices[1:] <= indices[:-1]) & ~starts[1:]  # an unsorted or repeated pair in a row
    if not descending.any():
        return indptr, indices, counts
    del starts, descending
    from scipy import sparse

    m = sparse.csr_matrix((counts, indices, indptr), shape=(n_terms, n_units), copy=False)
    m.sum_duplicates()  # sorts rows, then merges repeats
    return m.indptr.astype(np.int64, copy=False), m.indices.astype(np.int32, copy=False), m.data.astype(np.int32, copy=False)


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

    Runs arrive as bytes (``chitragupta.engine.tokenize.runs_bytes``); the never-indexed runs (short ones and
    stopwords) are seeded as the first provisional ids and masked out in bulk, so the per-token work is
    one C-level dictionary lookup. Besides the main stream, named *field* streams (title, abstract)
    count the tokens a unit has inside that field; ``finish`` aligns them with the main postings. A
    ``stem`` function maps a surface token to its indexed term; it is applied once per distinct token.
    """

    def __init__(self, fields: tuple[str, ...] = (), stem=None, dropped=DROPPED_RUNS, sequences: "Sequences | None" = None):
        self.vocab: dict[bytes, int] = defaultdict(count().__next__)
        for run in dropped:  # (a bench tokenizer variant may drop other runs)
            self.vocab[run]
        self.n_dropped = len(self.vocab)
        self.stem = stem
        self.streams = {"": _Stream(self.n_dropped), **{f: _Stream(self.n_dropped) for f in fields}}
        self.sequences = sequences  # the main stream's runs in order, per unit (the positions array)

    def add_runs(self, unit: int, runs: list[bytes], field: str = "") -> None:
        """Count ``runs`` for ``unit`` in the main stream, or only in ``field``'s stream."""
        if not runs:
            return
        from array import array

        st = self.streams[field]
        # the ids as a C int array: appended to the pending terms, and to the positions, by a copy of
        # its buffer (a list of Python ints costs a conversion per id at each), and handed to numpy the
        # same way when the stream is flushed. (The stream resets its pending terms to a list.)
        ids = array("i", map(self.vocab.__getitem__, runs))
        pend = st.pend_terms
        if pend.__class__ is not array:
            pend = st.pend_terms = array("i", pend)
        pend.extend(ids)
        if not field and self.sequences is not None:
            self.sequences.extend(unit, ids)
        st.pend_units.append(np.full(len(runs), unit, dtype=np.int64))
        if len(pend) >= _FLUSH_TOKENS:
            st.flush()

    def add_counts(self, units: np.ndarray, terms: np.ndarray, counts: np.ndarray, field: str = "") -> None:
        """Already-counted triples (reused units); ``terms`` are provisional ids."""
        st = self.streams[field]
        st.flush()
        st.chunks.append(_chunk(np.asarray(units, dtype=np.int64), np.asarray(terms, dtype=np.int64),
                                np.asarray(counts, dtype=np.int64)))

    def provisional_ids(self, terms: list[str]) -> np.ndarray:
        """Provisional ids for terms that are already indexed terms (stemmed, if stemming)."""
        get = self.vocab.__getitem__
        return np.fromiter((get(_PRESTEMMED + t.encode("ascii")) for t in terms), dtype=np.int64, count=len(terms))

    def ranks(self) -> tuple[list[str], np.ndarray]:
        """The sorted vocabulary and, per provisional id, its term's position in it (-1: a dropped run)."""
        return self._ranks()

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
        self.rank = rank  # (what ``Sequences.finish`` maps provisional ids with)
        n_terms = len(vocab)
        doc_len = np.zeros(n_units, dtype=np.float64)
        indptr, indices, tf = self.streams[""].term_major(rank, n_terms, n_units, doc_len)
        if doc_len.size and doc_len.max() > _I32:
            raise OverflowError("a document exceeds 2**31 - 1 tokens")
        arrays = {"indptr": indptr, "indices": indices, "tf": tf, "doc_len": doc_len.astype(np.int32)}
        for name, st in self.streams.items():
            if name:
                f_indptr, f_indices, f_counts = st.term_major(rank, n_terms, n_units)
                arrays[f"tf_{name}"] = _align(indptr, indices, f_indptr, f_indices, f_counts, name)
        return vocab, arrays


_ALIGN_BLOCK = 1 << 23  # main postings per block while placing field counts


def _align(indptr, indices, f_indptr, f_indices, f_counts, name: str) -> np.ndarray:
    """A field's counts at the positions of the same (term, unit) pairs in the main postings, a block of
    terms at a time (two int64 keys per posting for the whole index would double the build's peak)."""
    out = np.zeros(indices.shape[0], dtype=np.int32)
    n_terms = indptr.shape[0] - 1
    width = np.int64(max(int(indices.max()) + 1 if indices.size else 1, int(f_indices.max()) + 1 if f_indices.size else 1))
    t0 = 0
    while t0 < n_terms:
        t1 = max(t0 + 1, int(np.searchsorted(indptr, indptr[t0] + _ALIGN_BLOCK, side="right")) - 1)
        t1 = min(t1, n_terms)
        flo, fhi = int(f_indptr[t0]), int(f_indptr[t1])
        if fhi > flo:
            lo, hi = int(indptr[t0]), int(indptr[t1])
            rows = np.repeat(np.arange(t0, t1, dtype=np.int64), np.diff(indptr[t0:t1 + 1]))
            keys = rows * width + indices[lo:hi]
            f_rows = np.repeat(np.arange(t0, t1, dtype=np.int64), np.diff(f_indptr[t0:t1 + 1]))
            f_keys = f_rows * width + f_indices[flo:fhi]
            where = np.searchsorted(keys, f_keys)
            if (where >= keys.size).any() or (keys[np.minimum(where, keys.size - 1)] != f_keys).any():
                raise AssertionError(f"field {name!r} counts a token its unit does not have")
            out[lo + where] = f_counts[flo:fhi]
        t0 = t1
    return out


_SEQ_BLOCK = 1 << 24  # ids mapped per step while the positions array is finished
SEQ_BREAK = -1  # between a document's title and its body in the positions array: no phrase spans it


class Sequences:
    """The positions array while it is built: each unit's runs in order, as provisional ids.

    A document's sequence is its title's runs, ``SEQ_BREAK``, then its body's runs, every run in its
    place (stop words and one-character runs too), so a phrase is a contiguous run of ids. ``finish``
    turns provisional ids into the index's: an indexed run -> its term id, the j-th dropped run ->
    ``n_terms + j``. Units arrive one at a time (all of a unit's runs before the next unit's)."""

    def __init__(self):
        from array import array

        self.buf = array("i")
        self.units: list[int] = []
        self.starts: list[int] = []
        self.file = None  # once ``spill`` is called: the ids go to this file instead of ``buf``
        self.spilled = 0  # ids in the file

    def _size(self) -> int:
        return self.spilled + len(self.buf)

    def spill(self, path) -> None:
        """From now on keep the ids in the file ``path`` (a segmented build: bounded memory)."""
        self.path = path
        self.file = open(path, "wb")
        self.file.write(self.buf.tobytes())
        self.spilled = len(self.buf)
        from array import array

        self.buf = array("i")

    def extend(self, unit: int, ids: list[int]) -> None:
        if not self.units or self.units[-1] != unit:
            self.units.append(unit)
            self.starts.append(self._size())
        self.buf.extend(ids)

    def extend_block(self, units: np.ndarray, starts: np.ndarray, ids: np.ndarray) -> None:
        """Append a tokenized block's sequences: ``units`` (ascending, after every unit already here),
        each starting at ``starts`` in ``ids`` (int32, already provisional ids of this build)."""
        base = self._size()
        self.units.extend(units.tolist())
        self.starts.extend((np.asarray(starts, dtype=np.int64) + base).tolist())
        raw = np.ascontiguousarray(ids, dtype=np.int32).tobytes()
        if self.file is not None:
            self.file.write(raw)
            self.spilled += ids.shape[0]
        else:
            self.buf.frombytes(raw)

    def brk(self, unit: int) -> None:
        """End ``unit``'s title (called once per document, even for an empty title)."""
        self.extend(unit, [SEQ_BREAK])

    def finish(self, rank: np.ndarray, n_terms: int, n_dropped: int, n_units: int,
               reused: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """``(seq int32, seq_ptr int64)``: unit u's ids are ``seq[seq_ptr[u]:seq_ptr[u + 1]]``.

        ``reused``: ``(new_units, old_units, old_seq, old_ptr, old_to_new)`` -- units copied from an older
        index, their ids mapped by ``old_to_new`` (an old id -> the new one; ``SEQ_BREAK`` stays)."""
        if self.file is not None:
            self.file.close()
            self.file = None
            # read a block at a time (``read``) where the ids are in order; mapped for an update's gathers
            buf = (np.memmap(self.path, dtype=np.int32, mode="r", shape=(self.spilled,)) if self.spilled
                   else np.zeros(0, dtype=np.int32))
            read = lambda a, b: np.fromfile(self.path, dtype=np.int32, count=b - a, offset=4 * a)  # noqa: E731
        else:
            buf = np.frombuffer(self.buf, dtype=np.int32) if len(self.buf) else np.zeros(0, dtype=np.int32)
            read = lambda a, b: buf[a:b]  # noqa: E731
        table = np.concatenate((np.arange(n_dropped, dtype=np.int64) + n_terms, rank[n_dropped:])).astype(np.int32)
        units = np.asarray(self.units, dtype=np.int64)
        starts = np.asarray(self.starts + [buf.shape[0]], dtype=np.int64)
        lens = np.zeros(n_units, dtype=np.int64)
        lens[units] = np.diff(starts)
        src_start = np.zeros(n_units, dtype=np.int64)
        src_start[units] = starts[:-1]
        from_old = np.zeros(n_units, dtype=bool)
        if reused is not None and reused[0].size:
            new_u, old_u, old_seq, old_ptr, old_to_new = reused
            old_ptr = np.asarray(old_ptr)
            lens[new_u] = old_ptr[old_u + 1] - old_ptr[old_u]
            src_start[new_u] = old_ptr[old_u]
            from_old[new_u] = True
        ptr = np.zeros(n_units + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        seq = np.empty(int(ptr[-1]), dtype=np.int32)

        def mapped(ids: np.ndarray, to: np.ndarray) -> np.ndarray:
            out = ids.copy()
            keep = ids != SEQ_BREAK
            out[keep] = to[ids[keep]]
            return out

        if not from_old.any() and (units.size < 2 or bool((np.diff(units) > 0).all())):
            # a fresh build: the buffer is already in unit order
            for a in range(0, buf.shape[0], _SEQ_BLOCK):
                seq[a:a + _SEQ_BLOCK] = mapped(read(a, min(a + _SEQ_BLOCK, buf.shape[0])), table)
        else:
            order = np.flatnonzero(lens > 0)
            u0 = 0
            while u0 < order.size:  # units in blocks of about _SEQ_BLOCK ids: bounded temporaries
                u1 = max(u0 + 1, int(np.searchsorted(ptr[order + 1], ptr[order[u0]] + _SEQ_BLOCK, side="right")))
                pick = order[u0:u1]
                for old_side in (False, True):
                    sel = pick[from_old[pick] == old_side]
                    if not sel.size:
                        continue
                    ln = lens[sel]
                    within = np.arange(int(ln.sum()), dtype=np.int64) - np.repeat(np.cumsum(ln) - ln, ln)
                    src = np.repeat(src_start[sel], ln) + within
                    dest = np.repeat(ptr[sel], ln) + within
                    seq[dest] = (mapped(np.asarray(reused[2])[src], reused[4]) if old_side
                                 else mapped(buf[src], table))
                u0 = u1
        self.buf = None
        del buf
        return seq, ptr
