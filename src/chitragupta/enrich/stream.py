"""The one encode pipeline of the enrichment layer: chunk texts in, blocks of vectors out.

    stream = LocalEncodeStream(ws.config.enrich, "cpu")      # or ray_encode.RayEncodeStream(cfg, "auto", device=...)
    spec = stream.spec()                                      # model name, slug, dim, max_seq_length, prefixes
    for block in checked_blocks(stream, texts, spec.dim):     # float32 (m_i, dim), rows L2-normalised,
        ...                                                   # consecutive, in input order
    stream.device                                             # where it encoded ("cpu", "cuda", "cuda, cpu")

Both stages that encode chunks -- the embed stage (``chitragupta.enrich.embed``) and the topic stage
(``chitragupta.enrich.topics``) -- cut a document the same way (``document_chunks``: the model's
``TokenChunker`` when its folder has a tokenizer, else ``chunk_spans`` with ``CHUNK_WORDS`` /
``CHUNK_OVERLAP``), encode the same string per chunk (``encode_input``: title + newline + chunk) and send
those strings through an ``EncodeStream``:

- ``LocalEncodeStream``: the sentence-transformers model on this machine, loaded on first need
  (``chitragupta.enrich.encoders.load_encoder``), one call per block of a few seconds
  (``adaptive_blocks``; within a block sentence-transformers sorts by length, so batches pad little);
- ``chitragupta.enrich.ray_encode.RayEncodeStream``: Ray Data actors on a cluster, each on the device
  asked for;
- ``FunctionStream``: any ``texts -> iterator of blocks`` callable (tests, another encoder).

A stream answers three questions: ``spec()`` -- the model as far as the store's identity needs it (read
from the model folder's JSON files when they say it, so a run with nothing to encode imports no torch;
else from the loaded model); ``model()`` -- the same facts from the encoder that will really run (loads
it where that is cheap to know: here); ``device`` -- the device that encoded (what the Ray actors
reported, not the driver's). ``recipe(spec)`` is what decides a chunk's vector besides its text: a store
or cache built under another recipe is not reused.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Sequence

import numpy as np

from chitragupta.enrich import encoders
from chitragupta.enrich.chunking import CHUNK_OVERLAP, CHUNK_WORDS, chunk_spans, token_chunker
from chitragupta.errors import UsageError

__all__ = ["EncodeStream", "LocalEncodeStream", "FunctionStream", "as_stream", "checked_blocks",
           "adaptive_blocks", "encode_input", "recipe", "document_chunks", "chunker_for", "CHUNK_WORDS",
           "CHUNK_OVERLAP",
           "BLOCK_SECONDS", "MAX_BLOCK_BATCHES"]

log = logging.getLogger(__name__)


BLOCK_SECONDS = 8.0  # the local stream aims at a block every few seconds (progress, commits, Ctrl-C)
MAX_BLOCK_BATCHES = 32


# -- what is encoded for a chunk ---------------------------------------------------------------------------

def chunker_for(spec):
    """The model's ``TokenChunker`` (``spec``: a ModelSpec, an Encoder, anything with ``model_name``,
    ``max_seq_length`` and ``passage_prefix``); None when its folder has no tokenizer or its window is
    unknown (then the word rule cuts)."""
    name = getattr(spec, "model_name", None)
    if not name or getattr(spec, "max_seq_length", None) is None:
        return None
    try:
        folder = encoders.resolve_model_source(str(name))
    except UsageError:
        return None
    return token_chunker(folder, spec.max_seq_length, getattr(spec, "passage_prefix", "") or "")


def document_chunks(text: str, title: str = "", chunker=None) -> list[tuple[int, int]]:
    """The chunk spans of a document, as both stages cut it: ``chunker.spans(text, title)`` (the model's
    window), else the word rule (``CHUNK_WORDS`` words, ``CHUNK_OVERLAP`` shared)."""
    if chunker is not None:
        return chunker.spans(text, title)
    return chunk_spans(text, CHUNK_WORDS, CHUNK_OVERLAP)


def encode_input(title: str, chunk: str) -> str:
    """The string encoded for one chunk: the document's title on a line above it (every chunk then says
    which paper it is from, as BEIR's title + text does for a whole document)."""
    title = " ".join(title.split())
    return f"{title}\n{chunk}" if title else chunk


def recipe(spec) -> dict:
    """What decides a chunk's vector besides the model (``spec``: a ModelSpec, an Encoder, anything with
    ``max_seq_length`` and ``passage_prefix``); a store built with another recipe is rebuilt."""
    chunker = chunker_for(spec)
    cut = {"chunks": chunker.rule} if chunker is not None else {"words": CHUNK_WORDS, "overlap": CHUNK_OVERLAP}
    out = {**cut, "input": "title + newline + chunk", "max_seq_length": spec.max_seq_length}
    if getattr(spec, "passage_prefix", ""):  # absent when empty: stores built before the prefix existed stay valid
        out["passage_prefix"] = spec.passage_prefix
    return out


# -- the streams ---------------------------------------------------------------------------------------------

