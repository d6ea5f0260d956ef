"""The reference lists, kept with the document index: each source's list is parsed where the index reads
its text (one read of each text, one ledger scan, one change detection for both), and stored in the
ledger's tables (``ref_lists``, ``ref_entries``: ``engine.library.ledger``).

The workspace's own document index build (``manage``) hands each tokenized block to ``Lists``: the block
pass (``segments``, ``tokenize_fast``) parsed the list of every document it read (``Body.references``:
``engine.text.entries``), and ``Lists`` writes them, and a row for each document without one, under the
document's fingerprint, a block in one transaction. What the pass did not read -- a document the index
reused whose stored list is of other rules or another text, after an upgrade or a change of the rules --
is parsed by ``update`` from the same text (``source.row_body``), and the lists of sources gone are
dropped; ``meta.references`` records the index generation and rules the stored lists are complete for,
so an ``update`` with nothing to do reads one meta row.
"""

from __future__ import annotations

import numpy as np

from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.text.entries import RULES, parse_reference_list

__all__ = ["Lists", "parse", "update", "rows_of"]


def parse(body) -> tuple[list, list[str]] | None:
    """(entries, notes) of the list a ``source.Body`` holds, None when it holds none."""
    if body is None or body.references is None:
        return None
    return parse_reference_list(body.references, running=body.running)


def rows_of(entries) -> list[tuple]:
    """Entries as ``Ledger.put_references`` stores them."""
    return [(e.n, e.text, "\n".join(e.authors), e.year, e.title, e.venue, e.doi, e.arxiv, e.url, "\n".join(e.names))
            for e in entries]


class Lists:
    """A build's parsed lists written to the ledger a block at a time (``doc.build``'s ``references``).
    ``sources``, ``fps``: the build's ``DocSource`` list and fingerprints; ``parsed``, ``none`` and
    ``notes`` count what was written."""

    def __init__(self, ledger_path, sources, fps):
        self.ledger_path, self.sources, self.fps = ledger_path, sources, fps
        self.parsed = self.none = 0
        self.notes: list[str] = []

    def __call__(self, units, refs: dict) -> None:
        lists = []
        for u in units.tolist():
            key, got = self.sources[u].citekey, refs.get(u)
            if got is None:
                self.none += 1
            else:
                self.parsed += 1
                self.notes += [f"{key}: {n}" for n in got[1]]
            lists.append((key, self.fps[u].tobytes(), RULES, None if got is None else rows_of(got[0]),
                          [] if got is None else got[1]))
        with Ledger(self.ledger_path) as ledger, ledger.transaction():
            ledger.put_references(lists)


def update(ws, index) -> dict:
    """Bring the stored lists up to ``index`` (the workspace's current document index; the caller holds
    the lock): parse each source whose stored list is missing, of other rules or of another text, drop
    the lists of sources gone. ``{"parsed", "none", "notes"}`` of what it parsed."""
    from chitragupta.engine.index.source import row_body

    done = f"{index.path.name if index.path is not None else ''}:{RULES}"
    out = {"parsed": 0, "none": 0, "notes": []}
    with Ledger(ws.ledger_path) as ledger:
        if ledger.get_meta("references") == done:
            return out
        stored = ledger.reference_lists()
        fps = [fp.tobytes() for fp in np.asarray(index.fingerprints)]
        stale = [(k, fp) for k, fp in zip(index.citekeys.to_list(), fps) if stored.get(k, (None, 0))[:2] != (fp, RULES)]
        rows = ledger.index_rows([k for k, _fp in stale])
        lists = []
        for key, fp in stale:
            _k, _title, status, path = rows.get(key, (key, "", "", None))
            got = parse(row_body(ws.root, path) if status == "parsed" else None)
            out["none" if got is None else "parsed"] += 1
            out["notes"] += [f"{key}: {n}" for n in (got[1] if got else ())]
            lists.append((key, fp, RULES, None if got is None else rows_of(got[0]), got[1] if got else []))
        with ledger.transaction():
            if lists:
                ledger.put_references(lists)
            ledger.prune_references()
            ledger.set_meta("references", done)
    return out
