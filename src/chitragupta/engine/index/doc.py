"""The BM25 document index: building it, updating it incrementally, and opening it for search.

Layout (all arrays, see ``chitragupta.engine.index.store``): the vocabulary and the citekeys as sorted string tables
(term id = vocabulary position, document id = citekey position, so ties by id are ties by citekey); a
term-major CSR of raw term frequencies (``indptr``, ``indices``, ``tf``: a term's row is its posting
list); document lengths; one fingerprint and one flag byte per document. BM25 itself is applied at query
time, so k1 and b change without a rebuild. Beside them, the values metadata filters compare, as columns
(``chitragupta.engine.index.facets``).

An update re-tokenizes only documents whose fingerprint changed and rebuilds the arrays canonically
(sorted vocabulary, citekey order, ascending document ids per term), so an incrementally updated index
is identical to a fresh build.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from chitragupta.engine.index import facets as filter_columns
from chitragupta.engine.index import store
from chitragupta.engine.index.source import (FLAG_BAD_SIDECAR, FLAG_HAS_ABSTRACT, FLAG_NOT_PARSED, FLAG_TEXT_MISSING,
                                 fingerprints)
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.index.csr import Accumulator, Sequences, add_reused, matching_documents
from chitragupta.engine.index.terms import TermIndex, array_of, check_arrays, check_string_table, table_arrays
from chitragupta.errors import IndexDamaged
from chitragupta.engine.text.stem import NONE, get_stemmer
from chitragupta.engine.text.tokenize import TOKENIZER_ID

__all__ = ["DocIndex", "IndexReport", "SCHEMA_VERSION", "build", "open_index", "expected_manifest", "is_current",
           "citekeys_digest", "CHECKSUMMED_EVERY_OPEN"]

SCHEMA_VERSION = 9  # 2: the reference cut; 3: title and abstract field counts; 4: the vocabulary lookup table;
# 5: the plain-text reference cut; 6: appendices after the reference list kept, line-end hyphens joined;
# 7: the one appendix test (issue 29); 8: the positions array ([retrieval].positions); 9: no lookup table
FIELDS = ("title", "abstract")
KIND = "doc"

Progress = Callable[[int, int | None], None]

# The arrays whose checksums an open verifies every time: all but the per-posting ones (read once by
# ``check_arrays`` instead) and the fingerprints (a damaged one only makes a document re-tokenized).
# Together about 4% of the index's bytes: ~36 MB at a million documents.
CHECKSUMMED_EVERY_OPEN = frozenset({"indptr", "doc_len", "vocab_blob", "vocab_offsets", "citekeys_blob",
                                    "citekeys_offsets", "flags"})


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
    # (citekey, words of its reference list cut, words after the list kept) of each document tokenized
    # this time whose reference list was cut
    cuts: list[tuple[str, int, int]] = field(default_factory=list)


class DocIndex(TermIndex):
    """An opened document index (arrays possibly memory-mapped) with its query-time caches."""

    def __init__(self, arrays: dict[str, np.ndarray], manifest: dict, path: Path | None = None,
                 unchecked: tuple[str, ...] = (), *, deep_checked: bool = True):
        super().__init__(arrays, manifest, deep_checked=deep_checked)
        raw = {f: arrays[f"tf_{f}"] for f in FIELDS}
        self.raw_postings = replace(self.postings, fields=raw)  # the numpy scorer checks what it reads
        self.postings = replace(self.postings, fields=_CheckedFields(raw, self, unchecked) if unchecked else raw)
        self.manifest = manifest
        self.path = path
        self.where = f"the document index ({path})" if path else "the document index"
        self.citekeys = StringTable(arrays["citekeys_blob"], arrays["citekeys_offsets"])
        self.fingerprints = arrays["fingerprints"]
        self.flags = arrays["flags"]
        self.facet_arrays = {name: arrays[name] for name in filter_columns.NAMES if name in arrays}
        self._facets_sound: set[str] = set()

    def verify_facets(self, field: str) -> None:
        """IndexCorrupt unless the filter columns of ``field`` ("year" or one of ``facets.FIELDS``) match
        their checksums and pass ``facets.check``'s deep checks; once (a filter reads only its fields')."""
        if field not in self._facets_sound:
            if self.path is not None:
                store.verify_checksums(self.path, self.manifest, filter_columns.names_of(field))
            filter_columns.check(self.facet_arrays, self.n_docs, deep=(field,))
            self._facets_sound.add(field)

    @property
    def positions(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(seq, seq_ptr)``: every document's runs in order as ids (its title's, ``csr.SEQ_BREAK``, its
        body's; an indexed run -> its term id, the j-th of ``DROPPED_RUNS`` -> ``n_terms + j``), memory-mapped;
        None when the index was built without them (``[retrieval].positions = false``)."""
        if "seq" not in self._arrays:
            return None
        return self._arrays["seq"], self._arrays["seq_ptr"]

    @property
    def term_positions(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(tpos, tpos_ptr)``: term t's occurrences, ``tpos[tpos_ptr[t]:tpos_ptr[t + 1]]``, each an offset
        into its document's ids in ``positions``, in posting order (``tf`` of them per posting)."""
        if "tpos" not in self._arrays:
            return None
        return self._arrays["tpos"], self._arrays["tpos_ptr"]

    def check_field(self, name: str) -> None:
        """IndexCorrupt unless field ``name``'s counts are within [0, tf] and add up to what was written
        (once; ``check_deep`` asks for the fields a search weights)."""
        fields = self.postings.fields
        if isinstance(fields, _CheckedFields):
            fields.check(name)

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


class _CheckedFields(dict):
    """A document index's field counts, each checked the first time a kernel asks for it (a field is
    read only when its weight is not 1, so an open does not pay for fields nobody weights)."""

    def __init__(self, fields: dict, index: "DocIndex", unchecked: tuple[str, ...]):
        super().__init__(fields)
        self._index = index
        self._unchecked = set(unchecked)

    def check(self, name: str) -> None:
        """Check field ``name`` now if it has not been (``store.IndexCorrupt`` when it fails)."""
        if name in self._unchecked:
            check_field(self._index.postings, self._index.manifest, name, super().__getitem__(name))
            self._unchecked.discard(name)

    def __getitem__(self, name):
        try:
            self.check(name)
        except store.IndexCorrupt as err:
            raise IndexDamaged(f"{self._index.where}: {err}; rebuild it with `chitragupta index --force`") from None
        return super().__getitem__(name)

    def get(self, name, default=None):
        return self[name] if name in self else default


def _field_sums(postings, name: str, arr) -> tuple[int, int, int]:
    from chitragupta.kernels.integrity import scan_field

    return scan_field(postings.indices, postings.tf, arr)


def check_field(postings, manifest: dict, name: str, arr) -> None:
    """IndexCorrupt unless field ``name``'s counts are within [0, tf] and add up to what the manifest
    recorded at build time (indexes built before that was recorded: the range only)."""
    arr = array_of({name: arr}, name, np.int32, length=postings.nnz)
    bad, s0, s1 = _field_sums(postings, name, arr)
    if bad >= 0:
        raise store.IndexCorrupt(f"the {name} field count at posting {bad} is outside 0..tf")
    want = (manifest.get("field_sums") or {}).get(name) if isinstance(manifest.get("field_sums"), dict) else None
    if want is not None and want != [s0, s1]:
        raise store.IndexCorrupt(f"the {name} field counts do not add up to what was written")


def open_index(folder: Path, settings: dict, *, fields: tuple[str, ...] = (), verify: bool = False,
               deep: bool = True) -> DocIndex:
    """Open the current index under ``folder``; ``store.IndexCorrupt`` if absent, broken, stale-schema,
    or failing ``check_arrays``. ``verify``: every checksum (``store.load``). ``deep``: the pass over
    every posting now, and the ``fields`` named (those the configuration weights); without it, the
    index checks itself before a numba kernel first reads it (``TermIndex.check_deep``) and each field
    on first use."""
    stored = store.load(folder, expect=expected_manifest(settings), verify=verify, always=CHECKSUMMED_EVERY_OPEN)
    arrays = stored.arrays
    n_docs = check_arrays(arrays, deep=deep)
    if check_string_table(arrays, "citekeys", deep=deep) != n_docs:
        raise store.IndexCorrupt(f"the index holds {len(arrays['citekeys_offsets']) - 1} citekeys for {n_docs} "
                                 "documents")
    array_of(arrays, "fingerprints", np.uint64, ndim=2, length=n_docs)
    if arrays["fingerprints"].shape[1] != 2:
        raise store.IndexCorrupt("array fingerprints is not (documents, 2)")
    array_of(arrays, "flags", np.uint8, length=n_docs)
    if "shard" not in stored.manifest:  # (a shard has none: its filter masks are cut from the whole index's)
        filter_columns.check(arrays, n_docs)
    nnz = arrays["indices"].shape[0]
    for f in FIELDS:
        array_of(arrays, f"tf_{f}", np.int32, length=nnz)
    if "seq" in arrays or "seq_ptr" in arrays:
        ptr = array_of(arrays, "seq_ptr", np.int64, length=n_docs + 1)
        seq = array_of(arrays, "seq", np.int32)
        if ptr.shape[0] and (int(ptr[0]) != 0 or int(ptr[-1]) != seq.shape[0]):
            raise store.IndexCorrupt("the positions array does not match its offsets")
        tptr = array_of(arrays, "tpos_ptr", np.int64, length=arrays["indptr"].shape[0])
        tpos = array_of(arrays, "tpos", np.int32)
        if tptr.shape[0] and (int(tptr[0]) != 0 or int(tptr[-1]) != tpos.shape[0]):
            raise store.IndexCorrupt("the term positions do not match their offsets")
    elif stored.manifest.get("settings", {}).get("retrieval.positions"):
        raise store.IndexCorrupt("the positions array is missing")
    checked_now = fields if deep else ()
    try:
        index = DocIndex(arrays, stored.manifest, stored.path, unchecked=tuple(f for f in FIELDS if f not in checked_now),
                         deep_checked=deep)
    except KeyError as err:
        raise store.IndexCorrupt(f"array {err} is missing from the manifest") from None
    for f in checked_now:
        check_field(index.postings, index.manifest, f, arrays[f"tf_{f}"])
    return index


def _reused_positions(old: DocIndex | None, vocab: list[str], new_units: np.ndarray, old_units: np.ndarray,
                      n_dropped: int):
    """What ``Sequences.finish`` needs to copy the reused documents' positions from ``old``: their old ids
    mapped to the new vocabulary (a dropped run keeps its place after the terms)."""
    if old is None or not new_units.size:
        return None
    got = old.positions
    if got is None:  # (an index with the same settings has them; this is a guard)
        raise store.IndexCorrupt("the index has no positions array")
    pos = {t: i for i, t in enumerate(vocab)}
    n_old = len(old.vocab)
    old_to_new = np.empty(n_old + n_dropped, dtype=np.int32)
    old_to_new[:n_old] = np.fromiter((pos.get(old.vocab[t], -1) for t in range(n_old)), dtype=np.int64, count=n_old)
    old_to_new[n_old:] = np.arange(n_dropped) + len(vocab)
    return new_units, old_units, got[0], got[1], old_to_new


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


def build(root: Path, rows, folder: Path, settings: dict, *, metadata: filter_columns.LedgerFacets,
          old: DocIndex | None = None, progress: Progress | None = None, scanned=None,
          jobs: int = 1, references=None) -> tuple[DocIndex, IndexReport]:
    """Build (or update from ``old``) the index of ``rows`` and save it under ``folder``.

    rows: the ledger's (citekey, title, status, parsed_path) in citekey order; ``metadata``: that
    ledger's, for the filter columns (``old``'s copied when they hold it); ``scanned``: their
    ``fingerprints(root, rows)`` if already computed. The caller holds the workspace lock. Returns the
    opened new index and a report. ``jobs``: worker processes that tokenize (``segments``; 1: in this
    process); the arrays are the same for any number. ``references``: called with each block's units and
    their parsed reference lists (``engine.index.references.Lists``), the lists parsed in the same pass.
    """
    t0 = time.perf_counter()
    report = IndexReport(rebuilt=True)
    fps, flags, sources = scanned if scanned is not None else fingerprints(root, rows)
    n = len(rows)
    seqs = Sequences() if settings.get("retrieval.positions", False) else None
    acc = Accumulator(fields=FIELDS, stem=get_stemmer(settings.get("retrieval.stemmer", NONE)), sequences=seqs)

    reuse_new, reuse_old, report.removed = matching_documents(old, sources, fps)
    reused = np.zeros(n, dtype=bool)
    if reuse_new.size:
        reused[reuse_new] = True
        add_reused(acc, old.postings, old.vocab, reuse_new, reuse_old, fields=FIELDS)
        # a reused document keeps what its last tokenization found about its sidecar
        flags[reuse_new] |= np.asarray(old.flags)[reuse_old] & (FLAG_BAD_SIDECAR | FLAG_HAS_ABSTRACT)
    report.reused = int(reused.sum())

    todo = np.flatnonzero(~reused)
    if progress:
        progress(0, len(todo))
    from chitragupta.engine.index.segments import POOL_FROM_BYTES, Spill, merge_block, small_text, tokenize_blocks
    from chitragupta.kernels.integrity import scan_field

    # a small build (less than POOL_FROM_BYTES of text in all, reused documents included) runs in this
    # process and thread
    small_build = small_text(sources, np.arange(n), POOL_FROM_BYTES)
    keys_digest = citekeys_digest(rows)
    if old is not None and old.manifest.get("citekeys_digest") == keys_digest and metadata.holds(old.manifest):
        filter_columns.check(old.facet_arrays, n, deep=filter_columns.FIELDS)  # (and ``old``'s every checksum)
        columns = old.facet_arrays
    else:
        columns = filter_columns.columns(metadata.read(), [r[0] for r in rows])

    spill = Spill(folder)
    sums = {f: [0, 0] for f in FIELDS}

    def add_sums(indices, tf, fields) -> None:  # the manifest's field sums, a term range at a time
        for f in FIELDS:
            _bad, s0, s1 = scan_field(indices, tf, fields[f])
            sums[f] = [(sums[f][0] + s0) % 2**64, (sums[f][1] + s1) % 2**64]

    try:
        for block in tokenize_blocks(todo, sources, FIELDS, seqs is not None,
                                     1 if small_build else max(1, int(jobs)), progress,
                                     refs=references is not None):
            merge_block(acc, block, spill)
            if references is not None:
                references(block.units, block.refs)
            flags[block.units] |= block.flags
            report.notes.extend(block.notes)
            report.cuts.extend(block.cuts)
            del block
        report.retokenized = len(todo)

        # the arrays go straight into the new generation's files, a term range or a block of ids at a
        # time: what the build holds does not grow with the postings (see ``segments``)
        # With ``jobs`` > 1 the two use the cores the workers had: the positions in a thread beside the CSR,
        # or (without positions) the CSR's term ranges in threads. The
        # arrays are the same either way. A small build finishes in this thread:
        # its passes are many short numpy calls that hold the GIL, and beside the CSR the two threads
        # only took turns (npl stand-in: the finish 0.095 s wall for 0.058 s CPU, 0.045 s alone).
        with store.writing(folder) as gen:
            vocab, rank = acc.ranks()
            beside = None
            if seqs is not None:
                args = (rank, len(vocab), acc.n_dropped, n,
                        _reused_positions(old, vocab, reuse_new, reuse_old, acc.n_dropped))
                if jobs > 1 and not small_build:
                    from concurrent.futures import ThreadPoolExecutor

                    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chitragupta-positions")
                    beside = pool.submit(seqs.finish, *args, sink=gen)
                    pool.shutdown(wait=False)
            else:
                acc.threads = max(1, int(jobs))
            try:
                vocab, small = acc.finish(n, gen, on_range=add_sums)
            finally:
                if beside is not None:
                    beside.exception()  # (waits: never leave the thread writing into an aborted generation)
            if beside is not None:
                beside.result()
            elif seqs is not None:
                seqs.finish(*args, sink=gen)
            spill.close()
            for name, arr in dict(table_arrays([s.citekey for s in sources], vocab), fingerprints=fps,
                                  flags=flags, **columns).items():
                gen.put(name, arr)
            report.n_docs, report.n_terms, report.nnz = n, len(vocab), int(small["indptr"][-1])
            report.text_missing = int(np.count_nonzero(flags & FLAG_TEXT_MISSING))
            report.with_abstract = int(np.count_nonzero(flags & FLAG_HAS_ABSTRACT))
            report.not_parsed = int(np.count_nonzero(flags & FLAG_NOT_PARSED))
            manifest = dict(
                expected_manifest(settings),
                **metadata.manifest(),
                citekeys_digest=keys_digest,
                field_sums=sums,
                stats={"n_docs": n, "n_terms": len(vocab), "nnz": report.nnz,
                       "avgdl": float(small["doc_len"].mean()) if n else 0.0,
                       "text_missing": report.text_missing, "not_parsed": report.not_parsed,
                       "with_abstract": report.with_abstract},
            )
            path = gen.commit(manifest)
            arrays = gen.mapped(gen.files)
    finally:
        spill.close()
    report.seconds = time.perf_counter() - t0
    index = DocIndex(arrays, dict(manifest, files=dict(gen.files)), path)
    return index, report
