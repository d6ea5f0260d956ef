"""Scale: the seeded synthetic corpus, the cheap up-to-date check, lazy ledger rows, the streaming build."""

import json
import os
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from bench import synth
from chitragupta.engine.index import csr, manage, store
from chitragupta.engine.index.manage import (
    LedgerRows,
    doc_folder,
    open_current,
    refresh,
)
from chitragupta.engine.index.source import FLAG_TEXT_MISSING
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import import_jsonl
from chitragupta.engine.library.workspace import Workspace, atomic_write_text
from chitragupta.engine.search.bm25 import Retriever

from helpers import (
    arrays_of,
    assert_identical,
    make_workspace,
    random_docs,
    run_cli,
    write_jsonl,
)


# -- the generator ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stats(tmp_path_factory):
    coll = tmp_path_factory.mktemp("coll")
    write_jsonl(coll / "corpus.jsonl", _collection())
    return synth.fit(coll, calibrate_docs=200)


def _collection():
    docs = random_docs(21, 150, vocab=60, max_len=80)
    for i, d in enumerate(docs[:40]):
        d["text"] += f" hapax{i}"  # words seen once: the Good-Turing chance of a new word is not 0
    return docs


def test_fit_is_deterministic_and_matches_the_source(stats, tmp_path):
    again = synth.fit(stats.source, calibrate_docs=200)
    assert again.words == stats.words and np.array_equal(again.probs, stats.probs)
    assert again.repeat == stats.repeat and again.p_new == stats.p_new
    assert abs(stats.probs.sum() - 1) < 1e-9 and 0 <= stats.repeat < 0.95
    assert sorted(stats.lengths.tolist()) == sorted(len(d["text"].split()) for d in _collection())
    assert stats.p_new > 0


def test_mean_length_scales_the_bodies_and_keeps_the_rest(stats):
    short = synth.fit(stats.source, calibrate_docs=200, mean_length=6)
    assert abs(short.lengths.mean() - 6) < 1 and short.lengths.min() >= 1
    assert short.words == stats.words and short.repeat == stats.repeat and short.p_new == stats.p_new
    lengths = [len(text.split()) for _k, _t, text in synth.documents(short, 500, seed=0)]
    assert 4 < np.mean(lengths) < 8 < np.mean([len(t.split()) for _k, _t, t in synth.documents(stats, 500, seed=0)])
    with pytest.raises(SystemExit):
        synth.fit(stats.source, calibrate_docs=200, mean_length=0)


def test_generator_is_seeded_reproducible_and_prefix_stable(stats):
    a = list(synth.documents(stats, 3000, seed=0))
    assert a == list(synth.documents(stats, 3000, seed=0))
    assert a != list(synth.documents(stats, 3000, seed=1))
    # document i does not depend on how many are generated, nor on where generation starts
    assert list(synth.documents(stats, 2500, seed=0)) == a[:2500]
    assert list(synth.documents(stats, 3000, seed=0, start=2100)) == a[2100:]
    assert [d[0] for d in a[:2]] == ["syn0000000", "syn0000001"]
    lengths = np.array([len(text.split()) for _k, _t, text in a])
    assert set(lengths.tolist()) <= set(stats.lengths.tolist())  # drawn from the empirical lengths
    words = {w.rstrip(".") for _k, _t, text in a for w in text.split()} - {""}
    new = words - set(stats.words)
    assert new and all(w.startswith("zz") for w in new)  # the open tail adds words the source never had


def test_the_synthetic_workspace_is_what_import_leaves_and_the_cli_searches_it(stats, tmp_path):
    from chitragupta.engine.index.source import read_text
    from chitragupta.engine.library.texts import is_ref

    out = tmp_path / "synth"
    meta = synth.write_workspace(stats, 60, out, seed=3)
    assert meta["writer"] == "import" and meta["docs"] == 60
    q = "SELECT citekey, title, parsed_path, origin, backend FROM sources ORDER BY citekey"
    with sqlite3.connect(out / "content" / "ledger.sqlite") as a:
        rows = a.execute(q).fetchall()
    docs = list(synth.documents(stats, 60, seed=3))
    assert [(k, t) for k, t, *_ in rows] == [(k, t) for k, t, _text in docs]
    assert all(is_ref(p) and origin == "corpus.jsonl" and backend == "jsonl" for _k, _t, p, origin, backend in rows)
    assert [read_text(out / p) for _k, _t, p, *_ in rows] == [text for _k, _t, text in docs]  # packed, read back
    assert [p.name for p in (out / "content" / "parsed").iterdir()] == ["packs"]  # no file a document
    assert not list(tmp_path.glob("*.tmp-*"))  # assembled aside, renamed into place
    with pytest.raises(SystemExit):
        synth.write_workspace(stats, 5, out)  # never over an existing folder
    word = next(t for _k, t, *_ in rows if t).split()[0]
    p = run_cli("search", "-w", out, word, "--json", "-k", "3", check=True)
    assert json.loads(p.stdout)


