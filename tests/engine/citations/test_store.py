"""The stored reference lists (``engine.citations.store``, ``engine.index.references``, the ledger's tables):
parsed in the document index's own pass and kept under each text's fingerprint, what the pass did not read
parsed after it, sources gone dropped, an older workspace's files removed with a note, the kept resolution
current until the ledger or a list changes, and ``index``'s summary line."""

from __future__ import annotations

import json

import pytest
from chitragupta.engine.citations import all_references, build_references, references_of
from chitragupta.engine.library.ledger import Ledger

from helpers import run_main

BODY = [("Introduction. " + "We study reference lists in papers and how they are read by machines. " * 12)] * 6
REF_LINES = ["References",
             "[1] Ada Lovelace and Charles Babbage. 1843. Sketch of the analytical engine. Scientific Memoirs 3.",
             "[2] Grace M. Hopper. 1952. The education of a computer. In Proceedings of the ACM National",
             "Meeting. ACM, 243-249. https://doi.org/10.1145/609784.609818.",
             "[3] Alan Turing. 1950. Computing machinery and intelligence. Mind 59, 236 (1950), 433-460.",
             "[4] Tom B. Brown and Nick Ryder. 2020. Language models are few-shot learners. arXiv:2005.14165.",
             "[5] Claude E. Shannon. 1948. A mathematical theory of communication. Bell System Technical",
             "Journal 27, 3 (1948), 379-423."]


def _pdf_workspace(tmp_path, extra: dict[str, list[list[str]]] | None = None):
    from chitragupta.engine.library.demo.tinypdf import paginate, pdf_bytes
    from chitragupta.engine.library.workspace import Workspace

    papers = tmp_path / "papers"
    papers.mkdir()
    body_pages = paginate(BODY)
    # the list starts a new page and runs over a page break, with a running title and page numbers
    pages = [p + ["Tests of Lists 2024", str(i + 1)] for i, p in enumerate(body_pages)]
    pages.append(["Tests of Lists 2024"] + REF_LINES[:4] + ["9"])
    pages.append(["Tests of Lists 2024"] + REF_LINES[4:] + ["10"])
    (papers / "refs.pdf").write_bytes(pdf_bytes(pages))
    (papers / "plain.pdf").write_bytes(pdf_bytes(paginate(BODY)))
    bib = ["@article{refs/paper, title={With references}, file={refs.pdf}}",
           "@article{plain, title={Without references}, file={plain.pdf}}"]
    for key, pg in (extra or {}).items():
        (papers / f"{key}.pdf").write_bytes(pdf_bytes(pg))
        bib.append(f"@article{{{key}, title={{{key}}}, file={{{key}.pdf}}}}")
    (papers / "bibliography.bib").write_text("\n".join(bib) + "\n", encoding="utf-8")
    ws = Workspace.open(tmp_path)
    from chitragupta.engine.library.sync import sync

    sync(ws)
    return ws


def _refresh(ws):
    from chitragupta.engine.index.manage import refresh

    return refresh(ws, unit="document")


def test_the_index_pass_parses_the_lists_and_the_ledger_keeps_them(tmp_path):
    ws = _pdf_workspace(tmp_path)
    opened = _refresh(ws)
    assert (opened.references.parsed, opened.references.none) == (1, 1)  # parsed as the index read the texts
    rep = build_references(ws, opened)
    assert (rep["sources"], rep["without"], rep["entries"], rep["parsed"]) == (1, 1, 5, 1)
    got = references_of(ws, "refs/paper")
    assert [e.authors[0] for e in got] == ["Lovelace", "Hopper", "Turing", "Brown", "Shannon"]
    assert got[1].doi == "10.1145/609784.609818" and got[3].arxiv == "2005.14165"
    assert got[4].text == ("[5] Claude E. Shannon. 1948. A mathematical theory of communication. Bell System "
                           "Technical Journal 27, 3 (1948), 379-423.")  # over the page break, title and number gone
    assert references_of(ws, "plain") is None and references_of(ws, "nosuchkey") is None
    assert all_references(ws) == {"refs/paper": got}
    assert not (ws.content / "refs").exists() and not (ws.content / "citation_graph.json").exists()
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert set(ledger.reference_lists()) == {"refs/paper", "plain"}  # a source without a list: a row
        assert ledger.get_meta("links")  # the resolution kept
    run_main("index", "--workspace", ws.root, "--force")
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert ledger.get_meta("links") is None  # ``index`` leaves the resolution to the first question
    again = build_references(ws)  # nothing changed: nothing parsed, the kept resolution kept
    assert (again["parsed"], again["entries"]) == (0, 5)


