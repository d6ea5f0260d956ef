"""What every BM25 index (documents, passages) shares at query time: a vocabulary, term-major
postings, cached idf and length norms, and turning query strings into a ``QueryBatch``.

An index opened from disk is checked in two steps, so that a single query does not pay for a pass over
every posting:

``check_arrays`` (every open, numpy, O(terms + documents)): the dtypes and shapes the kernels are
compiled for, string tables whose offsets run from 0 to their blob's end (an ASCII vocabulary, UTF-8
citekeys), ``indptr`` from 0 to nnz without decreasing, no negative document length.

``TermIndex.check_deep`` (once, before a numba kernel reads the index; a writer's open does it at once):
the string tables sorted, and postings whose every row is
ascending inside the document range with positive counts that sum, per document, to ``doc_len``
(``chitragupta.kernels.integrity``). The numpy scorer of a single query needs none of it: it checks
each posting slice it reads (``chitragupta.kernels.reference``) and numpy bounds-checks every gather.
"""

from __future__ import annotations

import numpy as np

from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.text.stem import NONE, get_stemmer
from chitragupta.kernels.types import Postings, QueryBatch, bm25_idf, length_norm

__all__ = ["TermIndex", "check_arrays", "check_postings", "check_sorted", "array_of", "check_string_table",
           "table_arrays"]


def table_arrays(citekeys: list[str], vocab: list[str]) -> dict[str, np.ndarray]:
    """The string tables every index stores beside its postings: the sorted citekeys and the sorted
    vocabulary."""
    keys = StringTable.from_sorted(citekeys)
    vt = StringTable.from_sorted(vocab)
    return {"citekeys_blob": keys.blob, "citekeys_offsets": keys.offsets, "vocab_blob": vt.blob,
            "vocab_offsets": vt.offsets}


def array_of(arrays: dict, name: str, dtype, ndim: int = 1, length: int | None = None) -> np.ndarray:
    """``arrays[name]`` if it is a C-contiguous array of exactly ``dtype`` (native order), ``ndim``
    dimensions and, when given, ``length`` rows; IndexCorrupt otherwise."""
    arr = arrays.get(name)
    if arr is None:
        raise IndexCorrupt(f"array {name} is missing from the manifest")
    want = np.dtype(dtype)
    if arr.dtype != want or arr.ndim != ndim or not arr.flags.c_contiguous:
        raise IndexCorrupt(f"array {name} is {arr.dtype.str}{list(arr.shape)}, not {ndim}-d {want.str}")
    if length is not None and arr.shape[0] != length:
        raise IndexCorrupt(f"array {name} has {arr.shape[0]} rows, {length} expected")
    return arr


def check_string_table(arrays: dict, prefix: str, *, ascii_only: bool = False, deep: bool = True) -> int:
    """Check ``<prefix>_blob``/``<prefix>_offsets`` (offsets from 0 to the blob's end, never decreasing;
    each string valid UTF-8; with ``deep``, strictly ascending); returns how many strings it holds."""
    blob = array_of(arrays, f"{prefix}_blob", np.uint8)
    offsets = array_of(arrays, f"{prefix}_offsets", np.int64)
    if offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != blob.shape[0] or (np.diff(offsets) < 0).any():
        raise IndexCorrupt(f"the {prefix} table's offsets do not run from 0 to its {blob.shape[0]} bytes")
    if ascii_only:
        if blob.shape[0] and int(blob.max()) >= 0x80:
            raise IndexCorrupt(f"the {prefix} table holds a byte that is not ASCII")
    else:
        try:
            bytes(blob).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as err:
            raise IndexCorrupt(f"the {prefix} table is not UTF-8 at byte {err.start}") from None
        starts = offsets[:-1][offsets[:-1] < offsets[1:]]
        if starts.size and ((blob[starts] & 0xC0) == 0x80).any():
            raise IndexCorrupt(f"the {prefix} table splits a character between two strings")
    if deep:
        check_sorted(arrays, prefix)
    return int(offsets.shape[0] - 1)


def check_sorted(arrays: dict, prefix: str) -> None:
    """IndexCorrupt unless the string table ``prefix`` (checked by ``check_string_table``) is strictly
    ascending, as its binary search assumes (a numba pass)."""
    from chitragupta.kernels.integrity import first_unsorted

    bad = first_unsorted(arrays[f"{prefix}_blob"], arrays[f"{prefix}_offsets"])
    if bad >= 0:
        raise IndexCorrupt(f"the {prefix} table is not sorted at position {bad}")


