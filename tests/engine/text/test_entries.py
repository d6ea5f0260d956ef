"""Reference entries (``engine.text.entries``): splitting a list (numbered, author-year, wrapped, page breaks,
Markdown), the fields of each entry, the list's text from a plain text or a sidecar, bad input, and the
regression cases of the hostile and journey issues."""

from __future__ import annotations

import subprocess
import sys

import pytest
from chitragupta.engine.text.entries import (
    MAX_ENTRY_CHARS,
    Entry,
    decode_latex,
    parse_entry,
    parse_reference_list,
    running_lines,
    split_entries,
)

NUMBERED = """[1] Ada Lovelace and Charles Babbage. 1843. Sketch of the analytical engine
invented by Charles Babbage. Scientific Memoirs 3 (1843), 666-731.
[2] Grace M. Hopper. 1952. The education of a computer. In Proceedings of the
ACM National Meeting. ACM, 243-249. https://doi.org/10.1145/609784.609818.
[3] Alan Turing. 1950. Computing machinery and intelligence. Mind 59, 236 (1950),
433-460.
[4] Tom B. Brown, Benjamin Mann, and Nick Ryder. 2020. Language models are few-shot
learners. arXiv preprint arXiv:2005.14165v4 (2020).
"""

DOTTED = """1. Smith J, Doe A. A study of lists. J Lists. 2019;12:1-10. doi:10.1000/xyz123;
2. Roe R. Another study of numbered lists and the
wrapped lines they hold. Lancet. 2020;395:100-101.
3. Poe E. Ravens, revisited. Nature 2021; 590: 1-2.
"""

AUTHOR_YEAR = """Riaz Ahmad and Muhammad Tanvir Afzal. 2018. Cad:
an algorithm for citation-anchors detection in re-
search papers. Scientometrics, 117:1405-1423.
Waleed Ammar, Dirk Groeneveld, Chandra Bhagavat-
ula, Iz Beltagy, Miles Crawford, Doug Downey, Ja-
son Dunkelberger, and Oren Etzioni. 2018. Construction
of the literature graph in semantic scholar. In Pro-
ceedings of the 2018 Conference of the North Amer-
ican Chapter of the Association for Computational
Linguistics, pages 84-91, New Orleans, Louisiana.
Laurens van der Maaten and Geoffrey E. Hinton. 2008.
Visualizing data using t-sne. In Journal of Machine
Learning Research.
Nelson F. Liu, Matt Gardner, and Noah A. Smith. 2019a. Retrieval of infor-
mation from the literature. Transactions of the Association for Computational
Linguistics, 7:1-12.
OGC of Harvard. 2016. Copyright and fair use.
"""

APA = """Adams, G., Smith, J. A., & van der Berg, K. (2019). A title about lists. Journal of
    Things, 12(3), 1-10. https://doi.org/10.1000/ABC.123).
Baker, T. (2020b). Hanging indents in reference lists: A second look. In
    Proceedings of the Workshop on Layout (pp. 5-9).
M\\"{u}ller, J\\'{o}rg, and Nakamura, H. (1999). Accents in names. Zeitschrift
    f\\"{u}r Namen, 4, 1-2.
"""


def _fields(e: Entry) -> tuple:
    return e.authors, e.year, e.title, e.venue, e.doi, e.arxiv


def test_numbered_list_wrapped_entries_and_their_fields():
    entries, notes = parse_reference_list(NUMBERED)
    assert notes == [] and [e.n for e in entries] == [1, 2, 3, 4]
    assert _fields(entries[0]) == (("Lovelace", "Babbage"), 1843,
                                   "Sketch of the analytical engine invented by Charles Babbage",
                                   "Scientific Memoirs", None, None)
    assert _fields(entries[1]) == (("Hopper",), 1952, "The education of a computer",
                                   "Proceedings of the ACM National Meeting", "10.1145/609784.609818", None)
    assert entries[1].url is None  # the DOI's link is the DOI
    assert _fields(entries[2])[:3] == (("Turing",), 1950, "Computing machinery and intelligence")
    assert entries[3].arxiv == "2005.14165" and entries[3].authors == ("Brown", "Mann", "Ryder")
    assert entries[0].text.startswith("[1] Ada Lovelace") and "\n" not in entries[0].text


