"""``engine/search/byline.py``: every hit carries its source's authors (family names, "others" past five) and
year from the ledger -- documents, passages, "papers like this one" and evidence on BM25, chunks and fused
sources on the embedding engines -- so that "Lo et al. (2020)" needs no further call."""

from __future__ import annotations

import json

import pytest

from helpers import corpus_records, import_records, make_workspace, random_docs, run_cli, write_jsonl

DOCS = [dict(d, year=1990 + i, authors=[f"Fam{j}, G." for j in range(i % 8)])
        for i, d in enumerate(random_docs(17, 40, vocab=30))]


def _want(key: str, docs=DOCS) -> tuple[list[str], int | None]:
    d = next(d for d in docs if d["_id"] == key)
    fams = [a.split(",")[0] for a in d.get("authors", [])]
    return (fams if len(fams) <= 5 else fams[:5] + ["others"]), d.get("year")


def _check(hits, docs=DOCS) -> int:
    for h in hits:
        h = h if isinstance(h, dict) else h.to_dict()
        assert (h["authors"], h["year"]) == _want(h["citekey"].split("#")[0], docs), h
    return len(hits)


@pytest.mark.slow
def test_every_bm25_hit_carries_its_authors_and_year(tmp_path):
    from chitragupta.engine.search.bm25 import BM25Searcher

    root = make_workspace(tmp_path, DOCS)
    first = sorted((root / "content" / "parsed").glob("*.txt"))[3]  # one source with passages
    first.with_suffix(".passages.json").write_text(json.dumps(
        [{"text": " ".join(["twin model sensor heat"] * 6), "label": "text", "page": 1}]))
    run_cli("index", "-w", root, check=True)
    s = BM25Searcher.open(root)
    seen = _check(s.search("twin model", 40).hits)
    seen += _check(s.search("twin model", 5, unit="passage").hits)
    seen += _check(s.similar(DOCS[7]["_id"], 6).hits)
    seen += _check(s.evidence("twin model", DOCS[7]["_id"], n=3).hits)
    assert seen > 45
    assert any(len(h.authors) == 6 and h.authors[-1] == "others" for h in s.search("twin model", 40).hits)
    assert any(h.authors == () for h in s.search("twin model", 40).hits)  # no author: none, not a guess
    # the CLI's --json carries them too, and a re-import with new metadata is read at once
    cli = json.loads(run_cli("search", "-w", root, "twin model", "-k", "40", "--json", check=True).stdout)
    assert _check(cli) == len(cli)
    moved = [dict(d, year=d["year"] + 100, authors=["Solo, A."]) for d in DOCS]
    run_cli("import", "-w", root, write_jsonl(tmp_path / "corpus.jsonl", moved), check=True)  # the same origin
    hits = BM25Searcher.open(root).search("twin model", 10).hits
    assert _check(hits, moved) and hits[0].authors == ("Solo",)


def test_a_hit_without_a_ledger_to_read_keeps_no_byline(tmp_path):
    from chitragupta.engine.search.byline import with_bylines
    from chitragupta.engine.search.results import SearchResponse, SearchResult

    class NoLedger:
        ledger_path = tmp_path / "gone.sqlite"

    resp = SearchResponse("q", [SearchResult("k", "t", 1.0, "")])
    assert with_bylines(NoLedger(), [resp])[0].hits[0].to_dict()["authors"] == []
    assert with_bylines(None, [resp]) == [resp]


@pytest.mark.slow
@pytest.mark.enrich
def test_embed_and_hybrid_hits_carry_them_too(tmp_path, encoder):
    from chitragupta.enrich.hybrid import HybridSearcher
    from chitragupta.enrich.search import EmbedSearcher

    from helpers import cli_main

    recs = [dict(r, year=2001 + i, authors=[f"Au{j}, X." for j in range(i + 1)])
            for i, r in enumerate(corpus_records())]
    root = import_records(tmp_path / "ws", recs)
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    e, h = EmbedSearcher.open(root, device="cpu"), HybridSearcher.open(root, device="cpu")
    n = _check(e.search("ocean heat", 8).hits, recs) + _check(h.search("ocean heat", 7).hits, recs)
    n += _check(h.similar("mixed", 4).hits, recs) + _check(e.similar("mixed", 4).hits, recs)
    assert n >= 20
