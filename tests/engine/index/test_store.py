"""The index cache and the workspace's own files, attacked: bit-rot in place, arrays rewritten with a
consistent manifest (as an adversary would), manifests of the wrong types, folders where files belong,
a full disk, and what the CLI says about each (one line, never a traceback, never a
segfault, never a wrong ranking returned silently; the previous index stays usable).

Searches over damaged arrays run in a subprocess, so a segfault is seen as one (a negative exit status)
instead of ending the test run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from chitragupta.engine.index import doc as doc_index
from chitragupta.engine.index import passage as passage_index
from chitragupta.engine.index import store
from chitragupta.engine.index.manage import index_folder, open_current, refresh
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import import_jsonl
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.errors import IndexDamaged, WorkspaceError

from helpers import (
    STORE_QUERY,
    built_workspace,
    enospc,
    make_stale,
    make_workspace,
    numba_hits,
    random_docs,
    rewrite_index_array,
    run_cli,
    run_main,
    write_jsonl,
)


def _gen(ws: Workspace, unit: str = "document") -> Path:
    folder = index_folder(ws, unit)
    return folder / (folder / "CURRENT").read_text().strip()


def _settle(ws: Workspace, unit: str = "document") -> Path:
    """Age the generation's files past the racy window and load it once, so its CHECKED note vouches
    for them: from now on only what changes size, mtime or inode would be re-read by the old store."""
    gen = _gen(ws, unit)
    old = time.time() - 60
    for p in gen.iterdir():
        os.utime(p, (old, old))
    store.load(index_folder(ws, unit), expect={})
    assert (gen / "CHECKED").is_file()
    return gen


def _rot(path: Path, where: int, data: bytes) -> None:
    """Overwrite bytes in place: same size, same inode, mtime put back -- what a failing disk does."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(where)
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


def _data_start(path: Path) -> int:
    return int(np.load(path, mmap_mode="r", allow_pickle=False).offset)


def _cli_search(ws, query=STORE_QUERY, k=8, *extra):
    p = run_cli("search", "-w", ws.root, query, "-k", k, "--json", "--backend", "numba", *extra)
    assert p.returncode >= 0, f"killed by signal {-p.returncode} (a kernel read outside an array)\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    return p


# -- bit-rot in place: size, mtime and inode unchanged ----------------------------------------------------
def _rot_case(tmp_path, name: str, value) -> None:
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    gen = _settle(ws)
    p = gen / f"{name}.npy"
    arr = np.load(p, mmap_mode="r", allow_pickle=False)
    if name in ("indices", "tf"):  # a posting of a query term, so the kernels would read it
        tid = doc_index.open_index(index_folder(ws), ws.config.index_settings()).vocab.find("twin")
        pos = int(np.load(gen / "indptr.npy")[tid]) + 1
    elif name == "indptr":
        tid = doc_index.open_index(index_folder(ws), ws.config.index_settings()).vocab.find("twin")
        pos = tid + 1
    else:
        pos = arr.shape[0] // 2
    if value is None:  # one bit flipped in the middle of the data
        where = _data_start(p) + (p.stat().st_size - _data_start(p)) // 2
        data = bytes([(p.read_bytes()[where]) ^ 0x10])
    else:
        where = _data_start(p) + pos * arr.itemsize * (arr.shape[1] if arr.ndim == 2 else 1)
        data = np.asarray([value], dtype=arr.dtype).tobytes()
    del arr
    _rot(p, where, data)
    got = _cli_search(ws)
    assert got.returncode == 0, got.stderr
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    assert "index cache was not usable" in got.stderr, got.stderr  # said, and rebuilt
    assert numba_hits(ws) == want


