"""A source's reference list as parsed entries (``entries``), stored per source under ``content/refs/``
(``store``): what the citation graph is built from."""

from chitragupta.engine.citations.entries import Entry, parse_entry, parse_reference_list, split_entries
from chitragupta.engine.citations.store import RULES, all_references, build_references, references_of

__all__ = ["Entry", "split_entries", "parse_entry", "parse_reference_list", "RULES", "references_of",
           "all_references", "build_references"]
