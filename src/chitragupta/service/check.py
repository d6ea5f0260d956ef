"""Checking a draft against the library (``chitragupta check``, the MCP tool ``check_citations``): every
citation's key resolved, the passage of the cited source that bears on its claim, a support score and a
status, the library sources that bear on the claim more, and the sentences that cite nothing although the
library holds what they claim.

One batched pass. The draft is read once (``engine/text/draft.py``: a citation's claim is its sentence, or
its clause where several citations split the sentence); its distinct claims -- the citations' and those of
the uncited sentences of at least ``UNCITED_WORDS`` words -- are ranked together (``rank_many``, ``DEPTH``
sources each) and, on hybrid, encoded together; every (claim, source) pair that matters (those candidates
and the cited sources, whatever their rank) is scored in one pass over the posting slices
(``kernels.reference.score_pairs``); a source's text is read once, for its evidence window.

Engine: ``auto`` is hybrid when the workspace's embedding index covers the library, else BM25 (a note says
why not hybrid). Hybrid here is the BM25 index and the embedding index side by side, combined by the
support score below (not hybrid search's rank fusion); the report names the engine.

Support, in [0, 1], one function for every pair of a run, so comparable across its citations:

    support = 1 / (1 + exp(-(w . x)))     bm25: x = (1, sqrt r, sqrt c)
                                          hybrid: x = (1, sqrt r, sqrt c, cos, cos - best cos)

r is the source's BM25 score for the claim over the best any library source has (0 when none matches); c
the share of the claim's idf whose terms the source holds (a word no source holds counts with the idf of a
term in no document); cos the cosine of the claim and the source's
best chunk, best cos the claim's best over the library. ``MODELS`` holds w and the two thresholds per
engine, all chosen by ``python -m bench check`` on SciFact's training claims (qrels_train.tsv) alone: w by a
logistic regression of every pair check scores for a claim (its candidates and its cited sources: the
relevant ones, a random one, the best-ranked non-relevant one), relevant or not, the two classes weighted
alike, w kept >= 0 but for the intercept (more evidence never lowers support); WEAK the threshold best
separating relevant from random citations (balanced accuracy), SUPPORTED the one best separating relevant
from best-ranked non-relevant ones. Status, worst first: ``unknown`` (no such
key in the library), ``no-text`` (the library holds the source's title alone; support is then its
title's), ``unsupported`` (support < WEAK), ``weak`` (< SUPPORTED), ``supported``.

Alternatives: up to ``ALTERNATIVES`` library sources whose support for the claim is at least WEAK and above
the cited source's, best first. Uncited: a sentence without a citation whose best library source has
support >= UNCITED (chosen on the training claims against out-of-domain sentences, Cranfield's odd-numbered
queries, by balanced accuracy), with up to ``ALTERNATIVES`` candidates >= WEAK. An unknown key gets ``did_you_mean``:
the keys equal but for case, the sources whose first author's family name and year (and a title word
starting with the key's word) match an ``authorYEARword`` key, then the keys within edit similarity
``NEAR`` (rapidfuzz ratio); a work the citation graph knows as cited by the library's sources but missing
from it (its first author's family name, its year within one, a title word) gets a note naming its citing sources and ``chitragupta missing --min 1 --bib FILE``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from chitragupta.errors import ChitraguptaError, UsageError

__all__ = ["check", "open_engines", "score_claims", "support", "Model", "MODELS", "Report", "Finding",
           "Evidence", "Uncited", "Engines", "STATUSES", "ENGINES"]

STATUSES = ("unknown", "no-text", "unsupported", "weak", "supported")  # worst first
BM25 = "bm25"  # the registry's engines whose indexes check reads: BM25's alone, or BM25's and embed's
HYBRID = "hybrid"
ENGINES = ("auto", BM25, HYBRID)
DEPTH = 20  # candidates per claim from each side
ALTERNATIVES = 3
UNCITED_WORDS = 6  # an uncited sentence of fewer words is not taken for a claim
EVIDENCE_CHARS = 320
NEAR = 75  # rapidfuzz ratio for a did-you-mean by edit


@dataclass(frozen=True)
class Model:
    """The weights of ``support`` (module docstring) and the status thresholds."""

    weights: tuple[float, ...]
    weak: float
    supported: float
    uncited: float


MODELS = {BM25: Model((-3.91, 3.601, 1.788), 0.192, 0.724, 0.676),
          HYBRID: Model((-1.884, 1.971, 1.409, 2.153, 9.669), 0.064, 0.855, 0.806)}


@dataclass(frozen=True)
class Evidence:
    text: str
    page: int | None
    words: tuple[str, ...]  # the claim's words the passage holds


@dataclass
class Finding:
    """One citation of one key, as checked."""

    key: str
    line: int
    sentence: str
    claim: str
    status: str
    support: float | None
    evidence: Evidence | None = None
    alternatives: list[tuple[str, float, Evidence | None]] = field(default_factory=list)
    did_you_mean: list[str] = field(default_factory=list)
    start: int = 0
    end: int = 0

    def to_dict(self) -> dict:
        ev = None if self.evidence is None else {"text": self.evidence.text, "page": self.evidence.page}
        return {"key": self.key, "line": self.line, "sentence": self.sentence, "status": self.status,
                "support": None if self.support is None else round(self.support, 4), "evidence": ev,
                "alternatives": _scores(self.alternatives), "did_you_mean": list(self.did_you_mean)}


@dataclass
class Uncited:
    line: int
    sentence: str
    candidates: list[tuple[str, float, Evidence | None]]
    start: int = 0
    end: int = 0

    def to_dict(self) -> dict:
        return {"line": self.line, "sentence": self.sentence, "candidates": _scores(self.candidates)}


def _scores(pairs) -> list[dict]:
    return [{"citekey": k, "support": round(s, 4)} for k, s, _ev in pairs]


@dataclass
class Report:
    citations: list[Finding]
    uncited: list[Uncited]
    engine: str
    notes: list[str]

    def to_dict(self) -> dict:
        from chitragupta.notes import note_dicts

        return {"citations": [f.to_dict() for f in self.citations], "uncited": [u.to_dict() for u in self.uncited],
                "engine": self.engine, "notes": note_dicts(self.notes)}

    @property
    def exit_code(self) -> int:
        """0 when every citation is supported, else 3 (findings)."""
        return 0 if all(f.status == "supported" for f in self.citations) else 3


@dataclass
class Engines:
    bm25: object
    dense: object | None
    notes: list[str]

    @property
    def name(self) -> str:
        return BM25 if self.dense is None else HYBRID


def open_engines(ws, engine: str = "auto", *, warm=None, update: bool = True) -> Engines:
    """(``ws``: a workspace path or a ``Workspace``.) The BM25 searcher and, for ``auto`` and ``hybrid``, the embedding searcher when the workspace has a
    usable one covering the library (else None and a note; ``auto`` says nothing when there is no index)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} for check; allowed: {', '.join(ENGINES)}")
    from chitragupta.service import open_searcher

    bm25 = warm.searcher(BM25) if warm is not None else open_searcher(ws, BM25, update=update)
    ws = bm25.workspace
    if engine == BM25:
        return Engines(bm25, None, [])
    none = "no embedding index (`chitragupta enrich --stages embed` builds one): BM25 alone"
    if not (ws.content / "faiss").is_dir():  # no store at all: nothing of enrich imported
        return Engines(bm25, None, [none] if engine == HYBRID else [])
    from chitragupta.enrich.hybrid import coverage_note
    from chitragupta.enrich.search import store_signature

    if store_signature(ws) is None:  # (a store of another model)
        return Engines(bm25, None, [none] if engine == HYBRID else [])
    try:
        dense = warm.searcher("embed") if warm is not None else open_searcher(ws, "embed")
    except ChitraguptaError as err:
        return Engines(bm25, None, [f"the embedding index cannot be used ({err}); BM25 alone"])
    partial = coverage_note(ws, dense)
    return Engines(bm25, None, [partial.text + "; BM25 alone"]) if partial is not None else Engines(bm25, dense, [])


