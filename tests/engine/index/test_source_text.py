"""The text a paper is indexed and quoted by (issue 21): appendices after the reference list kept,
line-end hyphens joined, snippets from the body rather than the author block, evidence's header title."""

import re

import pytest
from chitragupta.engine.index.source import load_body
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.text.front import items_front_end, plain_front_end
from chitragupta.engine.text.hyphens import document_words, join_hyphens
from chitragupta.engine.text.refcut import (
    blank,
    cut_plain,
    is_appendix_heading,
    kept_items,
    plain_reference_cut,
    plain_reference_span,
    reference_span,
)
from chitragupta.engine.text.sidecar import dump_sidecar, join_items
from chitragupta.engine.text.windows import choose_windows
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import make_workspace, run_main

BODY = "".join(f"Paragraph {i} of the paper body, discussing digital twin fidelity at length.\n" for i in range(40))
REFS = "".join(f"[{i}] A. Author and B. Author. {2000 + i}. A cited work. In Proc. of a venue, pp. 1-10.\n"
               for i in range(1, 25))
APPENDIX = "".join(f"The datasheet line {i} names the crowdworkers and the negative social impact of the corpus.\n"
                   for i in range(12))


def it(text, label="text", page=None):
    return {"text": text, "label": label, "page": page}


# -- the reference span ends where an appendix begins -------------------------------------------------

@pytest.mark.parametrize("heading", ["Appendix", "APPENDIX", "Appendices", "A Appendix", "Appendix A: Proofs",
                                     "Appendix B. Checkboxes", "Supplementary Material", "SUPPLEMENTARY MATERIALS",
                                     "A Proof of Lemma 2", "B.1 Annotation guidelines", "C DETAILS OF THE STUDY",
                                     "A.1 Accessing the dataset"])
def test_appendix_headings(heading):
    assert is_appendix_heading(it(heading, "section_header"))


@pytest.mark.parametrize("heading", ["Acknowledgements", "Acknowledgments", "Competing interests", "Author biographies",
                                     "About the authors", "C. L. Giles, K. D. Bollacker, and S. Lawrence. 1998.",
                                     "Conclusion", "A. Smith and B. Jones 2019"])
def test_not_appendix_headings(heading):
    assert not is_appendix_heading(it(heading, "section_header"))


def test_appendix_heading_needs_the_heading_label():
    assert not is_appendix_heading(it("Appendix A: Proofs", "text"))


def _paper_items(tail):
    return [it("A paper", "title"), it("Abstract", "section_header"), it("We study twins."),
            it("1 Method", "section_header"), it("The method text."), it("References", "section_header"),
            it("[1] A cited work. 2019."), it("[2] Another cited work. 2020.", "list_item")] + tail


def test_sidecar_span_ends_at_the_appendix_and_cuts_what_lies_between():
    items = _paper_items([it("Acknowledgements", "section_header"), it("We thank the funders."),
                          it("Appendix A: Datasheet", "section_header"), it("The datasheet names crowdworkers."),
                          it("B.1 Annotation", "section_header"), it("More appendix text.")])
    assert reference_span(items) == (5, 10)
    kept = [n for n, _ in kept_items(items)]
    assert kept == [0, 1, 2, 3, 4, 10, 11, 12, 13]  # the list and the acknowledgements gone, the appendix kept


def test_sidecar_span_runs_to_the_end_without_an_appendix():
    items = _paper_items([it("Competing interests", "section_header"), it("None declared.")])
    assert reference_span(items) == (5, len(items))
    assert [n for n, _ in kept_items(items)] == [0, 1, 2, 3, 4]


def test_plain_span_ends_at_the_appendix():
    text = BODY + "References\n" + REFS + "Acknowledgements\nWe thank the funders.\n" + "Appendix A\n" + APPENDIX
    start, end = plain_reference_span(text)
    assert start == len(BODY) == plain_reference_cut(text)
    assert text[end:].startswith("Appendix A\n")
    kept = cut_plain(text)
    assert len(kept) == len(text) and kept.count("\n") == text.count("\n")
    assert "Author" not in kept and "funders" not in kept and "crowdworkers" in kept


@pytest.mark.parametrize("line", ["A Neural Attention Model for Abstractive Sentence", "A Survey of Twin Fidelity",
                                  "B Handheld Devices for Rendering"])
