"""engine/library/metadata.py: names split as BibTeX splits them, years, DOIs, folding, and ``facets`` -- the
per-source values a filter compares, aligned with the citekeys, from a synced and an imported corpus and
from a ledger written before schema 3."""

from __future__ import annotations

import sqlite3

import pytest
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.metadata import (
    facets,
    family_keys,
    fold,
    norm_doi,
    split_and,
    split_name,
    year_of,
)
from chitragupta.engine.library.sync import import_jsonl, sync
from chitragupta.engine.library.workspace import Workspace

from helpers import write_jsonl


@pytest.mark.parametrize("raw, want", [
    ('M{\\"u}ller, J{\\\'o}rg', ('M{\\"u}ller', "J{\\'o}rg")),
    ('{\\"U}ber, Hans', ('{\\"U}ber', "Hans")),
    ("Ludwig van Beethoven", ("van Beethoven", "Ludwig")),
    ("Charles Louis Xavier Joseph de la Vall{\\'e}e Poussin",
     ("de la Vall{\\'e}e Poussin", "Charles Louis Xavier Joseph")),
    ('{\\"u}ber der Berg, K.', ('{\\"u}ber der Berg', "K.")),  # a special character's letter gives the case
    ("{van Gogh}, Vincent", ("{van Gogh}", "Vincent")),
    ("Vincent {van Gogh}", ("{van Gogh}", "Vincent")),  # braces protect: one family word
    ("{Barnes and Noble}", ("{Barnes and Noble}", "")),
    ("Smith, Jr., John", ("Smith", "John, Jr.")),
    ("D.~E. Knuth", ("Knuth", "D. E.")),
    ("Aristotle", ("Aristotle", "")),
    ("  Doe ,  Jane ", ("Doe", "Jane")),
    ("", ("", "")),
])
def test_a_name_is_split_as_bibtex_splits_it(raw, want):
    assert split_name(raw) == want


def test_split_and_keeps_braced_ands():
    assert split_and("A. Smith and {Barnes and Noble} AND Doe, J.") == ["A. Smith", "{Barnes and Noble}", "Doe, J."]
    assert split_and("  ") == []


@pytest.mark.parametrize("value, want", [
    ("2020", 2020), ("2020a", 2020), (" 1999 ", 1999), ("2019/2020", 2019), ("2019-05-01", 2019), ("-350", -350),
    ("850", 850), (2021, 2021), ("19x5", None), ("in press", None), ("12345", None), ("", None), (True, None),
    (10**6, None), (None, None), ([2020], None), (2.5, None),
])
def test_year_of(value, want):
    assert year_of(value) == want


@pytest.mark.parametrize("value, want", [
    ("10.1000/ABC", "10.1000/abc"), ("https://doi.org/10.1000/ABC", "10.1000/abc"), ("doi:10.1000/x", "10.1000/x"),
    ("DOI: 10.1000/X", "10.1000/x"), ("http://dx.doi.org/10.1000/a%2Fb", "10.1000/a/b"),
    ("10.1000/a\\_b", "10.1000/a_b"), ("{10.1000/xyz}", "10.1000/xyz"), ("nope", None), ("10.1000", None),
    ("https://example.org/10.1000/x", None), (7, None), (None, None),
])
def test_norm_doi(value, want):
    assert norm_doi(value) == want


def test_fold_drops_case_and_accents():
    assert [fold(s) for s in ("Müller", "ŁUKASZ", "Straße", "Ørsted", "  Über   Alles ", "smith")] == [
        "muller", "lukasz", "strasse", "orsted", "uber alles", "smith"]
    assert family_keys("van der Berg") == ("van der berg", "berg")
    assert family_keys("Müller") == ("muller",) and family_keys("") == ()


