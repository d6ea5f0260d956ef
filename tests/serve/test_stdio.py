"""``chitragupta serve`` on the wire: raw lines written to a real server's stdin, every line read back from
its stdout. Each malformed line is answered with its JSON-RPC 2.0 code, the server keeps reading, and
nothing but JSON-RPC reaches stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import RawServer, make_workspace, random_docs, run_cli, serve_argv

pytest.importorskip("mcp")

DOCS = random_docs(11, 60, vocab=50)






@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("wire"), DOCS)
    run_cli("index", "-w", root, check=True)
    return root


def _error(msg) -> tuple[int, object, str]:
    assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and "error" in msg, msg
    return msg["error"]["code"], msg["id"], msg["error"]["message"]


@pytest.mark.slow
def test_every_malformed_line_is_answered_with_its_code_and_the_server_keeps_reading(ws):
    s = RawServer(serve_argv(ws))
    try:
        # before initialize: a tool call is refused with words that say why
        s.call(1, "search", {"query": "twin"})
        code, id_, text = _error(s.next())
        assert (code, id_) == (-32600, 1) and "not initialised" in text and "initialize" in text
        s.request(2, "ping")  # ping is allowed before initialize (the MCP lifecycle)
        assert s.next() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert s.initialise(3)["result"]["serverInfo"]["name"] == "chitragupta"

        cases = [  # (the line, its code, the id the reply carries)
            (b"this is not json", -32700, None),
            (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", ', -32700, None),  # cut short
            (b'\xff\xfe{"jsonrpc": "2.0"}', -32700, None),  # not UTF-8
            (b"[]", -32600, None),
            (b'[{"jsonrpc": "2.0", "id": 6, "method": "ping"}]', -32600, None),  # a batch
            (b'"a string"', -32600, None),
            (b"42", -32600, None),
            (b"null", -32600, None),
            (b'{"jsonrpc": "2.0", "id": 7}', -32600, 7),  # no method, not a response
            (b'{"jsonrpc": "2.0", "id": "x8", "params": {}}', -32600, "x8"),
            (b'{"jsonrpc": "1.0", "id": 9, "method": "ping"}', -32600, 9),
            (b'{"id": 10, "method": "ping"}', -32600, 10),  # no "jsonrpc"
            (b'{"jsonrpc": "1.0", "method": "notifications/initialized"}', -32600, None),  # a notification
            (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None),  # an id that is no id
            (b'{"jsonrpc": "2.0", "id": 11, "method": 12}', -32600, 11),
            (b'{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": 3}', -32600, 12),
        ]
        for line, want_code, want_id in cases:
            s.send(line)
            code, id_, text = _error(s.next())
            assert (code, id_) == (want_code, want_id), (line, text)
            assert text.startswith("Parse error" if want_code == -32700 else "Invalid Request"), text
        s.send(b"")  # a blank line is no message: nothing answers it, and nothing breaks

        # an unknown tool is a tool error naming the tools
        s.call(20, "serch", {"query": "twin"})
        got = s.reply(20)["result"]
        assert got["isError"] and "unknown tool 'serch'" in got["content"][0]["text"]
        assert "search" in got["content"][0]["text"] and "evidence" in got["content"][0]["text"]
        # ... and a valid call after all of that is answered as the CLI answers
        s.call(21, "search", {"query": "twin model sensor", "k": 5})
        hits = s.reply(21)["result"]["structuredContent"]["hits"]
    finally:
        err = s.close()
    assert s.proc.returncode == 0, err  # end of input: the server stops, cleanly
    cli = json.loads(run_cli("search", "-w", ws, "twin model sensor", "-k", "5", "--json", check=True).stdout)
    assert hits == cli
    # every line on stdout was one JSON-RPC 2.0 message, and every request got exactly one answer
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in s.messages), (s.messages, err)
    answered = [m["id"] for m in s.messages if "method" not in m and m.get("id") is not None]
    assert sorted(map(str, answered)) == sorted(map(str, [1, 2, 3, 7, "x8", 9, 10, 11, 12, 20, 21]))
    assert len(s.messages) == len(answered) + sum(1 for _l, _c, i in cases if i is None)


@pytest.mark.slow
def test_a_failed_initialize_leaves_the_session_uninitialised(ws):
    s = RawServer(serve_argv(ws))
    try:
        s.request(1, "initialize", {"capabilities": {}})  # no protocolVersion, no clientInfo
        assert "error" in s.reply(1)
        s.call(2, "search", {"query": "twin"})
        code, id_, text = _error(s.reply(2))
        assert (code, id_) == (-32600, 2) and "not initialised" in text
        s.initialise(3)
        s.call(4, "search", {"query": "twin", "k": 2})
        assert len(s.reply(4)["result"]["structuredContent"]["hits"]) == 2
    finally:
        s.close()


@pytest.mark.slow
def test_the_limits_are_tool_errors_with_the_clis_words(ws):
    s = RawServer(serve_argv(ws))
    try:
        s.initialise()
        s.call(1, "search", {"query": "twin " * 2001, "k": 3})  # 10,005 characters
        s.call(2, "search", {"query": "twin", "k": 10_001})
        s.call(3, "similar", {"citekey": DOCS[0]["_id"], "k": 10**12})
        s.call(4, "search", {"query": "twin", "k": 10_000})  # the limit itself is allowed
        texts = {i: s.reply(i)["result"] for i in (1, 2, 3, 4)}
    finally:
        s.close()
    assert all(texts[i]["isError"] for i in (1, 2, 3)) and not texts[4]["isError"]
    assert "the query is 10,005 characters long; at most 10,000 ([serve].max_query_chars)" in texts[1]["content"][0]["text"]
    assert "k must be at most 10000 ([serve].max_k), got 10001" in texts[2]["content"][0]["text"]
    assert "k must be at most 10000 ([serve].max_k), got 1000000000000" in texts[3]["content"][0]["text"]
    cli = json.loads(run_cli("search", "-w", ws, "twin", "-k", "10000", "--json", check=True).stdout)
    assert texts[4]["structuredContent"]["hits"] == cli and cli


def _nested(depth: int) -> str:
    return '{"a":' * depth + '"x"' + "}" * depth


@pytest.mark.slow
def test_every_request_is_answered_however_deep_it_nests(ws):
    # the SDK's JSON reader refuses past ~200 levels and a lone surrogate escape, and used to drop such a
    # line without a word; Python's json gives up near 1,000. Each is answered, with its id where readable.
    depths = [50, 150, 200, 500, 999, 10_000, 100_000]
    s = RawServer(serve_argv(ws))
    try:
        s.initialise()
        for i, depth in enumerate(depths, start=1):
            s.send('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":'
                   '{"query":"twin","filters":%s}}}' % (i, _nested(depth)))
        s.send('{"jsonrpc":"2.0","id":"sur","method":"tools/call","params":{"name":"search","arguments":'
               '{"query":"twin \\ud800"}}}')
        s.send('{"jsonrpc":"2.0","id":"meta","method":"ping","params":{"_meta":%s}}' % _nested(400))
        s.call("after", "search", {"query": "twin", "k": 2})
        got = [s.next() for _ in range(len(depths) + 3)]
        s.request("last", "ping")
        assert s.next() == {"jsonrpc": "2.0", "id": "last", "result": {}}  # nothing more was written before it
    finally:
        s.close()
    by_id = {}
    for m in got:
        by_id.setdefault(m.get("id"), []).append(m)
    assert len(by_id.pop("after")[0]["result"]["structuredContent"]["hits"]) == 2  # the server kept serving
    assert by_id.pop(1)[0]["result"]["isError"] and by_id.pop(2)[0]["result"]["isError"]  # the tool's own error
    for key in (3, 4, "sur", "meta"):  # read by json, refused by the SDK's reader: answered with the id
        code, _id, text = _error(by_id.pop(key)[0])
        assert code == -32700 and text.startswith("Parse error"), (key, text)
    # deeper than json reads here: a parse error, its id null (JSON-RPC's rule) where it could not be read
    rest = [m for ms in by_id.values() for m in ms]
    assert len(rest) == 3 and set(by_id) <= {5, 6, 7, None}
    assert all(_error(m)[0] == -32700 and "nested too deeply" in _error(m)[2] for m in rest)
