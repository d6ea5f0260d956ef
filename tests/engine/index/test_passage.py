"""The reference cut in the document index, evidence, --log, and the passage unit, on sidecars the
tests write themselves."""

import json

import numpy as np
import pytest
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.query import QueryPlan
from chitragupta.engine.text.sidecar import dump_sidecar, join_items
from chitragupta.errors import UsageError

from helpers import PAPERS, import_records, make_workspace, run_cli, sidecar_item


@pytest.fixture()
def ws(tmp_path):
    records = [{"_id": k, "title": items[0]["text"], "text": join_items(items)} for k, items in PAPERS.items()]
    records.append({"_id": "gamma2019plain", "title": "A pdftotext paper on soil yield",
                    "text": "soil yield maize microbiome plain text. References [1] digital twin bridge."})
    root = make_workspace(tmp_path, records)
    # short test paragraphs: a floor of 5 tokens keeps "short line" out and the table in
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 5\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for key, items in PAPERS.items():
            (w.root / led.get(key).parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    return w


def test_reference_list_is_neither_indexed_nor_shown(ws):
    r = Retriever.open(ws)
    # "vaccination" and "okafor" only occur in alpha's reference list
    assert r.search("vaccination okafor").hits == []
    assert "okafor" not in r.index.vocab.to_list()
    hit = {h.citekey: h for h in r.search("digital twin bridge", k=5)}
    assert "beta2021soil" not in hit  # its only mention is in its reference list
    assert "gamma2019plain" in hit  # no sidecar: nothing cut, as the spec says
    assert "[1]" not in hit["alpha2020twin"].snippet


def test_snippet_pages_come_from_the_sidecar(ws):
    hit = Retriever.open(ws).search("freeze thaw winters", k=1).hits[0]
    assert hit.citekey == "alpha2020twin" and hit.page == 3


def test_corrupt_sidecar_is_reported_and_nothing_else_disturbed(ws):
    with Ledger(ws.ledger_path) as led:
        side = (ws.root / led.get("beta2021soil").parsed_path).with_suffix(".passages.json")
    side.write_text("{not json")
    r = Retriever.open(ws)
    resp = r.search("digital twin bridge", k=5)
    notes = [n.text for n in resp.notes if n.kind == "sidecar"]
    assert notes and "beta2021soil" in notes[0] or "passages.json" in notes[0]
    assert "beta2021soil" in {h.citekey for h in resp.hits}  # indexed from its .txt, uncut
    p = r.search("soil microbiome", k=5, unit="passage")
    assert p.hits and "beta2021soil" not in {h.citekey for h in p.hits}  # its sidecar is skipped, its .txt not split
    assert any(n.kind == "sidecar" and "beta2021soil" in n.text for n in p.notes)
    # the notes also come from the cache
    again = Retriever.open(ws)
    assert any(n.kind == "sidecar" for n in again.index_notes())


@pytest.mark.parametrize("bad", ['"a string"', '[{"text": "x"}]', '[{"text": "x", "label": "text", "page": -2}]',
                                 '[1, 2]', '[{"label": "text"}]'])
def test_sidecar_shapes_rejected(ws, bad):
    from chitragupta.engine.text.sidecar import SidecarError, read_sidecar

    with Ledger(ws.ledger_path) as led:
        side = (ws.root / led.get("alpha2020twin").parsed_path).with_suffix(".passages.json")
    side.write_text(bad)
    with pytest.raises(SidecarError):
        read_sidecar(side)
    resp = Retriever.open(ws).search("twin", k=5)
    assert "alpha2020twin" in {h.citekey for h in resp.hits}


def test_passage_unit_hits_are_whole_paragraphs_with_page_and_item(ws):
    r = Retriever.open(ws)
    resp = r.search("soil microbiome yield biochar", k=10, unit="passage")
    assert resp.unit == "passage" and resp.hits
    for h in resp.hits:
        if h.citekey == "gamma2019plain":  # no sidecar: its text's one paragraph, no pages
            assert (h.passage, h.page) == (0, None) and h.snippet.startswith("soil yield maize microbiome")
            continue
        assert h.passage is not None and h.snippet == PAPERS[h.citekey][h.passage]["text"]
        assert h.page == PAPERS[h.citekey][h.passage]["page"]
        assert PAPERS[h.citekey][h.passage]["label"] not in ("title", "section_header")
    assert sum(h.citekey == "beta2021soil" for h in resp.hits) == 3  # the cap, default 3
    assert "gamma2019plain" in {h.citekey for h in resp.hits}
    assert not [n for n in resp.notes if n.kind in ("no-passage", "no-passages")]


def test_passage_floor_and_headings(ws):
    pidx = Retriever.open(ws).passage_index()
    got = {(pidx.citekeys[int(d)], int(i)) for d, i in zip(pidx.p_doc, pidx.p_item)}
    # alpha: the long abstract paragraph, the table, the winters paragraph; "short line" under the floor,
    # headings and the reference entry never
    assert got == {("alpha2020twin", 2), ("alpha2020twin", 4), ("alpha2020twin", 5),
                   ("beta2021soil", 1), ("beta2021soil", 2), ("beta2021soil", 3), ("beta2021soil", 4),
                   ("gamma2019plain", 0)}


def test_cap_promotes_another_source(tmp_path, ws):
    (ws.root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 5\nmax_passages_per_source = 1\n")
    r = Retriever.open(Workspace.open(ws.root))
    resp = r.search("soil microbiome yield biochar twin", k=3, unit="passage")
    assert [h.citekey for h in resp.hits] == sorted({h.citekey for h in resp.hits}, key=[h.citekey for h in resp.hits].index)
    assert {h.citekey for h in resp.hits} == {"alpha2020twin", "beta2021soil", "gamma2019plain"}


def test_passage_cap_is_exact_against_a_full_ranking(ws):
    r = Retriever.open(ws)
    pidx = r.passage_index()
    batch = QueryPlan(["soil yield twin"], pidx).batch
    full = r.scorer.score("passage", batch, pidx.n_passages)
    want, per = [], {}
    for u in full.ids[0]:
        if u < 0:
            break
        d = int(pidx.p_doc[u])
        if per.get(d, 0) < 2:
            per[d] = per.get(d, 0) + 1
            want.append(int(u))
    got = r.scorer.capped(batch, 3, 2)
    assert got.ids[0].tolist() == (want + [-1] * 3)[:3]


def test_passage_trec_ids_and_log(ws, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"_id": "q1", "text": "soil microbiome"}) + "\n" + json.dumps({"_id": "q2", "text": "the"}) + "\n")
    run = tmp_path / "run.trec"
    p = run_cli("search", "-w", ws.root, "--queries", q, "--run", run, "--unit", "passage", "--log", "my draft/1",
                check=True)
    ids = [line.split()[2] for line in run.read_text().splitlines()]
    assert ids and all("#" in i for i in ids)
    p = run_cli("evidence", "-w", ws.root, "freeze thaw", "--citekey", "alpha2020twin", "--log", "my draft/1", check=True)
    log = next((ws.root / "content" / "dossiers").iterdir()) / "retrieval.md"
    lines = log.read_text().splitlines()
    assert lines[0] == "| time | command | unit | query | expanded | k | hits | payload chars |"
    assert len(lines) == 2 + 3  # header, rule, two batch rows, one evidence row
    assert "| search --queries | passage | soil microbiome |" in lines[2]
    assert "| evidence | evidence | freeze thaw |" in lines[4]
    assert (ws.root / "content" / "dossiers").resolve() in log.resolve().parents


