from pathlib import Path

from chitragupta.engine.corpus.bibtex import file_field_paths, read_bibtex


def test_file_field_formats(tmp_path):
    base = tmp_path
    assert file_field_paths("/abs/a.pdf", base) == (Path("/abs/a.pdf"),)
    assert file_field_paths("rel/a.pdf", base) == (base / "rel/a.pdf",)
    assert file_field_paths(":/abs/a.pdf:PDF", base) == (Path("/abs/a.pdf"),)
    assert file_field_paths("Full Text:papers/a.pdf:application/pdf;Snap:b.html:text/html", base) == (
        base / "papers/a.pdf", base / "b.html")
    assert file_field_paths(r"Desc:C\:\\Users\\me\\a.pdf:PDF", base)[0].name.endswith("a.pdf")


BIB = r"""@article{good1,
  title = {A {Digital} Twin of Caf{\'e} Networks},
  abstract = {An abstract.},
  keywords = {digital twin; networks, cafes},
  file = {papers/good1.pdf}
}

@article{broken, title = {unclosed

@misc{good2, title = "Second"}

@misc{good1, title = {Duplicate}}
"""


def test_malformed_and_duplicate_entries_reported_with_lines(tmp_path):
    bib = tmp_path / "b.bib"
    bib.write_text(BIB, encoding="utf-8")
    entries, problems = read_bibtex(bib)
    assert [e.citekey for e in entries] == ["good1", "good2"]
    e = entries[0]
    assert e.title == "A Digital Twin of Café Networks"
    assert e.abstract == "An abstract." and e.keywords == ("digital twin", "networks", "cafes")
    assert e.files == (tmp_path / "papers/good1.pdf",) and e.line == 1
    assert any(f"{bib}:8: malformed entry skipped" in p for p in problems), problems
    assert any(f"{bib}:12: duplicate citekey 'good1'" in p for p in problems), problems


def test_non_utf8_and_nul_bytes(tmp_path):
    bib = tmp_path / "b.bib"
    bib.write_bytes(b"@misc{k1, title = {Caf\xe9}}\n@misc{k2, title = {N\x00UL}}\n")
    entries, problems = read_bibtex(bib)
    assert [e.citekey for e in entries] == ["k1", "k2"]
    assert entries[0].title == "Caf\ufffd" and entries[1].title == "NUL"
    assert any(":1: not UTF-8" in p for p in problems) and any(":2: NUL bytes removed" in p for p in problems)


def test_truncated_file_keeps_what_parses(tmp_path):
    bib = tmp_path / "b.bib"
    bib.write_text(BIB[: BIB.index("@misc{good2")] + "@misc{good2, title = {Sec", encoding="utf-8")
    entries, problems = read_bibtex(bib)
    assert [e.citekey for e in entries] == ["good1"]
    assert len(problems) >= 1
