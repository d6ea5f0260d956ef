"""Ranking dials: title/abstract weights, acronym expansion, the stemmer option."""

import math
from collections import Counter

import numpy as np
import pytest
from chitragupta.engine.index.source import FLAG_HAS_ABSTRACT
from chitragupta.engine.library.config import load_config
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.query import QueryPlan
from chitragupta.engine.text.sidecar import dump_sidecar, join_items
from chitragupta.errors import ConfigError
from chitragupta.kernels import BM25Params, reference, score_topk

from helpers import make_workspace, run_cli, run_main
from oracle import tokens


def it(text, label="text"):
    return {"text": text, "label": label, "page": None}


DOCS = {
    "a1": ("Ocean heat and twin models", [it("Abstract", "section_header"), it("ocean heat uptake twin model study"),
                                          it("1 Body", "section_header"), it("model model ocean data filler words")]),
    "a2": ("Soil carbon", [it("ABSTRACT", "section_header"), it("soil carbon model"), it("Methods", "section_header"),
                           it("ocean ocean ocean heat heat model twin")]),
    "a3": ("Twin fidelity", [it("Intro", "section_header"), it("twin fidelity ocean heat model soil")]),
    "a4": ("Unrelated title", []),
}


@pytest.fixture()
def ws(tmp_path):
    records = [{"_id": k, "title": t, "text": join_items(items) if items else "plain text about ocean model"}
               for k, (t, items) in DOCS.items()]
    root = make_workspace(tmp_path, records)
    (root / "config.toml").write_text("[retrieval]\nacronym_expansion = false\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for key, (_t, items) in DOCS.items():
            if items:
                (w.root / led.get(key).parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    return w


def oracle_fields(docs, query, k1, b, wt, wa):
    """BM25 with tf' = tf + (wt - 1) tf_title + (wa - 1) tf_abstract, document length unweighted."""
    full, title, abstract = {}, {}, {}
    for key, (t, items) in docs.items():
        body = [x for x in items if x["label"] != "section_header" or True]
        text = "\n\n".join(x["text"] for x in items) if items else "plain text about ocean model"
        full[key] = tokens(t + "\n" + text)
        title[key] = Counter(tokens(t))
        abs_items, inside = [], False
        for x in items:
            if x["label"] == "section_header":
                if inside:
                    break
                inside = x["text"].lower() == "abstract"
                continue
            if inside:
                abs_items.append(x["text"])
        abstract[key] = Counter(tokens(" ".join(abs_items)))
    n = len(full)
    avgdl = sum(map(len, full.values())) / n
    terms = list(dict.fromkeys(tokens(query)))
    df = {t: sum(t in v for v in full.values()) for t in terms}
    out = []
    for key, toks in full.items():
        c = Counter(toks)
        if not any(c[t] for t in terms):
            continue
        s = 0.0
        for t in terms:
            f = c[t] + (wt - 1) * title[key][t] + (wa - 1) * abstract[key][t]
            if c[t] and f > 0:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(toks) / avgdl))
        if s > 0:
            out.append((key, s))
    return sorted(out, key=lambda x: (-x[1], x[0]))


def test_field_counts_never_exceed_the_document_and_abstracts_are_counted(ws):
    r = Retriever.open(ws)
    p = r.index.postings
    for f in ("title", "abstract"):
        assert (np.asarray(p.fields[f]) <= np.asarray(p.tf)).all() and np.asarray(p.fields[f]).sum() > 0
    assert r.index.count_flag(FLAG_HAS_ABSTRACT) == 2
    out = run_cli("index", "-w", ws.root, "--force", "-v", check=True).stdout
    assert "2 of 4 documents have an Abstract section in their docling sidecar" in out


