"""The Model Context Protocol server (``chitragupta serve -w WS``): over stdio, that keeps the workspace's
engines warm (``chitragupta.service.warm``) for an agent skill calling it again and again.

Tools, each answering JSON (structured content, and the same JSON as text):

    search    {query, k=10, engine=one of the registry's (default "bm25"), unit? (the engine's first),
               snippet_chars?, filters? {year, author, keyword, venue, type, keys} (engine/search/filters.py)}
              -> {"hits": [{citekey, title, authors, year, score, snippet, page, passage}], "notes": [{kind, text}]}
    similar   {citekey, k=10, engine?, snippet_chars?, filters?} -> as search: the sources most like citekey,
               never itself
    evidence  {citekey, query, n=2, width=600}  -> {"hits": [...], "notes": [...]}; a hit's score is the share
               of the query's distinct words the passage holds
    explain   {query, citekey}                  -> each query term's tf, idf and contribution, the rank
    source    {citekey}                         -> the ledger row (title, authors, year, status, ...), its
               paths relative to the workspace folder
    check_citations {text, format?, engine="auto"} -> chitragupta check --json's report (service/check.py)

The search tool's description and its unit's allowed values are made when the tools are listed, from what
the workspace serves then (``WarmEngines.served_units``: no passage unit where no source has passages)
and from ``[retrieval].query_syntax``. Every reply is finished in ``serve/replies.py``: notes as objects,
no absolute path, and at most ``[serve].max_reply_chars`` characters of JSON (a longer list is cut, and a
note says so).

A bad argument (an unknown citekey, k = 0, k = true, an engine that does not exist, an unknown tool) is a
tool error carrying the one-line message the CLI would print; the server keeps serving. A line that is not
JSON-RPC is answered with its JSON-RPC error (``serve/stdio.py``, the front before the SDK). Tool
calls run in a pool of ``[serve].workers`` threads, each within ``[serve].call_timeout_s``; requests are
bounded by ``[serve]``'s limits (``service/request.py``). Nothing is written to stdout but the protocol;
logs go to stderr. Needs the ``serve`` extra (the official ``mcp`` SDK).
"""

from __future__ import annotations

import json
from typing import Any, Literal

__all__ = ["build_server", "calls_for", "serve"]

INSTRUCTIONS = (
    "Search this researcher's bibliography (a chitragupta workspace). `search` ranks sources for a query and "
    "returns citable hits (citekey, title, score, snippet); `evidence` quotes one source's passages on a query; "
    "`explain` says why a source scored what it did; `source` gives a citekey's bibliographic record. Cite only "
    "citekeys these tools return."
)


def calls_for(warm):
    """The worker pool of ``warm``'s workspace: ``[serve].workers`` threads (0: the cores), each call
    within ``[serve].call_timeout_s``."""
    from chitragupta.serve.stdio import Calls, default_workers

    cfg = warm.workspace().config.serve
    return Calls(cfg.workers or default_workers(), cfg.call_timeout_s)


