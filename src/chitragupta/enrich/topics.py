"""The bertopic stage: one vector per document, UMAP then HDBSCAN through BERTopic, ``content/topics.json``.

Nothing in the engine reads ``topics.json``; it is written for a person deciding what a survey should
cover. Clustering is whole-corpus by nature (one new document can move every assignment), so the stage
re-fits the whole corpus on every run. Only the encoding is cached.

The pipeline, for every ledger row with text:

1. The document is ``chitragupta.enrich.chunking.document_text`` (the text the document index reads: the
   reference cut, the appendix rule and the hyphen join applied), else its ledger abstract, as the embed
   stage reads it; a row with neither is skipped and named.
2. It is cut into 200-word chunks overlapping by 40 words and every chunk encoded through the embed
   stage's pipeline (``chitragupta.enrich.stream``: ``document_chunks``, ``encode_input`` -- the title on
   a line above the chunk --, an ``EncodeStream``, L2-normalised blocks; ``--ray`` reaches it as it
   reaches the embed stage), and the document's vector is the normalised mean of its chunk vectors: the
   whole document counts, not its first 256 word pieces.
3. UMAP (cosine, ``min_dist`` 0) to ``[enrich].umap_n_components`` dimensions, then HDBSCAN
   (``min_cluster_size`` = ``[enrich].min_topic_size``, euclidean, ``eom``), through BERTopic, which
   names each cluster by c-TF-IDF over its documents' words (title and text, English stop words removed).

Decided before anything is encoded or fitted: with fewer than ``2 * min_topic_size`` documents no topic
is possible (HDBSCAN makes a cluster only where a group splits into two parts of at least
``min_cluster_size``, and never calls the whole corpus one cluster), so every document is written to
topic -1 at once, with ``backend`` "none (no fit: no topic possible)" and the reason in
``params.fit_skipped`` (``no_topic_possible``). The encoder is loaded only when a chunk is in neither
the cache nor the embed stage's store, when the model's folder says its dimension and recipe
(``chitragupta.enrich.encoders.model_spec``).

Small corpora: all documents in topic -1 is a correct answer, not an error: HDBSCAN never makes a cluster
smaller than ``min_topic_size`` and never calls the whole corpus one cluster. UMAP's ``n_neighbors`` is
clamped to ``n_docs - 1`` and its initialisation is random when spectral cannot work
(``n_components >= n_docs - 1``); with two documents UMAP cannot run at all (it needs 2 <= n_neighbors <
n_docs) and HDBSCAN sees the document vectors directly. What actually ran is recorded in ``params``.

``content/topics.json`` (schema 1), written atomically::

    {
      "schema": 1,
      "created": "2026-12-02T16:30:00Z",          # UTC; the only field that differs between identical runs
      "model": "sentence-transformers/all-MiniLM-L6-v2",   # the encoder's name
      "backend": "umap-learn+hdbscan (cpu)",       # or "cuml (cuda)": what ran
      "fallback": null,                            # or why the asked-for backend did not run (it warned)
      "n_docs": 50,                                # documents clustered
      "n_topics": 3,                               # topics other than -1
      "n_outliers": 7,                             # documents in topic -1
      "params": {
        "min_topic_size": 10, "seed": 42, "top_n_words": 10,
        "umap": {"n_neighbors": 15, "n_neighbors_requested": 15, "n_components": 5, "min_dist": 0.0,
                 "metric": "cosine", "init": "spectral", "random_state": 42},   # null when UMAP could not run
        "umap_skipped": null,                      # or why
        "hdbscan": {"min_cluster_size": 10, "min_samples": 10, "metric": "euclidean",
                    "cluster_selection_method": "eom", "allow_single_cluster": false},
        "vectorizer": {"stop_words": "english", "token_pattern": "(?u)\\\\b\\\\w\\\\w+\\\\b", "ngram_range": [1, 1]},
        "dim": 384, "document": "document_text, else the ledger abstract",
        "chunking": {"words": 200, "overlap": 40}, "chunk_input": "title + newline + chunk",
        "doc_vector": "normalised mean of chunk vectors", "ctfidf_text": "title + newline + document"
      },
      "topics": [                                  # ascending id; -1 (the outliers) first when present
        {"id": -1, "size": 7, "words": ["...", ...], "scores": [0.031, ...], "examples": []},
        {"id": 0, "size": 20, "words": ["soil", "microbe", ...], "scores": [...],
         "examples": ["key1", "key2", "key3"]}     # up to 3 citekeys nearest the topic's mean vector
      ],
      "assignments": {"key1": 0, "key2": -1, ...}, # every clustered citekey -> topic id
      "map": {"method": "umap-learn+hdbscan (cpu): UMAP of the document vectors to 2-D", "umap": {...},
              "coords": {"key1": [3.1416, -0.5], ...}},   # every clustered citekey -> its point on a 2-D map
      "skipped": {"key9": "no text and no abstract (status no-file)"}   # not clustered, and why
    }

``map`` (added in place, schema still 1: a reader that does not know it ignores it; absent from a file
written before, or when no fit ran or UMAP could not run): the documents' points for ``topics --html``, a
second UMAP of the same document vectors to two dimensions (cosine, the same neighbours and seed,
``min_dist`` 0.1 so points do not pile up), on the backend that clustered them. It costs a second UMAP fit
(the fit time reported includes it).

Topic ids are BERTopic's: 0 is the largest topic. ``words``/``scores`` are c-TF-IDF, rounded to 6 places.

The encoding cache, ``content/topic_embed_cache/<model-slug>/``: ``keys.json`` (schema, model name,
dimension, the vectors file's name, and one sha256 of chunk text per row) and ``vectors-<digest>.npy``
(float32, ``(len(keys), dim)``, read with ``allow_pickle=False``). Both are written atomically, the vectors
file first under a new name, so ``keys.json`` switches generations in one rename. It holds the current
corpus's chunks only. A cache that does not read back, or that belongs to another model or dimension, is
rebuilt with a note. On the CPU the same input gives the same ``topics.json`` apart from ``created``.

The caller (``chitragupta.enrich.run``) holds the workspace lock.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from chitragupta.files import load_npy
from chitragupta.errors import CorpusError, UsageError
from chitragupta.engine.library.workspace import Workspace, atomic_write_bytes, atomic_write_text, safe_name
from chitragupta.extras import require
from chitragupta.enrich.device import cuml_available, cuml_status, resolve_device
from chitragupta.enrich.stream import (CHUNK_OVERLAP, CHUNK_WORDS, EncodeStream, as_stream, checked_blocks,
                                       chunker_for, document_chunks, encode_input, recipe)

__all__ = ["TopicParams", "fit_topics", "run_stage", "document_vectors", "EmbedCache", "no_topic_possible",
           "topic_labels", "TOPICS_NAME", "CACHE_DIR", "SCHEMA_VERSION", "CHUNK_WORDS", "CHUNK_OVERLAP"]

log = logging.getLogger(__name__)
say = logging.getLogger("chitragupta.progress")  # lines while the fit runs (the CLI prints them on stderr)
TICK_S = 15.0  # a fit still running says so this often


class _Forward(logging.Handler):
    """BERTopic's own step lines ("Dimensionality - Fitting ...", "Cluster - ...") as ``bertopic:`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        say.info("bertopic: %s", record.getMessage().replace(" \u2713", "").strip())


