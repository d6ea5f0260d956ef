"""Document shards (``engine/index/shards.py``) and the merge of their top-k (``kernels/shardmerge.py``), without
Ray: a shard opens through every check of the whole index, and the shards' merged top-k -- through the same
driver ``search --ray`` uses (``enrich.ray_search.rank_sharded``) with the shards scored in this process -- is the
one-process batch, ids and scores to the bit, ties, field weights, query syntax and filters included."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from chitragupta.engine.index import shards
from chitragupta.engine.index.store import IndexCorrupt
from chitragupta.kernels.shardmerge import merge_topk, offset_ids, stack_rows
from chitragupta.kernels.types import TopK

from helpers import WORDS, best_of_dense, indexed_workspace, make_stale, run_main


def _queries(n: int, seed: int = 3) -> list[str]:
    rng = np.random.default_rng(seed)
    qs = [" ".join(rng.choice(WORDS, int(rng.integers(1, 7)))) for _ in range(n)]
    return qs + ["", "zzzz unknownword", "the of a"]


# -- the merge ---------------------------------------------------------------------------------------------------

def _dense_topk(scores: np.ndarray, hit: np.ndarray, k: int) -> TopK:
    out = TopK.empty(scores.shape[0], k)
    for q in range(scores.shape[0]):
        ids, vals = best_of_dense(np.where(hit[q], scores[q], 0.0), k)
        out.ids[q, :len(ids)], out.scores[q, :len(ids)] = ids, vals
    return out


@pytest.mark.parametrize("n_docs, count, k", [(500, 4, 10), (97, 7, 30), (40, 3, 100), (5, 8, 3), (300, 1, 17)])
def test_the_merge_of_shard_topk_is_the_whole_topk_with_many_ties(n_docs, count, k):
    rng = np.random.default_rng(n_docs * 31 + count)
    nq = 60
    scores = rng.integers(1, 5, size=(nq, n_docs)).astype(np.float64) * 0.25  # four values: ties everywhere
    hit = rng.random((nq, n_docs)) < rng.random((nq, 1))  # some rows nearly empty, some full
    want = _dense_topk(scores, hit, k)
    parts = [offset_ids(_dense_topk(scores[:, a:b], hit[:, a:b], k), a) for a, b in shards.ranges(n_docs, count)]
    for order in (parts, parts[::-1]):  # the order the parts come in does not matter
        got = merge_topk(order, k)
        assert np.array_equal(got.ids, want.ids)
        assert np.array_equal(got.scores, want.scores)
        assert (got.counts() == hit.sum(axis=1).clip(max=k)).all()


def test_the_merge_keeps_padding_and_stacks_query_blocks():
    a = TopK(np.array([[3, -1]]), np.array([[1.0, -np.inf]]))
    b = TopK(np.array([[-1, -1]]), np.array([[-np.inf, -np.inf]]))
    c = TopK(np.array([[1]]), np.array([[1.0]]))  # another width; ties with a's 3 and comes first
    got = merge_topk([a, b], 3)
    assert got.ids.tolist() == [[3, -1, -1]] and got.scores[0, 0] == 1.0 and np.isneginf(got.scores[0, 1:]).all()
    assert merge_topk([a, c], 3).ids.tolist() == [[1, 3, -1]]
    stacked = stack_rows([a, TopK(np.array([[7], [8]]), np.array([[2.0], [1.0]]))], 2)
    assert stacked.ids.tolist() == [[3, -1], [7, -1], [8, -1]]
    with pytest.raises(ValueError):
        merge_topk([a, TopK(np.zeros((2, 1), np.int64), np.zeros((2, 1)))], 2)


def test_ranges_cover_the_documents_in_order():
    assert shards.ranges(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert shards.ranges(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    with pytest.raises(ValueError):
        shards.ranges(5, 0)


# -- cutting -----------------------------------------------------------------------------------------------------

CONFIG = "[retrieval]\nweight_title = 2.5\nweight_abstract = 1.5\n"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    from chitragupta.engine.search.bm25 import BM25Searcher

    ws = indexed_workspace(tmp_path_factory.mktemp("shards"), config=CONFIG, n=150, vocab=60)
    searcher = BM25Searcher.open(ws)
    got, done = shards.refresh(ws, searcher.scorer.index, 4)
    assert done == "cut"
    return ws, searcher, got


def test_each_shard_is_a_checked_document_index_over_its_range(sharded):
    ws, searcher, got = sharded
    whole = searcher.scorer.index
    assert got.count == 4 and got.source == whole.path.name and got.current_for(whole)
    settings = ws.config.index_settings()
    opened = [shards.open_shard(got, i, settings, fields=("title", "abstract"), deep=True) for i in range(4)]
    keys = [s.index.citekeys[j] for s in opened for j in range(s.index.n_docs)]
    assert keys == [whole.citekeys[j] for j in range(whole.n_docs)]
    df = np.zeros(len(whole.vocab), dtype=np.int64)
    for s in opened:
        assert len(s.index.vocab) == len(whole.vocab)
        assert np.array_equal(s.global_df, whole.postings.df()) and s.n_docs == whole.n_docs
        assert s.avgdl == whole.postings.avgdl()
        assert np.array_equal(s.idf, whole.idf_)  # the whole corpus's idf, to the bit
        assert np.array_equal(s.norm(1.2, 0.75), whole.norm(1.2, 0.75)[s.start:s.stop])
        df += s.index.postings.df()
        assert np.array_equal(np.asarray(s.index.postings.doc_len), np.asarray(whole.postings.doc_len)[s.start:s.stop])
    assert np.array_equal(df, whole.postings.df())  # every posting in exactly one shard


def test_shards_score_as_the_whole_index_ties_fields_syntax_and_filters(sharded):
    from chitragupta.engine.search.filters import to_filters
    from chitragupta.enrich.ray_search import LocalTargets, rank_sharded

    ws, searcher, got = sharded
    settings = ws.config.index_settings()
    opened = [shards.open_shard(got, i, settings) for i in range(got.count)]
    qs = _queries(200) + ['"twin model"', "+ocean heat", "twin -model", '-"digital twin" sensor']
    filters = [None] * len(qs)
    filters[5] = to_filters({"keys": [f"d{i:04d}" for i in range(0, 150, 3)]}, "--")
    for k in (1, 7, 100, 1000):
        want = searcher.rank_many(qs, k, filters=filters)
        for targets in (LocalTargets(opened), LocalTargets([shards.whole(searcher.scorer.index)], blocks=5)):
            ranked = rank_sharded(searcher, qs, k, targets, filters)
            assert np.array_equal(ranked.topk.ids, want.topk.ids), k
            assert np.array_equal(ranked.topk.scores, want.topk.scores), k
            assert list(ranked.run_chunks([f"q{i}" for i in range(len(qs))])) == \
                list(want.run_chunks([f"q{i}" for i in range(len(qs))]))
    ties = want.topk.scores[:, 1:] == want.topk.scores[:, :-1]
    assert ties[np.isfinite(want.topk.scores[:, 1:])].any()  # the batch does hold ties


def test_a_shard_of_another_set_or_a_broken_set_is_refused(sharded, tmp_path):
    ws, searcher, got = sharded
    settings = ws.config.index_settings()
    other = shards.ShardSet(got.folder, "g0-1", got.citekeys_digest, got.n_docs, got.spans)
    with pytest.raises(IndexCorrupt, match="cut from another index"):
        shards.open_shard(other, 0, settings)
    with pytest.raises(IndexCorrupt, match="not a shard 9"):
        shards.open_shard(got, 9, settings)
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "SET").write_text(json.dumps({"schema": 1, "source": "g", "n_docs": 10, "spans": [[0, 4], [4, 9]]}))
    with pytest.raises(IndexCorrupt, match="do not cover"):
        shards.read_set(folder)
    assert shards.read_set_or_none(folder) is None
    (folder / "SET").write_text("{")
    with pytest.raises(IndexCorrupt, match="unreadable shard set"):
        shards.read_set(folder)
    assert shards.read_set(tmp_path) is None


def test_index_records_the_count_and_cuts_again_after_a_change(tmp_path):
    from chitragupta.engine.index.manage import open_current

    ws = indexed_workspace(tmp_path, n=60, seed=41, vocab=40)
    r = run_main("index", "-w", ws.root, "--shards", "3", "--jobs", "1")
    assert r.returncode == 0, r.stderr
    assert "index: 3 shards of about 20 documents cut" in r.stdout
    folder = shards.folder_of(ws)
    first = shards.read_set(folder)
    r = run_main("index", "-w", ws.root, "--jobs", "1")
    assert "index: 3 shards of about 20 documents up to date" in r.stdout
    make_stale(ws, tmp_path)  # one text changed: a new generation of the whole index
    r = run_main("index", "-w", ws.root, "--jobs", "1")
    assert r.returncode == 0 and "index: 3 shards of about 20 documents cut" in r.stdout
    again = shards.read_set(folder)
    whole = open_current(ws, update=False).index
    assert again.source != first.source and again.current_for(whole)
    r = run_main("index", "-w", ws.root, "--shards", "2", "--jobs", "1")
    assert "index: 2 shards" in r.stdout and shards.read_set(folder).count == 2
    assert sorted(p.name for p in folder.iterdir()) == ["0000", "0001", "SET"]  # the third shard's folder went
    r = run_main("index", "-w", ws.root, "--shards", "0", "--jobs", "1")
    assert "index: shards removed" in r.stdout and not folder.exists()
    r = run_main("index", "-w", ws.root, "--shards", "-1")
    assert r.returncode != 0 and "--shards wants a whole number of shards" in r.stderr


def test_more_shards_than_documents_are_one_a_document_and_score_as_the_whole(tmp_path):
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.ray_search import LocalTargets, rank_sharded

    ws = indexed_workspace(tmp_path, n=5, vocab=20)
    searcher = BM25Searcher.open(ws)
    got, _ = shards.refresh(ws, searcher.scorer.index, 8)
    assert got.count == 5 and shards.refresh(ws, searcher.scorer.index, 8) == (got, None)  # asked again: kept
    opened = [shards.open_shard(got, i, ws.config.index_settings(), deep=True) for i in range(got.count)]
    assert [s.index.n_docs for s in opened] == [1] * 5  # no empty shard
    assert sorted(p.name for p in got.folder.iterdir()) == ["0000", "0001", "0002", "0003", "0004", "SET"]
    qs = _queries(30)
    want = searcher.rank_many(qs, 10)
    ranked = rank_sharded(searcher, qs, 10, LocalTargets(opened))
    assert np.array_equal(ranked.topk.ids, want.topk.ids) and np.array_equal(ranked.topk.scores, want.topk.scores)


def test_index_with_more_shards_than_documents_cuts_one_a_document_and_says_so(tmp_path):
    ws = indexed_workspace(tmp_path, n=9, vocab=20)
    r = run_main("index", "-w", ws.root, "--shards", str(shards.MAX_SHARDS), "--jobs", "1")
    assert r.returncode == 0, r.stderr
    assert f"--shards {shards.MAX_SHARDS}: the index holds 9 documents, so 9 shards (a shard is never empty)" in r.stderr
    assert "index: 9 shards of about 1 documents cut" in r.stdout
    assert len([p for p in shards.folder_of(ws).iterdir() if p.is_dir()]) == 9


def _damage(path, at: int) -> None:
    """Flip a byte of ``path`` in place, keeping its size and mtime (a sector gone bad, not a write)."""
    import os

    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("how", ["a byte flipped", "an array gone", "the shard gone"])
def test_index_finds_a_damaged_shard_and_cuts_it_again(tmp_path, how):
    import shutil

    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.ray_search import LocalTargets, rank_sharded

    ws = indexed_workspace(tmp_path, n=60, seed=5, vocab=40)
    assert run_main("index", "-w", ws.root, "--shards", "3", "--jobs", "1").returncode == 0
    folder = shards.folder_of(ws)
    got = shards.read_set(folder)
    gen = next(p for p in got.shard_folder(1).iterdir() if p.is_dir())
    if how == "a byte flipped":
        _damage(gen / "indices.npy", -3)
    elif how == "an array gone":
        (gen / "tf.npy").unlink()
    else:
        shutil.rmtree(got.shard_folder(1))
    settings = ws.config.index_settings()
    with pytest.raises(IndexCorrupt):
        shards.open_shard(got, 1, settings, deep=True, verify=True)
    r = run_main("index", "-w", ws.root, "--jobs", "1")  # what a search on the damaged shard advises
    assert r.returncode == 0, r.stderr
    assert "index shards repaired: 1 damaged shard(s) cut again: 0001 (" in r.stderr
    assert "index: 3 shards of about 20 documents up to date" in r.stdout
    again = shards.read_set(folder)
    assert again == got  # the same set, shard 0001 written again
    opened = [shards.open_shard(again, i, settings, deep=True, verify=True) for i in range(3)]
    searcher = BM25Searcher.open(ws)
    qs = _queries(40)
    want = searcher.rank_many(qs, 10)
    ranked = rank_sharded(searcher, qs, 10, LocalTargets(opened))
    assert np.array_equal(ranked.topk.ids, want.topk.ids) and np.array_equal(ranked.topk.scores, want.topk.scores)
    r = run_main("index", "-w", ws.root, "--jobs", "1")
    assert "repaired" not in r.stderr and "index: 3 shards of about 20 documents up to date" in r.stdout


# -- the --ray options, without a cluster ---------------------------------------------------------------------------

def test_without_ray_the_search_names_the_extra(tmp_path, monkeypatch):
    from chitragupta.enrich.ray_search import check_options
    from chitragupta.errors import MissingExtra

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtra, match=r"ray is not installed for searching on a Ray cluster.*'ray' extra"):
        check_options(engine="bm25", unit=None, backend=None, queries=True)


@pytest.mark.parametrize("args, needle", [
    ((), "--ray scores a batch"),
    (("--engine", "embed", "--queries", "Q", "--run", "R"), "--engine embed runs in one process"),
    (("--unit", "passage", "--queries", "Q", "--run", "R"), "--unit passage runs in one process"),
    (("--backend", "numpy", "--queries", "Q", "--run", "R"), "--backend numpy runs in one process"),
])
def test_ray_refuses_what_it_does_not_score_in_one_line(tmp_path, args, needle):
    r = run_main("search", "-w", tmp_path, *(args or ("twin",)), "--ray", "auto")
    assert r.returncode != 0
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_actor_refuses_another_generation_than_the_drivers(sharded):
    from chitragupta.engine.index.manage import doc_folder
    from chitragupta.enrich.ray_search import _open_target
    from chitragupta.errors import UsageError

    ws, searcher, got = sharded
    spec = {"folder": str(doc_folder(ws)), "generation": searcher.scorer.index.path.name, "shard": None,
            "settings": ws.config.index_settings(), "fields": ["title"]}
    assert _open_target(spec).stop == searcher.scorer.index.n_docs
    with pytest.raises(UsageError, match="the document index changed while the batch was sent out"):
        _open_target(dict(spec, generation="g0-1"))
    spec = dict(spec, folder=str(got.folder), generation=got.source, shard=2)
    assert (_open_target(spec).start, _open_target(spec).stop) == got.spans[2]
    with pytest.raises(UsageError, match="the index shards changed"):
        _open_target(dict(spec, generation="g0-1"))
