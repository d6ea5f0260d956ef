"""The reference lists read in the document index's own pass (``engine.index.references``): each text's list
parsed where the block pass reads it, the same on the per-run and the fast tokenizer paths, packed texts
and files alike, written under each document's fingerprint; a view of the workspace with an index of its
own (hybrid's) parses none."""

from __future__ import annotations

import numpy as np
import pytest
from chitragupta.engine.index import segments, tokenize_fast
from chitragupta.engine.index.references import parse
from chitragupta.engine.index.source import fingerprints, row_body
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace

from helpers import DOCS, make_workspace


def _sources(root):
    ws = Workspace.open(root)
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.index_view()
    return ws, rows, fingerprints(ws.root, rows)


@pytest.mark.slow
def test_the_block_pass_parses_each_list_on_both_paths(tmp_path):
    for packed in (False, True):
        root = make_workspace(tmp_path / str(packed), DOCS + [{"_id": "bare", "title": "No list", "text": "Prose."}],
                              packed=packed)
        ws, rows, (_fps, _flags, sources) = _sources(root)
        units = np.arange(len(sources), dtype=np.int64)
        want = {i: parse(row_body(ws.root, r[3], lists=True)) for i, r in enumerate(rows) if r[0] != "bare"}
        assert all(w is not None and len(w[0]) >= 2 for w in want.values())
        for fast in (False, True):
            got = segments.tokenize_block(units, sources, tokenize_fast.FIELDS, False, fast=fast, refs=True).refs
            assert got == want
        assert segments.tokenize_block(units, sources, tokenize_fast.FIELDS, False).refs == {}  # not asked


def test_the_workspace_index_stores_them_and_a_view_with_its_own_index_does_not(tmp_path):
    import dataclasses

    from chitragupta.engine.index.manage import refresh
    from chitragupta.enrich.hybrid import bm25_workspace

    ws = Workspace.open(make_workspace(tmp_path, DOCS))
    cfg = dataclasses.replace(ws.config, hybrid=dataclasses.replace(ws.config.hybrid, bm25_stemmer="english"))
    own = bm25_workspace(dataclasses.replace(ws, config=cfg))
    assert own.index_dir != ws.index_dir
    assert refresh(own).references is None
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert ledger.reference_lists() == {}
    opened = refresh(ws)
    assert (opened.references.parsed, opened.references.none) == (len(DOCS), 0)
    with Ledger(ws.ledger_path, create=False) as ledger:
        stored = ledger.reference_lists()
    fps = {k: fp.tobytes() for k, fp in zip(opened.index.citekeys.to_list(), np.asarray(opened.index.fingerprints))}
    assert {k: v[0] for k, v in stored.items()} == fps  # under each document's fingerprint
