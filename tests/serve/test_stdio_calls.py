"""Concurrent tool calls: a quick call answers while a slow one runs, ``notifications/cancelled`` stops a
queued call and drops its reply, ``[serve].call_timeout_s`` answers with a tool error, and the warm engines
open once and answer many threads as they answer one. The slow engine is registered through the service
registry (in the server's own process: ``serve_argv(code=...)``); it waits for a gate file the test opens,
so every check here is about order, never about time."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import (
    RawServer,
    age_texts,
    make_workspace,
    random_docs,
    run_cli,
    serve_argv,
)

pytest.importorskip("mcp")

DOCS = random_docs(23, 80, vocab=60)

GATED = '''
import os, time
from pathlib import Path
from chitragupta.engine.search.bm25 import BM25Searcher
from chitragupta.engine.search.searcher import Searcher
from chitragupta.service import registry

GATES = Path(os.environ["CHITRAGUPTA_TEST_GATES"])


class Gated(Searcher):
    """BM25's answers, given once the gate file "open" exists; "ran-QUERY" says a call started."""

    NAME = "gated"
    UNITS = ("document",)

    def __init__(self, inner):
        self.inner, self.workspace = inner, inner.workspace

    def rank_many(self, queries, k=10, *, unit=None, max_per_source=None, **kw):
        for q in queries:
            (GATES / ("ran-" + q)).write_text("")
        print("a tool printing on stdout")  # none of it may reach the wire
        os.write(1, b"a tool writing to fd 1\\n")
        t = time.monotonic()
        while not (GATES / "open").exists() and time.monotonic() - t < 60:
            time.sleep(0.01)
        return self.inner.rank_many(queries, k, unit="document", max_per_source=max_per_source, **kw)

    def responses(self, ranked, *, snippet_chars=None):
        return self.inner.responses(ranked, snippet_chars=snippet_chars)

    def index_notes(self, unit=None):
        return self.inner.index_notes("document")

    def changed(self):
        return self.inner.changed()


registry.register(registry.EngineSpec("gated", lambda ws, o: Gated(BM25Searcher.open(ws, update=o.update)),
                                      ("document",), "a test engine that waits for a gate file"))
