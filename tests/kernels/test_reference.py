"""The numpy scorer (a batch as one sparse product, no JIT) gives numba's ids and scores to the bit, one
query or many; auto picks between them by the batch's size alone; a cold single query and a small
library's batch import neither numba nor scipy; an index is checked where it is read (the slices numpy
reads, the deep pass before numba's first batch) and a damaged one is rebuilt with a note."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from chitragupta.engine.index.manage import index_folder
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.kernels import dispatch

from helpers import SAMPLE_QUERIES, indexed_workspace, rewrite_index_array, run_cli

QUERIES = SAMPLE_QUERIES


def _ws(tmp_path, config: str = "", n: int = 80, seed: int = 7) -> Workspace:
    return indexed_workspace(tmp_path, config, n, seed)


@pytest.mark.parametrize("config", ["", "[retrieval]\nweight_title = 2.5\n", "[retrieval]\nweight_title = 0.5\nk1 = 0.9\nb = 0.3\n",
                                    "[retrieval]\nstemmer = \"english\"\n", "[retrieval]\nacronym_expansion = false\n"])
@pytest.mark.slow
def test_the_numpy_path_equals_the_numba_batch_to_the_bit(tmp_path, config):
    ws = _ws(tmp_path, config)
    numpy = Retriever.open(ws, backend="numpy")
    numba = Retriever.open(ws, backend="numba")
    many = QUERIES * 3
    batch = numba.rank_many(many, 10)
    also = numpy.rank_many(many, 10)
    assert numba.scorer.backend_for("document", len(many)).name == "numba"
    assert numpy.scorer.backend_for("document", len(many)).name == "numpy"
    assert np.array_equal(also.topk.ids, batch.topk.ids) and np.array_equal(also.topk.scores, batch.topk.scores)
    for q, query in enumerate(QUERIES):
        one = Retriever.open(ws).rank_many([query], 10)  # a fresh retriever, auto: numpy
        assert np.array_equal(one.topk.ids[0], batch.topk.ids[q]), query
        assert np.array_equal(one.topk.scores[0], batch.topk.scores[q]), query  # bit for bit
        assert one.keys() == [batch.keys()[q]]


def _numba_from(monkeypatch, job: str, work: int) -> None:
    """Make ``work`` of ``job`` the threshold where auto takes numba, whatever numba's cache holds."""
    unit, kernel, _warm, _cold = dispatch.NUMBA_FROM[job]
    monkeypatch.setitem(dispatch.NUMBA_FROM, job, (unit, kernel, work, work))


def test_auto_picks_the_backend_by_the_batchs_size_alone(tmp_path, monkeypatch):
    ws = _ws(tmp_path)
    r = Retriever.open(ws)
    n = r.index.n_units
    assert r.scorer.backend_for("document", 1).name == "numpy"
    _numba_from(monkeypatch, "batch", 10 * n)
    assert r.scorer.backend_for("document", 9).name == "numpy" and r.scorer.backend_for("document", 10).name == "numba"
    assert r.scorer.backend_for("document", 1).name == "numpy"  # numba loaded: still numpy for a small batch
    small = r.rank_many(QUERIES[:3], 10)
    large = r.rank_many(QUERIES * 3, 10)
    assert [large.keys()[i] for i in range(3)] == small.keys()
    assert Retriever.open(ws, backend="numpy").scorer.backend_for("document", 10 ** 6).name == "numpy"
    assert Retriever.open(ws, backend="numba").scorer.backend_for("document", 1).name == "numba"


