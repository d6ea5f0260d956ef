"""The document index cut into shards of consecutive documents, each scored alone with the whole index's
statistics, so that every document gets the float score the one-process index gives it.

    content/index/shards/SET          which shards make the set (written last, atomically): their count, the
                                      whole index's generation they were cut from, each one's range
    content/index/shards/<i>/         shard i: a store folder (``CURRENT`` + generations, ``store.save``)

A shard is a document index in its own right -- it opens through ``doc.open_index`` with every check of
the whole one (``store.load``'s sizes and checksums, ``check_arrays``, the citekeys, the fields, the
positions) -- over documents ``start..stop - 1`` of the whole index, numbered from 0 inside the shard. It
keeps the whole vocabulary (term ids are the same in every shard, so a query is planned once against any
of them or against the whole index), its own postings, lengths, citekeys, fingerprints, flags and
positions, and what BM25 needs of the whole corpus: ``global_df`` (every term's document frequency, an
array) and, in the manifest's ``shard`` object, the document count and the mean document length (a JSON
float: it reads back to the same bits). ``Shard.idf`` and ``Shard.norm`` are computed from them by the
same functions ``TermIndex`` uses on the whole index (``bm25_idf``, ``length_norm``: elementwise, so a
shard's norms are the whole index's norms of its documents, bit for bit), and the numba kernel sums each
document's contributions in the same term order, so a shard's scores are the whole index's scores. Document
ids follow citekey order and shards are consecutive ranges, so the global id is ``start + local id`` and
the tie-break (score descending, then id ascending) survives the merge (``kernels.shardmerge``).

``chitragupta index --shards N`` writes the set after the document index, at most one shard a document (no
shard is empty: each would still hold the whole vocabulary); the count stays recorded in ``SET``, and a
later ``index`` cuts the set again from its new generation (``--shards 0`` removes it), or, when the set is
current, verifies every shard whole (checksums and the pass over the postings, as the index itself is
verified) and cuts again any that is damaged. A
reader checks that every shard names the set's source generation; a set cut from another generation than
the current index is stale (``ShardSet.source``), and the shards are cut again or the search refused.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chitragupta.files import atomic_write_text, read_small
from chitragupta.engine.index import doc as doc_index
from chitragupta.engine.index import store
from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.kernels.types import Postings, bm25_idf, length_norm

__all__ = ["FOLDER", "SET_NAME", "Shard", "ShardSet", "ranges", "cut", "write", "read_set", "read_set_or_none",
           "open_shard", "whole", "remove", "refresh", "repair", "shard_count", "folder_of", "MAX_SHARDS"]

FOLDER = "shards"
SET_NAME = "SET"
MAX_SHARDS = 4096
_SET_SCHEMA = 1


def folder_of(ws) -> Path:
    """``content/index/shards`` of the workspace ``ws``."""
    return ws.index_dir / FOLDER


def refresh(ws, index, count: int | None) -> tuple[ShardSet | None, str | None]:
    """Keep the shard set of ``ws`` in step with ``index`` (its current document index, verified, as
    ``manage.refresh`` returns it): ``count`` None -- the recorded count, cut again when the set is stale
    (nothing without a set); 0 -- the set removed; N -- N shards, at most one a document (``shard_count``).
    A current set is verified whole, as the index is, and a damaged shard cut again. Returns (the set or
    None, what was done: "cut", "removed", "repaired ..." naming the shards and why, or None when nothing
    was). Takes the workspace lock."""
    folder = folder_of(ws)
    with ws.lock("index (the shards)"):
        got = read_set_or_none(folder)
        if count == 0:
            return None, ("removed" if remove(folder) else None)
        if count is None:
            if got is None:
                return None, None
            count = got.count
        if got is not None and got.count == shard_count(index.n_docs, count) and got.current_for(index):
            return got, repair(got, index)
        return write(folder, index, count), "cut"


def shard_count(n_docs: int, count: int) -> int:
    """The shards ``count`` asks for, at most one a document: no shard is empty (one for an empty index)."""
    return max(1, min(count, n_docs))


def repair(shard_set: "ShardSet", index) -> str | None:
    """Open every shard of ``shard_set`` with every check and checksum; cut again from ``index`` (the
    current document index the set was cut from) each that fails. None when all passed, else "repaired"
    with the shards and why."""
    settings = index.manifest["settings"]
    damaged = []
    for i, (start, stop) in enumerate(shard_set.spans):
        try:
            open_shard(shard_set, i, settings, fields=doc_index.FIELDS, deep=True, verify=True)
        except IndexCorrupt as err:
            arrays = cut(index, start, stop)
            store.save(shard_set.shard_folder(i), _manifest_of(index, arrays, i, shard_set.count, start, stop), arrays)
            damaged.append(f"{shard_set.shard_folder(i).name} ({err})")
    return f"repaired: {len(damaged)} damaged shard(s) cut again: {'; '.join(damaged)}" if damaged else None


def read_set_or_none(folder: Path) -> "ShardSet | None":
    """``read_set``, with a set that cannot be read taken as none (it is written again)."""
    try:
        return read_set(folder)
    except IndexCorrupt:
        return None


def ranges(n_docs: int, count: int) -> list[tuple[int, int]]:
    """``count`` consecutive document ranges covering ``0..n_docs - 1``, their sizes differing by at most one
    (a range is empty when there are fewer documents than shards)."""
    if count < 1:
        raise ValueError(f"a shard count must be >= 1, got {count}")
    bounds = [i * n_docs // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _table_slice(blob: np.ndarray, offsets: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = int(offsets[start]), int(offsets[stop])
    return np.array(blob[lo:hi]), np.asarray(offsets[start:stop + 1], dtype=np.int64) - lo


def cut(index, start: int, stop: int) -> dict[str, np.ndarray]:
    """The arrays of the shard of ``index`` (an opened ``DocIndex``) over documents ``start..stop - 1``."""
    arrays = index._arrays
    indptr = np.asarray(arrays["indptr"])
    indices = np.asarray(arrays["indices"])
    keep = (indices >= start) & (indices < stop)
    kept = np.zeros(indices.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep, out=kept[1:])
    sel = np.flatnonzero(keep)
    del keep
    out = {
        "indptr": kept[indptr],
        "indices": (indices[sel] - start).astype(np.int32),
        "tf": np.asarray(arrays["tf"])[sel],
        "doc_len": np.array(arrays["doc_len"][start:stop]),
        "fingerprints": np.array(arrays["fingerprints"][start:stop]),
        "flags": np.array(arrays["flags"][start:stop]),
        "global_df": np.diff(indptr).astype(np.int64),
    }
    del kept
    for f in doc_index.FIELDS:
        out[f"tf_{f}"] = np.asarray(arrays[f"tf_{f}"])[sel]
    for name in ("vocab_blob", "vocab_offsets"):
        out[name] = np.array(arrays[name])
    out["citekeys_blob"], out["citekeys_offsets"] = _table_slice(arrays["citekeys_blob"], arrays["citekeys_offsets"],
                                                                  start, stop)
    got = index.positions
    if got is not None:
        from chitragupta.kernels.phrase import by_term

        seq, ptr = got
        lo, hi = int(ptr[start]), int(ptr[stop])
        out["seq"] = np.array(seq[lo:hi])
        out["seq_ptr"] = np.asarray(ptr[start:stop + 1], dtype=np.int64) - lo
        out["tpos"], out["tpos_ptr"] = by_term(out["seq"], out["seq_ptr"], len(index.vocab))
    return out


@dataclass(frozen=True)
class ShardSet:
    """What ``SET`` says: ``source`` (the whole index's generation the shards were cut from), its citekeys
    digest and document count, and each shard's ``(start, stop)``."""

    folder: Path
    source: str
    citekeys_digest: str
    n_docs: int
    spans: tuple[tuple[int, int], ...]

    @property
    def count(self) -> int:
        return len(self.spans)

    def shard_folder(self, i: int) -> Path:
        return self.folder / f"{i:04d}"

    def current_for(self, index) -> bool:
        """Whether the set was cut from ``index``'s generation (an opened ``DocIndex``)."""
        path = getattr(index, "path", None)
        return path is not None and path.name == self.source and index.n_docs == self.n_docs


def _manifest_of(index, arrays: dict, i: int, count: int, start: int, stop: int) -> dict:
    from chitragupta.kernels.integrity import scan_field

    written = Postings(arrays["indptr"], arrays["indices"], arrays["tf"], arrays["doc_len"])
    n = stop - start
    whole = index.postings
    return dict(
        doc_index.expected_manifest(index.manifest["settings"]),
        citekeys_digest=index.manifest.get("citekeys_digest"),
        field_sums={f: list(scan_field(written.indices, written.tf, arrays[f"tf_{f}"])[1:]) for f in doc_index.FIELDS},
        stats={"n_docs": n, "n_terms": len(index.vocab), "nnz": int(arrays["indices"].shape[0]),
               "avgdl": float(arrays["doc_len"].mean()) if n else 0.0},
        shard={"index": i, "count": count, "start": start, "stop": stop, "source": index.path.name,
               "n_docs": whole.n_docs, "avgdl": whole.avgdl(), "nnz": whole.nnz},
    )


def write(folder: Path, index, count: int) -> ShardSet:
    """Cut ``index`` (the current, verified ``DocIndex``, opened from its generation) into ``count`` shards
    (``shard_count``: at most one a document) under ``folder`` and name them in ``SET`` (last). The caller
    holds the workspace lock."""
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"a shard count must be within 1..{MAX_SHARDS}, got {count}")
    if getattr(index, "path", None) is None:
        raise ValueError("the index to cut has no generation on disk")
    count = shard_count(index.n_docs, count)
    spans = ranges(index.n_docs, count)
    for i, (start, stop) in enumerate(spans):
        arrays = cut(index, start, stop)
        store.save(folder / f"{i:04d}", _manifest_of(index, arrays, i, count, start, stop), arrays)
        del arrays
    record = {"schema": _SET_SCHEMA, "source": index.path.name, "citekeys_digest": index.manifest.get("citekeys_digest"),
              "n_docs": index.n_docs, "spans": [list(s) for s in spans]}
    atomic_write_text(folder / SET_NAME, json.dumps(record, sort_keys=True) + "\n")
    for p in folder.iterdir():  # shards of a larger set before
        if p.is_dir() and p.name.isdigit() and int(p.name) >= count:
            shutil.rmtree(p, ignore_errors=True)
    return read_set(folder)


