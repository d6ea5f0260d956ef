"""The positions array (``[retrieval].positions``): what the document index stores, how an update keeps it,
and the phrase check over it (``kernels/phrase.py``) against the check that reads each candidate's text."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from chitragupta.engine.index.csr import SEQ_BREAK
from chitragupta.engine.index.manage import index_folder, refresh
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.constraints import read_syntax
from chitragupta.engine.text.tokenize import DROPPED_RUNS, runs_bytes
from chitragupta.kernels.phrase import (
    Anchor,
    PositionsDamaged,
    by_term,
    phrase_units,
)

from helpers import make_workspace, random_docs, rewrite_index_array

# -- the kernel: numpy and numba against a plain loop ---------------------------------------------------


def _brute(seq, ptr, cands, pattern):
    m = len(pattern)
    out = []
    for d in cands:
        s = seq[ptr[d]:ptr[d + 1]].tolist()
        out.append(any(s[j:j + m] == list(pattern) for j in range(len(s) - m + 1)))
    return np.asarray(out, dtype=bool)


N_TERMS = 3  # ids 0-2 are terms (postings, term positions); 3-4 dropped runs; -1 the title break


def _postings_of(seq, ptr, n_terms):
    """The term-major postings (indptr, indices, tf) the ids imply."""
    rows = [[] for _ in range(n_terms)]
    for d in range(ptr.shape[0] - 1):
        ids = seq[ptr[d]:ptr[d + 1]]
        for t in range(n_terms):
            c = int((ids == t).sum())
            if c:
                rows[t].append((d, c))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.asarray([d for r in rows for d, _c in r], dtype=np.int32)
    tf = np.asarray([c for r in rows for _d, c in r], dtype=np.int32)
    return indptr, indices, tf


@pytest.mark.parametrize("seed", range(4))
def test_phrase_kernels_agree_with_a_plain_loop(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n_units = int(rng.integers(1, 120))
    lens = rng.integers(0, 30, size=n_units)
    ptr = np.zeros(n_units + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    seq = rng.integers(-1, 5, size=int(ptr[-1])).astype(np.int32)  # a small alphabet: many matches, breaks
    indptr, indices, tf = _postings_of(seq, ptr, N_TERMS)
    pos, pos_ptr = by_term(seq, ptr, N_TERMS)
    from chitragupta.kernels import dispatch

    unit, kernel, _w, _c = dispatch.NUMBA_FROM["phrase"]
    monkeypatch.setitem(dispatch.NUMBA_FROM, "phrase", (unit, kernel, 0, 0))  # (auto: the anchored numba scan)
    for m in (1, 2, 3, 4):
        for _ in range(5):
            pattern = rng.integers(0, 5, size=m).astype(np.int32)
            pattern[int(rng.integers(0, m))] = int(rng.integers(0, N_TERMS))  # at least one term
            offset = int(np.flatnonzero(pattern < N_TERMS)[-1])
            t = int(pattern[offset])
            anchor = Anchor(offset, indices, tf, int(indptr[t]), int(indptr[t + 1]), pos, int(pos_ptr[t]),
                            int(pos_ptr[t + 1]))
            holders = indices[indptr[t]:indptr[t + 1]].astype(np.int64)
            for cands in (np.sort(rng.choice(n_units, size=int(rng.integers(0, n_units + 1)), replace=False)),
                          holders[rng.random(holders.size) < 0.7]):
                want = _brute(seq, ptr, cands, pattern)
                assert phrase_units(seq, ptr, cands, pattern, backend="numpy").tolist() == want.tolist()
                assert phrase_units(seq, ptr, cands, pattern, backend="anchored", anchor=anchor).tolist() == want.tolist()
                assert phrase_units(seq, ptr, cands, pattern, anchor=anchor).tolist() == want.tolist()


def test_term_positions_are_each_terms_offsets_in_document_order():
    seq = np.asarray([0, 1, 0, -1, 2, 0, 4, 1], dtype=np.int32)
    ptr = np.asarray([0, 3, 3, 8], dtype=np.int64)  # unit 0: [0 1 0]; unit 1: []; unit 2: [-1 2 0 4 1]
    pos, pos_ptr = by_term(seq, ptr, N_TERMS)
    assert pos_ptr.tolist() == [0, 3, 5, 6]
    assert pos.tolist() == [0, 2, 2, 1, 4, 1]  # term 0: unit 0 at 0 and 2, unit 2 at 2; term 1: 1, 4; term 2: 1


def test_an_anchor_whose_counts_disagree_with_its_positions_is_damaged():
    with pytest.raises(PositionsDamaged):
        Anchor(0, np.asarray([0, 1], dtype=np.int32), np.asarray([1, 2], dtype=np.int32), 0, 2,
               np.zeros(5, dtype=np.int32), 0, 5)


def test_a_phrase_never_spans_two_units_or_a_break():
    seq = np.asarray([1, 2, 1, SEQ_BREAK, 2, 5], dtype=np.int32)
    ptr = np.asarray([0, 2, 3, 6], dtype=np.int64)  # unit 0: [1, 2]; unit 1: [1]; unit 2: [-1, 2, 5]
    indptr, indices, tf = _postings_of(seq, ptr, 6)
    pos, pos_ptr = by_term(seq, ptr, 6)

    def holds(pattern, backend):
        t = pattern[0]  # the anchor: the phrase's first word
        anchor = Anchor(0, indices, tf, int(indptr[t]), int(indptr[t + 1]), pos, int(pos_ptr[t]), int(pos_ptr[t + 1]))
        return phrase_units(seq, ptr, np.arange(3), np.asarray(pattern), backend=backend, anchor=anchor).tolist()

    for backend in ("numpy", "anchored"):
        assert holds([1, 2], backend) == [True, False, False]
        assert holds([2, 1], backend) == [False, False, False]
        assert holds([2, 5], backend) == [False, False, True]


def test_damaged_offsets_are_an_error_not_a_wrong_read():
    seq = np.arange(6, dtype=np.int32)
    for ptr in ([0, 4, 2, 6], [0, 2, 4, 9]):
        with pytest.raises(PositionsDamaged):
            phrase_units(np.asarray(seq), np.asarray(ptr, dtype=np.int64), np.arange(3), np.asarray([1, 2]))
    with pytest.raises(PositionsDamaged):
        phrase_units(seq, np.asarray([0, 3, 6], dtype=np.int64), np.asarray([2]), np.asarray([1]))


# -- what the index stores -------------------------------------------------------------------------------


def _indexed(tmp_path, records, config=""):
    root = make_workspace(tmp_path, records)
    if config:
        (root / "config.toml").write_text(config)
    ws = Workspace.open(root)
    refresh(ws, unit="document")
    return ws


def _expected(r: Retriever, d: int) -> list[int]:
    """Document d's ids, from its texts read again: title runs, the break, body runs."""
    title, body = r.scorer.unit_access("document")[1](d)
    n_terms = len(r.index.vocab)
    dropped = {run: j for j, run in enumerate(DROPPED_RUNS)}

    def ids(text):
        return [n_terms + dropped[x] if x in dropped else r.index.vocab.find(r.index.index_term(x.decode()))
                for x in runs_bytes(text)]
    return ids(title) + [SEQ_BREAK] + ids(body)


