"""A query's one-character words, scored as pairs with the word beside them ("type 2", "2 diabetes"; the rule
is ``engine.text.tokenize.short_pairs``), read from the document index's positions array.

    counts = pair_counts(index, [("type", "2"), ("2", "diabetes")])   # pair -> (documents, counts)
    postings, batch = pair_postings(index, terms_per_query, pairs_per_query, counts)

A pair is a term that is not in the vocabulary: its count in a document is how often its two words stand
side by side there (the title and the body apart, as a phrase), its document frequency the documents where
they do, and it adds idf x tf x (k1 + 1) / (tf + norm) to such a document's BM25 score, norm the
document's own (a pair does not lengthen a document, so a query without one scores exactly as before;
the field weights do not apply to it). Only the places its indexed word occurs are read (the word's
positions, ``term_positions``), every pair of a batch in one pass.

A batch's queries with pairs are scored by the same backends as any query, over a small postings matrix
of their own (``pair_postings``): each of their terms' postings as the index holds them (so the same df,
idf and length norms), then one row per pair. A backend adds a query's terms in ascending id from 0.0,
so a score is its terms' in the index's order, then its pairs' in sorted order, to the bit what
``add_pairs`` adds to the reference scorer's scores (``explain`` does).
"""

from __future__ import annotations

import numpy as np

from chitragupta.engine.text.tokenize import DROPPED_RUNS
from chitragupta.kernels.types import Postings, QueryBatch, bm25_idf, length_norm

__all__ = ["scores_pairs", "pair_counts", "add_pairs", "pair_postings"]

_BLOCK = 1 << 22  # occurrences of the pairs' indexed words compared at a time
_DROPPED = {run.decode("ascii"): j for j, run in enumerate(DROPPED_RUNS)}


def scores_pairs(index) -> bool:
    """Whether ``index`` can score pairs: a document index with its positions array."""
    return getattr(index, "positions", None) is not None and getattr(index, "term_positions", None) is not None


