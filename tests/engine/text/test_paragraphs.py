"""Plain text as paragraphs with their pages (engine/text/paragraphs.py)."""

from chitragupta.engine.index.source import plain_body
from chitragupta.engine.text.paragraphs import MAX_CHARS, plain_paragraphs

# a column of about 48 characters a line, as pdftotext writes a two-column paper's lines
PAGE1 = """Abstract
We study the rate at which sensor data degrades
the fidelity of a structural model over three
winters of freeze thaw cycles.
1 Introduction
Digital twins of bridges couple a finite element
model with strain gauges and accelerometers so
that stiffness can be tracked from week to week.
Earlier work calibrated it once.
Our contribution is a weekly calibration loop that
runs unattended on the operator's own servers and"""
PAGE2 = """reports drift before an inspection would find it.
3 The calibration loop for
bridge decks in winter
The loop reads the gauges every night, fits six
stiffness parameters and flags a span whose fit
drifts by more than two standard deviations."""


def texts(paras):
    return [(p["label"], p["page"], p["text"]) for p in paras]


def test_paragraphs_headings_and_pages():
    got = texts(plain_paragraphs(PAGE1 + "\f" + PAGE2))
    assert got == [
        ("section_header", 1, "Abstract"),
        ("text", 1, "We study the rate at which sensor data degrades the fidelity of a structural model over "
                    "three winters of freeze thaw cycles."),
        ("section_header", 1, "1 Introduction"),
        ("text", 1, "Digital twins of bridges couple a finite element model with strain gauges and "
                    "accelerometers so that stiffness can be tracked from week to week. Earlier work calibrated it "
                    "once."),
        # a paragraph running on to the next page is one passage a page, each with its page
        ("text", 1, "Our contribution is a weekly calibration loop that runs unattended on the operator's own "
                    "servers and"),
        ("text", 2, "reports drift before an inspection would find it."),
        ("section_header", 2, "3 The calibration loop for bridge decks in winter"),  # a wrapped heading
        ("text", 2, "The loop reads the gauges every night, fits six stiffness parameters and flags a span whose "
                    "fit drifts by more than two standard deviations."),
    ]


def test_no_form_feed_no_pages_and_blank_lines_break():
    got = texts(plain_paragraphs("first paragraph of an import\n\nsecond one here\n"))
    assert got == [("text", None, "first paragraph of an import"), ("text", None, "second one here")]
    assert plain_paragraphs("") == [] and plain_paragraphs(" \n\f\n ") == []


def test_a_kept_line_end_hyphen_joins_without_a_space():
    text = "a word split by the typesetter as data-\nbase stays one word in the passage here ok."
    assert plain_paragraphs(text)[0]["text"] == "a word split by the typesetter as data-base stays one word in the passage here ok."


def test_a_run_without_breaks_is_cut_near_max_chars():
    line = "word " * 9 + "end."  # every line ends a sentence but fills its column: no break of its own
    paras = plain_paragraphs("\n".join([line] * 200))
    assert len(paras) > 1 and all(len(p["text"]) <= 2 * MAX_CHARS + len(line) for p in paras)
    assert " ".join(p["text"] for p in paras) == " ".join([line] * 200)  # nothing lost, nothing doubled


def test_the_reference_list_the_body_blanks_is_no_paragraph():
    body = ("Intro\nWe build a twin of a bridge deck and calibrate it every week against gauges.\n" * 30
            + "References\n" + "".join(f"[{i}] A. Author. A paper title. In Proc. 2019.\n" for i in range(1, 30)))
    paras = plain_paragraphs(plain_body(None, body).text)
    assert paras and not any("Author" in p["text"] or "References" in p["text"] for p in paras)