@pytest.mark.slow  # a search in a subprocess per case (a segfault must not take pytest down)
@pytest.mark.parametrize("name, value", [("indices", 2_000_000_000), ("indptr", 10**9), ("tf", 1000)])
def test_bit_rot_in_a_kernel_array_is_caught_not_crashed_on(tmp_path, name, value):
    """Before: indices/indptr rot segfaulted the search (the CHECKED note vouched for the file and the
    kernels index without bound checks); tf rot changed the ranking silently."""
    _rot_case(tmp_path, name, value)


ARRAYS = ["citekeys_blob", "citekeys_offsets", "doc_len", "flags", "indices", "indptr", "tf", "vocab_blob",
          "vocab_offsets"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ARRAYS)
def test_one_flipped_bit_in_any_array_is_caught(tmp_path, name):
    _rot_case(tmp_path, name, None)


def test_index_verifies_checksums_before_saying_up_to_date(tmp_path):
    ws = built_workspace(tmp_path)
    gen = _settle(ws)
    p = gen / "tf_title.npy"  # read by no open-time check while the title weight is 1
    _rot(p, _data_start(p) + 4, np.int32(7).tobytes())
    got = run_main("index", "-w", ws.root, "--unit", "document")
    assert got.returncode == 0, got.stderr
    assert "tf_title fails its checksum" in got.stderr and "up to date" not in got.stdout
    assert _gen(ws) != gen


def test_an_update_never_copies_rot_into_a_new_generation(tmp_path):
    docs = random_docs(42, 60)
    for d in docs:
        d["title"] = "twin " + d["title"]
    root = make_workspace(tmp_path, docs)
    ws = Workspace.open(root)
    refresh(ws, unit="document")
    gen = _settle(ws)
    p = gen / "tf_title.npy"
    _rot(p, _data_start(p), np.int32(0).tobytes())
    docs[7]["text"] += " quasarword"
    import_jsonl(ws, write_jsonl(tmp_path / "corpus.jsonl", docs))
    opened = open_current(ws)  # a search's update: reuses every unchanged document
    assert opened.check == "built" and any("fails its checksum" in n.text for n in opened.notes)
    fresh = refresh(ws, unit="document", force=True).index
    for name in ("indices", "tf", "tf_title", "doc_len"):
        a = np.load(opened.index.path / f"{name}.npy", allow_pickle=False)
        assert np.array_equal(a, np.load(fresh.path / f"{name}.npy", allow_pickle=False)), name


# -- arrays rewritten with a manifest that agrees (checksums recomputed): only the bound checks stand -----
_rewrite = rewrite_index_array


def _a(gen, name):
    return np.load(gen / f"{name}.npy", allow_pickle=False).copy()


def _set(name, fn):
    def apply(gen):
        arr = _a(gen, name)
        out = fn(arr, gen)
        _rewrite(gen, name, arr if out is None else out)
    return apply


def _swap_first_row(a, gen):
    ip = _a(gen, "indptr")
    t = int(np.flatnonzero(np.diff(ip) >= 2)[0])
    a[ip[t]], a[ip[t] + 1] = a[ip[t] + 1], a[ip[t]]


def _move_posting(a, gen):  # one posting to another document, still in range and in order
    ip = _a(gen, "indptr")
    for t in range(len(ip) - 1):
        row = a[ip[t]:ip[t + 1]]
        gaps = np.flatnonzero(np.diff(row) >= 2)
        if gaps.size:
            a[ip[t] + gaps[0]] += 1
            return
    raise AssertionError("no row with a gap")