def test_the_positions_array_is_every_run_in_order(tmp_path):
    docs = random_docs(3, 60, vocab=30)
    docs[0]["text"] = "The effect of a drug, and the effect of the drug: a b c 1 2."
    ws = _indexed(tmp_path, docs)
    r = Retriever.open(ws)
    seq, ptr = r.index.positions
    assert np.asarray(ptr).shape == (r.index.n_units + 1,)
    for d in range(r.index.n_units):
        assert np.asarray(seq[ptr[d]:ptr[d + 1]]).tolist() == _expected(r, d)


def test_an_update_keeps_the_positions_a_fresh_build_writes(tmp_path):
    from chitragupta.engine.library.sync import import_jsonl

    from helpers import write_jsonl

    docs = random_docs(5, 80, vocab=40)
    ws = _indexed(tmp_path / "a", docs)
    changed = [dict(d) for d in docs]
    for i in (3, 17, 40):
        changed[i]["text"] = changed[i]["text"] + " brandnewword twin"
    changed.append({"_id": "d0005x", "title": "added", "text": "a new source about ocean heat"})
    del changed[10]
    import_jsonl(ws, write_jsonl(tmp_path / "changed.jsonl", changed))
    report = refresh(ws, unit="document")
    assert report.report.retokenized >= 1 and report.report.reused > 0  # an update, not a rebuild
    updated = [np.asarray(x).copy() for x in Retriever.open(ws).index.positions]
    refresh(ws, unit="document", force=True)
    fresh = Retriever.open(ws).index.positions
    for x, y in zip(updated, fresh):
        assert x.tobytes() == np.asarray(y).tobytes()


