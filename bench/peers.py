"""Peer libraries configured like us, for side-by-side quality and speed: bm25s (numba backend).

Same tokens: bm25s's Tokenizer with our splitter (lowercase, ``[a-z0-9]{2,}`` runs) and our 19 stopwords;
same k1 and b. bm25s's "lucene" scorer drops BM25's constant (k1 + 1) factor, which scales every score
alike and leaves rankings unchanged.
"""

from __future__ import annotations

from engine.tokenize import MIN_TOKEN_CHARS, STOPWORDS

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

    def tokenize(self, queries: list[str]):
        return self.tokenizer.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)

    def retrieve(self, query_ids, k: int, threads: int):
        docs, scores = self.model.retrieve(query_ids, k=k, n_threads=threads, show_progress=False)
        return docs, scores

    def search(self, queries: list[str], k: int, threads: int):
        return self.retrieve(self.tokenize(queries), k, threads)
