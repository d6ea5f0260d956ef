"""The MCP server's citation tools (``chitragupta serve``), answering what the CLI's ``refs``, ``cited-by``
and ``missing`` answer, through the service (``chitragupta.service.citations``):

    references  {citekey, k=25, offset=0}                   -> {"references": [...], "total", "offset", "remaining", "notes"}
    cited_by    {citekey, filters?, k=25, offset=0}         -> {"cited_by": [...], "total", "offset", "remaining", "notes"}
    missing     {min_count=2, k=50, offset=0, filters?}     -> {"missing": [...], "total", "offset", "remaining", "notes"}

``filters`` are the search tool's (year, author, keyword, venue, type, keys) and choose the citing sources.
A reply is a page: at most ``k`` items from ``offset``, fewer where more would pass ``REPLY_BYTES`` of JSON
(an entry's text that alone would is shortened, ``text_cut``); ``remaining`` says how many follow.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_citation_tools", "REPLY_BYTES"]

REPLY_BYTES = 15_000  # the most JSON a page of items takes (a reply stays under 16 KB)


def add_citation_tools(server, call, warm) -> None:
    """Add the tools to ``server`` (an MCPServer). ``await call(fn, *args)`` runs ``fn`` in a worker and turns a
    ChitraguptaError into a tool error; ``warm``: the ``WarmEngines`` whose current workspace is asked."""
    from typing import Annotated

    from pydantic import Field

    Citekey = Annotated[str, Field(description="a citekey of the library (an unknown one is an error naming the "
                                               "closest)")]
    MinCount = Annotated[int, Field(description="only works cited by at least this many of the library's sources "
                                                "(default 2)")]
    K = Annotated[int, Field(description="at most this many works, most cited first (default 50)")]
    Page = Annotated[int, Field(description="at most this many items in the reply (fewer when they would pass "
                                            "15,000 bytes; 'remaining' says how many follow)")]
    Offset = Annotated[int, Field(description="skip this many items (the next page: offset + the items "
                                              "returned)")]

    from chitragupta.serve.models import filters_model

    CitingFilters = filters_model("Metadata filters on the CITING sources: only those that match every field "
                                  "given count.")

    def own(filters):
        return None if filters is None else filters.model_dump(exclude_none=True)

    from chitragupta.service import citations

    async def references(citekey: str, k: int = 25, offset: int = 0) -> dict[str, Any]:
        return await call(citations.references, warm.workspace(), citekey, k, offset, REPLY_BYTES)

    references.__annotations__ = {"citekey": Citekey, "k": Page, "offset": Offset, "return": dict[str, Any]}
    references.__doc__ = (
        "A source's reference list, in order, a page at a time: per entry its number n, raw text, authors "
        "(family names), year, title, venue, doi, arxiv, url as far as the entry prints them, and citekey: the "
        "library source it resolves to (by DOI or arXiv id, else by title with the year within one), or null "
        "when the library lacks it or the match is ambiguous. total: entries in the list; remaining: entries "
        "after this page (ask again with offset). citekey: the source (an unknown one is an error naming the "
        "closest).")
    server.tool()(references)

    async def cited_by(citekey: str, filters: CitingFilters | None = None, k: int = 25,
                       offset: int = 0) -> dict[str, Any]:
        return await call(citations.cited_by, warm.workspace(), citekey, own(filters), k, offset, REPLY_BYTES)

    cited_by.__annotations__ = {"citekey": Citekey, "filters": CitingFilters | None, "k": Page, "offset": Offset,
                                "return": dict[str, Any]}
    cited_by.__doc__ = (
        "The library's sources that cite a source, a page at a time: per citing source its citekey, title and "
        "the text of the entry that cites it; total and remaining count them. citekey: the cited source. "
        "filters: only citing sources whose metadata match (e.g. {\"year\": \"2019..\"}); a note says how "
        "many lacked a filtered field.")
    server.tool()(cited_by)

    async def missing(min_count: int = 2, k: int = 50, offset: int = 0,
                      filters: CitingFilters | None = None) -> dict[str, Any]:
        return await call(citations.missing, warm.workspace(), min_count, k, own(filters), offset, REPLY_BYTES)

    missing.__annotations__ = {"min_count": MinCount, "k": K, "offset": Offset, "filters": CitingFilters | None,
                               "return": dict[str, Any]}
    missing.__doc__ = (
        "Works the library lacks that several of its sources cite (reading candidates), most cited first, a "
        "page at a time: title, year, authors, citing (the citekeys) and count; total and remaining count the "
        "works. min_count: cited by at least this many sources (default 2). k: at most this many works "
        "(default 50, fewer when they would pass 15,000 bytes). filters: count only citing sources whose "
        "metadata match.")
    server.tool()(missing)