def _plain(claim: str) -> str:
    """A claim as plain words: no phrase quotes or +/- word marks for the query syntax to read."""
    return re.sub(r"[\"\u201c\u201d]|(?<!\S)[+-]", " ", claim)


@dataclass
class Scored:
    """Per scored pair (each claim's together) its claim ``q``, BM25 row ``d`` and features ``x``; each claim's
    BM25 ``terms``."""

    q: np.ndarray
    d: np.ndarray
    x: np.ndarray
    terms: list


def _dense(dense, bm25, claims: list[str], pairs: list[list[int]], depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's cosine with the claim's best chunk of the source, and the claim's best cosine: the claims
    encoded once and scored against every chunk, a block of claims at a time; each claim's top ``depth``
    sources by it join its ``pairs``."""
    store = dense.store
    order = np.argsort(np.asarray(store.chunk_doc), kind="stable")
    docs = np.asarray(store.chunk_doc)[order]
    vectors = np.asarray(store.vectors, dtype=np.float32)
    vectors = vectors if np.array_equal(order, np.arange(order.size)) else vectors[order]
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if docs.size else np.zeros(0, dtype=np.int64)
    rows = np.asarray(bm25.index.citekeys.find_many(store.citekeys), dtype=np.int64)[docs[starts]]  # BM25 rows
    col = np.full(bm25.index.n_docs, -1, dtype=np.int64)
    col[rows[rows >= 0]] = np.flatnonzero(rows >= 0)
    qv, cos, best = dense.encode(claims), [], np.zeros(len(claims))
    block = max(1, (1 << 24) // max(1, len(vectors)))
    for lo in range(0, len(claims), block):
        sims = np.maximum.reduceat(qv[lo:lo + block] @ vectors.T, starts, axis=1) if starts.size else \
            np.full((len(qv[lo:lo + block]), 0), -np.inf, dtype=np.float32)
        sims[:, rows < 0] = -np.inf  # sources the BM25 index does not hold
        for i, row in enumerate(sims, start=lo):
            top = np.argpartition(-row, depth - 1)[:depth] if row.size > depth else np.arange(row.size)
            top = top[np.argsort(-row[top], kind="stable")]
            top = top[np.isfinite(row[top])]
            pairs[i] += [d for d in rows[top].tolist() if d not in set(pairs[i])]
            at = col[np.asarray(pairs[i], dtype=np.int64)]
            cos.append(np.where(at >= 0, row[np.maximum(at, 0)], 0.0))  # (coverage is checked on opening)
            best[i] = row[top[0]] if top.size else 0.0
    return np.concatenate(cos), np.repeat(best, [len(p) for p in pairs])


def score_claims(engines: Engines, claims: list[str], cited: list[list[int]], depth: int = DEPTH) -> Scored:
    """The features of each claim's pairs: its top ``depth`` BM25 sources (and, on hybrid, its top ``depth``
    by the embedding index) and the sources in ``cited[c]`` (BM25 document rows), in one batch."""
    from chitragupta.kernels.reference import score_pairs
    from chitragupta.kernels.types import bm25_idf

    bm25 = engines.bm25
    ranked = bm25.rank_many([_plain(c) for c in claims], depth)
    ids = ranked.topk.ids
    pairs = [list(dict.fromkeys([*ids[c][ids[c] >= 0].tolist(), *cited[c]])) for c in range(len(claims))]
    dense = _dense(engines.dense, bm25, claims, pairs, depth) if engines.dense is not None and claims else None
    q = np.repeat(np.arange(len(claims)), [len(p) for p in pairs]).astype(np.int64)
    d = np.asarray([x for p in pairs for x in p], dtype=np.int64)
    postings = bm25.index.raw_postings
    s, held, total = score_pairs(postings, ranked.batch, q, d, bm25.params)
    unknown = np.asarray([len(p.unknown) for p in ranked.plan.parsed], dtype=np.float64)  # in no source: held by none
    total += unknown[q] * bm25_idf(np.zeros(1), postings.n_docs)[0]
    top = np.zeros(len(claims))
    np.maximum.at(top, q, s)
    r = np.divide(s, top[q], out=np.zeros_like(s), where=top[q] > 0)
    c = np.divide(held, total, out=np.zeros_like(held), where=total > 0)
    x = [np.ones_like(s), np.sqrt(np.minimum(r, 1.0)), np.sqrt(c)]
    if dense is not None:
        x += [dense[0], dense[0] - dense[1]]
    return Scored(q, d, np.stack(x, axis=1), ranked.terms)


def support(x: np.ndarray, model: Model) -> np.ndarray:
    """The support of feature rows ``x`` under ``model``: 1 / (1 + exp(-w . x))."""
    return 1.0 / (1.0 + np.exp(-(x @ np.asarray(model.weights))))


_AUTHOR_YEAR = re.compile(r"([^\W\d_]+?)[_:.-]?((?:1[6-9]|20)\d\d)(?:[a-z](?![a-z]))?[_:.-]?([^\W\d_]*)\d*")


def _author_year(key: str):
    """(family, year, word) of an ``authorYEARword`` key, folded; None for another key."""
    from chitragupta.engine.library.metadata import fold

    m = _AUTHOR_YEAR.fullmatch(key)
    return (fold(m.group(1)), int(m.group(2)), fold(m.group(3))) if m else None


def _matches(ay, family: str, year, title: str, years: int = 0) -> bool:
    """Whether a source or work (first author's ``family``, ``year``, ``title``) is what ``ay`` names."""
    from chitragupta.engine.library.metadata import family_keys, fold

    return (year is not None and abs(year - ay[1]) <= years and ay[0] in {k.replace(" ", "") for k in family_keys(family)}
            and (not ay[2] or any(t.startswith(ay[2]) for t in re.findall(r"\w+", fold(title or "")))))


def _did_you_mean(ws, bm25, unknown: list[str]) -> dict[str, list[str]]:
    """Each unknown key's likely meant keys (module docstring)."""
    from rapidfuzz import fuzz, process

    from chitragupta.engine.library.ledger import Ledger

    keys = bm25.index.citekeys.to_list()
    folded: dict[str, list[str]] = {}
    for k in keys:
        folded.setdefault(k.casefold(), []).append(k)
    meta = []
    if any(_author_year(k) for k in unknown) and ws.ledger_path.exists():
        with Ledger(ws.ledger_path, create=False) as ledger:
            meta = [(k, names[0][0], year) for k, names, year, *_ in ledger.metadata_view() if names]
    fam_of = {k: fam for k, fam, _y in meta}
    out = {}
    for key in unknown:
        got = list(folded.get(key.casefold(), []))
        if ay := _author_year(key):
            hits = [k for k, fam, year in meta if _matches(ay[:2] + ("",), fam, year, "")]
            got += sorted(hits, key=lambda k: not _matches(ay, fam_of[k], ay[1], bm25.title(k)))
        got += [k for k, _s, _i in process.extract(key, keys, scorer=fuzz.ratio, limit=5, score_cutoff=NEAR)]
        out[key] = list(dict.fromkeys(got))[:5]
    return out


def _missing_notes(ws, unknown: dict[str, list[int]]) -> list[str]:
    """A note per unknown ``authorYEARword`` key the citation graph knows as a work the library lacks."""
    from chitragupta.service.citations import citation_graph

    wanted = {k: ay for k in unknown if (ay := _author_year(k))}
    if not wanted:
        return []
    try:
        works = citation_graph(ws).missing(1, 1 << 30)
    except ChitraguptaError:
        return []
    notes = []
    for key, ay in wanted.items():
        w = next((w for w in works if w.authors and _matches(ay, w.authors[0], w.year, w.title, 1)), None)
        if w is not None:
            lines = ", ".join(map(str, unknown[key]))
            notes.append(f"line {lines}: {key} is cited by {w.count} of your sources ({', '.join(w.citing[:5])}) "
                         f"but is not in your library: \"{w.title}\" ({w.year}); `chitragupta missing --min 1 --bib "
                         "FILE` writes its BibTeX entry")
    return notes


def _evidence(bm25, key: str, terms: list[str]) -> Evidence | None:
    """The window of ``key``'s text holding the most of ``terms``, its page and the words it holds."""
    from chitragupta.engine.text.tokenize import tokenize
    from chitragupta.engine.text.windows import choose_windows

    body = bm25.body(key)
    index = bm25.index
    wins = choose_windows(body.text, terms, EVIDENCE_CHARS, 1, stem=index.stem, body_start=body.front)
    if not wins:
        return None
    want = set(terms)
    words = tuple(dict.fromkeys(w for w in tokenize(wins[0].text) if index.index_term(w) in want))
    return Evidence(wins[0].text, body.page_at(wins[0].anchor), words)


def check(workspace, text: str, *, fmt: str | None = None, name: str | None = None, engine: str = "auto",
          warm=None, passages: bool = False, models: dict | None = None, update: bool = True) -> Report:
    """Check the draft ``text`` (``fmt`` one of latex, markdown, text; None: guessed from ``name`` and the
    text) against the library of ``workspace`` (a path or a ``Workspace``; with ``warm``, a ``WarmEngines``,
    its engines). ``passages``: evidence for every alternative and candidate too (the Markdown copy's).
    ``models``: other weights and thresholds per engine (the bench's)."""
    from chitragupta.engine.index.source import FLAG_NOT_PARSED, FLAG_TEXT_MISSING
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.text.draft import FORMATS, read_draft

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown draft format {fmt!r}; allowed: {', '.join(FORMATS)}")
    ws = warm.workspace() if warm is not None else (
        workspace if isinstance(workspace, Workspace) else Workspace.open(workspace))
    draft = read_draft(text, fmt, name)
    engines = open_engines(ws, engine, warm=warm, update=update)
    model = (models or MODELS)[engines.name]
    bm25 = engines.bm25
    notes = list(engines.notes)
    keys = list(dict.fromkeys(c.key for c in draft.cites))
    row_of = dict(zip(keys, bm25.index.citekeys.find_many(keys)))
    free = [s for s in draft.sentences if not s.cited and len(re.findall(r"[A-Za-z0-9]+", s.claim)) >= UNCITED_WORDS]
    claims = {t: i for i, t in enumerate(dict.fromkeys([c.claim for c in draft.cites] + [s.claim for s in free]))}
    cited: list[list[int]] = [[] for _ in claims]
    for c in draft.cites:
        cited[claims[c.claim]] += [int(row_of[c.key])] if row_of[c.key] >= 0 else []
    sc = score_claims(engines, list(claims), cited)
    value = support(sc.x, model)
    ranked_pairs: dict[int, list[tuple[int, float]]] = {}
    for i in np.lexsort((sc.d, -value)).tolist():
        ranked_pairs.setdefault(int(sc.q[i]), []).append((int(sc.d[i]), float(value[i])))
    own = {(int(q), int(d)): float(v) for q, d, v in zip(sc.q, sc.d, value)}
    names = bm25.index.citekeys

    def others(qi: int, floor: float, skip: int, terms) -> list:
        got = [(names[d], v) for d, v in ranked_pairs.get(qi, []) if d != skip and v >= floor][:ALTERNATIVES]
        return [(k, v, _evidence(bm25, k, terms) if passages else None) for k, v in got]

    flags = np.asarray(bm25.index.flags)
    findings, unknown = [], {}
    for c in draft.cites:
        qi, row = claims[c.claim], int(row_of[c.key])
        f = Finding(c.key, c.line, draft.sentences[c.sentence].text, c.claim, "unknown", None, start=c.start, end=c.end)
        if row < 0:
            unknown.setdefault(c.key, []).append(c.line)
        else:
            f.support = own[(qi, row)]
            f.status = "no-text" if flags[row] & (FLAG_TEXT_MISSING | FLAG_NOT_PARSED) else \
                "supported" if f.support >= model.supported else "weak" if f.support >= model.weak else "unsupported"
            if f.status == "no-text":
                notes.append(f"line {c.line}: {c.key} is indexed on its title alone (no text: parse it, "
                             "`chitragupta sync -v` says why not)")
            else:
                f.evidence = _evidence(bm25, c.key, sc.terms[qi])
        f.alternatives = others(qi, max(model.weak, np.nextafter(f.support or 0.0, 1.0)), row, sc.terms[qi])
        findings.append(f)
    if unknown:
        near = _did_you_mean(ws, bm25, list(unknown))
        for f in findings:
            if f.status == "unknown":
                f.did_you_mean = near[f.key]
        notes += _missing_notes(ws, unknown)
    uncited = []
    for s in free:
        qi = claims[s.claim]
        best = ranked_pairs.get(qi, [(0, 0.0)])[0][1]
        if best >= model.uncited:
            uncited.append(Uncited(s.line, s.text, others(qi, model.weak, -1, sc.terms[qi]), s.start, s.end))
    if not draft.cites:
        notes.append(f"no citation found in the draft (read as {draft.format})")
    return Report(findings, uncited, engines.name, notes)