def remove(folder: Path) -> bool:
    """Remove the shard set (``SET`` first, so no reader takes a half-removed set); whether there was one."""
    try:
        os.unlink(folder / SET_NAME)
    except FileNotFoundError:
        had = False
    else:
        had = True
    if folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
    return had


def read_set(folder: Path) -> ShardSet | None:
    """The set ``SET`` names; None when there is none; IndexCorrupt when it is not readable as one."""
    try:
        record = json.loads(read_small(folder / SET_NAME, limit=1 << 20))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise IndexCorrupt(f"unreadable shard set ({type(err).__name__}: {str(err)[:200]})") from None
    if not isinstance(record, dict) or record.get("schema") != _SET_SCHEMA:
        raise IndexCorrupt("the shard set is not one this version writes")
    spans, n = record.get("spans"), record.get("n_docs")
    ok = (isinstance(record.get("source"), str) and type(n) is int and n >= 0 and isinstance(spans, list)
          and 1 <= len(spans) <= MAX_SHARDS
          and all(isinstance(s, list) and len(s) == 2 and all(type(x) is int for x in s) for s in spans))
    if not ok or [tuple(s) for s in spans] != ranges(n, len(spans)):
        raise IndexCorrupt("the shard set's ranges do not cover its documents")
    return ShardSet(folder, record["source"], str(record.get("citekeys_digest")), n, tuple(tuple(s) for s in spans))


