"""The torch backend against the numpy reference and numba, and the dispatch that chooses it.

On torch's CPU device the backend computes in float64 and sums in the reference's order, so it must agree
exactly (ids and scores). On CUDA (float32; marked ``gpu``) it must agree tie-aware, scores to 1e-5
relative. Import-cost promises (no torch on ``import engine``, nor on ``resolve("auto")`` without an
NVIDIA GPU) are checked in fresh interpreters.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from chitragupta.kernels import (  # noqa: E402
    BM25Params,
    Postings,
    QueryBatch,
    TopK,
    dispatch,  # noqa: E402
    reference,
    score_topk,
)
from chitragupta.kernels import torch_backend as tb  # noqa: E402
from chitragupta.kernels.sweep import grid_of, sweep  # noqa: E402

from helpers import (  # noqa: E402  # noqa: E402
    CASES,
    ROOT,
    make_workspace,
    random_docs,
    random_postings,
    random_queries,
)
from oracle import same_ranking  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu,
                                              pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")])]


# "cpu-float32": the CPU device computing in CUDA's default dtype, so CI runs the float32 path and the
# tie-aware check. "cuda-float64": the same operations in the same order as the reference, so exact too.
MODES = ["cpu", "cpu-float32"] + DEVICES[1:] + [
    pytest.param("cuda-float64", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")])]


def run_torch(p: Postings, q: QueryBatch, params: BM25Params, k: int, mode: str) -> TopK:
    if mode in ("cpu-float32", "cuda-float64"):
        device, dtype = mode.split("-")
        return tb.score_topk(p, q, params, k, device=device, dtype=getattr(torch, dtype))
    return score_topk(p, q, params, k, backend="torch", device=mode)


def with_fields(p: Postings, seed: int) -> Postings:
    """``p`` with seeded title and abstract counts (each <= tf, together <= tf)."""
    rng = np.random.default_rng(seed)
    title = np.minimum(p.tf, rng.integers(0, 3, p.nnz)).astype(np.int32)
    abstract = np.minimum(p.tf - title, rng.integers(0, 2, p.nnz)).astype(np.int32)
    return Postings(p.indptr, p.indices, p.tf, p.doc_len, fields={"title": title, "abstract": abstract})


def assert_agrees(got: TopK, want: TopK, device: str) -> None:
    """Exact in float64 (CPU, or CUDA asked for float64); in float32 the same ranking up to ties, scores
    to 1e-5 relative."""
    assert got.ids.shape == want.ids.shape
    assert got.ids.dtype == np.int64 and got.scores.dtype == np.float64
    if device in ("cpu", "cuda-float64"):
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.scores, want.scores)
        return
    np.testing.assert_array_equal(got.counts(), want.counts())
    for q in range(want.ids.shape[0]):
        g = [(int(d), float(s)) for d, s in zip(got.ids[q], got.scores[q]) if d >= 0]
        w = [(int(d), float(s)) for d, s in zip(want.ids[q], want.scores[q]) if d >= 0]
        assert same_ranking(g, w, want.k, rel=1e-5), (q, g, w)


def assert_sorted_and_padded(top: TopK) -> None:
    for ids, scores in zip(top.ids, top.scores):
        n = int((ids >= 0).sum())
        assert (ids[:n] >= 0).all() and (scores[:n] > 0).all()
        for i in range(n - 1):
            assert scores[i] > scores[i + 1] or (scores[i] == scores[i + 1] and ids[i] < ids[i + 1])
        assert (ids[n:] == -1).all() and np.isneginf(scores[n:]).all()


PARAMS = [BM25Params(), BM25Params(k1=0.0, b=0.0), BM25Params(k1=3.0, b=1.0),
          BM25Params(k1=1.2, b=0.5, field_weights=(("title", 2.5), ("abstract", 0.0))),
          BM25Params(field_weights=(("abstract", 3.0),))]


# -- parity ----------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("k", [1, 10, 5000])
@pytest.mark.parametrize("params", PARAMS)
def test_torch_equals_reference_and_numba(mode, case, k, params):
    p = with_fields(random_postings(**case), case["seed"])
    q = random_queries(case["seed"], p.n_terms, 60)
    want = reference.score_topk(p, q, params, k)
    np.testing.assert_array_equal(score_topk(p, q, params, k, backend="numba").ids, want.ids)
    got = run_torch(p, q, params, k, mode)
    assert_agrees(got, want, mode)
    assert_sorted_and_padded(got)


@pytest.mark.parametrize("device", MODES)
def test_ties_across_the_kth_score_keep_the_lowest_ids(device, monkeypatch):
    # 40 copies of one document: every query ties 40 ways, so the k-th score is tied far beyond k
    one = random_postings(11, 30, 12, density=0.4)
    n = 40
    m = np.zeros((one.n_terms, n), dtype=np.int32)
    for t in range(one.n_terms):
        for j in range(one.indptr[t], one.indptr[t + 1]):
            if one.indices[j] == 0:
                m[t, :] = one.tf[j]
    m[:, 25:] = 0  # docs 25.. are empty, so the tie group is docs 0..24
    m[0, 30] = 7   # one better document for term 0
    indptr = np.concatenate(([0], np.cumsum((m > 0).sum(1)))).astype(np.int64)
    rows, cols = np.nonzero(m)
    p = Postings(indptr, cols.astype(np.int32), m[rows, cols].astype(np.int32), np.full(n, 9, np.int32))
    q = QueryBatch.from_lists([[t] for t in range(one.n_terms) if m[t].any()] + [[0, 1, 2]])
    calls = []
    real = tb._exact_boundary
    monkeypatch.setattr(tb, "_exact_boundary", lambda *a: calls.append(1) or real(*a))
    for k in (1, 3, 10, 24, 25, 26):
        got = run_torch(p, q, BM25Params(), k, device)
        want = reference.score_topk(p, q, BM25Params(), k)
        np.testing.assert_array_equal(got.ids, want.ids)  # exact ties in float32 too: same summation order
        np.testing.assert_allclose(got.scores, want.scores, rtol=0 if device in ("cpu", "cuda-float64") else 1e-6)
    assert calls  # the boundary really was crossed by a tie, so the exact path was tested


@pytest.mark.parametrize("device", DEVICES)
def test_topk_rows_orders_ties_by_id_and_drops_non_hits(device):
    acc = torch.tensor([[1.0, 3.0, 3.0, 3.0, 3.0, 0.0, 3.0, 5.0],
                        [0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                        [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]], dtype=torch.float64, device=device)
    ids, vals = tb.topk_rows(acc, 3, fix_block=1)
    assert ids.tolist() == [[7, 1, 2], [2, -1, -1], [0, 1, 2]]
    assert vals.tolist() == [[5.0, 3.0, 3.0], [2.0, -np.inf, -np.inf], [2.0, 2.0, 2.0]]
    ids, _ = tb.topk_rows(acc, 8, fix_block=2)
    assert ids.tolist() == [[7, 1, 2, 3, 4, 6, 0, -1], [2] + [-1] * 7, list(range(8))]


@pytest.mark.parametrize("device", DEVICES)
def test_empty_unknown_and_degenerate_inputs(device):
    p = random_postings(1, 50, 10)
    # term 9 gets no postings: a known term that matches nothing, like an unknown one
    cut = int(p.indptr[9])
    p = Postings(np.concatenate([p.indptr[:10], [cut]]).astype(np.int64), p.indices[:cut], p.tf[:cut], p.doc_len)
    q = QueryBatch.from_lists([[], [3], [9], [], [9, 3]])
    got = score_topk(p, q, BM25Params(), 5, backend="torch", device=device)
    assert_agrees(got, reference.score_topk(p, q, BM25Params(), 5), device)
    assert got.counts()[[0, 2, 3]].tolist() == [0, 0, 0] and got.counts()[1] > 0
    only_empty = score_topk(p, QueryBatch.from_lists([[], [9]]), BM25Params(), 4, backend="torch", device=device)
    assert (only_empty.ids == -1).all() and np.isneginf(only_empty.scores).all()
    none = score_topk(p, QueryBatch.from_lists([]), BM25Params(), 3, backend="torch", device=device)
    assert none.ids.shape == (0, 3)
    empty = Postings(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))
    top = score_topk(empty, QueryBatch.from_lists([[], []]), BM25Params(), 3, backend="torch", device=device)
    assert top.ids.shape == (2, 3) and (top.ids == -1).all()
    single = random_postings(4, 1, 5, density=1.0)
    top = score_topk(single, QueryBatch.from_lists([[0, 1], []]), BM25Params(), 10, backend="torch", device=device)
    assert top.ids.shape == (2, 10) and top.counts().tolist() == [1, 0] and top.ids[0, 0] == 0


@pytest.mark.parametrize("device", DEVICES)
def test_chunking_does_not_change_results(device, monkeypatch):
    p = with_fields(random_postings(2, 1000, 400, density=0.01, ties=True), 2)
    q = random_queries(2, p.n_terms, 90)
    params = BM25Params(k1=1.1, b=0.6, field_weights=(("title", 2.0),))
    want = score_topk(p, q, params, 7, backend="torch", device=device)
    seen = []
    real = tb._plan
    monkeypatch.setattr(tb, "_plan", lambda *a: seen.append(real(*a)) or seen[-1])
    if device == "cpu":
        monkeypatch.setattr(tb, "CPU_BUDGET_BYTES", 40 * p.n_docs * 8)  # ~20 queries, a few postings each
    else:
        monkeypatch.setattr(tb, "_budget_bytes", lambda dev: 40 * p.n_docs * 4)
    got = score_topk(p, q, params, 7, backend="torch", device=device)
    assert seen[-1].q_bounds.shape[0] > 3  # really split into several query chunks
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_array_equal(got.scores, want.scores)


# -- the sweep ---------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_sweep_on_torch_equals_numba_per_grid_point(device, monkeypatch):
    p = with_fields(random_postings(7, 400, 90, density=0.05), 7)
    q = random_queries(7, p.n_terms, 70)
    grid = grid_of([0.0, 0.9, 2.0], [0.0, 0.75, 1.0], [0.0, 1.0, 2.5], [1.0, 3.0])
    want = sweep(p, q, grid, 8, backend="numba")
    got = sweep(p, q, grid, 8, backend="torch", device=device)
    assert len(got) == len(grid)
    for a, b in zip(got, want):
        assert_agrees(a, b, device)
    # a budget for only a few grid points at a time: the grid is chunked, results unchanged
    seen = []
    real = tb._plan
    monkeypatch.setattr(tb, "_plan", lambda *a: seen.append(real(*a)) or seen[-1])
    small = 3 * q.n_queries * p.n_docs * 8 * 2
    if device == "cpu":
        monkeypatch.setattr(tb, "CPU_BUDGET_BYTES", small)
    else:
        monkeypatch.setattr(tb, "_budget_bytes", lambda dev: small)
    again = sweep(p, q, grid, 8, backend="torch", device=device)
    assert 1 < seen[-1].g_chunk < len(grid)
    for a, b in zip(again, got):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.scores, b.scores)


def test_sweep_rejects_unknown_backends_and_fields():
    p = random_postings(1, 20, 5)
    q = QueryBatch.from_lists([[0]])
    with pytest.raises(ValueError, match="allowed: auto, numba, numpy, torch"):
        sweep(p, q, grid_of([1.0], [0.5]), 3, backend="cuda")
    with pytest.raises(ValueError, match="title and abstract"):
        sweep(p, q, [BM25Params(field_weights=(("body", 2.0),))], 3, backend="torch", device="cpu")


# -- the device copy ------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_postings_are_uploaded_once_and_dropped_with_the_index(monkeypatch):
    p = random_postings(3, 200, 30, density=0.3)
    q = random_queries(3, p.n_terms, 20)
    built = []
    real = tb.DeviceIndex.__init__

    def counting(self, *a, **kw):
        built.append(1)
        real(self, *a, **kw)

    monkeypatch.setattr(tb.DeviceIndex, "__init__", counting)
    first = score_topk(p, q, BM25Params(), 5, backend="torch", device="cpu")
    second = score_topk(p, q, BM25Params(k1=0.7, b=0.2), 5, backend="torch", device="cpu")
    assert len(built) == 1 and tb.device_index(p, "cpu") is tb.device_index(p, "cpu")
    assert not np.array_equal(first.scores, second.scores)  # k1 and b were applied at query time
    key = (id(p), "cpu")
    assert key in tb._CACHE
    del p
    gc.collect()
    assert key not in tb._CACHE


def test_replaced_field_counts_are_uploaded_again():
    p = with_fields(random_postings(5, 100, 20, density=0.2), 5)
    q = random_queries(5, p.n_terms, 20)
    params = BM25Params(field_weights=(("title", 3.0),))
    score_topk(p, q, params, 5, backend="torch", device="cpu")
    p.fields["title"] = np.zeros(p.nnz, dtype=np.int32)  # as a rebuilt index would
    got = score_topk(p, q, params, 5, backend="torch", device="cpu")
    np.testing.assert_array_equal(got.scores, reference.score_topk(p, q, params, 5).scores)


# -- the dispatch ----------------------------------------------------------------------------------------------

def _python(code: str, **env) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True)


def test_importing_engine_and_kernels_does_not_import_torch():
    p = _python("import sys, chitragupta, chitragupta.engine, chitragupta.kernels, chitragupta.kernels.dispatch, chitragupta.kernels.sweep, chitragupta.engine.search.bm25, chitragupta.cli.main\n"
                "assert 'torch' not in sys.modules, 'torch imported'\n")
    assert p.returncode == 0, p.stderr


def test_auto_without_an_nvidia_device_never_imports_torch():
    code = ("import sys\nfrom chitragupta.kernels.dispatch import resolve\n"
            "from chitragupta.device import nvidia_device_present\n"
            "assert not nvidia_device_present()\n"
            "b = resolve('auto')\nassert b.name == 'numba' and b.device is None, b\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    p = _python(code, CUDA_VISIBLE_DEVICES="")  # hides any GPU, as it does from CUDA
    assert p.returncode == 0, p.stderr


def test_device_nodes_are_seen_unless_cuda_visible_devices_hides_them(monkeypatch):
    from chitragupta import device

    monkeypatch.setattr(device.glob, "glob", lambda pattern: ["/dev/nvidia0"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert device.nvidia_device_present() is True
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert device.nvidia_device_present() is True
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device.nvidia_device_present() is False
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert device.nvidia_device_present() is False


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
def test_auto_with_a_gpu_is_torch_on_cuda(caplog):
    with caplog.at_level(logging.INFO, logger="chitragupta.kernels.dispatch"):
        b = dispatch.resolve("auto")
    assert (b.name, b.device) == ("torch", "cuda")
    assert "backend auto -> torch on cuda" in caplog.text
    assert dispatch.resolve("auto", "cpu").name == "numba"


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine where torch sees no CUDA device")
def test_auto_with_a_device_node_but_no_cuda_in_torch_is_numba(monkeypatch, caplog):
    from chitragupta import device

    monkeypatch.setattr(device, "nvidia_device_present", lambda: True)
    with caplog.at_level(logging.INFO, logger="chitragupta.kernels.dispatch"):
        b = dispatch.resolve("auto")
    assert b.name == "numba"
    assert "backend auto -> numba" in caplog.text


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without a CUDA device")
@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_cuda_without_a_device_is_a_usage_error(backend):
    from chitragupta.errors import UsageError

    with pytest.raises(UsageError, match='device "cuda".*no CUDA device'):
        dispatch.resolve(backend, "cuda")
    with pytest.raises(UsageError, match="no CUDA device"):
        sweep(random_postings(1, 10, 5), QueryBatch.from_lists([[0]]), grid_of([1.0], [0.5]), 2,
              backend="torch", device="cuda")


def test_resolve_torch_names_its_device_and_rejects_unknown_devices():
    b = dispatch.resolve("torch", "cpu")
    assert (b.name, b.device, b.accepts_cached) == ("torch", "cpu", False)
    assert dispatch.resolve("torch", "auto").device == ("cuda" if HAS_CUDA else "cpu")
    assert dispatch.resolve("numba", "cpu").name == "numba"
    with pytest.raises(ValueError, match="allowed: auto, cpu, cuda"):
        dispatch.resolve("torch", "tpu")


@pytest.mark.slow
def test_missing_torch_names_the_gpu_extra():
    code = ("import sys\nsys.modules['torch'] = None  # as if torch were not installed\n"
            "from chitragupta.errors import MissingExtra\nfrom chitragupta.kernels.dispatch import resolve\n"
            "try:\n    resolve('torch', 'cpu')\nexcept MissingExtra as e:\n    print(e)\nelse:\n"
            "    raise SystemExit('no error')\n"
            "assert resolve('auto').name == 'numba'  # auto does not need torch\n")
    p = _python(code)
    assert p.returncode == 0, p.stderr
    assert "'gpu' extra" in p.stdout and "chitragupta[gpu]" in p.stdout


# -- end to end ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("torchws"), random_docs(21, 120))


@pytest.mark.parametrize("device", DEVICES)
def test_retriever_on_torch_equals_numba(workspace, device):
    from chitragupta.engine.search.bm25 import Retriever

    queries = ["digital twin fidelity", "sensor water leak", "nothing-indexed-here", "", "model model bm25",
               "climate ocean heat soil"] + [w for w in random_docs(22, 1)[0]["text"].split()[:20]]
    fast = Retriever.open(workspace, backend="numba")
    on_torch = Retriever.open(workspace, backend="torch", device=device)
    assert on_torch.backend.name == "torch" and on_torch.backend.device == device
    for k in (1, 10, 200):
        assert_agrees(on_torch.rank_many(queries, k).topk, fast.rank_many(queries, k).topk, device)
    a, b = on_torch.search("digital twin model", k=5), fast.search("digital twin model", k=5)
    assert len(a.hits) == len(b.hits) == 5
    if device == "cpu":  # float32 on CUDA may order near-ties differently; rank_many above checked it
        assert [(h.citekey, h.score) for h in a.hits] == [(h.citekey, h.score) for h in b.hits]
    else:
        np.testing.assert_allclose([h.score for h in a.hits], [h.score for h in b.hits], rtol=1e-5)


@pytest.mark.slow
def test_cli_search_takes_backend_torch_and_device(workspace):
    from helpers import run_cli

    a = run_cli("search", "-w", workspace, "digital twin model", "--json", "--backend", "torch", "--device", "cpu",
                check=True)
    b = run_cli("search", "-w", workspace, "digital twin model", "--json", "--backend", "numba", check=True)
    assert a.stdout == b.stdout and '"citekey"' in a.stdout
    bad = run_cli("search", "-w", workspace, "x", "--device", "tpu")
    assert bad.returncode != 0 and "auto" in bad.stderr and "cuda" in bad.stderr
