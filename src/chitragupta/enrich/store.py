"""The embedding store on disk: one folder per model under ``content/faiss/<model-slug>/``.

    manifest.json     schema, model, dim, chunk count, document count, the chunking recipe, and for every
                      file below its byte length and blake2b checksum (verified on every load)
    vectors.npy       (n, dim) float32, L2-normalised: kept so an update rebuilds the index without encoding
    chunk_doc.npy     (n,) int32   the chunk's document (a position in docs.json's lists)
    chunk_no.npy      (n,) int32   the chunk's number within its document (0, 1, ...)
    char_start.npy    (n,) int64   the chunk's character span in its document's text
    char_end.npy      (n,) int64
    docs.json         per document: citekey, title, text hash, the text the spans point into, and (newer
                      stores) a stamp of its inputs on disk, so an unchanged corpus is seen without reading it
    index.faiss       faiss.IndexFlatIP over vectors.npy (exact inner product = cosine similarity)

While the embed stage encodes, what it has finished is committed as *segments* beside the store, in
``content/faiss/.<model-slug>.segments/`` (never read by search)::

    seg-000001.npy    (m, dim) float32: the vectors of the segment's documents, in order
    seg-000001.json   schema, the base store it extends (``base``: a digest of the store's manifest, or
                      "none"), model, dim, recipe, per document its citekey, title, text hash, text and
                      chunk spans, the .npy's byte length and blake2b, and a blake2b of all of that

Each file is written to a temp name, fsynced and renamed (``chitragupta.files``' atomic writer,
which never writes through a symlink); the .json is written last, so a segment exists only once whole.
A rerun reads the store plus its segments (a later segment wins for a
document), encodes only what is still missing, then writes one complete store (the compaction,
atomic as below) and removes the segments. A segment that fails a check, or extends another store
than the one on disk, is removed with a note; its documents are encoded again.

No pickle anywhere: arrays load with ``allow_pickle=False``, the rest is JSON. A save writes a complete
new folder beside the old one and swaps it in by rename, so a reader sees the old store or the new one,
never a mixture; a store that fails any check raises ``StoreCorrupt`` and the embed stage rebuilds it.
Nothing in the folder is trusted: the manifest is read only as a small regular file (a FIFO, a device, a
folder or a symbolic link there is a corrupt store, never a hang or an unbounded read), its fields are
checked by type, and every other file is read only when it is a regular file of the length the manifest
gives.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chitragupta.errors import ChitraguptaError
from chitragupta.files import FileRefused, atomic_write_bytes, fsync_dir, load_npy, read_limited, read_small
from chitragupta.extras import require

__all__ = ["Store", "StoreCorrupt", "SCHEMA", "load_store", "save_store", "build_index", "store_folder", "recover",
           "Segment", "segments_folder", "base_id", "write_segment", "read_segments", "drop_segments"]

SCHEMA = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20  # a few hundred bytes when written; anything this big is not ours
_ARRAYS = {"vectors.npy": np.float32, "chunk_doc.npy": np.int32, "chunk_no.npy": np.int32,
           "char_start.npy": np.int64, "char_end.npy": np.int64}
_FILES = (*_ARRAYS, "docs.json", "index.faiss")


class StoreCorrupt(ChitraguptaError):
    """A store folder that is not what its manifest says (or has no usable manifest)."""


@dataclass
class Store:
    """Chunks of a set of documents, their vectors and (lazily) their FAISS index."""

    model: str
    dim: int
    recipe: dict
    citekeys: list[str]
    titles: list[str]
    hashes: list[str]
    texts: list[str]
    vectors: np.ndarray  # (n, dim) float32
    chunk_doc: np.ndarray  # (n,) int32
    chunk_no: np.ndarray  # (n,) int32
    char_start: np.ndarray  # (n,) int64
    char_end: np.ndarray  # (n,) int64
    index: object | None = field(default=None, repr=False)
    # per document, what its inputs looked like on disk when it was read (the embed stage's ``input_stamp``):
    # an unchanged stamp means an unchanged document without reading its text; None in older stores
    stamps: list[str] | None = None

    @property
    def count(self) -> int:
        return int(self.vectors.shape[0])

    def chunk_text(self, row: int) -> str:
        d = int(self.chunk_doc[row])
        return self.texts[d][int(self.char_start[row]):int(self.char_end[row])]

    def doc_rows(self) -> dict[str, np.ndarray]:
        """citekey -> its chunk rows, in chunk order."""
        order = np.argsort(self.chunk_doc, kind="stable")
        bounds = np.searchsorted(self.chunk_doc[order], np.arange(len(self.citekeys) + 1))
        return {k: order[bounds[i]:bounds[i + 1]] for i, k in enumerate(self.citekeys)}

    def faiss_index(self):
        if self.index is None:
            self.index = build_index(self.vectors)
        return self.index


def store_folder(content: Path, slug: str) -> Path:
    return content / "faiss" / slug


def build_index(vectors: np.ndarray):
    """An exact inner-product index (``faiss.IndexFlatIP``) over (n, dim) float32 ``vectors``."""
    faiss = require("faiss", "enrich", "the embedding index")
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatIP(int(vectors.shape[1]))
    if len(vectors):
        index.add(vectors)
    return index


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _write(folder: Path, name: str, data: bytes, files: dict) -> None:
    atomic_write_bytes(folder / name, data, mode=0o666)  # fsynced; never written through a symlink
    files[name] = {"bytes": len(data), "blake2b": _digest(data)}


def _sweep_leftovers(parent: Path, slug: str) -> None:
    """Folders a killed save left behind (``.<slug>.tmp-*``, ``.<slug>.old-*``)."""
    for p in parent.glob(f".{slug}.*"):
        if p.is_dir() and (".tmp-" in p.name or ".old-" in p.name):
            shutil.rmtree(p, ignore_errors=True)


def _moved_aside(folder: Path) -> Path | None:
    """The live store ``save_store`` moved aside (``.<slug>.old-*/<slug>``) and has not yet replaced."""
    for old in sorted(folder.parent.glob(f".{folder.name}.old-*")) if folder.parent.is_dir() else ():
        if (old / folder.name).is_dir():
            return old / folder.name
    return None


def recover(folder: Path) -> None:
    """Finish what a killed ``save_store`` left (call under the workspace lock, before loading): a
    store moved aside (``.<slug>.old-*/<slug>``) while the new one was not yet in place is put back,
    then leftover temp and old folders are removed (each may hold a full copy of the vectors)."""
    parent, slug = folder.parent, folder.name
    if not parent.is_dir():
        return
    aside = None if folder.exists() else _moved_aside(folder)
    if aside is not None:
        os.replace(aside, folder)
    _sweep_leftovers(parent, slug)


def save_store(folder: Path, store: Store) -> None:
    """Write ``store`` to ``folder`` atomically: a complete temp folder, then a rename swap."""
    faiss = require("faiss", "enrich", "the embedding index")
    parent, slug = folder.parent, folder.name
    parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(parent, slug)
    tmp = Path(tempfile.mkdtemp(prefix=f".{slug}.tmp-", dir=parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; the store is as readable as the rest of content/
    try:
        files: dict[str, dict] = {}
        arrays = {"vectors.npy": store.vectors, "chunk_doc.npy": store.chunk_doc, "chunk_no.npy": store.chunk_no,
                  "char_start.npy": store.char_start, "char_end.npy": store.char_end}
        for name, dtype in _ARRAYS.items():
            _write(tmp, name, _npy_bytes(np.ascontiguousarray(arrays[name], dtype=dtype)), files)
        docs = {"citekeys": store.citekeys, "titles": store.titles, "hashes": store.hashes, "texts": store.texts}
        if store.stamps is not None and len(store.stamps) == len(store.citekeys):
            docs["stamps"] = store.stamps
        _write(tmp, "docs.json", json.dumps(docs, ensure_ascii=False).encode("utf-8"), files)
        index = store.faiss_index()
        _write(tmp, "index.faiss", faiss.serialize_index(index).tobytes(), files)
        manifest = {"schema": SCHEMA, "model": store.model, "slug": slug, "dim": store.dim, "count": store.count,
                    "documents": len(store.citekeys), "recipe": store.recipe, "index": "IndexFlatIP",
                    "files": files, "written_at": time.time()}
        _write(tmp, MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"), {})
        fsync_dir(tmp)
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{slug}.old-", dir=parent))
            os.replace(folder, old / slug)
        os.replace(tmp, folder)
        fsync_dir(parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_checked(folder: Path, name: str, files: dict) -> bytes:
    """``name``'s bytes, read only as a regular file of the manifest's length (never more), checked
    against the manifest's checksum."""
    meta = files.get(name)
    if not isinstance(meta, dict):
        raise StoreCorrupt(f"manifest lists no {name}")
    size = meta.get("bytes")
    if type(size) is not int or size < 0 or not isinstance(meta.get("blake2b"), str):
        raise StoreCorrupt(f"{MANIFEST} gives {name} no byte length and checksum")
    try:
        data = read_limited(folder / name, size)
    except FileRefused as err:
        raise StoreCorrupt(f"{name} does not match its manifest ({err})") from None
    except OSError as err:
        raise StoreCorrupt(f"{name} cannot be read ({err.strerror or err})") from err
    if len(data) != size or _digest(data) != meta["blake2b"]:
        raise StoreCorrupt(f"{name} does not match its manifest (length or checksum)")
    return data