@dataclass
class Shard:
    """An opened shard (or the whole index as one shard, ``whole``): its ``DocIndex`` over documents
    ``start..stop - 1``, and the whole corpus's statistics its scores are computed with."""

    index: object  # DocIndex
    start: int
    stop: int
    n_docs: int  # of the whole index
    avgdl: float  # of the whole index
    global_df: np.ndarray | None  # None: the index is the whole one (its own df)
    _idf: np.ndarray | None = None
    _norm: tuple | None = None

    @property
    def idf(self) -> np.ndarray:
        """BM25's idf of every term, from the whole index's document frequencies and count."""
        if self.global_df is None:
            return self.index.idf_
        if self._idf is None:
            self._idf = bm25_idf(self.global_df, self.n_docs)
        return self._idf

    def norm(self, k1: float, b: float) -> np.ndarray:
        """``k1 * (1 - b + b * dl / avgdl)`` of the shard's documents, avgdl the whole index's."""
        if self.global_df is None:
            return self.index.norm(k1, b)
        key = (float(k1), float(b))
        if self._norm is None or self._norm[0] != key:
            self._norm = (key, length_norm(self.index.postings.doc_len, self.avgdl, k1, b))
        return self._norm[1]

    def score(self, batch, params, k: int, allowed=None):
        """The top-k (``TopK``, the shard's own ids) of ``batch`` (a ``QueryBatch`` of the vocabulary's
        ids) under ``params``, by the numba kernel with the whole index's idf and norms; ``allowed``: per
        query None or a bool mask over the shard's documents. The index passes its deep check first."""
        from chitragupta.kernels.cpu import score_topk

        self.index.check_deep(fields=[name for name, _d in params.active_fields()])
        return score_topk(self.index.postings, batch, params, k, idf=self.idf, norm=self.norm(params.k1, params.b),
                          allowed=allowed)


