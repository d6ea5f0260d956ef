"""Progress of a long stage when stderr is not a terminal (a log file, CI): lines with done/total, the
rate and the ETA, every ~10 s or 5 % (issue 22). Pure Python: a fake clock, no model."""

from __future__ import annotations

import io

import pytest
from chitragupta.cli._common import ProgressLines, progress_bar


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_lines_every_ten_seconds_or_five_percent_with_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    cb = ProgressLines("embed", "chunk", out, clock=clock)
    cb(0, 1000)
    assert out.getvalue() == "embed: 1000 chunks to do\n"
    clock.t += 4
    cb(20, 1000)  # 4 s, 2 %: nothing yet
    assert out.getvalue().count("\n") == 1
    clock.t += 1
    cb(50, 1000)  # 5 %: a line
    clock.t += 9
    cb(60, 1000)  # 9 s and 1 % since the last line: nothing
    clock.t += 1
    cb(70, 1000)  # 10 s since the last line: a line
    lines = out.getvalue().splitlines()
    assert lines[1] == "embed: 50/1000 chunks (5%), 10.0 chunks/s, ETA 1m35s"
    assert lines[2] == "embed: 70/1000 chunks (7%), 4.7 chunks/s, ETA 3m19s"
    clock.t += 2
    cb(1000, 1000)
    assert out.getvalue().splitlines()[-1] == "embed: 1000/1000 chunks (100%), 58.8 chunks/s, done in 17s"
    cb(1000, 1000)  # the end is said once
    assert len(out.getvalue().splitlines()) == 4


def test_short_work_says_nothing():
    out, clock = io.StringIO(), Clock()
    cb = ProgressLines("embed", "chunk", out, clock=clock)
    cb(0, 50)
    clock.t += 60
    cb(25, 50)
    cb(50, 50)
    assert out.getvalue() == ""


def test_unknown_total_gives_count_and_rate():
    out, clock = io.StringIO(), Clock()
    cb = ProgressLines("docling", "doc", out, clock=clock)
    cb(0, None)
    clock.t += 10
    cb(30, None)
    assert out.getvalue() == "docling: 30 docs, 3.0 docs/s\n"


def test_progress_bar_without_a_terminal_gives_lines():
    out = io.StringIO()  # isatty() is False
    with progress_bar("embed", "chunk", stream=out) as cb:
        assert isinstance(cb, ProgressLines)
        cb(0, 400)
        cb(400, 400)
    assert out.getvalue().splitlines()[0] == "embed: 400 chunks to do"
    assert out.getvalue().splitlines()[-1].startswith("embed: 400/400 chunks (100%)")


def test_progress_bar_on_a_terminal_draws_tqdm():
    pytest.importorskip("tqdm")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    with progress_bar("embed", "chunk", stream=out) as cb:
        assert not isinstance(cb, ProgressLines)
        cb(0, 400)
        cb(200, 400)
    assert "200/400" in out.getvalue()
