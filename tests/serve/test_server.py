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


def test_warm_engines_reopen_only_when_the_workspace_changed(ws):
    from chitragupta.service.warm import WarmEngines

    age_texts(ws)  # past the 2 s in which a stamp is not trusted
    warm = WarmEngines(ws)
    warm.search("twin")
    first = warm.retriever()
    warm.search("model")
    assert warm.retriever() is first  # nothing changed: the same engine, warm
    run_cli("index", "-w", ws, "--force", check=True)
    warm.search("twin")
    assert warm.retriever() is not first  # a new generation switched in by another process
    second = warm.retriever()
    (ws / "config.toml").write_text("[retrieval]\nk1 = 0.9\n")
    got = warm.search("twin model")
    assert warm.retriever() is not second and warm.retriever().params.k1 == 0.9
    cli = json.loads(run_cli("search", "-w", ws, "twin model", "--json", check=True).stdout)
    assert got["hits"] == cli


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
        return tool.input_schema, got, bad, unknown

    schema, got, bad, unknown = drive_server(root, script)
    text = json.dumps(schema)
    for name in ("year", "author", "keyword", "venue", "type", "keys"):
        assert f'"{name}"' in text
    assert "2015..2020" in text and "family name" in text  # described
    cli = json.loads(run_cli("search", "-w", root, "twin model sensor", "-k", "20", "--json", "--year", "2000..2010",
                             "--author", "MULLER", check=True).stdout)
    assert got["hits"] == cli and cli
    allowed = {d["_id"] for i, d in enumerate(DOCS) if 2000 <= 1990 + i % 30 <= 2010 and not i % 3}
    assert {h["citekey"] for h in cli} <= allowed
    assert bad.is_error and "filters.year: bad value '20x5'" in bad.content[0].text
    assert unknown.is_error
