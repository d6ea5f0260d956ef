"""Peer libraries configured like us, for side-by-side quality and speed: bm25s (numba backend).

Same tokens: bm25s's Tokenizer with our splitter (lowercase, ``[a-z0-9]{2,}`` runs) and our 19 stopwords;
same k1 and b. bm25s's "lucene" scorer drops BM25's constant (k1 + 1) factor, which scales every score
alike and leaves rankings unchanged.
"""

from __future__ import annotations

from chitragupta.engine.text.tokenize import MIN_TOKEN_CHARS, STOPWORDS

SPLITTER = r"[a-z0-9]{%d,}" % MIN_TOKEN_CHARS


class Bm25s:
    """bm25s 0.3 wrapped: ``build(texts)``, ``tokenize(queries)``, ``retrieve(ids, k, threads)``."""

    name = "bm25s"

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        import bm25s
        from bm25s.tokenization import Tokenizer

        self.bm25s = bm25s
        self.version = bm25s.__version__
        self.tokenizer = Tokenizer(lower=True, splitter=SPLITTER, stopwords=sorted(STOPWORDS))
        self.model = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numba")

    def build(self, texts: list[str]) -> None:
        ids = self.tokenizer.tokenize(texts, return_as="ids", show_progress=False)
        self.model.index(ids, show_progress=False)

    def tokenize(self, queries: list[str], distinct: bool = True):
        """Token ids per query; ``distinct`` keeps each term once (bm25s would otherwise count a repeated
        query term again, where the spec counts it once). The speed bench passes False: bm25s's own
        path, not slowed by our de-duplication."""
        ids = self.tokenizer.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
        return [list(dict.fromkeys(q)) for q in ids] if distinct else ids

    def retrieve(self, query_ids, k: int, threads: int):
        docs, scores = self.model.retrieve(query_ids, k=k, n_threads=threads, show_progress=False)
        return docs, scores

    def search(self, queries: list[str], k: int, threads: int, distinct: bool = True):
        return self.retrieve(self.tokenize(queries, distinct), k, threads)


class RankBm25:
    """rank-bm25's BM25Okapi on the same tokens, with the engine's idf (``ln(1 + (N - df + .5)/(df + .5))``)
    instead of its own (which floors negative idf at an epsilon), so it is configured alike."""

    name = "rank-bm25"

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75):
        import math

        from rank_bm25 import BM25Okapi

        from chitragupta.engine.text.tokenize import tokenize

        class _Alike(BM25Okapi):
            def _calc_idf(self, nd):
                self.idf = {w: math.log1p((self.corpus_size - f + 0.5) / (f + 0.5)) for w, f in nd.items()}

        self._tokenize = tokenize
        self.model = _Alike([tokenize(t) for t in texts], k1=k1, b=b)

    def top(self, query: str, k: int) -> list[int]:
        import numpy as np

        terms = list(dict.fromkeys(self._tokenize(query)))
        if not terms:
            return []
        scores = self.model.get_scores(terms)
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [int(i) for i in order[:k] if scores[i] > 0]


def positive_hits(found, scores) -> list[list[int]]:
    """bm25s returns k documents per query even when nothing matches; keep those with a score."""
    return [[int(d) for d, s in zip(row, srow) if s > 0] for row, srow in zip(found, scores)]