# -- the cheap up-to-date check ----------------------------------------------------------------------
def _age(path, seconds=30.0):
    """Set a folder's mtime back, as if its last change were long ago (outside the racy window)."""
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.fixture
def spied(monkeypatch):
    """Counts full scans (fingerprints of every row)."""
    calls = []
    real = manage.fingerprints

    def spy(root, rows):
        calls.append(len(rows))
        return real(root, rows)

    monkeypatch.setattr(manage, "fingerprints", spy)
    return calls


def _age_texts(ws, seconds=30.0):
    """``_age`` of the folders the stamp reads: content/parsed/ and its packs/ (when there)."""
    _age(ws.parsed_dir, seconds)
    if (ws.parsed_dir / "packs").is_dir():
        _age(ws.parsed_dir / "packs", seconds)


def _settled(tmp_path, n=40, *, packed=True):
    """An indexed workspace whose up-to-date stamp is recorded: its texts in packs, or one file a record."""
    docs = random_docs(31, n)
    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, write_jsonl(tmp_path / "corpus.jsonl", docs), packed=packed)
    refresh(ws)
    _age_texts(ws)
    assert open_current(ws).check == "scan"  # verified once, stamp recorded
    return ws, docs


def test_a_settled_index_is_opened_on_its_stamp_alone(tmp_path, spied):
    ws, _docs = _settled(tmp_path)
    spied.clear()
    opened = open_current(ws)
    assert opened.check == "stamp" and opened.current and spied == []
    assert isinstance(opened.rows, LedgerRows)
    with Ledger(ws.ledger_path) as led:
        assert list(opened.rows) == led.index_view()
        assert [opened.rows[i] for i in (0, 7, -1)] == [led.index_view()[i] for i in (0, 7, -1)]
    # the titles and snippets of hits come from the rows looked up on demand
    lazy = Retriever.open(ws).search("twin model", k=5)
    spied.clear()
    manage.verified_path(ws, "document").unlink()
    eager = Retriever.open(ws).search("twin model", k=5)
    assert spied and lazy.hits == eager.hits and lazy.hits


def test_a_fresh_stamp_is_never_trusted(tmp_path, spied):
    ws = Workspace.open(make_workspace(tmp_path, random_docs(32, 20)))
    refresh(ws)  # parsed files were written just now: inside the racy window
    spied.clear()
    assert open_current(ws).check == "scan"
    assert open_current(ws).check == "scan" and len(spied) == 2


def _ledger_upsert(ws, docs):
    with Ledger(ws.ledger_path) as led, led.transaction():
        led.upsert([led.get("d0003").with_(title="Quasarword heading")])
    return "quasarword"


def _ledger_hand_update(ws, docs):
    with sqlite3.connect(ws.ledger_path) as db:
        db.execute("UPDATE sources SET title = 'Quasarword by hand' WHERE citekey = 'd0003'")
    return "quasarword"


def _ledger_delete(ws, docs):
    with Ledger(ws.ledger_path) as led, led.transaction():
        led.delete(["d0004"])
    return None


def _reparsed(ws, docs):
    with Ledger(ws.ledger_path) as led:
        rel = led.get("d0003").parsed_path
    atomic_write_text(ws.root / rel, "quasarword appears in the new parse", durable=False)
    return "quasarword"


def _deleted_file(ws, docs):
    with Ledger(ws.ledger_path) as led:
        (ws.root / led.get("d0003").parsed_path).unlink()
    return None


def _deleted_pack(ws, docs):
    for p in (ws.parsed_dir / "packs").iterdir():
        p.unlink()
    return None


def _pack_replaced(ws, docs):
    """The pack replaced whole (a new file under its name) with d0003's text changed in place."""
    from chitragupta.engine.library.texts import split_ref

    with Ledger(ws.ledger_path) as led:
        pack, offset, length = split_ref(ws.root / led.get("d0003").parsed_path)
    data = bytearray(Path(pack).read_bytes())
    data[offset:offset + length] = b"quasarword".ljust(length)
    tmp = pack + ".new"
    Path(tmp).write_bytes(bytes(data))
    os.replace(tmp, pack)
    return "quasarword"