class EncodeStream:
    """``stream(texts) -> iterator of float32 (m_i, dim) arrays``: the vectors of ``texts`` in input order,
    in consecutive blocks (sum of m_i == len(texts)); each text is the full encoder input (``encode_input``),
    the passage prefix not yet added (the encoder adds it). See the module's text for ``spec``, ``model``
    and ``device``."""

    def spec(self):
        raise NotImplementedError

    def model(self):
        return self.spec()

    @property
    def device(self) -> str:
        raise NotImplementedError

    def __call__(self, texts: Sequence[str]) -> Iterator[np.ndarray]:
        raise NotImplementedError


def adaptive_blocks(enc, texts: Sequence[str], *, block_seconds: float = BLOCK_SECONDS) -> Iterator[np.ndarray]:
    """``enc`` on ``texts``, one sentence-transformers call per block. A block is a whole number of
    batches, sized from the rate so far to take about ``block_seconds`` (one batch first, then at most
    twice the last, at most ``MAX_BLOCK_BATCHES``). ``enc.encode_block`` where it has one, else ``enc.encode``."""
    encode = getattr(enc, "encode_block", None) or enc.encode
    batch = max(1, int(getattr(enc, "batch_size", 32)))
    size, lo, n = batch, 0, len(texts)
    while lo < n:
        t0 = time.perf_counter()
        block = list(texts[lo:lo + size])
        out = encode(block)
        lo += len(block)
        yield out
        rate = len(block) / max(time.perf_counter() - t0, 1e-6)
        target = int(min(MAX_BLOCK_BATCHES, max(1, rate * block_seconds // batch)))
        size = batch * min(target, 2 * (size // batch))  # grows at most 2x a block


class LocalEncodeStream(EncodeStream):
    """The model on this machine: ``encoder`` when given, else ``[enrich]``'s model loaded on ``device`` (a
    resolved device) the first time it is needed -- to encode, or to know what the folder does not say."""

    def __init__(self, cfg_enrich=None, device: str = "cpu", *, encoder=None, block_seconds: float = BLOCK_SECONDS):
        if encoder is None and cfg_enrich is None:
            raise UsageError("a local encode stream needs [enrich] settings or an encoder")
        self._cfg, self._device, self._encoder = cfg_enrich, device, encoder
        self.block_seconds = block_seconds
        self._spec = None

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def model(self):
        """The loaded encoder (loads it once)."""
        if self._encoder is None:
            self._encoder = encoders.load_encoder(self._cfg, self._device)
        return self._encoder

    def spec(self):
        """The encoder when loaded; else the model folder's facts when they say the recipe; else it loads."""
        if self._encoder is not None:
            return self._encoder
        if self._spec is None:
            self._spec = encoders.model_spec(self._cfg)
        return self._spec if self._spec.complete else self.model()

    @property
    def device(self) -> str:
        return str(getattr(self._encoder, "device", None) or self._device)

    def __call__(self, texts: Sequence[str]) -> Iterator[np.ndarray]:
        if len(texts) == 0:
            return iter(())
        return adaptive_blocks(self.model(), texts, block_seconds=self.block_seconds)


class FunctionStream(EncodeStream):
    """A plain ``texts -> iterator of blocks`` callable as a stream; its model is ``[enrich]``'s (the
    folder's facts, loaded on ``device`` when they do not say the recipe); its device is the callable's
    ``device`` attribute, else ``device``."""

    def __init__(self, fn: Callable[[Sequence[str]], Iterator[np.ndarray]], cfg_enrich, device: str = "cpu"):
        self._fn, self._local = fn, LocalEncodeStream(cfg_enrich, device)
        self._device = device

    def spec(self):
        return self._local.spec()

    @property
    def device(self) -> str:
        return str(getattr(self._fn, "device", None) or self._device)

    def __call__(self, texts: Sequence[str]) -> Iterator[np.ndarray]:
        return iter(self._fn(texts))


def as_stream(source, cfg_enrich, device: str) -> EncodeStream:
    """``source`` as an ``EncodeStream``: None -> the local model on ``device``; a stream as it is; an
    encoder (``.encode_block`` or ``.encode``) -> a local stream of it; any other callable -> a ``FunctionStream``."""
    if source is None:
        return LocalEncodeStream(cfg_enrich, device)
    if isinstance(source, EncodeStream):
        return source
    if hasattr(source, "encode_block") or hasattr(source, "encode"):
        return LocalEncodeStream(cfg_enrich, device, encoder=source)
    if callable(source):
        return FunctionStream(source, cfg_enrich, device)
    raise UsageError(f"not an encode stream: {type(source).__name__}")


def checked_blocks(stream: EncodeStream, texts: Sequence[str], dim: int | None) -> Iterator[np.ndarray]:
    """``stream(texts)`` with every block checked (2-D, at least one row, not past the end, ``dim`` wide
    when known: else the first block's width) and its rows L2-normalised; UsageError when a block is
    malformed or the stream ends short."""
    total, done = len(texts), 0
    if total == 0:
        return
    for block in stream(texts):
        block = np.asarray(block, dtype=np.float32)
        if block.ndim != 2 or block.shape[0] < 1 or done + block.shape[0] > total \
                or (dim is not None and block.shape[1] != dim):
            raise UsageError(f"the encoder returned a block of shape {block.shape} after {done} of {total} "
                             f"chunks (dim {dim})")
        dim = int(block.shape[1])
        done += len(block)
        yield encoders.normalize(np.array(block, dtype=np.float32))
    if done != total:
        raise UsageError(f"the encoder returned {done} vectors for {total} chunks")
