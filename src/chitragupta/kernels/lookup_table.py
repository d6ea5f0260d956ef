"""The vocabulary's lookup table (``kernels.lookup.build_table``) without numba for a small table.

The same table to the byte: each string's FNV-1a hash is computed for all strings at once in numpy (a
step per byte position, uint64 arithmetic wraps as the kernel's does), and the strings are placed in id
order with linear probing in a Python loop (a table at most half full: about 1.5 probes a string). Used
below ``kernels.dispatch.NUMBA_FROM["strings"]`` strings, so that a small index is built without numba's
start; else the numba kernel. ``tests/kernels/test_lookup_table.py`` holds the two equal.
"""

from __future__ import annotations

import numpy as np

from chitragupta.kernels.dispatch import compiled
from chitragupta.kernels.hashing import FNV_OFFSET, FNV_PRIME, table_size

__all__ = ["build_table", "build_table_numpy"]


def _hashes(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    lens = np.diff(np.asarray(offsets, dtype=np.int64))
    h = np.full(starts.shape[0], FNV_OFFSET, dtype=np.uint64)
    b = np.asarray(blob, dtype=np.uint8)
    for k in range(int(lens.max()) if lens.size else 0):
        on = np.flatnonzero(lens > k)
        h[on] = (h[on] ^ b[starts[on] + k].astype(np.uint64)) * FNV_PRIME
    return h


def build_table_numpy(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``kernels.lookup.build_table`` in numpy and Python: (2^m,) int32 slots, at most half full."""
    n = offsets.shape[0] - 1
    size = table_size(n)
    slots = [-1] * size
    mask = size - 1
    with np.errstate(over="ignore"):
        home = (_hashes(blob, offsets) & np.uint64(mask)).tolist() if n > 0 else []
    for t, pos in enumerate(home):
        while slots[pos] >= 0:
            pos = (pos + 1) & mask
        slots[pos] = t
    return np.array(slots, dtype=np.int32)


def build_table(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The lookup table of a sorted string table: ``build_table_numpy`` for a small one, else the numba
    kernel (the same slots)."""
    if not compiled("strings", int(offsets.shape[0]) - 1):
        return build_table_numpy(blob, offsets)
    from chitragupta.kernels.lookup import build_table as build_numba

    return build_numba(blob, offsets)
