"""The embed driver's memory (``enrich/embed.py``, issue 34): the vectors of a run are not held in one array;
past ``HOLD_CHUNKS`` held chunks the finished documents go to a segment as they arrive, and the store assembled
from the segments is the one a run holding everything gives, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import (  # noqa: F401 (a fixture)  # noqa: F401 (a fixture)
    TOTAL,
    block_stream,
    cli_main,
    corpus_records,
    first_store,
    import_records,
)

pytestmark = pytest.mark.enrich


def _run(tmp_path, name, encoder, stream_of, monkeypatch, hold):
    import chitragupta.enrich.embed as embed
    import chitragupta.enrich.store as store_module

    monkeypatch.setattr(embed, "HOLD_CHUNKS", hold)
    monkeypatch.setattr(embed, "COMMIT_EVERY_SECONDS", 1e9)  # nor its clock, on a loaded machine
    monkeypatch.setenv("CHITRAGUPTA_EMBED_COMMIT_CHUNKS", "1000000")  # the cadence alone would never commit
    runs, written = [], []
    real_fresh, real_write = embed.encode_fresh, store_module.write_segment
    monkeypatch.setattr(embed, "encode_fresh", lambda *a, **k: runs.append(real_fresh(*a, **k)) or runs[-1])
    monkeypatch.setattr(store_module, "write_segment",
                        lambda *a, **k: written.append(len(k["vectors"])) or real_write(*a, **k))
    root = import_records(tmp_path / name, corpus_records())
    stream_of(block_stream(encoder, 3))
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    return first_store(root)[0], runs[0], written


@pytest.mark.slow
def test_the_driver_holds_a_bounded_number_of_chunks_and_the_store_is_the_one_array_store(
        tmp_path, encoder, stream_of, monkeypatch):
    whole, enc, written = _run(tmp_path, "whole", encoder, stream_of, monkeypatch, hold=10**9)
    assert written == [] and enc.peak_held == TOTAL  # everything held until the end: the one array
    bounded, enc, written = _run(tmp_path, "bounded", encoder, stream_of, monkeypatch, hold=4)
    # blocks of 3 (chunk ends 3, 6, ..., 17), documents ending at chunks 3, 5, 6, 9, 12, 14, 17: 6 held after
    # block 2 -> llm's and mixed's committed with bridge (6 chunks); 6 again after block 4 (6 more); the
    # last 5 come with the last block and are assembled from memory
    assert written == [6, 6] and enc.held == 5 and enc.peak_held == 6
    assert bounded.citekeys == whole.citekeys and bounded.count == whole.count == TOTAL
    for name in ("vectors", "chunk_doc", "chunk_no", "char_start", "char_end"):
        assert np.array_equal(getattr(bounded, name), getattr(whole, name)), name
    assert bounded.index.ntotal == TOTAL


def test_released_chunks_are_gone_and_taking_them_is_an_error():
    from chitragupta.enrich.embed import Doc, Encoding

    fresh = [Doc(f"d{i}", "", "x" * 10, "h", [(0, 1)] * n) for i, n in enumerate((2, 3, 1))]
    enc = Encoding(fresh, 2)
    for lo in (0, 4):
        enc.add(np.arange(lo * 2, (lo + 4) * 2, dtype=np.float32).reshape(4, 2)[: 6 - lo])
    assert enc.done == 6 and enc.complete == 3 and enc.held == 6
    assert np.array_equal(enc.take(1, 5), np.arange(2, 10, dtype=np.float32).reshape(4, 2))
    enc.release(3)  # cuts the first block
    assert enc.held == 3 and np.array_equal(enc.take(3, 6), np.arange(6, 12, dtype=np.float32).reshape(3, 2))
    with pytest.raises(ValueError, match="not held"):
        enc.take(2, 4)