def _reimported(ws, docs):
    docs[3]["text"] = "quasarword"
    import_jsonl(ws, write_jsonl(ws.root.parent / "corpus.jsonl", docs))
    return "quasarword"


_COMMON = [_ledger_upsert, _ledger_hand_update, _ledger_delete, _reimported]


@pytest.mark.parametrize("packed,change", [(False, c) for c in _COMMON + [_reparsed, _deleted_file]]
                         + [(True, c) for c in _COMMON + [_deleted_pack, _pack_replaced]])
@pytest.mark.slow
@pytest.mark.parametrize("folder_time", ["natural", "aged"])
def test_changes_are_still_detected(tmp_path, spied, packed, change, folder_time):
    ws, docs = _settled(tmp_path, packed=packed)
    before = open_current(ws)
    assert before.check == "stamp"
    word = change(ws, docs)
    if folder_time == "aged":  # outside the racy window, but not the mtime that was recorded
        _age_texts(ws, 20.0)
    spied.clear()
    opened = open_current(ws)
    assert opened.check == "built" and spied, "the change went unnoticed"
    got = arrays_of(opened.index)
    if word:
        assert word in got["vocab"]
    if change is _deleted_file:
        assert opened.index.flags[opened.index.doc_id("d0003")] & FLAG_TEXT_MISSING
    if change is _deleted_pack:
        assert len(opened.index.keys_with_flag(FLAG_TEXT_MISSING)) == len(docs)
    if change is _ledger_delete:
        assert "d0004" not in got["citekeys"]
    assert_identical(got, arrays_of(refresh(ws, force=True).index))  # what was opened == a fresh build


def test_a_parsed_path_outside_content_parsed_disables_the_stamp(tmp_path, spied):
    ws, _docs = _settled(tmp_path, 10, packed=False)
    with Ledger(ws.ledger_path) as led:
        row = led.get("d0002")
        (ws.content / "elsewhere").mkdir()
        os.replace(ws.root / row.parsed_path, ws.content / "elsewhere" / "d0002.txt")
        with led.transaction():
            led.upsert([row.with_(parsed_path="content/elsewhere/d0002.txt")])
    _age(ws.parsed_dir)
    assert open_current(ws).check == "built"
    assert open_current(ws).check == "scan"
    assert open_current(ws).check == "scan"  # never "stamp": that file's changes would not move the folder


# -- the store's checksum note --------------------------------------------------------------------------
def test_checksums_are_read_once_per_generation_unless_a_file_changes(tmp_path, monkeypatch):
    ws = Workspace.open(make_workspace(tmp_path, random_docs(33, 30)))
    gen = refresh(ws).index.path
    old = time.time() - 30
    for p in gen.glob("*.npy"):
        os.utime(p, (old, old))
    reads = []
    real = store._crc
    monkeypatch.setattr(store, "_crc", lambda p: reads.append(p.name) or real(p))
    store.load(doc_folder(ws), expect={})
    assert reads and (gen / "CHECKED").is_file()
    reads.clear()
    store.load(doc_folder(ws), expect={})
    assert reads == []
    p = gen / "doc_len.npy"
    b = bytearray(p.read_bytes())
    b[-1] ^= 0xFF
    p.write_bytes(bytes(b))
    os.utime(p, (old - 5, old - 5))  # rewritten, even with an old mtime: the note no longer vouches for it
    with pytest.raises(store.IndexCorrupt, match="checksum"):
        store.load(doc_folder(ws), expect={})


# -- the streaming build ------------------------------------------------------------------------------
@pytest.mark.parametrize("stemmer", ["none", "english"])
def test_tiny_flushes_and_blocks_build_the_same_index(tmp_path, monkeypatch, stemmer):
    docs = random_docs(34, 80, max_len=120)
    for d in docs[:20]:
        d["text"] += " modelling models modeled twins twinned"
    root = make_workspace(tmp_path, docs)
    (root / "config.toml").write_text(f'[retrieval]\nstemmer = "{stemmer}"\n')
    ws = Workspace.open(root)
    want = refresh(ws, force=True).index
    want_arrays = arrays_of(want)
    want_fields = {f: np.asarray(want.postings.fields[f]).copy() for f in ("title", "abstract")}
    monkeypatch.setattr(csr, "_FLUSH_TOKENS", 7)  # a document's tokens split over many chunks
    monkeypatch.setattr(csr, "_ALIGN_BLOCK", 5)  # field counts placed a few postings at a time
    got = refresh(ws, force=True).index
    assert_identical(arrays_of(got), want_arrays)
    for f, arr in want_fields.items():
        assert np.array_equal(np.asarray(got.postings.fields[f]), arr), f
    assert want_fields["title"].any()