@contextmanager
def _fit_lines(n: int, backend: str):
    """While a fit runs: a line first, BERTopic's steps as they start and end, and every ``TICK_S`` seconds
    how long it has run (UMAP has no progress of its own, and umap-learn compiles its numba code on a first
    run: a minute or more on a small machine)."""
    say.info("bertopic: fitting %d documents with %s: UMAP, then HDBSCAN, then c-TF-IDF names (the first run "
             "also compiles umap-learn's numba code)", n, backend)
    bt = logging.getLogger("BERTopic")  # (set to INFO once the model is made: BERTopic sets it when made)
    saved = bt.level, bt.handlers[:]
    bt.handlers = [_Forward()]
    done = threading.Event()
    t0 = time.monotonic()

    def tick() -> None:
        while not done.wait(TICK_S):
            say.info("bertopic: still fitting, %.0f s so far", time.monotonic() - t0)

    ticker = threading.Thread(target=tick, name="chitragupta-fit-ticker", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bt.setLevel(saved[0])
        bt.handlers = saved[1]

SCHEMA_VERSION = 1
CACHE_SCHEMA = 1
TOPICS_NAME = "topics.json"
CACHE_DIR = "topic_embed_cache"
# Chunks encoded between cache saves, so an interrupted run keeps most of its work.
ENCODE_BLOCK = 2048
EXAMPLES_PER_TOPIC = 3

Progress = Callable[[int, int], None]


# -- parameters ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicParams:
    """The topic model's knobs (``[enrich]`` in the config); validated on construction."""

    min_topic_size: int = 10
    n_neighbors: int = 15
    n_components: int = 5
    seed: int = 42
    top_n_words: int = 10

    def __post_init__(self):
        for name, low in (("min_topic_size", 2), ("n_neighbors", 2), ("n_components", 1), ("seed", 0),
                          ("top_n_words", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UsageError(f"topic model {name} must be an integer >= {low}, got {value!r}")

    @classmethod
    def from_config(cls, enrich_cfg) -> "TopicParams":
        """From ``ws.config.enrich`` (``min_topic_size``, ``umap_n_neighbors``, ``umap_n_components``, ``seed``)."""
        return cls(min_topic_size=enrich_cfg.min_topic_size, n_neighbors=enrich_cfg.umap_n_neighbors,
                   n_components=enrich_cfg.umap_n_components, seed=enrich_cfg.seed)


# -- backends: one builder per name, the same signature and result --------------------------------------

def _umap_learn_models(umap_kw: dict | None, hdbscan_kw: dict):
    umap = require("umap", "enrich", "the topic model (UMAP)")
    hdbscan = require("hdbscan", "enrich", "the topic model (HDBSCAN)")
    # random_state forces umap-learn onto one thread; saying n_jobs=1 keeps it from warning about it.
    reducer = umap.UMAP(**umap_kw, n_jobs=1) if umap_kw is not None else None
    return reducer, hdbscan.HDBSCAN(**hdbscan_kw, prediction_data=False)


def _cuml_models(umap_kw: dict | None, hdbscan_kw: dict):
    from cuml.cluster import HDBSCAN
    from cuml.manifold import UMAP

    reducer = UMAP(**umap_kw) if umap_kw is not None else None
    return reducer, HDBSCAN(**hdbscan_kw, prediction_data=False)


BACKENDS: dict[str, Callable] = {"umap-learn+hdbscan": _umap_learn_models, "cuml": _cuml_models}


def choose_backend(device: str) -> tuple[str, str, str | None]:
    """``(backend name, label for topics.json, fallback reason or None)`` for a resolved device.

    cuML's UMAP gives different numbers from umap-learn's, so falling back from it changes the topics:
    it warns and the reason is recorded.
    """
    if device not in ("cpu", "cuda"):
        raise UsageError(f"topic model device must be 'cpu' or 'cuda' (resolved), got {device!r}")
    if device == "cuda":
        if cuml_available():
            return "cuml", "cuml (cuda)", None
        reason = (f"device is cuda but cuML cannot be used ({cuml_status() or 'it does not import'}); UMAP and "
                  "HDBSCAN ran with umap-learn+hdbscan on the CPU (different numerics from cuML)")
        log.warning("bertopic: %s", reason)
        return "umap-learn+hdbscan", "umap-learn+hdbscan (cpu)", reason
    return "umap-learn+hdbscan", "umap-learn+hdbscan (cpu)", None


# -- the fit ------------------------------------------------------------------------------------------

_DEFAULT_VECTORIZER = {"stop_words": "english", "token_pattern": r"(?u)\b\w\w+\b", "ngram_range": (1, 1)}
# When the texts hold no word of two letters outside the stop list: any non-space run counts.
_PERMISSIVE_VECTORIZER = {"stop_words": None, "token_pattern": r"(?u)\S+", "ngram_range": (1, 1)}


def _vectorizer_settings(docs: Sequence[str]) -> tuple[dict, dict]:
    """CountVectorizer settings for c-TF-IDF (and their JSON form): English stop words removed, unless
    that leaves no word at all, when every non-space run counts (BERTopic would fail on an empty
    vocabulary)."""
    text = require("sklearn.feature_extraction.text", "enrich", "the topic model (c-TF-IDF)")
    for kw in (_DEFAULT_VECTORIZER, _PERMISSIVE_VECTORIZER):
        analyze = text.CountVectorizer(**kw).build_analyzer()
        if any(analyze(d) for d in docs):
            return kw, {**kw, "ngram_range": list(kw["ngram_range"])}
    raise UsageError("the topic model's documents contain no words at all")


def fit_topics(doc_vectors: np.ndarray, docs: list[str], citekeys: list[str], params: TopicParams,
               device: str = "cpu") -> dict:
    """Cluster documents with BERTopic (UMAP then HDBSCAN) and name the clusters by c-TF-IDF.

    ``doc_vectors``: float, ``(n_docs, dim)``, one (normalised) vector per document; ``docs``: the texts
    c-TF-IDF reads; ``citekeys``: unique, one per row. ``device`` is a resolved device (``"cpu"`` or
    ``"cuda"``). Returns the ``topics.json`` fields ``backend, fallback, n_docs, n_topics, n_outliers,
    params, topics, assignments``, and ``map`` when UMAP ran (see the module docstring). At least two
    documents, else UsageError.
    """
    X = np.asarray(doc_vectors, dtype=np.float32)
    if X.ndim != 2:
        raise UsageError(f"doc_vectors must be 2-D (n_docs, dim), got shape {X.shape}")
    n = X.shape[0]
    if n < 2:
        raise UsageError(f"the topic model needs at least 2 documents with text, got {n}")
    if len(docs) != n or len(citekeys) != n:
        raise UsageError(f"doc_vectors has {n} rows but {len(docs)} docs and {len(citekeys)} citekeys")
    if len(set(citekeys)) != n:
        raise UsageError("citekeys passed to the topic model must be unique")
    if not np.isfinite(X).all():
        raise UsageError("doc_vectors contain NaN or infinite values")
    if not isinstance(params, TopicParams):
        raise UsageError(f"params must be a TopicParams, got {type(params).__name__}")
    say.info("bertopic: loading BERTopic, UMAP and HDBSCAN")
    bertopic = require("bertopic", "enrich", "the topic model")

    name, label, fallback = choose_backend(device)
    # UMAP needs 2 <= n_neighbors < n_docs, so it cannot run on two documents.
    n_neighbors = min(params.n_neighbors, n - 1)
    if n_neighbors >= 2:
        umap_kw = {"n_neighbors": n_neighbors, "n_components": params.n_components, "min_dist": 0.0,
                   "metric": "cosine",
                   # Spectral init solves for n_components + 1 eigenvectors of an n_docs graph.
                   "init": "spectral" if params.n_components < n - 1 else "random",
                   "random_state": params.seed}
        umap_skipped = None
    else:
        umap_kw = None
        umap_skipped = (f"{n} documents: UMAP needs 2 <= n_neighbors < n_docs; HDBSCAN clustered the "
                        "document vectors directly")
    hdbscan_kw = {"min_cluster_size": params.min_topic_size, "min_samples": params.min_topic_size,
                  "metric": "euclidean", "cluster_selection_method": "eom", "allow_single_cluster": False}
    vectorizer_kw, vec_params = _vectorizer_settings(docs)

    def fit(backend: str):
        reducer, clusterer = BACKENDS[backend](umap_kw, hdbscan_kw)
        if reducer is None:
            reducer = require("bertopic.dimensionality", "enrich").BaseDimensionalityReduction()
        text = require("sklearn.feature_extraction.text", "enrich", "the topic model (c-TF-IDF)")
        model = bertopic.BERTopic(embedding_model=None, umap_model=reducer, hdbscan_model=clusterer,
                                  vectorizer_model=text.CountVectorizer(**vectorizer_kw),
                                  min_topic_size=params.min_topic_size, top_n_words=params.top_n_words,
                                  calculate_probabilities=False, verbose=False)
        logging.getLogger("BERTopic").setLevel(logging.INFO)  # (its steps, forwarded by ``_fit_lines``)
        found, _ = model.fit_transform(list(docs), embeddings=X)
        return model, found

    with _fit_lines(n, label):
        if name == "cuml":
            try:
                model, labels = fit(name)
            except Exception as err:  # cuML's limits on tiny inputs are not umap-learn's; never lose the run
                name, label = "umap-learn+hdbscan", "umap-learn+hdbscan (cpu)"
                first = str(err).splitlines()[0][:200] if str(err) else ""
                fallback = (f"cuML failed on this input ({type(err).__name__}: {first}); UMAP and HDBSCAN ran "
                            "with umap-learn+hdbscan on the CPU (different numerics from cuML)")
                log.warning("bertopic: %s", fallback)
                model, labels = fit(name)
        else:
            model, labels = fit(name)
    labels = [int(t) for t in labels]
    coords = _map(X, citekeys, umap_kw, hdbscan_kw, name, label) if umap_kw is not None else None

    sizes: dict[int, int] = {}
    for t in labels:
        sizes[t] = sizes.get(t, 0) + 1
    topics = []
    for tid in sorted(sizes):
        words = [(w, float(s)) for w, s in (model.get_topic(tid) or []) if w]
        topics.append({"id": tid, "size": sizes[tid], "words": [w for w, _ in words],
                       "scores": [round(s, 6) for _, s in words],
                       "examples": [] if tid == -1 else _examples(X, labels, citekeys, tid)})
    n_outliers = sizes.get(-1, 0)
    return {
        "backend": label,
        "fallback": fallback,
        "n_docs": n,
        "n_topics": sum(1 for t in sizes if t != -1),
        "n_outliers": n_outliers,
        "params": {
            "min_topic_size": params.min_topic_size, "seed": params.seed, "top_n_words": params.top_n_words,
            "umap": None if umap_kw is None else {**umap_kw, "n_neighbors_requested": params.n_neighbors},
            "umap_skipped": umap_skipped,
            "hdbscan": hdbscan_kw,
            "vectorizer": vec_params,
            "dim": int(X.shape[1]),
        },
        "topics": topics,
        "assignments": dict(zip(citekeys, labels)),
        **({"map": coords} if coords is not None else {}),
    }


def _map(X: np.ndarray, citekeys: list[str], umap_kw: dict, hdbscan_kw: dict, name: str, label: str):
    """topics.json's ``map``: the documents' 2-D UMAP coordinates; None (with a warning) when that UMAP
    fails, so the topics are never lost for a map."""
    flat = {**umap_kw, "n_components": 2, "min_dist": 0.1, "init": "spectral" if len(citekeys) > 3 else "random"}
    try:
        xy = np.asarray(BACKENDS[name](flat, hdbscan_kw)[0].fit_transform(X), dtype=np.float64)
    except Exception as err:  # noqa: BLE001 -- cuML's limits on small inputs are not umap-learn's
        log.warning("bertopic: no 2-D map (%s: %s); the topics are kept", type(err).__name__, err)
        return None
    return {"method": f"{label}: UMAP of the document vectors to 2-D", "umap": flat,
            "coords": dict(zip(citekeys, xy.round(4).tolist()))}


def topic_labels(topics: list[dict], words: int = 4) -> dict[int, str]:
    """``{topic id: label}`` for ``topics.json``'s topics: a topic's first ``words`` c-TF-IDF words that few
    other topics share (a word among the top words of more than a quarter of the topics, and of at least
    three, names none of them), then its shared words when too few remain; topic -1 is the outliers."""
    real = [t for t in topics if t["id"] != -1]
    seen: dict[str, int] = {}
    for t in real:
        for w in set(t["words"]):
            seen[w] = seen.get(w, 0) + 1
    shared = {w for w, c in seen.items() if c > max(2, len(real) // 4)}
    return {t["id"]: "outliers (no topic)" if t["id"] == -1 else
            ", ".join(([w for w in t["words"] if w not in shared] + [w for w in t["words"] if w in shared])[:words])
            or f"topic {t['id']}" for t in topics}


def _examples(X: np.ndarray, labels: list[int], citekeys: list[str], tid: int) -> list[str]:
    """Up to EXAMPLES_PER_TOPIC citekeys nearest (cosine) the topic's mean vector; ties by citekey."""
    idx = [i for i, t in enumerate(labels) if t == tid]
    members = X[idx].astype(np.float64)
    centre = members.mean(axis=0)
    centre /= np.linalg.norm(centre) or 1.0
    norms = np.linalg.norm(members, axis=1)
    sims = members @ centre / np.where(norms > 0, norms, 1.0)
    order = sorted(range(len(idx)), key=lambda j: (-round(float(sims[j]), 9), citekeys[idx[j]]))
    return [citekeys[idx[j]] for j in order[:EXAMPLES_PER_TOPIC]]


# -- the encoding cache -------------------------------------------------------------------------------

def chunk_key(text: str) -> str:
    """The cache key of one chunk: sha256 of its UTF-8 text (the model is the cache folder's)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbedCache:
    """Chunk vectors for one model under ``content/topic_embed_cache/<slug>/`` (see the module docstring)."""

    def __init__(self, ws: Workspace, model_name: str, slug: str, dim: int):
        self.folder = ws.inside_content(ws.content / CACHE_DIR / safe_name(slug))
        self.model_name, self.dim = model_name, int(dim)
        self.notes: list[str] = []

    @property
    def keys_path(self) -> Path:
        return self.folder / "keys.json"

    def load(self) -> dict[str, np.ndarray]:
        """``{chunk key: float32 (dim,)}``; empty (with a note) when absent-but-broken or another model's."""
        if not self.keys_path.exists():
            return {}
        try:
            meta = json.loads(self.keys_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or meta.get("schema") != CACHE_SCHEMA:
                raise ValueError(f"schema {meta.get('schema') if isinstance(meta, dict) else None!r}")
            if meta.get("model") != self.model_name or meta.get("dim") != self.dim:
                raise ValueError(f"written for {meta.get('model')!r} (dim {meta.get('dim')}), "
                                 f"not {self.model_name!r} (dim {self.dim})")
            keys = meta.get("keys")
            vec_name = meta.get("vectors")
            if not isinstance(keys, list) or not isinstance(vec_name, str) or "/" in vec_name:
                raise ValueError("keys.json lacks its keys or vectors file")
            vectors = load_npy(self.folder / vec_name)
            if vectors.dtype != np.float32 or vectors.shape != (len(keys), self.dim):
                raise ValueError(f"vectors are {vectors.dtype} {vectors.shape}, keys say ({len(keys)}, {self.dim})")
            if not np.isfinite(vectors).all():
                raise ValueError("vectors hold NaN or infinite values")
        except (OSError, ValueError, UnicodeDecodeError) as err:
            self.notes.append(f"topic encoding cache {self.folder.name} is unreadable ({err}); rebuilt")
            return {}
        return {k: vectors[i] for i, k in enumerate(keys)}

    def save(self, entries: dict[str, np.ndarray]) -> None:
        """Write ``entries`` (key order kept) as a new generation, then drop older vectors files."""
        keys = list(entries)
        vectors = (np.stack([entries[k] for k in keys]).astype(np.float32, copy=False) if keys
                   else np.zeros((0, self.dim), dtype=np.float32))
        buf = io.BytesIO()
        np.save(buf, vectors, allow_pickle=False)
        data = buf.getvalue()
        vec_name = f"vectors-{hashlib.sha256(data).hexdigest()[:16]}.npy"
        atomic_write_bytes(self.folder / vec_name, data)
        meta = {"schema": CACHE_SCHEMA, "model": self.model_name, "dim": self.dim, "vectors": vec_name,
                "count": len(keys), "keys": keys}
        atomic_write_text(self.keys_path, json.dumps(meta, separators=(",", ":")))
        for old in self.folder.glob("vectors-*.npy"):
            if old.name != vec_name:
                try:
                    old.unlink()
                except OSError:
                    pass


# -- the stage ----------------------------------------------------------------------------------------

def _collect(ws: Workspace, rows) -> tuple[list[str], list[str], list[str], dict[str, str]]:
    """``(citekeys, titles, bodies, skipped)`` in citekey order.

    A body is ``document_text`` (the text the document index reads), else the ledger abstract, as
    the embed stage reads it; a row with neither is skipped with its status as the reason.
    """
    from chitragupta.enrich.chunking import document_text

    keys, titles, bodies, skipped = [], [], [], {}
    for row in sorted(rows, key=lambda r: r.citekey):
        body = document_text(ws, row.citekey, row.parsed_path)
        if not body.strip():
            body = (getattr(row, "abstract", None) or "").strip()
        if not body.strip():
            why = "no text and no abstract" + (f" (status {row.status}" + (f": {row.reason})" if row.reason
                                                                          else ")")
                                               if row.status != "parsed" else "")
            skipped[row.citekey] = why
            continue
        keys.append(row.citekey)
        titles.append(" ".join((row.title or "").split()))
        bodies.append(body)
    return keys, titles, bodies, skipped


def document_vectors(titles: list[str], bodies: list[str], encoder, cache: EmbedCache | None = None,
                     progress: Progress | None = None,
                     known: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, dict]:
    """One float32 ``(len(bodies), dim)`` row per document: the normalised mean of its chunk vectors.

    A body is cut and each chunk encoded as the embed stage does (``chitragupta.enrich.stream``:
    ``document_chunks``, ``encode_input(title, chunk)``). ``encoder``: an ``EncodeStream``, or an encoder
    (``.encode``, ``.dim``) run as a local stream.

    Chunks already in ``cache`` are reused, then chunks in ``known`` (the embed stage's vectors of the
    same model, keyed the same way); the rest go through the stream once, the cache saved every
    ``ENCODE_BLOCK`` chunks and at the end, with ``progress(done, total)`` over the chunks to encode.
    Returns the vectors and counts ``{"chunks", "unique", "encoded", "reused", "from_embed"}``.
    """
    if len(titles) != len(bodies):
        raise UsageError(f"{len(titles)} titles for {len(bodies)} documents")
    stream = as_stream(encoder, None, "cpu")
    dim = getattr(encoder, "dim", None)
    dim = int(dim) if dim is not None else stream.spec().dim
    doc_keys: list[list[str]] = []
    chunk_text: dict[str, str] = {}
    chunker = chunker_for(stream.spec())  # the embed stage's cut, so its vectors are reused
    for title, body in zip(titles, bodies):
        ks = []
        for start, end in document_chunks(body, title, chunker):
            piece = encode_input(title, body[start:end])
            k = chunk_key(piece)
            chunk_text.setdefault(k, piece)
            ks.append(k)
        doc_keys.append(ks)
    cached = cache.load() if cache is not None else {}
    have = {k: cached[k] for k in chunk_text if k in cached}
    n_cached = len(have)
    if known:
        have.update((k, np.asarray(known[k], dtype=np.float32)) for k in chunk_text
                    if k not in have and k in known)
    missing = [k for k in chunk_text if k not in have]
    stats = {"chunks": sum(map(len, doc_keys)), "unique": len(chunk_text), "encoded": len(missing),
             "reused": n_cached, "from_embed": len(have) - n_cached}
    total = len(missing)
    if progress:
        progress(0, total)
    changed = len(cached) != n_cached or len(have) != n_cached
    if cache is not None and not missing and changed:
        cache.save(have)  # keep the cache to the current corpus (and what the embed stage supplied)
    done = saved = 0
    for block in checked_blocks(stream, [chunk_text[k] for k in missing], dim):
        have.update(zip(missing[done:done + len(block)], block))
        done += len(block)
        if cache is not None and (done - saved >= ENCODE_BLOCK or done == total):
            cache.save({k: have[k] for k in chunk_text if k in have})
            saved = done
        if progress:
            progress(done, total)
    out = np.zeros((len(bodies), dim), dtype=np.float32)
    for i, ks in enumerate(doc_keys):
        mean = np.mean([have[k] for k in ks], axis=0, dtype=np.float64)
        norm = float(np.linalg.norm(mean))
        out[i] = mean / norm if norm > 0 else mean
    return out, stats


def embed_store_vectors(ws: Workspace, spec) -> dict[str, np.ndarray]:
    """The embed stage's chunk vectors for ``spec``'s model, keyed like the cache (``chunk_key`` of the
    encoded string), so ``--stages embed,bertopic`` encodes each chunk once. Empty when there is no
    store for this model and recipe, or it does not read back (the embed stage reports that itself)."""
    from chitragupta.enrich.store import StoreCorrupt, load_store, store_folder

    try:
        want = recipe(spec)
    except AttributeError:  # an encoder that is not the embed stage's has no recipe to match
        return {}
    try:
        store = load_store(ws.inside_content(store_folder(ws.content, spec.slug)), model=spec.model_name,
                           dim=spec.dim, recipe=want, with_index=False)
    except StoreCorrupt:
        return {}
    if store is None:
        return {}
    return {chunk_key(encode_input(store.titles[int(store.chunk_doc[r])], store.chunk_text(r))): store.vectors[r]
            for r in range(store.count)}


def _stream_spec(stream: EncodeStream):
    """The model as the stream knows it, with its dimension (loaded when the folder does not say it)."""
    spec = stream.spec()
    return spec if spec.dim is not None else stream.model()


def _check_loaded(stream: EncodeStream, spec) -> None:
    """Before encoding: the model that runs must be the one its folder described (dim, max_seq_length)."""
    model = stream.model()
    if model is spec:
        return
    if model.dim != spec.dim or getattr(model, "max_seq_length", None) != getattr(spec, "max_seq_length", None):
        raise UsageError(f"[enrich].embed_model = {spec.model_name!r}: the loaded model gives dim {model.dim} "
                         f"and max_seq_length {model.max_seq_length}, its folder says {spec.dim} and "
                         f"{spec.max_seq_length}; remove content/{CACHE_DIR}/ and rerun")


class _CheckedStream(EncodeStream):
    """``stream``, with the model checked against ``spec`` on the first encoding (nothing loaded before)."""

    def __init__(self, stream: EncodeStream, spec):
        self._stream, self._spec = stream, spec

    def spec(self):
        return self._spec

    @property
    def device(self) -> str:
        return self._stream.device

    def __call__(self, texts):
        _check_loaded(self._stream, self._spec)
        return self._stream(texts)


def _stage_params(spec=None) -> dict:
    chunker = chunker_for(spec) if spec is not None else None
    return {"document": "document_text, else the ledger abstract",
            "chunking": chunker.rule if chunker is not None else {"words": CHUNK_WORDS, "overlap": CHUNK_OVERLAP},
            "chunk_input": "title + newline + chunk",
            "doc_vector": "normalised mean of chunk vectors",
            "ctfidf_text": "title + newline + document"}


def no_topic_possible(n_docs: int, params: TopicParams) -> str | None:
    """Why no topic can come out of ``n_docs`` documents, before any encoding or fitting; None when one
    can. HDBSCAN never calls the whole corpus one cluster (``allow_single_cluster`` is off), and it makes
    a cluster only where a group splits into two parts of at least ``min_cluster_size`` each, so fewer
    than ``2 * min_topic_size`` documents give topic -1 alone whatever their vectors."""
    if n_docs < 2 * params.min_topic_size:
        return (f"{n_docs} documents < 2 x min_topic_size = {2 * params.min_topic_size}: HDBSCAN makes a topic only "
                f"by splitting the corpus into groups of at least min_topic_size = {params.min_topic_size} each")
    return None


def _no_fit(keys: list[str], params: TopicParams, reason: str, dim) -> dict:
    """The ``topics.json`` fields when ``no_topic_possible``: every document in topic -1, nothing fitted."""
    return {"backend": "none (no fit: no topic possible)", "fallback": None, "n_docs": len(keys), "n_topics": 0,
            "n_outliers": len(keys),
            "params": {"min_topic_size": params.min_topic_size, "seed": params.seed,
                       "top_n_words": params.top_n_words, "umap": None, "umap_skipped": "no fit",
                       "hdbscan": {"min_cluster_size": params.min_topic_size, "min_samples": params.min_topic_size,
                                   "metric": "euclidean", "cluster_selection_method": "eom",
                                   "allow_single_cluster": False},
                       "vectorizer": None, "dim": dim, "fit_skipped": reason, **_stage_params()},
            "topics": [{"id": -1, "size": len(keys), "words": [], "scores": [], "examples": []}],
            "assignments": {k: -1 for k in keys}}


def run_stage(ws: Workspace, rows, *, device: str, progress: Progress | None = None, encoder=None,
              encode_stream=None) -> list[str]:
    """Fit topics over every row with text and write ``content/topics.json``; returns report lines.

    ``rows``: ledger rows (``.citekey``, ``.title``, ``.status``, ``.parsed_path``, ``.reason``).
    ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (resolved here): where the fit runs, and the local
    encoder's device. ``progress(done, total)`` counts chunks encoded. The chunks go through
    ``encode_stream`` (an ``EncodeStream``, e.g. a Ray cluster's) or ``encoder`` (``.model_name``,
    ``.slug``, ``.dim``, ``.encode``); default: ``[enrich]``'s model on ``device``, loaded only when a
    chunk is in neither the cache nor the embed store (when the model's folder says its dimension and
    recipe). Fewer than two documents with text is a CorpusError naming the count; fewer than
    ``2 * min_topic_size`` writes every document to topic -1 without encoding or fitting
    (``no_topic_possible``).
    """
    rows = list(rows)
    keys, titles, bodies, skipped = _collect(ws, rows)
    if len(keys) < 2:
        raise CorpusError(f"the topic model needs at least 2 documents with text; this corpus has {len(keys)} "
                          f"(of {len(rows)} sources)")
    params = TopicParams.from_config(ws.config.enrich)
    device = resolve_device(device)
    stream = as_stream(encoder if encoder is not None else encode_stream, ws.config.enrich, device)
    spec = _stream_spec(stream)
    path = ws.inside_content(ws.content / TOPICS_NAME)
    impossible = no_topic_possible(len(keys), params)
    if impossible is not None:
        out = {"schema": SCHEMA_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "model": spec.model_name, **_no_fit(keys, params, impossible, spec.dim), "skipped": skipped}
        out["params"].update(_stage_params(spec))
        atomic_write_text(path, json.dumps(out, ensure_ascii=False, indent=1) + "\n")
        lines = [f"bertopic: no topic possible, nothing encoded or fitted: {impossible}; every document is in "
                 f"topic -1; wrote {ws.relative(path)}"]
        if skipped:
            shown = ", ".join(f"{k} ({why})" for k, why in list(skipped.items())[:5])
            more = f", and {len(skipped) - 5} more" if len(skipped) > 5 else ""
            lines.append(f"bertopic: {len(skipped)} sources skipped: {shown}{more}")
        return lines
    cache = EmbedCache(ws, getattr(spec, "cache_identity", spec.model_name), spec.slug, spec.dim)

    t0 = time.perf_counter()
    vectors, stats = document_vectors(titles, bodies, _CheckedStream(stream, spec), cache, progress,
                                      known=embed_store_vectors(ws, spec))
    t_encode = time.perf_counter() - t0
    t0 = time.perf_counter()
    texts = [f"{t}\n{b}" if t else b for t, b in zip(titles, bodies)]  # what c-TF-IDF reads
    fitted = fit_topics(vectors, texts, keys, params, device)
    t_fit = time.perf_counter() - t0

    fitted["params"].update(_stage_params(spec))
    out = {"schema": SCHEMA_VERSION,
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "model": spec.model_name,
           **{k: fitted[k] for k in ("backend", "fallback", "n_docs", "n_topics", "n_outliers", "params",
                                     "topics", "assignments", "map") if k in fitted},
           "skipped": skipped}
    atomic_write_text(path, json.dumps(out, ensure_ascii=False, indent=1) + "\n")

    lines = [f"bertopic: {stats['unique']} distinct chunks of {len(keys)} documents: {stats['encoded']} encoded "
             f"with {spec.model_name} on {stream.device}, {stats['reused']} reused from "
             f"{ws.relative(cache.folder)}, {stats['from_embed']} taken from the embed stage's store "
             f"({t_encode:.1f} s)"]
    lines += [f"bertopic: {note}" for note in cache.notes]
    if skipped:
        shown = ", ".join(f"{k} ({why})" for k, why in list(skipped.items())[:5])
        more = f", and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        lines.append(f"bertopic: {len(skipped)} sources skipped: {shown}{more}")
    share = fitted["n_outliers"] / fitted["n_docs"]
    lines.append(f"bertopic: re-fitted all {fitted['n_docs']} documents with {fitted['backend']} ({t_fit:.1f} s): "
                 f"{fitted['n_topics']} topics, {fitted['n_outliers']} outliers ({share:.0%}); "
                 f"wrote {ws.relative(path)}")
    if fitted["fallback"]:
        lines.append(f"bertopic: fallback: {fitted['fallback']}")
    if fitted["n_topics"] == 0:
        lines.append(f"bertopic: every document is in topic -1: HDBSCAN found no group of at least "
                     f"min_topic_size = {params.min_topic_size} similar documents; with {fitted['n_docs']} "
                     "documents that is the answer (too few, or too diffuse, for topics of that size), not an error")
    if fitted["params"]["vectorizer"]["stop_words"] is None:
        lines.append("bertopic: no words outside the English stop list; topic words use every token")
    return lines
