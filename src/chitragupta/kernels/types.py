"""The array types every backend takes and returns.

Document ids are positions in the index, and the index lays documents out in citekey order, so the
tie-break "score descending, then citekey ascending" is "score descending, then id ascending" here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Postings", "QueryBatch", "BM25Params", "TopK", "bm25_idf", "length_norm", "allowed_rows"]


@dataclass(frozen=True)
class Postings:
    """A term-major CSR matrix of raw term frequencies, plus per-document lengths.

    indptr:  (n_terms + 1,) int64; term t's postings are ``indptr[t]:indptr[t+1]``.
    indices: (nnz,) int32 document ids, ascending within each term.
    tf:      (nnz,) int32 raw term frequency of that term in that document.
    doc_len: (n_docs,) int32 indexed tokens per document.
    fields:  name -> (nnz,) int32 term frequency inside that field (title, abstract), aligned with
             ``tf``; a field count never exceeds ``tf``. Read only when that field's weight is not 1.
    """

    indptr: np.ndarray
    indices: np.ndarray
    tf: np.ndarray
    doc_len: np.ndarray
    fields: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_terms(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def df(self) -> np.ndarray:
        """(n_terms,) int64 document frequency of each term."""
        return np.diff(self.indptr)

    def avgdl(self) -> float:
        """Mean document length; 1.0 for an empty corpus or one of empty documents (nothing scores)."""
        if self.n_docs == 0:
            return 1.0
        mean = float(self.doc_len.astype(np.float64).mean())
        return mean if mean > 0 else 1.0


@dataclass(frozen=True)
class QueryBatch:
    """A CSR batch of queries: query q's distinct term ids are ``terms[indptr[q]:indptr[q+1]]``.

    indptr: (n_queries + 1,) int64.  terms: (total,) int32, distinct and ascending within a query.
    Terms unknown to the index are simply absent; an empty query has an empty slice.
    """

    indptr: np.ndarray
    terms: np.ndarray

    @property
    def n_queries(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @classmethod
    def from_lists(cls, term_lists) -> "QueryBatch":
        """Build from an iterable of iterables of term ids (de-duplicated and sorted here)."""
        rows = [np.unique(np.asarray(list(t), dtype=np.int64)) for t in term_lists]
        lengths = np.array([r.shape[0] for r in rows], dtype=np.int64)
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        terms = np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)
        return cls(indptr=indptr, terms=terms)

    @classmethod
    def from_ids(cls, ids: np.ndarray, lengths: np.ndarray) -> "QueryBatch":
        """From each query's term ids flat (``lengths[q]`` of them, in order, -1 for unknown): unknown ids
        dropped, the rest distinct and ascending per query."""
        n = lengths.shape[0]
        qid = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keep = ids >= 0
        keys = np.sort((qid[keep] << 32) | ids[keep])  # by query, then term
        if keys.size:
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # distinct
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys >> 32, minlength=n), out=indptr[1:])
        return cls(indptr=indptr, terms=(keys & 0xFFFFFFFF).astype(np.int32))


@dataclass(frozen=True)
class BM25Params:
    """k1, b and the field weights, applied at query time.

    The weighted term frequency is ``tf + sum_f (w_f - 1) * tf_f``; a weight of exactly 1.0 is
    skipped, so the unweighted path never reads a field count.
    """

    k1: float = 1.5
    b: float = 0.75
    field_weights: tuple[tuple[str, float], ...] = ()

    def __post_init__(self):
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise ValueError(f"k1 must be a finite number >= 0, got {self.k1!r}")
        if not (math.isfinite(self.b) and 0.0 <= self.b <= 1.0):
            raise ValueError(f"b must be a number in [0, 1], got {self.b!r}")
        for name, w in self.field_weights:
            if not (math.isfinite(w) and w >= 0):
                raise ValueError(f"weight for field {name!r} must be a finite number >= 0, got {w!r}")

    def active_fields(self) -> tuple[tuple[str, float], ...]:
        """The (field, weight - 1) pairs that change anything: weights of exactly 1.0 drop out."""
        return tuple((n, w - 1.0) for n, w in self.field_weights if w != 1.0)


@dataclass(frozen=True)
class TopK:
    """Per-query top-k: ``ids`` (n_queries, k) int64 and ``scores`` (n_queries, k) float64.

    Rows are sorted by score descending, then id ascending. Only documents matching at least one query
    term with a positive score are hits; a row with fewer hits is padded with id -1 and score -inf.
    """

    ids: np.ndarray
    scores: np.ndarray

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    def counts(self) -> np.ndarray:
        """(n_queries,) int64 number of real hits in each row."""
        return (self.ids >= 0).sum(axis=1)

    @classmethod
    def empty(cls, n_queries: int, k: int) -> "TopK":
        return cls(
            ids=np.full((n_queries, k), -1, dtype=np.int64),
            scores=np.full((n_queries, k), -np.inf, dtype=np.float64),
        )


def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """(n_terms,) float64 ``ln(1 + (N - df + 0.5) / (df + 0.5))``, always > 0."""
    df = df.astype(np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def length_norm(doc_len: np.ndarray, avgdl: float, k1: float, b: float) -> np.ndarray:
    """(n_docs,) float64 ``k1 * (1 - b + b * dl / avgdl)``, BM25's per-document denominator term."""
    return k1 * (1.0 - b + b * (doc_len.astype(np.float64) / avgdl))


def allowed_rows(allowed, n_queries: int, n_docs: int) -> list:
    """The ``allowed`` argument of every scorer, one entry per query: None (every document may be a hit)
    or a (n_docs,) bool array (only documents marked True may be a hit; the others never enter the top-k).

    ``allowed`` is None (no mask), one (n_docs,) bool array for every query, or a sequence of
    ``n_queries`` entries, each None or such an array. ValueError for any other shape or dtype.
    """
    if allowed is None:
        return [None] * n_queries
    if isinstance(allowed, np.ndarray):
        allowed = [allowed] * n_queries
    rows = list(allowed)
    if len(rows) != n_queries:
        raise ValueError(f"allowed holds {len(rows)} masks for {n_queries} queries")
    for m in rows:
        if m is not None and (not isinstance(m, np.ndarray) or m.dtype != np.bool_ or m.shape != (n_docs,)):
            raise ValueError(f"an allowed mask must be a bool array of shape ({n_docs},)")
    return rows