CONSISTENT = {
    "indices-past-the-end": (_set("indices", lambda a, g: a.__setitem__(0, 10**6)), "out of the document range"),
    "indices-negative": (_set("indices", lambda a, g: a.__setitem__(-1, -3)), "out of the document range"),
    "indices-unsorted": (_set("indices", _swap_first_row), "out of order"),
    "indices-moved": (_set("indices", _move_posting), "do not add up"),
    "indices-int64": (_set("indices", lambda a, g: a.astype(np.int64)), "not 1-d <i4"),
    "indices-short": (_set("indices", lambda a, g: a[:-1]), "array tf has .* rows"),
    "indptr-decreasing": (_set("indptr", lambda a, g: a.__setitem__(3, a[3] + 10**6)), "indptr does not run"),
    "indptr-short": (_set("indptr", lambda a, g: a[:-1]), "rows"),
    "tf-zero": (_set("tf", lambda a, g: a.__setitem__(5, 0)), "count <= 0"),
    "tf-changed": (_set("tf", lambda a, g: a.__setitem__(5, a[5] + 1)), "do not add up"),
    "doc_len-negative": (_set("doc_len", lambda a, g: a.__setitem__(2, -1)), "negative"),
    "doc_len-changed": (_set("doc_len", lambda a, g: a.__setitem__(2, a[2] + 1)), "do not add up"),
    "doc_len-short": (_set("doc_len", lambda a, g: a[:-1]), "out of the document range"),
    "vocab_offsets-past-blob": (_set("vocab_offsets", lambda a, g: a.__setitem__(-1, a[-1] + 9)), "offsets"),
    "vocab_offsets-decreasing": (_set("vocab_offsets", lambda a, g: a.__setitem__(1, a[2] + 1)), "offsets"),
    "vocab_blob-unsorted": (_set("vocab_blob", lambda a, g: a[::-1].copy()), "not sorted"),
    "vocab_blob-not-ascii": (_set("vocab_blob", lambda a, g: a.__setitem__(0, 0xE9)), "not ASCII"),
    "citekeys-unsorted": (_set("citekeys_blob", lambda a, g: a.__setitem__(4, ord("9"))), "not sorted"),
    "citekeys-not-utf8": (_set("citekeys_blob", lambda a, g: a.__setitem__(1, 0xFF)), "not UTF-8"),
    "fingerprints-shape": (_set("fingerprints", lambda a, g: a[:, :1].copy()), "fingerprints"),
    "flags-short": (_set("flags", lambda a, g: a[:-1]), "rows"),
    "tf_title-short": (_set("tf_title", lambda a, g: a[:-1]), "rows"),
    "tf-float": (_set("tf", lambda a, g: a.astype(np.float64)), "not 1-d <i4"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CONSISTENT))
def test_damage_with_a_consistent_manifest_fails_the_open_checks(tmp_path, case):
    damage, message = CONSISTENT[case]
    ws = built_workspace(tmp_path)
    damage(_gen(ws))
    with pytest.raises(store.IndexCorrupt, match=message):
        doc_index.open_index(index_folder(ws), ws.config.index_settings(), verify=True)


@pytest.mark.slow  # a subprocess per case
@pytest.mark.parametrize("case", ["indices-past-the-end", "indptr-decreasing", "vocab_offsets-past-blob"])
def test_a_crafted_index_is_rebuilt_never_read_out_of_bounds(tmp_path, case):
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    CONSISTENT[case][0](_gen(ws))
    got = _cli_search(ws)
    assert got.returncode == 0 and "index cache was not usable" in got.stderr, got.stderr
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    # read-only: the damaged index cannot be rebuilt, so it is one line, not a crash
    CONSISTENT[case][0](_gen(ws))
    ro = _cli_search(ws, STORE_QUERY, 8, "--no-update")
    assert ro.returncode == 1 and ro.stderr.count("\n") == 1 and ro.stderr.startswith("error: "), ro.stderr
    # found at open (no usable index) or by the deep check before numba reads it: either way the fix is named
    assert "no usable document index" in ro.stderr or "rebuild it with `chitragupta index --force`" in ro.stderr


