"""The plain-text reference cut's appendix test (engine/text/refcut.py), on layouts taken from real papers:
a wrapped entry line that reads like a lettered heading, an appendix after the list, a short remainder."""

import pytest
from chitragupta.engine.text.refcut import (
    APPENDIX_MAX_CITES,
    APPENDIX_MIN_CHARS,
    PLAIN_WINDOW,
    cut_plain,
    plain_reference_span,
)

BODY = "".join(f"Paragraph {i} of the paper body discusses urban simulation and procedural modelling of cities.\n"
               for i in range(40))

# an ACM-style author-year list (two-column pdftotext lines): titles wrap, venues are abbreviated
ENTRIES = [
    "Daniel G. Aliaga, Carlos A. Vanegas, and Bedrich Benes. 2008. Interactive Example-\n"
    "Based Urban Layout Synthesis. ACM Trans. Graph. 27, 5 (2008), 1-10.\n",
    "Jan Benes, Alexander Wilkie, and Jaroslav Krivanek. 2014. Procedural Modelling of\n"
    "Urban Road Networks. Computer Graphics Forum 33, 6 (2014), 132-142.\n",
    "Paul Waddell. 2002. UrbanSim: Modeling Urban Development for Land Use, Transporta-\n"
    "tion, and Environmental Planning. J. Am. Plann. Assoc. 68, 3 (2002), 297-314.\n",
    "Basil Weber, Pascal Mueller, Peter Wonka, and Markus Gross. 2009. Interactive\n"
    "Geometric Simulation of 4D Cities. Computer Graphics Forum 28, 2, 481-492.\n",
]
# an entry whose title's second line reads like a lettered heading ("A Multiscale Approach to Integrated")
WRAPPED = ("Carlos A. Vanegas, Daniel G. Aliaga, Bedrich Benes, and Paul Waddell. 2009. Visualization of Cities:\n"
           "A Multiscale Approach to Integrated\n"
           "Urban Design. In ACM SIGGRAPH Asia Sketches. 111:1-111:10.\n")
PROSE = ("We give here the proofs omitted from the main text. The simulation of a city block is run until its\n"
         "layout stops changing; we show that this happens after finitely many steps for every street graph,\n"
         "following the argument sketched in the method section and the notation used there.\n")


def _span_end(text):
    span = plain_reference_span(text)
    assert span is not None and span[0] == len(BODY)
    return span[1]


@pytest.mark.parametrize("after", [0, 1, 2, 4])
def test_a_wrapped_title_line_is_not_a_heading_wherever_it_falls(after):
    # the wrapped line continues the line before it (it ends in a colon), however little of the list follows
    text = BODY + "REFERENCES\n" + "".join(ENTRIES[:4 - after]) + WRAPPED + "".join(ENTRIES[4 - after:])
    assert _span_end(text) == len(text)
    assert "Multiscale" not in cut_plain(text) and "SIGGRAPH" not in cut_plain(text)


def test_a_wrapped_title_after_a_year_is_not_a_heading_when_little_follows():
    # the line before ends an entry's author block ("2009."), so only what follows can tell: the entry's tail
    # is shorter than any appendix the rule takes
    last = ("Carlos A. Vanegas and Paul Waddell. 2009.\n"
            "A Multiscale Approach to Integrated\n"
            "Urban Design. ACM SIGGRAPH Asia.\n")
    text = BODY + "REFERENCES\n" + "".join(ENTRIES) + last
    assert len(text) - text.index("A Multiscale") < APPENDIX_MIN_CHARS
    assert _span_end(text) == len(text)


def test_a_short_remainder_of_entries_is_not_prose():
    # three entries after a heading-like line: far fewer than APPENDIX_MAX_CITES markers, but as many as a
    # reference list holds in that much text (the threshold is in proportion to what follows)
    line = "A Survey of Procedural Modelling of Cities\n"
    tail = "".join(ENTRIES[1:4])
    text = BODY + "REFERENCES\n" + ENTRIES[0] + line + tail
    assert len(tail) < PLAIN_WINDOW // 2
    assert _span_end(text) == len(text)


def test_an_appendix_after_the_list_is_kept():
    appendix = "A PROOFS OF THE LAYOUT THEOREMS\n" + PROSE * 3
    text = BODY + "REFERENCES\n" + "".join(ENTRIES) + WRAPPED + "Acknowledgements\nWe thank the city.\n" + appendix
    assert text[_span_end(text):] == appendix
    kept = cut_plain(text)
    assert "finitely many steps" in kept and "Multiscale" not in kept and "thank" not in kept


def test_an_appendix_that_cites_its_sources_is_kept():
    # appendix prose citing a few works (years, a venue word) is still prose: under 14 per 2,000 characters
    cited = ("Appendix A: Street graphs\nThe street graphs follow Weber et al. (2009) and Aliaga et al. (2008);\n"
             "the road model is the one of Benes et al. (2014) in Computer Graphics Forum.\n") + PROSE * 6
    text = BODY + "REFERENCES\n" + "".join(ENTRIES) + cited
    assert text[_span_end(text):] == cited