def test_what_the_pass_did_not_read_is_parsed_after_it_and_sources_gone_are_dropped(tmp_path, monkeypatch):
    from chitragupta.engine.index import references as R

    ws = _pdf_workspace(tmp_path)
    build_references(ws, _refresh(ws))
    want = references_of(ws, "refs/paper")
    monkeypatch.setattr(R, "RULES", R.RULES + 1)  # new rules: every stored list is of old ones
    rep = build_references(ws)  # the index is current (nothing read by its pass): parsed from the texts now
    assert rep["parsed"] == 1 and references_of(ws, "refs/paper") == want
    with Ledger(ws.ledger_path) as ledger:
        assert {v[1] for v in ledger.reference_lists().values()} == {R.RULES}
        with ledger.transaction():
            ledger.delete(["plain"])
            ledger.put_references([("ghost", b"x" * 16, R.RULES, [], [])])
    build_references(ws)
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert set(ledger.reference_lists()) == {"refs/paper"}


def test_a_changed_text_is_parsed_again_in_the_pass_and_the_kept_resolution_made_again(tmp_path):
    ws = _pdf_workspace(tmp_path)
    build_references(ws, _refresh(ws))
    with Ledger(ws.ledger_path, create=False) as ledger:
        path, key = ledger.get("refs/paper").parsed_path, ledger.get_meta("links")
    text = (ws.root / path).read_text()
    (ws.root / path).write_text(text.replace("[3] Alan Turing", "[3] Alan M. Turing"))
    opened = _refresh(ws)
    assert (opened.references.parsed, opened.references.none) == (1, 0)  # only the changed text read
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert key and ledger.get_meta("links") is None  # a list written: the kept resolution is stale
    build_references(ws, opened)
    assert references_of(ws, "refs/paper")[2].text.startswith("[3] Alan M. Turing")
    with Ledger(ws.ledger_path, create=False) as ledger:
        assert ledger.get_meta("links") == key


def test_an_older_workspace_s_files_are_removed_with_a_note(tmp_path):
    ws = _pdf_workspace(tmp_path)
    (ws.content / "refs").mkdir()
    (ws.content / "refs" / "x.json").write_text("{}")
    (ws.content / "citation_graph.json").write_text("{}")
    rep = build_references(ws)
    assert sum("of an older version removed" in n for n in rep["notes"]) == 2
    assert not (ws.content / "refs").exists() and not (ws.content / "citation_graph.json").exists()
    assert rep["sources"] == 1


def test_index_command_prints_the_summary(tmp_path):
    ws = _pdf_workspace(tmp_path)
    p = run_main("index", "--workspace", ws.root)
    assert p.returncode == 0, p.stderr
    assert "references: 1 sources, 5 entries (1 lists parsed now; 1 sources without a reference list)" in p.stdout
    p = run_main("index", "--workspace", ws.root)
    assert "references: 1 sources, 5 entries (0 lists parsed now; 1 sources without a reference list)" in p.stdout


def test_a_docling_sidecar_list_items_text_items_and_the_heading_after(tmp_path):
    """With a sidecar, the list is its items after the reference heading: a list item an entry, a ``text``
    item an entry when it opens like one (docling's Markdown reader makes an entry holding a link one),
    else part of the entry before (the link); page headers left out; a later heading ends the list."""
    from chitragupta.engine.citations import build_references, references_of
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace

    from helpers import make_workspace

    root = make_workspace(tmp_path, [{"_id": "doc", "title": "A paper", "text": "body"}])
    ws = Workspace.open(root)
    with Ledger(ws.ledger_path) as ledger:
        parsed = ledger.get("doc").parsed_path
    items = [{"text": "Introduction", "label": "section_header", "page": 1},
             {"text": "We cite [1] and [2].", "label": "text", "page": 1},
             {"text": "References", "label": "section_header", "page": 2},
             {"text": "Auer, C., Dolfi, M.: Delivering document conversion. CoRR abs/2206.00785 (2022)",
              "label": "list_item", "page": 2},
             {"text": "Journal of Tests", "label": "page_header", "page": 3},
             {"text": "Livathinos, N., Berrospi, C.: Robust pdf document conversion. AAAI 35 (2021).",
              "label": "text", "page": 3},
             {"text": "https://doi.org/10.1609/aaai.v35i17.17777", "label": "text", "page": 3},
             {"text": "Nassar, A., Staar, P.: Tableformer: Table structure understanding (2022)",
              "label": "list_item", "page": 3},
             {"text": "Attention Visualizations", "label": "section_header", "page": 4},
             {"text": "Many heads attend to a distant word, as the figure shows (2017).", "label": "text", "page": 4}]
    (root / parsed).with_suffix(".passages.json").write_text(json.dumps(items), encoding="utf-8")
    (root / parsed).write_text("\n\n".join(it["text"] for it in items), encoding="utf-8")
    build_references(ws)
    got = references_of(ws, "doc")
    assert [e.authors[0] for e in got] == ["Auer", "Livathinos", "Nassar"]
    assert got[1].doi == "10.1609/aaai.v35i17.17777" and got[0].arxiv == "2206.00785"
    assert all("Journal of Tests" not in e.text and "heads" not in e.text for e in got)


