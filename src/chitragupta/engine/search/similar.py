""""Papers like this one" for BM25: a source's most distinctive terms, as the index weighs them, asked of
the index as a query; the source itself is never among the hits.

    terms = distinctive_terms(scorer, doc)           # (term ids, weights), most distinctive first
    ranked = rank_like(scorer, doc, k)               # Ranked: the k sources nearest ``doc``, without it

A term's weight is its contribution to the source's own BM25 score: idf x tf' x (k1 + 1) / (tf' + norm),
tf' weighing the title and abstract fields as ``[retrieval]`` weighs them (``engine.explain`` shows the
same numbers for any query). The query is a bag of the ``SIMILAR_TERMS`` heaviest (ties: the rarer term,
then term id) that some other source holds too -- a term only the source uses (df = 1: its own name, a
venue line no other source shares) matches nothing -- scored like any query, so a hit's score is its
BM25 score for them and its snippet the window holding most of them. Where those terms reach fewer
than ``max(k, SIMILAR_REACH)`` other sources while the library holds more (a small library: at seven
full-text papers the 64 heaviest are nearly all df = 1), the heaviest 128, 256, ... are taken until they
do or none is left: every source that shares a term with this one can be found. The source's terms are
read from the index's postings (every posting compared with the source's row: one pass over the
postings' document ids, no text read).
"""

from __future__ import annotations

import numpy as np

from chitragupta.notes import Note
from chitragupta.engine.search.results import Ranked
from chitragupta.kernels.types import QueryBatch, TopK, bm25_idf

__all__ = ["SIMILAR_TERMS", "SIMILAR_REACH", "distinctive_terms", "rank_like"]

SIMILAR_TERMS = 64  # the heaviest terms the query starts from (chosen on scifact's train judgments: bench similar)
SIMILAR_REACH = 10  # sources the terms must reach before they stop growing, whatever k (so -k 3 heads -k 10)


def distinctive_terms(scorer, doc: int, n: int | None = SIMILAR_TERMS) -> tuple[np.ndarray, np.ndarray]:
    """(term ids, weights) of document ``doc``'s ``n`` heaviest terms (None: all), heaviest first."""
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
    """The ``k`` documents nearest document ``doc`` by BM25 over its distinctive terms that other documents
    hold, ``doc`` left out; ``allowed``: None, or the (n_docs,) bool mask of the only documents that may be
    hits (metadata filters). ``Ranked.queries`` is ``[title]`` (what the embedding side's snippets look for)."""
    index = scorer.index
    n_docs = index.n_docs
    ids, _w = distinctive_terms(scorer, doc, None)
    shared = np.diff(np.asarray(index.raw_postings.indptr))[ids] > 1
    mask = np.ones(n_docs, dtype=bool) if allowed is None else np.array(allowed, dtype=bool, copy=True)
    mask[doc] = False
    k = int(min(k, max(1, n_docs - 1)))
    reach = min(max(k, SIMILAR_REACH), int(mask.sum()))
    n = SIMILAR_TERMS
    while True:
        query = ids[:n][shared[:n]]
        batch = QueryBatch.from_lists([query.tolist()])
        got = scorer.score("document", batch, max(k, reach), [mask]) if query.size else TopK.empty(1, k)
        if int((got.ids[0] >= 0).sum()) >= reach or n >= ids.size:
            break
        n *= 2
    top = TopK(got.ids[:, :k].copy(), got.scores[:, :k].copy())
    vocab = [index.vocab[int(t)] for t in query]
    citekey = index.citekeys[int(doc)]
    if vocab:
        head = f"{', '.join(vocab[:8])}{', ...' if len(vocab) > 8 else ''}"
        text = (f"like {citekey}: BM25 over the {len(vocab)} of its {min(n, ids.size)} most distinctive terms "
                f"that other sources hold too ({head})")
    else:
        text = (f"like {citekey}: " + ("it has no indexed term" if not ids.size else "no other source holds "
                                       "any of its terms") + ", so nothing is like it")
    return Ranked(top, [title], unit="document", table=index.citekeys, plan=_SeedPlan(batch, vocab, Note("similar", text)))
