"""``chitragupta check``: the table (worst first), ``--json`` (the service's report), ``--markdown`` and
``--html`` (the draft with each citation marked and its evidence beside it; the page opened in a headless
Chromium), ``--log`` (the draft's dossier), and the exit
status: 0 when every citation is supported, 3 with findings, 1 on an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import TOPICS, make_workspace, open_page, run_main

RIGHT = "Childhood vaccination programmes reduced measles incidence in every region studied"
WRONG = "Crop yields in the field trial depended on soil nitrogen"


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    recs = [{"_id": k, "title": f"A study of {k}", "text": t} for k, t in TOPICS.items()]
    root = make_workspace(tmp_path_factory.mktemp("checkcli"), recs)
    assert run_main("index", "-w", root).returncode == 0
    return root


def _draft(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def test_exit_0_when_every_citation_is_supported_3_with_findings_1_on_error(ws, tmp_path):
    good = _draft(tmp_path, "good.tex", f"{RIGHT} \\cite{{vaccine}}.\n")
    assert run_main("check", "-w", ws, good).returncode == 0
    bad = _draft(tmp_path, "bad.md", f"{RIGHT} [@vaccine].\n\n{WRONG} [@protein]. Nothing [@nokey].\n")
    p = run_main("check", "-w", ws, bad)
    assert p.returncode == 3
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["line", "status", "supp"]
    assert [(r.split()[0], r.split()[1], r.split()[3]) for r in lines[1:]] == [
        ("3", "unknown", "nokey"), ("3", "unsupported", "protein"), ("1", "supported", "vaccine")]
    assert "better: soil" in lines[2]
    missing = run_main("check", "-w", ws, tmp_path / "absent.tex")
    assert missing.returncode == 1 and "absent.tex: cannot read the draft" in missing.stderr
    binary = tmp_path / "bin.tex"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in run_main("check", "-w", ws, binary).stderr


def test_json_is_the_report(ws, tmp_path):
    from chitragupta.service.check import check

    text = f"{RIGHT} [@vaccine; @protein].\n"
    p = run_main("check", "-w", ws, _draft(tmp_path, "d.md", text), "--json")
    assert p.returncode == 3
    got = json.loads(p.stdout)
    assert got == check(ws, text, fmt="markdown").to_dict()
    assert [c["key"] for c in got["citations"]] == ["vaccine", "protein"] and got["engine"] == "bm25"


def test_markdown_marks_each_citation_and_quotes_its_evidence(ws, tmp_path):
    text = f"# Intro\n\n{RIGHT} \\cite{{vaccine}}.\n{WRONG} \\cite{{protein}}.\n\nLast paragraph.\n"
    out = tmp_path / "marked.md"
    p = run_main("check", "-w", ws, _draft(tmp_path, "d.tex", text), "--markdown", out)
    assert p.returncode == 3
    md = out.read_text(encoding="utf-8")
    assert f"{RIGHT} \\cite{{vaccine}} **[1 ✓]**." in md and f"\\cite{{protein}} **[2 ✗]**." in md
    para, rest = md.split("\n\n> **[1] vaccine: supported**")
    assert para.endswith(f"\\cite{{protein}} **[2 ✗]**.")  # the quotes follow the paragraph
    assert "> evidence: \"" in rest and "(matched: " in rest and "> better: soil (" in rest
    assert rest.rstrip().endswith("Last paragraph.")
    assert run_main("check", "-w", ws, _draft(tmp_path, "e.tex", text), "--markdown", "-").stdout.count("**[") == 4


@pytest.mark.slow
def test_html_is_the_draft_marked_in_a_page_that_opens_offline(ws, tmp_path, browser):
    text = f"{RIGHT} \\cite{{vaccine}}.\n{WRONG} \\cite{{protein}}. Nothing \\cite{{nokey}}.\n"
    page = tmp_path / "checked.html"
    p = run_main("check", "-w", ws, _draft(tmp_path, "d.tex", text), "--html", page, "--json")
    assert p.returncode == 3
    report = json.loads(p.stdout)
    open_page(browser, page, region="#draft")
    marks = browser.evaluate("[...document.querySelectorAll('a.cite')].map(a => [a.textContent, a.dataset.status])")
    assert marks == [[c["key"], c["status"]] for c in report["citations"]]
    assert [m[1] for m in marks] == ["supported", "unsupported", "unknown"]


def test_log_records_each_citation_in_the_dossier(ws, tmp_path):
    d = _draft(tmp_path, "d.md", f"{RIGHT} [@vaccine]. {WRONG} [@nokey].\n")
    assert run_main("check", "-w", ws, d, "--log", "paper1").returncode == 3
    log = (ws / "content" / "dossiers" / "paper1" / "retrieval.md").read_text(encoding="utf-8").splitlines()
    assert log[0].startswith("| time | command | unit |") and len(log) == 4
    assert "| check | bm25 document | [vaccine line 1: supported] Childhood" in log[2]
    assert "[nokey line 1: unknown]" in log[3]


def test_a_bad_format_or_engine_is_refused_before_any_work(ws, tmp_path):
    d = _draft(tmp_path, "d.md", "x")
    assert run_main("check", "-w", ws, d, "--format", "rst").returncode == 2
    assert run_main("check", "-w", ws, d, "--engine", "dense").returncode == 2
    bad_out = run_main("check", "-w", ws, d, "--markdown", tmp_path)
    assert bad_out.returncode == 1 and "--markdown" in bad_out.stderr
