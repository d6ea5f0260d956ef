"""kernels.lookup_table: the numpy-built vocabulary lookup table is the numba kernel's, slot for slot."""

import numpy as np
import pytest
from chitragupta.engine.index.strings import StringTable
from chitragupta.kernels import lookup, lookup_table


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 5000])
def test_the_numpy_table_is_the_kernels(n):
    rng = np.random.default_rng(n)
    words = sorted({"".join(rng.choice(list("abcdefgxyz0189é"), size=int(rng.integers(1, 14)))) for _ in range(n)})
    st = StringTable.from_sorted(words)
    want = lookup.build_table(st.blob, st.offsets)
    got = lookup_table.build_table_numpy(st.blob, st.offsets)
    assert got.dtype == want.dtype == np.int32 and np.array_equal(got, want)


def test_the_table_finds_every_word():
    words = sorted(f"w{i}" for i in range(300))
    st = StringTable.from_sorted(words)
    slots = lookup_table.build_table_numpy(st.blob, st.offsets)
    assert sorted(slots[slots >= 0].tolist()) == list(range(300))
