"""The block tokenizer in numba (``engine.index.tokenize_fast``) against the per-run path it replaces
(``segments.tokenize_block(..., fast=False)``): the same Block, and the same index arrays to the byte."""

import functools
import json
import os
import random

import numpy as np
import pytest

from chitragupta.engine.corpus.ledger import Ledger
from chitragupta.engine.index import csr, segments, tokenize_fast
from chitragupta.engine.index.manage import refresh
from chitragupta.engine.index.source import fingerprints
from chitragupta.engine.workspace import Workspace
from conftest import make_workspace
from test_index_jobs import assert_same_bytes, npy_bytes

WORDS = ["twin", "model", "the", "of", "a", "x", "9", "b2b", "summaries", "sum", "data", "base", "email", "ocean",
         "heat", "soil", "and", "is", "co2", "ai_model", "naïve", "Straße", "İstanbul", "\u212aelvin", "ǅemal",
         "ﬁnal", "日本語", "😀", "MiXeD", "UPPER", "x86-64", "e-", "-mail", "state-of-the-", "art", "non-", "linear"]
SEPS = [" ", " ", " ", "\n", "-\n", "-", ", ", ". ", "\t", "\f", "  ", "/", "_", "\u00a0", "\u2028"]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(SEPS) for _ in range(n))


def _docs(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        kind = i % 7
        title = "" if kind == 0 else _text(rng, rng.randint(1, 8))
        text = {1: "", 2: "the of a and is", 3: "x y z 1 2"}.get(kind, _text(rng, rng.randint(0, 300)))
        if kind == 4:  # a reference list the plain-text cut blanks, an appendix after it
            text += ("\n\nReferences\n" + "".join(f"[{j}] A. Author. Title {j}. Journal, 19{50 + j}.\n" for j in range(30))
                     + "\nAppendix A: Proofs\n" + _text(rng, 80))
        if kind == 5:
            text = "sum-\nmaries here; summaries there. e-\nmail and email, data-\nbase beside data and base " + text
        docs.append({"_id": f"d{i:03d}", "title": title, "text": text})
    return docs


def _workspace(tmp_path, n: int = 120, seed: int = 3) -> Workspace:
    root = make_workspace(tmp_path, _docs(seed, n))
    ws = Workspace.open(root)
    parsed = sorted(ws.parsed_dir.glob("*.txt"))
    # sidecars: one with an Abstract heading and a reference list, one that is not the documented shape
    items = [{"text": "A Title", "label": "title", "page": 1}, {"text": "Abstract", "label": "section_header", "page": 1},
             {"text": "naïve sum-\nmaries of İstanbul twins", "label": "text", "page": 1},
             {"text": "1 Introduction", "label": "section_header", "page": 1},
             {"text": "summaries of ocean heat, e-mail", "label": "text", "page": 2},
             {"text": "References", "label": "section_header", "page": 3},
             {"text": "[1] B. Author. Soil. 1999.", "label": "list_item", "page": 3}]
    parsed[8].with_suffix(".passages.json").write_text(json.dumps(items))
    parsed[9].with_suffix(".passages.json").write_text(json.dumps({"not": "a list"}))
    parsed[10].unlink()  # the ledger says parsed; the text is gone
    parsed[11].write_text("")  # an empty body
    return ws


def _sources(ws: Workspace):
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.index_view()
    return fingerprints(ws.root, rows)[2]


def assert_same_block(a: segments.Block, b: segments.Block) -> None:
    assert a.keys == b.keys
    assert np.array_equal(a.units, b.units) and a.units.dtype == b.units.dtype
    assert np.array_equal(a.flags, b.flags) and a.notes == b.notes and a.cuts == b.cuts
    assert a.streams.keys() == b.streams.keys()
    for name in a.streams:
        for x, y in zip(a.streams[name], b.streams[name]):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    for f in ("seq", "seq_units", "seq_starts"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), f


@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("piece_bytes,long_text", [(1 << 23, 1 << 22), (200, 500), (1, 1)])
def test_the_fast_block_equals_the_per_run_block(tmp_path, monkeypatch, positions, piece_bytes, long_text):
    ws = _workspace(tmp_path)
    sources = _sources(ws)
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
    sources = _sources(ws)
    units = np.arange(len(sources), dtype=np.int64)
    assert_same_block(segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True, fast=False),
                      segments.tokenize_block(units, sources, tokenize_fast.FIELDS, True))


@pytest.mark.parametrize("config", ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n"])
def test_the_index_is_the_same_to_the_byte(tmp_path, monkeypatch, config):
    ws = _workspace(tmp_path, n=90, seed=5)
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


@pytest.mark.parametrize("cap,pool_bytes", [(2, 1), (1 << 16, 1 << 20)])
def test_the_kernel_hands_out_first_seen_ids_as_a_dictionary_does(cap, pool_bytes):
    from chitragupta.kernels.runs import new_table, runs_to_ids

    rng = random.Random(2)
    runs = [bytes(rng.choice(b"abc019") for _ in range(rng.randint(1, 9))) for _ in range(40000)]
    pieces = [runs[a:a + 1000] for a in range(0, len(runs), 1000)] + [[]]
    want: dict[bytes, int] = {}
    state = new_table(cap, pool_bytes)
    for piece in pieces:  # the table kept between calls, grown in them (slots, pool, offsets)
        text = b"  " + b" ".join(piece) + b" "
        ids, seg_n, *state = runs_to_ids(np.frombuffer(text, dtype=np.uint8), np.array([len(text)], dtype=np.int64),
                                         *state)
        assert ids.tolist() == [want.setdefault(r, len(want)) for r in piece] and seg_n.tolist() == [len(piece)]
    slots, pool, koff, n_keys, used = state
    assert n_keys == len(want) and pool[:used].tobytes() == b"".join(r + b" " for r in want)
    assert (slots >= 0).sum() == n_keys and 2 * n_keys <= slots.shape[0]


def test_packed_texts_read_in_stretches_give_the_per_document_block(tmp_path, monkeypatch):
    from chitragupta.engine.corpus.texts import split_ref
    from chitragupta.engine.index.source import read_text

    ws = Workspace.open(make_workspace(tmp_path, _docs(4, 150), packed=True))
    sources = _sources(ws)
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
