"""The embed stage: every ledger row's chunks encoded into the FAISS store, resumable.

    lines = run_stage(ws, rows, device="cpu")                        # the model on this machine
    lines = run_stage(ws, rows, device="cpu", encode_stream=stream)  # any EncodeStream (a Ray cluster's)

A document is ``chitragupta.enrich.chunking.document_text`` (its ledger abstract when it has no text; a row
with neither is skipped and named), cut and encoded as ``chitragupta.enrich.stream`` says (``title +
newline + chunk``); its vectors go to the store (``chitragupta.enrich.store``) under
``content/faiss/<model-slug>/``. Search is ``chitragupta.enrich.search.EmbedSearcher``.

What a run does, in order (each step a named function or object below):

1. ``Known``: what the store on disk and its committed segments hold, per citekey (``KnownDoc``).
2. ``Planner.plan``: per row a ``Doc`` -- kept (its stamp, else its text hash, is the known one) or
   fresh (its chunk spans to encode); rows without text skipped, known rows gone counted as removed.
   Nothing to encode, remove or restamp: one line, no model loaded (the store's identity comes from the
   model folder's JSON files, ``chitragupta.enrich.encoders.model_spec``).
3. ``check_model``: before encoding, the model that will run is asked for its recipe; when it differs
   from what its folder said, the store is rebuilt from scratch (and said so).
4. ``encode_fresh``: the fresh chunks through the stream (``checked_blocks``) into an ``Encoding``;
   finished documents are committed as checksummed segments (``SegmentWriter``) every
   ``COMMIT_SHARE`` of the job's chunks (``commit_every``) or ``COMMIT_EVERY_SECONDS`` seconds, whichever
   comes first (``commit_due``; checked after each block), and on Ctrl-C/SIGTERM on the way out; a rerun
   reads them and encodes only what is missing, so a run killed at 60% of its time keeps most of its
   work. ``progress(done, total)`` after every block. The driver holds only the chunks not committed yet
   (``Encoding``): past ``HOLD_CHUNKS`` of them the finished documents are committed whatever the cadence,
   so its memory while encoding is bounded by that and a block, not by the run.
5. The store is written whole once (``assemble``: committed documents read back from their segments'
   files, memory-mapped), the segments removed, and the report says the device
   the stream really encoded on (a Ray cluster's actors report theirs).

The encoder and the stream are re-exported here for the modules that import them from this one.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from chitragupta.files import load_npy
from chitragupta.enrich.encoders import (DEFAULT_MODEL, Encoder, ModelSpec, QueryEncoder, load_encoder,  # noqa: F401
                                         load_query_encoder, model_slug, model_spec, offline_env,
                                         resolve_model_source)
from chitragupta.enrich.stream import (CHUNK_OVERLAP, CHUNK_WORDS, EncodeStream, as_stream,  # noqa: F401
                                       checked_blocks, chunker_for, document_chunks, encode_input, recipe)
from chitragupta.errors import UsageError

__all__ = ["run_stage", "InputStamps", "text_hash", "COMMIT_SHARE", "COMMIT_EVERY_SECONDS", "COMMIT_ENV",
           "commit_every", "commit_due", "HOLD_CHUNKS",
           # re-exported from chitragupta.enrich.encoders and chitragupta.enrich.stream
           "Encoder", "QueryEncoder", "load_encoder", "load_query_encoder", "model_slug", "DEFAULT_MODEL",
           "resolve_model_source", "offline_env", "ModelSpec", "model_spec", "EncodeStream", "recipe",
           "encode_input", "CHUNK_WORDS", "CHUNK_OVERLAP"]

log = logging.getLogger(__name__)

COMMIT_SHARE = 0.05  # a commit every 5% of the chunks a run encodes ...
COMMIT_EVERY_SECONDS = 10.0  # ... or every 10 s, whichever comes first
COMMIT_ENV = "CHITRAGUPTA_EMBED_COMMIT_CHUNKS"  # tests and the kill campaign: a fixed number of chunks
# The most encoded chunks the driver holds before it commits the finished documents as a segment, whatever
# the cadence above: ~50 MB at 384 dimensions, so a run of 10^8 chunks holds what one of 10^4 does.
HOLD_CHUNKS = 32768


def commit_every(total: int) -> int:
    """Chunks between commits of a run that encodes ``total`` chunks: ``COMMIT_SHARE`` of them, rounded
    up (at least one); ``$CHITRAGUPTA_EMBED_COMMIT_CHUNKS`` sets a fixed number instead."""
    raw = os.environ.get(COMMIT_ENV, "").strip()
    if not raw:
        return max(1, math.ceil(total * COMMIT_SHARE))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"{COMMIT_ENV}={raw!r}: expected a whole number of chunks >= 1")
    return n


def commit_due(pending: int, every: int, waited: float) -> bool:
    """Commit now: ``pending`` finished chunks not yet committed reach ``every`` (``commit_every``), or
    ``waited`` seconds since the last commit (or the start) reach ``COMMIT_EVERY_SECONDS``; never with
    nothing pending."""
    return pending > 0 and (pending >= every or waited >= COMMIT_EVERY_SECONDS)


def text_hash(title: str, text: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (title, text):
        b = part.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


# 2: issue 21 (appendices kept, hyphens joined); 3: issue 29 (the index's text, never docling's Markdown).
# Bump when document_text's rules change: every stamp then differs and texts are re-read
TEXT_RULES = "3"


class InputStamps:
    """``stamps(row) -> str``: what a row's embed input looks like without reading it: its title, abstract
    and parsed path, and the size, mtime and inode of the files ``document_text`` reads (the docling
    Markdown, the parsed text, its sidecar). Equal stamps: the document is taken as unchanged without
    reading its text; a differing stamp only means the text is read and its hash compared. Each folder
    is listed once, so only files that exist are stat'ed."""

    def __init__(self, ws):
        self.root, self.docling = str(ws.root), os.path.join(str(ws.content), "docling")
        self._listed: dict[str, frozenset] = {}

    def _names(self, folder: str) -> frozenset:
        names = self._listed.get(folder)
        if names is None:
            try:
                names = frozenset(os.listdir(folder))
            except OSError:
                names = frozenset()
            self._listed[folder] = names
        return names

    def _stat(self, folder: str, name: str) -> str:
        if name not in self._names(folder):
            return "-"
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            return "-"
        return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

    def __call__(self, row) -> str:
        from chitragupta.enrich.chunking import docling_name

        parsed = row.parsed_path or ""
        parts = [TEXT_RULES, row.title or "", row.abstract or "", parsed,
                 self._stat(self.docling, docling_name(row.citekey, row.parsed_path) + ".md")]
        if parsed:
            folder, name = os.path.split(os.path.join(self.root, parsed))
            stem, dot, _ext = name.rpartition(".")
            parts += [self._stat(folder, name), self._stat(folder, (stem if dot else name) + ".passages.json")]
        h = hashlib.blake2b(digest_size=16)
        for part in parts:
            b = part.encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
        return h.hexdigest()


