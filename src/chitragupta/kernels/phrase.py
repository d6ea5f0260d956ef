"""Phrases over a positions array: which candidate units hold a run of ids, contiguous and in order.

    seq, ptr   unit u's ids in order are seq[ptr[u]:ptr[u + 1]] (int32, int64)
    pattern    the phrase's ids (int32, at least one)
    candidates the units to check (int64); ``phrase_units`` -> a bool per candidate

Two paths with one answer: numpy (a gather of the candidates' slices, compared a pattern position at a
time; no JIT to load, for a cold query's few candidates) and numba (a scan of each slice, for many).
``phrase_units`` picks by the number of ids to read; ``tests/test_phrase_positions.py`` holds them equal.
Only the offsets the candidates name are trusted after a check (``PositionsDamaged`` otherwise); numpy
bounds-checks the gather and numba reads inside the checked spans.
"""

from __future__ import annotations

import numpy as np

__all__ = ["phrase_units", "phrase_units_numpy", "PositionsDamaged", "NUMBA_FROM"]

NUMBA_FROM = 1 << 18  # ids to read from which the numba scan is used (below: numpy, no JIT to load)


class PositionsDamaged(ValueError):
    """The positions array's offsets are not what an index holds; the caller rebuilds the index."""


def _spans(seq: np.ndarray, ptr: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if candidates.size and (candidates[0] < 0 or candidates.max() + 1 >= ptr.shape[0]):
        raise PositionsDamaged(f"a candidate unit is outside the positions array's {ptr.shape[0] - 1} units")
    lo = np.asarray(ptr[candidates], dtype=np.int64)
    hi = np.asarray(ptr[candidates + 1], dtype=np.int64)
    if lo.size and ((hi < lo).any() or lo.min() < 0 or hi.max() > seq.shape[0]):
        raise PositionsDamaged("the positions array's offsets are out of order or past its end")
    return lo, hi


def phrase_units_numpy(seq: np.ndarray, ptr: np.ndarray, candidates: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """The reference: (len(candidates),) bool."""
    candidates = np.asarray(candidates, dtype=np.int64)
    lo, hi = _spans(seq, ptr, candidates)
    return _numpy(seq, lo, hi, np.asarray(pattern, dtype=np.int32))


def _numpy(seq, lo, hi, pattern) -> np.ndarray:
    m = pattern.shape[0]
    lens = hi - lo
    out = np.zeros(lo.shape[0], dtype=bool)
    total = int(lens.sum())
    if not total:
        return out
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    g = np.asarray(seq)[np.repeat(lo, lens) + within]
    ok = (g == pattern[0]) & (within <= np.repeat(lens, lens) - m)  # a start with room for the phrase
    for r in range(1, m):
        ok[:-r] &= g[r:] == pattern[r]
    owner = np.repeat(np.arange(lo.shape[0]), lens)
    out[owner[ok]] = True
    return out


def phrase_units(seq: np.ndarray, ptr: np.ndarray, candidates: np.ndarray, pattern: np.ndarray,
                 backend: str = "auto") -> np.ndarray:
    """(len(candidates),) bool: the candidates whose ids hold ``pattern`` contiguously. ``backend``:
    "auto" (numba from ``NUMBA_FROM`` ids to read), "numpy" or "numba"."""
    candidates = np.asarray(candidates, dtype=np.int64)
    pattern = np.ascontiguousarray(pattern, dtype=np.int32)
    if pattern.shape[0] == 0:
        raise ValueError("a phrase has at least one id")
    lo, hi = _spans(seq, ptr, candidates)
    if backend == "numpy" or (backend == "auto" and int((hi - lo).sum()) < NUMBA_FROM):
        return _numpy(seq, lo, hi, pattern)
    out = np.zeros(lo.shape[0], dtype=bool)
    from chitragupta.kernels._phrase_numba import scan

    scan(np.asarray(seq), lo, hi, pattern, out)
    return out
