"""engine/search/results.py: a batch's top-k turned into citekeys, (doc id, score) pairs and run files (``Ranked``);
and engine/search/searcher.py: ``search`` / ``search_many`` on top of ``rank_many`` (the ``Searcher`` base)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.results import Ranked
from chitragupta.engine.search.runfile import format_run_lines
from chitragupta.engine.search.searcher import Searcher
from chitragupta.errors import UsageError
from chitragupta.kernels.types import TopK

from helpers import make_workspace, random_docs


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return Retriever.open(make_workspace(tmp_path_factory.mktemp("ranked"), random_docs(5, 300, vocab=60)))


def test_ranked_keys_match_the_per_hit_reference(retriever):
    queries = ["twin model sensor", "ocean heat", "the of", "fidelity bridge water"] * 10
    ranked = retriever.rank_many(queries, 7)
    keys = ranked.keys()
    for q in range(len(queries)):
        want = [retriever.index.citekeys[int(d)] for d in ranked.topk.ids[q] if d >= 0]
        assert keys[q] == want
        assert ranked.docids(q) == list(zip(want, [float(s) for s in ranked.topk.scores[q][:len(want)]]))
    assert ranked.unmatched() == 10


KEYS = ["alpha2020", "beta2021", "gamma2019", "delta2018"]


def _ranked(items=None, rows=None, **kw) -> Ranked:
    topk = TopK(ids=np.array([[2, 0, -1], [-1, -1, -1], [1, 3, 0]]),
                scores=np.array([[3.0, 1.5, -np.inf], [-np.inf] * 3, [2.0, 2.0, 0.25]]))
    return Ranked(topk, ["q a", "q b", "q c"], unit=kw.pop("unit", "document"),
                  table=StringTable.from_sorted(sorted(KEYS)), rows=rows, items=items, **kw)


def test_keys_and_docids_name_each_hit_best_first_and_skip_the_padding():
    r = _ranked()
    names = sorted(KEYS)
    assert r.keys() == [[names[2], names[0]], [], [names[1], names[3], names[0]]]
    assert r.docids(0) == [(names[2], 3.0), (names[0], 1.5)] and r.docids(1) == []
    assert r.counts().tolist() == [2, 0, 3]


def test_rows_map_hits_to_the_key_table_and_items_name_a_part():
    rows = np.array([[3, 1, 0], [0, 0, 0], [2, 2, 1]])  # hit -> row of the key table (a passage's source)
    items = np.array([[7, 0, -1], [-1, -1, -1], [1, 4, 9]])
    r = _ranked(items=items, rows=rows, item_field="chunk")
    names = sorted(KEYS)
    assert r.keys() == [[f"{names[3]}#7", f"{names[1]}#0"], [], [f"{names[2]}#1", f"{names[2]}#4", f"{names[1]}#9"]]
    assert r.docids(2)[1] == (f"{names[2]}#4", 2.0)
    lines = b"".join(bytes(c) for c in r.run_chunks(["1", "2", "3"], fmt="jsonl")).decode().splitlines()
    first = json.loads(lines[0])
    assert first == {"qid": "1", "rank": 1, "citekey": names[3], "chunk": 7, "score": 3.0} and len(lines) == 5


def test_run_chunks_equal_the_per_line_writer_with_the_engines_tag():
    r = _ranked(tag="embed")
    got = b"".join(bytes(c) for c in r.run_chunks(["1", "2", "3"])).decode()
    assert got == "".join(x + "\n" for q in range(3) for x in format_run_lines(str(q + 1), r.docids(q), tag="embed"))
    assert b"".join(bytes(c) for c in r.run_chunks(["1", "2", "3"], tag="other")).decode().split()[5] == "other"
    with pytest.raises(UsageError, match="2 query ids for 3 queries"):
        r.run_chunks(["1", "2"])


def test_without_a_plan_there_are_no_terms_or_notes_and_unmatched_counts_empty_rows():
    r = _ranked()
    assert r.batch is None and r.expansions is None
    assert r.terms == [[], [], []] and r.notes == [[], [], []]
    assert r.unmatched() == 1


def test_with_a_plan_terms_notes_and_unmatched_come_from_it(retriever):
    r = retriever.rank_many(["twin zzzzq", "the of"], 5)
    assert r.terms[0] == ["twin", "zzzzq"] and r.unmatched() == 1 and r.batch is r.plan.batch
    assert any("in no indexed document: zzzzq" in n.text for n in r.notes[0])
    assert [n.kind for n in r.notes[1]] == ["dropped", "no-terms"]


class _Resp:
    def __init__(self, notes):
        self.notes = notes


class _Engine(Searcher):
    """What the Searcher base needs of an engine: rank_many, responses and index_notes."""

    def __init__(self):
        self.asked = []

    def rank_many(self, queries, k, *, unit=None, max_per_source=None):
        self.asked.append((list(queries), k, unit, max_per_source))
        return queries

    def responses(self, ranked, *, snippet_chars=None):
        return [_Resp([f"{q}: width {snippet_chars}"]) for q in ranked]

    def index_notes(self, unit):
        return [f"index ({unit})"]


def test_search_calls_pass_the_request_through_and_put_the_index_notes_first():
    e = _Engine()
    many = e.search_many(["a", "b"], 7, unit="passage", snippet_chars=0, max_per_source=2)
    assert [r.notes for r in many] == [["a: width 0"], ["b: width 0"]]  # no index notes on a batch
    one = e.search("c", 3)
    assert one.notes == ["index (None)", "c: width None"]
    assert e.asked == [(["a", "b"], 7, "passage", 2), (["c"], 3, None, None)]
    with pytest.raises(UsageError, match="snippet_chars must be an integer in"):
        e.search("d", 3, snippet_chars=-5)  # checked before the engine is asked
    assert len(e.asked) == 2
