"""Why a document scored what it did: each query term's tf, idf and share of its BM25 score.

    ex = explain(Retriever.open("my-review"), "digital twin fidelity", "smith2020")
    ex.terms          # TermScore per distinct query term (typed, added by acronym expansion, or a pair)
    ex.score          # the sum of the contributions: the document's BM25 score for the query
    ex.rank           # its rank among every document, ties broken as search breaks them (by index order)

A query that uses the syntax (``"a phrase"``, ``+word``, ``-word``: ``engine.constraints``) is explained
over its scored words, and ``ex.constraints`` says which constraint the document met (phrase found,
required present, excluded absent, or their failures); a document that fails one is not a hit, and the
rank is counted among the documents that meet them all.

The arithmetic is the reference scorer's (``chitragupta.kernels.reference``), term by term in the order
it adds them, so ``score`` equals what the reference gives the document bit for bit, and the rank is
counted over the reference's scores of every document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from chitragupta.errors import IndexDamaged
from chitragupta.engine.search.pairs import add_pairs, scores_pairs
from chitragupta.kernels.phrase import PositionsDamaged
from chitragupta.kernels.reference import PostingsDamaged, score_dense
from chitragupta.kernels.types import bm25_idf

__all__ = ["TermScore", "Explanation", "explain"]


@dataclass(frozen=True)
class TermScore:
    """One distinct indexed query term in one document."""

    term: str                     # as the index holds it (the stem, for a stemmed index)
    origin: str                   # "query" (typed), "expansion" (added by acronym expansion) or "pair" (a
    #                               one-character word with its neighbour, "type 2": engine.search.pairs)
    df: int                       # documents holding it
    idf: float                    # ln(1 + (N - df + 0.5) / (df + 0.5))
    tf: int                       # occurrences in the document
    tf_fields: dict[str, int]     # of which in each weighted field (title, abstract)
    tf_weighted: float            # tf + sum (weight - 1) x tf_field: what BM25 saturates
    contribution: float           # idf x tf' x (k1 + 1) / (tf' + norm); 0 when tf' is 0


@dataclass
class Explanation:
    query: str
    citekey: str
    title: str
    k1: float
    b: float
    field_weights: dict[str, float]
    doc_len: int
    avgdl: float
    norm: float                   # k1 x (1 - b + b x doc_len / avgdl)
    n_docs: int
    terms: list[TermScore] = field(default_factory=list)
    score: float = 0.0            # sum of the contributions
    rank: int | None = None       # 1-based among every document; None when the document is not a hit
    hits: int = 0                 # documents the query matches with a positive score
    dropped: list[str] = field(default_factory=list)   # query words never indexed (stopwords, short)
    unknown: list[str] = field(default_factory=list)   # query words in no document
    # per constraint of the query syntax: {"kind", "item", "met", "found"} (engine.constraints.check_unit)
    constraints: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def explain(retriever, query: str, citekey: str) -> Explanation:
    """Explain ``citekey``'s BM25 document score for ``query`` under the retriever's k1, b and field
    weights (its configuration). UsageError for an unknown citekey (with near names)."""
    index, params = retriever.index, retriever.params
    doc = retriever.doc_id(citekey)
    p = index.raw_postings  # read as the numpy scorer reads it: each slice checked
    cfg = retriever.workspace.config.retrieval
    plan = retriever.scorer.plan([query], syntax=cfg.query_syntax, pairs=cfg.short_word_pairs)
    batch, parsed = plan.batch, plan.parsed[0]
    term_ids = batch.terms[batch.indptr[0]:batch.indptr[1]].astype(np.int64)
    dropped, unknown = list(parsed.dropped), parsed.unknown
    typed_ids = set(parsed.ids[:len(parsed.typed)])

    idf = bm25_idf(p.df(), p.n_docs)
    avgdl = p.avgdl()
    dl = float(p.doc_len[doc])
    norm = float(params.k1 * (1.0 - params.b + params.b * (dl / avgdl)))
    k1p1 = params.k1 + 1.0
    active = params.active_fields()
    rows, total = [], 0.0
    for t in term_ids.tolist():
        lo, hi = int(p.indptr[t]), int(p.indptr[t + 1])
        docs = p.indices[lo:hi]
        j = int(np.searchsorted(docs, doc))
        tf, fields = 0, {name: 0 for name, _ in params.field_weights}
        if j < docs.shape[0] and int(docs[j]) == doc:
            tf = int(p.tf[lo + j])
            fields = {name: int(p.fields[name][lo + j]) for name, _ in params.field_weights if name in p.fields}
        w = float(tf)
        for name, delta in active:
            w = w + delta * float(fields.get(name, 0))
        contrib = float(idf[t] * w * k1p1 / (w + norm)) if w > 0 else 0.0
        total += contrib
        rows.append(TermScore(term=index.vocab[t], origin="query" if t in typed_ids else "expansion",
                              df=hi - lo, idf=float(idf[t]), tf=tf, tf_fields=fields, tf_weighted=w,
                              contribution=contrib))
    pairs = plan.pairs[0] if plan.score_pairs and scores_pairs(index) else []
    try:
        for pair, docs, tfs, pidf in add_pairs(np.zeros(p.n_docs), index, params, pairs):
            j = int(np.searchsorted(docs, doc))
            tf = int(tfs[j]) if j < docs.size and int(docs[j]) == doc else 0
            contrib = float(pidf * tf * k1p1 / (tf + norm)) if tf else 0.0
            total += contrib
            rows.append(TermScore(term=" ".join(pair), origin="pair", df=int(docs.size), idf=pidf, tf=tf,
                                  tf_fields={}, tf_weighted=float(tf), contribution=contrib))
    except PositionsDamaged as err:
        raise IndexDamaged(f"{index.where}: {err}; rebuild it with `chitragupta index --force`") from None
    ex = Explanation(query=query, citekey=citekey, title=retriever.title(citekey), k1=params.k1, b=params.b,
                     field_weights=dict(params.field_weights), doc_len=int(dl), avgdl=avgdl, norm=norm,
                     n_docs=p.n_docs, terms=rows, dropped=dropped, unknown=unknown)
    ex.score = total
    cons = plan.constraints[0] if plan.constraints is not None else None
    if cons is not None:
        from chitragupta.engine.search.constraints import allowed_mask, check_unit

        term_docs, texts, phrases = retriever.scorer.unit_access("document")
        try:
            ex.constraints = check_unit(cons, doc, term_docs, texts, phrases)
        except (PostingsDamaged, PositionsDamaged) as err:
            raise IndexDamaged(f"{index.where}: {err}; rebuild it with `chitragupta index --force`") from None
    if term_ids.size:
        try:
            scores, matched = score_dense(p, term_ids, params)  # every document, for the rank
            add_pairs(scores, index, params, pairs)
            hit = matched & (scores > 0)
            if cons is not None:
                hit &= allowed_mask(cons, p.n_docs, term_docs, texts, phrases)
        except (PostingsDamaged, PositionsDamaged) as err:
            raise IndexDamaged(f"{index.where}: {err}; rebuild it with `chitragupta index --force`") from None
        ex.hits = int(hit.sum())
        if hit[doc]:
            s = scores[doc]  # equal to ``total``: the same operations in the same order
            ex.rank = 1 + int(np.count_nonzero(hit & (scores > s))) + \
                int(np.count_nonzero(hit[:doc] & (scores[:doc] == s)))
    return ex