@pytest.mark.slow
def test_field_counts_are_checked_when_weighted(tmp_path):
    ws = built_workspace(tmp_path, config="[retrieval]\nweight_title = 2.0\n")
    want = numba_hits(ws)
    gen = _gen(ws)
    tf_title = _a(gen, "tf_title")
    i = int(np.flatnonzero(tf_title > 0)[0])
    tf_title[i] -= 1  # in range, but not what was written
    _rewrite(gen, "tf_title", tf_title)
    r = Retriever.open(ws, backend="numba")  # the open reads no posting; numba's first batch checks them
    got = r.search(STORE_QUERY, k=8)
    assert any("title field counts do not add up" in n.text and "rebuilt" in n.text for n in got.notes), got.notes
    assert [(h.citekey, h.score) for h in got.hits] == want


@pytest.mark.slow
def test_an_unweighted_field_is_checked_on_first_use(tmp_path):
    ws = built_workspace(tmp_path)
    gen = _gen(ws)
    tf_title = _a(gen, "tf_title")
    tf_title[int(np.flatnonzero(tf_title > 0)[0])] += 50  # more title counts than counts
    _rewrite(gen, "tf_title", tf_title)
    r = Retriever.open(ws, backend="numba")
    assert r.search(STORE_QUERY).hits  # weight 1: the field is never read, nothing to say
    assert not any("title field" in n.text for n in r.index_notes())
    r.params = type(r.params)(k1=1.5, b=0.75, field_weights=(("title", 3.0),))
    got = r.search(STORE_QUERY)  # the first search that weights it checks it, and rebuilds the index
    assert got.hits and any("title field count at posting" in n.text and "outside 0..tf" in n.text
                            and "rebuilt" in n.text for n in got.notes), got.notes
    index = r.index  # the rebuilt one: sound, so a kernel reading the field directly is fine
    assert (np.asarray(index.postings.fields["title"]) <= np.asarray(index.postings.tf)).all()
    # with updates off (search --no-update) the same damage is one error naming the fix, not a wrong read
    gen = _gen(ws)
    tf_title = _a(gen, "tf_title")
    tf_title[int(np.flatnonzero(tf_title > 0)[0])] += 50
    _rewrite(gen, "tf_title", tf_title)
    r = Retriever.open(ws, backend="numba", update=False)
    r.params = type(r.params)(k1=1.5, b=0.75, field_weights=(("title", 3.0),))
    with pytest.raises(IndexDamaged, match="title field count at posting .* outside 0..tf.*index --force"):
        r.search(STORE_QUERY)


def test_passage_index_checks_its_passages_documents(tmp_path):
    from chitragupta.engine.text.sidecar import dump_sidecar

    ws = built_workspace(tmp_path, n=12, config="[retrieval]\nmin_passage_tokens = 2\n")
    with Ledger(ws.ledger_path) as led:
        for row in led.index_view()[:6]:
            items = [{"text": f"twin model paragraph number {i} sensor", "label": "text", "page": 1} for i in range(3)]
            (ws.root / row[3]).with_suffix(".passages.json").write_text(dump_sidecar(items))
    refresh(ws, unit="passage")
    gen = _gen(ws, "passage")
    settings = dict(ws.config.index_settings(), **{"retrieval.min_passage_tokens": 2})
    # 3 a sidecar, and each of the 6 sources without one is a single paragraph of plain text
    assert passage_index.open_passages(index_folder(ws, "passage"), settings).n_passages == 18 + 6
    p_doc = _a(gen, "p_doc")
    p_doc[-1] = 10**6
    _rewrite(gen, "p_doc", p_doc)
    with pytest.raises(store.IndexCorrupt, match="outside the index"):
        passage_index.open_passages(index_folder(ws, "passage"), settings)
    r = Retriever.open(ws)
    assert len(r.search("twin paragraph", unit="passage", k=5).hits) == 5
    assert any("passage index cache was not usable" in n.text for n in r.index_notes("passage"))


# -- manifests and folders that are not what the store wrote -----------------------------------------------
def _manifest_edit(fn):
    def apply(ws):
        gen = _gen(ws)
        m = json.loads((gen / "manifest.json").read_text())
        fn(m)
        (gen / "manifest.json").write_text(json.dumps(m))
    return apply


