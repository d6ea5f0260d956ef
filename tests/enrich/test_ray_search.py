"""A BM25 batch on Ray (``search --queries Q --run R --ray``, ``enrich/ray_search.py``): a local Ray of two CPUs,
and the run file equal to the one-process run byte for byte, over the whole index and over its shards.

Slow (a local Ray starts; its actors load numba's kernels) and skipped where ray is not installed (the ``ray``
extra). The quick-tier tests of the split and the merge without Ray are in ``tests/engine/index/test_shards.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import helpers
from helpers import WORDS, indexed_workspace, make_stale, run_main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    yield from helpers.local_ray()


def _query_file(path, n: int = 400, seed: int = 5):
    rng = np.random.default_rng(seed)
    lines = [{"_id": f"q{i}", "text": " ".join(rng.choice(WORDS, int(rng.integers(1, 7))))} for i in range(n)]
    lines += [{"_id": "p1", "text": '"twin model" sensor'}, {"_id": "p2", "text": "+ocean heat -soil"},
              {"_id": "f1", "text": "twin model", "filters": {"keys": [f"d{i:04d}" for i in range(0, 200, 7)]}},
              {"_id": "e1", "text": "zzzz unknownword"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _run(root, queries, out, *extra):
    r = run_main("search", "-w", root, "--queries", queries, "--run", out, *extra)
    assert r.returncode == 0, r.stderr
    return r


def test_the_ray_run_is_the_one_process_run_whole_and_sharded(local_ray, tmp_path):
    ws = indexed_workspace(tmp_path, config="[retrieval]\nweight_title = 2.0\n", n=200, vocab=60)
    q = _query_file(tmp_path / "q.jsonl")
    _run(ws.root, q, tmp_path / "one.trec")
    _run(ws.root, q, tmp_path / "one.jsonl", "--json", "-k", "7")
    one, one_json = (tmp_path / "one.trec").read_bytes(), (tmp_path / "one.jsonl").read_bytes()
    assert one.count(b"\n") > 10_000

    r = _run(ws.root, q, tmp_path / "whole.trec", "--ray", "auto")
    assert "scored by 2 Ray actor(s) over the whole index" in r.stderr
    assert (tmp_path / "whole.trec").read_bytes() == one
    _run(ws.root, q, tmp_path / "whole.jsonl", "--json", "-k", "7", "--ray", "auto")
    assert (tmp_path / "whole.jsonl").read_bytes() == one_json

    assert run_main("index", "-w", ws.root, "--shards", "3").returncode == 0
    r = _run(ws.root, q, tmp_path / "sharded.trec", "--ray", "auto")
    assert "scored by 3 Ray actor(s), one per shard" in r.stderr
    assert (tmp_path / "sharded.trec").read_bytes() == one
    _run(ws.root, q, tmp_path / "sharded.jsonl", "--json", "-k", "7", "--ray", "auto")
    assert (tmp_path / "sharded.jsonl").read_bytes() == one_json


def test_shards_of_an_older_index_are_cut_again_or_refused(local_ray, tmp_path):
    ws = indexed_workspace(tmp_path, n=60, seed=41, vocab=40)
    q = _query_file(tmp_path / "q.jsonl", n=50)
    assert run_main("index", "-w", ws.root, "--shards", "2").returncode == 0
    make_stale(ws, tmp_path)
    _run(ws.root, q, tmp_path / "one.trec")  # a one-process search updates the whole index, not the shards
    r = run_main("search", "-w", ws.root, "--queries", q, "--run", tmp_path / "stale.trec", "--ray", "auto",
                 "--no-update")
    assert r.returncode != 0 and "the index shards were cut from an older index (2 shards)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _run(ws.root, q, tmp_path / "ray.trec", "--ray", "auto")
    assert "the index shards were cut from an older index; cut again (2 shards)" in r.stderr
    assert (tmp_path / "ray.trec").read_bytes() == (tmp_path / "one.trec").read_bytes()
    r = _run(ws.root, q, tmp_path / "again.trec", "--ray", "auto")
    assert "cut again" not in r.stderr and (tmp_path / "again.trec").read_bytes() == (tmp_path / "one.trec").read_bytes()


def test_an_actor_that_cannot_open_its_index_is_one_clear_error(local_ray, tmp_path):
    from chitragupta.engine.index.manage import doc_folder
    from chitragupta.engine.search.bm25 import BM25Searcher
    from chitragupta.enrich.ray_search import BatchPlan, RayTargets
    from chitragupta.errors import UsageError

    ws = indexed_workspace(tmp_path, n=50)
    searcher = BM25Searcher.open(ws)
    spec = {"folder": str(doc_folder(ws)), "generation": "g0-1", "shard": None,
            "settings": ws.config.index_settings(), "fields": []}
    targets = RayTargets(local_ray, [spec, spec], [(0, 50)] * 2, sharded=False, cpus=1, threads=1)
    try:
        plan = searcher.scorer.plan(["twin model"])
        with pytest.raises(UsageError) as err:
            targets.score(BatchPlan(plan.batch, 10, searcher.scorer.params, None))
        assert str(err.value).startswith("the document index changed while the batch was sent out (g0-1 -> ")
        assert "\n" not in str(err.value)
    finally:
        targets.close()


def test_a_damaged_shard_is_cut_again_by_the_index_command_the_error_names(local_ray, tmp_path):
    from chitragupta.engine.index import shards

    ws = indexed_workspace(tmp_path, n=60, seed=9, vocab=40)
    q = _query_file(tmp_path / "q.jsonl", n=50)
    _run(ws.root, q, tmp_path / "one.trec")
    assert run_main("index", "-w", ws.root, "--shards", "2").returncode == 0
    got = shards.read_set(shards.folder_of(ws))
    gen = next(p for p in got.shard_folder(1).iterdir() if p.is_dir())
    (gen / "tf.npy").unlink()
    r = run_main("search", "-w", ws.root, "--queries", q, "--run", tmp_path / "bad.trec", "--ray", "auto")
    assert r.returncode != 0 and "index shard 1 is not usable (array tf is missing); run `chitragupta index`" in r.stderr
    r = run_main("index", "-w", ws.root)
    assert r.returncode == 0 and "index shards repaired: 1 damaged shard(s) cut again: 0001" in r.stderr
    _run(ws.root, q, tmp_path / "ray.trec", "--ray", "auto")
    assert (tmp_path / "ray.trec").read_bytes() == (tmp_path / "one.trec").read_bytes()
