"""A block of documents' runs to provisional ids, and the ids to counted triples.

The engine hands over the block's text as one byte buffer: each piece (a title, a body, an abstract)
lowercased, encoded to ASCII and translated so that every byte outside ``[a-z0-9]`` is a space
(``kernels.charset.SEPARATE``), the pieces joined by a space; the first piece is the seed runs (the
never-indexed runs, ``DROPPED_RUNS``), which take ids ``0 .. n_dropped - 1``. A run's id is the number of
distinct runs seen before its first occurrence -- what ``Accumulator``'s dictionary hands out.

``runs_to_ids``: the buffer split at its spaces by one ``bytes.split`` (the pieces' runs counted from
where runs start, each piece ending at a space) and every run given its id by a dictionary (the next id
to a run not seen before, as it is looked up), the dictionary being the table the caller keeps between
calls (a block is handed over in pieces of bounded size), with a pool of the distinct runs, each followed
by a space, and their offsets: the pool past the seeds *is* the block's vocabulary as the engine writes it.
``count_pieces``: the runs' units and kinds repeated from the pieces, each stream's (unit, id) pairs counted
from a stable sort of a 64-bit key (sorted by unit then id: the key arrives in unit order, which the
stable sort's merges keep cheap), and the positions' ids with a break after each title placed by
``np.insert``.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["new_table", "runs_to_ids", "count_pieces"]


class _Ids(dict):
    """run -> id, a run not seen before given the next id as it is first looked up (first-seen order, in
    the one pass of lookups: a dictionary's C lookups, a Python call per new run only)."""

    def __missing__(self, run: bytes) -> int:
        got = self[run] = len(self)
        return got


def new_table():
    """An empty table: (the run -> id dictionary, pool uint8, key offsets int64, keys 0, pool used 0)."""
    return _Ids(), np.empty(0, dtype=np.uint8), np.zeros(1, dtype=np.int64), 0, 0


def runs_to_ids(buf, seg_ends, slots, pool, koff, n_keys, used):
    """The ids of the runs of ``buf`` (uint8, runs separated by spaces) in order, and per piece (ending at
    ``seg_ends``, ascending) how many runs it holds. Returns (ids int32, runs per piece int64, the
    dictionary, pool, koff, n_keys, used)."""
    arr = np.asarray(buf, dtype=np.uint8)
    ends = np.asarray(seg_ends, dtype=np.int64)
    vocab = slots if type(slots) is _Ids else _Ids(slots)
    # (the buffer holds [a-z0-9] and spaces only: a split at spaces)
    if ends.shape[0] and int(ends[-1]) <= arr.shape[0] and bool((arr[ends[ends < arr.shape[0]]] == 32).all()):
        # every piece ends at a space (or the buffer's end): the whole buffer split at once has the pieces'
        # runs in order, and a piece's are the runs that start inside it
        live = arr[:int(ends[-1])] != 32
        starts = np.flatnonzero(live & np.concatenate(([True], ~live[:-1])))
        seg_n = np.bincount(np.searchsorted(ends, starts, side="right"), minlength=ends.shape[0]).astype(np.int64)
        runs = arr[:int(ends[-1])].tobytes().split()
    else:
        data = arr.tobytes()
        seg_n = np.zeros(ends.shape[0], dtype=np.int64)
        runs = []
        a = 0
        for s, e in enumerate(ends.tolist()):
            got = data[a:e].split()
            seg_n[s] = len(got)
            runs.extend(got)
            a = e
    n_old = len(vocab)
    ids = np.fromiter(map(vocab.__getitem__, runs), dtype=np.int32, count=len(runs))  # (new runs: next ids)
    n_keys = len(vocab)
    if n_keys != n_old or koff.shape[0] != n_keys + 1 or int(koff[-1]) != used:
        # the pool and the offsets of the runs this call added, after those of the earlier calls
        old = koff.shape[0] == n_old + 1 and int(koff[-1]) == used
        base = n_old if old else 0
        new = list(itertools.islice(vocab, base, None))
        add = np.frombuffer(b"".join(k + b" " for k in new), dtype=np.uint8)
        start = used if old else 0
        pool = np.concatenate((np.asarray(pool[:start], dtype=np.uint8), add))
        koff = np.concatenate((np.asarray(koff[:base + 1], dtype=np.int64),
                               start + np.cumsum(np.fromiter(map(len, new), dtype=np.int64, count=len(new)) + 1)))
        used = start + add.shape[0]
    return ids, seg_n, vocab, pool, koff, n_keys, int(used)


def _counted(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_counts=True)``, by a stable sort (the keys come in unit order: cheap)."""
    if not key.shape[0]:
        return key, np.zeros(0, dtype=np.int64)
    ks = key[np.argsort(key, kind="stable")]
    first = np.empty(ks.shape[0], dtype=bool)
    first[0] = True
    np.not_equal(ks[1:], ks[:-1], out=first[1:])
    at = np.flatnonzero(first)
    return ks[at], np.diff(np.append(at, ks.shape[0]))


def count_pieces(ids, seg_n, seg_unit, seg_kind, n_keys, keep_from, positions, seq_break):
    """Counted triples and the positions of a run of pieces, in unit order (a unit's pieces adjacent).

    ``seg_kind`` per piece: 0 a title (the main stream, the title stream and the positions, then a
    ``seq_break``), 1 a body piece (the main stream and the positions), 2 an abstract (its stream
    alone), -1 skipped (the seeds). Per stream: (unit, id, count) sorted by unit then id, ids below
    ``keep_from`` left out, counts capped at 2**31 - 1. Returns the three streams' arrays (main, title,
    abstract), the positions' ids (int32) and, per unit that has pieces, its unit and where its ids start."""
    seg_n = np.asarray(seg_n, dtype=np.int64)
    seg_unit = np.asarray(seg_unit, dtype=np.int64)
    seg_kind = np.asarray(seg_kind, dtype=np.int8)
    live = seg_kind >= 0
    unit = np.repeat(seg_unit, seg_n)
    kind = np.repeat(seg_kind, seg_n)
    ids = np.asarray(ids, dtype=np.int64)
    out = []
    keep = ids >= keep_from
    for take in ((kind == 0) | (kind == 1), kind == 0, kind == 2):
        m = take & keep
        key, cnt = _counted((unit[m] << 32) | ids[m])
        out += [(key >> 32).astype(np.int32), (key & 0xFFFFFFFF).astype(np.int32),
                np.minimum(cnt, 2**31 - 1).astype(np.int32)]
    if positions:
        in_seq = (kind == 0) | (kind == 1)
        seq = ids[in_seq].astype(np.int32)
        title = (seg_kind == 0)
        kept_before = np.concatenate(([0], np.cumsum(seg_n * ((seg_kind == 0) | (seg_kind == 1)))))
        seq = np.insert(seq, kept_before[1:][title], seq_break).astype(np.int32)
        # per piece, the ids it puts into seq (a title: its runs and a break)
        per_piece = np.where((seg_kind == 0) | (seg_kind == 1), seg_n, 0) + title
        piece_start = np.concatenate(([0], np.cumsum(per_piece)))[:-1]
        first = np.flatnonzero(live & np.concatenate(([True], seg_unit[1:] != seg_unit[:-1])))
        seq_units = seg_unit[first].astype(np.int64)
        seq_starts = piece_start[first].astype(np.int64)
    else:
        seq = np.zeros(0, dtype=np.int32)
        first = np.flatnonzero(live & np.concatenate(([True], seg_unit[1:] != seg_unit[:-1])))
        seq_units = seg_unit[first].astype(np.int64)
        seq_starts = np.zeros(first.shape[0], dtype=np.int64)
    return (*out, seq, seq_units, seq_starts)
