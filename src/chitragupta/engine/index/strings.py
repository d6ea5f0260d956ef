"""A sorted table of strings stored as two arrays: UTF-8 bytes and offsets (no pickle, memory-mappable).

Used for the vocabulary (term id = position) and the citekeys (document id = position). Lookups are a
binary search over the mapped bytes, so opening a million-entry table costs nothing until it is used;
``mapping()`` builds a dict once for large batches.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

__all__ = ["StringTable"]


class StringTable:
    """Strings sorted in Python's order (code points), addressable by position and searchable."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray):
        # plain ndarray views of memory-mapped arrays: the same pages, without np.memmap's cost on
        # every slice (a binary search slices a few dozen times a lookup)
        self.blob = blob.view(np.ndarray) if isinstance(blob, np.memmap) else blob  # (total_bytes,) uint8
        self.offsets = offsets.view(np.ndarray) if isinstance(offsets, np.memmap) else offsets  # (n + 1,) int64
        self._dict: dict[str, int] | None = None
        self._lookups = 0  # strings looked up so far (find_many switches to a dict when they add up)
        self._list: list[str] | None = None
        self._array: np.ndarray | None = None  # object array of the strings, for many lookups at once

    @classmethod
    def from_sorted(cls, strings: Sequence[str]) -> "StringTable":
        """A table of ``strings``, which must be sorted for ``find`` (positions work either way)."""
        return cls.from_strings(strings)

    @classmethod
    def from_strings(cls, strings: Sequence[str]) -> "StringTable":
        """A table of ``strings`` in the order given: addressable by position (``find`` needs them sorted)."""
        offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        whole = "".join(strings)
        if whole.isascii():  # (a character a byte: encoded in one call, each length its string's)
            np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)), out=offsets[1:])
            blob = np.frombuffer(whole.encode("ascii"), dtype=np.uint8).copy()
        else:
            encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
            if encoded:
                np.cumsum([len(e) for e in encoded], out=offsets[1:])
            blob = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()
        table = cls(blob, offsets)
        table._list = list(strings)
        return table

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def __getitem__(self, i: int) -> str:
        if self._list is not None:
            return self._list[i]
        if i < 0:
            i += len(self)
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return bytes(self.blob[lo:hi]).decode("utf-8", "surrogatepass")

    def to_list(self) -> list[str]:
        if self._list is None:
            data = bytes(self.blob)
            off = self.offsets.tolist()
            self._list = [data[off[i]:off[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(self))]
        return self._list

    def strings_at(self, rows) -> np.ndarray:
        """The strings at many positions: an object array shaped like ``rows``. Decodes each distinct
        position once, and only those, so a batch's hits in a million-entry table do not decode the
        whole table; when the rows are many next to the table, the whole table is decoded once and kept."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return np.empty(rows.shape, dtype=object)
        if self._array is None and (self._list is not None or rows.size * 4 >= len(self)):
            whole = np.empty(len(self), dtype=object)
            whole[:] = self.to_list()
            self._array = whole  # set once filled: another thread may read it at once
        if self._array is not None:
            return self._array[rows]
        uniq, inverse = np.unique(rows, return_inverse=True)
        starts = np.asarray(self.offsets[uniq], dtype=np.int64)
        lengths = np.asarray(self.offsets[uniq + 1], dtype=np.int64) - starts
        ends = np.cumsum(lengths)
        # one gather of every needed byte, then a slice per string
        gather = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]))
        data = np.asarray(self.blob)[gather].tobytes()
        cuts = np.concatenate(([0], ends)).tolist()
        decoded = np.empty(uniq.size, dtype=object)
        decoded[:] = [data[cuts[i]:cuts[i + 1]].decode("utf-8", "surrogatepass") for i in range(uniq.size)]
        return decoded[inverse.reshape(rows.shape)]

    def mapping(self) -> dict[str, int]:
        """string -> position, built once."""
        if self._dict is None:
            self._dict = {s: i for i, s in enumerate(self.to_list())}
        return self._dict

    def find(self, s: str) -> int:
        """Position of ``s``, or -1."""
        if self._dict is not None:
            return self._dict.get(s, -1)
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            v = self[mid]
            if v < s:
                lo = mid + 1
            elif v > s:
                hi = mid
            else:
                return mid
        return -1

    def find_many(self, strings: Iterable[str]) -> list[int]:
        """Positions of many strings (-1 where absent). A binary search each, until the lookups add up
        to a dict's worth (a large batch at once, or a long-lived caller's many small ones: a dict costs
        about as much to build as len/32 binary searches)."""
        strings = list(strings)
        self._lookups += len(strings)
        if self._dict is None and ((len(strings) > 64 and len(strings) * 24 > len(self) // 8)
                                   or self._lookups * 32 > len(self)):
            self.mapping()
        if self._dict is not None:
            get = self._dict.get
            return [get(s, -1) for s in strings]
        return [self.find(s) for s in strings]
