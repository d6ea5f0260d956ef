"""Run files, one module: their lines (TREC ``qid Q0 docid rank score tag``, or JSON lines
``{"qid", "rank", "citekey", "score"}``) and where they go (``-`` for stdout, a regular file replaced
atomically, a FIFO or character device written directly).

``run_chunks`` turns a whole batch's top-k arrays into the file's bytes, in chunks of whole queries so
memory stays bounded, a line at a time in Python: the bytes ``format_run_lines`` (the per-line
reference, kept for tests and small callers) writes. A docid is the citekey, or ``<citekey>#<item>`` for a passage or chunk (JSON lines: the citekey
and a ``"passage"`` or ``"chunk"`` field); a TREC docid that holds whitespace is refused, since the
format cannot carry it. Reading a run back is ``chitragupta.engine.evaluation.measure.read_trec_run``.

Where the output goes (``open_output``): a regular file is written to a temp file beside it and renamed
into place, so a reader (or a crash) sees the old run or the new one; a symlink is followed, so the file
it points at is replaced and the link kept; an existing file keeps its permission bits. A FIFO or a
character device is opened and written like a stream: replacing a device node with a regular file (as
a rename would, and as root can) is never right. ``/dev/stdout``, ``/dev/stderr`` and ``/dev/fd/N``
write to that open descriptor, as a shell redirection does (no truncation, no rename: ``>> log`` keeps
appending). A directory, socket, block device or kernel interface file is refused with one line.
``check_destination`` says so before any work is done, and makes a missing folder. The temp file and the
rename are the atomic writer's (``chitragupta.files``), which says how a run file differs from a
cache file there.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Sequence

import numpy as np

from chitragupta.files import discard, kind_of, put_in_place, temp_beside
from chitragupta.errors import IndexDamaged, OutputError, UsageError

__all__ = ["format_run_lines", "run_chunks", "RUN_TAG", "FORMATS", "open_output", "describe", "check_destination"]

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


def _json_inner(text: str) -> bytes:
    """A JSON string literal's inside: escaped, UTF-8 (a lone surrogate as a \\u escape)."""
    try:
        return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)[1:-1].encode("ascii")


def _qid_texts(qids: Sequence[str], fmt: str) -> list[str]:
    if fmt == "trec":
        for q in qids:
            if not q or _SPACE.search(q):
                raise UsageError(f"query id {q!r} is empty or holds whitespace and cannot be written to a TREC run")
            _utf8(q, "query id")
        return list(qids)
    plain = [q.isascii() and q.isprintable() and '"' not in q and "\\" not in q for q in qids]
    return [q if ok else _json_inner(q).decode("utf-8", "surrogateescape") for q, ok in zip(qids, plain)]


def _key_text(keys, d: int, fmt: str) -> bytes:
    """Citekey ``d`` as a line holds it: checked (TREC: no whitespace) and UTF-8, or JSON-escaped."""
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
        return _utf8(key, "citekey")
    return _json_inner(key)


