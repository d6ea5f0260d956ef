"""Phrases over a positions array: which candidate units hold a run of ids, contiguous and in order.

    seq, ptr   unit u's ids in order are seq[ptr[u]:ptr[u + 1]] (int32, int64)
    pattern    the phrase's ids (int32, at least one)
    candidates the units to check (int64, ascending); ``phrase_units`` -> a bool per candidate
    Anchor     optional: one term of the pattern with its postings and its term-major positions
               (``by_term``: per term, in document order, the offsets where it occurs)

Two paths with one answer: numpy (a gather of the candidates' slices, compared a pattern position at a
time; no JIT to load, for a cold query's few candidates), and numba from the anchor's occurrences (the
rarest indexed word of the phrase: only the places it occurs are compared, so a phrase with one common
word does not read every candidate's every word). ``phrase_units`` picks by the number of ids to read
(``kernels.dispatch.compiled("phrase", ids)``); ``tests/engine/index/test_doc_positions.py`` holds them equal.
Only the offsets the candidates name are trusted after a check (``PositionsDamaged`` otherwise); numpy
bounds-checks the gather and numba reads inside the checked spans.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.build import stable_order
from chitragupta.kernels.dispatch import compiled

__all__ = ["phrase_units", "PositionsDamaged", "Anchor", "by_term", "check_offsets"]


class PositionsDamaged(ValueError):
    """The positions array's offsets are not what an index holds; the caller rebuilds the index."""


class Anchor:
    """Pattern position ``offset``'s term: its postings (``indices``, ``tf`` over ``[lo, hi)``, ascending
    documents) and its term-major positions ``pos[pos_lo:pos_hi]`` (``tf`` per posting). Checked here:
    the counts add up to the positions' span."""

    def __init__(self, offset: int, indices, tf, lo: int, hi: int, pos, pos_lo: int, pos_hi: int):
        if not (0 <= lo <= hi <= indices.shape[0] and 0 <= pos_lo <= pos_hi <= pos.shape[0]):
            raise PositionsDamaged("a term's positions lie outside the positions array")
        counts = np.asarray(tf[lo:hi])
        if (counts <= 0).any() or int(counts.sum()) != pos_hi - pos_lo:
            raise PositionsDamaged("a term's positions do not match its counts")
        self.offset, self.indices, self.tf, self.lo, self.hi = int(offset), indices, tf, int(lo), int(hi)
        self.pos, self.pos_lo, self.pos_hi = pos, int(pos_lo), int(pos_hi)


def by_term(seq: np.ndarray, ptr: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pos int32, pos_ptr int64)``: term t's occurrences are ``pos[pos_ptr[t]:pos_ptr[t + 1]]``, the
    offset of each in its document's ids, in document order then position order (ids >= ``n_terms``,
    the dropped runs, and ``SEQ_BREAK`` have none): a stable sort of the ids by term."""
    counts = np.zeros(n_terms, dtype=np.int64)
    for a in range(0, seq.shape[0], 1 << 24):
        block = np.asarray(seq[a:a + (1 << 24)])
        counts += np.bincount(block[(block >= 0) & (block < n_terms)], minlength=n_terms)
    pos_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=pos_ptr[1:])
    pos = np.empty(int(pos_ptr[-1]), dtype=np.int32)
    within = np.arange(seq.shape[0], dtype=np.int64) - np.repeat(ptr[:-1], np.diff(ptr))
    keep = (seq >= 0) & (seq < n_terms)
    pos[:] = within[keep][stable_order(seq[keep], n_terms)]
    return pos, pos_ptr


def _spans(seq: np.ndarray, ptr: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if candidates.size and (candidates[0] < 0 or candidates.max() + 1 >= ptr.shape[0]):
        raise PositionsDamaged(f"a candidate unit is outside the positions array's {ptr.shape[0] - 1} units")
    lo = np.asarray(ptr[candidates], dtype=np.int64)
    hi = np.asarray(ptr[candidates + 1], dtype=np.int64)
    if lo.size and ((hi < lo).any() or lo.min() < 0 or hi.max() > seq.shape[0]):
        raise PositionsDamaged("the positions array's offsets are out of order or past its end")
    return lo, hi


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


def check_offsets(seq: np.ndarray, ptr: np.ndarray) -> None:
    """PositionsDamaged unless ``ptr`` starts at 0, never decreases and ends at ``len(seq)``: once per index,
    after which ``phrase_units(..., offsets_checked=True)`` reads the offsets without a per-query gather."""
    p = np.asarray(ptr)
    if p.shape[0] == 0 or int(p[0]) != 0 or int(p[-1]) != seq.shape[0]:
        raise PositionsDamaged("the positions array does not match its offsets")
    for a in range(0, p.shape[0] - 1, 1 << 24):
        block = p[a:a + (1 << 24) + 1]
        if (block[1:] < block[:-1]).any():
            raise PositionsDamaged("the positions array's offsets are out of order")


def phrase_units(seq: np.ndarray, ptr: np.ndarray, candidates: np.ndarray, pattern: np.ndarray,
                 backend: str = "auto", anchor: Anchor | None = None, offsets_checked: bool = False) -> np.ndarray:
    """(len(candidates),) bool: the candidates whose ids hold ``pattern`` contiguously. ``backend``:
    "auto" (numba from the anchor past ``kernels.dispatch.NUMBA_FROM["phrase"]`` ids to read, else numpy),
    "numpy" or "anchored" (needs ``anchor``). ``offsets_checked``: ``check_offsets`` passed for these arrays
    (the anchored path then reads ``ptr`` itself instead of gathering the candidates' spans first)."""
    candidates = np.asarray(candidates, dtype=np.int64)
    pattern = np.ascontiguousarray(pattern, dtype=np.int32)
    if pattern.shape[0] == 0:
        raise ValueError("a phrase has at least one id")
    if candidates.size > 1 and (np.diff(candidates) <= 0).any():
        raise ValueError("the candidates must be ascending")
    if candidates.size and (candidates[0] < 0 or candidates[-1] + 1 >= ptr.shape[0]):
        raise PositionsDamaged(f"a candidate unit is outside the positions array's {ptr.shape[0] - 1} units")
    mean_len = seq.shape[0] / max(1, ptr.shape[0] - 1)
    if backend == "numpy" or (backend == "auto" and (anchor is None or
                                                     not compiled("phrase", int(candidates.size * mean_len)))):
        lo, hi = _spans(seq, ptr, candidates)
        return _numpy(seq, lo, hi, pattern)
    if anchor is None:
        raise ValueError("the anchored path needs an anchor")
    if not offsets_checked:
        _spans(seq, ptr, candidates)
    from chitragupta.kernels._phrase_numba import anchored

    out = np.zeros(candidates.shape[0], dtype=bool)
    anchored(np.asarray(seq), np.asarray(ptr), np.asarray(anchor.indices), np.asarray(anchor.tf), anchor.lo,
             anchor.hi, np.asarray(anchor.pos), anchor.pos_lo, anchor.pos_hi, candidates, pattern, anchor.offset, out)
    return out