def _row_text(ws, row) -> str:
    from chitragupta.enrich.chunking import document_text

    text = document_text(ws, row.citekey, row.parsed_path)
    if not text.strip():
        text = (row.abstract or "").strip()
    return text


def _names(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


# -- what is known, and what is to do ----------------------------------------------------------------------

@dataclass
class Chunks:
    """One document's vectors and where its chunks lie in its text."""

    vectors: np.ndarray  # (n, dim) float32
    chunk_no: np.ndarray  # (n,) int32
    starts: np.ndarray  # (n,) int64
    ends: np.ndarray  # (n,) int64

    @classmethod
    def of_spans(cls, vectors: np.ndarray, spans) -> "Chunks":
        return cls(vectors, np.arange(len(spans), dtype=np.int32), np.array([a for a, _ in spans], dtype=np.int64),
                   np.array([b for _, b in spans], dtype=np.int64))


@dataclass
class KnownDoc:
    """A document as the store or a committed segment holds it."""

    title: str
    hash: str
    text: str
    stamp: str | None
    chunks: Chunks


@dataclass
class Doc:
    """One row of the plan: kept (``spans`` None: its known chunks stay) or fresh (``spans`` to encode)."""

    citekey: str
    title: str
    text: str
    hash: str
    spans: list[tuple[int, int]] | None = None

    @property
    def kept(self) -> bool:
        return self.spans is None


@dataclass
class Plan:
    docs: list[Doc]
    skipped: list[str]
    removed: list[str]

    @property
    def fresh(self) -> list[Doc]:
        return [d for d in self.docs if not d.kept]

    @property
    def total(self) -> int:
        """Chunks to encode."""
        return sum(len(d.spans) for d in self.fresh)


class Known:
    """What the store on disk and its committed segments hold (``docs``: citekey -> ``KnownDoc``; a later
    segment wins); ``resumed``: citekey -> chunks, for documents an interrupted run committed."""

    def __init__(self, folder: Path, model: str, dim: int | None, want: dict, rel: str):
        from chitragupta.enrich.store import StoreCorrupt, base_id, load_store, read_segments, recover, segments_folder

        recover(folder)  # a save killed between its two renames: the store moved aside comes back
        self.lines: list[str] = []
        self.seg_folder = segments_folder(folder)
        self.base = base_id(folder)
        try:
            self.old = load_store(folder, model=model, dim=dim, recipe=want, with_index=False, check_index=True)
        except StoreCorrupt as err:
            self.old = None
            self.lines.append(f"embed: the store in {rel}/ is not usable ({err}); rebuilt from scratch")
        self.docs: dict[str, KnownDoc] = {}
        if self.old is not None:
            old = self.old
            stamps = old.stamps or [None] * len(old.citekeys)
            for i, (key, rows) in enumerate(old.doc_rows().items()):
                self.docs[key] = KnownDoc(old.titles[i], old.hashes[i], old.texts[i], stamps[i],
                                          Chunks(old.vectors[rows], old.chunk_no[rows], old.char_start[rows],
                                                 old.char_end[rows]))
        self.dim = dim if dim is not None else (self.old.dim if self.old is not None else None)
        self.segments, notes = read_segments(self.seg_folder, base=self.base, model=model, dim=self.dim, recipe=want)
        self.lines += [f"embed: {n}" for n in notes]
        self.resumed: dict[str, int] = {}
        for seg in self.segments:
            self.dim = self.dim or int(seg.vectors.shape[1])
            lo = 0
            for d in seg.docs:
                n = len(d["starts"])
                stamp = d.get("stamp") if isinstance(d.get("stamp"), str) else None
                spans = list(zip(d["starts"], d["ends"]))
                self.docs[d["citekey"]] = KnownDoc(d["title"], d["hash"], d["text"], stamp,
                                                   Chunks.of_spans(seg.vectors[lo:lo + n], spans))
                self.resumed[d["citekey"]] = n
                lo += n
        self.next_segment = max((s.number for s in self.segments), default=0) + 1

    def forget(self, dim: int) -> None:
        """Start over (the model is not what its folder said): nothing known, no segment kept."""
        from chitragupta.enrich.store import drop_segments

        self.docs, self.resumed, self.old, self.segments = {}, {}, None, []
        drop_segments(self.seg_folder)
        self.dim, self.next_segment = dim, 1

    def unchanged(self, plan: Plan, stamps: dict[str, str]) -> bool:
        """The store on disk is the plan exactly: nothing to encode, remove or restamp, no segment."""
        old = self.old
        if old is None or plan.fresh or plan.removed or self.segments:
            return False
        if [d.citekey for d in plan.docs] != old.citekeys:
            return False
        return not any(old.stamps is None or old.stamps[i] != stamps[k] for i, k in enumerate(old.citekeys))


class Planner:
    """Decides per row what to do; each row's files are stamped once and its text read at most once."""

    def __init__(self, ws, rows, chunker=None):
        self.ws, self.rows, self.chunker = ws, list(rows), chunker
        stamp = InputStamps(ws)
        self.stamps = {row.citekey: stamp(row) for row in self.rows}
        self._texts: dict[str, str] = {}

    def _text(self, row) -> str:
        if row.citekey not in self._texts:
            self._texts[row.citekey] = _row_text(self.ws, row)
        return self._texts[row.citekey]

    def plan(self, known: Known) -> Plan:
        docs, skipped = [], []
        for row in self.rows:
            key, title = row.citekey, row.title or ""
            k = known.docs.get(key)
            if k is not None and k.stamp is not None and k.stamp == self.stamps[key]:
                docs.append(Doc(key, k.title, k.text, k.hash))
                continue
            text = self._text(row)
            if not text.strip():
                skipped.append(key)
                continue
            h = text_hash(title, text)
            if k is not None and k.hash == h:
                docs.append(Doc(key, title, text, h))
            else:
                docs.append(Doc(key, title, text, h, document_chunks(text, title, self.chunker)))
        keys = {d.citekey for d in docs}
        return Plan(docs, skipped, [k for k in known.docs if k not in keys])


# -- encoding, with commits -------------------------------------------------------------------------------

class Encoding:
    """The fresh documents' vectors as the stream returns them, and the number of documents whose every
    chunk has come back (``complete``). The driver holds only what is not committed yet: the blocks from
    chunk ``held_from`` on (``held``); a commit writes the finished documents' vectors as a segment and
    ``release``s them, and ``chunks`` reads a committed document back from its segment's file (memory-mapped)
    when the store is assembled. Held chunks stay under ``HOLD_CHUNKS`` plus a block plus one document
    (``SegmentWriter.due``), however many the run encodes."""

    def __init__(self, fresh: list[Doc], dim: int | None):
        self.fresh, self.dim = fresh, dim
        self.ends = np.cumsum([len(d.spans) for d in fresh]).tolist()
        self.total = self.ends[-1] if self.ends else 0
        self.done = self.complete = 0
        self._blocks: list[np.ndarray] = []  # the held chunks, from held_from on, as they came
        self.held_from = 0
        self.peak_held = 0  # the most chunks held at once (for the tests and the log)
        self._where: dict[int, tuple[Path, int]] = {}  # committed fresh document -> (its segment's .npy, first row)
        self._maps: dict[Path, np.ndarray] = {}

    @property
    def held(self) -> int:
        return self.done - self.held_from

    def add(self, block: np.ndarray) -> None:
        self.dim = self.dim or int(block.shape[1])
        self._blocks.append(block)
        self.done += len(block)
        self.peak_held = max(self.peak_held, self.held)
        while self.complete < len(self.fresh) and self.ends[self.complete] <= self.done:
            self.complete += 1

    def take(self, lo: int, hi: int) -> np.ndarray:
        """The vectors of chunks ``lo..hi - 1``, all held."""
        if lo < self.held_from or hi > self.done:
            raise ValueError(f"chunks {lo}..{hi - 1} are not held ({self.held_from}..{self.done - 1} are)")
        out = np.empty((hi - lo, self.dim or 0), dtype=np.float32)
        at = self.held_from
        for b in self._blocks:
            a, z = max(lo, at), min(hi, at + len(b))
            if a < z:
                out[a - lo:z - lo] = b[a - at:z - at]
            at += len(b)
        return out

    def committed(self, a: int, b: int, npy: Path) -> None:
        """Fresh documents ``a..b - 1`` are in the segment whose vectors file is ``npy`` (from its row 0)."""
        base = self.chunk_end(a)
        for j in range(a, b):
            self._where[j] = (npy, self.chunk_end(j) - base)

    def release(self, upto: int) -> None:
        """Drop the held chunks before ``upto`` (committed): whole blocks go, a block cut is copied short."""
        while self._blocks and self.held_from < upto:
            b = self._blocks[0]
            if self.held_from + len(b) <= upto:
                self._blocks.pop(0)
                self.held_from += len(b)
            else:
                self._blocks[0] = b[upto - self.held_from:].copy()
                self.held_from = upto

    def chunk_end(self, docs: int) -> int:
        """Chunks up to the end of the first ``docs`` fresh documents."""
        return self.ends[docs - 1] if docs else 0

    def chunks(self, j: int) -> Chunks:
        d = self.fresh[j]
        lo, hi = self.chunk_end(j), self.ends[j]
        if j in self._where:
            npy, row = self._where[j]
            vecs = self._maps.get(npy)
            if vecs is None:
                vecs = self._maps[npy] = load_npy(npy, mmap_mode="r")
            return Chunks.of_spans(vecs[row:row + hi - lo], d.spans)
        return Chunks.of_spans(self.take(lo, hi), d.spans)


@dataclass
class SegmentWriter:
    """Commits finished documents as segments (``chitragupta.enrich.store.write_segment``)."""

    known: Known
    model: str
    recipe: dict
    stamps: dict[str, str]
    every: int
    docs: int = 0  # fresh documents committed so far
    chunks: int = 0  # their chunks
    at: float = field(default_factory=time.monotonic)

    def due(self, enc: Encoding) -> bool:
        """Encoding goes on, and ``commit_due`` says the finished documents not yet committed are due, or
        the driver holds ``HOLD_CHUNKS`` chunks (memory bounded by that, not by the run)."""
        pending = enc.chunk_end(enc.complete) - self.chunks
        return enc.done < enc.total and pending > 0 and (
            commit_due(pending, self.every, time.monotonic() - self.at) or enc.held >= HOLD_CHUNKS)

    def commit(self, enc: Encoding) -> None:
        from chitragupta.enrich.store import write_segment

        a, b = self.docs, enc.complete
        if b <= a:
            return
        lo, hi = enc.chunk_end(a), enc.chunk_end(b)
        seg_docs = [{"citekey": d.citekey, "title": d.title, "hash": d.hash, "text": d.text,
                     "stamp": self.stamps[d.citekey], "starts": [s for s, _ in d.spans],
                     "ends": [e for _, e in d.spans]} for d in enc.fresh[a:b]]
        write_segment(self.known.seg_folder, self.known.next_segment, base=self.known.base, model=self.model,
                      dim=enc.dim, recipe=self.recipe, docs=seg_docs, vectors=enc.take(lo, hi))
        enc.committed(a, b, self.known.seg_folder / f"seg-{self.known.next_segment:06d}.npy")
        enc.release(hi)
        self.known.next_segment += 1
        self.docs, self.chunks, self.at = b, hi, time.monotonic()
        log.info("embed: %d of %d chunks encoded and committed", hi, enc.total)

    def commit_on_the_way_out(self, enc: Encoding) -> None:
        """Ctrl-C, SIGTERM (a KeyboardInterrupt from the CLI) or an error: keep what is finished."""
        try:
            self.commit(enc)
            if self.docs:
                log.warning("embed: stopped; %d of %d chunks (%d doc(s)) committed, a rerun encodes the rest",
                            self.chunks, enc.total, self.docs)
        except Exception as err:  # the original exception is the one to report
            log.warning("embed: could not commit the finished documents (%s)", err)


def encode_fresh(stream: EncodeStream, plan: Plan, dim: int | None, writer: SegmentWriter,
                 progress=None) -> Encoding:
    """The plan's fresh chunks through ``stream``, committed as they finish (see ``SegmentWriter``)."""
    enc = Encoding(plan.fresh, dim)
    if not enc.total:
        return enc
    texts = [encode_input(d.title, d.text[s:e]) for d in enc.fresh for s, e in d.spans]
    if progress:
        progress(0, enc.total)
    try:
        for block in checked_blocks(stream, texts, dim):
            enc.add(block)
            if progress:
                progress(enc.done, enc.total)
            if writer.due(enc):
                writer.commit(enc)
    except BaseException:
        writer.commit_on_the_way_out(enc)
        raise
    return enc


def assemble(model: str, dim: int, want: dict, docs: list[Doc], parts: dict[str, Chunks]):
    """A Store of ``docs`` (in order) from each one's ``Chunks``."""
    from chitragupta.enrich.store import Store

    def cat(name: str, dtype, shape=(0,)):
        arrs = [getattr(parts[d.citekey], name) for d in docs]
        return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros(shape, dtype)

    chunk_doc = [np.full(len(parts[d.citekey].chunk_no), pos, dtype=np.int32) for pos, d in enumerate(docs)]
    return Store(model=model, dim=dim, recipe=want, citekeys=[d.citekey for d in docs],
                 titles=[d.title for d in docs], hashes=[d.hash for d in docs], texts=[d.text for d in docs],
                 vectors=cat("vectors", np.float32, (0, dim)),
                 chunk_doc=np.concatenate(chunk_doc) if chunk_doc else np.zeros(0, np.int32),
                 chunk_no=cat("chunk_no", np.int32), char_start=cat("starts", np.int64), char_end=cat("ends", np.int64))


# -- the stage ---------------------------------------------------------------------------------------------

@dataclass
class Target:
    """Where the store of a model goes, and how the report names it."""

    folder: Path
    rel: str

    @classmethod
    def of(cls, ws, slug: str) -> "Target":
        from chitragupta.enrich.store import store_folder

        folder = ws.inside_content(store_folder(ws.content, slug))
        return cls(folder, ws.relative(folder) if folder.exists() else f"content/faiss/{slug}")


def check_model(stream: EncodeStream, want: dict, known: Known, planner: Planner, plan: Plan,
                target: Target, lines: list[str]) -> tuple[dict, Plan]:
    """The recipe and the plan to encode with: the model that will run is asked; when its recipe or
    dimension is not what its folder said, everything is encoded again under its own."""
    model = stream.model()
    if recipe(model) == want and (known.dim is None or model.dim is None or model.dim == known.dim):
        return want, plan
    lines.append(f"embed: the model's recipe or dimension differs from what its folder says; the store "
                 f"in {target.rel}/ is rebuilt from scratch")
    known.forget(model.dim)
    planner.chunker = chunker_for(model)
    return recipe(model), planner.plan(known)


def run_stage(ws, rows, *, device: str, progress=None, encode_stream=None) -> list[str]:
    """Chunk, encode and store every ledger row in ``rows``; unchanged documents keep their vectors.

    ``encode_stream``: an ``EncodeStream`` (or a plain ``texts -> blocks`` callable); default: the model
    loaded here on ``device``, only when there is something to encode and (unless its folder says its
    recipe) to know the store's identity. ``progress(done, total)`` counts chunks encoded. Returns the
    report lines (see the module's text for the steps).
    """
    from chitragupta.enrich.store import drop_segments, save_store

    stream = as_stream(encode_stream, ws.config.enrich, device)
    spec = stream.spec()
    target = Target.of(ws, spec.slug)
    want = recipe(spec)
    known = Known(target.folder, spec.model_name, spec.dim, want, target.rel)
    lines = list(known.lines)
    planner = Planner(ws, rows, chunker_for(spec))
    plan = planner.plan(known)
    if plan.skipped:
        lines.append(f"embed: skipped {len(plan.skipped)} source(s) with no text and no abstract (no file, or the "
                     f"parse failed): {_names(plan.skipped)}")
    if known.unchanged(plan, planner.stamps):
        drop_segments(known.seg_folder)  # only stale ones were there (removed with a note above), if any
        lines.append(f"embed: {len(plan.docs)} doc(s) unchanged, nothing to encode ({known.old.count} chunks in "
                     f"{target.rel}/)")
        return lines
    if plan.total:
        want, plan = check_model(stream, want, known, planner, plan, target, lines)
    dim = known.dim if known.dim is not None else spec.dim
    if plan.total and dim is None:
        dim = stream.model().dim
    writer = SegmentWriter(known, spec.model_name, want, planner.stamps, commit_every(plan.total))
    enc = encode_fresh(stream, plan, dim, writer, progress)
    parts = {d.citekey: known.docs[d.citekey].chunks for d in plan.docs if d.kept}
    parts.update((d.citekey, enc.chunks(j)) for j, d in enumerate(enc.fresh))
    dim = enc.dim if enc.dim is not None else (dim or 0)  # 0: nothing to encode and no store says it
    store = assemble(spec.model_name, dim, want, plan.docs, parts)
    store.stamps = [planner.stamps[d.citekey] for d in plan.docs]
    save_store(target.folder, store)
    drop_segments(known.seg_folder)
    kept = [d for d in plan.docs if d.kept]
    resumed = [d for d in kept if d.citekey in known.resumed]
    lines.append(f"embed: {len(enc.fresh)} doc(s) encoded ({enc.total} chunks), {len(kept)} unchanged, "
                 f"{len(plan.removed)} removed; {store.count} chunks of {len(plan.docs)} doc(s) in "
                 f"{ws.relative(target.folder)}/ (model {spec.model_name}, dim {dim}, on {stream.device})")
    if resumed:
        lines.append(f"embed: resumed: {len(resumed)} of the unchanged doc(s) "
                     f"({sum(known.resumed[d.citekey] for d in resumed)} chunks) were committed by an interrupted run")
    return lines
