"""A block tokenized with the runs looked up and counted a stretch at a time: the same ``segments.Block``
as ``segments.tokenize_block``'s per-run path, to the byte, at a fraction of the cost.

The per-run path splits each text into Python ``bytes`` runs, looks each up in a dictionary, and sorts
the block's (unit, run) pairs to count them. Here the texts of a stretch of documents are joined (by NUL)
and lowercased, encoded to ASCII and translated exactly as ``engine.tokenize.runs_bytes`` does before
its split (C speed, three calls a stretch; ``_buffer``) into one buffer, and ``kernels.runs`` gives every run
its provisional id (a dictionary of the distinct runs, ids in first-seen order, the never-indexed runs
first: what ``Accumulator`` hands out) and counts each document's ids. The text each document
contributes comes from the same functions (``load_body``, ``plain_body``), so the flags, notes and cuts
are the per-run path's too -- except a packed text ``plain_body`` would return as it is (``as_read``: no
word of a reference heading, no hyphen a split may be at, told by one search of the block's texts
joined), which is taken as read.

Two differences of form, none in what is built: a stream's triples come as one chunk (the per-run path
cuts a stream into chunks of ``_FLUSH_TOKENS`` pending runs, so a document can appear in two; the
build sums such pairs when it finishes, and the arrays it writes are the same), and a body longer than
``iter_runs_bytes``'s piece is handed over in the same pieces.

Packed texts (``engine.library.texts``) are read a stretch at a time: the rows of a block whose references
follow one another in a pack (an import writes them so) are read with one ``pread`` of their byte range
(``packed_texts``), not one open and read per document; each text is decoded as ``read_text`` decodes it,
and a pack missing or shorter than a stretch leaves its rows to ``plain_body``'s own read.

``tests/engine/index/test_tokenize_fast.py`` holds the two paths equal on random, Unicode, hyphenated and edge texts.
"""

from __future__ import annotations


import numpy as np

from chitragupta.engine.index.source import FLAG_BAD_SIDECAR, FLAG_HAS_ABSTRACT, FLAG_NO_SIDECAR, load_body, plain_body
from chitragupta.engine.text.tokenize import DROPPED_RUNS, iter_runs_bytes
from chitragupta.kernels.charset import SEPARATE
from chitragupta.kernels.runs import count_pieces, new_table, runs_to_ids

__all__ = ["block_parts", "packed_texts", "FIELDS"]

FIELDS = ("title", "abstract")  # the field streams this path fills (the document index's)
_PIECE_BYTES = 1 << 23  # text handed to the kernels at a time: bounded temporaries whatever the block
_LONG = iter_runs_bytes.__defaults__[0]  # a body longer than this is cut where iter_runs_bytes cuts it
_SEEDS = b" ".join(DROPPED_RUNS)
_STRETCH_BYTES = 1 << 26  # the most one stretch reads


def _piece(text: str) -> bytes:
    # runs_bytes before its split
    return text.lower().encode("ascii", "replace").translate(SEPARATE)


def packed_texts(sources) -> dict[int, str]:
    """k -> the text of ``sources[k]`` for the packed rows read as plain bodies (``FLAG_NO_SIDECAR``), read
    a stretch of a pack at a time (see the module docstring); a row left out is read by ``plain_body``."""
    from chitragupta.engine.library.texts import read_stretches, split_ref

    refs = []  # (k, pack, offset, length), in block order
    heads: dict[str, bool] = {}  # the part before "#" -> it names a pack (``split_ref`` asked once a pack)
    for k, src in enumerate(sources):
        path = src.text_file
        if path is not None and src.flags & FLAG_NO_SIDECAR:
            told = src.ref
            if told is not None and told[0] == path:  # (as the scan parsed it)
                refs.append((k, told[1], told[2], told[3]))
                continue
            # ``split_ref`` inline: "<pack>#<offset>+<length>", both numbers ASCII digits
            head, sep, tail = path.rpartition("#")
            a, plus, b = tail.partition("+")
            if sep and plus and a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
                ok = heads.get(head)
                if ok is None:
                    ok = heads[head] = split_ref(path) is not None
                if ok:
                    refs.append((k, head, int(a), int(b)))
    return read_stretches(refs, most=_STRETCH_BYTES)