def test_evidence(ws):
    r = Retriever.open(ws)
    resp = r.evidence("sensor rate strain", "alpha2020twin", n=2, width=60)
    assert resp.hits and any("\n| sensor | rate |\n|---|---|\n| strain | 1 Hz |\n| tilt | 10 Hz |" in h.snippet
                             for h in resp.hits)
    assert all("[1]" not in h.snippet for h in resp.hits)
    with pytest.raises(UsageError, match="did you mean: alpha2020twin"):
        r.evidence("x", "alpha2020twn")
    p = run_cli("evidence", "-w", ws.root, "twin", "--citekey", "nope")
    assert p.returncode == 1 and "unknown citekey 'nope'" in p.stderr


def test_corpus_without_sidecars_says_so(tmp_path):
    root = make_workspace(tmp_path, [{"_id": "a", "title": "A", "text": "plain words only here"}])
    resp = Retriever.open(root).search("plain words", unit="passage")
    assert resp.hits == [] and any(n.kind == "no-passages" for n in resp.notes)


def test_passage_index_incremental_equals_fresh(ws):
    from chitragupta.engine.index.manage import refresh

    first = refresh(ws, unit="passage")
    with Ledger(ws.ledger_path) as led:
        side = (ws.root / led.get("beta2021soil").parsed_path).with_suffix(".passages.json")
    items = PAPERS["beta2021soil"][:3] + [sidecar_item("A brand new paragraph about quasar spectra and galaxies seen "
                                             "through a telescope over many clear nights in winter", "text", 9)]
    side.write_text(dump_sidecar(items))
    inc = refresh(ws, unit="passage")
    assert inc.report.reused == 2 and inc.report.retokenized == 1
    fresh = refresh(ws, unit="passage", force=True)
    for name in ("indptr", "indices", "tf", "doc_len", "p_doc", "p_item"):
        a, b = getattr(inc.index, "postings").__dict__.get(name), None
    for attr in ("p_doc", "p_item"):
        assert np.array_equal(getattr(inc.index, attr), getattr(fresh.index, attr))
    for attr in ("indptr", "indices", "tf", "doc_len"):
        assert np.array_equal(getattr(inc.index.postings, attr), getattr(fresh.index.postings, attr))
    assert inc.index.vocab.to_list() == fresh.index.vocab.to_list()


