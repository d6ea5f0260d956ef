"""One text path (issue 29, item 3): the text BM25 indexes after a source's title, the text the embed stage
chunks and the document the topic stage sees are one string, whatever made the source's parsed text -- the
pdftotext backend, docling (a sidecar, and the docling stage's Markdown beside it) or a JSONL import."""

from __future__ import annotations

import re

import numpy as np
import pytest
from chitragupta.engine.index.source import load_body, row_body
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.text.sidecar import dump_sidecar, join_items
from chitragupta.engine.text.tokenize import tokenize
from chitragupta.enrich.chunking import chunk_spans, docling_paths, document_text

from helpers import make_workspace

BODY = "".join(f"Paragraph {i} studies coral reef bleaching under marine heatwaves, a sum-\nmary of the surveys.\n"
               for i in range(30)) + "The summary of every survey is in the tables.\n"
REFS = "References\n" + "".join(f"[{i}] Zebrafish Author and Other Author. {1990 + i}. A cited work on reefs. "
                                f"In Proc. of a venue, pp. 1-10.\n" for i in range(1, 20))
APPENDIX = "Appendix A: Survey sites\n" + "".join(
    f"Site {i} lies on the outer reef; the crowdworkers logged its temperature every hour of the season.\n"
    for i in range(6))
PAPER = BODY + REFS + APPENDIX
FILLERS = [{"_id": f"other{i}", "title": f"Other paper {i}", "text": f"Fisheries and tides, survey {i}."}
           for i in range(3)]


def _key_path(ws: Workspace, key: str) -> str:
    with Ledger(ws.ledger_path) as led:
        return led.get(key).parsed_path


def _jsonl(tmp_path) -> tuple[Workspace, str]:
    root = make_workspace(tmp_path, [{"_id": "paper", "title": "Coral reefs", "text": PAPER}] + FILLERS)
    return Workspace.open(root), "paper"


def _pdftotext(tmp_path) -> tuple[Workspace, str]:
    pytest.importorskip("pypdfium2")
    from chitragupta.engine.library.demo.tinypdf import write_pdf
    from chitragupta.engine.library.sync import sync

    root = tmp_path / "ws"
    (root / "papers").mkdir(parents=True)
    write_pdf(root / "papers" / "paper.pdf", [PAPER])
    bib = "@article{paper, title={Coral reefs}, file={paper.pdf}}\n" + "".join(
        f"@misc{{{r['_id']}, title={{{r['title']}}}, abstract={{{r['text']}}}}}\n" for r in FILLERS)
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    (root / "config.toml").write_text('[parser]\nbackend = "pdftotext"\n', encoding="utf-8")
    ws = Workspace.open(root)
    sync(ws)
    return ws, "paper"


def _docling(tmp_path) -> tuple[Workspace, str]:
    # what sync with the docling backend writes (the .txt and its sidecar), and the docling stage's Markdown
    # beside it, holding words the parsed text does not: the Markdown is read by none of the three
    items = [{"text": "Coral reefs", "label": "title", "page": 1},
             {"text": "Abstract", "label": "section_header", "page": 1},
             {"text": "Reefs bleach; a sum-\nmary of the surveys follows. The summary is short.", "label": "text",
              "page": 1},
             {"text": "1 Surveys", "label": "section_header", "page": 1},
             {"text": BODY, "label": "text", "page": 2},
             {"text": "References", "label": "section_header", "page": 3},
             {"text": REFS.split("\n", 1)[1], "label": "list_item", "page": 3},
             {"text": "Appendix A: Survey sites", "label": "section_header", "page": 4},
             {"text": APPENDIX.split("\n", 1)[1], "label": "text", "page": 4}]
    ws, key = _jsonl(tmp_path)
    rel = _key_path(ws, key)
    (ws.root / rel).write_text(join_items(items), encoding="utf-8")
    (ws.root / rel).with_suffix(".passages.json").write_text(dump_sidecar(items), encoding="utf-8")
    md, tool_json = docling_paths(ws, key, rel)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text("# Coral reefs\n\nzyzzyva markdown only\n\n## References\n\n- [1] Zebrafish. 2001.\n", encoding="utf-8")
    return ws, key


SOURCES = {"pdftotext": _pdftotext, "docling": _docling, "jsonl": _jsonl}


