"""The vocabulary lookup table's hash and size, shared by its numba kernel (``kernels.lookup``) and its numpy
form (``kernels.lookup_table``), which must place every string in the same slot."""

from __future__ import annotations

import numpy as np

__all__ = ["FNV_OFFSET", "FNV_PRIME", "table_size"]

FNV_OFFSET = np.uint64(14695981039346656037)  # FNV-1a, 64-bit
FNV_PRIME = np.uint64(1099511628211)


def table_size(n: int) -> int:
    """Slots of the lookup table of n strings: the least power of two >= 2n (at least 2), so at most half full."""
    if n >= 2**31 - 1:
        raise ValueError(f"{n} strings do not fit an int32 lookup table")
    size = 2
    while size < 2 * max(n, 1):
        size <<= 1
    return size
