"""Cross-encoder rerank of embedding search's over-fetched chunks; off by default.

``[enrich].rerank_model`` empty is off; otherwise it is a local folder holding a sentence-transformers
``CrossEncoder`` (one relevance logit per (query, passage) pair). It is never downloaded. Rerank
reorders the over-fetched candidates *before* the per-source cap: it changes ordering, it cannot add a
chunk the vector search did not fetch, and the scores it returns replace the cosine similarities.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["Reranker", "load_reranker"]

log = logging.getLogger(__name__)


class Reranker:
    """A loaded cross-encoder: ``scores(query, texts)`` -> (len(texts),) float32, higher is better."""

    def __init__(self, model, path: str, device: str, batch_size: int = 32):
        self._model = model
        self.path = path
        self.device = device
        self.batch_size = batch_size

    def scores(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, dtype=np.float32)
        out = self._model.predict([(query, t) for t in texts], batch_size=self.batch_size,
                                  show_progress_bar=False, convert_to_numpy=True)
        out = np.asarray(out, dtype=np.float32)
        return out.reshape(len(texts), -1)[:, 0] if out.ndim > 1 else out

    def order(self, query: str, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(positions best first, their scores); ties keep the incoming order (a stable sort)."""
        s = self.scores(query, texts)
        order = np.argsort(-s, kind="stable")
        return order, s[order]


_LOADED: dict[tuple[str, str], Reranker] = {}


def load_reranker(cfg_enrich, device: str) -> Reranker | None:
    """The configured cross-encoder on ``device``, or None when ``[enrich].rerank_model`` is empty."""
    raw = str(getattr(cfg_enrich, "rerank_model", "") or "").strip()
    if not raw:
        return None
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise UsageError(f"[enrich].rerank_model = {raw!r} is not a folder; a cross-encoder is loaded from a local "
                         "folder only (leave it empty to turn rerank off)")
    key = (str(folder.resolve()), device)
    if key in _LOADED:
        return _LOADED[key]
    from chitragupta.enrich.embed import offline_env

    offline_env()
    st = require("sentence_transformers", "enrich", "cross-encoder rerank")
    try:
        model = st.CrossEncoder(key[0], device=device, local_files_only=True)
    except Exception as err:
        raise UsageError(f"[enrich].rerank_model = {raw!r}: not a loadable cross-encoder folder "
                         f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from err
    log.info("rerank model %s loaded on %s", key[0], device)
    r = Reranker(model, key[0], device, int(getattr(cfg_enrich, "embed_batch_size", 32)))
    _LOADED[key] = r
    return r
