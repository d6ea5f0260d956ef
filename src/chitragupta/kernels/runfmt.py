"""Run files from top-k arrays, in numba: ids, scores and string tables in, the file's bytes out.

A batch of 20,000 queries at k = 100 is two million lines; one f-string a line is seconds of Python
after a kernel that took a fraction of one. Here a line is assembled by copying bytes: the query id,
the hit's key from the index's string table (plus ``#item`` for a passage), the rank, and the score as
``'%.10g' % score`` prints it. The caller writes the run in chunks of whole queries, so memory stays
bounded however large the batch.

The score is printed with integer arithmetic on the correctly rounded ``x * 10**p``. A value that
cannot be printed with certainty that way (within 1e-5 of a rounding tie, outside 1e-13..1e31, not a
positive finite number) gets length -1 from ``score_lengths`` and the caller prints it with Python and
hands it back as a fallback: the output is exactly Python's. Keys that need care (a byte outside
printable ASCII; a quote or backslash in JSON) are found by ``key_flags`` and the caller supplies
their text through ``key_src``; every other key is copied raw.
"""

from __future__ import annotations

import numpy as np
import numba
from numba import njit, prange

__all__ = ["score_lengths", "key_flags", "query_sizes", "write_queries", "write_pieces", "piece_cuts", "TREC", "JSONL",
           "G10_WIDTH"]

TREC, JSONL = 0, 1
G10_WIDTH = 24  # room for the longest %.10g of a double ("-1.234567891e-308" is 17)
_POW10 = np.array([10.0 ** i for i in range(23)])  # exact doubles up to 1e22


@njit(cache=True, inline="always")
def _digits(out, pos, v, width):
    """``v`` in decimal, zero-padded to ``width`` digits, at ``out[pos:]``; the position after it."""
    for j in range(width - 1, -1, -1):
        out[pos + j] = 48 + v % 10
        v //= 10
    return pos + width


