"""Building term-major CSR indexes: the streaming accumulator and reuse of unchanged units.

Shared by the document index and the passage index. A *unit* is what a row of postings points at (a
document, or a passage); units get their final positions before any token is added, so the arrays come
out canonical: sorted vocabulary, ascending unit ids per term, and an update equal to a fresh build.
"""

from __future__ import annotations

import os
from collections import defaultdict
from itertools import count

import numpy as np

from chitragupta.engine.text.tokenize import DROPPED_RUNS
from chitragupta.kernels import build
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

    def __init__(self, n_dropped: int, tally: bool = False):
        self.n_dropped = n_dropped
        self.pend_units: list[np.ndarray] = []
        self.pend_terms: list[int] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.tally = _Tally() if tally else None

    def append(self, chunk, arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """Add a chunk (``arrays``: its triples, when ``chunk`` is a ``ChunkFile``), counted as it comes
        when the stream keeps a tally (the main stream: what ``finish`` needs before it places)."""
        if self.tally is not None:
            self.tally.add(*(arrays if arrays is not None else chunk))
        self.chunks.append(chunk)

    def flush(self) -> None:
        if not self.pend_terms:
            return
        units = np.concatenate(self.pend_units)
        terms = np.asarray(self.pend_terms, dtype=np.int64)
        keep = terms >= self.n_dropped
        keys, counts = _count_keys((units[keep] << 32) | terms[keep])
        self.append(_chunk(keys >> 32, keys & 0xFFFFFFFF, counts))
        self.pend_units, self.pend_terms = [], []


class _Tally:
    """A stream's triples per provisional id and tokens per unit, kept as its chunks arrive (so that
    ``Accumulator.finish`` need not read every chunk once more before it places them)."""

    def __init__(self):
        self.per_id = np.zeros(0, dtype=np.int64)
        self.per_unit = np.zeros(0, dtype=np.int64)

    @staticmethod
    def _fit(arr: np.ndarray, n: int) -> np.ndarray:
        if n <= arr.shape[0]:
            return arr
        out = np.zeros(max(n, 2 * arr.shape[0]), dtype=arr.dtype)
        out[:arr.shape[0]] = arr
        return out

    def add(self, units: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> None:
        if not units.shape[0]:
            return
        tally = build.tally

        self.per_id = self._fit(self.per_id, int(terms.max()) + 1)
        self.per_unit = self._fit(self.per_unit, int(units.max()) + 1)
        tally(units, terms, counts, self.per_id, self.per_unit)


class ChunkFile:
    """A chunk of counted triples written to disk (a segmented build's spill), read back when placed:
    ``load()`` -> (units, terms, counts) int32, read whole into memory (not mapped) and dropped after.

    Stored compactly (a build's spill is written once and read once, and its bytes are what it costs):
    units that ascend (a block's always do) as each unit and how many triples it has, and counts below
    256 as one byte each; ``load`` gives back the same arrays."""

    def __init__(self, path, units: np.ndarray, terms: np.ndarray, counts: np.ndarray):
        self.path, self.n = path, int(units.shape[0])
        u = np.ascontiguousarray(units, dtype=np.int32)
        c = np.ascontiguousarray(counts, dtype=np.int32)
        self.runs = -1  # units stored as (unit, triples) runs: how many; -1: stored whole
        parts = [u]
        if self.n and bool((u[1:] >= u[:-1]).all()):
            cut = np.flatnonzero(u[1:] != u[:-1]) + 1
            first = np.concatenate(([0], cut))
            parts = [u[first], np.diff(np.append(first, self.n)).astype(np.int32)]
            self.runs = int(first.shape[0])
        self.narrow = bool(self.n and 0 <= int(c.min()) and int(c.max()) < 256)
        parts += [np.ascontiguousarray(terms, dtype=np.int32), c.astype(np.uint8) if self.narrow else c]
        with open(path, "wb") as f:
            for a in parts:
                f.write(memoryview(a).cast("B"))

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = self.n
        with open(self.path, "rb") as f:
            if self.runs >= 0:
                head = np.fromfile(f, dtype=np.int32, count=2 * self.runs)
                units = np.repeat(head[:self.runs], head[self.runs:])
            else:
                units = np.fromfile(f, dtype=np.int32, count=n)
            terms = np.fromfile(f, dtype=np.int32, count=n)
            counts = np.fromfile(f, dtype=np.uint8 if self.narrow else np.int32, count=n).astype(np.int32, copy=False)
        if units.shape[0] != n or terms.shape[0] != n or counts.shape[0] != n:
            raise OSError(f"the build's scratch file {self.path} is shorter than written")
        return units, terms, counts

    def discard(self) -> None:
        """Remove the file (its triples are placed: what the build holds on disk shrinks as it goes)."""
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _arrays(ch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return ch.load() if isinstance(ch, ChunkFile) else ch


def _chunk(units: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if units.size and (units.max() > _I32 or terms.max() > _I32):
        raise OverflowError("more than 2**31 - 1 units or distinct runs")
    return units.astype(np.int32), terms.astype(np.int32), np.minimum(counts, _I32).astype(np.int32)


_I32 = np.iinfo(np.int32).max


def _canonical(indptr, indices, counts, n_terms: int, n_units: int):
    """Sort each row's units and sum repeated (term, unit) pairs, in place where it can."""
    rows_sorted = build.rows_sorted

    if rows_sorted(indptr, indices):  # (no unsorted or repeated pair in a row)
        return indptr, indices, counts
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

    Runs arrive as bytes (``chitragupta.engine.text.tokenize.runs_bytes``); the never-indexed runs (short ones and
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
        self.streams = {"": _Stream(self.n_dropped, tally=True), **{f: _Stream(self.n_dropped) for f in fields}}
        self.sequences = sequences  # the main stream's runs in order, per unit (the positions array)
        self.threads = 1  # term ranges ``finish`` computes at once (threads; the output is the same)
        self._ranked = None  # (``ranks()`` once asked)

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
        st.append(_chunk(np.asarray(units, dtype=np.int64), np.asarray(terms, dtype=np.int64),
                         np.asarray(counts, dtype=np.int64)))

    def provisional_ids(self, terms: list[str]) -> np.ndarray:
        """Provisional ids for terms that are already indexed terms (stemmed, if stemming)."""
        get = self.vocab.__getitem__
        return np.fromiter((get(_PRESTEMMED + t.encode("ascii")) for t in terms), dtype=np.int64, count=len(terms))

    def ranks(self) -> tuple[list[str], np.ndarray]:
        """The sorted vocabulary and, per provisional id, its term's position in it (-1: a dropped run).
        Once asked, fixed: ``finish`` uses the same (no term may be added after)."""
        if self._ranked is None:
            self._ranked = self._ranks()
        return self._ranked

    def _ranks(self) -> tuple[list[str], np.ndarray]:
        keys = list(self.vocab)
        d = self.n_dropped
        joined = b"\n".join(keys[d:])  # (a run holds no line break, nor does a term)
        if not self.stem and _PRESTEMMED not in joined and joined.count(b"\n") == max(0, len(keys) - d - 1):
            # no key to stem nor one already stemmed: the terms are the keys, decoded in one call
            terms = joined.decode("ascii").split("\n") if len(keys) > d else []
        else:
            terms = []
            for k in keys[d:]:
                if k.startswith(_PRESTEMMED):
                    terms.append(k[1:].decode("ascii"))
                else:
                    t = k.decode("ascii")
                    terms.append(self.stem(t) if self.stem else t)
        vocab = sorted(set(terms))
        pos = dict(zip(vocab, range(len(vocab))))
        rank = np.full(len(keys), -1, dtype=np.int64)
        rank[d:] = np.fromiter(map(pos.__getitem__, terms), dtype=np.int64, count=len(terms))
        return vocab, rank

    def finish(self, n_units: int, sink=None, on_range=None) -> tuple[list[str], dict[str, np.ndarray]]:
        """Sorted vocabulary and the canonical term-major CSR arrays (plus ``tf_<field>`` aligned with
        ``tf`` for every field stream).

        ``sink``: where the arrays go (``put`` / ``column``): None keeps them in memory and returns them
        all; a ``store.NewGeneration`` gets them written a term range at a time (``_term_ranges``: about
        ``RANGE_POSTINGS`` postings each, every stream's triples first split into one scratch file per
        range) and only ``indptr`` and ``doc_len`` come back. ``on_range(indices, tf, fields)``: called with
        each range's main postings and aligned field counts. The arrays are the same either way."""
        out = sink if sink is not None else MemoryArrays()
        vocab, rank = self.ranks()
        self.rank = rank  # (what ``Sequences.finish`` maps provisional ids with)
        n_terms = len(vocab)
        for st in self.streams.values():
            st.flush()
        # postings per term and tokens per unit, from the main stream's tally (counted as chunks came)
        spread = build.spread

        tal = self.streams[""].tally
        per_term = np.zeros(n_terms, dtype=np.int64)
        if spread(rank, tal.per_id, per_term) >= 0:
            raise AssertionError("a never-indexed run was counted")
        if int(np.count_nonzero(tal.per_unit[n_units:])):
            raise ValueError(f"a posting points past the {n_units} units")
        doc_len = np.zeros(n_units, dtype=np.int64)
        got = min(n_units, tal.per_unit.shape[0])
        doc_len[:got] = tal.per_unit[:got]
        if doc_len.size and doc_len.max() > _I32:
            raise OverflowError("a document exceeds 2**31 - 1 tokens")
        # (with threads, each range gets its share of the budget: what is held at once stays the same)
        edges = (_term_ranges(per_term, max(1, RANGE_POSTINGS // max(1, self.threads))) if hasattr(out, "scratch")
                 else np.array([0, n_terms]))
        fields = [name for name in self.streams if name]
        if edges.shape[0] > 2:
            buckets = {name: _bucket(st, rank, edges, out.scratch, f"csr{j}_", self.threads)
                       for j, (name, st) in enumerate(self.streams.items())}
            items = lambda name, k: [buckets[name].take(k)]  # noqa: E731
        else:
            def items(name, k):
                chunks, self.streams[name].chunks = self.streams[name].chunks, []
                return chunks
        upper = int(per_term.sum())
        cols = [out.column(name, np.int32, upper) for name in ("indices", "tf", *(f"tf_{f}" for f in fields))]
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        nnz = 0

        def one_range(k: int):  # (in a thread when ``threads`` > 1)
            t0, t1 = int(edges[k]), int(edges[k + 1])
            main = _place(items("", k), rank, t0, t1, n_units, per_term[t0:t1])
            aligned = {}
            for name in fields:
                f_indptr, f_indices, f_counts = _place(items(name, k), rank, t0, t1, n_units)
                aligned[name] = _align(main[0], main[1], f_indptr, f_indices, f_counts, name)
                del f_indptr, f_indices, f_counts
            return t0, t1, main, aligned

        for t0, t1, (l_indptr, l_indices, l_tf), aligned in in_order(one_range, edges.shape[0] - 1, self.threads):
            indptr[t0 + 1:t1 + 1] = nnz + l_indptr[1:]
            nnz += l_indices.shape[0]
            cols[0].write(l_indices)
            cols[1].write(l_tf)
            for j, name in enumerate(fields):
                cols[2 + j].write(aligned[name])
            if on_range is not None:
                on_range(l_indices, l_tf, aligned)
            del l_indptr, l_indices, l_tf, aligned
        for col in cols:
            col.close()
        small = {"indptr": indptr, "doc_len": doc_len.astype(np.int32)}
        for name, arr in small.items():
            out.put(name, arr)
        return vocab, (out.arrays if sink is None else small)


RANGE_POSTINGS = 1 << 22  # postings per term range when the CSR is written to disk (``Accumulator.finish``)


def in_order(fn, n: int, threads: int = 1):
    """``fn(0), fn(1), ..., fn(n - 1)`` in that order; with ``threads`` > 1, in a thread pool, the next
    ``threads - 1`` computed while the caller consumes one (so at most ``threads`` results are held, the
    one consumed included). ``fn`` must not depend on the others (each range of a build does not)."""
    if threads <= 1 or n <= 1:
        for k in range(n):
            yield fn(k)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="chitragupta-build") as ex:
        pending: deque = deque()
        nxt = 0
        try:
            while nxt < n or pending:
                while nxt < n and len(pending) < threads:
                    pending.append(ex.submit(fn, nxt))
                    nxt += 1
                got = pending.popleft().result()
                yield got
                del got
        finally:
            for fut in pending:
                fut.cancel()


def _term_ranges(per_term: np.ndarray, budget: int) -> np.ndarray:
    """Term boundaries ``[0, t1, ..., n_terms]`` cutting ``per_term`` counts into ranges of at most
    ``budget`` in all (a single term above it is a range of its own)."""
    n = per_term.shape[0]
    if n == 0:
        return np.zeros(2, dtype=np.int64)
    cum = np.cumsum(per_term)
    edges = [0]
    while edges[-1] < n:
        t0 = edges[-1]
        base = int(cum[t0 - 1]) if t0 else 0
        t1 = int(np.searchsorted(cum, base + budget, side="right"))
        edges.append(min(n, max(t0 + 1, t1)))
    return np.asarray(edges, dtype=np.int64)


class MemoryArrays:
    """What ``Accumulator.finish`` and ``Sequences.finish`` write into when the arrays stay in memory
    (the passage index): ``put`` and ``column`` like ``store.NewGeneration``, without scratch files, so
    everything is one term range."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def put(self, name: str, arr: np.ndarray) -> None:
        self.arrays[name] = arr

    def column(self, name: str, dtype, length: int) -> "_Column":
        return _Column(self.arrays, name, np.dtype(dtype))


class _Column:
    def __init__(self, arrays: dict, name: str, dtype: np.dtype):
        self.arrays, self.name, self.dtype, self.parts = arrays, name, dtype, []

    def write(self, piece: np.ndarray) -> None:
        self.parts.append(np.asarray(piece, dtype=self.dtype))

    def close(self) -> None:
        parts = self.parts
        self.arrays[self.name] = (parts[0] if len(parts) == 1 else np.concatenate(parts) if parts
                                  else np.zeros(0, dtype=self.dtype))
        self.parts = []

    def read(self, a: int, b: int) -> np.ndarray:
        return self.arrays[self.name][a:b]


_RECORD = np.dtype([("u", "<i4"), ("r", "<i4"), ("c", "<i4")])  # a triple with its term's final id


class _Buckets:
    """Records split by term range (``edges``), appended to one scratch file per range in the order they
    arrive, so a range read back holds its records in stream order."""

    def __init__(self, edges: np.ndarray, dtype: np.dtype, scratch, tag: str):
        self.edges, self.dtype = edges, dtype
        self.paths = [scratch(f"{tag}{k}") for k in range(edges.shape[0] - 1)]
        # each term's range (a lookup per triple instead of a search)
        self.range_of = np.repeat(np.arange(edges.shape[0] - 1, dtype=np.int32), np.diff(edges))

    def split(self, units: np.ndarray, terms: np.ndarray, counts: np.ndarray, rank: np.ndarray):
        """The triples (``terms`` provisional ids, ranked by ``rank``) as records grouped by range, and
        where each range's group starts (``kernels.build.split_by_range``; for ``write``)."""
        split_by_range = build.split_by_range

        return split_by_range(units, terms, counts, rank, self.range_of, len(self.paths))

    def write(self, rec: np.ndarray, cuts: np.ndarray) -> None:
        """Append ``split``'s groups to their ranges' files."""
        for k in np.flatnonzero(np.diff(cuts)):
            with open(self.paths[k], "ab") as f:
                f.write(memoryview(rec[cuts[k]:cuts[k + 1]]).cast("B"))

    def take(self, k: int) -> np.ndarray:
        """Range ``k``'s records (its file removed)."""
        p = self.paths[k]
        if not os.path.exists(p):
            return np.zeros(0, dtype=self.dtype)
        got = np.fromfile(p, dtype=self.dtype)
        os.unlink(p)
        return got


def _bucket(st: _Stream, rank: np.ndarray, edges: np.ndarray, scratch, tag: str, threads: int = 1) -> _Buckets:
    """``st``'s triples, their terms ranked, split into ``edges``' ranges (chunks consumed, in order;
    with ``threads`` > 1 the next chunks are split while one is written)."""
    out = _Buckets(edges, _RECORD, scratch, tag)
    chunks, st.chunks = st.chunks, []

    def split(k: int):
        u, t, c = _arrays(chunks[k])
        return k, out.split(u, t, c, rank)

    for k, (rec, cuts) in in_order(split, len(chunks), threads):
        out.write(rec, cuts)
        ch, chunks[k] = chunks[k], None
        if isinstance(ch, ChunkFile):
            ch.discard()
        del ch, rec, cuts
    return out


def _place(items: list, rank: np.ndarray, t0: int, t1: int, n_units: int,
           counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Terms ``t0..t1``'s canonical CSR (indptr from 0, indices int32, counts int32) from ``items`` (every
    triple in them has its term in the range), placed in their order; ``items`` is emptied as they are
    placed, so the peak is about the triples plus the output. ``counts``: the triples per term if known."""
    n = t1 - t0
    held = sum(int(it.shape[0] if isinstance(it, np.ndarray) else it.n if isinstance(it, ChunkFile) else it[0].shape[0])
               for it in items)
    count_terms = build.count_terms
    count_terms_ranked = build.count_terms_ranked
    place = build.place
    place_ranked = build.place_ranked

    if counts is None:
        counts = np.zeros(n, dtype=np.int64)
        for it in items:
            if isinstance(it, np.ndarray):
                count_terms(it["r"], t0, counts)
            else:
                count_terms_ranked(_arrays(it)[1], rank, t0, counts)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    total = int(indptr[-1])
    indices = np.empty(total, dtype=np.int32)
    out = np.empty(total, dtype=np.int32)
    nxt = indptr[:-1].copy()
    if held != total:  # (the kernels write where the counts say: they must agree)
        raise AssertionError("a term range's triples do not match its counts")
    items.reverse()
    while items:
        it = items.pop()
        # placed in the order they come, each term's triples after the ones before (a stable counting
        # sort by term: the chunks' unit order is kept inside each term)
        if isinstance(it, np.ndarray):
            place(it["u"], it["r"], it["c"], t0, nxt, indices, out)
        else:
            u, t, c = _arrays(it)
            place_ranked(u, t, c, rank, t0, nxt, indices, out)
            del u, t, c
        del it
    return _canonical(indptr, indices, out, n, n_units)


_ALIGN_BLOCK = 1 << 23  # main postings per call of the field-count walk


def _align(indptr, indices, f_indptr, f_indices, f_counts, name: str) -> np.ndarray:
    """A field's counts at the positions of the same (term, unit) pairs in the main postings (each row
    of both ascending: one walk of the two, ``kernels.build.align``, a block of terms at a time)."""
    align = build.align

    out = np.zeros(indices.shape[0], dtype=np.int32)
    n_terms = indptr.shape[0] - 1
    t0 = 0
    while t0 < n_terms:
        t1 = max(t0 + 1, int(np.searchsorted(indptr, indptr[t0] + _ALIGN_BLOCK, side="right")) - 1)
        t1 = min(t1, n_terms)
        if align(indptr, indices, f_indptr, f_indices, f_counts, t0, t1, out) >= 0:
            raise AssertionError(f"field {name!r} counts a token its unit does not have")
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
        self.units = array("q")  # (8 bytes a unit: a list of ints would take 36)
        self.starts = array("q")
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
        self.units.frombytes(np.ascontiguousarray(units, dtype=np.int64).tobytes())
        self.starts.frombytes((np.asarray(starts, dtype=np.int64) + base).tobytes())
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
               reused: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
               sink=None) -> dict[str, np.ndarray]:
        """The positions arrays, written into ``sink`` (see ``Accumulator.finish``; None: returned in
        memory): ``seq`` int32 and ``seq_ptr`` int64 (unit u's ids are ``seq[seq_ptr[u]:seq_ptr[u + 1]]``),
        ``tpos`` int32 and ``tpos_ptr`` int64 (``kernels.phrase.by_term``). ``seq`` is written a block of
        ids at a time; ``tpos`` a term range at a time (``POSITIONS_PER_RANGE`` offsets), each range one
        pass over ``seq`` as written. Returns ``seq_ptr`` and ``tpos_ptr`` (and, without a sink, all four).

        ``reused``: ``(new_units, old_units, old_seq, old_ptr, old_to_new)`` -- units copied from an older
        index, their ids mapped by ``old_to_new`` (an old id -> the new one; ``SEQ_BREAK`` stays)."""
        out = sink if sink is not None else MemoryArrays()
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
        units = np.frombuffer(self.units, dtype=np.int64) if len(self.units) else np.zeros(0, dtype=np.int64)
        starts = np.append(np.frombuffer(self.starts, dtype=np.int64) if len(self.starts) else [], buf.shape[0]
                           ).astype(np.int64)
        self.units = self.starts = None
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
        col = out.column("seq", np.int32, int(ptr[-1]))
        per_term = np.zeros(n_terms, dtype=np.int64)  # occurrences of each term: tpos's row lengths

        count_ids = build.count_ids
        map_count = build.map_count
        map_ids = build.map_ids

        def emit(ids: np.ndarray) -> None:
            col.write(ids)
            count_ids(ids, per_term)

        def mapped(ids: np.ndarray, to: np.ndarray) -> np.ndarray:
            return map_ids(np.ascontiguousarray(ids), to, SEQ_BREAK)

        if not from_old.any() and (units.size < 2 or bool((np.diff(units) > 0).all())):
            # a fresh build: the buffer is already in unit order (mapped and counted in one pass)
            for a in range(0, buf.shape[0], _SEQ_BLOCK):
                col.write(map_count(np.ascontiguousarray(read(a, min(a + _SEQ_BLOCK, buf.shape[0]))), table,
                                    SEQ_BREAK, per_term))
        else:
            order = np.flatnonzero(lens > 0)
            u0 = 0
            while u0 < order.size:  # units in blocks of about _SEQ_BLOCK ids: bounded temporaries
                u1 = max(u0 + 1, int(np.searchsorted(ptr[order + 1], ptr[order[u0]] + _SEQ_BLOCK, side="right")))
                pick = order[u0:u1]
                base = int(ptr[pick[0]])  # (units ascending: the block's ids are contiguous in seq)
                piece = np.empty(int(ptr[pick[-1] + 1]) - base, dtype=np.int32)
                for old_side in (False, True):
                    sel = pick[from_old[pick] == old_side]
                    if not sel.size:
                        continue
                    ln = lens[sel]
                    within = np.arange(int(ln.sum()), dtype=np.int64) - np.repeat(np.cumsum(ln) - ln, ln)
                    src = np.repeat(src_start[sel], ln) + within
                    dest = np.repeat(ptr[sel] - base, ln) + within
                    piece[dest] = (mapped(np.asarray(reused[2])[src], reused[4]) if old_side
                                   else mapped(buf[src], table))
                emit(piece)
                u0 = u1
        self.buf = None
        del buf
        col.close()
        out.put("seq_ptr", ptr)
        tpos_ptr = _term_positions(col, ptr, per_term, out)
        return out.arrays if sink is None else {"seq_ptr": ptr, "tpos_ptr": tpos_ptr}


POSITIONS_PER_RANGE = 1 << 25  # tpos offsets per term range when written to disk (one pass over seq each)
_POS_BLOCK = 1 << 22  # ids of seq read per step of such a pass


def _term_positions(seq, ptr: np.ndarray, per_term: np.ndarray, out, threads: int = 1) -> np.ndarray:
    """Write ``tpos`` (``kernels.phrase.by_term`` of the ``seq`` column just written, ``per_term`` its
    occurrences per term) and ``tpos_ptr`` into ``out``; returns ``tpos_ptr``. In memory, or when it is
    small, in one go; else a term range at a time, each a pass over ``seq`` read back a block of
    documents at a time, the range's terms shifted to 0.. so that the fill skips the others."""
    from chitragupta.kernels.phrase import by_term

    n_terms = per_term.shape[0]
    n_units = ptr.shape[0] - 1
    total_ids = int(ptr[-1])
    pos_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(per_term, out=pos_ptr[1:])
    col = out.column("tpos", np.int32, int(pos_ptr[-1]))
    edges = (_term_ranges(per_term, POSITIONS_PER_RANGE) if hasattr(out, "scratch")
             else np.array([0, n_terms], dtype=np.int64))
    if edges.shape[0] <= 2 and total_ids < _POS_BLOCK:
        col.write(by_term(seq.read(0, total_ids), ptr, n_terms)[0])
    else:
        fill_positions = build.fill_positions

        def one_range(k: int) -> np.ndarray:  # (in a thread when ``threads`` > 1)
            t0, t1 = int(edges[k]), int(edges[k + 1])
            got = np.empty(int(pos_ptr[t1] - pos_ptr[t0]), dtype=np.int32)
            cur = pos_ptr[t0:t1] - pos_ptr[t0]  # (advanced by the fill as it places)
            d0 = 0
            while d0 < n_units:
                d1 = min(n_units, max(d0 + 1, int(np.searchsorted(ptr, ptr[d0] + _POS_BLOCK, side="right")) - 1))
                ids = seq.read(int(ptr[d0]), int(ptr[d1]))
                fill_positions(np.ascontiguousarray(ids), ptr[d0:d1 + 1] - ptr[d0], t0, t1, cur, got)
                d0 = d1
            return got

        for got in in_order(one_range, edges.shape[0] - 1, threads):
            col.write(got)
            del got
    col.close()
    out.put("tpos_ptr", pos_ptr)
    return pos_ptr
