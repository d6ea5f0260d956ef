"""Query syntax for BM25 (engine/search/constraints.py): phrases, +required, -excluded, applied as a mask before
top-k, so the hits are exactly the unconstrained ranking restricted to the allowed sources."""

from __future__ import annotations

import json

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.constraints import has_syntax, phrase_in, read_syntax
from chitragupta.engine.text.tokenize import runs_bytes
from chitragupta.errors import UsageError
from chitragupta.kernels import cpu, reference
from chitragupta.kernels.types import BM25Params, Postings, QueryBatch

from helpers import make_workspace, random_docs, run_main


# -- parsing ---------------------------------------------------------------------------------------------
def test_plain_text_is_not_syntax_and_reads_back_unchanged():
    for q in ["digital twin fidelity", "CD4 + T cell response", "LRBA prevents CTLA - 4 recycling",
              "covid-19 e2f-1", ""]:
        assert read_syntax(q) == (q, None)
    assert not has_syntax(["digital twin", "CTLA - 4 recycling", "IL-10 production"])
    assert has_syntax(["a b", 'x "y z"']) and has_syntax(["fidelity -aircraft"]) and has_syntax(["+word"])


def test_phrases_required_and_excluded_are_read_and_only_positive_words_are_scored():
    scored, cons = read_syntax('"Digital Twin" +fidelity -aircraft -"wind tunnel" sensor')
    assert scored == "Digital Twin fidelity sensor"
    got = [(i.kind, i.text, i.runs) for i in cons.items]
    assert got == [("phrase", "Digital Twin", (b"digital", b"twin")), ("required", "fidelity", (b"fidelity",)),
                   ("excluded", "aircraft", (b"aircraft",)), ("excluded", "wind tunnel", (b"wind", b"tunnel"))]
    # a signed word of several runs is a phrase of them
    _s, cons = read_syntax("model +covid-19")
    assert cons.items[0].runs == (b"covid", b"19") and cons.items[0].kind == "required"


@pytest.mark.parametrize("query, needle", [
    ('digital "twin', "unbalanced quotes"),
    ('twin ""', "empty phrase"),
    ('twin " , "', "empty phrase"),
    ("-aircraft", "only exclusions"),
    ('-aircraft -"wind tunnel"', "only exclusions"),
    ("twin -", "alone at the end"),
    ("+", "alone at the end"),
    ("-", "alone at the end"),
    ('twin "of the"', "holds no indexed word"),
])
def test_malformed_syntax_is_one_clear_usage_error(query, needle):
    with pytest.raises(UsageError) as err:
        read_syntax(query)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_required_stopword_is_a_note_and_ignored():
    _s, cons = read_syntax("heat +the")
    assert not cons.active and "cannot be required" in cons.notes()[0].text


def test_phrase_in_follows_the_tokenizer_and_keeps_stopword_positions():
    runs = tuple(runs_bytes("effect of the drug"))
    assert phrase_in(runs, ["The EFFECT of the drug_x was..."])
    assert not phrase_in(runs, ["effect of a drug"])
    assert not phrase_in(runs, ["effect of the drugs"])
    assert phrase_in((b"twin",), ["a twin."]) and not phrase_in((b"twin",), ["twins"])


# -- kernels: masks, to the bit ------------------------------------------------------------------------
def _random_postings(rng, n_docs, n_terms, fields=True):
    cols = []
    for _t in range(n_terms):
        df = int(rng.integers(0, n_docs + 1))
        cols.append(np.sort(rng.choice(n_docs, size=df, replace=False)))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([c.size for c in cols], out=indptr[1:])
    indices = np.concatenate(cols).astype(np.int32)
    tf = rng.integers(1, 6, size=indices.size).astype(np.int32)
    title = np.minimum(tf, rng.integers(0, 3, size=indices.size)).astype(np.int32)
    doc_len = np.bincount(indices, weights=tf, minlength=n_docs).astype(np.int32)
    return Postings(indptr, indices, tf, doc_len, {"title": title} if fields else {})