def _write(rel, text):
    def apply(ws):
        (index_folder(ws) / rel.replace("<gen>", _gen(ws).name)).write_text(text)
    return apply


def _current_dir(ws):
    cur = index_folder(ws) / "CURRENT"
    cur.unlink()
    (cur / "inner").mkdir(parents=True)


def _current_fifo(ws):
    cur = index_folder(ws) / "CURRENT"
    cur.unlink()
    os.mkfifo(cur)


def _manifest_dir(ws):
    m = _gen(ws) / "manifest.json"
    m.unlink()
    m.mkdir()


def _array_fifo(ws):  # a FIFO where an array was, the manifest agreeing on its size: reading it would block
    gen = _gen(ws)
    (gen / "tf.npy").unlink()
    os.mkfifo(gen / "tf.npy")
    _manifest_edit(lambda m: m["files"]["tf"].__setitem__("bytes", 0))(ws)
    (gen / "CHECKED").unlink(missing_ok=True)


FOREIGN = {
    "files-wrong-type": _manifest_edit(lambda m: m.__setitem__("files", {"tf": 5})),
    "files-a-list": _manifest_edit(lambda m: m.__setitem__("files", [1, 2])),
    "bytes-a-string": _manifest_edit(lambda m: m["files"]["tf"].__setitem__("bytes", "12")),
    "shape-negative": _manifest_edit(lambda m: m["files"]["tf"].__setitem__("shape", [-1])),
    "crc-float": _manifest_edit(lambda m: m["files"]["tf"].__setitem__("crc32", 1.5)),
    "name-a-path": _manifest_edit(lambda m: m["files"].__setitem__("../../../x", m["files"]["tf"])),
    "manifest-a-list": _manifest_edit(lambda m: (m.clear(), m.__setitem__("files", None))),
    "huge-integer": _write("<gen>/manifest.json", '{"files": {}, "schema": ' + "9" * 5000 + "}"),
    "current-a-folder": _current_dir,
    "current-a-fifo": _current_fifo,
    "manifest-a-folder": _manifest_dir,
    "array-a-fifo": _array_fifo,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_a_foreign_manifest_or_pointer_is_a_corrupt_cache(tmp_path, case):
    """Before: wrong types raised AttributeError/TypeError, a 5,000-digit integer ValueError, a folder
    named CURRENT bricked search and index --force, a FIFO named CURRENT hung the search."""
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    FOREIGN[case](ws)
    got = run_main("search", "-w", ws.root, STORE_QUERY, "-k", 8, "--json", "--backend", "numba")
    assert got.returncode == 0, got.stderr
    assert "index cache was not usable" in got.stderr, got.stderr
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    FOREIGN[case](ws)
    forced = run_main("index", "-w", ws.root, "--force", "--unit", "document")
    assert forced.returncode == 0, forced.stderr
    assert numba_hits(ws) == want


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "fifo", "dangling-symlink"])
def test_index_force_replaces_whatever_stands_in_the_index_folder(tmp_path, what):
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    folder = index_folder(ws)
    shutil.rmtree(folder)
    if what == "file":
        folder.write_text("not an index")
    elif what == "fifo":
        os.mkfifo(folder)
    else:
        folder.symlink_to(tmp_path / "nowhere")
    got = run_main("index", "-w", ws.root, "--force", "--unit", "document")
    assert got.returncode == 0, got.stderr
    assert folder.is_dir() and numba_hits(ws) == want


def test_content_index_being_a_file_is_one_line(tmp_path):
    ws = built_workspace(tmp_path)
    shutil.rmtree(ws.index_dir)
    ws.index_dir.write_text("precious notes")
    for argv in (["index", "-w", ws.root], ["search", "-w", ws.root, "twin"]):
        got = run_main(*argv)
        assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
        assert "content/index is not a folder" in got.stderr
    assert ws.index_dir.read_text() == "precious notes"