def as_read(texts: dict[int, str]) -> set[int]:
    """The k of ``texts`` (k -> a packed text read as a plain body) whose text ``plain_body`` leaves as it
    is: it holds no word of a reference heading (``refcut.HEADING_WORDS``: no span to cut) and no hyphen a
    split may be at (``hyphens.split_positions``: nothing to join); a plain body has no abstract. Told by
    one search of the texts joined, not a call per text; the others are read by ``plain_body``."""
    if not texts:
        return set()
    from chitragupta.engine.text.hyphens import split_positions
    from chitragupta.engine.text.refcut import HEADING_WORDS

    keys = list(texts)
    parts = list(texts.values())
    joined = "\0".join(parts)  # (neither a letter nor a line break: no word, no split spans two texts)
    hits = split_positions(joined)
    find = joined.find
    # (``may_hold_heading`` wants one of these capitals first: texts without any need no word search)
    for word in HEADING_WORDS if any(c in joined for c in "RBWL") else ():
        at = find(word)
        while at >= 0:
            hits.append(at)
            at = find(word, at + len(word))
    if not hits:
        return set(keys)
    starts = np.zeros(len(parts), dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts[:-1]), dtype=np.int64, count=len(parts) - 1) + 1, out=starts[1:])
    hit = np.zeros(len(parts), dtype=bool)
    hit[np.searchsorted(starts, np.asarray(hits, dtype=np.int64), side="right") - 1] = True
    return {k for k, h in zip(keys, hit.tolist()) if not h}