def test_a_short_appendix_is_kept_and_a_shorter_one_is_not():
    short = "Appendix B. Checkboxes\n" + PROSE[:APPENDIX_MIN_CHARS + 10] + "\n"
    text = BODY + "REFERENCES\n" + "".join(ENTRIES) + short
    assert text[_span_end(text):] == short
    shorter = "Appendix B. Checkboxes\n" + PROSE[:APPENDIX_MIN_CHARS - 20] + "\n"
    text = BODY + "REFERENCES\n" + "".join(ENTRIES) + shorter
    assert _span_end(text) == len(text)


def test_a_heading_after_a_running_line_is_passed_over_for_the_next():
    # the first lettered line runs on from a line that ends mid-phrase; the next appendix heading is taken
    text = (BODY + "REFERENCES\n" + "".join(ENTRIES) + "Figure 9: the interface of the layout tool\n"
            + "A Interface of the Layout Tool\n" + PROSE + "B Study Protocol\n" + PROSE * 2)
    assert text[_span_end(text):].startswith("B Study Protocol\n")


def test_the_threshold_scales_with_the_remainder():
    # a window of entries half as long needs half the markers: just below the proportional count is prose
    words = "prose words in a sentence about streets and blocks of the city and its people "
    half = PLAIN_WINDOW // 2
    cites = APPENDIX_MAX_CITES // 2
    filler = (words * 40)[: half - cites * 6]
    below = "".join(f"({2000 + i}) " for i in range(cites - 1))
    at = "".join(f"({2000 + i}) " for i in range(cites))
    for years, taken in ((below, True), (at, False)):
        after = (years + filler)[:half]
        assert len(after) == half
        text = BODY + "REFERENCES\n" + "".join(ENTRIES) + "Appendix\n" + after
        assert (_span_end(text) < len(text)) is taken


def test_the_appendix_test_is_written_in_the_same_words_where_it_is_documented():
    """docs/reference-cut.md and refcut.py's docstring state one appendix test, word for word."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]

    def stated(path: Path) -> str:
        text = re.sub(r"[`*]", "", path.read_text(encoding="utf-8"))
        text = re.sub(r"\n\s*(?:- )?", " ", text)
        text = re.sub(r"\s+", " ", text)
        m = re.search(r"The list ends at the first later heading.*?with no appendix, the list runs to the end\.", text)
        assert m, f"{path.name} does not state the appendix test"
        return m.group(0)

    said = {p: stated(root / p) for p in ("docs/reference-cut.md", "src/chitragupta/engine/text/refcut.py")}
    assert len(set(said.values())) == 1, said
    assert "A Multiscale Approach to Integrated" in said["docs/reference-cut.md"]


# -- the test before the line scan (speed only: the span must be the same as the scan's alone) ---------

HEADINGS = ["References", "REFERENCES", "Bibliography", "BIBLIOGRAPHY", "Works Cited", "WORKS\tCITED",
            "Literature cited", "LITERATURE Cited", "7 References", "VII. REFERENCES", "A. Bibliography"]
NEAR = ["references", "bibliography", "works cited", "Cited Works", "Literature", "R", "B W L", "cited",
        "REFERENCE", "Referencess", "Works", "Abstract"]


@pytest.mark.parametrize("line", HEADINGS + NEAR)
def test_the_word_test_never_hides_a_heading(line):
    from chitragupta.engine.text.refcut import _PLAIN_HEADING, may_hold_heading

    text = BODY + "\n" + line + "\n" + "".join(ENTRIES) * 3
    found = _PLAIN_HEADING.search(text) is not None
    assert found == (line in HEADINGS)
    if found:  # (a text the word test passes over is one the scan finds nothing in)
        assert may_hold_heading(text)
    if not may_hold_heading(text):
        assert plain_reference_span(text) is None
    else:
        assert (plain_reference_span(text) is not None) == found


def test_the_word_test_on_random_texts():
    import random

    from chitragupta.engine.text.refcut import _PLAIN_HEADING, may_hold_heading

    rng = random.Random(7)
    pieces = ["References", "REFERENCES", "Bibliography", "Works", "Cited", "cited", "Literature", "LITERATURE",
              "CITED", "Works Cited", "Literature\tcited", "R", "B", "W", "L", "eferences", "\n", " ", "ibliography",
              "text", "1999", "[3]", "WORKS", "BIBLIOGRAPHY", "\f"]
    hidden = 0
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        if _PLAIN_HEADING.search(text) is not None:
            hidden += 1
            assert may_hold_heading(text), repr(text)
    assert hidden > 50  # (the random texts do hold headings)
