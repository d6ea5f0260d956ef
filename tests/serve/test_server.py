"""``chitragupta serve``: the MCP server driven by the official SDK's own stdio client. Its answers are
the CLI's; a bad argument is a tool error and the server keeps serving; a workspace changed by another
process (a new import, an index rebuilt) is answered from, on the next call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import (
    age_texts,
    drive_server,
    make_workspace,
    random_docs,
    run_cli,
    tool_json,
    write_jsonl,
)

mcp = pytest.importorskip("mcp")

DOCS = random_docs(11, 60, vocab=50)


@pytest.fixture()
def ws(tmp_path) -> Path:
    root = make_workspace(tmp_path, DOCS)
    run_cli("index", "-w", root, check=True)
    return root








@pytest.mark.slow
def test_tools_answer_what_the_cli_answers(ws):
    key = DOCS[3]["_id"]

    async def script(c):
        names = sorted(t.name for t in (await c.list_tools()).tools)
        search = tool_json(await c.call_tool("search", {"query": "twin model sensor", "k": 5}))
        passage = await c.call_tool("search", {"query": "twin", "unit": "passage"})
        evidence = tool_json(await c.call_tool("evidence", {"citekey": key, "query": "twin model"}))
        explain = tool_json(await c.call_tool("explain", {"query": "twin model", "citekey": key}))
        source = tool_json(await c.call_tool("source", {"citekey": key}))
        similar = tool_json(await c.call_tool("similar", {"citekey": key, "k": 4}))
        keys = [d["_id"] for d in DOCS[::2]]
        sim_f = tool_json(await c.call_tool("similar", {"citekey": key, "k": 4, "filters": {"keys": keys}}))
        return names, search, passage, evidence, explain, source, similar, sim_f, keys

    names, search, passage, evidence, explain, source, similar, sim_f, keys = drive_server(ws, script)
    assert names == ["check_citations", "cited_by", "evidence", "explain", "missing", "references", "search",
                     "similar", "source"]
    cli_sim = json.loads(run_cli("similar", "-w", ws, key, "-k", "4", "--json", check=True).stdout)
    assert similar["hits"] == cli_sim and key not in [h["citekey"] for h in cli_sim]
    assert sim_f["hits"] and {h["citekey"] for h in sim_f["hits"]} <= set(keys)  # filters on similar
    kf = ws.parent / "keys.txt"
    kf.write_text("\n".join(keys) + "\n")
    cli_f = json.loads(run_cli("similar", "-w", ws, key, "-k", "4", "--json", "--keys", kf, check=True).stdout)
    assert sim_f["hits"] == cli_f
    cli = json.loads(run_cli("search", "-w", ws, "twin model sensor", "-k", "5", "--json", check=True).stdout)
    assert search["hits"] == cli and len(cli) == 5
    assert all(set(n) == {"kind", "text"} for n in search["notes"])
    assert not passage.is_error  # no sidecars: no hits, and a note that says why
    assert any("passage" in n["text"] for n in passage.structured_content["notes"])
    cli_ev = json.loads(run_cli("evidence", "-w", ws, "twin model", "--citekey", key, "--json", check=True).stdout)
    assert evidence["hits"] == cli_ev
    cli_ex = json.loads(run_cli("explain", "-w", ws, "twin model", "--citekey", key, "--json", check=True).stdout)
    assert explain == cli_ex
    assert source["citekey"] == key and source["status"] == "parsed" and source["title"] == DOCS[3]["title"]
    assert set(source) >= {"title", "authors", "year", "status"}


@pytest.mark.slow
def test_check_citations_answers_what_check_json_answers(ws, tmp_path):
    key = DOCS[3]["_id"]
    text = f"{' '.join(DOCS[3]['text'].split()[:12])} [@{key}].\n\nA claim citing [@nokey].\n"

    async def script(c):
        got = tool_json(await c.call_tool("check_citations", {"text": text, "format": "markdown"}))
        bad = await c.call_tool("check_citations", {"text": text, "engine": "dense"})
        return got, bad.is_error

    got, bad = drive_server(ws, script)
    draft = tmp_path / "d.md"
    draft.write_text(text, encoding="utf-8")
    cli = run_cli("check", "-w", ws, draft, "--json")
    assert cli.returncode == 3 and got == json.loads(cli.stdout)
    assert [c["key"] for c in got["citations"]] == [key, "nokey"] and got["citations"][1]["status"] == "unknown"
    assert bad


@pytest.mark.slow
def test_a_bad_argument_is_a_tool_error_and_the_server_keeps_serving(ws):
    async def script(c):
        out = []
        for name, args in [("search", {"query": "twin", "k": 0}), ("search", {"query": "twin", "engine": "nope"}),
                           ("search", {"query": "twin", "k": "many"}), ("source", {"citekey": "no-such-key"}),
                           ("explain", {"query": "twin", "citekey": "d9999"}), ("evidence", {"citekey": "d0001"}),
                           ("search", {"query": "twin", "engine": "embed"})]:
            r = await c.call_tool(name, args)
            out.append((r.is_error, r.content[0].text if r.content else ""))
        ok = await c.call_tool("search", {"query": "twin", "k": 3})
        return out, ok

    out, ok = drive_server(ws, script)
    assert all(err for err, _ in out), out
    texts = [t for _, t in out]
    assert "k must be an integer >= 1, got 0" in texts[0]
    assert "unknown citekey 'no-such-key'" in texts[3] and "unknown citekey 'd9999'" in texts[4]
    assert "embedding index" in texts[6] or "enrich" in texts[6]  # no store here: says how to build one
    assert not ok.is_error and len(ok.structured_content["hits"]) == 3


@pytest.mark.slow
def test_a_workspace_changed_by_another_process_is_answered_from(ws, tmp_path):
    word = "zyxxyzuniqueterm"

    async def script(c):
        before = tool_json(await c.call_tool("search", {"query": word}))
        # another process imports a corpus with one more document, and indexes it
        more = write_jsonl(tmp_path / "more.jsonl", DOCS + [{"_id": "zz-new", "title": "New", "text": f"{word} twin",
                                                              "authors": ["Doe, Jane"], "year": 2021}])
        run_cli("import", "-w", ws, more, check=True)
        run_cli("index", "-w", ws, check=True)
        after = tool_json(await c.call_tool("search", {"query": word}))
        run_cli("index", "-w", ws, "--force", check=True)  # a new generation of the same index
        again = tool_json(await c.call_tool("search", {"query": word}))
        title = tool_json(await c.call_tool("source", {"citekey": "zz-new"}))
        return before, after, again, title

    before, after, again, title = drive_server(ws, script)
    assert before["hits"] == []
    assert [h["citekey"] for h in after["hits"]] == ["zz-new"]
    assert again["hits"] == after["hits"]
    assert title["title"] == "New" and title["authors"] == ["Doe, Jane"] and title["year"] == 2021


@pytest.mark.slow
def test_serve_without_the_sdk_names_the_extra(ws):
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'mcp' or name.startswith('mcp.'):\n"
            "            raise ImportError('blocked for the test')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from chitragupta.cli.main import main\n"
            f"sys.exit(main(['serve', '-w', {str(ws)!r}]))\n")
    import subprocess

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "'serve' extra" in p.stderr


@pytest.mark.slow
def test_warm_engines_reopen_only_when_the_workspace_changed(ws):
    from chitragupta.service.warm import WarmEngines

    age_texts(ws)  # past the 2 s in which a stamp is not trusted
    warm = WarmEngines(ws)
    warm.search("twin")
    first = warm.searcher("bm25")
    warm.search("model")
    assert warm.searcher("bm25") is first  # nothing changed: the same engine, warm
    run_cli("index", "-w", ws, "--force", check=True)
    warm.search("twin")
    assert warm.searcher("bm25") is not first  # a new generation switched in by another process
    second = warm.searcher("bm25")
    (ws / "config.toml").write_text("[retrieval]\nk1 = 0.9\n")
    got = warm.search("twin model")
    assert warm.searcher("bm25") is not second and warm.searcher("bm25").params.k1 == 0.9
    cli = json.loads(run_cli("search", "-w", ws, "twin model", "--json", check=True).stdout)
    assert got["hits"] == cli


@pytest.mark.slow
def test_search_takes_filters_as_typed_described_properties(tmp_path):
    docs = [dict(d, year=1990 + i % 30, authors=["Smith, J"] if i % 3 else ["Müller, A"], type="article")
            for i, d in enumerate(DOCS)]
    root = make_workspace(tmp_path, docs)
    run_cli("index", "-w", root, check=True)
    filters = {"year": "2000..2010", "author": ["MULLER"]}

    async def script(c):
        tool = next(t for t in (await c.list_tools()).tools if t.name == "search")
        got = tool_json(await c.call_tool("search", {"query": "twin model sensor", "k": 20, "filters": filters}))
        bad = await c.call_tool("search", {"query": "twin", "filters": {"year": "20x5"}})
        unknown = await c.call_tool("search", {"query": "twin", "filters": {"yaer": 2001}})
        no_topics = await c.call_tool("search", {"query": "twin", "filters": {"topic": 1}})
        return tool.input_schema, got, bad, unknown, no_topics

    schema, got, bad, unknown, no_topics = drive_server(root, script)
    text = json.dumps(schema)
    assert no_topics.is_error and "this workspace has no topics" in no_topics.content[0].text
    for name in ("year", "author", "keyword", "venue", "type", "keys", "topic"):
        assert f'"{name}"' in text
    assert "2015..2020" in text and "family name" in text  # described
    cli = json.loads(run_cli("search", "-w", root, "twin model sensor", "-k", "20", "--json", "--year", "2000..2010",
                             "--author", "MULLER", check=True).stdout)
    assert got["hits"] == cli and cli
    allowed = {d["_id"] for i, d in enumerate(DOCS) if 2000 <= 1990 + i % 30 <= 2010 and not i % 3}
    assert {h["citekey"] for h in cli} <= allowed
    assert bad.is_error and "filters.year: bad value '20x5'" in bad.content[0].text
    assert unknown.is_error


CITED = [dict(d, year=2000 + i % 20, authors=[f"Fam{j}, Given{j}" for j in range(1 + i % 7)])
         for i, d in enumerate(random_docs(11, 60, vocab=50))]


@pytest.mark.slow
def test_replies_an_agent_can_afford(tmp_path):
    root = make_workspace(tmp_path, CITED)
    (root / "config.toml").write_text("[serve]\nmax_reply_chars = 3000\n")
    run_cli("index", "-w", root, check=True)
    key = CITED[6]["_id"]  # seven authors

    async def script(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        out = {"tools": tools}
        for name, args in [("search", {"query": "twin model", "k": 3}), ("search", {"query": "twin", "k": 40}),
                           ("evidence", {"citekey": key, "query": "twin model", "n": 30, "width": 400}),
                           ("similar", {"citekey": key, "k": 2}), ("source", {"citekey": key}),
                           ("cited_by", {"citekey": key}), ("missing", {}), ("references", {"citekey": key}),
                           ("explain", {"query": "twin model sensor", "citekey": key})]:
            out[(name, json.dumps(args))] = await c.call_tool(name, args)
        out["bad"] = [await c.call_tool(name, args) for name, args in [
            ("search", {"query": "twin", "k": True}), ("search", {"query": "twin", "k": "5"}),
            ("search", {"query": "twin", "snippet_chars": False}), ("similar", {"citekey": key, "k": True}),
            ("evidence", {"citekey": key, "query": "twin", "n": True}),
            ("evidence", {"citekey": key, "query": "twin", "width": "600"}),
            ("missing", {"min_count": True}), ("missing", {"k": True})]]
        return out

    out = drive_server(root, script)
    replies = {k: r for k, r in out.items() if isinstance(k, tuple)}
    # every reply within its cap (the text the agent reads, and the structured content beside it), no
    # absolute path anywhere, notes as {kind, text} everywhere
    for (name, args), r in replies.items():
        text = r.content[0].text
        assert len(text) <= 3000, (name, len(text))
        assert str(tmp_path) not in text and str(tmp_path) not in json.dumps(r.structured_content or {}), name
        if not r.is_error:
            assert all(set(n) == {"kind", "text"} for n in r.structured_content.get("notes", [])), name
    # a list longer than the cap is cut to a prefix of the whole answer, and a note says so
    big = tool_json(replies[("search", json.dumps({"query": "twin", "k": 40}))])
    cli = json.loads(run_cli("search", "-w", root, "twin", "-k", "40", "--json", check=True).stdout)
    assert 0 < len(big["hits"]) < len(cli) and big["hits"] == cli[:len(big["hits"])]
    assert any(n["kind"] == "truncated" and f"of {len(cli)} hits" in n["text"] and "max_reply_chars = 3,000" in n["text"]
               for n in big["notes"])
    # hits carry authors (family names, "others" past five) and year, on every tool that gives hits
    small = tool_json(replies[("search", json.dumps({"query": "twin model", "k": 3}))])
    by_key = {d["_id"]: d for d in CITED}
    for h in small["hits"] + big["hits"]:
        d = by_key[h["citekey"]]
        fams = [a.split(",")[0] for a in d["authors"]]
        assert h["year"] == d["year"] and h["authors"] == (fams if len(fams) <= 5 else fams[:5] + ["others"])
    ev = tool_json(replies[("evidence", json.dumps({"citekey": key, "query": "twin model", "n": 30, "width": 400}))])
    assert ev["hits"] and all(h["authors"] == ["Fam0", "Fam1", "Fam2", "Fam3", "Fam4", "others"] for h in ev["hits"])
    assert all(0 < h["score"] <= 1 for h in ev["hits"])  # the share of the query's words the passage holds
    sim = tool_json(replies[("similar", json.dumps({"citekey": key, "k": 2}))])
    assert all(h["year"] == by_key[h["citekey"]]["year"] for h in sim["hits"])
    src = tool_json(replies[("source", json.dumps({"citekey": key}))])
    assert src["origin"] == "../corpus.jsonl" and src["parsed_path"].startswith("content/")
    # an integer given as true, false or a string is refused, as the Python API refuses k=True
    for r in out["bad"]:
        assert r.is_error and "must be an integer, got " in r.content[0].text, r.content[0].text
    # the search tool says its syntax and units, and what a hit holds
    desc = out["tools"]["search"].description
    for needle in ('"an exact phrase"', "+word", "-word", "authors", "year", "notes as {kind, text}"):
        assert needle in desc, needle
    assert "share of the query's distinct words" in out["tools"]["evidence"].description


@pytest.mark.slow
def test_the_search_tool_advertises_the_units_the_workspace_serves(tmp_path):
    plain = make_workspace(tmp_path / "plain", DOCS)
    with_sidecars = make_workspace(tmp_path / "sidecars", DOCS)
    first = sorted((with_sidecars / "content" / "parsed").glob("*.txt"))[0]
    paragraph = " ".join(["twin ocean summaries heat model sensor"] * 5)
    first.with_suffix(".passages.json").write_text(json.dumps(
        [{"text": paragraph, "label": "text", "page": p} for p in (1, 2)]))
    for root in (plain, with_sidecars):
        run_cli("index", "-w", root, check=True)

    async def script(c):
        tool = next(t for t in (await c.list_tools()).tools if t.name == "search")
        passage = tool_json(await c.call_tool("search", {"query": "twin ocean summaries heat", "unit": "passage"}))
        return tool, passage

    for root in (plain, with_sidecars):
        tool, passage = drive_server(root, script)
        units = tool.input_schema["properties"]["unit"]["anyOf"][0]["enum"]
        assert "document" in units and "chunk" not in units  # no embedding store here
        assert ("passage" in units) == bool(passage["hits"]), (root, units)  # advertised iff it answers
        assert ("passage:" in tool.description) == ("passage" in units)
        assert "embed: " in tool.description and "(nothing to serve in this workspace now)" in tool.description
    assert "passage" in units  # the sidecars' workspace serves passages
