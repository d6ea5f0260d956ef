"""The reference lists, kept with the document index: each source's list is parsed where the index reads
its text (one read of each text, one ledger scan, one change detection for both) and stored in the
ledger's tables (``ref_lists``, ``ref_entries``) under the document's fingerprint.

The workspace's own document index build (``manage``) asks the block pass (``segments``,
``tokenize_fast``) to parse each text's list (``Body.references``; the rules: ``engine.text.entries``) and
hands each block's lists to ``Lists``, which writes them, a row for each document without one too, a block
in one transaction. ``update`` parses what the pass did not read (a document the index reused whose stored
list is of other rules or another text: an upgrade, new rules) and drops the lists of sources gone;
``meta.references`` names the generation and rules the lists are complete for."""

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
    """A build's parsed lists written to the ledger a block at a time (``doc.build``'s ``references``;
    ``sources``, ``fps``: the build's); ``parsed``, ``none`` and ``notes`` say what was written."""

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
    """Bring the stored lists up to ``index`` (the current document index; the caller holds the lock);
    ``{"parsed", "none", "notes"}`` of what it parsed."""
    from chitragupta.engine.index.source import row_body

    done = f"{index.path.name if index.path is not None else ''}:{RULES}"
    out = {"parsed": 0, "none": 0, "notes": []}
    with Ledger(ws.ledger_path) as ledger:
        if ledger.get_meta("references") == done:
            return out
        stored = ledger.reference_lists()
        fps = [fp.tobytes() for fp in np.asarray(index.fingerprints)]
        stale = [(k, fp) for k, fp in zip(index.citekeys.to_list(), fps) if stored.get(k, (0, 0))[:2] != (fp, RULES)]
        rows = ledger.index_rows([k for k, _fp in stale])
        lists = []
        for key, fp in stale:
            _k, _title, status, path = rows.get(key, (key, "", "", None))
            got = parse(row_body(ws.root, path, lists=True) if status == "parsed" else None)
            out["none" if got is None else "parsed"] += 1
            out["notes"] += [f"{key}: {n}" for n in (got[1] if got else ())]
            lists.append((key, fp, RULES, None if got is None else rows_of(got[0]), got[1] if got else []))
        with ledger.transaction():
            if lists:
                ledger.put_references(lists)
            ledger.prune_references()
            ledger.set_meta("references", done)
    return out
