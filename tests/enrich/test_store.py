"""enrich/store.py, hostile input: a store manifest or array that is a FIFO, a device link, of the wrong
type or deeply nested is a corrupt store (``StoreCorrupt``), never a hang or a traceback. A FIFO the old
code would have opened is fed by ``conftest.Feeder``, so a regression fails instead of hanging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import Feeder


def first_store(tmp_path) -> Path:
    pytest.importorskip("faiss")
    import numpy as np
    from chitragupta.enrich.store import Store, save_store

    vecs = np.eye(4, dtype=np.float32)[:2]
    folder = tmp_path / "content" / "faiss" / "m-1"
    save_store(folder, Store(model="m", dim=4, recipe={"words": 200}, citekeys=["k0"], titles=[""], hashes=["h"],
                             texts=["a b c d"], vectors=vecs, chunk_doc=np.zeros(2, dtype=np.int32),
                             chunk_no=np.arange(2, dtype=np.int32), char_start=np.array([0, 2], dtype=np.int64),
                             char_end=np.array([3, 7], dtype=np.int64)))
    return folder


def test_a_store_manifest_fifo_is_corrupt_not_a_hang(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = first_store(tmp_path)
    (folder / "manifest.json").unlink()
    with Feeder(folder / "manifest.json", b"{}") as feeder:
        with pytest.raises(StoreCorrupt, match=r"manifest.json is a pipe \(FIFO\)"):
            load_store(folder)
    assert not feeder.fed


def test_a_store_array_fifo_is_corrupt_not_a_hang(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = first_store(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["chunk_no.npy"]["bytes"] = 0  # the manifest agrees with what a FIFO's size reads
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "chunk_no.npy").unlink()
    with Feeder(folder / "chunk_no.npy", b"\x93NUMPY") as feeder:
        with pytest.raises(StoreCorrupt, match=r"chunk_no.npy .*is a pipe \(FIFO\)"):
            load_store(folder)
    assert not feeder.fed


def test_a_store_manifest_linked_to_a_device_is_corrupt(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = first_store(tmp_path)
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").symlink_to("/dev/null")
    with pytest.raises(StoreCorrupt, match="manifest.json is a symbolic link"):
        load_store(folder)


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m.__setitem__("count", "two"), "count is not a count"),
    (lambda m: m.__setitem__("dim", [4]), "dim is not a count"),
    (lambda m: m.__setitem__("files", [1]), "lists no files"),
    (lambda m: m.pop("model"), "names no model"),
    (lambda m: m["files"]["vectors.npy"].__setitem__("bytes", "12"), "no byte length and checksum"),
    (lambda m: m.__setitem__("recipe", 3), "recipe is not an object"),
])
def test_store_manifest_fields_of_the_wrong_type_are_corrupt(tmp_path, edit, needle):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = first_store(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreCorrupt, match=needle):
        load_store(folder)


def test_a_deeply_nested_store_manifest_is_corrupt(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = first_store(tmp_path)
    (folder / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(StoreCorrupt, match="not JSON"):
        load_store(folder)
