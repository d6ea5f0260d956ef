"""The service layer (``chitragupta.service``): the one registry of engines, one request check, the same
defaults on every engine, and every surface (CLI, MCP server, Python API) reaching an engine through it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from chitragupta.engine.search.searcher import Searcher
from chitragupta.errors import UsageError
from chitragupta.service import registry
from chitragupta.service.request import SearchRequest

from helpers import age_texts, make_workspace, random_docs

ROOT = Path(__file__).resolve().parents[2]


# -- the registry ------------------------------------------------------------------------------------

def _collections_naming_engines(path: Path, names: set[str]) -> list[int]:
    """Lines of ``path`` holding a tuple/list/set literal, or a dict literal's keys, with 2+ engine names."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        got = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)} & names
        if len(got) >= 2:
            out.append(node.lineno)
    return out


@pytest.mark.slow
def test_the_engine_names_are_written_as_a_collection_in_one_module_only():
    names = set(registry.names())
    assert {"bm25", "embed", "hybrid"} <= names
    where = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "src").rglob("*.py"))
             if (lines := _collections_naming_engines(p, names))}
    assert where == {}, where  # the registry builds its tuple from EngineSpec calls, each naming one engine
    # ... and the one collection of the specs is the registry's
    specs = [n for n in ast.walk(ast.parse((ROOT / "src/chitragupta/service/registry.py").read_text()))
             if isinstance(n, ast.Tuple) and sum(isinstance(e, ast.Call) for e in n.elts) >= 3]
    assert len(specs) == 1


def test_unknown_engines_and_units_name_what_is_allowed():
    with pytest.raises(UsageError, match=r"unknown engine 'bm26'; allowed: bm25, embed, hybrid"):
        SearchRequest.checked(engine="bm26")
    with pytest.raises(UsageError, match=r"^--unit passage is for --engine bm25 or hybrid; --engine embed ranks chunk"):
        SearchRequest.checked(flags=True, engine="embed", unit="passage")
    with pytest.raises(UsageError, match=r"^unit 'passage' is for engine bm25 or hybrid; engine embed ranks chunk"):
        SearchRequest.checked(engine="embed", unit="passage")
    with pytest.raises(UsageError, match=r"unknown unit 'page'; allowed: document, passage, chunk"):
        SearchRequest.checked(engine="bm25", unit="page")
    with pytest.raises(UsageError, match=r"^-k must be an integer >= 1, got 0$"):
        SearchRequest.checked(flags=True, k=0)
    with pytest.raises(UsageError, match=r"^k must be an integer >= 1, got True$"):
        SearchRequest.checked(k=True)
    with pytest.raises(UsageError, match=r"^--snippet-chars must be an integer in \[0, 2147483647\]"):
        SearchRequest.checked(flags=True, snippet_chars=2**31)
    with pytest.raises(UsageError, match=r"^max_per_source must be an integer >= 1"):
        SearchRequest.checked(max_per_source=0)
    req = SearchRequest.checked(engine="embed")
    assert req.resolved_unit == "chunk" and req.k_for(False) == 10 and req.k_for(True) == 100


# -- a new engine is one registration, and every surface offers it -----------------------------------

class _Slow(Searcher):
    """A deliberately slow engine wrapping BM25: what a test registers to see the registry reach every surface."""

    NAME = "slowbm25"
    UNITS = ("document",)

    def __init__(self, inner, delay: float):
        self.inner, self.delay, self.workspace = inner, delay, inner.workspace

    def rank_many(self, queries, k=10, *, unit=None, max_per_source=None):
        import time

        time.sleep(self.delay)
        self.check_unit(unit)
        return self.inner.rank_many(queries, k, unit="document", max_per_source=max_per_source)

    def responses(self, ranked, *, snippet_chars=None):
        return self.inner.responses(ranked, snippet_chars=snippet_chars)

    def index_notes(self, unit=None):
        return self.inner.index_notes("document")

    def changed(self):
        return self.inner.changed()


@pytest.fixture()
def slow_engine():
    from chitragupta.engine.search.bm25 import BM25Searcher

    opened = []

    def open_slow(ws, opts):
        opened.append(opts)
        return _Slow(BM25Searcher.open(ws, update=opts.update), 0.01)

    registry.register(registry.EngineSpec("slowbm25", open_slow, ("document",), "a test engine"))
    try:
        yield opened
    finally:
        registry.unregister("slowbm25")
    assert "slowbm25" not in registry.names()


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("service"), random_docs(5, 40))


def test_a_registered_engine_reaches_the_api_the_warm_cache_the_cli_and_the_mcp_schema(ws, slow_engine, capsys):
    from chitragupta import open_searcher
    from chitragupta.cli.main import build_parser, main
    from chitragupta.service.warm import WarmEngines

    bm25 = open_searcher(ws, "bm25").search("twin digital model", k=5)
    slow = open_searcher(ws, "slowbm25").search("twin digital model", k=5)
    assert [h.to_dict() for h in slow.hits] == [h.to_dict() for h in bm25.hits] and bm25.hits

    age_texts(ws)  # a stamp within the last 2 s is not trusted (every call would reopen)
    warm = WarmEngines(ws)
    got = warm.search("twin digital model", k=5, engine="slowbm25")
    assert got["hits"] == [h.to_dict() for h in bm25.hits]
    warm.search("twin digital model", k=5, engine="slowbm25")
    assert len(slow_engine) == 2  # the warm cache opened it once (and the API once)
    with pytest.raises(UsageError, match="^unit 'passage' is for engine bm25 or hybrid; engine slowbm25 ranks document"):
        warm.search("twin", engine="slowbm25", unit="passage")

    sub = build_parser()._subparsers._group_actions[0].choices["search"]
    engine_arg = next(a for a in sub._actions if a.dest == "engine")
    assert "slowbm25" in engine_arg.choices and "a test engine" in engine_arg.help
    assert main(["search", "-w", str(ws), "twin digital model", "-k", "5", "--engine", "slowbm25", "--json"]) == 0
    assert [h["citekey"] for h in json.loads(capsys.readouterr().out)] == [h.citekey for h in bm25.hits]

    pytest.importorskip("mcp")  # the test extra installs it: this never skips in CI
    from chitragupta.serve.server import build_server

    server = build_server(warm)
    tools = {t.name: t for t in server._tool_manager.list_tools()}
    schema = json.dumps(tools["search"].parameters)
    assert "slowbm25" in schema and "a test engine" in tools["search"].description


