"""``chitragupta topics`` (cli/topics_cmd.py) over a ``content/topics.json`` written here in the stage's
shape: the listing (labels, sizes, titles not ids), ``--json``, the errors for a missing, damaged or map-less
file, and ``--html`` opened in a headless Chromium with every topic labelled."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import make_workspace, one_error_line, open_page, run_main

THEMES = {0: ["soil", "microbe", "crop", "data"], 1: ["vaccine", "cohort", "dose", "data"],
          2: ["ocean", "heat", "coral", "data"]}


@pytest.fixture
def ws(tmp_path):
    records = [{"_id": f"{THEMES[t][0]}{i}", "title": f"On {THEMES[t][1]} number {i}", "text": "words"}
               for t in THEMES for i in range(6)] + [{"_id": "odd", "title": "An odd one", "text": "words"}]
    return make_workspace(tmp_path, records)


def write_topics(ws, with_map: bool = True) -> dict:
    rng = np.random.default_rng(0)
    assign = {f"{THEMES[t][0]}{i}": t for t in THEMES for i in range(6)} | {"odd": -1}
    data = {"schema": 1, "created": "2026-12-02T16:30:00Z", "model": "mini", "n_docs": 19, "n_topics": 3,
            "n_outliers": 1, "assignments": assign,
            "topics": [{"id": -1, "size": 1, "words": ["odd"], "scores": [0.1], "examples": []}] +
                      [{"id": t, "size": 6, "words": THEMES[t], "scores": [0.1] * 4,
                        "examples": [f"{THEMES[t][0]}{i}" for i in range(3)]} for t in THEMES]}
    if with_map:
        data["map"] = {"method": "test", "coords": {k: [float(t * 4 + rng.normal()), float(rng.normal())]
                                                    for k, t in assign.items()}}
    (ws / "content" / "topics.json").write_text(json.dumps(data), encoding="utf-8")
    return data


def test_the_listing_names_each_topic_by_its_words_and_titles(ws):
    write_topics(ws)
    out = run_main("topics", "-w", ws)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("3 topics over 19 documents, 1 outliers")
    # "data" is every topic's word: it comes last in each label
    assert [ln.split()[0:3] for ln in lines if not ln.startswith(" " * 14)][1:] == [
        ["0", "6", "soil,"], ["1", "6", "vaccine,"], ["2", "6", "ocean,"], ["-1", "1", "outliers"]]
    assert "    0      6  soil, microbe, crop, data" in lines
    assert "- On microbe number 0" in out.stdout and "soil0" not in out.stdout  # titles, not citekeys
    rows = [json.loads(x) for x in run_main("topics", "-w", ws, "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == [0, 1, 2, -1]
    assert rows[1] == {"id": 1, "label": "vaccine, cohort, dose, data", "size": 6, "words": THEMES[1],
                       "examples": [{"citekey": f"vaccine{i}", "title": f"On cohort number {i}"} for i in range(3)]}


def test_missing_damaged_and_map_less_files_say_what_to_run(ws, tmp_path):
    one_error_line(run_main("topics", "-w", ws), "no content/topics.json", "enrich --stages embed,bertopic")
    (ws / "content" / "topics.json").write_text("{not json", encoding="utf-8")
    one_error_line(run_main("topics", "-w", ws), "content/topics.json is not a topics file", "enrich --stages bertopic")
    for shape in ({"schema": 2}, {"schema": 1, "assignments": {}, "topics": [{"id": 0}]}, [1]):
        (ws / "content" / "topics.json").write_text(json.dumps(shape), encoding="utf-8")
        one_error_line(run_main("topics", "-w", ws), "content/topics.json is not a topics file")
    write_topics(ws, with_map=False)
    assert run_main("topics", "-w", ws).returncode == 0  # a file from before maps still lists
    one_error_line(run_main("topics", "-w", ws, "--html", tmp_path / "t.html"), "no 2-D map", "--stages bertopic")
    assert not (tmp_path / "t.html").exists()


def test_the_map_in_a_browser_labels_every_topic(ws, tmp_path, browser):
    write_topics(ws)
    got = run_main("topics", "-w", ws, "--html", tmp_path / "t.html")
    assert got.returncode == 0 and "map written to" in got.stderr and "soil" in got.stdout
    open_page(browser, tmp_path / "t.html")
    labels = browser.evaluate("[...document.querySelectorAll('.topic-label')].map(d => d.textContent)")
    assert sorted(labels) == ["ocean, heat, coral, data", "soil, microbe, crop, data", "vaccine, cohort, dose, data"]
    browser.evaluate("document.querySelector('.topic-label').click()")
    assert browser.evaluate("document.querySelector('#topic-list li.on').dataset.topic") == "0"