def whole(index) -> Shard:
    """The whole document index as one shard (the query-block split of an unsharded index)."""
    return Shard(index, 0, index.n_docs, index.n_docs, index.postings.avgdl(), None)


def open_shard(shard_set: ShardSet, i: int, settings: dict, *, fields: tuple[str, ...] = (),
               deep: bool = False, verify: bool = False) -> Shard:
    """Open shard ``i`` of ``shard_set`` with ``settings`` (the workspace's index settings): every check
    ``doc.open_index`` makes (``verify``: every checksum), and that it is the shard the set names (cut from
    the set's source, over its range), with a ``global_df`` of the vocabulary's length. IndexCorrupt
    otherwise."""
    if not 0 <= i < shard_set.count:
        raise IndexCorrupt(f"the shard set has {shard_set.count} shards, not a shard {i}")
    index = doc_index.open_index(shard_set.shard_folder(i), settings, fields=fields, deep=deep, verify=verify)
    start, stop = shard_set.spans[i]
    meta = index.manifest.get("shard")
    if not isinstance(meta, dict):
        raise IndexCorrupt(f"shard {i} has no shard record in its manifest")
    if (meta.get("source"), meta.get("index"), meta.get("count"), meta.get("start"), meta.get("stop"),
            meta.get("n_docs")) != (shard_set.source, i, shard_set.count, start, stop, shard_set.n_docs):
        raise IndexCorrupt(f"shard {i} was cut from another index than the set names (a rewrite under way?)")
    if index.n_docs != stop - start:
        raise IndexCorrupt(f"shard {i} holds {index.n_docs} documents, its range {stop - start}")
    avgdl = meta.get("avgdl")
    if type(avgdl) is not float or not (avgdl > 0 and np.isfinite(avgdl)):
        raise IndexCorrupt(f"shard {i}'s mean document length is not a positive number")
    from chitragupta.engine.index.terms import array_of

    gdf = array_of(index._arrays, "global_df", np.int64, length=len(index.vocab))
    if gdf.shape[0] and (int(gdf.min()) < 0 or int(gdf.max()) > shard_set.n_docs):
        raise IndexCorrupt(f"shard {i}'s document frequencies are outside 0..{shard_set.n_docs}")
    return Shard(index, start, stop, shard_set.n_docs, avgdl, np.asarray(gdf))