def test_a_wrapped_reference_line_is_not_an_appendix(line):
    # a reference entry's title wrapped so that a line starts like a lettered heading, among years
    refs = REFS[:len(REFS) // 2] + line + "\n" + REFS[len(REFS) // 2:]
    text = BODY + "References\n" + refs
    assert plain_reference_span(text) == (len(BODY), len(text))


def test_an_appendix_heading_followed_by_more_references_is_not_taken():
    text = BODY + "References\n" + REFS + "Appendix\n" + REFS
    assert plain_reference_span(text) == (len(BODY), len(text))


def test_blank_keeps_lines_and_pages():
    text = "ab\fcd\nef gh\n\fij"
    out = blank(text, 1, len(text) - 1)
    assert len(out) == len(text) and [i for i, c in enumerate(out) if c in "\n\f"] == \
        [i for i, c in enumerate(text) if c in "\n\f"]
    assert out[0] == "a" and out[-1] == "j" and not out[1:-1].strip(" \n\f")


def import_records(tmp_path, records):
    root = make_workspace(tmp_path, records)
    return Workspace.open(root)


def test_appendix_text_is_searchable_and_references_are_not(tmp_path):
    text = BODY + "References\n" + REFS.replace("A cited work", "Zebrafish cited work") + "Appendix A\n" + APPENDIX
    ws = import_records(tmp_path, [{"_id": "paper", "title": "A paper", "text": text},
                            {"_id": "other", "title": "Other", "text": "plain words about nothing in particular"}])
    r = Retriever.open(ws)
    assert r.search("crowdworkers datasheet", k=5).hits[0].citekey == "paper"
    assert not r.search("zebrafish", k=5).hits  # the list stays cut
    ev = r.evidence("negative social impact", "paper", n=1, width=200)
    assert ev.hits and "social impact" in ev.hits[0].snippet


def test_sidecar_appendix_reaches_the_passage_unit(tmp_path):
    items = _paper_items([it("Author biographies", "section_header"), it("The zebrafish author writes poems."),
                          it("Appendix A: Datasheet", "section_header"),
                          it("The datasheet names the crowdworkers who annotated every summary in the corpus.")])
    ws = import_records(tmp_path, [{"_id": "paper", "title": "A paper", "text": join_items(items)}])
    (ws.root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 3\n")
    ws = Workspace.open(ws.root)
    with Ledger(ws.ledger_path) as led:
        (ws.root / led.get("paper").parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    r = Retriever.open(ws)
    hits = r.search("crowdworkers annotated", k=3, unit="passage").hits
    assert hits and "crowdworkers" in hits[0].snippet
    assert not r.search("zebrafish poems", k=3, unit="passage").hits
    assert not r.search("zebrafish poems", k=3).hits
    body = r.body("paper")
    assert body.ref_words == len("References [1] A cited work. 2019. [2] Another cited work. 2020. Author biographies "
                                 "The zebrafish author writes poems.".split())
    assert body.after_words == len(items[-1]["text"].split()) + 3  # and "Appendix A: Datasheet"


def test_index_reports_what_the_cut_took(tmp_path):
    text = BODY + "References\n" + REFS + "Appendix A\n" + APPENDIX
    ws = import_records(tmp_path, [{"_id": "paper", "title": "A paper", "text": text},
                            {"_id": "plain", "title": "Plain", "text": "no list here"}])
    out = run_main("index", "-w", ws.root, "-v").stdout
    refs_words = len(("References\n" + REFS).split())
    assert f"reference lists cut from 1 of 2 document(s) read ({refs_words} words)" in out
    assert f"paper: {refs_words} words of reference list cut, {len(('Appendix A' + chr(10) + APPENDIX).split())} words after it kept" in out


# -- line-end hyphens -----------------------------------------------------------------------------

def test_hyphen_join_rules():
    doc = ("The summaries were written by hand. The sum-\nmaries of the state-of-the-\nart systems were poor. "
           "We keep the data-set as a dataset of data in a set. Hewlett-\nPackard made it. The pre-\ntraining and pretraining and "
           "training. An un-\nseen word.")
    out = join_hyphens(doc)
    assert len(out) == len(doc) and out.count("\n") == doc.count("\n")
    words = re.findall(r"[a-z]+", out.lower())
    assert words.count("summaries") == 2 and "maries" not in words
    assert "state-of-the-\nart" in out  # "theart" is no word of the document
    assert "data-set" in out  # both halves are words
    assert "Hewlett-\nPackard" in out  # an upper-case tail
    assert "pretraining" in out.split()  # "pre" is no word of it: the halves are not both words
    assert "un-seen\n word" in out  # "unseen" is not a word of this document: kept, whole on one line


@pytest.mark.parametrize("doc, joined", [
    ("a data-\nbase is a database of data on a base", False),  # both halves are words: kept (README's example)
    ("a data-\nbase is a database of data", True),  # "base" stands nowhere alone: joined
    ("write e-\nmail beside mail", False),  # "email" stands nowhere alone: kept
    ("write e-\nmail beside email and mail", True),  # a one-letter half is never a word: joined
    ("the state-of-the-\nart beside art and theart", False),  # inside a longer compound: never joined
])
def test_hyphen_rule_as_the_readme_tells_it(doc, joined):
    out = join_hyphens(doc)
    head = doc.split("-\n")[0].split()[-1].split("-")[-1]
    tail = doc.split("-\n")[1].split()[0]
    assert ((head + tail) in out.split()[:4]) is joined


def test_hyphen_join_inline_from_an_older_parse():
    doc = "Best prac-tice is practice. The (sum-maries) are summaries."
    out = join_hyphens(doc)
    assert len(out) == len(doc)
    assert "practice" in out.split() and "prac-tice" not in out
    assert "(summaries" in out  # glued to the bracket: the space goes on the other side


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcsumaries -\n\f\tAP(),.")), max_size=200))
def test_hyphen_join_keeps_length_lines_pages_and_letters(text):
    words = document_words(text + " summaries practice")
    out = join_hyphens(text, words)
    assert len(out) == len(text)
    assert out.count("\n") == text.count("\n")
    assert [i for i, c in enumerate(out) if c == "\f"] == [i for i, c in enumerate(text) if c == "\f"]
    squeeze = lambda s: re.sub(r"[\s-]", "", s)  # noqa: E731
    assert squeeze(out) == squeeze(text)


def test_body_joins_hyphens_and_keeps_offsets(tmp_path):
    p = tmp_path / "x.txt"
    text = "Title block\nAbstract\nThe sum-\nmaries are summaries.\f\nPage two on summaries.\n"
    p.write_text(text, encoding="utf-8")
    body = load_body(p)
    assert len(body.text) == len(text) and "maries" not in body.text.split()
    assert body.page_at(body.text.index("Page two")) == 2


# -- snippets from the body, not the author block -----------------------------------------------------

FRONT = ("LONGEVAL: Guidelines for Human Evaluation\nKalpesh Krishna Erin Bransom Bailey Kuehl\n"
         "{kalpesh,miyyer}@cs.umass.edu\nAllen Institute for AI\n")


def test_front_matter_end():
    text = FRONT + "Abstract\nWhile human evaluation remains best practice.\n1 Introduction\nHuman judgments.\n" * 1
    assert text[plain_front_end(text):].startswith("Abstract\n")
    no_abstract = FRONT + "Some unlabelled summary text.\n1 INTRODUCTION\nA strong public health.\n"
    assert no_abstract[plain_front_end(no_abstract):].startswith("1 INTRODUCTION")
    assert plain_front_end("Just an abstract of a paper, imported alone.") == 0
    # a heading deep in a long text is not the end of any front matter
    assert plain_front_end("word " * 5000 + "\nAbstract\n" + "word " * 100) == 0


def test_items_front_end():
    items = [it("A paper", "title"), it("Ann Author, Bob Author", "text"), it("Abstract", "section_header"),
             it("We study evaluation."), it("1 Introduction", "section_header"), it("Evaluation matters.")]
    kept = kept_items(items)
    text = join_items([i for _n, i in kept])
    spans, pos = [], 0
    for n, i in kept:
        spans.append((pos, pos + len(i["text"]), n, None))
        pos += len(i["text"]) + 2
    assert text[items_front_end(kept, spans):].startswith("Abstract")


def test_snippet_prefers_the_body_over_the_author_block():
    text = FRONT + "Abstract\nWhile human evaluation of faithfulness remains hard, we propose guidelines.\n"
    start = plain_front_end(text)
    wins = choose_windows(text, ["evaluation", "human"], 60, 1, body_start=start)
    assert wins and wins[0].start >= start and "evaluation" in wins[0].text
    # nothing after the front matter matches: the front matter is still quoted
    wins = choose_windows(text, ["kuehl"], 60, 1, body_start=start)
    assert wins and "Kuehl" in wins[0].text
    # without a front-matter end the chooser is as before
    assert choose_windows(text, ["kuehl"], 60, 1) == wins


def test_search_snippet_skips_the_author_block(tmp_path):
    text = (FRONT + "Abstract\n" + "Filler sentence about unrelated topics. " * 20
            + "While human evaluation of long summaries is costly, guidelines help.\n")
    ws = import_records(tmp_path, [{"_id": "krishna", "title": "LongEval", "text": text}])
    hit = Retriever.open(ws).search("evaluation human guidelines", k=1, snippet_chars=120).hits[0]
    assert "guidelines" in hit.snippet and "umass" not in hit.snippet


# -- evidence's header ---------------------------------------------------------------------------

def test_evidence_header_shows_the_title_of_a_title_only_source(tmp_path):
    ws = import_records(tmp_path, [{"_id": "lone", "title": "Digital twins of bridges", "text": ""},
                            {"_id": "other", "title": "Other", "text": "bridges and twins"}])
    out = run_main("evidence", "zebra", "--citekey", "lone", "-w", ws.root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "lone  Digital twins of bridges"