def check_arrays(arrays: dict, *, deep: bool = True) -> int:
    """IndexCorrupt unless the vocabulary and the postings are what the kernels may
    index with (see the module docstring; without ``deep``, the cheap part only); returns the number of
    units (documents or passages)."""
    n_terms = check_string_table(arrays, "vocab", ascii_only=True, deep=False)
    indptr = array_of(arrays, "indptr", np.int64, length=n_terms + 1)
    indices = array_of(arrays, "indices", np.int32)
    nnz = indices.shape[0]
    tf = array_of(arrays, "tf", np.int32, length=nnz)
    doc_len = array_of(arrays, "doc_len", np.int32)
    n_units = doc_len.shape[0]
    if indptr[0] != 0 or indptr[-1] != nnz or (np.diff(indptr) < 0).any():
        raise IndexCorrupt(f"indptr does not run from 0 to the {nnz} postings")
    if n_units and int(doc_len.min()) < 0:
        raise IndexCorrupt("a document length is negative")
    if deep:
        check_postings(arrays)
    return n_units


def check_postings(arrays: dict) -> None:
    """The deep half of ``check_arrays`` (which must have passed): the vocabulary sorted, every posting row
    ascending inside the unit range with positive counts that add up to ``doc_len``."""
    from chitragupta.kernels.integrity import scan_postings, weighted_sums

    check_sorted(arrays, "vocab")
    indptr, indices, tf, doc_len = arrays["indptr"], arrays["indices"], arrays["tf"], arrays["doc_len"]
    n_units = doc_len.shape[0]
    bad, s0, s1 = scan_postings(indptr, indices, tf, n_units)
    if bad >= 0:
        raise IndexCorrupt(f"the postings of term {bad} are out of order, out of the document range "
                           f"(0..{n_units - 1}) or hold a count <= 0")
    if (s0, s1) != weighted_sums(doc_len):
        raise IndexCorrupt("the term counts do not add up to the document lengths")


class TermIndex:
    """Vocabulary + postings (possibly memory-mapped) with their query-time caches.

    ``postings`` is for kernels that trust what they read: call ``check_deep`` first (once; an index a
    writer opened is checked already). ``raw_postings`` is the same arrays for the numpy scorer, which
    checks each slice it reads."""

    def __init__(self, arrays: dict[str, np.ndarray], manifest: dict, *, deep_checked: bool = True):
        # The stemmer the index was built with (a manifest setting), applied to query terms alike.
        self.stemmer_name = manifest.get("settings", {}).get("retrieval.stemmer", NONE)
        self.stem = get_stemmer(self.stemmer_name)
        self.vocab = StringTable(arrays["vocab_blob"], arrays["vocab_offsets"])
        # plain ndarray views of the memory-mapped arrays: the same pages, without np.memmap's cost on
        # every slice and scalar read (a single query reads a few dozen)
        self.postings = Postings(
            indptr=_plain(arrays["indptr"]), indices=_plain(arrays["indices"]), tf=_plain(arrays["tf"]),
            doc_len=_plain(arrays["doc_len"]),
        )
        self.raw_postings = self.postings
        self.where = "the index cache"  # named in errors; the subclasses say which one
        self._arrays = arrays
        self.deep_checked = deep_checked
        self._idf: np.ndarray | None = None
        self._norms: dict[tuple[float, float], np.ndarray] = {}

    def check_deep(self, fields=()) -> None:
        """The checks a numba kernel needs before it reads this index (``check_postings``, the citekeys
        sorted; and the counts of the weighted ``fields``), each once; ``IndexCorrupt`` when they fail
        (the caller rebuilds the index)."""
        if not self.deep_checked:
            check_postings(self._arrays)
            if "citekeys_blob" in self._arrays:
                check_sorted(self._arrays, "citekeys")
            self.deep_checked = True
        for name in fields:
            self.check_field(name)

    def check_field(self, name: str) -> None:
        """IndexCorrupt unless field ``name``'s counts are sound (an index with fields says how)."""

    @property
    def n_units(self) -> int:
        return self.postings.n_docs

    # -- query-time caches ----------------------------------------------------------------------
    @property
    def idf_(self) -> np.ndarray:
        if self._idf is None:
            self._idf = bm25_idf(self.postings.df(), self.n_units)
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

    def index_term(self, term: str) -> str:
        """A query term as the index holds it (its stem, when the index is stemmed)."""
        return self.stem(term) if self.stem else term

    def query_batch(self, term_lists: list[list[str]]) -> QueryBatch:
        """Distinct known term ids per query (unknown terms dropped), as a CSR batch."""
        flat = [self.index_term(t) for terms in term_lists for t in terms]
        lengths = np.fromiter((len(t) for t in term_lists), dtype=np.int64, count=len(term_lists))
        return QueryBatch.from_ids(np.asarray(self.vocab.find_many(flat), dtype=np.int64), lengths)


def _plain(arr: np.ndarray) -> np.ndarray:
    return arr.view(np.ndarray) if isinstance(arr, np.memmap) else arr