# -- plain text (pdftotext, a full-text import as files): paragraphs with their pages ---------------------
PLAIN_PAGES = [
    "Abstract\n" + "We calibrate a digital twin of a bridge deck every week against strain gauges and tilt\n"
    "sensors mounted on the girders, and report how its stiffness estimates drift.\n"
    "1 Introduction\n" + "Bridge owners inspect decks by eye every few years, and a model calibrated once at\n"
    "handover drifts away from the structure as bearings seize and tendons corrode slowly.\n",
    "2 Method\n" + "Each night the loop reads the gauges, fits six stiffness parameters by Bayesian updating\n"
    "and flags a span whose fitted stiffness moves by more than two standard deviations.\n",
]


@pytest.fixture()
def plain_ws(tmp_path):
    records = [{"_id": "delta2022deck", "title": "A weekly twin of a bridge deck", "text": "\f".join(PLAIN_PAGES)},
               {"_id": "eps2020empty", "title": "Title only", "text": "too short"}]
    root = make_workspace(tmp_path, records)
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 8\n")
    return Workspace.open(root)


def test_plain_text_passages_carry_their_pages_and_items(plain_ws):
    from chitragupta.engine.index.passage import passage_items
    from chitragupta.engine.text.paragraphs import plain_paragraphs

    r = Retriever.open(plain_ws)
    resp = r.search("stiffness gauges bridge", k=10, unit="passage")
    items = plain_paragraphs(r.body("delta2022deck").text)
    assert passage_items(r.body("delta2022deck")) == items
    assert [(h.citekey, h.passage, h.page) for h in resp.hits] and all(h.page in (1, 2) for h in resp.hits)
    for h in resp.hits:  # the whole paragraph (it fits the default width), never a heading
        assert h.snippet == items[h.passage]["text"] and items[h.passage]["label"] == "text"
        assert h.page == items[h.passage]["page"]
    assert {h.passage for h in resp.hits} == {1, 3, 5}
    notes = [n.text for n in resp.notes if n.kind == "no-passage"]
    assert len(notes) == 1 and "eps2020empty" in notes[0] and "8 indexed words" in notes[0]


@pytest.mark.parametrize("width", [0, 40, 90])
def test_a_passage_hit_keeps_the_snippet_width(plain_ws, width):
    r = Retriever.open(plain_ws)
    hits = r.search("seize tendons corrode", k=3, unit="passage", snippet_chars=width).hits
    assert hits and all(len(h.snippet) <= width for h in hits)
    if width:
        assert "corrode" in hits[0].snippet  # the window holding the query's words, not the paragraph's start
    whole = r.evidence("seize", f"delta2022deck#{hits[0].passage}")  # the whole paragraph, through evidence
    assert whole.hits[0].snippet.startswith("Bridge owners") and whole.hits[0].snippet.endswith("slowly.")
    assert (whole.hits[0].page, whole.hits[0].passage, whole.hits[0].score) == (1, hits[0].passage, 1.0)


def test_evidence_of_a_passage_that_is_not_there(plain_ws):
    r = Retriever.open(plain_ws)
    with pytest.raises(UsageError, match="delta2022deck has no passage 99; its items are numbered 0 to 5"):
        r.evidence("x", "delta2022deck#99")
    p = run_cli("evidence", "-w", plain_ws.root, "delta2022deck#3", "calibrates")
    assert p.returncode == 0 and "(page 1)" in p.stdout and "tendons corrode slowly." in p.stdout


def test_imported_packs_are_not_split_and_the_note_says_so(tmp_path):
    root = import_records(tmp_path / "ws", [{"_id": "a", "title": "A", "text": " ".join(["soil yield"] * 30)}])
    resp = Retriever.open(root).search("soil yield", unit="passage")
    assert resp.hits == []
    assert any(n.kind == "no-passages" and "imported" in n.text for n in resp.notes)


def test_plain_passages_update_equals_fresh(plain_ws):
    from chitragupta.engine.index.manage import refresh

    refresh(plain_ws, unit="passage")
    with Ledger(plain_ws.ledger_path) as led:
        txt = plain_ws.root / led.get("delta2022deck").parsed_path
    txt.write_text(txt.read_text() + "\f3 Results\nThe loop flagged a seized bearing after a cold winter, two weeks\n"
                   "before the inspection, and a slow loss of stiffness in one span.\n")
    inc = refresh(plain_ws, unit="passage")
    fresh = refresh(plain_ws, unit="passage", force=True)
    assert inc.report.retokenized == 1 and inc.report.reused == 1
    for attr in ("p_doc", "p_item"):
        assert np.array_equal(getattr(inc.index, attr), getattr(fresh.index, attr))
    for attr in ("indptr", "indices", "tf", "doc_len"):
        assert np.array_equal(getattr(inc.index.postings, attr), getattr(fresh.index.postings, attr))
    hit = Retriever.open(plain_ws).search("seized bearing", unit="passage").hits[0]
    assert (hit.page, hit.snippet[:8]) == (3, "The loop")
