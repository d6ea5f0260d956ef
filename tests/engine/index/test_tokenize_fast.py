"""The block tokenizer in numba (``engine.index.tokenize_fast``) against the per-run path it replaces
(``segments.tokenize_block(..., fast=False)``): the same Block, and the same index arrays to the byte."""

import functools
import os
import random

import numpy as np
import pytest
from chitragupta.engine.index import csr, segments, tokenize_fast
from chitragupta.engine.index.manage import refresh
from chitragupta.engine.library.workspace import Workspace

from helpers import (
    assert_same_block,
    assert_same_bytes,
    doc_sources,
    make_workspace,
    npy_bytes,
    sidecar_workspace,
    token_docs,
)


@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("piece_bytes,long_text", [(1 << 23, 1 << 22), (200, 500), (1, 1)])
def test_the_fast_block_equals_the_per_run_block(tmp_path, monkeypatch, positions, piece_bytes, long_text):
    ws = sidecar_workspace(tmp_path)
    sources = doc_sources(ws)
    assert any(s.flags & 8 == 0 and s.text_file for s in sources)  # the sidecar is read as one
    monkeypatch.setattr(tokenize_fast, "_PIECE_BYTES", piece_bytes)  # the block handed over in many pieces
    monkeypatch.setattr(tokenize_fast, "_LONG", long_text)  # bodies cut where iter_runs_bytes would
    units = np.arange(len(sources), dtype=np.int64) * 2 + 5
    slow = segments.tokenize_block(units, sources, tokenize_fast.FIELDS, positions, fast=False)
    fast = segments.tokenize_block(units, sources, tokenize_fast.FIELDS, positions)
    assert_same_block(slow, fast)
    assert slow.notes and slow.cuts and slow.flags.any()  # the texts exercise the notes, the cut, the abstract
    # a block of no documents, and of one
    for k in (0, 1):
        assert_same_block(segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions, fast=False),
                          segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions))


def test_random_unicode_texts_give_the_per_run_ids(tmp_path):
    rng = random.Random(11)
    alphabet = "abcxyz019 -\n\t_.,İıKßǅﬁ日😀\u0130\u212a\u00e9E"
    docs = [{"_id": f"r{i}", "title": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))),
             "text": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3000)))} for i in range(60)]
    ws = Workspace.open(make_workspace(tmp_path, docs))
    sources = doc_sources(ws)
    units = np.arange(len(sources), dtype=np.int64)
    assert_same_block(segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True, fast=False),
                      segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True))


@pytest.mark.slow
@pytest.mark.parametrize("config", ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n"])
def test_the_index_is_the_same_to_the_byte(tmp_path, monkeypatch, config):
    ws = sidecar_workspace(tmp_path, n=90, seed=5)
    (ws.root / "config.toml").write_text(config)
    ws = Workspace.open(ws.root)
    monkeypatch.setattr(segments, "_MIN_BLOCK", 16)
    monkeypatch.setattr(segments, "_MAX_BLOCK", 16)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 0)  # (else a build this small takes the per-run path)
    refresh(ws, jobs=1, force=True, unit="document")
    fast = npy_bytes(ws)
    # the per-run path, its streams flushed every 50 runs (a document's pairs in two chunks, summed at the end)
    monkeypatch.setattr(csr, "_FLUSH_TOKENS", 50)
    monkeypatch.setattr(segments, "tokenize_block", functools.partial(segments.tokenize_block, fast=False))
    refresh(ws, jobs=1, force=True, unit="document")
    assert_same_bytes(npy_bytes(ws), fast)


def test_other_fields_are_refused():
    with pytest.raises(ValueError, match="fields"):
        tokenize_fast.block_parts(np.zeros(0, dtype=np.int64), [], ("title",), False)


