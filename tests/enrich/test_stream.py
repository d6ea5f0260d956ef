"""The one encode pipeline (``chitragupta.enrich.stream``): what is encoded for a chunk, the streams (local
blocks, a plain callable), the checks every block passes, and the topic stage going through the same
stream as the embed stage. Fake encoders here: no model is loaded."""

from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import chitragupta.enrich.encoders as encoders
import chitragupta.enrich.stream as stream_module
import numpy as np
import pytest
from chitragupta.enrich.stream import (
    EncodeStream,
    FunctionStream,
    LocalEncodeStream,
    adaptive_blocks,
    as_stream,
    checked_blocks,
    encode_input,
    recipe,
)
from chitragupta.errors import UsageError


class FakeEncoder:
    """Each text's vector: (its length, 1, 0, ...) -- recognisable, never normalised by itself."""

    def __init__(self, dim=4, batch_size=4, device="cpu", max_seq_length=128):
        self.dim, self.batch_size, self.device, self.max_seq_length = dim, batch_size, device, max_seq_length
        self.model_name, self.slug, self.passage_prefix = "fake/model", "fake-model", ""
        self.calls: list[int] = []

    def encode_block(self, texts):
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = [len(t) for t in texts]
        out[:, 1] = 1.0
        return out


def _folder(tmp_path, msl=128, dim=4):
    """A model folder whose JSON files say (or, msl None, do not say) its recipe."""
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    if msl is not None:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": msl}))
    (folder / "modules.json").write_text(json.dumps([
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": dim,
                                                                  "pooling_mode_mean_tokens": True}))
    return SimpleNamespace(embed_model=str(folder), embed_batch_size=4, query_prefix="", passage_prefix="")


# -- what is encoded ----------------------------------------------------------------------------------------

def test_the_chunking_is_chunkings_and_the_input_is_title_then_chunk():
    from chitragupta.enrich.chunking import chunk_spans

    defaults = inspect.signature(chunk_spans).parameters
    assert (stream_module.CHUNK_WORDS, stream_module.CHUNK_OVERLAP) == (defaults["words"].default,
                                                                      defaults["overlap"].default)
    text = " ".join(f"w{i}" for i in range(450))
    assert stream_module.document_chunks(text) == chunk_spans(text)
    assert encode_input("  A   title\n", "the chunk") == "A title\nthe chunk"
    assert encode_input("", "the chunk") == "the chunk"


def test_the_recipe_names_everything_a_vector_depends_on():
    spec = SimpleNamespace(max_seq_length=256, passage_prefix="")
    want = {"words": stream_module.CHUNK_WORDS, "overlap": stream_module.CHUNK_OVERLAP,
            "input": "title + newline + chunk", "max_seq_length": 256}
    assert recipe(spec) == want
    assert recipe(SimpleNamespace(max_seq_length=256, passage_prefix="passage: ")) == {**want,
                                                                                      "passage_prefix": "passage: "}
    assert recipe(SimpleNamespace(max_seq_length=512, passage_prefix="")) != want


# -- the local stream -----------------------------------------------------------------------------------------

def test_local_blocks_grow_from_one_batch_to_at_most_the_cap_and_cover_every_text(monkeypatch):
    clock = SimpleNamespace(t=0.0)
    monkeypatch.setattr(stream_module, "time", SimpleNamespace(perf_counter=lambda: clock.t))
    enc = FakeEncoder(batch_size=4)
    real = enc.encode_block

    def timed(texts):
        clock.t += 0.001 * len(texts)  # fast: every block may double
        return real(texts)

    enc.encode_block = timed
    texts = [f"t{i}" for i in range(1000)]
    blocks = list(adaptive_blocks(enc, texts, block_seconds=8.0))
    assert enc.calls[:6] == [4, 8, 16, 32, 64, 128]
    assert max(enc.calls) == 4 * stream_module.MAX_BLOCK_BATCHES
    assert sum(enc.calls) == 1000 and all(c % 4 == 0 for c in enc.calls[:-1])
    got = np.concatenate(blocks)
    assert got[:, 0].tolist() == [len(t) for t in texts]  # consecutive, in input order


def test_slow_blocks_stay_near_the_time_aimed_at(monkeypatch):
    clock = SimpleNamespace(t=0.0)
    monkeypatch.setattr(stream_module, "time", SimpleNamespace(perf_counter=lambda: clock.t))
    enc = FakeEncoder(batch_size=4)
    real = enc.encode_block

    def timed(texts):
        clock.t += 1.0 * len(texts)  # one text a second: a block of 8 s is two batches
        return real(texts)

    enc.encode_block = timed
    list(adaptive_blocks(enc, [f"t{i}" for i in range(40)], block_seconds=8.0))
    assert enc.calls == [4, 8, 8, 8, 8, 4]