@pytest.mark.parametrize("wt, wa", [(2.0, 1.0), (1.0, 3.0), (0.0, 0.5), (3.0, 0.0)])
def test_weights_follow_the_formula(ws, wt, wa):
    (ws.root / "config.toml").write_text(f"[retrieval]\nacronym_expansion = false\nweight_title = {wt}\n"
                                         f"weight_abstract = {wa}\n")
    r = Retriever.open(Workspace.open(ws.root))
    for q in ("ocean heat", "twin model", "soil carbon ocean", "fidelity"):
        got = [(h.citekey, h.score) for h in r.search(q, k=10)]
        want = oracle_fields(DOCS, q, 1.5, 0.75, wt, wa)
        assert [g[0] for g in got] == [w[0] for w in want], q
        for (_, gs), (_, ws_) in zip(got, want):
            assert math.isclose(gs, ws_, rel_tol=1e-9)


def test_weights_at_one_never_read_a_field_count(ws):
    r = Retriever.open(ws)
    batch = QueryPlan(["ocean heat", "twin model soil", "fidelity carbon"], r.index).batch
    plain = BM25Params(1.5, 0.75)
    at_one = BM25Params(1.5, 0.75, field_weights=(("title", 1.0), ("abstract", 1.0)))
    want = score_topk(r.index.postings, batch, plain, 4, backend="numba")
    # poison the field counts: if the ranker read them at weight 1.0, scores would move
    for f in list(r.index.postings.fields):
        r.index.postings.fields[f] = np.full_like(np.asarray(r.index.postings.fields[f]), 10_000)
    for backend in ("numba", "numpy"):
        got = score_topk(r.index.postings, batch, at_one, 4, backend=backend)
        assert np.array_equal(got.ids, want.ids) and np.array_equal(got.scores, want.scores)


@pytest.mark.slow
def test_weighted_backends_agree(ws):
    r = Retriever.open(ws)
    batch = QueryPlan(["ocean heat", "twin model soil", "fidelity carbon", "model"], r.index).batch
    params = BM25Params(1.2, 0.6, field_weights=(("title", 2.5), ("abstract", 0.0)))
    a = score_topk(r.index.postings, batch, params, 4, backend="numba")
    b = reference.score_topk(r.index.postings, batch, params, 4)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)


@pytest.mark.parametrize("line", ["weight_title = -1", "weight_abstract = nan", "weight_title = inf",
                                  'weight_title = "2"'])
def test_bad_weights_rejected(tmp_path, line):
    p = tmp_path / "c.toml"
    p.write_text(f"[retrieval]\n{line}\n")
    with pytest.raises(ConfigError, match=line.split(" ")[0]):
        load_config(p)


# -- acronym expansion -----------------------------------------------------------------------------

@pytest.fixture()
def acro(tmp_path):
    records = [{"_id": "twin1", "title": "A digital twin of a bridge", "text": "the digital twin tracks strain"},
               {"_id": "dt1", "title": "DT fidelity", "text": "dt fidelity metrics"},
               {"_id": "llm1", "title": "Large language model citations", "text": "a large language model cites"}]
    root = make_workspace(tmp_path, records)
    return Workspace.open(root)


def test_expansion_adds_the_words_and_says_so(acro):
    r = Retriever.open(acro)
    resp = r.search("DT fidelity")
    notes = [n.text for n in resp.notes if n.kind == "expansion"]
    assert notes == ["acronym expansion added: dt -> digital twin"]
    assert resp.terms == ["dt", "fidelity", "digital", "twin"]
    assert "twin1" in {h.citekey for h in resp.hits}
    # the added terms count exactly like typed ones
    typed = r.search("dt fidelity digital twin")
    assert [(h.citekey, h.score) for h in resp.hits] == [(h.citekey, h.score) for h in typed.hits]
    both = r.search("dt llm")
    assert [n.text for n in both.notes if n.kind == "expansion"] == [
        "acronym expansion added: dt -> digital twin, llm -> large language model"]


