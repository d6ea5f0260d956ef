"""The index build's shortcuts against the plain forms they replace: the scan's packed rows (their
reference parsed inline, their fingerprint text formatted once per pack), ``tokenize_fast.packed_texts``'s
inline reference parsing, the string tables' ASCII encoding in one call and the vocabulary's ranks
without a stemmer decoded in one call."""

from __future__ import annotations

import hashlib
import os
import random

import numpy as np
import pytest
from chitragupta.engine.index import tokenize_fast
from chitragupta.engine.index.csr import _PRESTEMMED, Accumulator
from chitragupta.engine.index.source import (
    FLAG_NO_SIDECAR,
    FLAG_TEXT_MISSING,
    DocSource,
    fingerprints,
)
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.library.texts import PACKS_DIR, split_ref

PACK = "000001-0123abcd.pack"
ODD_TITLES = ["", "plain", "it's \"quoted\"", "100% %s %r %d", "ünï cödé", "lone \ud800 surrogate", "line\nbreak",
              "back\\slash", "(%r, %r)"]


def _pack(tmp_path, data: bytes) -> str:
    folder = tmp_path / PACKS_DIR
    folder.mkdir(parents=True)
    (folder / PACK).write_bytes(data)
    return f"{PACKS_DIR}/{PACK}"


