"""The window chooser, table widening and the reference cut."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from chitragupta.engine.text.refcut import (
    is_reference_heading,
    kept_items,
    reference_cut,
)
from chitragupta.engine.text.tables import TABLE_CAP, render_block, table_blocks
from chitragupta.engine.text.windows import choose_windows

from helpers import ROOT

TEXT = ("Digital twins mirror assets. " * 5 + "An unrelated middle part. " * 60
        + "Here the digital twin fidelity question is discussed with fidelity metrics. " + "Tail text. " * 40)


def test_best_covering_window_wins_over_the_first_mention():
    (w,) = choose_windows(TEXT, ["digital", "twin", "fidelity"], 200, 1)
    assert "fidelity" in w.text and "twin" in w.text and w.covered == 3
    assert len(w.text) <= 200


def test_windows_are_in_document_order_and_disjoint():
    wins = choose_windows(TEXT, ["digital", "twin", "fidelity"], 120, 3)
    assert [w.start for w in wins] == sorted(w.start for w in wins)
    for a, b in zip(wins, wins[1:]):
        assert a.end <= b.start


def test_word_boundary_is_the_tokenizers():
    text = "control systems and maintainers said; later co-simulation with an ai_model"
    (w,) = choose_windows(text, ["co"], 30, 1)
    assert "co-simulation" in w.text
    (w,) = choose_windows(text, ["ai"], 30, 1)
    assert "ai_model" in w.text
    assert choose_windows("maintainer said fair", ["ai"], 30, 1) == []


def test_deterministic_across_hash_seeds():
    code = ("from chitragupta.engine.text.windows import choose_windows; import json; t = open(%r).read(); "
            "print(json.dumps([(w.start, w.end, w.text) for w in choose_windows(t, "
            "['twin', 'fidelity', 'digital', 'metrics', 'tail'], 90, 4)]))")
    path = Path(__file__)
    outs = set()
    for seed in ("0", "1", "42", "random", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code % str(path)], env=env, cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1


TABLE = "| method | recall@5 | nDCG@5 |\n|---|---|---|\n| BM25 | 0.81 | 0.73 |\n| dense | 0.77 | 0.70 |"


def test_a_window_in_a_table_widens_to_the_whole_table():
    text = "Intro words here. " * 30 + "\n" + TABLE + "\n" + "After the table. " * 30
    wins = choose_windows(text, ["dense"], 40, 2)
    assert len(wins) == 1 and wins[0].text == TABLE
    # two windows catching different corners of one table come back once
    wins = choose_windows(text, ["method", "dense"], 20, 2)
    assert [w.text for w in wins] == [TABLE]
    # a window touching no table is unchanged by the table logic
    plain = choose_windows(text, ["intro"], 60, 1)
    assert "|" not in plain[0].text and "\n" not in plain[0].text


def test_table_cap_drops_whole_rows_from_the_end():
    rows = ["| header | value |", "|---|---|"] + [f"| row {i} | {'x' * 40} |" for i in range(200)]
    text = "\n".join(rows)
    (start, end), = table_blocks(text)
    out = render_block(text, start, end)
    assert len(out) <= TABLE_CAP and out.startswith("| header | value |\n|---|---|")
    assert all(line in rows for line in out.split("\n"))


def test_table_blocks_need_two_lines():
    assert table_blocks("| lonely |\ntext") == []
    assert len(table_blocks("a\n| x |\n| y |\nb")) == 1


def item(text, label="text"):
    return {"text": text, "label": label, "page": None}


def test_reference_headings():
    yes = ["References", "REFERENCES", "7 References", "7. References", "VII. REFERENCES", "Bibliography",
           "Works Cited", "literature cited", "References:"]
    no = ["Reference architecture", "ACMReference Format:", "References and notes on x", "Referencing"]
    for t in yes:
        assert is_reference_heading(item(t, "section_header")), t
    for t in no:
        assert not is_reference_heading(item(t, "section_header")), t
    assert not is_reference_heading(item("References", "text"))  # the word under another label


def test_cut_is_the_last_heading_to_the_end():
    items = [item("T", "title"), item("Intro"), item("References", "section_header"), item("Appendix A"),
             item("References", "section_header"), item("[1] Smith"), item("Acknowledgements", "section_header")]
    assert reference_cut(items) == 4
    assert [i for i, _ in kept_items(items)] == [0, 1, 2, 3]
    assert reference_cut([item("a")]) is None
    pics = [item("x", "caption"), item("y", "page_header"), item("z")]
    assert [i for i, _ in kept_items(pics)] == [2]


@pytest.mark.parametrize("line", ["Abstract", "ABSTRACT", "A B S T R A C T", "Introduction", "1 INTRODUCTION",
                                  "I. Introduction", "Background", "BACKGROUND"])
def test_front_end_found_when_its_word_is_the_only_capital(line):
    # the capitals test before the word scan (A, I, B) must never pass over a heading
    from chitragupta.engine.text.front import plain_front_end

    text = "lower case title block\nan author, somewhere\n" + line + "\nthe paper begins here.\n" + "word " * 50
    assert text[plain_front_end(text):].startswith(line)
    assert plain_front_end(text.replace(line, line.lower())) == 0


def test_fitted_quotes_a_part_in_its_width():
    from chitragupta.engine.text.windows import fitted, lead

    text = "Bridge owners inspect decks by eye every few years, and a model calibrated once drifts as tendons corrode."
    assert fitted(text, ["corrode"], len(text)) == text and fitted(text, ["corrode"], 0) == ""
    got = fitted(text, ["corrode"], 40)
    assert len(got) <= 40 and "corrode" in got
    assert fitted(text, ["absent"], 40) == lead(text, 40) == "Bridge owners inspect decks by eye every"
