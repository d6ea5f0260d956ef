"""``chitragupta search`` (cli/search_cmd.py): the filter flags -- a ``--keys`` file read bounded (refused by
what it is, past its size or line cap with the cap named, never read whole first), ``--topic`` -- and the
batch: its file read as plain words unless ``--syntax``, never dying on one query, its summary line counting
what befell the queries; a query that starts with "-"; the table of an engine whose scores a person does not
read."""

from __future__ import annotations

import json
import resource

import pytest
from helpers import (
    Feeder,
    deadline,
    imported_workspace,
    make_workspace,
    random_docs,
    run_cli,
    run_main,
    write_jsonl,
)

from chitragupta.cli import search_cmd
from chitragupta.engine.library.config import load_config
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.results import SearchResponse, SearchResult
from chitragupta.errors import UsageError


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


QUERIES = [{"_id": "q1", "text": "twin model sensor"}, {"_id": "q2", "text": '"model sensor" -ocean heat'},
           {"_id": "q3", "text": "ocean +twin heat"}, {"_id": "q4", "text": "fidelity water leak"},
           {"_id": "q5", "text": '"twin model" water'}]
BAD = {"_id": "bad7", "text": 'leak "ocean heat'}  # an unbalanced quote


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("batch"), random_docs(11, 200, vocab=40))


def _run(ws, tmp_path, queries, *flags, name="run.trec"):
    q = write_jsonl(tmp_path / f"{name}.jsonl", queries)
    out = tmp_path / name
    p = run_main("search", "-w", ws, "--queries", q, "--run", out, "-k", "20", *flags)
    return p, out.read_text().splitlines() if out.exists() else None


@pytest.mark.parametrize("flags", [(), ("--syntax",)])
def test_a_held_out_malformed_query_leaves_the_other_answers_identical(ws, tmp_path, flags):
    p, without = _run(ws, tmp_path, QUERIES, *flags, name="without")
    assert p.returncode == 0, p.stderr
    held = QUERIES[:3] + [BAD] + QUERIES[3:]  # the malformed one on line 4
    p, got = _run(ws, tmp_path, held, *flags, name="with")
    assert p.returncode == 0, p.stderr
    assert [line for line in got if not line.startswith("bad7 ")] == without
    assert any(line.startswith("bad7 ") for line in got)  # answered too, as plain words


def test_a_query_file_is_plain_words_unless_syntax_is_asked_for(ws, tmp_path):
    _p, default = _run(ws, tmp_path, QUERIES, name="default")
    plain = Retriever.open(Workspace.open(ws, load_config(overrides={"retrieval": {"query_syntax": False}})))
    ranked = plain.rank_many([q["text"] for q in QUERIES], 20)
    assert [(x.split()[0], x.split()[2]) for x in default] == [
        (q["_id"], key) for q, keys in zip(QUERIES, ranked.keys()) for key in keys]
    _p, syntax = _run(ws, tmp_path, QUERIES, "--syntax", name="syntax")
    strict = Retriever.open(ws).rank_many([q["text"] for q in QUERIES], 20)
    assert [(x.split()[0], x.split()[2]) for x in syntax] == [
        (q["_id"], key) for q, keys in zip(QUERIES, strict.keys()) for key in keys]
    assert syntax != default


def test_the_summary_counts_and_v_names_with_the_file_line_and_the_id(ws, tmp_path):
    queries = QUERIES + [BAD, {"_id": "empty9", "text": "zzzz qqqq"}]
    p, _run_lines = _run(ws, tmp_path, queries, "--syntax", name="counted")
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("search: 7 queries") and "1 malformed, read as plain words; 1 with no hits; " \
        "3 narrowed by the query syntax (-v names them)" in line
    p, _r = _run(ws, tmp_path, queries, "--syntax", "-v", name="counted")
    q = tmp_path / "counted.jsonl"
    assert f"  malformed, read as plain words: bad7 ({q}:6): unbalanced quotes in the query" in p.stderr
    assert f"  with no hits: empty9 ({q}:7)" in p.stderr
    assert f"  narrowed by the query syntax: q2 ({q}:2)" in p.stderr
    p, _r = _run(ws, tmp_path, queries, name="counted")  # plain: the queries holding syntax are named
    assert "4 with quotes or signs read as plain words (--syntax reads them)" in p.stderr.splitlines()[-1]


def test_an_overlong_query_is_skipped_naming_its_line_and_id(ws, tmp_path):
    (ws / "config.toml").write_text("[serve]\nmax_query_chars = 30\n")
    try:
        queries = QUERIES[:2] + [{"_id": "long3", "text": "twin " * 10}] + QUERIES[2:]
        p, got = _run(ws, tmp_path, queries, name="long")
        assert p.returncode == 0, p.stderr
        assert f"{tmp_path / 'long.jsonl'}:3: query 'long3' is 50 characters long; at most 30" in p.stderr
        assert "line skipped" in p.stderr and not any(x.startswith("long3 ") for x in got)
        assert {x.split()[0] for x in got} == {q["_id"] for q in QUERIES}
    finally:
        (ws / "config.toml").unlink()


def test_syntax_is_for_a_batch(ws):
    p = run_main("search", "-w", ws, "twin", "--syntax")
    assert p.returncode == 1 and "--syntax is for a --queries batch" in p.stderr


@pytest.mark.parametrize("argv", [["-ocean"], ["--", "-ocean"], ["-k", "3", "--", "-ocean"]])
def test_a_query_that_starts_with_a_dash_is_a_query_not_an_option(ws, argv):
    p = run_main("search", "-w", ws, *argv)
    assert p.returncode == 1 and "error: the query '-ocean' holds only exclusions" in p.stderr
    assert 'write the word without the "-" to search for it' in p.stderr
    p = run_main("search", "-w", ws, "--", "-ocean twin", "-k")  # the query is given: a second one is not taken
    assert p.returncode == 2 and "unrecognized arguments: -k" in p.stderr
    p = run_main("search", "-w", ws, "--nope")  # an option that is not one is still refused
    assert p.returncode == 2 and "unrecognized arguments: --nope" in p.stderr


def test_a_table_without_scores_shows_the_rank():
    from chitragupta.cli.search_cmd import _table
    from chitragupta.service import registry

    resp = SearchResponse("q", [SearchResult("a2020", "A title", -1.25, "a snippet"),
                                SearchResult("b2021", "B title", -2.5, "", page=3, passage=4)])
    assert _table(resp).splitlines()[0] == "  1   -1.2500  a2020    A title"
    assert _table(resp, scores=False).splitlines() == ["  1  a2020    A title", "     a snippet",
                                                       "  2  b2021#4  B title  (p. 3)"]
    assert not registry.engine("hybrid").table_scores and registry.engine("bm25").table_scores