'''


@pytest.fixture()
def ws(tmp_path) -> Path:
    root = make_workspace(tmp_path, DOCS)
    run_cli("index", "-w", root, check=True)
    age_texts(root)  # a stamp within the last 2 s is not trusted (every call would reopen)
    return root


def _gated_server(root: Path, gates: Path, config: str) -> RawServer:
    (root / "config.toml").write_text(config, encoding="utf-8")
    gates.mkdir(exist_ok=True)
    s = RawServer(serve_argv(root, code=GATED), env={"CHITRAGUPTA_TEST_GATES": str(gates),
                                                     "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    s.initialise()
    return s


def _wait_for(path: Path) -> None:
    t = time.monotonic()
    while not path.exists():
        assert time.monotonic() - t < 120, f"{path.name} never appeared"
        time.sleep(0.01)


def _hits(reply) -> list:
    result = reply["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]["hits"]


@pytest.mark.slow
def test_a_bm25_call_answers_while_a_slow_call_runs(ws, tmp_path):
    gates = tmp_path / "gates"
    s = _gated_server(ws, gates, "[serve]\nworkers = 2\n")
    try:
        s.call(1, "search", {"query": "twin model", "engine": "gated", "k": 5})
        _wait_for(gates / "ran-twin model")  # the slow call runs (and waits for the gate)
        s.call(2, "search", {"query": "sensor fidelity", "k": 5})
        quick = s.reply(2)  # answered while the slow call still waits: it was not queued behind it
        assert not any(m.get("id") == 1 for m in s.messages if isinstance(m, dict))
        (gates / "open").write_text("")
        slow = s.reply(1)
    finally:
        err = s.close()
    cli = json.loads(run_cli("search", "-w", ws, "sensor fidelity", "-k", "5", "--json", check=True).stdout)
    assert _hits(quick) == cli and cli
    cli_slow = json.loads(run_cli("search", "-w", ws, "twin model", "-k", "5", "--json", check=True).stdout)
    assert _hits(slow) == cli_slow and cli_slow  # the same answer as the same call made alone
    # what the tool printed went to stderr; stdout held JSON-RPC only
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in s.messages), s.messages
    assert "a tool printing on stdout" in err and "a tool writing to fd 1" in err


@pytest.mark.slow
def test_a_cancelled_queued_call_never_runs_and_is_not_answered(ws, tmp_path):
    gates = tmp_path / "gates"
    s = _gated_server(ws, gates, "[serve]\nworkers = 1\n")
    try:
        s.call(1, "search", {"query": "first", "engine": "gated"})
        _wait_for(gates / "ran-first")  # the one worker is busy
        s.call(2, "search", {"query": "second", "engine": "gated"})  # queued behind it
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "moved on"}})
        s.request(3, "ping")
        assert s.reply(3)["result"] == {}  # the notification was read before the gate opens
        (gates / "open").write_text("")
        s.reply(1)
        # one worker, first come first served: a call sent now runs after "second" would have
        s.call(4, "search", {"query": "twin", "k": 3})
        assert len(_hits(s.reply(4))) == 3
    finally:
        s.close()
    assert not (gates / "ran-second").exists()  # the cancelled call never ran
    assert not any(m.get("id") == 2 for m in s.messages if isinstance(m, dict))  # nor was it answered


@pytest.mark.slow
def test_a_call_past_its_time_limit_is_a_tool_error_and_the_server_goes_on(ws, tmp_path):
    gates = tmp_path / "gates"
    s = _gated_server(ws, gates, "[serve]\nworkers = 2\ncall_timeout_s = 3\n")
    try:
        s.call(1, "search", {"query": "twin", "k": 2})  # BM25 opened (and numba loaded) before the limit matters
        assert len(_hits(s.reply(1))) == 2
        s.call(2, "search", {"query": "never", "engine": "gated"})  # the gate stays shut
        late = s.reply(2)["result"]
        s.call(3, "search", {"query": "twin", "k": 2})
        after = s.reply(3)
    finally:
        s.close()
    assert late["isError"] and "[serve].call_timeout_s = 3 s" in late["content"][0]["text"]
    assert len(_hits(after)) == 2


@pytest.mark.slow
def test_serve_settings_are_checked_as_config(ws):
    (ws / "config.toml").write_text("[serve]\nworkers = -1\n", encoding="utf-8")
    p = run_cli("serve", "-w", ws)
    assert p.returncode == 1 and "[serve] workers = -1 is not allowed" in p.stderr
    (ws / "config.toml").write_text("[serve]\ncall_timeout_s = 0\n", encoding="utf-8")
    p = run_cli("serve", "-w", ws)
    assert p.returncode == 1 and "call_timeout_s" in p.stderr


# -- the warm engines from many threads --------------------------------------------------------------------

def test_engines_open_once_when_the_first_calls_arrive_together(ws):
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.service import registry
    from chitragupta.service.warm import WarmEngines

    opened, release = [], threading.Event()

    def open_slowly(w, opts):
        opened.append(threading.current_thread().name)
        release.wait(60)
        return BM25Searcher.open(w, update=opts.update)

    registry.register(registry.EngineSpec("slowopen", open_slowly, ("document",), "a test engine, slow to open"))
    try:
        warm = WarmEngines(ws)
        with ThreadPoolExecutor(8) as pool:
            waiting = [pool.submit(warm.search, "twin model", k=5, engine="slowopen") for _ in range(6)]
            while not opened:
                time.sleep(0.01)
            # one engine opening holds no other: a BM25 call answers meanwhile
            quick = pool.submit(warm.search, "twin model", k=5).result(timeout=120)
            assert not any(f.done() for f in waiting)
            release.set()
            got = [f.result(timeout=120) for f in waiting]
    finally:
        registry.unregister("slowopen")
    assert len(opened) == 1  # six calls at once, one open
    assert all(g == quick for g in got) and quick["hits"]


@pytest.mark.slow
def test_many_threads_get_what_one_thread_gets(ws):
    from chitragupta.service.warm import WarmEngines

    keys = [d["_id"] for d in DOCS]
    words = sorted({w for d in DOCS for w in d["text"].split()})[:30]
    calls = []
    for i, w in enumerate(words):
        q = f"{w} {words[(i * 7) % len(words)]}"
        calls += [("search", (q,), {"k": 7}), ("search", (q,), {"k": 3, "snippet_chars": 40}),
                  ("search", (q,), {"k": 5, "filters": {"keys": keys[::3]}}),
                  ("evidence", (keys[i], q), {}), ("explain", (q, keys[i]), {}), ("similar", (keys[i],), {"k": 4})]
    alone = WarmEngines(ws)
    want = [getattr(alone, name)(*args, **kw) for name, args, kw in calls]
    together = WarmEngines(ws)  # a fresh cache: its engines open under the load too
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda c: getattr(together, c[0])(*c[1], **c[2]), calls * 2))
    assert got == want * 2
    assert any(w["hits"] for w in want if "hits" in w)