def test_the_kernel_hands_out_first_seen_ids_as_a_dictionary_does():
    from chitragupta.kernels.runs import new_table, runs_to_ids

    rng = random.Random(2)
    runs = [bytes(rng.choice(b"abc019") for _ in range(rng.randint(1, 9))) for _ in range(40000)]
    pieces = [runs[a:a + 1000] for a in range(0, len(runs), 1000)] + [[]]
    want: dict[bytes, int] = {}
    state = new_table()
    for piece in pieces:  # the table kept between calls, grown in them (dictionary, pool, offsets)
        text = b"  " + b" ".join(piece) + b" "
        ids, seg_n, *state = runs_to_ids(np.frombuffer(text, dtype=np.uint8), np.array([len(text)], dtype=np.int64),
                                         *state)
        assert ids.tolist() == [want.setdefault(r, len(want)) for r in piece] and seg_n.tolist() == [len(piece)]
    _table, pool, koff, n_keys, used = state
    assert n_keys == len(want) and pool[:used].tobytes() == b"".join(r + b" " for r in want)


def test_packed_texts_read_in_stretches_give_the_per_document_block(tmp_path, monkeypatch):
    from chitragupta.engine.index.source import read_text
    from chitragupta.engine.library.texts import split_ref

    ws = Workspace.open(make_workspace(tmp_path, token_docs(4, 150), packed=True))
    sources = doc_sources(ws)
    packed = [k for k, s in enumerate(sources) if s.text_file and split_ref(s.text_file)]
    assert len(packed) > 100
    reads = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda *a: reads.append(a[1]) or real_pread(*a))
    got = tokenize_fast.packed_texts(sources)
    assert sorted(got) == packed and len(reads) == 1  # one pack, its rows one stretch: one read
    assert all(got[k] == read_text(sources[k].text_file) for k in packed)
    # what is read is what split_ref names, and nothing it refuses
    pack = split_ref(sources[packed[0]].text_file)[0]
    odd = [f"{pack}#1+2x", f"{pack}#+2", f"{pack}#1+", f"{pack}#\u0661+2", f"{pack}#1+2#3", f"{pack}x#1+2",
           pack[:-4] + "txt#1+2", "/tmp/plain.txt", f"{pack}#0007+3"]
    for path in odd:
        src = [sources[packed[0]]._replace(text_file=path)]
        assert (tokenize_fast.packed_texts(src) != {}) == (split_ref(path) is not None), path
    with open(pack, "rb") as f:
        assert tokenize_fast.packed_texts([sources[0]._replace(text_file=odd[-1])]) == {0: f.read()[7:10].decode("utf-8", "replace")}
    monkeypatch.setattr(os, "pread", real_pread)
    # whole, every other row (gaps read through), backwards (a stretch a row), stretches cut small
    picks = [list(range(len(sources))), list(range(0, len(sources), 2)), list(range(len(sources)))[::-1]]
    for cap in (1 << 26, 300):
        monkeypatch.setattr(tokenize_fast, "_STRETCH_BYTES", cap)
        for pick in picks:
            src = [sources[k] for k in pick]
            units = np.arange(len(pick), dtype=np.int64)  # (ascending, as a block's are)
            assert_same_block(segments.tokenize_block(units, src, tokenize_fast.FIELDS, True, fast=False),
                              segments.tokenize_block(units, src, tokenize_fast.FIELDS, True))
    # a pack cut short by hand: the rows past its end read as the per-document path reads them (empty)
    pack = split_ref(sources[packed[0]].text_file)[0]
    size = os.path.getsize(pack)
    with open(pack, "r+b") as f:
        f.truncate(size // 2)
    units = np.arange(len(sources), dtype=np.int64)
    monkeypatch.setattr(tokenize_fast, "_STRETCH_BYTES", 1 << 26)  # one stretch, past the end: none read here
    assert len(tokenize_fast.packed_texts(sources)) == 0
    monkeypatch.setattr(tokenize_fast, "_STRETCH_BYTES", 300)  # stretches before the cut are read whole
    assert 0 < len(tokenize_fast.packed_texts(sources)) < len(packed)
    for cap in (1 << 26, 300):
        monkeypatch.setattr(tokenize_fast, "_STRETCH_BYTES", cap)
        assert_same_block(segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True, fast=False),
                          segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True))