class _Stream:
    """An ``EncodeStream`` that records what it is given (no model): one seeded vector per text."""

    def __init__(self, dim: int = 8):
        self.dim, self.texts = dim, []

    def __call__(self, texts):
        self.texts += list(texts)
        rng = np.random.default_rng(len(self.texts))
        vecs = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        yield vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_bm25_embed_and_topics_read_one_string(kind, tmp_path, monkeypatch):
    ws, key = SOURCES[kind](tmp_path)
    rel = _key_path(ws, key)
    r = Retriever.open(ws)
    bm25 = r.body(key).text

    # what the document index tokenized: the title, a newline, that text (its length in tokens)
    doc = r.index.citekeys.to_list().index(key)
    assert int(r.index.postings.doc_len[doc]) == len(tokenize("Coral reefs" + "\n" + bm25))
    # the rules applied once: the list cut, the appendix kept, line-end hyphens joined, docling's Markdown unread
    assert "Zebrafish" not in bm25 and "crowdworkers" in bm25 and "zyzzyva" not in bm25
    assert re.search(r"\bsummary of the surveys", bm25) and "sum-" not in bm25
    assert bm25 == row_body(ws.root, rel).text == load_body(ws.root / rel).text

    # the embed and topic stages' text
    assert document_text(ws, key, rel) == bm25

    # the embed stage, run: its store keeps the text it chunked, and it encoded exactly those chunks
    pytest.importorskip("faiss")
    from chitragupta.enrich import embed, encoders
    from chitragupta.enrich.store import load_store, store_folder

    with Ledger(ws.ledger_path) as led:
        rows = list(led.rows())
    stream = _Stream()
    monkeypatch.setattr(encoders, "model_spec", lambda cfg: embed.ModelSpec("fake-model", 4, "", "", 64, stream.dim))
    embed.run_stage(ws, rows, device="cpu", encode_stream=stream)
    store = load_store(store_folder(ws.content, embed.model_slug("fake-model")), with_index=False)
    assert store.texts[store.citekeys.index(key)] == bm25
    want = [embed.encode_input("Coral reefs", bm25[s:e]) for s, e in chunk_spans(bm25, 200, 40)]
    assert [t for t in stream.texts if t.startswith("Coral reefs\n")] == want

    # the topic stage, run up to its fit: the documents it sees (title, newline, text) and the chunks it encodes
    from chitragupta.enrich import topics

    seen = {}

    def fit(vectors, texts, keys, params, device):
        seen.update(zip(keys, texts))
        raise _Stop

    class _Encoder:
        model_name, slug, dim = "fake-topic-model", "fake-topic-model", 8

        def __init__(self):
            self.texts = []

        def encode(self, texts, progress=None):
            self.texts += list(texts)
            return np.ones((len(texts), self.dim), dtype=np.float32)

    enc = _Encoder()
    monkeypatch.setattr(topics, "fit_topics", fit)
    monkeypatch.setattr(topics, "no_topic_possible", lambda n, params: None)
    with pytest.raises(_Stop):
        topics.run_stage(ws, rows, device="cpu", encoder=enc)
    assert seen[key] == "Coral reefs\n" + bm25
    assert [t for t in enc.texts if t.startswith("Coral reefs\n")] == want


class _Stop(Exception):
    pass


def test_docling_markdown_changes_nothing(tmp_path):
    # the docling stage's Markdown appearing, changing or going away leaves every stage's text as it was
    ws, key = _docling(tmp_path)
    rel = _key_path(ws, key)
    md, tool_json = docling_paths(ws, key, rel)
    with_md = document_text(ws, key, rel)
    md.write_text("# Other\n\nentirely different words\n", encoding="utf-8")
    assert document_text(ws, key, rel) == with_md
    md.unlink()
    assert document_text(ws, key, rel) == with_md == Retriever.open(ws).body(key).text


def test_a_row_without_text_or_outside_content_reads_empty(tmp_path):
    ws, key = _jsonl(tmp_path)
    assert document_text(ws, key, None) == "" == row_body(ws.root, None).text
    assert document_text(ws, key, "content/parsed/gone.txt") == ""
    (ws.root / "outside.txt").write_text("secret words", encoding="utf-8")
    assert document_text(ws, key, "outside.txt") == "" and document_text(ws, key, "content/../outside.txt") == ""