def _python_chunks(qids: list[str], counts: np.ndarray, docs: np.ndarray, scores: np.ndarray, keys,
                   items: np.ndarray, fmt: str, tag: str, item_field: str, chunk_bytes: int) -> Iterator[bytes]:
    """``run_chunks``' bytes a line at a time, ``chunk_bytes`` of whole queries at a time (a line taken as
    48 bytes)."""
    text = {d: _key_text(keys, d, fmt).decode("utf-8", "surrogateescape") for d in sorted(set(docs.tolist()))}
    first = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    rank = (np.arange(docs.shape[0], dtype=np.int64) - np.repeat(first[:-1], counts) + 1).tolist()
    who = np.repeat(np.arange(counts.shape[0]), counts).tolist()
    pairs = zip(docs.tolist(), items.tolist())
    score = ["%.10g" % x for x in scores.tolist()]
    if fmt == "trec":
        key = [text[d] if i < 0 else f"{text[d]}#{i}" for d, i in pairs]
        lines = [f"{qids[q]} Q0 {k} {r} {s} {tag}\n" for q, k, r, s in zip(who, key, rank, score)]
    else:
        key = [f'{text[d]}", ' if i < 0 else f'{text[d]}", "{item_field}": {i}, ' for d, i in pairs]
        lines = [f'{{"qid": "{qids[q]}", "rank": {r}, "citekey": "{k}"score": {s}}}\n'
                 for q, k, r, s in zip(who, key, rank, score)]
    q0 = 0
    while q0 < counts.shape[0]:
        q1 = max(q0 + 1, int(np.searchsorted(first, first[q0] + chunk_bytes // 48, side="right")) - 1)
        if first[q1] > first[q0]:
            yield "".join(lines[first[q0]:first[q1]]).encode("utf-8", "surrogateescape")
        q0 = q1


def run_chunks(qids: Sequence[str], counts: np.ndarray, docs: np.ndarray, scores: np.ndarray, keys,
               items: np.ndarray | None = None, *, fmt: str = "trec", tag: str = RUN_TAG,
               item_field: str = "passage", chunk_bytes: int = _CHUNK_BYTES) -> Iterator[bytes]:
    """The run's bytes, a chunk of whole queries at a time.

    counts[q]: query q's hits (rank order, concatenated); docs[h]: hit h's row in ``keys`` (a
    ``StringTable``: the citekeys); items[h] >= 0 marks a part of it, a passage or a chunk (``#item``
    in TREC, an ``item_field`` field in JSON lines); scores[h]: its score.
    """
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
    yield from _python_chunks(_qid_texts(qids, fmt), counts, docs, scores, keys, items, fmt, tag, item_field,
                              chunk_bytes)


# -- where a run goes ------------------------------------------------------------------------------------


def describe(path: str) -> str:
    """How the output names its destination in messages."""
    return "stdout" if path == "-" else str(path)


_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd|proc/\d+/fd)/(\d+)")
_STD = {"/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor(path: str) -> int | None:
    """The descriptor a path names (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/2``), or None; -1 for
    another descriptor's path (``/dev/fd/63``), which is used only if it is a pipe or a device."""
    if path in _STD:
        return _STD[path]
    m = _FD_PATH.fullmatch(path)
    if not m:
        return None
    return int(m.group(1)) if int(m.group(1)) in (1, 2) else -1


@contextmanager
def _reported(path: str, what: str) -> Iterator[None]:
    """An OS error while writing becomes one line naming the output (a closed pipe is left to the CLI)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as err:
        raise OutputError(f"cannot write {what} {describe(path)}: {err.strerror or err}") from None


def _stdout(path: str, what: str):
    if sys.stdout is None:  # started with stdout closed (>&-)
        raise OutputError(f"cannot write {what} {describe(path)}: stdout is closed; redirect it to a file, or name one")
    return sys.stdout


def _regular_target(path: str, what: str, st) -> Path:
    """Where a regular file's output is renamed into place (a symlink's file); UsageError for a kernel
    interface file or a symlink loop."""
    try:
        target = Path(os.path.realpath(Path(path).expanduser()))  # a symlink's file is replaced, the link kept
    except (OSError, RuntimeError) as err:
        raise UsageError(f"{what} {path}: cannot follow it ({err})") from None
    if target.parts[1:2] in (("proc",), ("sys",)):
        raise UsageError(f"{what} {path} is a kernel interface file ({target}); name a file to write")
    return target


def _stat_output(path: str, what: str):
    """(descriptor or None, os.stat_result or None for a file not there yet), refusing what is not a file,
    a FIFO or a character device."""
    fd = _descriptor(str(path))
    if fd is not None and fd >= 0:
        return fd, None
    try:
        st = os.stat(Path(path).expanduser())
    except FileNotFoundError:
        st = None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UsageError(f"{what} {path} is a symlink loop; name a file to write") from None
        raise UsageError(f"{what} {path}: cannot use it ({err.strerror or err})") from None
    if st is not None and not stat.S_ISREG(st.st_mode) and not (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        kind = kind_of(st.st_mode)
        raise UsageError(f"{what} {path} is {kind}; name a file to write (or - for stdout)")
    if fd is not None and (st is None or stat.S_ISREG(st.st_mode)):  # /dev/fd/N onto a regular file
        raise UsageError(f"{what} {path} names an open file by its descriptor; name the file itself "
                         "(a pipe such as >(gzip > run.gz) is fine)")
    return fd, st


def check_destination(path: str, what: str = "--run") -> None:
    """Refuse a destination ``open_output`` would refuse, before any work is done, and make a regular
    file's missing folder (as ``sweep --out`` does): a batch must not score everything and then find out."""
    if path == "-":
        _stdout(path, what)
        return
    fd, st = _stat_output(path, what)
    if fd is not None or (st is not None and not stat.S_ISREG(st.st_mode)):
        return  # a descriptor, a FIFO or a character device: opened when written
    folder = _regular_target(path, what, st).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot make the folder {folder} ({err.strerror or err})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot write in {folder} (permission denied)")


@contextmanager
def open_output(path: str, what: str = "--run") -> Iterator[BinaryIO]:
    """A binary file to write the output to; the write is complete (renamed, flushed) when the block ends
    without an exception, and a regular file is left untouched when it raises."""
    if path == "-":
        out = _stdout(path, what).buffer
        sys.stdout.flush()
        with _reported(path, what):
            yield out
            out.flush()
        return
    fd, st = _stat_output(path, what)
    if fd is not None and fd >= 0:  # /dev/stdout, /dev/stderr: the open file itself, as a shell redirection
        try:
            f = os.fdopen(os.dup(fd), "wb")
        except OSError as err:
            raise UsageError(f"{what} {path}: file descriptor {fd} is not open for writing ({err.strerror or err})") \
                from None
        if sys.stdout is not None:
            sys.stdout.flush()
        with _reported(path, what), f:
            yield f
        return
    if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO or a character device
        try:
            f = open(Path(path).expanduser(), "wb")
        except OSError as err:
            raise UsageError(f"{what} {path}: cannot open it for writing ({err.strerror or err})") from None
        with _reported(path, what), f:
            yield f
        return
    target = _regular_target(path, what, st)
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"{what} {path}: the folder {folder} does not exist")
    try:
        fd, tmp = temp_beside(target)  # the one writer's temp: never a symlink's target (files.py)
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot write in {folder} ({err.strerror or err})") from None
    try:
        if st is not None:
            mode = stat.S_IMODE(st.st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        try:
            os.fchmod(fd, mode)
        except OSError:
            pass  # a file system without permission bits (vfat): the run is still written
        with _reported(path, what), os.fdopen(fd, "wb") as f:
            yield f
        with _reported(path, what):
            put_in_place(tmp, target, durable=False)
    except BaseException:
        discard(tmp)
        raise
