"""engine/text/refcut.py, hostile and varied input: the plain-text reference cut at every heading spelling,
nothing cut where there is no reference list, the last heading taken; on real PDFs at the heading."""

from __future__ import annotations

import pytest
from chitragupta.engine.text.refcut import cut_plain, plain_reference_cut

from helpers import PAPER_BODY, PAPER_REFS, SHARED


@pytest.mark.parametrize("heading", ["References", "REFERENCES", "7 References", "VII. REFERENCES", "References:",
                                     "Bibliography", "Literature Cited", "WORKS CITED", "\fReferences", "A. References ",
                                     "References\r"])
def test_plain_cut_at_a_reference_heading(heading):
    text = PAPER_BODY + heading + "\n" + PAPER_REFS
    cut = plain_reference_cut(text)
    assert cut == len(PAPER_BODY)
    blanked = cut_plain(text)
    # blanked, not removed: the same length and lines, nothing of the list left
    assert len(blanked) == len(text) and blanked.count("\n") == text.count("\n")
    assert blanked[:cut] == PAPER_BODY and not blanked[cut:].strip()


@pytest.mark.parametrize("text", [
    # a table of contents: the heading in the first 30%
    "Contents\n1 Introduction\n2 Method\nReferences\n" + "[1] x 2001 y [2] z 2002 [3] 2003 [4] 2004\n" + PAPER_BODY * 3,
    # a lower-case "references" alone on a line: a wrapped sentence
    PAPER_BODY + "these\nreferences\n" + PAPER_REFS,
    # a heading followed by prose, not by a list
    PAPER_BODY + "References\n" + PAPER_BODY,
    # not a heading: more words on the line
    PAPER_BODY + "Reference architecture\n" + PAPER_REFS,
    PAPER_BODY + "References to prior work\n" + PAPER_REFS,
    # no heading at all
    PAPER_BODY + PAPER_REFS,
])
def test_plain_cut_leaves_what_is_not_a_reference_list(text):
    assert plain_reference_cut(text) is None
    assert cut_plain(text) == text


def test_plain_cut_takes_the_last_heading_and_the_appendix_after_it():
    text = PAPER_BODY + "References\nsee below\n" + PAPER_BODY + "REFERENCES\n" + PAPER_REFS + "Appendix A\nMore prose.\n"
    assert plain_reference_cut(text) == len(PAPER_BODY + "References\nsee below\n" + PAPER_BODY)
    # an earlier heading that passes while the last one does not: the earlier one
    text = PAPER_BODY + "References\n" + PAPER_REFS + "Appendix\nReferences\n" + PAPER_BODY
    assert plain_reference_cut(text) == len(PAPER_BODY)


PAPERMAGE = SHARED / "data" / "pdfs" / "papermage"


@pytest.mark.slow
@pytest.mark.skipif(not PAPERMAGE.is_dir(), reason="../shared/data/pdfs is absent")
def test_plain_cut_on_real_pdfs_is_at_the_reference_heading():
    from bench.refcut import FIRST_ENTRY
    from chitragupta.engine.library.parsers import parse

    for pdf in sorted(PAPERMAGE.glob("*.pdf")):
        text = parse(pdf, "pdftotext").text
        cut = plain_reference_cut(text)
        assert cut is not None, pdf.name
        entry = text.index(FIRST_ENTRY[pdf.stem])
        assert text[cut:entry].strip() in ("References", "REFERENCES"), pdf.name