def test_positions_off_keeps_no_array_and_the_same_answers(tmp_path):
    docs = random_docs(11, 250, vocab=40)
    on = Retriever.open(_indexed(tmp_path / "on", docs))
    off = Retriever.open(_indexed(tmp_path / "off", docs, "[retrieval]\npositions = false\n"))
    assert off.index.positions is None and on.index.positions is not None
    for query in ['"twin digital" model', '"model sensor" -"ocean heat" water', '"the twin" sensor',
                  'twin -"digital model"', '"sensor model fidelity"']:
        a, b = on.rank_many([query], k=1000).topk, off.rank_many([query], k=1000).topk
        assert a.ids.tolist() == b.ids.tolist() and a.scores.tobytes() == b.scores.tobytes(), query


def test_a_stemmed_index_confirms_its_phrases_on_the_text(tmp_path):
    docs = [{"_id": "a", "title": "", "text": "the runner runs fast"},
            {"_id": "b", "title": "", "text": "the runner running fast"},
            {"_id": "c", "title": "", "text": "runs fast the runner"}]
    r = Retriever.open(_indexed(tmp_path, docs, '[retrieval]\nstemmer = "english"\n'))
    assert r.index.positions is not None
    keys = [h.citekey for h in r.search('"runner runs" fast', k=5).hits]
    assert keys == ["a"]  # "runner running" holds the same stems, not the same words


def test_damaged_positions_are_rebuilt_with_a_note(tmp_path):
    ws = _indexed(tmp_path, random_docs(7, 80, vocab=30))
    want = [(h.citekey, h.score) for h in Retriever.open(ws).search('"twin digital" model', k=8).hits]
    folder = index_folder(ws)
    gen = folder / (folder / "CURRENT").read_text().strip()
    ptr = np.load(gen / "seq_ptr.npy").copy()
    ptr[1:-1] = ptr[1:-1][::-1]  # out of order
    rewrite_index_array(gen, "seq_ptr", ptr)
    got = Retriever.open(ws).search('"twin digital" model', k=8)
    assert [(h.citekey, h.score) for h in got.hits] == want
    assert any("rebuilt" in n.text for n in got.notes), got.notes


@pytest.mark.slow
def test_a_cold_phrase_query_loads_no_numba(tmp_path):
    ws = _indexed(tmp_path, random_docs(7, 80, vocab=30))
    Retriever.open(ws, backend="numba").rank_many(['"twin digital"'] * 40, 5)  # verified, current
    code = ("import sys, io, contextlib\n"
            "from chitragupta.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['search', '-w', {str(ws.root)!r}, '\"twin digital\" model', '-k', '5'])\n"
            "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'llvmlite'}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0 []", p.stdout + p.stderr


def test_read_syntax_phrase_runs_map_to_the_ids_the_index_holds(tmp_path):
    ws = _indexed(tmp_path, [{"_id": "x", "title": "Effect of the drug", "text": "no phrase here"},
                             {"_id": "y", "title": "", "text": "an effect of a drug"}])
    r = Retriever.open(ws)
    _s, cons = read_syntax('"effect of the drug"')
    phrases = r.scorer.unit_access("document")[2]
    got, final = phrases(cons.items[0].runs, np.arange(2))
    assert final and got.tolist() == [0]
