"""``chitragupta search`` (cli/search_cmd.py): a batch reads its file as plain words unless ``--syntax``, never
dies on one query, and its summary line counts what befell the queries; a query that starts with "-"; the
table of an engine whose scores a person does not read."""

from __future__ import annotations

import pytest
from chitragupta.engine.library.config import load_config
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.results import SearchResponse, SearchResult

from helpers import make_workspace, random_docs, run_main, write_jsonl

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