# -- a full disk while writing a generation --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("where", ["array", "current"])
def test_a_full_disk_during_index_is_one_line_and_keeps_the_previous_index(tmp_path, monkeypatch, where):
    ws = built_workspace(tmp_path)
    want = numba_hits(ws)
    before = _gen(ws)
    make_stale(ws, tmp_path)
    if where == "array":
        monkeypatch.setattr(store.np, "save", enospc)
    else:
        monkeypatch.setattr(store, "atomic_write_text", enospc)
    got = run_main("index", "-w", ws.root, "--unit", "document")
    assert got.returncode == 1, got.stderr
    assert got.stderr.count("\n") == 1 and got.stderr.startswith("error: cannot write the index in ")
    assert "No space left on device; the previous index is unchanged" in got.stderr
    # a search that would update the index answers from the previous one, and says why
    got = run_main("search", "-w", ws.root, STORE_QUERY, "-k", 8, "--json", "--backend", "numba")
    assert got.returncode == 0, got.stderr
    assert [(h["citekey"], h["score"]) for h in json.loads(got.stdout)] == want
    assert "could not be updated" in got.stderr and "No space left on device" in got.stderr
    assert "these results come from the previous index" in got.stderr
    monkeypatch.undo()
    assert _gen(ws) == before and [p.name for p in index_folder(ws).iterdir() if p.name.startswith(".")] == []
    assert sorted(p.name for p in index_folder(ws).iterdir() if p.name.startswith("g")) == [before.name]
    old = Retriever.open(ws, update=False, backend="numba")
    assert [(h.citekey, h.score) for h in old.search(STORE_QUERY, k=8).hits] == want
    assert Retriever.open(ws).search("quasarword").hits  # space again: the update goes through


# -- the open-time scan itself: its parallel chunks agree with one pass ------------------------------------
@pytest.mark.parametrize("damage", [None, "order", "range", "count", "field"])
def test_the_chunked_scan_finds_what_one_pass_finds(monkeypatch, damage):
    from chitragupta.kernels import integrity

    rng = np.random.default_rng(5)
    n_docs, n_terms = 300, 90
    rows = [np.sort(rng.choice(n_docs, size=int(rng.integers(0, 40)), replace=False)) for _ in range(n_terms)]
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.concatenate(rows).astype(np.int32)
    tf = rng.integers(1, 9, size=indices.size).astype(np.int32)
    title = np.minimum(tf, rng.integers(0, 3, size=indices.size)).astype(np.int32)
    t = next(i for i in range(50, n_terms) if len(rows[i]) >= 3)  # a row in a later chunk
    if damage == "order":
        indices[indptr[t]], indices[indptr[t] + 1] = indices[indptr[t] + 1], indices[indptr[t]]
    elif damage == "range":
        indices[indptr[t + 1] - 1] = n_docs
    elif damage == "count":
        tf[indptr[t]] = 0
    elif damage == "field":
        title[indptr[t]] = tf[indptr[t]] + 1
    whole = integrity.scan_postings(indptr, indices, tf, n_docs), integrity.scan_field(indices, tf, title)
    monkeypatch.setattr(integrity, "_CHUNK", 7)  # about 130 chunks, cut at term boundaries
    chunked = integrity.scan_postings(indptr, indices, tf, n_docs), integrity.scan_field(indices, tf, title)
    assert chunked[0][0] == whole[0][0] and chunked[1][0] == whole[1][0]
    if damage is None:
        assert chunked == whole and whole[0][0] == -1 and whole[1][0] == -1
        doc_len = np.bincount(indices, weights=tf, minlength=n_docs).astype(np.int32)
        assert whole[0][1:] == integrity.weighted_sums(doc_len)
    elif damage == "field":
        assert whole[1][0] == indptr[t] and whole[0][0] == -1
    else:
        assert whole[0][0] == t