def test_dotted_numbers_in_sequence_only():
    raw = split_entries(DOTTED)
    assert len(raw) == 3 and raw[1].startswith("2. Roe R. Another study") and raw[1].endswith("395:100-101.")
    e = parse_entry(raw[0], 1)
    assert e.doi == "10.1000/xyz123" and e.year == 2019  # the trailing ";" is not the DOI's
    # a wrapped line starting with a number that breaks the sequence is no entry
    assert len(split_entries("1. Ab Cd. Title one. J. 2019;\n117. pages of it.\n2. Ef Gh. Title two. 2020.\n")) == 2


def test_author_year_hanging_lines_hyphens_and_fields():
    entries, notes = parse_reference_list(AUTHOR_YEAR)
    assert notes == [] and len(entries) == 5
    a, b, c, d, e = entries
    assert _fields(a) == (("Ahmad", "Afzal"), 2018, "Cad: an algorithm for citation-anchors detection in research papers",
                          "Scientometrics", None, None)
    assert b.authors == ("Ammar", "Groeneveld", "Bhagavatula", "Beltagy", "Crawford", "Downey", "Dunkelberger",
                         "Etzioni")
    assert b.title == "Construction of the literature graph in semantic scholar"
    assert b.venue == ("Proceedings of the 2018 Conference of the North American Chapter of the Association for "
                       "Computational Linguistics")
    assert c.authors == ("van der Maaten", "Hinton") and c.year == 2008 and c.venue == "Journal of Machine Learning Research"
    assert d.year == 2019 and d.title == "Retrieval of information from the literature"  # "infor-\nmation" joined
    assert e.authors == ("OGC of Harvard",) and e.year == 2016 and e.title == "Copyright and fair use"


def test_family_first_lists_and_latex_accents():
    entries, _notes = parse_reference_list(APA)
    assert len(entries) == 3
    assert _fields(entries[0]) == (("Adams", "Smith", "van der Berg"), 2019, "A title about lists", "Journal of Things",
                                   "10.1000/abc.123", None)
    assert entries[1].year == 2020 and entries[1].title.startswith("Hanging indents in reference lists")
    assert entries[1].venue == "Proceedings of the Workshop on Layout"
    assert entries[2].authors == ("Müller", "Nakamura") and entries[2].year == 1999
    assert decode_latex(r"{\"o}{\'e}\ss{}\c{c}") == "öéßç"


def test_page_break_with_running_title_and_page_number_is_one_entry():
    page1 = "Journal of Tests 12 (2024)\n[1] Ab Cd and Ef Gh. 2019. A first title. Venue One.\n[2] Ij Kl, Mn Op, and\n7\n"
    page2 = ("Journal of Tests 12 (2024)\nQr St. 2020. A second title that wraps over\nthe page break. Venue Two.\n"
             "[3] Uv Wx. 2021. A third title. Venue Three.\n8\n")
    page3 = "Journal of Tests 12 (2024)\n[4] Yz Ab. 2022. A fourth title. Venue Four.\n9"
    entries, _notes = parse_reference_list("\f".join([page1, page2, page3]))
    assert [e.n for e in entries] == [1, 2, 3, 4]
    assert entries[1].text == "[2] Ij Kl, Mn Op, and Qr St. 2020. A second title that wraps over the page break. Venue Two."
    assert entries[1].authors == ("Kl", "Op", "St") and entries[1].title == "A second title that wraps over the page break"
    assert all("Journal of Tests" not in e.text and not e.text.endswith(("7", "8", "9")) for e in entries)


def test_author_year_over_a_page_break():
    text = ("Ab Cd and Ef Gh. 2019. A first title\nthat wraps. Venue One.\f3\nIj Kl, Mn Op, and Qr\nSt. 2020. "
            "A second title. Venue Two.\n")
    assert [e.authors for e in parse_reference_list(text)[0]] == [("Cd", "Gh"), ("Kl", "Op", "St")]


def test_markdown_items_from_a_latex_bibliography():
    text = ("- 10\n- layernorm2016\nJimmy Lei Ba, Jamie Ryan Kiros, and Geoffrey E Hinton.\nLayer normalization.\n"
            "arXiv preprint arXiv:1607.06450, 2016.\n- bahdanau2014neural\nDzmitry Bahdanau, Kyunghyun Cho, and "
            "Yoshua Bengio.\nNeural machine translation by jointly learning to align and\n  translate.\n"
            "CoRR, abs/1409.0473, 2014.\n")
    entries, _notes = parse_reference_list(text)
    assert len(entries) == 2  # "- 10" (the widest label) is no entry, the cite keys are no text
    assert _fields(entries[0]) == (("Ba", "Kiros", "Hinton"), 2016, "Layer normalization", "arXiv preprint", None,
                                   "1607.06450")
    assert entries[1].title == "Neural machine translation by jointly learning to align and translate"
    assert entries[1].arxiv == "1409.0473" and entries[1].year == 2014


