"""Run files: TREC (``qid Q0 docid rank score tag``) or JSON lines (``{"qid", "rank", "citekey", "score"}``),
one line per hit.

``run_chunks`` turns a whole batch's top-k arrays into the file's bytes with the numba formatter in
``chitragupta.kernels.runfmt`` (no Python per hit), in chunks of whole queries so memory stays bounded; the bytes
are exactly what ``format_run_lines`` (the per-line reference, kept for tests and small callers)
writes. A docid is the citekey, or ``<citekey>#<item>`` for a passage (JSON lines: the citekey and a
``"passage"`` field); a TREC docid that holds whitespace is refused, since the format cannot carry it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from chitragupta.errors import IndexDamaged, UsageError

__all__ = ["format_run_lines", "read_run", "run_chunks", "RUN_TAG", "FORMATS"]

RUN_TAG = "chitragupta"
FORMATS = ("trec", "jsonl")
_CHUNK_BYTES = 1 << 23
_SPACE = re.compile(r"\s")


def format_run_lines(qid: str, hits: Iterable[tuple[str, float]], tag: str = RUN_TAG) -> list[str]:
    """Lines for one query's (docid, score) hits, ranked from 1. A docid with whitespace is refused."""
    out = []
    for rank, (doc, score) in enumerate(hits, start=1):
        if not doc or any(c.isspace() for c in doc):
            raise UsageError(f"citekey {doc!r} holds whitespace and cannot be written to a TREC run")
        out.append(f"{qid} Q0 {doc} {rank} {score:.10g} {tag}")
    return out


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} {text!r} is not valid Unicode (it holds a lone surrogate) and cannot be "
                         "written to a run") from None


def _table(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    if strings:
        np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)), out=offsets[1:])
    return np.frombuffer(b"".join(strings), dtype=np.uint8), offsets


def _json_inner(text: str) -> bytes:
    """A JSON string literal's inside: escaped, UTF-8 (a lone surrogate as a \\u escape)."""
    try:
        return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)[1:-1].encode("ascii")


def _qid_table(qids: Sequence[str], fmt: str) -> tuple[np.ndarray, np.ndarray]:
    if fmt == "trec":
        for q in qids:
            if not q or _SPACE.search(q):
                raise UsageError(f"query id {q!r} is empty or holds whitespace and cannot be written to a TREC run")
        return _table([_utf8(q, "query id") for q in qids])
    plain = [q.isascii() and q.isprintable() and '"' not in q and "\\" not in q for q in qids]
    return _table([q.encode("ascii") if ok else _json_inner(q) for q, ok in zip(qids, plain)])


def _key_overrides(keys, docs: np.ndarray, fmt: str, mode: int):
    """Per hit, -1 (copy the key's bytes) or a row of an override table holding the key's checked or
    escaped text; the override table."""
    from chitragupta.kernels.runfmt import key_flags

    flagged = key_flags(keys.blob, keys.offsets, docs, mode)
    src = np.full(docs.shape[0], -1, dtype=np.int64)
    if not flagged.any():
        return src, np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    odd, inverse = np.unique(docs[flagged], return_inverse=True)
    texts = []
    for d in odd.tolist():
        if not 0 <= d < len(keys):
            raise IndexDamaged(f"a hit names document {d}, outside the index's {len(keys)} citekeys; "
                               "rebuild it with `chitragupta index --force`")
        try:
            key = keys[d]
        except (UnicodeDecodeError, IndexError, ValueError):
            raise IndexDamaged(f"the index's citekey table is damaged at entry {d}; rebuild it with "
                               "`chitragupta index --force`") from None
        if fmt == "trec":
            if not key or _SPACE.search(key):
                raise UsageError(f"citekey {key!r} holds whitespace and cannot be written to a TREC run "
                                 "(use --json for JSON lines)")
            texts.append(_utf8(key, "citekey"))
        else:
            texts.append(_json_inner(key))
    src[flagged] = inverse
    blob, off = _table(texts)
    return src, blob, off


