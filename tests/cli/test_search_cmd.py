"""``chitragupta search``'s filter flags (cli/search_cmd.py): a ``--keys`` file is read bounded -- refused by
what it is (a device, a folder), past its size or line cap with the cap named, never read whole first --
and ``--topic`` reaches the filters."""

from __future__ import annotations

import json
import resource

import pytest
from chitragupta.cli import search_cmd
from chitragupta.errors import UsageError

from helpers import Feeder, deadline, imported_workspace, run_cli, run_main


def test_keys_from_a_device_a_pipe_or_a_folder_is_refused_by_what_it_is_at_once(tmp_path):
    ws = imported_workspace(tmp_path)
    with deadline(60):
        got = run_cli("search", "-w", ws, "twin", "--keys", "/dev/zero")
    assert got.returncode != 0
    assert got.stderr.strip().splitlines()[-1] == (
        "error: --keys /dev/zero: it is a character device, not a file of citekeys (at most 64 MiB and 1,000,000 "
        "lines)")
    got = run_main("search", "-w", ws, "twin", "--keys", tmp_path)
    assert got.returncode != 0 and "it is a folder, not a file of citekeys" in got.stderr
    fifo = tmp_path / "keys.fifo"
    with deadline(30), Feeder(fifo, b"d1\n") as feeder, pytest.raises(UsageError, match="it is a pipe"):
        search_cmd.read_keys(str(fifo))
    assert not feeder.fed


def test_a_huge_sparse_keys_file_is_refused_before_a_byte_is_read(tmp_path):
    big = tmp_path / "sparse.txt"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # 1 GiB of holes: nothing on disk, everything to read
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with deadline(30), pytest.raises(UsageError) as err:
        search_cmd.read_keys(str(big))
    assert str(err.value) == f"--keys {big}: it is 1,073,741,824 bytes (at most 64 MiB and 1,000,000 lines)"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: nothing was read


def test_a_keys_file_past_its_line_cap_or_not_utf8_is_one_line(tmp_path, monkeypatch):
    keys = tmp_path / "keys.txt"
    keys.write_bytes(b"\xef\xbb\xbfa1\n\n  b2  \nc3\n")
    assert search_cmd.read_keys(str(keys)) == ["a1", "b2", "c3"]
    monkeypatch.setattr(search_cmd, "KEYS_LINES", 3)
    with pytest.raises(UsageError, match=r": more than 3 lines \(at most 64 MiB and 3 lines\)"):
        search_cmd.read_keys(str(keys))
    keys.write_bytes(b"ok\nm\xfcller\n")
    with pytest.raises(UsageError, match=r"not UTF-8 text at byte 4"):
        search_cmd.read_keys(str(keys))


def test_an_empty_keys_file_and_unknown_keys_are_told(tmp_path):
    ws = imported_workspace(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    got = run_main("search", "-w", ws, "twin", "--keys", empty)
    assert got.returncode == 0 and got.stdout.strip() == "no hits"
    assert "[note] the citekeys filter lists no citekey, so it excluded every source" in got.stderr
    keys = tmp_path / "keys.txt"
    keys.write_text("d1\nd33\n")
    got = run_main("search", "-w", ws, "twin", "--keys", keys, "--json")
    assert got.returncode == 0 and "1 of 2 citekey(s) are not in the library: d33 (did you mean 'd3'?)" in got.stderr
    assert [h["citekey"] for h in json.loads(got.stdout)] == ["d1"]


def test_topic_is_a_flag_of_search_and_similar_only():
    from chitragupta.cli.main import build_parser

    parser = build_parser()
    for argv, has in ((["search", "q", "--topic", "3", "--topic", "-1"], True), (["similar", "k", "--topic", "0"], True),
                      (["cited-by", "k", "--topic", "0"], False)):
        if has:
            assert search_cmd.filters_of(parser.parse_args(argv)).topic in ((3, -1), (0,))
        else:
            with pytest.raises(SystemExit):
                parser.parse_args(argv)