def _truth(postings, terms, params, mask, k):
    """The unconstrained ranking of every document, filtered in Python, cut to k."""
    scores, matched = reference.score_dense(postings, terms, params)
    ranked = sorted((d for d in range(postings.n_docs) if matched[d] and scores[d] > 0),
                    key=lambda d: (-scores[d], d))
    kept = [d for d in ranked if mask is None or mask[d]][:k]
    return kept, [scores[d] for d in kept]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_scorers_equal_the_unmasked_ranking_filtered_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    n_docs = int(rng.integers(20, 400))
    p = _random_postings(rng, n_docs, 30)
    params = BM25Params(k1=1.2, b=0.7, field_weights=(("title", 2.0),)) if seed % 2 else BM25Params()
    queries = [rng.choice(30, size=int(rng.integers(1, 6)), replace=False) for _ in range(12)]
    batch = QueryBatch.from_lists(queries)
    density = [0.0, 0.02, 0.3, 0.9, 1.0]
    masks = [None if q % 4 == 3 else rng.random(n_docs) < density[q % len(density)] for q in range(12)]
    for k in (1, 5, n_docs + 3):  # k larger than every allowed set
        got_ref = reference.score_topk(p, batch, params, k, allowed=masks)
        got_nb = cpu.score_topk(p, batch, params, k, allowed=masks)
        for q in range(12):
            terms = batch.terms[batch.indptr[q]:batch.indptr[q + 1]]
            ids, scores = _truth(p, terms, params, masks[q], k)
            for got in (got_ref, got_nb):
                n = int(got.counts()[q])
                assert got.ids[q, :n].tolist() == ids
                assert got.scores[q, :n].tobytes() == np.asarray(scores, dtype=np.float64).tobytes()
                assert (got.ids[q, n:] == -1).all()


@pytest.mark.slow
def test_one_shared_mask_and_a_bad_mask():
    rng = np.random.default_rng(9)
    p = _random_postings(rng, 50, 10, fields=False)
    batch = QueryBatch.from_lists([[0, 1], [2, 3, 4]])
    mask = rng.random(50) < 0.5
    a = cpu.score_topk(p, batch, BM25Params(), 60, allowed=mask)
    b = cpu.score_topk(p, batch, BM25Params(), 60, allowed=[mask, mask])
    assert np.array_equal(a.ids, b.ids) and (a.ids[a.ids >= 0] < 50).all() and mask[a.ids[a.ids >= 0]].all()
    with pytest.raises(ValueError):
        reference.score_topk(p, batch, BM25Params(), 5, allowed=[mask])
    with pytest.raises(ValueError):
        cpu.score_topk(p, batch, BM25Params(), 5, allowed=mask.astype(np.int8))


# -- the engine ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("syntax"), random_docs(11, 250, vocab=40))


@pytest.fixture(scope="module", params=["numpy", "numba"])
def retriever(ws, request):
    return Retriever.open(ws, backend=request.param)


def _texts(r):
    """Every document's indexed texts (title, body): the slow truth reads them all."""
    _td, texts, _ph = r.scorer.unit_access("document")
    return [texts(d) for d in range(r.index.n_units)]


def _satisfies(texts, cons):
    for item in cons.active:
        held = phrase_in(item.runs, texts)
        if held != item.positive:
            return False
    return True


QUERIES = ['"twin digital" model', 'model -twin', '+ocean heat', '"model sensor" -"ocean heat" water',
           'fidelity +sensor -bridge -leak', '"the twin" sensor', '"sensor" +model', 'ocean +twin9 heat']


@pytest.mark.parametrize("query", QUERIES)
def test_constrained_hits_are_the_unconstrained_ranking_restricted(retriever, query):
    scored, cons = read_syntax(query)
    texts = _texts(retriever)
    allowed = [d for d in range(len(texts)) if _satisfies(texts[d], cons)]
    full = retriever.rank_many([scored], k=10_000).topk
    keys = retriever.index.citekeys
    truth = [(int(d), s) for d, s in zip(full.ids[0], full.scores[0]) if d >= 0 and d in set(allowed)]
    for k in (3, len(truth) + 5):
        top = retriever.rank_many([query], k=k).topk
        n = int(top.counts()[0])
        assert [(int(d), s) for d, s in zip(top.ids[0, :n], top.scores[0, :n])] == truth[:k]
        assert np.asarray(top.scores[0, :n]).tobytes() == np.asarray([s for _d, s in truth[:k]]).tobytes()
    # every phrase hit holds the phrase, no hit holds an excluded word; every allowed scoring source came back
    for d in top.ids[0, :n]:
        for item in cons.active:
            assert phrase_in(item.runs, texts[d]) == item.positive, (keys[d], item)


