"""Helpers the subcommands share: opening the workspace, progress bars, printing notes, the citekey argument."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterable, Iterator

from chitragupta.errors import UsageError


def open_workspace(args, *, create: bool = False):
    from chitragupta.engine.library.workspace import Workspace

    return Workspace.open(args.workspace, args.config, create=create)


PROGRESS_SECONDS = 10.0  # without a terminal: a line at most this often ...
PROGRESS_SHARE = 0.05  # ... or when this share of the work more is done, whichever comes first
SHORT_WORK = 200  # fewer items than this: no bar and no lines


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class ProgressLines:
    """``(done, total)`` callback writing ``<desc>: 1200/7727 chunks (16%), 5.1 chunks/s, ETA 21m10s``
    to ``stream`` every ``every`` seconds or ``share`` of the total, whichever comes first, and once when
    the work is done. The rate counts from the first call (the work's start, after any model load)."""

    def __init__(self, desc: str, unit: str, stream, *, every: float = PROGRESS_SECONDS,
                 share: float = PROGRESS_SHARE, clock=None):
        import time

        self.desc, self.unit, self.stream = desc, unit, stream
        self.every, self.share = every, share
        self.clock = clock or time.monotonic
        self.start = self.last_at = None
        self.last_done = 0
        self.total = None
        self.finished = False

    def line(self, done: int, total: int | None, now: float) -> str:
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        units = f"{self.unit}s"
        if total:
            text = f"{self.desc}: {done}/{total} {units} ({done / total:.0%}), {rate:.1f} {units}/s"
            if done >= total:
                return text + f", done in {_duration(elapsed)}"
            if rate > 0:
                return text + f", ETA {_duration((total - done) / rate)}"
            return text + ", ETA unknown"
        return f"{self.desc}: {done} {units}, {rate:.1f} {units}/s"

    def __call__(self, done: int, total: int | None) -> None:
        now = self.clock()
        if self.start is None:
            self.start, self.last_at, self.total = now, now, total
            if total is not None and total < SHORT_WORK:
                self.finished = True  # short work needs no lines
            elif total:
                print(f"{self.desc}: {total} {self.unit}s to do", file=self.stream, flush=True)
            return
        if self.finished:
            return
        end = total is not None and done >= total
        due = now - self.last_at >= self.every or (
            bool(total) and done - self.last_done >= self.share * total)
        if end or due:
            print(self.line(done, total, now), file=self.stream, flush=True)
            self.last_at, self.last_done = now, done
            self.finished = end


@contextmanager
def progress_bar(desc: str, unit: str = "doc", *, stream=None) -> Iterator:
    """A ``(done, total)`` callback: a tqdm bar on stderr when stderr is a terminal, else progress lines
    (``ProgressLines``) so a log file or a CI run sees the rate and the ETA too. Work of fewer than
    ``SHORT_WORK`` items shows neither."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        yield ProgressLines(desc, unit, stream)
        return
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int | None) -> None:
        nonlocal bar
        if bar is None:
            if total is not None and total < SHORT_WORK:
                return  # short work needs no bar
            bar = tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False, mininterval=0.2)
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def print_notes(notes: Iterable, prefix: str = "[note] ") -> None:
    for n in notes:
        print(f"{prefix}{n}", file=sys.stderr)


def print_problems(problems: list[str], limit: int = 20) -> None:
    for p in problems[:limit]:
        print(f"[warn] {p}", file=sys.stderr)
    if len(problems) > limit:
        print(f"[warn] ... and {len(problems) - limit} more", file=sys.stderr)


def add_citekey(p, help: str, *, query: bool = False) -> None:
    """The citekey as every command that names one takes it: positional (``similar KEY``, ``evidence KEY
    "QUERY"``) or as ``--citekey KEY`` / ``-c KEY`` (``evidence "QUERY" --citekey KEY``, the older form).
    ``query``: the command takes a query too (``citekey_and_query`` reads both)."""
    if query:
        p.add_argument("words", nargs="+", metavar="[KEY] QUERY",
                       help=f"{help}, then the query (quoted); or the query alone with --citekey KEY")
    else:
        p.add_argument("citekey", nargs="?", metavar="KEY", help=f"{help} (or --citekey KEY)")
    p.add_argument("--citekey", "-c", dest="citekey_flag", metavar="KEY", help=f"{help} (the same as KEY)")


def citekey_of(args, command: str) -> str:
    """The citekey ``add_citekey`` read (positional or ``--citekey``); UsageError when none or two differ."""
    given = [k for k in (getattr(args, "citekey", None), args.citekey_flag) if k is not None]
    if not given:
        raise UsageError(f"give the citekey: chitragupta {command} KEY (or --citekey KEY)")
    if len(set(given)) > 1:
        raise UsageError(f"two citekeys given ({given[0]!r} and --citekey {given[1]!r}): give one")
    return given[0]


def citekey_and_query(args, command: str) -> tuple[str, str]:
    """(citekey, query) of a command made with ``add_citekey(query=True)``: ``KEY QUERY``, or ``QUERY``
    with ``--citekey KEY``; UsageError naming both forms for anything else."""
    words, flag = args.words, args.citekey_flag
    forms = f'chitragupta {command} KEY "QUERY" (or {command} "QUERY" --citekey KEY)'
    if flag is not None and len(words) == 1:
        return flag, words[0]
    if flag is None and len(words) == 2:
        return words[0], words[1]
    if flag is None and len(words) == 1:
        raise UsageError(f"give the citekey and the query: {forms}")
    raise UsageError(f"{len(words) + (flag is not None)} words where a citekey and one query go; quote a query "
                     f"of several words: {forms}")
