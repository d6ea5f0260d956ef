"""Tokenizing the document index in blocks, in a process pool or in this process.

A *block* is a run of consecutive documents (by index position) tokenized on its own: a local
``Accumulator`` (its own provisional vocabulary, no stemming) reduces it to compact arrays -- the block's
vocabulary (the runs it saw beyond ``DROPPED_RUNS``, in first-seen order), per stream the counted
(unit, local id, count) triples sorted by unit then id, and, with positions, the local ids of every
run in order with each unit's start. ``merge_block`` maps the local ids to the build's provisional ids
with one dictionary lookup per *distinct* run of the block (never one per token) and appends the
arrays, so what the build finishes from is the same set of triples and the same positions in the same
unit order whatever the block size or the number of workers: the arrays written are identical to the
byte for any ``jobs``.

Memory: a worker holds one block (its triples, 12 bytes per distinct (unit, run) pair, and its ids, 4
bytes per run); at most ``2 * jobs`` finished blocks wait to be merged. Once the merged blocks hold more
than ``SPILL_BYTES`` (``Spill``), each further block's triples and ids are written to a temporary folder
beside the index's generations. The output arrays are never held whole either: ``Accumulator.finish``
splits every stream's triples by term range into scratch files of the new generation (one pass) and
writes the CSR a range of about ``csr.RANGE_POSTINGS`` postings at a time; ``Sequences.finish`` writes
``seq`` a block of ids at a time and ``tpos`` a range of ``csr.POSITIONS_PER_RANGE`` offsets at a time
(``store.NewGeneration``). What a build holds is then the blocks in flight, ``SPILL_BYTES``, one range,
the vocabulary and a few arrays per document -- not the postings.

Time: the passes of the finish are numpy sorts and counts (``kernels.build``), and the postings per term
and tokens per document they start from are tallied as blocks are merged (no pass over the spilled
triples before placing them). A build of less than ``POOL_FROM_BYTES`` of text in all stays in this
process and finishes in this thread (``doc.build``). With ``jobs`` > 1, once
the workers are done, the positions are written in a thread beside the CSR (``doc.build``), or without
positions the CSR's term ranges are computed in threads, each with its share of ``csr.RANGE_POSTINGS``:
the cores the workers had are used, and what is held at once stays about one range per thread.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from chitragupta.engine.index.csr import SEQ_BREAK, Accumulator, ChunkFile, Sequences, _chunk
from chitragupta.engine.index.source import FLAG_BAD_SIDECAR, FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR, DocSource, load_body, plain_body
from chitragupta.engine.text.tokenize import iter_runs_bytes, runs_bytes
from chitragupta.kernels.build import map_ids, remap as remap_ids
from chitragupta.kernels.charset import TOKEN_BYTES

assert b" " not in TOKEN_BYTES  # a block's vocabulary travels as its runs joined by spaces

__all__ = ["Block", "Spill", "SPILL_BYTES", "POOL_FROM_BYTES", "available_cores", "block_size", "small_text",
           "tokenize_block", "merge_block", "tokenize_blocks"]

SPILL_BYTES = 256 << 20  # merged triples and ids kept in memory before the rest go to disk

# text to tokenize below which a build stays in this process whatever ``jobs`` is
POOL_FROM_BYTES = 8 << 20
_MIN_BLOCK = 256
_MAX_BLOCK = 8192  # documents per block: what one worker holds at a time


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def small_text(sources, todo: np.ndarray, limit: int) -> bool:
    """Whether the documents ``todo`` hold fewer than ``limit`` bytes of text (titles, and the parsed texts'
    sizes: a packed reference's length, a file's size), counted until the sum reaches ``limit``: a
    corpus past it is told after its first few thousand documents."""
    from chitragupta.engine.library.texts import text_size

    total = 0
    for src in (sources if len(todo) == len(sources) else [sources[i] for i in todo.tolist()]):
        path = src.text_file
        total += len(src.title)
        told = src.ref
        if told is not None and told[0] == path:  # (a packed reference as the scan parsed it: its length)
            total += told[3]
        elif path is not None:
            # a packed reference's length is its tail ("...#offset+length"): no reference split (what
            # is counted decides the pool, never the arrays; a plain path is stat'ed)
            tail = path[path.rfind("+") + 1:]
            total += int(tail) if tail.isascii() and tail.isdigit() and "#" in path else text_size(path)
        if total >= limit:
            return False
    return True


def block_size(n_docs: int, jobs: int) -> int:
    """Documents per block: about four blocks per worker, within [_MIN_BLOCK, _MAX_BLOCK]."""
    return int(min(_MAX_BLOCK, max(_MIN_BLOCK, -(-n_docs // (4 * max(1, jobs))))))


@dataclass
class Block:
    """One tokenized block (see the module docstring); ``units`` are index positions."""

    units: np.ndarray  # int64, the documents of the block, ascending
    keys: bytes  # the local vocabulary: local id n_dropped + j -> keys.split(b" ")[j] (runs hold no space)
    streams: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # name -> (unit, local id, count) int32
    flags: np.ndarray  # uint8 per unit: FLAG_BAD_SIDECAR | FLAG_HAS_ABSTRACT found while reading it
    seq: np.ndarray | None = None  # int32 local ids (SEQ_BREAK kept), units in order
    seq_units: np.ndarray | None = None  # int64
    seq_starts: np.ndarray | None = None  # int64, offsets into seq, one per seq_units
    notes: list[str] = field(default_factory=list)
    cuts: list[tuple[str, int, int]] = field(default_factory=list)
    refs: dict = field(default_factory=dict)  # unit -> (entries, notes) of its reference list (``refs``: read)


def tokenize_block(units: np.ndarray, sources: list[DocSource], fields: tuple[str, ...], positions: bool,
                   fast: bool = True, carry: dict | None = None, refs: bool = False) -> Block:
    """Tokenize the documents ``sources`` (at index positions ``units``) into a ``Block``. ``fast``: with
    ``engine.index.tokenize_fast`` (the same Block; ``carry``: see ``tokenize_fast.block_parts``); below,
    the per-run path it is tested against. ``refs``: each text's reference list parsed too
    (``engine.index.references``)."""
    from chitragupta.engine.index import tokenize_fast
    from chitragupta.engine.index.references import parse

    if fast and tuple(fields) == tokenize_fast.FIELDS:
        return Block(**tokenize_fast.block_parts(units, sources, fields, positions, carry, refs))
    parsed = {}
    seqs = Sequences() if positions else None
    acc = Accumulator(fields=fields, stem=None, sequences=seqs)
    flags = np.zeros(len(units), dtype=np.uint8)
    notes: list[str] = []
    cuts: list[tuple[str, int, int]] = []
    for k, src in enumerate(sources):
        i = int(units[k])
        title_runs = runs_bytes(src.title)
        acc.add_runs(i, title_runs)
        acc.add_runs(i, title_runs, field="title")
        if seqs is not None:
            seqs.brk(i)
        if src.text_file is not None:
            # the scan found no sidecar: the .txt as it is (a sidecar written since changes the fingerprint)
            body = plain_body(src.text_file, lists=refs) if src.flags & FLAG_NO_SIDECAR else load_body(src.text_path, refs)
            if body.problem:
                flags[k] |= FLAG_BAD_SIDECAR
                notes.append(f"{body.problem}; indexed from its .txt without the reference cut")
            for runs in iter_runs_bytes(body.text):
                acc.add_runs(i, runs)
            if body.ref_words:
                cuts.append((src.citekey, body.ref_words, body.after_words))
            if body.abstract:
                flags[k] |= FLAG_HAS_ABSTRACT
                acc.add_runs(i, runs_bytes(body.abstract), field="abstract")
            if refs and body.references is not None:
                parsed[i] = parse(body)
    streams = {}
    for name, st in acc.streams.items():
        st.flush()
        chunks = st.chunks
        if len(chunks) == 1:
            streams[name] = chunks[0]
        elif not chunks:
            z = np.zeros(0, dtype=np.int32)
            streams[name] = (z, z, z)
        else:  # (a block past _FLUSH_TOKENS: chunks sorted by unit, a unit may span two; merged at finish)
            streams[name] = tuple(np.concatenate([c[j] for c in chunks]) for j in range(3))
    block = Block(np.asarray(units, dtype=np.int64), b" ".join(list(acc.vocab)[acc.n_dropped:]), streams, flags,
                  notes=notes, cuts=cuts, refs=parsed)
    if seqs is not None:
        block.seq = np.frombuffer(seqs.buf, dtype=np.int32).copy() if len(seqs.buf) else np.zeros(0, dtype=np.int32)
        block.seq_units = np.asarray(seqs.units, dtype=np.int64)
        block.seq_starts = np.asarray(seqs.starts, dtype=np.int64)
    return block


class Spill:
    """Where a build's merged blocks go once more than ``SPILL_BYTES`` are held: a folder
    ``.gseg<time>-<pid>.tmp`` in the index folder (named like a generation's temp folder, so the next
    save removes it if this process was killed); ``close`` removes it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.dir: Path | None = None
        self.held = 0
        self.files = 0
        self.failed = False

    def note(self, nbytes: int, acc: Accumulator) -> bool:
        """Count ``nbytes`` more merged; True when they go to disk."""
        if self.dir is None and not self.failed:
            self.held += nbytes
            if self.held > SPILL_BYTES:
                try:
                    self.folder.mkdir(parents=True, exist_ok=True)
                    d = self.folder / f".gseg{time.time_ns():x}-{os.getpid()}.tmp"
                    d.mkdir()
                except OSError:  # (a read-only or odd index folder: kept in memory; the save says why)
                    self.failed = True
                    return False
                self.dir = d
                if acc.sequences is not None:
                    acc.sequences.spill(d / "seq.i32")
        return self.dir is not None

    def chunk(self, units: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> ChunkFile:
        self.files += 1
        return ChunkFile(self.dir / f"c{self.files}.i32", units, terms, counts)

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def merge_block(acc: Accumulator, block: Block, spill: Spill | None = None) -> None:
    """Append ``block`` to the build's accumulator: its local ids mapped to ``acc``'s provisional ids
    (to disk past ``spill``'s budget)."""
    size = sum(12 * u.shape[0] for u, _t, _c in block.streams.values())
    size += 4 * block.seq.shape[0] if block.seq is not None else 0
    to_disk = spill is not None and spill.note(size, acc)
    d = acc.n_dropped
    keys = block.keys.split(b" ") if block.keys else []
    remap = np.empty(d + len(keys), dtype=np.int64)
    remap[:d] = np.arange(d)
    if keys:
        remap[d:] = np.fromiter(map(acc.vocab.__getitem__, keys), dtype=np.int64, count=len(keys))
    narrow = not remap.size or int(remap.max()) <= np.iinfo(np.int32).max
    for name, (u, t, c) in block.streams.items():
        if not u.size:
            continue
        st = acc.streams[name]
        st.flush()
        if narrow and u.dtype == np.int32 and c.dtype == np.int32 and t.dtype == np.int32:
            # (a block's arrays are already int32, counts capped: only the ids change, in one pass)
            ch = (u, map_ids(t, remap, SEQ_BREAK), c)
        else:
            ch = _chunk(u, remap[t], c)
        st.append(spill.chunk(*ch) if to_disk else ch, ch)
    if acc.sequences is not None and block.seq is not None:
        ids = block.seq if block.seq.flags.writeable else block.seq.copy()  # (the block's own: mapped in place)
        remap_ids(ids, remap, SEQ_BREAK)
        acc.sequences.extend_block(block.seq_units, block.seq_starts, ids)


def tokenize_blocks(todo: np.ndarray, sources, fields: tuple[str, ...], positions: bool, jobs: int,
                    progress: Callable[[int, int], None] | None = None, block: int | None = None,
                    refs: bool = False) -> Iterator[Block]:
    """The ``Block`` s of the documents ``todo`` (ascending positions into ``sources``), in order:
    tokenized here when ``jobs`` is 1, when there is one block, or when they hold less than
    ``POOL_FROM_BYTES`` of text (``small_text``: a pool's start -- the fork, the workers' first blocks --
    costs more than two processes save: an NPL-sized corpus, 11,429 abstracts, builds 0.08-0.14 s
    faster in one), else by ``jobs`` worker processes. The blocks are the same either way. ``refs``: as
    ``tokenize_block``'s."""
    n = len(todo)
    small = small_text(sources, todo, POOL_FROM_BYTES)
    if small:
        jobs = 1
    size = block or block_size(n, jobs)
    spans = [(a, min(n, a + size)) for a in range(0, n, size)]

    def args(a: int, b: int):
        units = np.asarray(todo[a:b], dtype=np.int64)
        return units, [sources[int(i)] for i in units], fields, positions

    if jobs <= 1 or len(spans) <= 1:
        # a small build: the table of runs carried from block to block (each run given its id once); a
        # large one's blocks start afresh (a block's keys would be the whole vocabulary)
        carry = {} if small else None
        for a, b in spans:
            yield tokenize_block(*args(a, b), carry=carry, refs=refs)
            if progress:
                progress(b, n)
        return
    from chitragupta.engine.library.workers import process_pool

    window = 2 * jobs  # finished blocks waiting are bounded: memory does not grow with the corpus
    with process_pool(min(jobs, len(spans))) as ex:
        pending = []
        nxt = 0
        for _ in spans:
            while nxt < len(spans) and len(pending) < window:
                pending.append((spans[nxt][1], ex.submit(tokenize_block, *args(*spans[nxt]), refs=refs)))
                nxt += 1
            done_to, fut = pending.pop(0)
            yield fut.result()
            if progress:
                progress(done_to, n)