def _plain_digest(title, rel, status, st, side) -> bytes:
    return hashlib.blake2b(repr((title, rel, status, st, side)).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def test_packed_rows_fingerprints_are_the_repr_of_their_fields(tmp_path, monkeypatch):
    head = _pack(tmp_path, b"x" * 1000)
    ino = os.stat(tmp_path / head).st_ino
    rng = random.Random(7)
    rows, want, want_flags, want_files = [], [], [], []
    bad_tails = ["12", "1+", "+3", "1+2+3", "\u0661+2", "1+\u0662", "a+1", "1 +2", ""]
    for i in range(300):
        title = rng.choice(ODD_TITLES) + str(i)
        kind = rng.randrange(4)
        if kind == 0:  # a good reference inside the pack
            off = rng.randrange(900)
            rel = f"{head}#{off}+{rng.randrange(100)}"
            st = ("pack", ino)
        elif kind == 1:  # past the pack's end: missing text
            rel = f"{head}#990+{rng.randrange(11, 50)}"
            st = None
        elif kind == 2:  # not a reference: a path under packs/ that does not exist
            rel = f"{head}#{rng.choice(bad_tails)}"
            st = None
        else:  # a pack that is not there (a name a pack could have)
            rel = f"{PACKS_DIR}/000002-ffffffff.pack#0+1"
            st = None
        rows.append((f"k{i:04d}", title, "parsed", rel))
        want.append(_plain_digest(title, rel, "parsed", st, None))
        want_flags.append(FLAG_NO_SIDECAR if st else FLAG_TEXT_MISSING)
        want_files.append(str(tmp_path) + os.sep + rel if st else None)
    fps, flags, sources = fingerprints(tmp_path, rows)
    assert fps.tobytes() == b"".join(want)
    assert flags.tolist() == want_flags
    assert [s.text_file for s in sources] == want_files
    assert [s.title for s in sources] == [r[1] for r in rows]
    # a packed row's reference as the scan parsed it, the pack's path as its text_file gives it
    assert [s.ref for s in sources] == [(f, *split_ref(f)) if f else None for f in want_files]
    assert all(type(s) is DocSource for s in sources)
    # past TELL_REF_ROWS rows the references are not handed on (memory at 1M); nothing else changes
    from chitragupta.engine.index import source

    monkeypatch.setattr(source, "TELL_REF_ROWS", len(rows) - 1)
    fps2, flags2, sources2 = fingerprints(tmp_path, rows)
    assert fps2.tobytes() == fps.tobytes() and flags2.tolist() == want_flags
    assert [s.text_file for s in sources2] == want_files and all(s.ref is None for s in sources2)


def test_packed_texts_reads_what_split_ref_names(tmp_path):
    rng = random.Random(3)
    data = "".join(rng.choice("abc é\n") for _ in range(3000)).encode("utf-8")
    head = _pack(tmp_path, data)
    base = str(tmp_path) + os.sep
    sources, want = [], {}
    for k in range(200):
        off = rng.randrange(len(data) - 40)
        length = rng.randrange(40)
        r = rng.randrange(5)
        if r == 0:
            path = base + f"{head}#{off}+\u0661"  # a digit that is not ASCII: not a reference
        elif r == 1:
            path = base + f"{PACKS_DIR}/not-a-pack.pack#{off}+{length}"  # no pack's name
        else:
            path = base + f"{head}#{off}+{length}"
        flags = FLAG_NO_SIDECAR if r != 4 else 0  # (a row with a sidecar is never read here)
        sources.append(DocSource(f"k{k}", "t", path, flags))
        ref = split_ref(path)
        if ref is not None and flags:
            want[k] = data[ref[1]:ref[1] + ref[2]].decode("utf-8", "replace")
    got = tokenize_fast.packed_texts(sources)
    assert got == want
    assert want  # (the case is not empty)
    # the same with the references the scan would hand over (parsed once there)
    told = [s._replace(ref=(s.text_file, *split_ref(s.text_file))) if split_ref(s.text_file) else s for s in sources]
    assert any(s.ref for s in told) and tokenize_fast.packed_texts(told) == want
    # a reference told for another text_file (one replaced since the scan) is not taken
    moved = [s._replace(text_file=told[(k + 1) % len(told)].text_file) for k, s in enumerate(told)]
    want_moved = {k: data[r[1]:r[1] + r[2]].decode("utf-8", "replace") for k, s in enumerate(moved)
                  if s.flags and (r := split_ref(s.text_file)) is not None}
    assert tokenize_fast.packed_texts(moved) == want_moved


def test_string_tables_encode_the_same_bytes_ascii_or_not():
    rng = random.Random(11)
    alphabet = "abz09 -é\ud800"
    cases = [[], [""], ["", ""], ["a"], ("t", "u"), ["x\ud800y", "é"]]
    for _ in range(50):
        cases.append(["".join(rng.choice(alphabet[:rng.choice((5, 9))]) for _ in range(rng.randrange(6)))
                      for _ in range(rng.randrange(20))])
    for strings in cases:
        t = StringTable.from_strings(strings)
        enc = [s.encode("utf-8", "surrogatepass") for s in strings]
        assert t.blob.dtype == np.uint8 and t.offsets.dtype == np.int64
        assert t.blob.tobytes() == b"".join(enc)
        assert t.offsets.tolist() == [0] + np.cumsum([len(e) for e in enc], dtype=np.int64).tolist()
        assert t.to_list() == list(strings)


def _plain_ranks(acc: Accumulator):
    keys = list(acc.vocab)[acc.n_dropped:]
    terms = [k[1:].decode("ascii") if k.startswith(_PRESTEMMED) else
             (acc.stem(k.decode("ascii")) if acc.stem else k.decode("ascii")) for k in keys]
    vocab = sorted(set(terms))
    return vocab, [-1] * acc.n_dropped + [vocab.index(t) for t in terms]


def test_ranks_without_a_stemmer_are_the_plain_loops():
    rng = random.Random(5)
    for trial in range(30):
        stem = (lambda t: t[:3]) if trial % 3 == 0 else None
        acc = Accumulator(fields=(), stem=stem)
        for u in range(rng.randrange(6)):
            runs = [("".join(rng.choice("abc019") for _ in range(rng.randrange(1, 5)))).encode() for _ in range(20)]
            acc.add_runs(u, runs)
        if trial % 5 == 1:
            acc.vocab[_PRESTEMMED + b"abc"]  # an already indexed term (an update's reused documents)
        vocab, rank = acc.ranks()
        want_vocab, want_rank = _plain_ranks(acc)
        assert vocab == want_vocab
        assert rank.dtype == np.int64 and rank.tolist() == want_rank


def _packed_sources(tmp_path, docs):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace

    from helpers import make_workspace

    ws = Workspace.open(make_workspace(tmp_path, docs, packed=True))
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.index_view()
    return fingerprints(ws.root, rows)[2]


@pytest.mark.parametrize("positions", [True, False])
def test_a_block_of_packed_texts_taken_as_read_is_the_per_run_block(tmp_path, positions):
    """Every text packed and as read: the block's pieces are assembled without the loop, the same Block
    as the per-run path; random Unicode texts and titles, empty ones among them."""
    from chitragupta.engine.index import segments

    from helpers import assert_same_block

    rng = random.Random(17 + positions)
    alphabet = "abcxyz019 \n\t_.,İıKßǅﬁ日😀\u0130\u212a\u00e9E"  # (no hyphen, no capital a heading starts with)
    docs = [{"_id": f"r{i:03d}", "title": "".join(rng.choice(alphabet) for _ in range(rng.choice((0, 5, 30)))),
             "text": "".join(rng.choice(alphabet) for _ in range(rng.choice((0, 1, 50, 2000))))} for i in range(80)]
    sources = _packed_sources(tmp_path, docs)
    packed = tokenize_fast.packed_texts(sources)
    assert len(tokenize_fast.as_read(packed)) == len(sources)  # (the case the assembly takes)
    units = np.arange(len(sources), dtype=np.int64) * 3 + 1
    for k in (len(sources), 1, 0):
        assert_same_block(segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions, fast=False),
                          segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions))