def build_server(warm, calls=None) -> Any:
    """An ``mcp`` MCPServer whose tools call ``warm`` (a ``WarmEngines``) in ``calls`` (a
    ``serve_stdio.Calls``; by default ``calls_for(warm)``)."""
    from chitragupta.extras import require

    require("mcp", "serve", "chitragupta serve")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from chitragupta.serve.stdio import CallTimeout
    from chitragupta.errors import ChitraguptaError

    class Server(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            tool = self._tool_manager.get_tool(name)
            if tool is None:
                tools = ", ".join(sorted(t.name for t in self._tool_manager.list_tools()))
                raise ToolError(f"unknown tool {name!r}; the tools: {tools}")
            strict_integers(tool.parameters, arguments, ToolError)
            return await super().call_tool(name, arguments, context)

        async def list_tools(self):
            """The tools, the search tool's units and syntax as the workspace serves them now; each
            description on one line (a docstring's indentation is no use to an agent)."""
            tools = await super().list_tools()
            try:
                served, syntax = await calls.run(lambda: (warm.served_units(),
                                                          warm.workspace().config.retrieval.query_syntax))
            except Exception:  # the workspace cannot say now: every unit, as the engines name them
                served, syntax = None, True
            tools = [advertised(t, served, syntax) if t.name == "search" else t for t in tools]
            return [t.model_copy(update={"description": " ".join(t.description.split())}) for t in tools]

    server = Server("chitragupta", instructions=INSTRUCTIONS, log_level="WARNING")
    calls = calls_for(warm) if calls is None else calls

    from chitragupta.serve.replies import finished, relative_text

    # A tool's work runs in a worker thread (the event loop stays free to read the next call and answer
    # the quick ones); the engines are shared between the threads (service/warm.py says how). Its answer
    # is finished there too: notes as objects, no absolute path, within [serve].max_reply_chars.
    def work(fn, args, kwargs) -> dict[str, Any]:
        root = None
        try:
            ws = warm.workspace()
            root = ws.root
            return finished(fn(*args, **kwargs), root=root, limit=ws.config.serve.max_reply_chars)
        except ChitraguptaError as err:  # what the CLI prints as "error: ..."
            raise ToolError(str(err) if root is None else relative_text(str(err), root)) from None

    async def call(fn, *args, **kwargs) -> dict[str, Any]:
        try:
            return await calls.run(work, fn, args, kwargs)
        except CallTimeout as err:
            raise ToolError(str(err)) from None

    from chitragupta.service import registry

    Engine = Literal[registry.names()]  # the registry's engines, whatever they are when the server starts

    from chitragupta.serve.models import filters_model

    SearchFilters = filters_model(topic=True)

    async def search(query: str, k: int = 10, engine: Engine = registry.DEFAULT_ENGINE, unit: str | None = None,
                     snippet_chars: int | None = None, filters: SearchFilters | None = None) -> dict[str, Any]:
        own = None if filters is None else filters.model_dump(exclude_none=True)
        return await call(warm.search, query, k=k, engine=engine, unit=unit, snippet_chars=snippet_chars, filters=own)

    # the annotations as objects (this module's annotations are strings, and these two are local names); the
    # unit's allowed values are those the workspace serves when the tools are listed (``advertised``)
    search.__annotations__ = {"query": str, "k": int, "engine": Engine, "unit": str | None,
                              "snippet_chars": int | None, "filters": SearchFilters | None,
                              "return": dict[str, Any]}
    search.__doc__ = search_doc(None, True)
    server.tool()(search)

    async def similar(citekey: str, k: int = 10, engine: Engine = registry.DEFAULT_ENGINE,
                      snippet_chars: int | None = None, filters: SearchFilters | None = None) -> dict[str, Any]:
        own = None if filters is None else filters.model_dump(exclude_none=True)
        return await call(warm.similar, citekey, k=k, engine=engine, snippet_chars=snippet_chars, filters=own)

    similar.__annotations__ = {"citekey": str, "k": int, "engine": Engine, "snippet_chars": int | None,
                               "filters": SearchFilters | None, "return": dict[str, Any]}
    similar.__doc__ = ("Papers like this one: the k sources most like the citekey, never itself. engine: "
                       + "; ".join(f"{s.name}: {s.help}" for s in registry.ENGINES.values())
                       + ". bm25 uses the source's most distinctive terms, embed the mean of its chunk vectors, "
                         "hybrid fuses both. filters: as search's (only among the sources they allow). Returns "
                         "{\"hits\", \"notes\"} as search does; an unknown citekey is an error naming the closest "
                         "ones. " + _HIT)
    server.tool()(similar)

    @server.tool()
    async def evidence(citekey: str, query: str, n: int = 2, width: int = 600) -> dict[str, Any]:
        """Quote up to n passages (about width characters each; a table whole) of one source that bear on the
        query, in the order the source holds them. Each hit's score is the share of the query's distinct
        words the passage holds (1.0: every one), not a BM25 score. Returns {"hits", "notes"}."""
        return await call(warm.evidence, citekey, query, n=n, width=width)

    @server.tool()
    async def explain(query: str, citekey: str) -> dict[str, Any]:
        """Why a source scored what it did for a query under BM25: each term's tf, idf and contribution
        (they sum to the score), and the source's rank."""
        return await call(warm.explain, query, citekey)

    @server.tool()
    async def source(citekey: str) -> dict[str, Any]:
        """A citekey's record in the workspace's ledger: title, authors, year, venue, type, doi, parse status,
        abstract, keywords, and its files (origin, source_path, parsed_path) relative to the workspace folder."""
        return await call(warm.source, citekey)

    add_check_tool(server, call, warm)
    from chitragupta.serve.citations import add_citation_tools
    add_citation_tools(server, call, warm)  # references, cited_by, missing (issue 31)
    return server


_HIT = ("Each hit: citekey, title, authors (family names; \"others\" after five), year, score (the engine's; "
        "compare scores within one reply only), snippet, page and passage (where the unit knows them).")


def _units(served: dict | None) -> tuple[dict, list[str]]:
    """(each engine's units, every unit once) as ``served`` says (None: every unit the engines name)."""
    from chitragupta.service import registry

    served = served or {s.name: s.units for s in registry.ENGINES.values()}
    return served, list(dict.fromkeys(u for us in served.values() for u in us))


def search_doc(served: dict | None, syntax: bool) -> str:
    """The search tool's description: ``served`` maps each engine to the units the workspace serves now (None:
    every unit the engines name); ``syntax``: whether ``[retrieval].query_syntax`` reads phrases and signs."""
    from chitragupta.engine.search.searcher import UNIT_HELP
    from chitragupta.service import registry

    served, units = _units(served)
    how = ("query: words, any case and form; syntax (BM25, and hybrid's BM25 side; embed reads the query as "
           'plain text): "an exact phrase" and +word must occur, -word and -"a phrase" must not; they narrow the '
           'hits and never change a score; a sign standing alone ("CD4 + T cells") is punctuation. '
           if syntax else "query: words, any case and form; quotes and +/- signs are read as plain words "
                          "([retrieval].query_syntax = false). ")
    return ("Rank the bibliography's sources for a query. " + how + "engine: "
            + "; ".join(f"{s.name}: {s.help}" + ("" if served.get(s.name) else " (nothing to serve in this "
                                                 "workspace now)") for s in registry.ENGINES.values())
            + ". unit (default: the engine's first; the units this workspace serves): "
            + "; ".join(f"{u}: {UNIT_HELP.get(u, u)} (engine {' or '.join(e for e, us in served.items() if u in us)})"
                        for u in units)
            + ". k: hits (default 10). snippet_chars: the snippet width (default: the configured one; 0: none). "
              "filters: only sources whose metadata match (fields combine with AND; a source without a value for "
              "a filtered field is excluded, and a note says how many). Returns {\"hits\", \"notes\"}: hits "
              "best first, notes as {kind, text}. " + _HIT)


def advertised(tool, served: dict | None, syntax: bool):
    """The listed search ``tool`` (an MCP Tool) with its description and its unit's allowed values as the
    workspace serves them (``search_doc``)."""
    import copy

    schema = copy.deepcopy(tool.input_schema)
    units = _units(served)[1] or ["document"]
    schema["properties"]["unit"] = {"anyOf": [{"type": "string", "enum": units}, {"type": "null"}], "default": None,
                                    "title": "Unit"}
    return tool.model_copy(update={"description": search_doc(served, syntax), "input_schema": schema})


def strict_integers(schema: dict, arguments, error) -> None:
    """``error`` (a message) for an argument the tool's ``schema`` types as an integer given as a JSON
    ``true``/``false`` or a string: refused as the Python API refuses ``k=True`` (the SDK would take true
    as 1 and "5" as 5)."""
    props = schema.get("properties", {})
    for name, value in (arguments or {}).items():
        spec = props.get(name) or {}
        kinds = {spec.get("type")} | {s.get("type") for s in spec.get("anyOf", ()) if isinstance(s, dict)}
        if "integer" in kinds and isinstance(value, (bool, str)) and not kinds & {"boolean", "string"}:
            raise error(f"{name} must be an integer, got {json.dumps(value)}")


def add_check_tool(server, call, warm) -> None:
    """``check_citations``: a draft's text checked against the library (``WarmEngines.check``)."""
    from chitragupta.engine.text.draft import FORMATS
    from chitragupta.service.check import ENGINES

    Format, Engine = Literal[FORMATS], Literal[ENGINES]

    async def check_citations(text: str, format: Format | None = None, engine: Engine = "auto") -> dict[str, Any]:
        return await call(warm.check, text, format=format, engine=engine)

    check_citations.__annotations__ = {"text": str, "format": Format | None, "engine": Engine, "return": dict[str, Any]}
    check_citations.__doc__ = (
        "Check a draft's citations against the library. text: the draft (LaTeX \\cite/\\citep/\\textcite..., "
        "Markdown with pandoc [@key] citations, or plain text); format: how to read it (default: guessed). engine: "
        "auto (hybrid when an embedding index covers the library, else bm25). Returns per citation its key, line, "
        "sentence, status (supported, weak, unsupported, unknown, no-text), support in [0, 1], evidence {text, "
        "page}, alternatives [{citekey, support}] and did_you_mean; uncited sentences with candidates to cite; "
        "the engine and notes.")
    server.tool()(check_citations)


def serve(workspace, config=None, *, update: bool = True, device: str | None = None) -> None:
    """Serve the workspace's tools over stdio until the client closes it."""
    import logging

    import anyio

    from chitragupta.serve.stdio import serve_stdio
    from chitragupta.service.warm import WarmEngines

    logging.getLogger("mcp").setLevel(logging.WARNING)
    warm = WarmEngines(workspace, config, update=update, device=device)
    warm.workspace()  # a missing folder or a bad config.toml is one error line now, not a failing tool later
    anyio.run(serve_stdio, build_server(warm))