@pytest.mark.parametrize("announced", [10, 14])
def test_a_column_keeps_the_checksum_of_what_it_wrote(tmp_path, announced):
    """A column's CRC is kept as its pieces are written (the file is not read back), and is the file's,
    also when fewer elements than announced were written (the header rewritten: then it is read)."""
    import zlib

    from chitragupta.engine.index import store as st

    with st.writing(tmp_path / "idx") as gen:
        col = gen.column("tf", np.int32, announced)
        for piece in (np.arange(3), np.arange(3, 7), np.zeros(0, dtype=np.int32), np.arange(7, 10)):
            col.write(piece)
        col.close()
        gen.put("doc_len", np.arange(4, dtype=np.int32))
        path = gen.commit({"kind": "test"})
    data = (path / "tf.npy").read_bytes()
    assert gen.files["tf"]["crc32"] == zlib.crc32(data)
    assert np.array_equal(np.load(path / "tf.npy"), np.arange(10, dtype=np.int32))
    assert gen.files["doc_len"]["crc32"] == zlib.crc32((path / "doc_len.npy").read_bytes())


def test_every_file_of_a_generation_is_fsynced_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    """The arrays (whole or in pieces) and the manifest are fsynced at commit, together in threads, and all
    of them before the folder's rename makes the generation visible; an fsync that fails fails the save."""
    from chitragupta.engine.index import store as st

    synced, order = [], []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def replace(a, b):
        order.append((str(a), sorted(synced)))
        return real_replace(a, b)

    monkeypatch.setattr(st.os, "fsync", fsync)
    monkeypatch.setattr(st.os, "replace", replace)
    with st.writing(tmp_path / "idx") as gen:
        col = gen.column("tf", np.int32, 5)
        col.write(np.arange(5))
        col.close()
        for k in range(20):
            gen.put(f"a{k}", np.arange(k, dtype=np.int64))
        tmp = gen.tmp
        path = gen.commit({"kind": "test"})
    files = {os.path.realpath(tmp / f"{n}.npy") for n in ["tf", *(f"a{k}" for k in range(20))]}
    files.add(os.path.realpath(tmp / "manifest.json"))
    renamed = [o for o in order if o[0] == str(tmp)]
    assert len(renamed) == 1 and files <= set(renamed[0][1])  # every file fsynced before the rename
    assert np.array_equal(np.load(path / "a7.npy"), np.arange(7))
    assert not [p for p in synced if p.startswith(str(tmp)) and p.endswith("a19.npy")][1:]  # (once each)
    # a file past SYNC_AT_ONCE bytes is fsynced as it is closed (not left dirty until the commit)
    monkeypatch.setattr(st, "SYNC_AT_ONCE", 100)
    synced.clear()
    with st.writing(tmp_path / "idx2") as gen:
        gen.put("small", np.arange(3, dtype=np.int64))
        gen.put("big", np.arange(40, dtype=np.int64))
        col = gen.column("col", np.int64, 30)
        col.write(np.arange(30))
        col.close()
        before = sorted(os.path.basename(p) for p in synced)
        gen.commit({"kind": "test"})
    assert before == ["big.npy", "col.npy"] and {"small.npy", "manifest.json"} <= {os.path.basename(p) for p in synced}

    def failing(fd):
        if os.path.realpath(f"/proc/self/fd/{fd}").endswith("a3.npy"):
            raise OSError(5, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(st.os, "fsync", failing)
    with pytest.raises(WorkspaceError, match="Input/output error; the previous index is unchanged"):
        with st.writing(tmp_path / "idx") as gen:
            for k in range(8):
                gen.put(f"a{k}", np.arange(k, dtype=np.int64))
            gen.commit({"kind": "test"})
    assert (tmp_path / "idx" / "CURRENT").read_text().strip() == path.name
    assert [p.name for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")] == []