def test_identifiers():
    e = parse_entry("A. Author. 2020. T. https://arxiv.org/abs/2101.00001v3. doi: 10.1234/ABC-5(6).", 1)
    assert e.arxiv == "2101.00001" and e.doi == "10.1234/abc-5(6)" and e.url == "https://arxiv.org/abs/2101.00001v3"
    assert parse_entry("B. Author. 1999. Old. arXiv:hep-th/9901001v2.", 1).arxiv == "hep-th/9901001"
    assert parse_entry("C. Author. 2001. T. https://doi.org/10.5555/12345678,", 1).doi == "10.5555/12345678"
    assert parse_entry("no fields at all", 1) == Entry(1, "no fields at all", title="no fields at all")


def test_bad_input_gets_a_note_and_a_best_effort():
    assert parse_reference_list("") == ([], [])
    assert parse_reference_list("\n \f \n") == ([], [])
    long = "Ab Cd. 2019. " + "word " * 2000 + "Venue."
    entries, notes = parse_reference_list(long)
    assert len(entries) == 1 and len(entries[0].text) > MAX_ENTRY_CHARS and entries[0].year == 2019
    assert len(notes) == 2 and "one entry of" in notes[0] and "longer than" in notes[1]
    prose = "This is prose.\nIt has no entries at all.\n"
    assert parse_reference_list(prose)[1] == ["none of the 1 entries prints a year, a DOI or an arXiv id: is this "
                                              "a reference list?"]
    cjk = "[1] 王小明, 李华. 2019. 深度学习的研究. 计算机学报, 42(1): 1-10.\n[2] Иванов И. И. 2020. Заголовок. Журнал.\n"
    entries, _notes = parse_reference_list(cjk)
    assert len(entries) == 2 and [e.year for e in entries] == [2019, 2020]


RUN_ON = r"""
import sys, time
from chitragupta.engine.text.entries import parse_reference_list
line = " ".join(f"[{i}] Ab Cd, Ef Gh, and Ij Kl. {1900 + i % 120}. A title, number {i} of many. In Proceedings of "
                f"the Things, pages {i}-{i + 9}. doi:10.{1000 + i}/x.{i}." for i in range(2000))
assert len(line) > 200_000
for text in (line, "a" * 200_000, "Ab, " * 50_000, "(" * 100_000 + "2019", "Ab Cd. " * 30_000 + "2019."):
    entries, notes = parse_reference_list(text)
    assert entries and notes, (text[:40], notes)
print("ok")
"""


def test_a_200kb_run_on_line_finishes(tmp_path):
    """No regular expression backtracks without bound: a 200 KB run-on line (and other long single lines)
    are read in a subprocess that must finish within a generous bound."""
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", RUN_ON], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_initials_first_without_numbers_and_what_follows_the_last_entry():
    text = ("J. Andren, M. Hilding, and D. Veitch. Understanding\nend-to-end internet traffic dynamics. In Proceedings\n"
            "IEEE GLOBECOM, Sydney, Australia, November\n1998.\nJ.-C. Bolot, S. Fosse-Parisis, and D. Towsley.\n"
            "Adaptive FEC-based error control for interactive\naudio in the Internet. In Proceedings IEEE\n"
            "INFOCOM, New York, NY, March 1999.\nH. Sanneck. Concealment of lost speech packets using\n"
            "adaptive packetization. In Proceedings IEEE\nMultimedia Systems, pages 140-149, June\n1998.\n"
            "10. APPENDIX\nThis appendix outlines the failover protocol of the system, in prose.\n")
    entries, notes = parse_reference_list(text)
    assert [(e.authors[0], e.year) for e in entries] == [("Andren", 1998), ("Bolot", 1999), ("Sanneck", 1998)]
    assert entries[2].title == "Concealment of lost speech packets using adaptive packetization"
    assert "APPENDIX" not in entries[2].text and len(notes) == 1 and "'10. APPENDIX'" in notes[0]