@njit(cache=True)
def _g10(x, out, at):
    """Write ``'%.10g' % x`` at ``out[at:]``; its length, or -1 when the caller must print it."""
    if not (x > 0.0) or x == np.inf:
        return -1
    e = int(np.floor(np.log10(x)))
    m = np.int64(0)
    done = False
    for _ in range(3):
        p = 9 - e
        if p > 22 or p < -22:
            return -1
        y = x * _POW10[p] if p >= 0 else x / _POW10[-p]  # one correctly rounded operation: error < 1e-6
        f = np.floor(y)
        frac = y - f
        if abs(frac - 0.5) < 1e-5:
            return -1  # too near a tie to round with certainty
        m = np.int64(f) + (1 if frac > 0.5 else 0)
        if m >= 10_000_000_000:
            e += 1
        elif m < 1_000_000_000:
            e -= 1
        else:
            done = True
            break
    if not done:
        return -1
    nd = 10  # significant digits once trailing zeros are stripped
    while nd > 1 and m % 10 == 0:
        m //= 10
        nd -= 1
    n = at
    if -4 <= e < 10:  # positional, as %g chooses for precision 10
        if e >= 0:
            whole = e + 1
            if nd <= whole:
                n = _digits(out, n, m, nd)
                for _ in range(whole - nd):
                    out[n] = 48
                    n += 1
            else:
                cut = np.int64(_POW10[nd - whole])
                n = _digits(out, n, m // cut, whole)
                out[n] = 46
                n = _digits(out, n + 1, m % cut, nd - whole)
        else:
            out[n] = 48
            out[n + 1] = 46
            n += 2
            for _ in range(-e - 1):
                out[n] = 48
                n += 1
            n = _digits(out, n, m, nd)
    else:
        cut = np.int64(_POW10[nd - 1])
        out[n] = 48 + m // cut
        n += 1
        if nd > 1:
            out[n] = 46
            n = _digits(out, n + 1, m % cut, nd - 1)
        out[n] = 101
        out[n + 1] = 45 if e < 0 else 43
        n += 2
        a = -e if e < 0 else e
        n = _digits(out, n, a, 3 if a >= 100 else 2)
    return n - at


_SPAN = 65536  # scores a parallel task measures


@njit(parallel=True, cache=True)
def score_lengths(scores):
    """(n,) int64: the length of each score's ``%.10g`` text, -1 where the caller must print it."""
    n = scores.shape[0]
    lens = np.empty(n, dtype=np.int64)
    for c in prange((n + _SPAN - 1) // _SPAN):
        scratch = np.empty(G10_WIDTH, dtype=np.uint8)
        for i in range(c * _SPAN, min(n, (c + 1) * _SPAN)):
            lens[i] = _g10(scores[i], scratch, 0)
    return lens


@njit(parallel=True, cache=True)
def key_flags(blob, offsets, docs, mode):
    """(n,) bool: hit i's key holds a byte that is not printable ASCII, or (JSONL) a quote or a
    backslash, or is empty or out of range -- the keys the caller checks or escapes itself."""
    n_keys = offsets.shape[0] - 1
    out = np.zeros(docs.shape[0], dtype=np.bool_)
    for i in prange(docs.shape[0]):
        d = docs[i]
        if d < 0 or d >= n_keys:
            out[i] = True
            continue
        a = offsets[d]
        b = offsets[d + 1]
        if a < 0 or b <= a or b > blob.shape[0]:
            out[i] = True
            continue
        for j in range(a, b):
            c = blob[j]
            if c <= 32 or c >= 127 or (mode == JSONL and (c == 34 or c == 92)):
                out[i] = True
                break
    return out


@njit(cache=True, inline="always")
def _n_digits(v):
    d = 1
    while v >= 10:
        v //= 10
        d += 1
    return d


@njit(cache=True, inline="always")
def _copy(out, n, src, a, b):
    for j in range(a, b):
        out[n] = src[j]
        n += 1
    return n


@njit(cache=True)
def query_sizes(mode, counts, qid_off, key_off, docs, items, key_src, ov_off, score_lens, fb_pos, fb_off, p_off):
    """(n_queries,) int64 bytes of each query's lines. Arguments as for ``write_queries``."""
    # every fixed piece, less JSONL's '"passage": ' and ', ' (written only for a passage)
    opt = p_off[6] - p_off[4] if mode == JSONL else 1  # TREC: the "#" before an item
    fixed = p_off[p_off.shape[0] - 1] - (opt if mode == JSONL else 0)
    sizes = np.zeros(counts.shape[0], dtype=np.int64)
    h = 0
    for q in range(counts.shape[0]):
        qlen = qid_off[q + 1] - qid_off[q]
        total = 0
        for r in range(counts[q]):
            o = key_src[h]
            klen = ov_off[o + 1] - ov_off[o] if o >= 0 else key_off[docs[h] + 1] - key_off[docs[h]]
            s = score_lens[h]
            if s < 0:
                f = np.searchsorted(fb_pos, h)
                s = fb_off[f + 1] - fb_off[f]
            line = qlen + fixed + klen + _n_digits(r + 1) + s
            if items[h] >= 0:
                line += _n_digits(items[h]) + opt
            total += line
            h += 1
        sizes[q] = total
    return sizes


@njit(cache=True)
def write_queries(mode, q0, q1, h0, counts, qid_blob, qid_off, key_blob, key_off, docs, items, key_src, ov_blob,
                  ov_off, scores, score_lens, fb_pos, fb_blob, fb_off, p_blob, p_off, out):
    """Write the lines of queries q0..q1-1 (their first hit is h0) into ``out``; the bytes written.

    counts[q]: query q's hits, in rank order; docs[h]: the key's row in (key_blob, key_off); items[h] >= 0
    appends ``#item`` (TREC) or a ``"passage"`` field (JSONL); key_src[h] >= 0 takes the key from
    (ov_blob, ov_off) instead; a score with score_lens[h] < 0 is read from (fb_blob, fb_off) at its place
    in the sorted hit positions fb_pos. The fixed pieces are rows of (p_blob, p_off): TREC
    [" Q0 ", " ", " ", " <tag>\\n"]; JSONL ['{"qid": "', '", "rank": ', ', "citekey": "', '", ',
    '"passage": ', ', ', '"score": ', '}\\n'].
    """
    n = 0
    h = h0
    for q in range(q0, q1):
        qa = qid_off[q]
        qb = qid_off[q + 1]
        for r in range(counts[q]):
            o = key_src[h]
            d = docs[h]
            if mode == TREC:
                n = _copy(out, n, qid_blob, qa, qb)
                n = _copy(out, n, p_blob, p_off[0], p_off[1])
            else:
                n = _copy(out, n, p_blob, p_off[0], p_off[1])
                n = _copy(out, n, qid_blob, qa, qb)
                n = _copy(out, n, p_blob, p_off[1], p_off[2])
                n = _digits(out, n, r + 1, _n_digits(r + 1))
                n = _copy(out, n, p_blob, p_off[2], p_off[3])
            if o >= 0:
                n = _copy(out, n, ov_blob, ov_off[o], ov_off[o + 1])
            else:
                n = _copy(out, n, key_blob, key_off[d], key_off[d + 1])
            if mode == TREC:
                if items[h] >= 0:
                    out[n] = 35
                    n = _digits(out, n + 1, items[h], _n_digits(items[h]))
                n = _copy(out, n, p_blob, p_off[1], p_off[2])
                n = _digits(out, n, r + 1, _n_digits(r + 1))
                n = _copy(out, n, p_blob, p_off[2], p_off[3])
            else:
                n = _copy(out, n, p_blob, p_off[3], p_off[4])
                if items[h] >= 0:
                    n = _copy(out, n, p_blob, p_off[4], p_off[5])
                    n = _digits(out, n, items[h], _n_digits(items[h]))
                    n = _copy(out, n, p_blob, p_off[5], p_off[6])
                n = _copy(out, n, p_blob, p_off[6], p_off[7])
            if score_lens[h] >= 0:
                n += _g10(scores[h], out, n)
            else:
                f = np.searchsorted(fb_pos, h)
                n = _copy(out, n, fb_blob, fb_off[f], fb_off[f + 1])
            n = _copy(out, n, p_blob, p_off[p_off.shape[0] - 2], p_off[p_off.shape[0] - 1])
            h += 1
    return n


PIECES_PER_THREAD = 4  # pieces of a chunk of queries per thread, written in parallel


def piece_cuts(a: int, b: int) -> np.ndarray:
    """Queries a..b-1 cut into about PIECES_PER_THREAD pieces a thread: ascending, from a to b, no empty piece."""
    pieces = max(1, min(PIECES_PER_THREAD * numba.get_num_threads(), b - a))
    return np.unique(np.linspace(a, b, pieces + 1).astype(np.int64))


@njit(parallel=True, cache=True)
def write_pieces(mode, cuts, first_hit, ends, counts, qid_blob, qid_off, key_blob, key_off, docs, items, key_src,
                 ov_blob, ov_off, scores, score_lens, fb_pos, fb_blob, fb_off, p_blob, p_off, out):
    """``write_queries`` for queries cuts[0]..cuts[-1]-1, the pieces cuts[i]..cuts[i + 1]-1 in parallel, each
    at its place in ``out``: ends[q] is the running total of the query sizes through query q (so a piece
    starts at ends[a - 1] less the first's). Returns the bytes written, or -1 if a piece wrote other than
    its sizes said (the caller raises: the sizes and the writer disagree)."""
    q0 = cuts[0]
    base = ends[q0 - 1] if q0 > 0 else 0
    bad = 0
    for i in prange(cuts.shape[0] - 1):
        a = cuts[i]
        b = cuts[i + 1]
        at = (ends[a - 1] if a > 0 else 0) - base
        n = write_queries(mode, a, b, first_hit[a], counts, qid_blob, qid_off, key_blob, key_off, docs, items,
                          key_src, ov_blob, ov_off, scores, score_lens, fb_pos, fb_blob, fb_off, p_blob, p_off,
                          out[at:])
        bad += n != ends[b - 1] - base - at
    last = cuts[cuts.shape[0] - 1]
    return -1 if bad else ends[last - 1] - base
