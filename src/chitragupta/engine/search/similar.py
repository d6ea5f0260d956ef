""""Papers like this one" for BM25: a source's most distinctive terms, as the index weighs them, asked of
the index as a query; the source itself is never among the hits.

    terms = distinctive_terms(scorer, doc)           # (term ids, weights), most distinctive first
    ranked = rank_like(scorer, doc, k)               # Ranked: the k sources nearest ``doc``, without it

A term's weight is its contribution to the source's own BM25 score: idf x tf' x (k1 + 1) / (tf' + norm),
tf' weighing the title and abstract fields as ``[retrieval]`` weighs them (``engine.explain`` shows the
same numbers for any query). The ``SIMILAR_TERMS`` heaviest (ties: the rarer term, then term id) are the
query: a bag of those terms, scored like any query, so a hit's score is its BM25 score for them and its
snippet the window holding most of them. The source's terms are read from the index's postings (every
posting compared with the source's row: one pass over the postings' document ids, no text read).
"""

from __future__ import annotations

import numpy as np

from chitragupta.notes import Note
from chitragupta.engine.search.results import Ranked
from chitragupta.kernels.types import QueryBatch, TopK, bm25_idf

__all__ = ["SIMILAR_TERMS", "distinctive_terms", "rank_like"]

SIMILAR_TERMS = 64  # the heaviest terms that make up the query (chosen on scifact's train judgments: bench similar)


def distinctive_terms(scorer, doc: int, n: int = SIMILAR_TERMS) -> tuple[np.ndarray, np.ndarray]:
    """(term ids, weights) of document ``doc``'s ``n`` heaviest terms, heaviest first (module docstring)."""
    index, params = scorer.index, scorer.params  # the scorer checks the slices the query then reads
    p = index.raw_postings
    indptr = np.asarray(p.indptr)
    pos = np.flatnonzero(np.asarray(p.indices) == doc)
    if pos.size == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    terms = np.searchsorted(indptr, pos, side="right") - 1
    w = np.asarray(p.tf)[pos].astype(np.float64)
    for name, delta in params.active_fields():
        if name in p.fields:
            w = w + delta * np.asarray(p.fields[name])[pos]
    dl = float(p.doc_len[doc])
    norm = params.k1 * (1.0 - params.b + params.b * dl / p.avgdl())
    idf = bm25_idf(p.df(), p.n_docs)[terms]
    weight = np.where(w > 0, idf * w * (params.k1 + 1.0) / (w + norm), 0.0)
    order = np.lexsort((terms, np.diff(indptr)[terms], -weight))[:n]
    order = order[weight[order] > 0]
    return terms[order].astype(np.int64), weight[order]


class _SeedPlan:
    """What ``Ranked`` asks of a query plan, for the one query made of a source's terms."""

    def __init__(self, batch: QueryBatch, terms: list[str], note: Note):
        self.batch, self.terms, self.expansions, self._note = batch, [terms], None, note

    def notes(self, unit: str = "document") -> list[list[Note]]:
        return [[self._note]]

    def unmatched(self) -> int:
        return int(self.batch.terms.size == 0)


def rank_like(scorer, doc: int, k: int, title: str = "", allowed: np.ndarray | None = None) -> Ranked:
    """The ``k`` documents nearest document ``doc`` by BM25 over its distinctive terms, ``doc`` left out;
    ``allowed``: None, or the (n_docs,) bool mask of the only documents that may be hits (metadata filters).
    ``Ranked.queries`` is ``[title]`` (what the embedding side's snippets look for)."""
    index = scorer.index
    ids, weights = distinctive_terms(scorer, doc)
    vocab = [index.vocab[int(t)] for t in ids]
    citekey = index.citekeys[int(doc)]
    note = Note("similar", f"like {citekey}: BM25 over its {len(vocab)} most distinctive terms"
                + (f" ({', '.join(vocab[:8])}{', ...' if len(vocab) > 8 else ''})" if vocab else
                   " -- it has no indexed term, so nothing is like it"))
    batch = QueryBatch.from_lists([ids.tolist()])
    k = int(min(k, max(1, index.n_docs - 1)))
    top = TopK.empty(1, k)
    if ids.size and allowed is not None:  # the source itself is masked out with what the filters exclude
        mask = np.array(allowed, dtype=bool, copy=True)
        mask[doc] = False
        got = scorer.score("document", batch, k, [mask])
        n = int((got.ids[0] >= 0).sum())
        top.ids[0, :n], top.scores[0, :n] = got.ids[0][:n], got.scores[0][:n]
    elif ids.size:
        got = scorer.score("document", batch, min(k + 1, index.n_docs))
        keep = (got.ids[0] >= 0) & (got.ids[0] != doc)
        n = min(k, int(keep.sum()))
        top.ids[0, :n], top.scores[0, :n] = got.ids[0][keep][:n], got.scores[0][keep][:n]
    return Ranked(top, [title], unit="document", table=index.citekeys, plan=_SeedPlan(batch, vocab, note))