# -- the same request through every engine gets the same defaults -----------------------------------

from helpers import cli_main, corpus_records, import_records  # noqa: E402,F401  (the session's MiniLM)


@pytest.fixture(scope="module")
def every_engine_ws(tmp_path_factory, encoder) -> Path:
    root = import_records(tmp_path_factory.mktemp("svc") / "ws", corpus_records(),
                   config="[retrieval]\nsnippet_chars = 120\n[enrich]\nembed_overfetch = 1\n")
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root


QUERY = "ocean heat and soil nitrogen in a marine heatwave"


@pytest.mark.slow
def test_one_request_through_every_engine_has_the_same_defaults(every_engine_ws):
    from chitragupta import open_searcher

    for name in registry.names():
        s = open_searcher(every_engine_ws, name, device="cpu")
        one = s.search(QUERY)
        assert 0 < len(one.hits) <= 10, name  # k's default
        # snippets: the configured width by default, in search and in search_many alike
        assert all(h.snippet for h in one.hits), name
        assert max(len(h.snippet) for h in one.hits) <= 120 + 10, name
        same = s.search(QUERY, snippet_chars=120)
        assert [h.to_dict() for h in one.hits] == [h.to_dict() for h in same.hits], name
        many = s.search_many([QUERY])[0]
        assert [h.to_dict() for h in many.hits] == [h.to_dict() for h in one.hits], name
        assert all(h.snippet == "" for h in s.search(QUERY, snippet_chars=0).hits), name
        # the same checks, with the same words
        for bad, msg in ((0, "k must be an integer >= 1"), (2.5, "k must be an integer >= 1")):
            with pytest.raises(UsageError, match=msg):
                s.search(QUERY, k=bad)
        with pytest.raises(UsageError, match="snippet_chars must be an integer in"):
            s.search(QUERY, snippet_chars=-1)
        with pytest.raises(UsageError, match="max_per_source must be an integer >= 1"):
            s.rank_many([QUERY], 5, max_per_source=0)
        with pytest.raises(UsageError, match=f"not one that engine {name} ranks"):
            s.rank_many([QUERY], 5, unit="page")
        # a k past what the unit holds is a shorter list, not an error; never more than the cap per source
        deep = s.search(QUERY, k=10_000, snippet_chars=0)
        keys = [h.citekey for h in deep.hits]
        cap = 3 if name == "embed" else 1  # [enrich].embed_max_passages_per_source; a document is one per source
        assert keys and max(keys.count(k) for k in set(keys)) <= cap, name


def test_a_capped_list_that_falls_short_is_ranked_deeper_on_every_engine(every_engine_ws):
    """embed_overfetch = 1: the first k chunks hold fewer than k sources (one paper has three chunks), so the
    capped list is short, and the engine ranks deeper -- as BM25's passages always did. The reference is
    the whole ranked list, capped by hand."""
    from chitragupta.enrich.search import EmbedSearcher

    e = EmbedSearcher.open(every_engine_ws, device="cpu")
    n = e.store.count
    full = e.rank_many([QUERY], n, max_per_source=n)
    rows = full.topk.ids[0][full.topk.ids[0] >= 0].tolist()
    want, seen = [], set()
    for row in rows:
        key = e.citekey(row)
        if key not in seen:
            seen.add(key)
            want.append(row)
    k = len(want)
    assert len({e.citekey(r) for r in rows[:k]}) < k  # so the first pass (k x overfetch 1 chunks) falls short
    got = e.rank_many([QUERY], k, max_per_source=1)
    assert got.topk.ids[0].tolist() == want
    assert np.array_equal(got.topk.scores[0], full.topk.scores[0][[rows.index(r) for r in want]])


def test_the_warm_cache_answers_as_a_fresh_searcher_on_every_engine(every_engine_ws):
    from chitragupta import open_searcher
    from chitragupta.service.warm import WarmEngines

    age_texts(every_engine_ws)  # a stamp within the last 2 s is not trusted (every call would reopen)
    warm = WarmEngines(every_engine_ws, device="cpu")
    for name in registry.names():
        for unit in registry.engine(name).units:
            fresh = open_searcher(every_engine_ws, name, device="cpu").search(QUERY, k=5, unit=unit)
            got = warm.search(QUERY, k=5, engine=name, unit=unit)
            assert got["hits"] == [h.to_dict() for h in fresh.hits], (name, unit)
    # hybrid is made of the BM25 and embed searchers the cache holds
    h = warm.searcher("hybrid")
    from chitragupta.enrich.hybrid import bm25_workspace

    bm25 = warm.searcher("bm25")  # hybrid's own BM25 index instead when [hybrid].bm25_stemmer gives it one
    assert h.retriever is bm25 if bm25_workspace(bm25.workspace) is bm25.workspace else \
        h.retriever.workspace.index_dir != bm25.workspace.index_dir
    assert h.dense is warm.searcher("embed")
