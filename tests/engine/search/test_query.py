"""engine/search/query.py: a batch of queries tokenized, expanded and looked up once (``QueryPlan``, ``parse``).

The batch is the reference's (terms, expansion, vocabulary ids); each query is cut into runs once; the notes
say what was dropped, unknown or expanded.
"""

from __future__ import annotations

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.expand import Expander
from chitragupta.engine.search.query import QueryPlan, parse
from chitragupta.engine.text.tokenize import query_terms

from helpers import indexed_workspace, make_workspace, random_docs


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("query"), random_docs(5, 300, vocab=60))


@pytest.fixture(scope="module")
def retriever(ws):
    return Retriever.open(ws)


ACRONYMS = {"dt": "digital twin", "ml": "machine learning model", "gpu": "graphics processing unit",
            "llm": "large language model", "ocean9": "ocean heat", "zz": "the of"}


def _reference_batch(index, queries, expander):
    terms = [query_terms(q)[0] + (list(expander.expand(q).added) if expander else []) for q in queries]
    return index.query_batch(terms)


@pytest.mark.slow
def test_expansion_in_the_plan_equals_the_reference(retriever):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    index = retriever.index
    expander = Expander(ACRONYMS)
    words = index.vocab.to_list()[:80] + list(ACRONYMS) + ["DT", "Gpu", "the", "a", "x", "naïve", "dt-ml"]

    @given(st.lists(st.lists(st.sampled_from(words + [" ", ", ", "\n", "-"]), max_size=10).map("".join),
                    min_size=32, max_size=90))
    @settings(max_examples=60, deadline=None)
    def check(queries):
        got = QueryPlan(queries, index, expander).batch
        want = _reference_batch(index, queries, expander)
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.terms, want.terms)

    check()


def test_a_query_is_tokenized_expanded_and_looked_up_once(tmp_path, monkeypatch):
    import chitragupta.engine.search.query as query_mod
    from chitragupta.engine.index.strings import StringTable
    from chitragupta.engine.search.expand import Expander

    r = Retriever.open(indexed_workspace(tmp_path))
    calls = {"runs": 0, "expand": 0, "find": 0}
    real_runs, real_expand, real_find = query_mod.runs_bytes, Expander.expand_runs, StringTable.find_many

    def runs(text):
        calls["runs"] += 1
        return real_runs(text)

    def expand(self, rs):
        calls["expand"] += 1
        return real_expand(self, rs)

    def find(self, strings):
        calls["find"] += 1
        return real_find(self, strings)

    monkeypatch.setattr(query_mod, "runs_bytes", runs)
    monkeypatch.setattr(Expander, "expand_runs", expand)
    monkeypatch.setattr(StringTable, "find_many", find)
    resp = r.search("DT twin of the model zzzz", k=5)
    assert calls == {"runs": 1, "expand": 1, "find": 1}, calls
    kinds = {n.kind for n in resp.notes}
    assert {"dropped", "unknown-terms", "expansion"} <= kinds
    assert resp.terms[:3] == ["dt", "twin", "model"] and "digital" in resp.terms


# -- parse: one query read off its runs once -------------------------------------------------------------
KNOWN = {"dt": 0, "twin": 1, "model": 2, "digital": 3}


def _ids(words):
    return [KNOWN.get(w, -1) for w in words]


def test_parse_keeps_distinct_words_in_first_seen_order_and_says_what_it_dropped():
    p = parse("The DT dt twin a x Twin-model zzz", _ids)
    assert p.typed == ("dt", "twin", "model", "zzz")  # lower-cased, distinct, split at the hyphen
    assert p.dropped == ("the", "a", "x")  # a stopword and words shorter than 2 characters
    assert p.ids == (0, 1, 2, -1) and p.unknown == ["zzz"]
    assert p.expansion is None and p.terms == ["dt", "twin", "model", "zzz"]


def test_parse_appends_what_expansion_added_after_the_typed_terms():
    p = parse("The DT twin", _ids, Expander({"dt": "digital twin"}))
    assert p.typed == ("dt", "twin") and p.expansion.added == ("digital",)
    assert p.terms == ["dt", "twin", "digital"] and p.ids == (0, 1, 3)  # added terms looked up with the rest
    assert parse("the of a", _ids).ids == ()  # nothing typed: nothing looked up


def test_plan_notes_say_dropped_no_terms_unknown_and_expansion(retriever):
    plan = QueryPlan(["the of a", "twin zzzzq", "dt twin"], retriever.index, retriever.expander())
    kinds = [[n.kind for n in notes] for notes in plan.notes("document")]
    assert kinds[0] == ["dropped", "no-terms"]
    assert kinds[1] == ["unknown-terms"] and "zzzzq" in plan.notes()[1][0].text
    assert "expansion" in kinds[2] and plan.terms[2][:2] == ["dt", "twin"] and "digital" in plan.terms[2]
    assert "in no indexed passage" in plan.notes("passage")[1][0].text  # the unit named in the note
    assert plan.unmatched() == 1 and len(plan) == 3
    assert QueryPlan(["twin"], retriever.index, None).expansions is None  # expansion off


def test_a_plan_reads_the_syntax_as_asked(retriever):
    queries = ['"twin model" -ocean', 'an "unbalanced quote', "plain words"]
    plain = QueryPlan(queries, retriever.index, syntax="plain")
    assert plain.constraints is None and plain.malformed == {} and plain.narrowed() == []
    lenient = QueryPlan(queries, retriever.index, syntax="lenient")
    assert lenient.scored == ["twin model", queries[1], queries[2]] and list(lenient.malformed) == [1]
    assert lenient.narrowed() == [0] and lenient.terms[1] == plain.terms[1]
    assert QueryPlan(queries[:1], retriever.index, syntax=True).narrowed() == [0]  # True is strict
