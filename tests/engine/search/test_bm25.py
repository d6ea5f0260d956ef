"""The library API: Retriever.search / search_many, notes, errors, snippets."""

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.query import QueryPlan
from chitragupta.engine.search.results import SearchResult
from chitragupta.errors import UsageError

from helpers import make_workspace


@pytest.fixture()
def retriever(tmp_path):
    docs = [
        {"_id": "b-key", "title": "Digital twin of a bridge", "text": "A digital twin (DT) monitors the deck. " * 3},
        {"_id": "a-key", "title": "Digital twin of a bridge", "text": "A digital twin (DT) monitors the deck. " * 3},
        {"_id": "c-key", "title": "Soil microbes", "text": "Soil microbes fix nitrogen; ai_model outputs. " + "filler " * 200
         + "later the twin appears beside the bridge model."},
        {"_id": "d-key", "title": "Ocean heat", "text": "Ocean heat content rose."},
    ]
    return Retriever.open(make_workspace(tmp_path, docs))


def test_hits_ties_and_types(retriever):
    resp = retriever.search("digital twin bridge", k=10)
    keys = [h.citekey for h in resp.hits]
    assert keys[:2] == ["a-key", "b-key"]  # identical documents tie; citekey ascending
    assert resp.hits[0].score == resp.hits[1].score
    assert isinstance(resp.hits[0], SearchResult) and resp.hits[0].title == "Digital twin of a bridge"
    assert resp.hits[0].page is None and resp.hits[0].passage is None
    assert "digital twin" in resp.hits[0].snippet.lower()
    assert set(keys) == {"a-key", "b-key", "c-key"}


def test_snippet_finds_a_late_match_on_the_word_boundary(retriever):
    hit = [h for h in retriever.search("twin", k=10) if h.citekey == "c-key"][0]
    assert "the twin appears" in hit.snippet
    hit = retriever.search("ai", k=1).hits[0]
    assert hit.citekey == "c-key" and "ai_model" in hit.snippet


def test_k_validation(retriever):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(UsageError, match="k must be an integer >= 1"):
            retriever.search("twin", k=bad)
    assert len(retriever.search("twin", k=100)) == 3  # k larger than the corpus


def test_queries_without_indexable_terms(retriever):
    for q in ("the of and", "!!! ???", "", "a b c"):
        resp = retriever.search(q)
        assert resp.hits == []
        kinds = [n.kind for n in resp.notes]
        assert "no-terms" in kinds
    resp = retriever.search("the twin")
    assert any(n.kind == "dropped" and "the" in n.text for n in resp.notes)
    resp = retriever.search("twin xyzzyword")
    assert any(n.kind == "unknown-terms" and "xyzzyword" in n.text for n in resp.notes)


def test_search_many_equals_search_and_duplicates_count_once(retriever):
    qs = ["digital twin", "ocean heat", "soil", "twin twin twin digital"]
    many = retriever.search_many(qs, k=5, snippet_chars=None)
    for q, resp in zip(qs, many):
        single = retriever.search(q, k=5)
        assert [(h.citekey, h.score, h.snippet) for h in resp] == [(h.citekey, h.score, h.snippet) for h in single]
    assert [h.score for h in many[0]] == [h.score for h in many[3]]


def test_long_query(retriever):
    resp = retriever.search("twin " * 20000 + " ".join(f"w{i}" for i in range(2000)))
    assert len(resp) == 3


def test_numpy_backend_same_results(tmp_path, retriever):
    ref = Retriever(retriever.workspace, retriever.scorer.opened["document"], backend="numpy")
    for q in ("digital twin bridge", "soil microbes nitrogen", "heat"):
        assert [(h.citekey, h.score) for h in ref.search(q)] == [(h.citekey, h.score) for h in retriever.search(q)]


def test_batched_tokenization_equals_the_tokenizer(retriever):
    from chitragupta.engine.text.tokenize import query_terms
    from hypothesis import given, settings
    from hypothesis import strategies as st

    index = retriever.index
    words = index.vocab.to_list() + ["the", "a", "x", "İstanbul", "ai_model", "naïve"]

    @given(st.lists(st.lists(st.sampled_from(words + [" ", ", ", "\n", "-", "é"]), max_size=12).map("".join),
                    min_size=0, max_size=80))
    @settings(max_examples=100, deadline=None)
    def check(queries):
        want = index.query_batch([query_terms(q)[0] for q in queries])
        got = QueryPlan(queries, index).batch
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.terms, want.terms)

    check()


def test_demo_fixture_backends_agree_and_find_the_judged_papers(demo_workspace):
    from chitragupta.engine.library.demo.build import load_queries

    queries = load_queries()
    fast = Retriever.open(demo_workspace)
    slow = Retriever.open(demo_workspace, backend="numpy")
    texts = [q["text"] for q in queries]
    a, b = fast.rank_many(texts, 10).topk, slow.rank_many(texts, 10).topk
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)
    for q, resp in zip(queries, fast.search_many(texts, k=3)):
        assert set(q["relevant"]) & {h.citekey for h in resp.hits}, q