def test_typed_words_are_not_added_again_and_no_note_when_nothing_added(acro):
    r = Retriever.open(acro)
    resp = r.search("dt digital twin")
    assert not [n for n in resp.notes if n.kind == "expansion"]
    resp = r.search("dt twin")
    assert [n.text for n in resp.notes if n.kind == "expansion"] == ["acronym expansion added: dt -> digital twin"]
    assert resp.terms == ["dt", "twin", "digital"]


def test_workspace_vocabulary_wins_and_one_character_keys_never_expand(acro):
    (acro.content / "acronyms.toml").write_text('[acronyms]\nDT = "data table"\nx = "xylophone"\nfoo = "the of"\n')
    r = Retriever.open(acro)
    resp = r.search("dt x foo")
    assert [n.text for n in resp.notes if n.kind == "expansion"] == ["acronym expansion added: dt -> data table"]
    assert resp.terms == ["dt", "foo", "data", "table"]


def test_switched_off_loads_nothing(acro, monkeypatch):
    import chitragupta.engine.search.scoring as search

    (acro.root / "config.toml").write_text("[retrieval]\nacronym_expansion = false\n")
    (acro.content / "acronyms.toml").write_text("this is not toml [")
    monkeypatch.setattr(search, "load_expander", lambda *a, **k: pytest.fail("loaded while switched off"))
    r = Retriever.open(Workspace.open(acro.root))
    resp = r.search("dt fidelity")
    assert resp.terms == ["dt", "fidelity"] and not [n for n in resp.notes if n.kind == "expansion"]


@pytest.mark.parametrize("text, where", [
    ('[acronyms]\ndt = "digital twin"\nbad key = "x"\n', ":3:"),
    ('[acronyms]\n\ndt = 3\n', ":3:"),
    ('[acronyms\ndt = "x"\n', "line 1"),
    ('[other]\ndt = "x"\n', ":1:"),
])
def test_malformed_vocabulary_names_file_and_line(acro, text, where):
    (acro.content / "acronyms.toml").write_text(text)
    p = run_main("search", "-w", acro.root, "dt")
    assert p.returncode == 1 and "acronyms.toml" in p.stderr and where in p.stderr, p.stderr


def test_expansion_goes_to_stderr_and_the_log(acro):
    p = run_main("search", "-w", acro.root, "DT fidelity", "--log", "draft1")
    assert p.returncode == 0 and "[note] acronym expansion added: dt -> digital twin" in p.stderr
    log = (acro.content / "dossiers" / "draft1" / "retrieval.md").read_text().splitlines()
    assert "| dt -> digital twin |" in log[-1]


def test_init_writes_a_starter_vocabulary(tmp_path):
    run_cli("init", "-w", tmp_path / "w", check=True)
    text = (tmp_path / "w" / "content" / "acronyms.toml").read_text()
    assert "[acronyms]" in text and text.count("#") >= 3


# -- stemming --------------------------------------------------------------------------------------

def test_stemmer_option_rebuilds_and_snippets_find_the_word(tmp_path):
    records = [{"_id": "r1", "title": "Runners", "text": "She runs daily and ran yesterday; running helps."},
               {"_id": "r2", "title": "Other", "text": "nothing related here at all"}]
    root = make_workspace(tmp_path, records)
    r = Retriever.open(root)
    assert r.search("running").hits[0].citekey == "r1"
    assert r.search("run").hits == []
    (root / "config.toml").write_text('[retrieval]\nstemmer = "english"\n')
    r2 = Retriever.open(Workspace.open(root))
    notes = [n.text for n in r2.index_notes()]
    assert any("stemmer" in n and "rebuilding" in n for n in notes), notes
    hit = r2.search("run").hits[0]
    assert hit.citekey == "r1" and "runs" in hit.snippet
    assert "run" in r2.index.vocab.to_list() and "running" not in r2.index.vocab.to_list()


def test_unknown_stemmer_rejected(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[retrieval]\nstemmer = "klingon"\n')
    with pytest.raises(ConfigError, match='"english"'):
        load_config(p)
