"""The typed arguments the MCP tools share (``serve/server.py``'s and ``serve/citations.py``'s)."""

from __future__ import annotations

__all__ = ["filters_model"]


def filters_model(doc: str = "Metadata filters: only sources that match every field given.", *, topic: bool = False):
    """A tool's ``filters`` argument (search, similar, and the citation tools with their own ``doc``):
    engine/search/filters.py's fields as typed, described properties (checked again, with the CLI's words, by
    ``Filters.from_dict``); ``topic``: with the ``topic`` field (a tool whose engines read content/topics.json)."""
    from pydantic import BaseModel, ConfigDict, Field

    class SearchFilters(BaseModel):
        __doc__ = doc

        model_config = ConfigDict(extra="forbid", strict=True)  # true is no year, "3" no topic
        year: int | str | None = Field(None, description='a year (2019) or a range "2015..2020", "2015..", "..2020"')
        author: str | list[str] | None = Field(
            None, description="an author's family name, case- and accent-insensitive, or a list (any of them)")
        keyword: str | list[str] | None = Field(None, description="a keyword or a list (any of them)")
        venue: str | None = Field(None, description="text the venue (journal, proceedings) holds, case-insensitive")
        type: str | list[str] | None = Field(
            None, description="a BibTeX entry type (article, inproceedings, ...) or a list (any of them)")
        keys: list[str] | None = Field(None, description="only these citekeys")

    if not topic:
        return SearchFilters

    class TopicFilters(SearchFilters):
        __doc__ = doc

        topic: int | list[int] | None = Field(
            None, description="a topic id from `chitragupta enrich --stages bertopic` (-1: the outliers), or a "
                              "list (any of them); an error when the workspace has no topics")

    return TopicFilters