def test_seeded_junk_never_raises():
    import random

    pieces = list("aZ .,;:()[]{}-\u2013\n\f\\\"'\u201c\u201d\u00b4\u00a8\u02c7&01928") + [
        "[1] ", "2019", "10.1234/", "arXiv:", "http://", "van ", "et al.", " and ", "- ", "1. ", "In ", "Proc. ",
        "J. ", "Smith, J.", "Table 1", "APPENDIX", "\u01c5", "\u4e2d\u6587", "\u0416", "\u0301"]
    rng = random.Random(31)
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 300)))
        entries, notes = parse_reference_list(text)
        assert all(isinstance(n, str) for n in notes)
        assert all(isinstance(e, Entry) and len(e.authors) == len(e.names) for e in entries)
        parse_entry(text, 1)


def test_a_capitalised_particle_after_a_given_name_belongs_to_the_family_name():
    got = {e: parse_entry(e, 1).authors for e in [
        "[5] Asma Ben Abacha and Dina Demner-Fushman. 2019. A question-entailment approach to question answering.",
        "[15] C. J. Van Rijsbergen. 1979. Information Retrieval. Butterworths.",
        "[24] Munmun De Choudhury and Ryen W. White. 2014. Seeking and sharing health information online.",
        "[30] Minh Le Nguyen, Tuan Van Tran and Di Jin. 2020. A study of names. In Proc. of X.",
    ]}
    assert list(got.values()) == [("Ben Abacha", "Demner-Fushman"), ("Van Rijsbergen",), ("De Choudhury", "White"),
                                  ("Nguyen", "Tran", "Jin")]


def test_an_ieee_author_list_a_comma_ends_stops_before_the_title():
    e = parse_entry("[1] I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of Correlation. Journal of "
                    "Artificial Intelligence Research, 33:575-613, 2008.", 1)
    assert (e.authors, e.year, e.title, e.venue) == (("Ashlagi", "Monderer", "Tenneholtz"), 2008,
                                                     "On the Value of Correlation",
                                                     "Journal of Artificial Intelligence Research")
    e = parse_entry("[6] K. Czajkowski, S. Fitzgerald, I. Foster, and C. Kesselman, Grid Information Services for "
                    "Distributed Resource Sharing, Proc. of the Tenth IEEE Symposium on HPDC, 181-194, August 2001.", 6)
    assert e.authors == ("Czajkowski", "Fitzgerald", "Foster", "Kesselman")
    assert e.title == "Grid Information Services for Distributed Resource Sharing"
    assert e.venue == "Proc. of the Tenth IEEE Symposium on HPDC"
    # names that go on after the comma are no title ("Dan Frankowski"), nor is an initial ("W. G.")
    assert parse_entry("[3] J. Smith, Dan Frankowski, and K. Lee. A study of it. Venue, 2007.", 3).authors == \
        ("Smith", "Frankowski", "Lee")
    assert not (parse_entry("[4] C. Zou, L. Gao, W. G., and Towsley, D. Monitoring worms. In Proc. of X, 2003.", 4)
                .title or "").startswith("W. G.")


def test_ben_after_initials_only_is_a_given_name():
    assert parse_entry("[2] J. Ben Schafer, J. Konstan, and J. Riedl. Recommender systems in e-commerce. In Proc. "
                       "ACM EC, pages 158-166, 1999.", 2).authors == ("Schafer", "Konstan", "Riedl")
    assert parse_entry("[7] Amir Pouran Ben Veyseh and Franck Dernoncourt. 2020. A title.", 7).authors == \
        ("Ben Veyseh", "Dernoncourt")


def test_a_quoted_word_inside_a_title_is_not_the_title():
    """Issue 47, 9: the title is the whole title, not the word quoted inside it; a quoted title that stands
    as a segment of its own is still read."""
    e = parse_entry('[3] A. Vaswani, N. Shazeer. Why "attention" is all you need, again. In NIPS, 2017.', 3)
    assert e.title == 'Why "attention" is all you need, again' and e.authors == ("Vaswani", "Shazeer")
    e = parse_entry("[4] Kyle Lo and Lucy Wang. 2020. The \u201cS2ORC\u201d corpus of papers. In ACL.", 4)
    assert e.title == "The \u201cS2ORC\u201d corpus of papers" and e.year == 2020 and e.venue == "ACL"
    e = parse_entry('[5] J. Smith, "A title in quotes," in Proc. of the Things, 2001.', 5)
    assert e.title == "A title in quotes" and e.authors == ("Smith",)