@pytest.mark.parametrize("brk", [-1, -100, 3, 7])
def test_the_numpy_id_maps_with_and_without_breaks_are_the_plain_ones(brk):
    """``kernels.build``'s map_ids / map_count / remap / count_ids (one gather where nothing is a
    break; the breaks put back after it, or left out of it when ``brk`` is not an index of the table)
    against the masked forms."""
    from chitragupta.kernels import build as kb

    rng = np.random.default_rng(abs(brk))
    n_terms = 12
    table = rng.integers(-2, n_terms + 3, 10).astype(np.int64)
    for n, with_breaks in ((0, False), (1, True), (500, False), (500, True)):
        ids = rng.integers(0, 10, n).astype(np.int32)
        if with_breaks and n:
            ids[rng.random(n) < 0.2] = brk
        if not with_breaks:
            ids[ids == brk] = 0 if brk != 0 else 1
        keep = ids != brk
        want = ids.copy()
        want[keep] = table[ids[keep]]
        got = kb.map_ids(ids, table, brk)
        assert got.dtype == np.int32 and np.array_equal(got, want)
        per_term = np.zeros(n_terms, dtype=np.int64)
        assert np.array_equal(kb.map_count(ids, table, brk, per_term), want)
        mapped = want[keep]
        assert np.array_equal(per_term, np.bincount(mapped[(mapped >= 0) & (mapped < n_terms)], minlength=n_terms))
        inplace = ids.copy()
        kb.remap(inplace, table, brk)
        assert np.array_equal(inplace, want)
        again = np.zeros(n_terms, dtype=np.int64)
        inside = np.clip(want, 0, n_terms - 1)  # (all in range: the one-bincount case)
        kb.count_ids(inside, again)
        assert np.array_equal(again, np.bincount(inside, minlength=n_terms))


def test_blocks_carrying_the_table_of_runs_merge_to_the_same_arrays(tmp_path):
    """A small build's blocks go on from the last block's table of runs (``carry``): every array the
    build finishes is the same as with a fresh table a block."""
    from chitragupta.engine.index import segments
    from chitragupta.engine.index.csr import Sequences

    rng = random.Random(23)
    alphabet = "abcxyz019 \n\t-_.,İıKßﬁ日E"
    docs = [{"_id": f"c{i:03d}", "title": "".join(rng.choice(alphabet) for _ in range(rng.choice((0, 9)))),
             "text": "".join(rng.choice(alphabet) for _ in range(rng.choice((0, 40, 900))))} for i in range(60)]
    sources = _packed_sources(tmp_path, docs)
    n = len(sources)
    units = np.arange(n, dtype=np.int64)
    got = []
    for carry in (None, {}):
        acc = Accumulator(fields=tokenize_fast.FIELDS, stem=None, sequences=Sequences())
        keys = []
        for a in range(0, n, 7):
            blk = segments.tokenize_block(units[a:a + 7], sources[a:a + 7], tokenize_fast.FIELDS, True, carry=carry)
            keys.append(blk.keys)
            segments.merge_block(acc, blk)
        vocab, arrays = acc.finish(n)
        arrays = dict(arrays, **acc.sequences.finish(acc.rank, len(vocab), acc.n_dropped, n))
        got.append((vocab, arrays, keys))
    (v0, a0, k0), (v1, a1, k1) = got
    assert v0 == v1 and a0.keys() == a1.keys()
    for name in a0:
        assert a0[name].dtype == a1[name].dtype and np.array_equal(a0[name], a1[name]), name
    assert all(k1[j + 1].startswith(k1[j]) for j in range(len(k1) - 1))  # (carried: each block's keys go on)
    assert len(k1[-1]) > max(map(len, k0))


def test_small_text_counts_the_lengths_the_scan_parsed(tmp_path):
    from chitragupta.engine.index import segments

    rng = random.Random(37)
    docs = [{"_id": f"m{i:03d}", "title": "t" * rng.randrange(9), "text": "é" * rng.randrange(1, 300)} for i in range(40)]
    sources = _packed_sources(tmp_path, docs)
    assert all(s.ref for s in sources)
    todo = np.arange(len(sources))
    total = sum(len(s.title) + split_ref(s.text_file)[2] for s in sources)
    assert segments.small_text(sources, todo, total + 1) and not segments.small_text(sources, todo, total)
    # a reference told for another text_file is not counted: the text_file's own length is
    shifted = [s._replace(text_file=sources[(k + 1) % len(sources)].text_file) for k, s in enumerate(sources)]
    assert segments.small_text(shifted, todo, total + 1) and not segments.small_text(shifted, todo, total)
    longer = [sources[0]._replace(text_file=sources[0].text_file[:-1] + "99999")]
    want = len(longer[0].title) + int(longer[0].text_file.rpartition("+")[2])
    assert segments.small_text(longer, todo[:1], want + 1) and not segments.small_text(longer, todo[:1], want)
