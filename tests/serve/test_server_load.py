"""The MCP server under load (slow tier): four tasks on one session making BM25, passage, hybrid and
filtered calls while another process re-indexes the workspace twice (``bench/serve_load.py``, smaller).
No call fails, none is left unanswered, and every reply equals the CLI's answer against the index
generation it used: generation A (before an ``import`` of more records) or B (after it), matched by its
hits, and current at some moment between the call's send and its reply."""

from __future__ import annotations

import asyncio

import pytest

from helpers import age_texts, random_docs

pytest.importorskip("mcp")

NEW = "zyxnewterm"  # a word only generation B's records hold: queries with it tell A's answers from B's


@pytest.mark.slow
def test_four_clients_while_the_index_is_rebuilt_twice(tmp_path, encoder):  # noqa: F811
    from bench.serve_load import build, check, expected, latencies, load

    docs = random_docs(41, 80, vocab=60)
    extra = [dict(d, _id="x" + d["_id"], text=f"{d['text']} {NEW} twin") for d in random_docs(42, 12, vocab=60)]
    built = build(tmp_path, docs, extra, embed=True)
    age_texts(built["ws"])  # a stamp within the last 2 s is not trusted (every call would reopen)
    queries = ["twin model", f"{NEW} twin", "sensor fidelity heat", f"model {NEW}", "ocean soil", "digital twin"]
    keys = sorted(d["_id"] for d in docs)[::2] + sorted(d["_id"] for d in extra)[::2]

    want_a = expected(built["ws"], queries, keys)
    got = asyncio.run(load(built, queries, keys, clients=4, calls=24, env={"CHITRAGUPTA_SERVE_TEST": "1"}))
    want_b = expected(built["ws"], queries, keys)
    verdict = check(got, want_a, want_b)

    assert len(got["records"]) == 4 * 24  # every call answered
    assert verdict["errors"] == [], verdict["errors"][:3]
    assert verdict["wrong"] == [], verdict["wrong"][:3]
    assert len(got["rebuilds"]) == 2
    # the two generations were both seen, and told apart: the queries holding the new word rank B's records
    assert any(want_a[(kind, q)] != want_b[(kind, q)] for kind in ("bm25", "hybrid", "filtered") for q in queries)
    assert verdict["generations"]["A"] > 0 and verdict["generations"]["B"] > 0, verdict["generations"]
    lat = latencies(got["records"])
    assert set(lat) == {"bm25", "passage", "hybrid", "filtered"} and all(v["n"] == 24 for v in lat.values())
