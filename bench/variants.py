"""Bench-only tokenizer variants: the token-length floor at 1, 2 or 3 characters, and ways of pairing a
query's one-character words with their neighbours.

The product's floor is 2 (``chitragupta.engine.text.tokenize``). To measure the others, an in-memory index of a BEIR
corpus is built with the engine's own accumulator and a different set of never-indexed runs; queries
are tokenized with the same floor and scored by the same kernels. Floor 2 here reproduces the product
exactly (a test and the experiment itself check it).

``PairIndex`` holds floor 2's terms and, as extra terms, every adjacent pair of runs of which one has one
character (counted in the title and in the body apart, the document lengths floor 2's), so any rule for
which pairs a query asks for is measured on one index; ``pair_rule``'s defaults are the product's rule
(``short_pairs``), each switch one of its exclusions.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from chitragupta.engine.index.csr import Accumulator
from chitragupta.engine.text.tokenize import STOPWORDS, runs_bytes
from chitragupta.kernels import BM25Params, Postings, QueryBatch, score_topk

__all__ = ["FloorIndex", "build_floor_index", "PairIndex", "build_pair_index", "pair_rule"]

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


def pair_rule(text: str, *, clitic: bool = True, alone: bool = True, pronoun: bool = True, sides=("before", "after"),
              stopword_a: bool = False) -> list[tuple[str, str]]:
    """``short_pairs`` with its exclusions switchable: ``clitic`` (none after an apostrophe), ``alone``
    (none beside another one-character word), ``pronoun`` ("i" only with the word before), ``sides`` (which
    neighbours), ``stopword_a`` (pair "a" too)."""
    import re

    low = text.lower()
    runs = [(m.group(), m.start()) for m in re.finditer(r"[a-z0-9]+", low)]
    out: list[tuple[str, str]] = []

    def word(r):
        return len(r) >= 2 and r not in STOPWORDS

    for i, (r, at) in enumerate(runs):
        if len(r) != 1 or (r in STOPWORDS and not stopword_a) or (clitic and at and low[at - 1] in "'\u2019\u2018\u02bc`"):
            continue
        before = runs[i - 1][0] if i else ""
        after = runs[i + 1][0] if i + 1 < len(runs) else ""
        if alone and (len(before) == 1 or len(after) == 1):
            continue
        if "before" in sides and word(before) and (before, r) not in out:
            out.append((before, r))
        if "after" in sides and word(after) and not (pronoun and r == "i") and (r, after) not in out:
            out.append((r, after))
    return out


@dataclass
class PairIndex:
    citekeys: list[str]
    vocab: dict[str, int]
    weights: object  # scipy CSR (terms x documents) of BM25 contributions (k1 1.5, b 0.75)

    def run(self, queries: dict[str, str], rule=None, k: int = 100) -> dict[str, list[str]]:
        """qid -> the top ``k`` citekeys for floor 2's terms plus the pairs ``rule(text)`` asks for (None: none)."""
        import scipy.sparse as sp

        qids = list(queries)
        rows, cols = [], []
        for j, q in enumerate(qids):
            terms = {r.decode() for r in runs_bytes(queries[q]) if len(r) >= 2 and r.decode() not in STOPWORDS}
            terms |= {f"{a} {b}" for a, b in (rule(queries[q]) if rule else [])}
            got = sorted(self.vocab[t] for t in terms if t in self.vocab)
            rows += [j] * len(got)
            cols += got
        q = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(qids), self.weights.shape[0]))
        scores = (q @ self.weights).toarray()
        out = {}
        for j, qid in enumerate(qids):
            hit = np.flatnonzero(scores[j] > 0)
            out[qid] = [self.citekeys[d] for d in hit[np.lexsort((hit, -scores[j][hit]))][:k]]
        return out


def build_pair_index(records: list[dict]) -> PairIndex:
    """``records`` ({"_id", "title", "text"}) indexed as floor 2, plus every pair of adjacent runs one of
    which has one character (in the title and the body apart); document lengths floor 2's."""
    import scipy.sparse as sp

    records = sorted(records, key=lambda r: str(r["_id"]))
    vocab: dict[str, int] = {}
    rows, cols, lens = [], [], np.zeros(len(records))
    for i, r in enumerate(records):
        for part in (r.get("title") or "", r.get("text") or ""):
            runs = [x.decode() for x in runs_bytes(part)]
            kept = [x for x in runs if len(x) >= 2 and x not in STOPWORDS]
            lens[i] += len(kept)
            pairs = [f"{a} {b}" for a, b in zip(runs, runs[1:]) if len(a) == 1 or len(b) == 1]
            for t in kept + pairs:
                rows.append(vocab.setdefault(t, len(vocab)))
                cols.append(i)
    tf = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(vocab), len(records)))
    tf.sum_duplicates()
    df = np.diff(tf.indptr)
    n = len(records)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    norm = 1.5 * (1 - 0.75 + 0.75 * lens / max(lens.mean(), 1e-9))
    c = tf.tocoo()
    w = idf[c.row] * c.data * 2.5 / (c.data + norm[c.col])
    return PairIndex([str(r["_id"]) for r in records], vocab, sp.csr_matrix((w, (c.row, c.col)), shape=tf.shape))