def test_a_batch_mixing_constrained_and_plain_queries_equals_one_at_a_time(ws):
    r = Retriever.open(ws, backend="numba")
    queries = QUERIES * 5 + ["twin model sensor", "ocean heat"] * 10
    batch = r.rank_many(queries, k=7).topk
    for q, query in enumerate(queries[:10] + queries[-2:]):
        row = q if q < 10 else len(queries) - 2 + (q - 10)
        one = Retriever.open(ws, backend="numpy").rank_many([query], k=7).topk
        assert batch.ids[row].tolist() == one.ids[0].tolist()
        assert batch.scores[row].tobytes() == one.scores[0].tobytes()


def test_search_notes_and_errors_through_the_engine(ws):
    r = Retriever.open(ws)
    resp = r.search("heat +the", k=3)
    assert any(n.kind == "constraint" for n in resp.notes)
    with pytest.raises(UsageError, match="unbalanced quotes"):
        r.search('"twin model')


def test_explain_says_which_constraint_a_source_met(ws):
    from chitragupta.engine.search.explain import explain

    r = Retriever.open(ws)
    query = '"model sensor" +water -leak'
    top = r.rank_many([query], k=1).topk
    key = r.index.citekeys[int(top.ids[0, 0])]
    ex = explain(r, query, key)
    assert ex.rank == 1 and [c["found"] for c in ex.constraints] == \
        ["phrase found", "required present", "excluded word absent"]
    texts = _texts(r)
    bad = next(d for d in range(len(texts)) if phrase_in((b"leak",), texts[d]))
    ex = explain(r, query, r.index.citekeys[bad])
    assert ex.rank is None and ex.constraints[2]["found"] == "excluded word present"
    assert not ex.constraints[2]["met"]
    p = run_main("explain", "-w", str(ws), query, "--citekey", key, "--json")
    assert p.returncode == 0, p.stderr
    assert [c["met"] for c in json.loads(p.stdout)["constraints"]] == [True, True, True]
    p = run_main("explain", "-w", str(ws), query, "--citekey", r.index.citekeys[bad])
    assert p.returncode == 0 and "excluded word present (NOT met)" in p.stdout


def test_syntax_rows_finds_exactly_the_queries_that_read_syntax():
    import random

    from chitragupta.engine.search.constraints import syntax_rows

    rng = random.Random(3)
    alpha = ["a", "bc", "-", "+", '"', " ", "\n", "é", "1", "\t", "ñ-", "\u00a0"]
    for _ in range(2000):
        batch = ["".join(rng.choice(alpha) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 6))]
        want = []
        for q, query in enumerate(batch):
            try:
                if read_syntax(query)[1] is not None:
                    want.append(q)
            except UsageError:
                want.append(q)
        # every query that reads syntax (or is refused for it) is found; the rest read as plain text
        found = syntax_rows(batch)
        assert set(want) <= set(found)
        assert all(read_syntax(batch[q]) == (batch[q], None) for q in range(len(batch))
                   if q not in found)


def test_a_batch_without_syntax_plans_as_before(ws):
    r = Retriever.open(ws)
    plan = r.scorer.plan(["CD4 + T cell", "covid-19 model", "twin"], syntax=True)
    assert plan.constraints is None and plan.scored is plan.queries
    assert r.scorer.allowed("document", r.scorer.plan(["heat +the"], syntax=True)) is None  # no mask
    # a plan asked for no syntax (a sweep, the tokenizer's helpers) reads quotes and signs as plain text
    plain = r.plan(['"twin model" -ocean'])
    assert plain.constraints is None and plain.terms == [["twin", "model", "ocean"]]


