"""The citation wing: a source's reference list as parsed entries (``engine.text.entries``'s rules, parsed in
the document index's pass and kept in the ledger: ``store``), resolved against the library (``resolve``),
as a graph with the works the library lacks (``graph``)."""

from chitragupta.engine.citations.store import RULES, all_references, build_references, references_of
from chitragupta.engine.text.entries import Entry, parse_entry, parse_reference_list, split_entries

__all__ = ["Entry", "split_entries", "parse_entry", "parse_reference_list", "RULES", "references_of",
           "all_references", "build_references"]