def test_the_local_stream_loads_nothing_for_its_spec_when_the_folder_says_it(tmp_path, monkeypatch):
    cfg = _folder(tmp_path)
    loads = []
    fake = FakeEncoder()
    monkeypatch.setattr(encoders, "load_encoder", lambda c, d: loads.append(d) or fake)
    s = LocalEncodeStream(cfg, "cpu")
    spec = s.spec()
    assert (spec.max_seq_length, spec.dim) == (128, 4) and loads == [] and not s.loaded
    assert s.device == "cpu"  # nothing ran: the device asked for
    assert list(s([])) == [] and loads == []
    fake.device = "cuda"
    blocks = list(s(["a", "bb", "ccc"]))
    assert loads == ["cpu"] and s.loaded and s.model() is fake and s.device == "cuda"  # what really encoded
    assert np.concatenate(blocks)[:, 0].tolist() == [1, 2, 3]


def test_the_local_stream_loads_the_model_when_the_folder_does_not_say_the_recipe(tmp_path, monkeypatch):
    cfg = _folder(tmp_path, msl=None)
    fake = FakeEncoder(max_seq_length=512)
    monkeypatch.setattr(encoders, "load_encoder", lambda c, d: fake)
    s = LocalEncodeStream(cfg, "cpu")
    assert s.spec() is fake and recipe(s.spec())["max_seq_length"] == 512


def test_anything_that_encodes_becomes_a_stream(tmp_path):
    cfg = _folder(tmp_path)
    fake = FakeEncoder()
    local = as_stream(None, cfg, "cpu")
    assert isinstance(local, LocalEncodeStream) and local.spec().model_name == cfg.embed_model
    wrapped = as_stream(fake, cfg, "cpu")
    assert isinstance(wrapped, LocalEncodeStream) and wrapped.spec() is fake
    assert as_stream(local, cfg, "cpu") is local

    def remote(texts):
        yield fake.encode_block(list(texts))

    fn = as_stream(remote, cfg, "cpu")
    assert isinstance(fn, FunctionStream) and fn.device == "cpu" and fn.spec().dim == 4
    remote.device = "cuda"  # a callable that says where it encodes
    assert as_stream(remote, cfg, "cpu").device == "cuda"
    with pytest.raises(UsageError, match="not an encode stream: int"):
        as_stream(3, cfg, "cpu")
    with pytest.raises(NotImplementedError):
        EncodeStream().spec()


# -- the checks -------------------------------------------------------------------------------------------------

def _fn(*blocks):
    def stream(texts):
        yield from blocks
    return FunctionStream(stream, SimpleNamespace(embed_model="x"), "cpu")


def test_blocks_are_normalised_and_checked():
    texts = ["a", "b", "c"]
    got = list(checked_blocks(_fn(np.array([[3.0, 4.0]]), np.array([[0.0, 2.0], [0.0, 0.0]])), texts, None))
    assert np.allclose(np.concatenate(got), [[0.6, 0.8], [0.0, 1.0], [0.0, 0.0]])
    assert all(b.dtype == np.float32 for b in got)
    with pytest.raises(UsageError, match=r"a block of shape \(1, 3\) after 1 of 3 chunks \(dim 2\)"):
        list(checked_blocks(_fn(np.ones((1, 2)), np.ones((1, 3))), texts, None))  # the width changed
    with pytest.raises(UsageError, match=r"a block of shape \(1, 2\) after 0 of 3 chunks \(dim 4\)"):
        list(checked_blocks(_fn(np.ones((1, 2))), texts, 4))
    with pytest.raises(UsageError, match=r"a block of shape \(4, 2\) after 0 of 3"):
        list(checked_blocks(_fn(np.ones((4, 2))), texts, None))  # past the end
    with pytest.raises(UsageError, match=r"a block of shape \(0, 2\)"):
        list(checked_blocks(_fn(np.ones((0, 2))), texts, None))
    with pytest.raises(UsageError, match="the encoder returned 2 vectors for 3 chunks"):
        list(checked_blocks(_fn(np.ones((2, 2))), texts, None))
    assert list(checked_blocks(_fn(np.ones((2, 2))), [], None)) == []  # nothing asked: the stream is not run


# -- one pipeline for both stages ------------------------------------------------------------------------------

def test_the_topic_stage_encodes_through_the_stream_it_is_given():
    from chitragupta.enrich import topics

    fake = FakeEncoder()
    seen = []

    def remote(texts):
        seen.append(list(texts))
        for lo in range(0, len(texts), 2):
            yield fake.encode_block(texts[lo:lo + 2])

    remote.device = "cuda"
    s = FunctionStream(remote, SimpleNamespace(embed_model="x"), "cpu")
    s.spec = lambda: fake  # the model the stream encodes with
    body = " ".join(f"w{i}" for i in range(300))  # two chunks
    vecs, stats = topics.document_vectors(["T", "U"], [body, "short text"], s)
    spans = stream_module.document_chunks(body)
    assert seen == [[encode_input("T", body[a:b]) for a, b in spans] + [encode_input("U", "short text")]]
    assert stats == {"chunks": 3, "unique": 3, "encoded": 3, "reused": 0, "from_embed": 0}
    assert vecs.shape == (2, 4) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