def _read_manifest(folder: Path) -> dict:
    """The manifest, read as a small regular file and checked for the fields a load reads, by type."""
    try:
        manifest = json.loads(read_small(folder / MANIFEST, MAX_MANIFEST_BYTES))
    except FileNotFoundError as err:
        raise StoreCorrupt(f"{MANIFEST} is missing") from err
    except FileRefused as err:
        raise StoreCorrupt(f"{MANIFEST} cannot be the store's manifest: {err}") from None
    except (OSError, ValueError, RecursionError) as err:  # ValueError: not UTF-8, not JSON, a huge integer
        raise StoreCorrupt(f"{MANIFEST} is missing or not JSON ({type(err).__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise StoreCorrupt(f"{MANIFEST} is not schema {SCHEMA}")
    for key in ("count", "dim"):
        v = manifest.get(key)
        if type(v) is not int or v < 0:
            raise StoreCorrupt(f"{MANIFEST}'s {key} is not a count ({type(v).__name__})")
    if not isinstance(manifest.get("model"), str):
        raise StoreCorrupt(f"{MANIFEST} names no model")
    if not isinstance(manifest.get("files"), dict):
        raise StoreCorrupt(f"{MANIFEST} lists no files")
    if not isinstance(manifest.get("recipe", {}), dict):
        raise StoreCorrupt(f"{MANIFEST}'s recipe is not an object")
    return manifest


def load_store(folder: Path, *, model: str | None = None, dim: int | None = None, recipe: dict | None = None,
               with_index: bool = True, check_index: bool = False) -> Store | None:
    """The store in ``folder``, every file checked against the manifest; None when there is no folder.

    ``model``/``dim``/``recipe``, when given, must match the manifest. StoreCorrupt otherwise.
    ``with_index=False, check_index=True``: index.faiss is checked against the manifest (length and
    checksum) but not deserialized, so faiss is not imported (the embed stage's look at an unchanged store).
    """
    if not folder.is_dir():
        folder = _moved_aside(folder)  # a reader between save_store's two renames sees the old store
        if folder is None:
            return None
    manifest = _read_manifest(folder)
    if model is not None and manifest.get("model") != model:
        raise StoreCorrupt(f"it holds model {manifest.get('model')!r}, not {model!r}")
    if dim is not None and manifest.get("dim") != dim:
        raise StoreCorrupt(f"its vectors have dim {manifest.get('dim')}, the model gives {dim}")
    if recipe is not None and manifest.get("recipe") != recipe:
        raise StoreCorrupt("it was chunked with another recipe")
    files = manifest["files"]
    arrays = {}
    for name, dtype in _ARRAYS.items():
        try:
            arr = load_npy(io.BytesIO(_read_checked(folder, name, files)))
        except (ValueError, EOFError, OSError, TypeError, SyntaxError, OverflowError, MemoryError) as err:
            raise StoreCorrupt(f"{name} is not a plain .npy array ({str(err)[:200]})") from None
        if arr.dtype != dtype:
            raise StoreCorrupt(f"{name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
        arrays[name] = arr
    try:
        docs = json.loads(_read_checked(folder, "docs.json", files).decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise StoreCorrupt(f"docs.json is not JSON ({str(err)[:200]})") from None
    n, d = manifest["count"], manifest["dim"]
    vec = arrays["vectors.npy"]
    if vec.ndim != 2 or vec.shape != (n, d):
        raise StoreCorrupt(f"vectors.npy has shape {vec.shape}, the manifest says ({n}, {d})")
    for name in ("chunk_doc.npy", "chunk_no.npy", "char_start.npy", "char_end.npy"):
        if arrays[name].shape != (n,):
            raise StoreCorrupt(f"{name} has shape {arrays[name].shape}, expected ({n},)")
    keys = ("citekeys", "titles", "hashes", "texts")
    if not isinstance(docs, dict) or any(not isinstance(docs.get(k), list) for k in keys) \
            or len({len(docs[k]) for k in keys}) != 1:
        raise StoreCorrupt("docs.json does not hold four lists of one length")
    if any(not all(isinstance(x, str) for x in docs[k]) for k in keys):
        raise StoreCorrupt("docs.json's lists hold something other than strings")
    ndocs = len(docs["citekeys"])
    cd = arrays["chunk_doc.npy"]
    if n and (cd.min() < 0 or cd.max() >= ndocs):
        raise StoreCorrupt("chunk_doc.npy points outside docs.json")
    stamps = docs.get("stamps")
    if not (isinstance(stamps, list) and len(stamps) == ndocs and all(isinstance(x, str) for x in stamps)):
        stamps = None  # absent (an older store) or not ours: documents are then read to be compared
    store = Store(model=manifest["model"], dim=d, recipe=manifest.get("recipe") or {}, citekeys=docs["citekeys"],
                  titles=docs["titles"], hashes=docs["hashes"], texts=docs["texts"], vectors=vec,
                  chunk_doc=cd, chunk_no=arrays["chunk_no.npy"], char_start=arrays["char_start.npy"],
                  char_end=arrays["char_end.npy"], stamps=stamps)
    if with_index:
        faiss = require("faiss", "enrich", "the embedding index")
        raw = _read_checked(folder, "index.faiss", files)
        try:
            index = faiss.deserialize_index(np.frombuffer(raw, dtype=np.uint8))
        except Exception as err:  # faiss raises RuntimeError on a damaged file
            raise StoreCorrupt(f"index.faiss cannot be read ({type(err).__name__})") from err
        if index.ntotal != n or index.d != d:
            raise StoreCorrupt(f"index.faiss holds {index.ntotal} x {index.d}, the manifest says {n} x {d}")
        store.index = index
    elif check_index:
        _read_checked(folder, "index.faiss", files)
    return store


# -- segments: what an embed run has committed since the store was last written whole -------------------

SEGMENT_SCHEMA = 1
MAX_SEGMENT_JSON_BYTES = 1 << 30  # a segment's documents' texts; anything bigger is not ours


@dataclass
class Segment:
    """One committed segment: documents (dicts with citekey, title, hash, text, starts, ends) and their
    chunk vectors, concatenated in document order."""

    number: int
    docs: list[dict]
    vectors: np.ndarray


def segments_folder(folder: Path) -> Path:
    """``content/faiss/.<slug>.segments`` for the store in ``content/faiss/<slug>``."""
    return folder.parent / f".{folder.name}.segments"


def base_id(folder: Path) -> str:
    """What identifies the store a segment extends: a digest of its manifest's bytes ("none": no store,
    or no readable manifest)."""
    try:
        return _digest(read_limited(folder / MANIFEST, MAX_MANIFEST_BYTES))
    except OSError:  # FileNotFoundError, FileRefused, ...
        return "none"


def _atomic(folder: Path, name: str, data: bytes) -> None:
    """``folder/name`` replaced by ``data``, fsynced (the one atomic writer: a symlink planted at the name or
    its temp name is replaced, never written through)."""
    atomic_write_bytes(folder / name, data, mode=0o666, tag=str(os.getpid()))


def _segment_body_digest(body: dict) -> str:
    return _digest(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8"))


def write_segment(seg_folder: Path, number: int, *, base: str, model: str, dim: int, recipe: dict,
                  docs: list[dict], vectors: np.ndarray) -> None:
    """Commit one segment (see the module docstring): the .npy, then the .json that makes it exist."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = sum(len(d["starts"]) for d in docs)
    if vectors.shape != (n, dim):
        raise ValueError(f"segment vectors have shape {vectors.shape}, its documents need ({n}, {dim})")
    seg_folder.mkdir(parents=True, exist_ok=True)
    stem = f"seg-{number:06d}"
    data = _npy_bytes(vectors)
    _atomic(seg_folder, f"{stem}.npy", data)
    body = {"schema": SEGMENT_SCHEMA, "base": base, "model": model, "dim": dim, "recipe": recipe,
            "vectors": {"name": f"{stem}.npy", "bytes": len(data), "blake2b": _digest(data)},
            "docs": [{"citekey": d["citekey"], "title": d["title"], "hash": d["hash"], "text": d["text"],
                      "stamp": d.get("stamp"),
                      "starts": [int(x) for x in d["starts"]], "ends": [int(x) for x in d["ends"]]}
                     for d in docs]}
    record = {"body": body, "blake2b": _segment_body_digest(body)}
    _atomic(seg_folder, f"{stem}.json", json.dumps(record, ensure_ascii=False).encode("utf-8"))
    fsync_dir(seg_folder)


def _check_segment_docs(docs) -> None:
    if not isinstance(docs, list):
        raise ValueError("its documents are not a list")
    for d in docs:
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ("citekey", "title", "hash", "text")):
            raise ValueError("a document lacks its citekey, title, hash or text")
        starts, ends = d.get("starts"), d.get("ends")
        if not isinstance(starts, list) or not isinstance(ends, list) or len(starts) != len(ends) or not starts:
            raise ValueError(f"document {d['citekey']!r} has no matching chunk spans")
        if any(type(x) is not int or x < 0 for x in (*starts, *ends)):
            raise ValueError(f"document {d['citekey']!r} has a chunk span that is not a count")


class _Stale(ValueError):
    """A whole segment that belongs to another generation of the store."""


def _read_segment(seg_folder: Path, number: int, *, base: str, model: str, dim: int | None, recipe: dict) -> Segment:
    stem = f"seg-{number:06d}"
    try:
        record = json.loads(read_limited(seg_folder / f"{stem}.json", MAX_SEGMENT_JSON_BYTES))
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{stem}.json cannot be read ({type(err).__name__})") from None
    if not isinstance(record, dict) or not isinstance(record.get("body"), dict):
        raise ValueError(f"{stem}.json is not a segment record")
    body = record["body"]
    if record.get("blake2b") != _segment_body_digest(body):
        raise ValueError(f"{stem}.json does not match its checksum")
    if body.get("schema") != SEGMENT_SCHEMA:
        raise ValueError(f"{stem}.json is not schema {SEGMENT_SCHEMA}")
    if body.get("base") != base:
        raise _Stale(f"{stem} extends another generation of the store (left by a run that wrote the store "
                     "whole, or older); removed")
    if body.get("model") != model or body.get("recipe") != recipe or (dim is not None and body.get("dim") != dim):
        raise ValueError(f"{stem} was encoded with another model, dimension or recipe")
    d = body.get("dim")
    if type(d) is not int or d < 1:
        raise ValueError(f"{stem}.json gives no dimension")
    _check_segment_docs(body.get("docs"))
    meta = body.get("vectors")
    if not isinstance(meta, dict) or meta.get("name") != f"{stem}.npy":
        raise ValueError(f"{stem}.json names no vectors file")
    try:
        raw = _read_checked(seg_folder, f"{stem}.npy", {f"{stem}.npy": meta})
        vectors = load_npy(io.BytesIO(raw))
    except (StoreCorrupt, ValueError, EOFError, OSError) as err:
        raise ValueError(f"{stem}.npy: {err}") from None
    n = sum(len(x["starts"]) for x in body["docs"])
    if vectors.dtype != np.float32 or vectors.shape != (n, d) or not np.isfinite(vectors).all():
        raise ValueError(f"{stem}.npy holds {vectors.dtype} {vectors.shape}, its documents need float32 ({n}, {d})")
    return Segment(number, body["docs"], vectors)


def read_segments(seg_folder: Path, *, base: str, model: str, dim: int | None, recipe: dict) -> tuple[list[Segment], list[str]]:
    """The usable segments in ``seg_folder`` (in commit order) and a note for each one removed because
    it failed a check or extends another store. Temp files of a killed commit are removed. Call under
    the workspace lock."""
    if not seg_folder.is_dir():
        return [], []
    out, notes = [], []
    numbers = set()
    for p in seg_folder.iterdir():
        if p.name.startswith("."):  # a commit killed before its rename
            try:
                p.unlink()
            except OSError:
                pass
            continue
        stem = p.name.rsplit(".", 1)[0]
        if stem.startswith("seg-") and stem[4:].isdigit():
            numbers.add(int(stem[4:]))
    for number in sorted(numbers):
        stem = f"seg-{number:06d}"
        if not (seg_folder / f"{stem}.json").exists():  # its .npy was written, the commit never was
            _unlink(seg_folder / f"{stem}.npy")
            continue
        try:
            out.append(_read_segment(seg_folder, number, base=base, model=model, dim=dim, recipe=recipe))
        except _Stale as err:
            notes.append(str(err))
            _unlink(seg_folder / f"{stem}.json")
            _unlink(seg_folder / f"{stem}.npy")
        except ValueError as err:
            notes.append(f"a committed segment is not usable ({err}); removed, its documents are encoded again")
            _unlink(seg_folder / f"{stem}.json")
            _unlink(seg_folder / f"{stem}.npy")
    return out, notes


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def drop_segments(seg_folder: Path) -> None:
    """Remove the segments once the store holds them (after ``save_store``)."""
    if seg_folder.is_dir():
        shutil.rmtree(seg_folder, ignore_errors=True)
