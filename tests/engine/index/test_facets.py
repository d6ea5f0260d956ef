"""The filter columns (engine/index/facets.py): what ``columns`` writes reads back as the facets it was given,
``check`` refuses what a reader must not trust, and ``LedgerFacets`` says when the columns are current."""

from __future__ import annotations

import numpy as np
import pytest
from chitragupta.engine.index.facets import NAMES, NO_YEAR, LedgerFacets, check, columns
from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.library.metadata import Facets

from helpers import import_jsonl, make_workspace, random_docs, write_jsonl


def _facets() -> Facets:
    return Facets(citekeys=["a", "b", "c"], families=[("smith", "berg", "van der berg"), (), ("smith",)],
                  year=[2019, None, -350], keywords=[(), ("twin", "müller"), ("twin",)],
                  venue=["nature", None, "nature"], type=["article", "book", None], doi=[None] * 3)


def _values(cols: dict, field: str, d: int) -> list[str]:
    ptr, ids = cols[f"facet_{field}_ptr"], cols[f"facet_{field}_ids"]
    table = StringTable(cols[f"facet_{field}_blob"], cols[f"facet_{field}_offsets"])
    return [table[int(i)] for i in ids[ptr[d]:ptr[d + 1]]]


@pytest.mark.parametrize("keys", [["a", "b", "c"], ["a", "new", "c", "b"]])
def test_columns_read_back_as_the_facets_of_each_document(keys):
    f = _facets()
    cols = columns(f, keys)
    assert set(cols) == set(NAMES)
    check(cols, len(keys), deep=("author", "keyword", "venue", "type"))
    at = {k: i for i, k in enumerate(f.citekeys)}
    for d, key in enumerate(keys):
        r = at.get(key)
        assert cols["facet_year"][d] == (NO_YEAR if r is None or f.year[r] is None else f.year[r])
        assert _values(cols, "author", d) == list(f.families[r] if r is not None else ())
        assert _values(cols, "keyword", d) == list(f.keywords[r] if r is not None else ())
        assert _values(cols, "venue", d) == ([f.venue[r]] if r is not None and f.venue[r] else [])
        assert _values(cols, "type", d) == ([f.type[r]] if r is not None and f.type[r] else [])
    table = StringTable(cols["facet_author_blob"], cols["facet_author_offsets"]).to_list()
    assert table == sorted(table) == ["berg", "smith", "van der berg"]  # sorted: a binary search finds them


def test_check_refuses_a_missing_short_or_out_of_range_column():
    cols = columns(_facets(), ["a", "b", "c"])
    with pytest.raises(IndexCorrupt, match="the filter column facet_year is missing"):
        check({k: v for k, v in cols.items() if k != "facet_year"}, 3)
    with pytest.raises(IndexCorrupt, match="facet_year has 3 rows, 4 expected"):
        check(cols, 4)
    bad = dict(cols, facet_keyword_ids=np.asarray([0, 5, 0], dtype=np.int32))
    check(bad, 3)  # (the cheap check of every open reads no id)
    with pytest.raises(IndexCorrupt, match="the filter column keyword names a value outside its table"):
        check(bad, 3, deep=("keyword",))
    with pytest.raises(IndexCorrupt, match="the filter column venue does not match its offsets"):
        check(dict(cols, facet_venue_ptr=np.asarray([0, 1, 1, 3], dtype=np.int64)), 3)


def test_ledger_facets_hold_an_index_until_the_metadata_changes(tmp_path):
    from chitragupta.engine.library.workspace import Workspace

    docs = random_docs(4, 8)
    for i, d in enumerate(docs):
        d["year"] = 2000 + i
    root = make_workspace(tmp_path, docs)
    ws = Workspace.open(root)
    built = LedgerFacets(ws.ledger_path).manifest()
    assert LedgerFacets(ws.ledger_path).holds(built)
    docs[2]["title"] = "another title"  # a ledger write that leaves the metadata as it was
    import_jsonl(ws, write_jsonl(tmp_path / "corpus.jsonl", docs))
    now = LedgerFacets(ws.ledger_path)
    assert now.stamp != built["metadata_stamp"] and now.holds(built)  # (by the digest)
    docs[5]["year"] = 1999
    import_jsonl(ws, write_jsonl(tmp_path / "corpus.jsonl", docs))
    assert not LedgerFacets(ws.ledger_path).holds(built)
    assert not LedgerFacets(ws.ledger_path).holds({})
