"""The values metadata filters compare, as columns of the document index (the idea of tantivy's fast
fields): written with each generation from the ledger's ``metadata.facets``, memory-mapped on open, so a
filter from a cold process is a few array compares (``engine/search/filters.py``'s ``FacetTable``).

    facet_year                 (n,) int16, ``NO_YEAR`` for a source without one (years are -9999..9999)
    facet_<field>_ptr          (n + 1,) int64: document d's values are ids[ptr[d]:ptr[d + 1]]
    facet_<field>_ids          (m,) int32: positions in the field's table
    facet_<field>_blob/offsets the field's distinct folded values, a sorted ``StringTable``

for each text field of ``FIELDS`` (author: the family keys, ``metadata.family_keys``; keyword; venue;
type). Document d is the index's document d (citekey order); a citekey the facets lack has no values.
Which ledger metadata they hold, the manifest says (``LedgerFacets``): the ledger's change stamp when
they were read, which, unchanged, proves them current for free, and ``Ledger.metadata_digest``, compared
when the stamp moved (~3.5 us a source). A metadata change without a text change rebuilds the generation
(``engine/index/manage.py``); a build whose ledger metadata did not change copies the old columns.
"""

from __future__ import annotations

import numpy as np

from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.index.terms import array_of, check_string_table
from chitragupta.engine.library.ledger import Ledger

__all__ = ["FIELDS", "NO_YEAR", "NAMES", "LedgerFacets", "columns", "check", "names_of"]

FIELDS = ("author", "keyword", "venue", "type")
NO_YEAR = -32768


def names_of(field: str) -> tuple[str, ...]:
    """The arrays of one field ("year" or one of ``FIELDS``)."""
    parts = ("ptr", "ids", "blob", "offsets")
    return ("facet_year",) if field == "year" else tuple(f"facet_{field}_{p}" for p in parts)


NAMES = tuple(name for field in ("year",) + FIELDS for name in names_of(field))


def _field(name: str, values: list, out: dict) -> None:
    """``values[d]``: document d's values (a tuple; a str or None for a field of one value)."""
    per = [v if isinstance(v, tuple) else () if v is None else (v,) for v in values]
    table = sorted({v for vs in per for v in vs})
    code = {v: i for i, v in enumerate(table)}
    ptr = np.zeros(len(per) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, per), dtype=np.int64, count=len(per)), out=ptr[1:])
    flat = [code[v] for vs in per for v in vs]
    strings = StringTable.from_strings(table)
    out.update({f"facet_{name}_ptr": ptr, f"facet_{name}_ids": np.asarray(flat, dtype=np.int32).reshape(-1),
                f"facet_{name}_blob": strings.blob, f"facet_{name}_offsets": strings.offsets})


def columns(facets, citekeys) -> dict[str, np.ndarray]:
    """The columns (module docstring) of ``facets`` (a ``metadata.Facets``) over ``citekeys`` (the index's
    documents, in its order: a list or a ``StringTable``)."""
    keys = citekeys.to_list() if hasattr(citekeys, "to_list") else list(citekeys)
    if facets.citekeys == keys:  # (the index's rows and the facets both in the ledger's citekey order)
        pick = lambda col: col  # noqa: E731
    else:
        at = {k: i for i, k in enumerate(facets.citekeys)}
        rows = [at.get(k, -1) for k in keys]
        pick = lambda col: [col[r] if r >= 0 else None for r in rows]  # noqa: E731
    out = {"facet_year": np.fromiter((NO_YEAR if y is None else y for y in pick(facets.year)), dtype=np.int16,
                                     count=len(keys))}
    for name, col in (("author", facets.families), ("keyword", facets.keywords), ("venue", facets.venue),
                      ("type", facets.type)):
        _field(name, pick(col), out)
    return out


def check(arrays: dict, n_docs: int, *, deep: tuple[str, ...] = ()) -> None:
    """IndexCorrupt unless the columns are there with the dtypes and lengths above, and those of the
    fields in ``deep`` sound throughout: every id inside its table, ``ptr`` never decreasing, the table's
    strings whole UTF-8 (its order is a writer's: ``columns`` sorts it)."""
    missing = [name for name in NAMES if name not in arrays]
    if missing:
        raise IndexCorrupt(f"the filter column {missing[0]} is missing")
    array_of(arrays, "facet_year", np.int16, length=n_docs)
    for f in FIELDS:
        ptr = array_of(arrays, f"facet_{f}_ptr", np.int64, length=n_docs + 1)
        ids = array_of(arrays, f"facet_{f}_ids", np.int32)
        if int(ptr[0]) != 0 or int(ptr[-1]) != ids.shape[0]:
            raise IndexCorrupt(f"the filter column {f} does not match its offsets")
        if f in deep:
            n_values = check_string_table(arrays, f"facet_{f}", deep=False)
            if (np.diff(ptr) < 0).any() or (ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n_values)):
                raise IndexCorrupt(f"the filter column {f} names a value outside its table")


class LedgerFacets:
    """A ledger's metadata as the columns need it: its change stamp read now, its ``metadata_digest``
    and its ``metadata.facets`` read when asked (in that order: a change in between only makes the
    digest older than the columns, and the next check rebuilds them)."""

    def __init__(self, ledger_path):
        self.path = ledger_path
        with Ledger(ledger_path, create=False) as ledger:
            self.stamp = ledger.change_stamp()
        self._digest: str | None = None

    def digest(self) -> str:
        if self._digest is None:
            with Ledger(self.path, create=False) as ledger:
                self._digest = ledger.metadata_digest()
        return self._digest

    def holds(self, manifest: dict) -> bool:
        """Whether the columns of the index with ``manifest`` hold this ledger's metadata."""
        if manifest.get("metadata_stamp") == self.stamp and isinstance(manifest.get("metadata_digest"), str):
            self._digest = manifest["metadata_digest"]  # (no row written since they were read)
            return True
        return manifest.get("metadata_digest") == self.digest()

    def manifest(self) -> dict:
        return {"metadata_stamp": self.stamp, "metadata_digest": self.digest()}

    def read(self):
        """The ``metadata.Facets`` of every source."""
        from chitragupta.engine.library.metadata import facets

        self.digest()
        with Ledger(self.path, create=False) as ledger:
            return facets(ledger)
