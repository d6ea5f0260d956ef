"""A request's limits (``[serve]``: a query's length, k, a server batch's size) are checked in the service
layer: the CLI and the MCP server refuse the same requests with the same words, and a workspace's config
sets them for both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chitragupta.errors import UsageError
from chitragupta.service.request import Limits, SearchRequest

from helpers import make_workspace, random_docs, run_cli, write_jsonl

DOCS = random_docs(31, 30, vocab=40)


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("limits"), DOCS)
    run_cli("index", "-w", root, check=True)
    return root


def test_the_limits_and_their_words():
    lim = Limits()
    assert (lim.max_query_chars, lim.max_k, lim.max_batch_queries) == (10_000, 10_000, 1_000)
    lim.check_k(10_000)
    lim.check_queries(["x" * 10_000, "y"], batch=True)
    with pytest.raises(UsageError, match=r"^-k must be at most 10000 \(\[serve\]\.max_k\), got 10001$"):
        lim.check_k(10_001, "-k")
    with pytest.raises(UsageError, match=r"^the query is 10,001 characters long; at most 10,000 "):
        lim.check_queries(["x" * 10_001])
    with pytest.raises(UsageError, match=r"^query 3 is 20,000 characters long; at most 10,000 "):
        lim.check_queries(["a", "b", "x" * 20_000, "y" * 30_000], batch=True)
    lim.check_queries(["q"] * 5_000, batch=True)  # the CLI's batch: not bounded in size


@pytest.mark.slow
def test_the_config_sets_the_limits_for_the_cli_and_the_server_alike(tmp_path):
    from chitragupta.service.warm import WarmEngines

    root = make_workspace(tmp_path, DOCS)
    (root / "config.toml").write_text("[serve]\nmax_k = 5\nmax_query_chars = 12\n", encoding="utf-8")
    run_cli("index", "-w", root, check=True)
    warm = WarmEngines(root)
    assert len(warm.search("twin", k=5)["hits"]) == 5
    with pytest.raises(UsageError, match=r"^k must be at most 5 \(\[serve\]\.max_k\), got 6$"):
        warm.search("twin", k=6)
    with pytest.raises(UsageError, match=r"^k must be at most 5"):
        warm.similar(DOCS[0]["_id"], k=6)
    with pytest.raises(UsageError, match=r"^the query is 13 characters long; at most 12 "):
        warm.search("twin model xy", k=5)
    for call in (lambda: warm.evidence(DOCS[0]["_id"], "twin model xy"), lambda: warm.explain("twin model xy", DOCS[0]["_id"])):
        with pytest.raises(UsageError, match=r"^the query is 13 characters long; at most 12 "):
            call()
    assert warm.explain("twin model", DOCS[0]["_id"])["citekey"] == DOCS[0]["_id"]
    p = run_cli("search", "-w", root, "twin", "-k", "6")
    assert p.returncode == 1 and p.stderr == "error: -k must be at most 5 ([serve].max_k), got 6\n"
    p = run_cli("search", "-w", root, "twin model xy", "-k", "5")
    assert p.returncode == 1 and "the query is 13 characters long; at most 12 ([serve].max_query_chars)" in p.stderr
    # a batch skips the query, naming its line and id, and answers the rest; its default k (100) is over this limit
    queries = write_jsonl(tmp_path / "q.jsonl", [{"_id": "a", "text": "twin"}, {"_id": "b", "text": "x" * 40}])
    p = run_cli("search", "-w", root, "--queries", queries, "--run", tmp_path / "run.trec", "-k", "5")
    assert p.returncode == 0 and f"{queries}:2: query 'b' is 40 characters long; at most 12" in p.stderr
    assert {line.split()[0] for line in (tmp_path / "run.trec").read_text().splitlines()} == {"a"}
    p = run_cli("search", "-w", root, "--queries", queries, "--run", "-")
    assert p.returncode == 1 and "-k must be at most 5 ([serve].max_k), got 100" in p.stderr
    for cmd in (["evidence", "-w", root, "twin model xy", "--citekey", DOCS[0]["_id"]],
                ["explain", "-w", root, "twin model xy", "--citekey", DOCS[0]["_id"]]):
        p = run_cli(*cmd)  # the CLI's evidence and explain refuse as the server's tools do
        assert p.returncode == 1 and "the query is 13 characters long; at most 12 ([serve].max_query_chars)" in p.stderr


@pytest.mark.slow
def test_within_the_limits_nothing_changes(ws, tmp_path):
    from chitragupta.service.warm import WarmEngines

    q = "twin " * 1999 + "model"  # 10,000 characters
    cli = json.loads(run_cli("search", "-w", ws, q, "-k", "10000", "--json", check=True).stdout)
    assert WarmEngines(ws).search(q, k=10_000)["hits"] == cli and cli
    from chitragupta import open_searcher

    searcher = open_searcher(ws, "bm25")
    assert SearchRequest.checked(k=3).run_many(searcher, ["twin"] * 1_001).topk.ids.shape == (1_001, 3)  # the CLI's


@pytest.mark.parametrize("bad", [True, False, "5", 2.5])
def test_an_integer_given_as_a_bool_a_string_or_a_fraction_is_refused_on_every_surface(ws, bad):
    from chitragupta import open_searcher
    from chitragupta.service import citations
    from chitragupta.service.warm import WarmEngines

    warm, key = WarmEngines(ws), DOCS[0]["_id"]
    calls = [lambda: SearchRequest.checked(k=bad), lambda: SearchRequest.checked(snippet_chars=bad),
             lambda: open_searcher(ws, "bm25").search("twin", k=bad), lambda: warm.search("twin", k=bad),
             lambda: warm.search("twin", snippet_chars=bad), lambda: warm.similar(key, k=bad),
             lambda: warm.evidence(key, "twin", n=bad), lambda: warm.evidence(key, "twin", width=bad),
             lambda: citations.missing(ws, min_count=bad), lambda: citations.missing(ws, k=bad)]
    for call in calls:
        with pytest.raises(UsageError, match=r"must be (an integer|a whole number)"):
            call()


def test_the_servers_tools_refuse_what_the_sdk_would_coerce():
    pytest.importorskip("mcp")
    from chitragupta.serve.server import strict_integers

    schema = {"properties": {"k": {"type": "integer", "default": 10},
                             "snippet_chars": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                             "year": {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "query": {"type": "string"}}}
    for args in ({"k": True}, {"k": "5"}, {"snippet_chars": False}, {"snippet_chars": "0"}):
        with pytest.raises(UsageError, match=r"^(k|snippet_chars) must be an integer, got (true|false|\"5\"|\"0\")$"):
            strict_integers(schema, args, UsageError)
    strict_integers(schema, {"k": 5, "snippet_chars": None, "year": "2019..", "query": "true", "other": True}, UsageError)