def test_a_list_on_one_long_line_gets_a_note_that_it_could_not_be_split():
    """Issue 47, 12: a list that is one 200 KB line is one entry, with a note saying so."""
    line = "Ab Cd, Ef Gh. A title of many words " * 6000
    entries, notes = parse_reference_list(line)
    assert len(entries) == 1 and len(line) > 200_000
    assert any("could not be split" in n for n in notes)


def test_an_author_running_head_at_a_page_break_is_dropped():
    """Issue 46, 9: "Shen, et al." heads two pages of the paper; inside an entry broken by the page it
    is no part of the title."""
    body = "Some prose of the paper, page one.\n\fShen, et al.\nMore prose on page two.\n\fPage three prose.\n"
    refs = ("[1] Ab Cd and Ef Gh. 2020. A first title. Venue One.\n[2] Andrew Head and Kyle Lo. 2020. Augmenting "
            "Scientific Papers with Just-in-Time,\fShen, et al.\nPosition-Sensitive Definitions. Proc. of CHI (2020).\n")
    running = running_lines(body + "References\n" + refs, 3)
    assert "Shen, et al." in running
    entries, _ = parse_reference_list(refs, running=running)
    assert entries[1].title == "Augmenting Scientific Papers with Just-in-Time, Position-Sensitive Definitions"
    assert running_lines("A\nx\n\fA\ny\n\fEntry ends here.\nz\n\fEntry ends here.\n", 2) == {"A"}


def test_a_year_is_no_author():
    """Issue 46, 9: "[1] 2019. CHI '19: Proceedings ..." has no authors, not ["2019"]."""
    e = parse_entry("[1] 2019. CHI \u201919: Proceedings of the 2019 CHI Conference on Human Factors in Computing "
                    "Systems (Glasgow, Scotland Uk). Association for Computing Machinery, New York, NY, USA.", 1)
    assert e.authors == () and e.year == 2019 and e.title.startswith("CHI \u201919: Proceedings")
    assert parse_entry("[2] 2021. Fermat\u2019s Library. https://fermatslibrary.com/", 2).authors == ()


def test_names_as_printed_beside_the_family_names():
    got = {raw: (e.authors, e.names) for raw in [
        "[1] Kyle Lo, Lucy Lu Wang, and Daniel S. Weld. 2020. S2ORC. In ACL.",
        "Adams, G., Smith, J. A., & van der Berg, K. (2019). A title. Journal of Things, 12(3), 1-10.",
        "Lovelace, Ada, and Babbage, Charles. 1843. Sketch. Memoirs.",
        "OGC of Harvard. 2016. Copyright and fair use.",
    ] for e in [parse_entry(raw, 1)]}
    assert list(got.values()) == [
        (("Lo", "Wang", "Weld"), ("Kyle Lo", "Lucy Lu Wang", "Daniel S. Weld")),
        (("Adams", "Smith", "van der Berg"), ("Adams, G", "Smith, J. A", "van der Berg, K")),
        (("Lovelace", "Babbage"), ("Lovelace, Ada", "Babbage, Charles")),
        (("OGC of Harvard",), ("OGC of Harvard",))]


def test_the_list_text_of_a_plain_text_and_of_sidecar_items():
    from chitragupta.engine.text.entries import items_list, plain_list

    text = "Body.\fBody.\fReferences\n[1] Ab Cd. 2019. T. V.\n"
    span = (text.index("References"), len(text))
    assert plain_list(text, span) == ("[1] Ab Cd. 2019. T. V.\n", frozenset())
    items = [{"text": "References", "label": "section_header", "page": 2},
             {"text": "Auer, C.: Delivering. CoRR (2022)", "label": "list_item", "page": 2},
             {"text": "Journal of Tests", "label": "page_header", "page": 3},
             {"text": "Nassar, A.: Tableformer (2022)", "label": "list_item", "page": 3},
             {"text": "https://doi.org/10.1/x", "label": "text", "page": 3},
             {"text": "[3] Numbered already. 2020.", "label": "list_item", "page": 3},
             {"text": "Appendix", "label": "section_header", "page": 4},
             {"text": "Prose (2017).", "label": "text", "page": 4}]
    assert items_list(items, (0, len(items))) == ("- Auer, C.: Delivering. CoRR (2022)\n- Nassar, A.: Tableformer "
                                                  "(2022)\nhttps://doi.org/10.1/x\n[3] Numbered already. 2020.")