def test_a_small_librarys_batch_imports_neither_numba_nor_scipy(tmp_path):
    """A whole `search --queries` batch over a small library (its index built in the same process) from a
    cold process: numpy scores it, the Python pass looks it up, Python writes the run; no JIT loaded."""
    ws = _ws(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text("".join(f'{{"_id": "q{i}", "text": "{t}"}}\n' for i, t in enumerate(QUERIES * 20)))
    code = ("import sys, io, contextlib\n"
            "from chitragupta.cli.main import main\n"
            f"rc = main(['search', '-w', {str(ws.root)!r}, '--queries', {str(q)!r}, '--run', {str(tmp_path / 'r.trec')!r}])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'scipy', 'torch', 'llvmlite'})\n"
            "print(rc, heavy)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr
    assert (tmp_path / "r.trec").read_text().count("\n") > len(QUERIES) * 20


def test_a_cold_single_query_imports_neither_numba_nor_scipy(tmp_path):
    ws = _ws(tmp_path)
    Retriever.open(ws, backend="numba").rank_many(QUERIES * 3, 5)  # the index is current and verified
    code = ("import sys, io, contextlib\n"
            "from chitragupta.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['search', '-w', {str(ws.root)!r}, 'twin model sensor', '-k', '5'])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'numba', 'scipy', 'torch', 'llvmlite'})\n"
            "print(rc, heavy)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0 []", p.stdout + p.stderr


def _gen(ws: Workspace):
    folder = index_folder(ws)
    return folder / (folder / "CURRENT").read_text().strip()


def _term_row(ws, term):
    r = Retriever.open(ws)
    t = r.index.vocab.find(term)
    ip = np.asarray(r.index.postings.indptr)
    return int(ip[t]), int(ip[t + 1])


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["unsorted", "out-of-range", "zero-count"])
def test_a_damaged_slice_a_single_query_reads_is_rebuilt_with_a_note(tmp_path, damage):
    ws = _ws(tmp_path)
    want = [(h.citekey, h.score) for h in Retriever.open(ws).search("twin sensor", k=8).hits]
    lo, hi = _term_row(ws, "twin")
    gen = _gen(ws)
    name = "tf" if damage == "zero-count" else "indices"
    arr = np.load(gen / f"{name}.npy").copy()
    if damage == "unsorted":
        arr[lo], arr[lo + 1] = arr[lo + 1], arr[lo]
    elif damage == "out-of-range":
        arr[hi - 1] = 10**6
    else:
        arr[lo] = 0
    rewrite_index_array(gen, name, arr)
    r = Retriever.open(ws)
    got = r.search("twin sensor", k=8)
    assert [(h.citekey, h.score) for h in got.hits] == want
    assert any("not usable" in n.text and "rebuilt" in n.text for n in got.notes), got.notes
    assert set(r.scorer._backends) == {"numpy"}  # the numpy scorer found it; numba was never loaded
    again = Retriever.open(ws).search("twin sensor", k=8)  # the rebuilt index is sound: no note now
    assert not any("not usable" in n.text for n in again.notes)


def test_damage_a_single_query_does_not_read_is_caught_before_numba_reads_it(tmp_path):
    ws = _ws(tmp_path)
    want_one = [(h.citekey, h.score) for h in Retriever.open(ws).search("ocean", k=8).hits]
    want_many = Retriever.open(ws, backend="numba").rank_many(QUERIES * 3, 8).keys()
    lo, hi = _term_row(ws, "twin")
    gen = _gen(ws)
    tf = np.load(gen / "tf.npy").copy()
    tf[lo] += 1  # in range, positive: only the per-document sums show it
    rewrite_index_array(gen, "tf", tf)
    one = Retriever.open(ws).search("ocean", k=8)  # reads only "ocean"'s slice: answers, nothing to say
    assert [(h.citekey, h.score) for h in one.hits] == want_one
    assert not any("not usable" in n.text for n in one.notes)
    r = Retriever.open(ws, backend="numba")
    many = r.rank_many(QUERIES * 3, 8)  # numba: the deep check first, which fails: rebuilt, then scored
    assert many.keys() == want_many
    assert any("do not add up" in n.text and "rebuilt" in n.text for n in r.index_notes())


def test_with_updates_off_a_damaged_index_is_one_error_line(tmp_path):
    ws = _ws(tmp_path)
    lo, _hi = _term_row(ws, "twin")
    gen = _gen(ws)
    idx = np.load(gen / "indices.npy").copy()
    idx[lo] = 10**6
    rewrite_index_array(gen, "indices", idx)
    p = run_cli("search", "-w", ws.root, "twin", "--no-update")
    assert p.returncode == 1 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "index --force" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_cap_per_source_equals_a_python_loop():
    from chitragupta.kernels.topk import cap_per_source
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @given(st.data())
    @settings(max_examples=200, deadline=None)
    def check(data):
        nq = data.draw(st.integers(1, 4))
        n = data.draw(st.integers(0, 12))
        k = data.draw(st.integers(1, 8))
        cap = data.draw(st.integers(1, 4))
        ids = np.full((nq, n), -1, dtype=np.int64)
        src = np.zeros((nq, n), dtype=np.int64)
        for r in range(nq):
            m = data.draw(st.integers(0, n))
            ids[r, :m] = data.draw(st.permutations(range(50)))[:m]
            src[r, :m] = data.draw(st.lists(st.integers(0, 3), min_size=m, max_size=m))
        cols, short = cap_per_source(ids, src, cap, k)
        for r in range(nq):
            per, want = {}, []
            for j in range(n):
                if ids[r, j] < 0:
                    break
                if per.get(src[r, j], 0) < cap:
                    per[src[r, j]] = per.get(src[r, j], 0) + 1
                    want.append(j)
                    if len(want) == k:
                        break
            assert [c for c in cols[r].tolist() if c >= 0] == want
            assert (cols[r, len(want):] == -1).all()
            assert bool(short[r]) == (len(want) < k and n > 0 and ids[r, -1] >= 0)

    check()


@pytest.mark.slow
def test_one_query_runs_blas_on_one_thread_and_a_batch_keeps_them(tmp_path):
    ws = _ws(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text('{"_id": "q1", "text": "twin"}\n')
    runs = {"one": ["search", "-w", str(ws.root), "twin"],
            "batch": ["search", "-w", str(ws.root), "--queries", str(q), "--run", str(tmp_path / "r.trec")]}
    for name, args in runs.items():
        code = ("import io, os, sys, contextlib\n"
                "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
                "from chitragupta.cli.main import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n"
                f"    rc = main({args!r})\n"
                "print(rc, os.environ.get('OPENBLAS_NUM_THREADS'))\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert p.stdout.strip() == ("0 1" if name == "one" else "0 None"), (name, p.stdout, p.stderr)


def test_bodies_are_kept_within_their_budget_and_a_changed_file_is_read_again(tmp_path, monkeypatch):
    import os

    import chitragupta.engine.search.hits as search_mod

    ws = _ws(tmp_path, n=12)
    r = Retriever.open(ws)
    keys = [r.index.citekeys[i] for i in range(6)]
    sizes = [len(Retriever.open(ws).body(k).text) for k in keys[:4]]  # another retriever: its own cache
    reads = []
    real = search_mod.load_body
    monkeypatch.setattr(search_mod, "load_body", lambda p: reads.append(p) or real(p))
    assert [len(r.body(k).text) for k in keys[:3]] == sizes[:3] and len(reads) == 3
    r.body(keys[2]), r.body(keys[0])
    assert len(reads) == 3  # kept; least recently used first: keys[1], keys[2], keys[0]
    monkeypatch.setattr(search_mod, "BODY_CHARS", sizes[0] + sizes[3] + 1)
    r.body(keys[3])  # over budget: keys[1] then keys[2] go, keys[0] (used since) stays
    assert len(reads) == 4 and r.hits._body_chars == sizes[0] + sizes[3]
    r.body(keys[0])
    assert len(reads) == 4
    r.body(keys[1])
    assert len(reads) == 5
    path = r.parsed_path(keys[0])
    text = path.read_text(encoding="utf-8")
    path.write_text(text + " appended words", encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a new size and mtime: a new file
    assert r.body(keys[0]).text.endswith("appended words")


@pytest.mark.parametrize("config", ["", "[retrieval]\nweight_title = 2.5\nk1 = 0.9\nb = 0.3\n"])
def test_score_pairs_is_score_dense_at_each_pair_and_counts_the_idf_held(tmp_path, config):
    from chitragupta.kernels.reference import score_dense, score_pairs
    from chitragupta.kernels.types import bm25_idf

    ws = _ws(tmp_path, config)
    r = Retriever.open(ws)
    plan = r.plan(QUERIES)
    p, batch = r.index.raw_postings, plan.batch
    rng = np.random.default_rng(3)
    q = rng.integers(0, batch.n_queries, 300)
    d = rng.integers(0, p.n_docs, 300)
    scores, held, total = score_pairs(p, batch, q, d, r.params)
    idf = bm25_idf(p.df(), p.n_docs)
    for i in range(q.size):
        terms = batch.terms[batch.indptr[q[i]]:batch.indptr[q[i] + 1]]
        dense, _ = score_dense(p, terms, r.params)
        assert scores[i] == pytest.approx(dense[d[i]], rel=1e-12, abs=1e-12)
        has = [t for t in terms.tolist() if d[i] in p.indices[p.indptr[t]:p.indptr[t + 1]]]
        assert held[i] == pytest.approx(idf[has].sum()) and total[i] == pytest.approx(idf[terms].sum())
    assert (scores > 0).any() and (scores == 0).any()
    empty = score_pairs(p, batch, q[:0], d[:0], r.params)
    assert all(a.shape == (0,) for a in empty)
