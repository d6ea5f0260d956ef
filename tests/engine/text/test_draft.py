"""Reading a draft: every citation syntax, several keys per command, the line each key is on, the claim
(sentence or clause) each citation supports, what is not prose, and the uncited sentences."""

from __future__ import annotations

import pytest

from chitragupta.engine.text.draft import guess_format, read_draft

from helpers import SHARED


def _cites(text, fmt=None):
    return [(c.key, c.line, c.claim) for c in read_draft(text, fmt).cites]


@pytest.mark.parametrize("command", ["cite", "citep", "citet", "parencite", "textcite", "autocite", "Textcite",
                                     "citep*", "footcite"])
def test_each_latex_command_with_optional_arguments_and_several_keys(command):
    text = f"Sparse retrieval stays strong \\{command}[see][p.~3]{{robertson2009, lin2021}}.\n"
    assert _cites(text, "latex") == [("robertson2009", 1, "Sparse retrieval stays strong."),
                                     ("lin2021", 1, "Sparse retrieval stays strong.")]


def test_pandoc_bracketed_narrative_suppressed_and_braced_citations():
    text = ("Sparse retrieval stays strong [see @robertson2009, p. 3; @lin2021].\n"
            "As @smith2020 argue, stemming helps every collection [-@jones_2019:b].\n"
            "Keys in braces work too [@{odd key}].\n")
    assert [(k, line) for k, line, _ in _cites(text, "markdown")] == [
        ("robertson2009", 1), ("lin2021", 1), ("smith2020", 2), ("jones_2019:b", 2), ("odd key", 3)]


def test_what_is_not_a_citation():
    text = ("Write to a@b.org about it, on a CPU @2.45 GHz. A [link](http://x.org) and `[@code]` and \\nocite{all} "
            "are not citations.\n"
            "```\n[@fenced]\n```\n")
    assert _cites(text, "markdown") == []


def test_a_key_spread_over_lines_is_on_its_own_line():
    text = "First line.\nA claim about retrieval \\cite{a,\n  b,\n c}.\n"
    assert [(k, line) for k, line, _ in _cites(text, "latex")] == [("a", 2), ("b", 3), ("c", 4)]


def test_several_citations_split_a_sentence_into_clauses():
    text = ("Dense retrievers generalise poorly out of domain \\cite{a}, while hybrids recover most of the loss "
            "\\cite{b}.\nAs \\textcite{c} show, stemming helps every language we tried \\cite{d}.\n")
    got = {k: claim for k, _line, claim in _cites(text, "latex")}
    assert got["a"] == "Dense retrievers generalise poorly out of domain"
    assert got["b"] == "while hybrids recover most of the loss"
    assert got["c"] == "show, stemming helps every language we tried"  # "As" alone is no claim: the clause after
    assert got["d"] == "show, stemming helps every language we tried"


def test_sentences_end_at_punctuation_but_not_after_abbreviations_or_initials():
    text = "Smith et al. report gains, e.g. on news. J. Smith disagreed \\cite{x}. Fig. 2 shows it.\n\nNew paragraph\n"
    d = read_draft(text, "latex")
    assert [s.claim for s in d.sentences] == ["Smith et al. report gains, e.g. on news.", "J. Smith disagreed.",
                                              "Fig. 2 shows it.", "New paragraph"]
    assert [s.cited for s in d.sentences] == [False, True, False, False]
    assert d.cites[0].sentence == 1 and d.sentences[1].text == "J. Smith disagreed \\cite{x}."


def test_latex_comments_preamble_maths_headings_and_the_end_are_not_prose():
    text = ("\\documentclass{article}\n\\usepackage{x}\\cite{pre}\n\\begin{document}\n\\section{Intro \\cite{h}}\n"
            "BM25 is a strong baseline \\cite{a}. % not this \\cite{comment}\n"
            "\\begin{equation} x \\cite{eq} \\end{equation}\n"
            "Costs 5\\% less \\cite{b}.\n\\end{document}\n\\cite{after}\n")
    assert _cites(text) == [("a", 5, "BM25 is a strong baseline."), ("b", 7, "Costs 5% less.")]


def test_markdown_front_matter_headings_and_the_reference_list_are_not_prose():
    text = ("---\ntitle: x [@meta]\n---\n# Intro [@head]\n\nBM25 is a strong baseline [@a].\n\n"
            "- a list item that claims something about ranking [@b]\n- another item\n\n# References\n\n[@ref]\n")
    assert _cites(text) == [("a", 6, "BM25 is a strong baseline."),
                            ("b", 8, "a list item that claims something about ranking")]
    d = read_draft(text)
    assert [s.claim for s in d.sentences if not s.cited] == ["another item"]


def test_crlf_line_ends_count_lines_as_lf_does():
    assert _cites("One.\r\nTwo claims here [@a].\r\n", "markdown") == [("a", 2, "Two claims here.")]


def test_the_format_is_guessed_from_the_name_then_the_text():
    assert guess_format("", "paper.tex") == "latex"
    assert guess_format("", "draft.md") == "markdown"
    assert guess_format("plain words \\citep{a}") == "latex"
    assert guess_format("plain words [@a]") == "markdown"
    assert guess_format("plain words") == "text"
    with pytest.raises(ValueError, match="allowed: latex, markdown, text"):
        read_draft("x", "rst")


def test_plain_text_reads_both_syntaxes():
    assert [k for k, _l, _c in _cites("One claim [@a]. Another claim \\cite{b}.", "text")] == ["a", "b"]


def test_latex_reads_its_commands_alone_and_table_rows_are_sentences():
    text = ("Mail {ab,cd}@ibm.com or [@x].\n\\begin{tabular}{ll}\nByteNet \\cite{a} & 23.75 \\\\\n"
            "Transformer \\cite{b} & 28.4 \\\\\n\\end{tabular}\n")
    assert [(k, line, claim) for k, line, claim in _cites(text, "latex")] == [("a", 3, "ByteNet & 23.75"),
                                                                           ("b", 4, "Transformer & 28.4")]


LATEX = SHARED / "data" / "pdfs" / "docling" / "latex"


@pytest.mark.skipif(not LATEX.is_dir(), reason="../shared/data/pdfs is absent")
def test_every_citation_of_real_latex_papers_is_found():
    import re

    files = sorted(LATEX.rglob("*.tex"))
    assert len(files) >= 10
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        plain = re.sub(r"(?<!\\)%[^\n]*", "", text)
        keys = [k.strip() for m in re.findall(r"\\(?:cite[a-z]*|citep|citet|parencite|textcite|autocite)\*?"
                                               r"(?:\[[^\]]*\]){0,2}\s*\{([^}]*)\}", plain) for k in m.split(",") if k.strip()]
        assert [c.key for c in read_draft(text, name=f.name).cites] == keys, f