def test_facets_from_a_synced_and_an_imported_corpus_are_aligned_and_folded(tmp_path):
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "bibliography.bib").write_text(
        '@Article{b1, title={One}, author={M{\\"u}ller, J{\\\'o}rg and Ludwig van Beethoven}, year={2020a},'
        ' journal={J. {\\"O}kol.}, keywords={Digital Twin; FIDELITY}, doi={https://doi.org/10.1000/ABC}}\n'
        "@phdthesis{b2, title={Two}, author={Doe, Jane}, school={MIT}, year={19x5}}\n", encoding="utf-8")
    ws = Workspace.open(tmp_path)
    rep = sync(ws)
    assert any("'b2': field 'year' '19x5' is not a year; left empty" in p for p in rep.problems), rep.problems
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "j1", "title": "J", "text": "twin", "metadata": {"authors": "Łukasz Nowak and Smith, A.", "year": 1999,
                                                                "venue": "Nature", "type": "Article",
                                                                "keywords": ["Ökologie"]}},
        {"_id": "a0", "title": "A", "text": "twin"}]))
    with Ledger(ws.ledger_path, create=False) as led:
        f = facets(led)
    assert f.citekeys == ["a0", "b1", "b2", "j1"] and len(f) == 4
    at = dict(zip(f.citekeys, zip(f.families, f.year, f.keywords, f.venue, f.type, f.doi)))
    assert at["a0"] == ((), None, (), None, None, None)
    assert at["b1"] == (("muller", "van beethoven", "beethoven"), 2020, ("digital twin", "fidelity"), "j. okol.",
                        "article", "10.1000/abc")
    assert at["b2"] == (("doe",), None, (), "mit", "phdthesis", None)
    assert at["j1"] == (("nowak", "smith"), 1999, ("okologie",), "nature", "article", None)


def test_facets_of_a_ledger_before_schema_3_come_from_its_display_names(tmp_path):
    path = tmp_path / "ledger.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sources (citekey TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '', abstract TEXT, keywords TEXT,
            status TEXT NOT NULL, reason TEXT, parsed_path TEXT, origin TEXT NOT NULL, source_path TEXT,
            source_size INTEGER, source_mtime_ns INTEGER, source_hash TEXT, backend TEXT, updated_at REAL NOT NULL,
            authors TEXT, year TEXT);
        INSERT INTO meta VALUES ('schema', '2'), ('ledger_id', 'abc'), ('changes', '0');
    """)
    db.execute("INSERT INTO sources (citekey, title, status, origin, updated_at, authors, year, keywords) "
               "VALUES ('k', 'T', 'no-file', 'x.bib', 1.0, ?, 'in press', ?)",
               ('["Müller, Jörg", "Ludwig van Beethoven", "others"]', '["Twin"]'))
    db.commit()
    db.close()
    with Ledger(path, create=False) as led:
        f = facets(led)
        assert led.get("k").author_names == (("Müller", "Jörg"), ("van Beethoven", "Ludwig"))
    assert f.citekeys == ["k"] and f.families == [("muller", "van beethoven", "beethoven")]
    assert f.year == [None] and f.keywords == [("twin",)] and f.venue == f.type == f.doi == [None]


def test_a_bibtex_name_list_gives_the_names_as_written_and_their_parts(tmp_path):
    from chitragupta.engine.library.bibtex import read_bibtex

    bib = tmp_path / "n.bib"
    bib.write_text("@misc{k, author={Smith, Jr., John and D.~E. Knuth and Ludwig van Beethoven and {\\'E}mile Zola"
                   " and {\\\"U}ber, Hans and Plato}}\n", encoding="utf-8")
    (e,), _ = read_bibtex(bib)
    assert e.authors == ("Smith, Jr., John", "D. E. Knuth", "Ludwig van Beethoven", "Émile Zola", "Über, Hans", "Plato")
    assert e.author_names == (("Smith", "John, Jr."), ("Knuth", "D. E."), ("van Beethoven", "Ludwig"),
                              ("Zola", "Émile"), ("Über", "Hans"), ("Plato", ""))
