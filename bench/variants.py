"""Bench-only tokenizer variants: the token-length floor at 1, 2 or 3 characters.

The product's floor is 2 (``chitragupta.engine.text.tokenize``). To measure the others, an in-memory index of a BEIR
corpus is built with the engine's own accumulator and a different set of never-indexed runs; queries
are tokenized with the same floor and scored by the same kernels. Floor 2 here reproduces the product
exactly (a test and the experiment itself check it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from chitragupta.engine.index.csr import Accumulator
from chitragupta.engine.text.tokenize import STOPWORDS, runs_bytes
from chitragupta.kernels import BM25Params, Postings, QueryBatch, score_topk

__all__ = ["FloorIndex", "build_floor_index"]

_ALNUM = b"abcdefghijklmnopqrstuvwxyz0123456789"


def dropped_runs(floor: int) -> tuple[bytes, ...]:
    """Every run shorter than ``floor`` plus the stopwords (floor 1..3)."""
    if not 1 <= floor <= 3:
        raise ValueError("the bench variants cover floors 1, 2 and 3")
    short = [bytes(p) for n in range(1, floor) for p in itertools.product(_ALNUM, repeat=n)]
    return tuple(sorted(set(short) | {w.encode() for w in STOPWORDS}))


@dataclass
class FloorIndex:
    floor: int
    citekeys: list[str]
    vocab: dict[str, int]
    postings: Postings

    def tokens(self, text: str) -> list[str]:
        drop = set(dropped_runs(self.floor))
        return [r.decode() for r in runs_bytes(text) if r not in drop]

    def batch(self, queries: list[str]) -> QueryBatch:
        return QueryBatch.from_lists([[self.vocab[t] for t in self.tokens(q) if t in self.vocab] for q in queries])

    def run(self, queries: dict[str, str], k: int = 100, params: BM25Params = BM25Params()) -> dict[str, list[str]]:
        qids = list(queries)
        top = score_topk(self.postings, self.batch([queries[q] for q in qids]), params, k, backend="numba")
        return {q: [self.citekeys[d] for d in top.ids[i].tolist() if d >= 0] for i, q in enumerate(qids)}

    def mean_doc_len(self) -> float:
        return float(np.asarray(self.postings.doc_len).mean())


def build_floor_index(records: list[dict], floor: int) -> FloorIndex:
    """Index ``records`` ({"_id", "title", "text"}) with the token floor ``floor``, in citekey order."""
    records = sorted(records, key=lambda r: str(r["_id"]))
    acc = Accumulator(dropped=dropped_runs(floor))
    for i, r in enumerate(records):
        acc.add_runs(i, runs_bytes((r.get("title") or "") + "\n" + (r.get("text") or "")))
    vocab, arrays = acc.finish(len(records))
    postings = Postings(arrays["indptr"], arrays["indices"], arrays["tf"], arrays["doc_len"])
    return FloorIndex(floor, [str(r["_id"]) for r in records], {t: i for i, t in enumerate(vocab)}, postings)