def _ranges(lo: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The positions lo[i] .. lo[i] + lens[i] - 1 of every i, concatenated."""
    starts = np.cumsum(lens) - lens
    return np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(lo - starts, lens)


def pair_counts(index, pairs, counts: dict | None = None) -> dict:
    """``counts`` (a new dict when None) with every pair of ``pairs`` it lacks: pair -> (documents ascending
    int64, counts int64), where its two words stand side by side in ``index`` and how often. A pair is one
    one-character word and one other; ``PositionsDamaged`` when the arrays disagree (the caller rebuilds)."""
    from chitragupta.kernels.phrase import Anchor, PositionsDamaged, check_offsets

    counts = {} if counts is None else counts
    todo = sorted({tuple(x) for x in pairs} - set(counts))
    for pair in todo:
        counts[pair] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ids = index.vocab.find_many([index.index_term(r if len(a) == 1 else a) for a, r in todo]) if todo else []
    n_terms = len(index.vocab)
    span = n_terms + len(_DROPPED) + 1  # the positions array's ids, SEQ_BREAK (-1) included, shifted to >= 0
    # each pair as (its indexed word, the side of it the one-character word stands on, that word's id)
    wanted = {(int(t), int(a == x[0]), n_terms + _DROPPED[a] + 1): x
              for x, t in zip(todo, ids) for a in [x[0] if len(x[0]) == 1 else x[1]] if t >= 0 and a in _DROPPED}
    if not wanted:
        return counts
    seq, ptr = index.positions
    tpos, tptr = index.term_positions
    if not getattr(index, "offsets_checked", False):  # once per opened index (as a phrase does)
        check_offsets(seq, ptr)
        index.offsets_checked = True
    p = index.raw_postings
    words = sorted({t for t, _b, _w in wanted})
    rank = {t: i for i, t in enumerate(words)}
    got = [Anchor(0, p.indices, p.tf, int(p.indptr[t]), int(p.indptr[t + 1]), tpos, int(tptr[t]), int(tptr[t + 1]))
           for t in words]  # (each word's counts checked against its positions)
    order = sorted(wanted, key=lambda x: ((rank[x[0]] * 2 + x[1]) * span + x[2]))
    keys = np.array([(rank[t] * 2 + b) * span + w for t, b, w in order], dtype=np.int64)
    cf = np.cumsum([a.pos_hi - a.pos_lo for a in got])
    found, g0 = [], 0
    while g0 < len(got):  # words in groups of about _BLOCK occurrences (one word's own, however many)
        g1 = max(g0 + 1, int(np.searchsorted(cf, (cf[g0 - 1] if g0 else 0) + _BLOCK, side="right")))
        group = got[g0:g1]
        lo, hi = np.array([a.lo for a in group], np.int64), np.array([a.hi for a in group], np.int64)
        at = _ranges(lo, hi - lo)
        docs = np.asarray(p.indices)[at].astype(np.int64)
        if docs.size and (docs.min() < 0 or docs.max() + 2 > ptr.shape[0]):
            raise PositionsDamaged("a posting is outside the positions array")
        reps = np.asarray(p.tf)[at].astype(np.int64)
        d = np.repeat(docs, reps)  # every occurrence of the group's words: its document, which word, where
        w = np.repeat(np.repeat(np.arange(g0, g1), hi - lo), reps)
        pos = np.asarray(tpos[_ranges(np.array([a.pos_lo for a in group], np.int64),
                                      np.array([a.pos_hi - a.pos_lo for a in group], np.int64))], dtype=np.int64)
        start, stop = np.asarray(ptr[d]), np.asarray(ptr[d + 1])
        for before in (0, 1):  # the one-character word after the indexed one, then before it
            nb = start + pos + (-1 if before else 1)
            ok = (nb >= start) & (nb < stop)
            key = (w[ok] * 2 + before) * span + np.asarray(seq[nb[ok]], dtype=np.int64) + 1
            j = np.minimum(np.searchsorted(keys, key), keys.size - 1)
            hit = keys[j] == key
            found.append(j[hit] * ptr.shape[0] + d[ok][hit])
        g0 = g1
    both, n = np.unique(np.concatenate(found), return_counts=True)
    cut = np.searchsorted(both // ptr.shape[0], np.arange(keys.size + 1))
    for j, x in enumerate(order):
        counts[wanted[x]] = (both[cut[j]:cut[j + 1]] % ptr.shape[0], n[cut[j]:cut[j + 1]].astype(np.int64))
    return counts


def add_pairs(scores: np.ndarray, index, params, pairs, counts: dict | None = None) -> list[tuple]:
    """Add each pair's BM25 contribution to ``scores`` ((n_docs,) float64, in place), the pairs in sorted
    order; returns (pair, documents, counts, idf) for each, in that order."""
    counts = pair_counts(index, pairs, counts)
    p = index.raw_postings
    out = []
    for pair in sorted({tuple(x) for x in pairs}):
        docs, tf = counts[pair]
        idf = float(bm25_idf(np.asarray([docs.size]), p.n_docs)[0])
        if docs.size:
            norm = length_norm(np.asarray(p.doc_len[docs]), p.avgdl(), params.k1, params.b)
            scores[docs] += idf * tf * (params.k1 + 1.0) / (tf + norm)
        out.append((pair, docs, tf, idf))
    return out


def pair_postings(index, terms: list[np.ndarray], pairs: list, counts: dict, fields=()) -> tuple[Postings, QueryBatch]:
    """The postings and the batch that score queries with their pairs: query i's ``terms[i]`` (index term
    ids, ascending) and ``pairs[i]``. The matrix holds the queries' distinct terms (postings as the index
    holds them, ``fields``' counts too), in ascending id, then their distinct pairs, sorted
    (``counts``: pair -> ``pair_counts``'s); its documents and lengths are the index's."""
    from chitragupta.kernels.reference import PostingsDamaged

    p = index.raw_postings
    uniq = np.unique(np.concatenate(terms)).astype(np.int64) if terms else np.zeros(0, np.int64)
    plist = sorted({tuple(x) for row in pairs for x in row})
    lo, hi = np.asarray(p.indptr)[uniq].astype(np.int64), np.asarray(p.indptr)[uniq + 1].astype(np.int64)
    if ((lo < 0) | (hi < lo) | (hi > p.nnz)).any():
        raise PostingsDamaged(int(uniq[np.flatnonzero((lo < 0) | (hi < lo) | (hi > p.nnz))[0]]), "span outside the postings")
    at = _ranges(lo, hi - lo)
    pd = [counts[x] for x in plist]
    lens = np.concatenate((hi - lo, np.fromiter((d.size for d, _n in pd), dtype=np.int64, count=len(pd))))
    indptr = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])

    def stack(arr, extra):
        return np.concatenate([np.asarray(arr)[at].astype(np.int32)] + [x.astype(np.int32) for x in extra])

    sub = Postings(indptr=indptr, indices=stack(p.indices, [d for d, _n in pd]), tf=stack(p.tf, [n for _d, n in pd]),
                   doc_len=p.doc_len, fields={f: stack(p.fields[f], [np.zeros(d.size) for d, _n in pd]) for f in fields})
    col = {x: uniq.size + j for j, x in enumerate(plist)}
    rows = [np.concatenate((np.searchsorted(uniq, t), [col[tuple(x)] for x in sorted(set(map(tuple, pr)))]))
            for t, pr in zip(terms, pairs)]
    return sub, QueryBatch.from_lists(rows)
