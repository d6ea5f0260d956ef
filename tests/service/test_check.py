"""Checking a draft against a small built library: a right citation supported with its passage, a wrong
one unsupported with the right source among its alternatives, unknown keys with the keys meant, a source
held by its title alone, works the library's sources cite but it lacks, uncited claims, the thresholds
deciding the statuses, the report's JSON shape, and hybrid's dense side against the vectors by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chitragupta.service.check import MODELS, Model, check, open_engines, score_claims, support

from helpers import DOCS, TOPICS, cli_main, corpus_records, import_records, make_workspace, run_main

AUTHORS = {"ocean": ("Rahmstorf, Stefan", 2015), "vaccine": ("Smith, Jane", 2019), "bridge": ("Tao, Fei", 2018),
           "protein": ("Kuhlbrandt, Werner", 2014), "llm": ("Ji, Ziwei", 2023), "soil": ("Smith, Adam", 2019)}


def _records():
    recs = [{"_id": key, "title": f"A study of {key}", "text": TOPICS[key], "authors": [who], "year": year}
            for key, (who, year) in AUTHORS.items()]
    recs.append({"_id": "ghost", "title": "Glacier melt and sea level", "text": "Glaciers melt as the climate warms."})
    return recs + DOCS  # four papers whose reference lists cite works the library lacks


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> Path:
    root = make_workspace(tmp_path_factory.mktemp("check"), _records())
    (root / "content" / "parsed" / "ghost.txt").unlink()  # the ledger says parsed; the text is gone
    assert run_main("index", "-w", root).returncode == 0
    return root


def _sentence(topic: str) -> str:
    return TOPICS[topic].split(". ")[0].rstrip(".")


def test_a_right_citation_is_supported_and_a_wrong_one_is_not(lib):
    text = (f"{_sentence('vaccine')} \\cite{{vaccine}}.\n\n"
            f"{_sentence('soil')} \\citep{{protein}}.\n")
    rep = check(lib, text, fmt="latex")
    right, wrong = rep.citations
    assert rep.engine == "bm25" and rep.notes == []
    assert (right.key, right.line, right.status) == ("vaccine", 1, "supported")
    assert right.evidence is not None and "measles" in right.evidence.text and right.evidence.page is None
    assert {"vaccination", "measles"} <= set(right.evidence.words)
    assert (wrong.key, wrong.line, wrong.status) == ("protein", 3, "unsupported")
    assert wrong.alternatives[0][0] == "soil" and wrong.alternatives[0][1] >= MODELS["bm25"].supported
    assert all(s > wrong.support for _k, s, _e in wrong.alternatives)
    assert 0 <= wrong.support < right.support <= 1
    assert rep.exit_code == 3 and check(lib, text.split("\n\n")[0], fmt="latex").exit_code == 0


def test_the_thresholds_decide_the_status():
    x = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    m = Model((0.0, 2.0, 2.0), weak=0.5, supported=0.9, uncited=0.9)
    assert support(x, m) == pytest.approx([0.5, 1 / (1 + np.exp(-4))])


def test_statuses_follow_a_model_given(lib):
    weak_only = dict(MODELS, bm25=Model(MODELS["bm25"].weights, weak=0.0, supported=1.0, uncited=1.0))
    rep = check(lib, f"{_sentence('vaccine')} [@vaccine; @protein].", fmt="markdown", models=weak_only)
    assert [f.status for f in rep.citations] == ["weak", "weak"]


def test_unknown_keys_name_the_keys_meant(lib):
    text = ("Ocean heat rose [@Ocean]. Vaccines work [@vacine]. Cohorts were followed [@smith2019vaccine]. "
            "Fields were fertilised [@smith2019soil]. Nothing like it [@zzzzqqqq].")
    got = {f.key: (f.status, f.did_you_mean, f.support) for f in check(lib, text, fmt="markdown").citations}
    assert got["Ocean"][:2] == ("unknown", ["ocean"]) and got["Ocean"][2] is None
    assert "vaccine" in got["vacine"][1]
    assert got["smith2019vaccine"][1][:2] == ["vaccine", "soil"]  # both Smiths of 2019; the title word first
    assert got["smith2019soil"][1][:2] == ["soil", "vaccine"]
    assert got["zzzzqqqq"] == ("unknown", [], None)


def test_a_work_the_library_lacks_but_its_sources_cite_is_named(lib):
    rep = check(lib, "Residual networks train deep models well [@he2016deep].", fmt="markdown")
    assert rep.citations[0].status == "unknown"
    note = next(n for n in rep.notes if "he2016deep" in n)
    assert "cited by 3 of your sources" in note and "missing --min 1 --bib" in note


def test_a_source_held_by_its_title_alone_is_no_text(lib):
    rep = check(lib, "Glacier melt raises the sea level [@ghost].", fmt="markdown")
    f = rep.citations[0]
    assert (f.status, f.evidence) == ("no-text", None) and f.support > 0  # its title still bears on the claim
    assert any("ghost is indexed on its title alone" in n for n in rep.notes)


def test_uncited_claims_get_candidates_and_other_sentences_none(lib):
    text = (f"{_sentence('soil')}.\n\nWe thank the anonymous reviewers for their careful reading of this work.\n\n"
            f"Short sentence here.\n\n{_sentence('bridge')} \\cite{{bridge}}.\n")
    rep = check(lib, text, fmt="latex")
    assert [(u.line, u.candidates[0][0]) for u in rep.uncited] == [(1, "soil")]
    assert all(s >= MODELS["bm25"].weak for _k, s, _e in rep.uncited[0].candidates)


def test_the_report_has_the_documented_shape(lib):
    rep = check(lib, f"{_sentence('llm')} [@llm; @nothere].\n\n{_sentence('ocean')}.\n", fmt="markdown",
                passages=True)
    d = rep.to_dict()
    assert set(d) == {"citations", "uncited", "engine", "notes"} and d["engine"] == "bm25"
    for c in d["citations"]:
        assert set(c) == {"key", "line", "sentence", "status", "support", "evidence", "alternatives", "did_you_mean"}
        assert c["evidence"] is None or set(c["evidence"]) == {"text", "page"}
        assert all(set(a) == {"citekey", "support"} for a in c["alternatives"])
    assert d["citations"][0]["sentence"] == f"{_sentence('llm')} [@llm; @nothere]."
    assert [u["line"] for u in d["uncited"]] == [3]
    assert set(d["uncited"][0]) == {"line", "sentence", "candidates"}
    assert rep.uncited[0].candidates[0][2] is not None  # passages=True: the candidates' evidence too


def test_hybrid_without_an_embedding_index_is_bm25_with_a_note(lib):
    rep = check(lib, "Ocean heat rose [@ocean].", engine="hybrid")
    assert rep.engine == "bm25" and any("no embedding index" in n for n in rep.notes)
    with pytest.raises(Exception, match="allowed: auto, bm25, hybrid"):
        check(lib, "x", engine="dense")


def test_the_cited_source_is_scored_whatever_its_rank(lib):
    engines = open_engines(lib, "bm25")
    row = engines.bm25.index.doc_id("protein")
    sc = score_claims(engines, [_sentence("soil")], [[row]], depth=1)
    assert sc.d.tolist() == [engines.bm25.index.doc_id("soil"), row]  # the top one, then the cited one
    assert sc.x[0].tolist() == [1.0, 1.0, pytest.approx(1.0)] and sc.x[1, 1] == 0.0


@pytest.mark.slow
def test_hybrid_adds_the_cosine_of_the_claim_and_the_best_chunk(tmp_path, encoder):
    from chitragupta.enrich.search import EmbedSearcher

    root = import_records(tmp_path / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    engines = open_engines(root, "auto")
    assert engines.name == "hybrid"
    claims = ["coral reefs bleach as the ocean warms", "fertiliser and soil microbes"]
    rows = [[engines.bm25.index.doc_id("mixed")], [engines.bm25.index.doc_id("llm")]]
    sc = score_claims(engines, claims, rows)
    assert sc.x.shape[1] == 5
    e = EmbedSearcher.open(root, device="cpu")
    qv = e.encode(claims)
    keys = [e.store.citekeys[d] for d in e.store.chunk_doc]
    for i, (q, d) in enumerate(zip(sc.q.tolist(), sc.d.tolist())):
        key = engines.bm25.citekey(d)
        by_hand = max(float(e.store.vectors[j] @ qv[q]) for j in range(len(keys)) if keys[j] == key)
        best = max(float(v @ qv[q]) for v in e.store.vectors)
        assert sc.x[i, 3] == pytest.approx(by_hand, abs=1e-5) and sc.x[i, 4] == pytest.approx(by_hand - best, abs=1e-5)
    assert check(root, "Coral reefs bleach as the ocean warms [@oceanlong].").engine == "hybrid"