def run_chunks(qids: Sequence[str], counts: np.ndarray, docs: np.ndarray, scores: np.ndarray, keys,
               items: np.ndarray | None = None, *, fmt: str = "trec", tag: str = RUN_TAG,
               item_field: str = "passage", chunk_bytes: int = _CHUNK_BYTES) -> Iterator[memoryview]:
    """The run's bytes, a chunk of whole queries at a time.

    counts[q]: query q's hits (rank order, concatenated); docs[h]: hit h's row in ``keys`` (a
    ``StringTable``: the citekeys); items[h] >= 0 marks a part of it, a passage or a chunk (``#item``
    in TREC, an ``item_field`` field in JSON lines); scores[h]: its score. Each chunk is a view of one
    reused buffer: write it before asking for the next.
    """
    from chitragupta.kernels.runfmt import JSONL, TREC, query_sizes, score_lengths, write_queries

    if fmt not in FORMATS:
        raise UsageError(f"unknown run format {fmt!r}; allowed: {', '.join(FORMATS)}")
    if not tag or _SPACE.search(tag) or not tag.isascii():
        raise UsageError(f"run tag {tag!r} must be ASCII without whitespace")
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    docs = np.ascontiguousarray(docs, dtype=np.int64)
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    items = (np.full(docs.shape[0], -1, dtype=np.int64) if items is None
             else np.ascontiguousarray(items, dtype=np.int64))
    if len(qids) != counts.shape[0] or int(counts.sum()) != docs.shape[0] or scores.shape != docs.shape \
            or items.shape != docs.shape:
        raise ValueError("run_chunks: qids, counts, docs, scores and items disagree in length")
    mode = TREC if fmt == "trec" else JSONL
    qid_blob, qid_off = _qid_table(qids, fmt)
    key_src, ov_blob, ov_off = _key_overrides(keys, docs, fmt, mode)
    lens = score_lengths(scores)
    fb_pos = np.flatnonzero(lens < 0).astype(np.int64)
    fb_blob, fb_off = _table([("%.10g" % s).encode("ascii") for s in scores[fb_pos].tolist()])
    pieces = ([" Q0 ", " ", " ", f" {tag}\n"] if mode == TREC else
              ['{"qid": "', '", "rank": ', ', "citekey": "', '", ', f'"{item_field}": ', ", ", '"score": ', "}\n"])
    p_blob, p_off = _table([p.encode("ascii") for p in pieces])
    key_blob, key_off = np.asarray(keys.blob), np.asarray(keys.offsets)
    sizes = query_sizes(mode, counts, qid_off, key_off, docs, items, key_src, ov_off, lens, fb_pos, fb_off, p_off)
    first_hit = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=first_hit[1:])
    ends = np.cumsum(sizes)
    # chunk boundaries: whole queries, about chunk_bytes each
    bounds = [0]
    while bounds[-1] < counts.shape[0]:
        start = bounds[-1]
        base = ends[start - 1] if start else 0
        nxt = int(np.searchsorted(ends, base + chunk_bytes, side="right"))
        bounds.append(max(nxt, start + 1))
    biggest = max((int(ends[b - 1] - (ends[a - 1] if a else 0)) for a, b in zip(bounds, bounds[1:])), default=0)
    buf = np.empty(biggest, dtype=np.uint8)
    for a, b in zip(bounds, bounds[1:]):
        n = write_queries(mode, a, b, first_hit[a], counts, qid_blob, qid_off, key_blob, key_off, docs, items,
                          key_src, ov_blob, ov_off, scores, lens, fb_pos, fb_blob, fb_off, p_blob, p_off, buf)
        if n:
            yield memoryview(buf)[:n]


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """A run file as qid -> [(docid, score)] in file order (ranks as written)."""
    run: dict[str, list[tuple[str, float]]] = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise UsageError(f"{path}:{n}: a TREC run line has 6 fields, got {len(parts)}")
        run.setdefault(parts[0], []).append((parts[2], float(parts[4])))
    return run