@pytest.mark.slow
def test_passages_take_the_same_constraints(tmp_path):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.text.sidecar import dump_sidecar, join_items

    rng = np.random.default_rng(4)
    words = "soil yield biochar microbe water heat twin model sensor of the".split()
    docs = {}
    for j in range(6):
        docs[f"p{j}"] = [{"text": " ".join(rng.choice(words, size=12)), "label": "text", "page": 1} for _ in range(8)]
    root = make_workspace(tmp_path, [{"_id": key, "title": "Soil", "text": join_items(items)}
                                     for key, items in docs.items()])
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 3\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for key, items in docs.items():
            (w.root / led.get(key).parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    r = Retriever.open(root, backend="numba")
    for query in ['"soil yield" heat', 'biochar -water', 'twin +model -"of the soil"']:
        scored, cons = read_syntax(query)
        full = r.rank_many([scored], 10_000, unit="passage", max_per_source=100)
        got = r.rank_many([query], 10_000, unit="passage", max_per_source=100)
        pidx = r.passage_index()

        def text(u):
            return (docs[pidx.citekeys[int(pidx.p_doc[u])]][int(pidx.p_item[u])]["text"],)

        want = [(int(u), s) for u, s in zip(full.topk.ids[0], full.topk.scores[0])
                if u >= 0 and _satisfies(text(int(u)), cons)]
        n = int(got.topk.counts()[0])
        assert [(int(u), s) for u, s in zip(got.topk.ids[0, :n], got.topk.scores[0, :n])] == want and want


def test_a_torch_backend_hands_masked_queries_to_numba(ws):
    pytest.importorskip("torch")
    query = ['"model sensor" -"ocean heat" water', "twin model sensor"]
    torch_r = Retriever.open(ws, backend="torch", device="cpu")
    numba_r = Retriever.open(ws, backend="numba")
    got, want = torch_r.rank_many(query, k=20).topk, numba_r.rank_many(query, k=20).topk
    assert got.ids[0].tolist() == want.ids[0].tolist() and got.scores[0].tobytes() == want.scores[0].tobytes()


def test_query_syntax_false_reads_every_query_as_plain_words(ws, tmp_path):
    """[retrieval].query_syntax = false (what the bench's collections set): quotes and signs are words."""
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.explain import explain

    plain = Retriever.open(Workspace.open(ws, load_config(overrides={"retrieval": {"query_syntax": False}})))
    syntax = Retriever.open(ws)
    for q in ['"twin model" -ocean', 'sensor +fidelity -dash', '"an unbalanced quote']:
        got = plain.rank_many([q], 20)
        want = plain.rank_many([q.replace('"', " ").replace("+", " ").replace("-", " ")], 20)
        assert got.topk.ids.tolist() == want.topk.ids.tolist() and got.topk.scores.tolist() == want.topk.scores.tolist()
        assert explain(plain, q, plain.citekey(0)).constraints == []
    with pytest.raises(UsageError):
        syntax.rank_many(['"an unbalanced quote'], 5)  # the default reads the syntax


# -- how a batch reads it: strict, lenient, plain --------------------------------------------------------
def test_syntax_modes():
    from chitragupta.engine.search.constraints import SYNTAX_MODES, syntax_mode

    assert [syntax_mode(x) for x in (True, False, *SYNTAX_MODES)] == ["strict", "plain", *SYNTAX_MODES]
    with pytest.raises(ValueError, match="allowed: True, False, strict, lenient, plain"):
        syntax_mode("loose")


def test_an_exclusions_only_query_says_how_to_search_for_the_word():
    with pytest.raises(UsageError, match='write the word without the "-" to search for it'):
        read_syntax("-aircraft")


def test_a_lenient_batch_answers_a_malformed_query_as_plain_words_and_the_rest_as_strict(ws):
    r = Retriever.open(ws)
    queries = ['"model sensor" -"ocean heat" water', 'digital "twin model', "twin -", "ocean +twin9 heat"]
    got = r.rank_many(queries, 10, syntax="lenient")
    strict = r.rank_many([queries[0], queries[3]], 10)  # the well-formed ones, read strictly
    plain = r.rank_many([queries[1], queries[2]], 10, syntax="plain")  # the malformed ones, as plain words
    for row, (want, w) in zip([0, 3, 1, 2], [(strict, 0), (strict, 1), (plain, 0), (plain, 1)]):
        assert got.topk.ids[row].tolist() == want.topk.ids[w].tolist()
        assert got.topk.scores[row].tobytes() == want.topk.scores[w].tobytes()
    assert sorted(got.plan.malformed) == [1, 2] and "unbalanced quotes" in got.plan.malformed[1]
    notes = got.notes
    assert [n.text for n in notes[1] if n.kind == "syntax"] == [got.plan.malformed[1] + "; read as plain words"]
    assert not any(n.kind == "syntax" for n in notes[0] + notes[3])
    assert got.plan.narrowed() == [0, 3]
    with pytest.raises(UsageError, match="unbalanced quotes"):
        r.rank_many(queries, 10, syntax="strict")
    assert r.rank_many(queries, 10, syntax="plain").plan.constraints is None