def _buffer(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """The pieces ``parts`` (a text, or the runs of a long one's piece already joined, bytes) as the kernels'
    buffer (each piece ``_piece``'d, joined by spaces) and each piece's end in it. Texts all: joined first
    (by NUL, which lowercasing, the ASCII encoding and the translation keep one byte, then a space), converted
    in three calls, and the ends found where the NULs were; a text that holds a NUL itself falls back to a
    conversion per piece, as does a block holding bytes pieces."""
    n = len(parts)
    if all(type(p) is str for p in parts):
        low = "\0".join(parts).lower().encode("ascii", "replace")
        if low.count(0) == n - 1:
            ends = np.empty(n, dtype=np.int64)
            ends[:-1] = np.flatnonzero(np.frombuffer(low, dtype=np.uint8) == 0)
            ends[-1] = len(low)
            return np.frombuffer(low.translate(SEPARATE), dtype=np.uint8), ends
    pieces = [_piece(p) if type(p) is str else p for p in parts]
    lens = np.fromiter(map(len, pieces), dtype=np.int64, count=n)
    return np.frombuffer(b" ".join(pieces), dtype=np.uint8), np.cumsum(lens + 1) - 1


def block_parts(units: np.ndarray, sources, fields: tuple[str, ...], positions: bool, carry: dict | None = None,
                refs: bool = False) -> dict:
    """``segments.tokenize_block`` for the document index's fields (``FIELDS``): the ``Block``'s fields,
    by name (``segments.Block(**block_parts(...))``). ``carry``: a dict kept by the caller between the
    blocks of one build, in order, in one process: the table of runs goes on from the last block's (its
    runs keep their ids, the block's keys are every run seen so far), so a run is handed its id once per
    build, not once per block; the merged ids, and the arrays, are the same. ``refs``: each text's reference
    list parsed too (``segments.tokenize_block``)."""
    from chitragupta.engine.index.csr import SEQ_BREAK
    from chitragupta.engine.index.references import parse

    if tuple(fields) != FIELDS:
        raise ValueError(f"the fast tokenizer fills the fields {FIELDS}, not {tuple(fields)}")
    n_dropped = len(DROPPED_RUNS)
    if carry:
        state = carry["state"]
    else:
        state = new_table()
        seeds = np.frombuffer(_SEEDS, dtype=np.uint8)
        _ids, _n, *state = runs_to_ids(seeds, np.array([seeds.shape[0]], dtype=np.int64), *state)
        if state[3] != n_dropped:
            raise AssertionError("the never-indexed runs are not distinct")
    flags = np.zeros(len(units), dtype=np.uint8)
    notes: list[str] = []
    cuts: list[tuple[str, int, int]] = []
    parsed: dict = {}
    out: list[tuple] = []
    parts: list = []  # str: a text to convert (``_buffer``); bytes: a long text's piece, converted
    seg_unit: list[int] = []
    seg_kind: list[int] = []
    size = 0
    packed = packed_texts(sources)
    plain = as_read(packed)

    def run_pieces():
        nonlocal state
        buf, ends = _buffer(parts)
        ids, seg_n, *state = runs_to_ids(buf, ends, *state)
        out.append(count_pieces(ids, seg_n, np.asarray(seg_unit, dtype=np.int64), np.asarray(seg_kind, dtype=np.int8),
                                state[3], n_dropped, positions, SEQ_BREAK))
        parts.clear()
        seg_unit.clear()
        seg_kind.clear()

    n = len(sources)
    if n and len(plain) == n:
        # every document a packed text taken as read (an import's rows): its title and text the block's
        # pieces in turn, assembled by list slices, not a loop; as the loop below would (the same pieces,
        # units and kinds), unless a text is long enough to be cut or they pass a piece's bytes
        texts = [packed[k] for k in range(n)]
        titles = [src.title for src in sources]
        if max(map(len, texts)) <= _LONG and sum(map(len, texts)) + sum(map(len, titles)) < _PIECE_BYTES:
            parts = [None] * (2 * n)
            parts[0::2] = titles
            parts[1::2] = texts
            buf, ends = _buffer(parts)
            ids, seg_n, *state = runs_to_ids(buf, ends, *state)
            kinds = np.zeros(2 * n, dtype=np.int8)
            kinds[1::2] = 1
            out.append(count_pieces(ids, seg_n, np.repeat(np.asarray(units, dtype=np.int64), 2), kinds,
                                    state[3], n_dropped, positions, SEQ_BREAK))
            parts = []
            sources = ()  # (nothing left for the loop)
    for k, src in enumerate(sources):
        i = int(units[k])
        parts.append(src.title)
        seg_unit.append(i)
        seg_kind.append(0)
        size += len(src.title)
        if src.text_file is not None:
            if k in plain:
                body = None
                text = packed[k]  # (what plain_body would give: no cut, no join, no abstract)
            else:
                if k in packed:
                    body = plain_body(src.text_file, text=packed[k], lists=refs)
                else:
                    body = (plain_body(src.text_file, lists=refs) if src.flags & FLAG_NO_SIDECAR
                            else load_body(src.text_path, refs))
                if body.problem:
                    flags[k] |= FLAG_BAD_SIDECAR
                    notes.append(f"{body.problem}; indexed from its .txt without the reference cut")
                text = body.text
            if len(text) <= _LONG:
                parts.append(text)
                seg_unit.append(i)
                seg_kind.append(1)
                size += len(text)
            else:
                for runs in iter_runs_bytes(text):
                    parts.append(b" ".join(runs))
                    seg_unit.append(i)
                    seg_kind.append(1)
                    size += len(parts[-1])
            if body is not None and body.ref_words:
                cuts.append((src.citekey, body.ref_words, body.after_words))
            if refs and body is not None and body.references is not None:
                parsed[i] = parse(body)
            if body is not None and body.abstract:
                flags[k] |= FLAG_HAS_ABSTRACT
                parts.append(body.abstract)
                seg_unit.append(i)
                seg_kind.append(2)
                size += len(body.abstract)
        if size >= _PIECE_BYTES:
            run_pieces()
            size = 0
    if parts:
        run_pieces()
    _slots, pool, koff, n_keys, used = state
    if carry is not None:
        carry.update(state=state)
    keys = pool[koff[n_dropped]:max(koff[n_dropped], used - 1)].tobytes()
    z = np.zeros(0, dtype=np.int32)
    streams = {}
    for j, name in enumerate(("",) + FIELDS):
        got = [o[3 * j:3 * j + 3] for o in out if o[3 * j].shape[0]]
        if not got:
            streams[name] = (z, z, z)
        elif len(got) == 1:
            streams[name] = got[0]
        else:
            streams[name] = tuple(np.concatenate([g[x] for g in got]) for x in range(3))
    got = dict(units=np.asarray(units, dtype=np.int64), keys=keys, streams=streams, flags=flags, notes=notes, cuts=cuts,
               refs=parsed)
    if positions:
        got["seq"] = np.concatenate([o[9] for o in out]) if out else z.copy()
        starts, base = [], 0
        for o in out:
            starts.append(o[11] + base)
            base += o[9].shape[0]
        got["seq_units"] = np.concatenate([o[10] for o in out]) if out else np.zeros(0, dtype=np.int64)
        got["seq_starts"] = np.concatenate(starts) if out else np.zeros(0, dtype=np.int64)
    return got
