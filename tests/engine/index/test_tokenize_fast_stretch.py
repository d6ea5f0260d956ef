"""A small build's texts handled a stretch at a time (``engine.index.tokenize_fast``): the texts taken as read
(``as_read``) are those ``plain_body`` returns as they are, the joined conversion (``_buffer``) is the
per-piece one, and the numpy kernels' whole-buffer split is the per-piece split; the blocks and the
index arrays stay the per-run path's."""

import random

import numpy as np
import pytest
from chitragupta.engine.index import segments, tokenize_fast
from chitragupta.engine.index.source import fingerprints, plain_body
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.text.hyphens import join_hyphens, split_positions
from chitragupta.engine.text.refcut import HEADING_WORDS, may_hold_heading

from helpers import assert_same_block, make_workspace

WORDS = ["twin", "model", "the", "References", "REFERENCES", "Bibliography", "Works", "Cited", "cited", "Literature",
         "Referenc", "es", "naïve", "İstanbul", "\u212aelvin", "日本語", "sum-", "maries", "summaries", "e-", "mail",
         "x86-64", "state-of-the-", "art", "\x00", "1999", "[12]", "R", "B", "W", "L", "ﬁnal", "-"]
SEPS = [" ", " ", "\n", "-\n", "-", ", ", ". ", "\t", "\f", "\n  ", "\x00", ""]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(SEPS) for _ in range(n))


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            out.append(" ".join(rng.choice(["ocean", "heat", "soil", "x", "of"]) for _ in range(rng.randint(0, 40))))
        elif kind == 1:  # a list the plain cut blanks
            out.append(_text(rng, 60) + "\n\nReferences\n" + "".join(f"[{j}] A. Author. T {j}. J, 19{50 + j}.\n"
                                                                     for j in range(12)))
        else:
            out.append(_text(rng, rng.randint(0, 120)))
    return out


def test_the_texts_taken_as_read_are_those_plain_body_returns_as_they_are():
    texts = _texts(1, 400)
    got = tokenize_fast.as_read(dict(enumerate(texts)))
    assert 50 < len(got) < len(texts) - 50  # (both kinds are there)
    for k, t in enumerate(texts):
        body = plain_body(None, text=t)
        if k in got:
            assert body.text == t and not body.ref_words and not body.abstract and body.problem is None
    # the two tests it is made of: a text lacking them is one each rule leaves alone
    rng = random.Random(2)
    for _ in range(3000):
        t = _text(rng, rng.randint(0, 12))
        if may_hold_heading(t):
            assert any(w in t for w in HEADING_WORDS), t
        if not split_positions(t):
            assert join_hyphens(t) == t, t
    assert tokenize_fast.as_read({}) == set()


@pytest.mark.parametrize("seed", range(4))
def test_the_joined_conversion_is_the_per_piece_one(seed):
    rng = random.Random(seed)
    alphabet = "abcXYZ019 -\n\t_.,İıKßǅﬁ日😀\u0130\u212a\u00e9E\x00\u03a3"
    parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(200)] + [""]
    want = b" ".join(tokenize_fast._piece(p) for p in parts)
    want_ends = np.cumsum(np.array([len(tokenize_fast._piece(p)) for p in parts]) + 1) - 1
    for some in (parts, [p.replace("\x00", "") for p in parts], [""], ["Σ", "ΟΔΟΣ"], parts[:3] + [b"abc def"]):
        buf, ends = tokenize_fast._buffer(list(some))
        pieces = [tokenize_fast._piece(p) if isinstance(p, str) else p for p in some]
        assert buf.tobytes() == b" ".join(pieces)
        assert ends.tolist() == (np.cumsum(np.array([len(p) for p in pieces]) + 1) - 1).tolist()
    buf, ends = tokenize_fast._buffer(parts)
    assert buf.tobytes() == want and ends.tolist() == want_ends.tolist()


def test_the_numpy_runs_split_at_once_are_the_per_piece_runs():
    from chitragupta.kernels import runs

    rng = random.Random(5)
    for trial in range(200):
        data = bytes(rng.choice(b"ab1   ") for _ in range(rng.randint(0, 60)))
        n = rng.randint(1, 6)
        if trial % 2:  # pieces ending at spaces (what the engine hands over) ...
            cuts = sorted(rng.sample([i for i, c in enumerate(data) if c == 32], min(n - 1, data.count(b" "))))
            ends = cuts + [len(data)]
        else:  # ... and anywhere: a run cut at a piece's end counts in both
            ends = sorted(rng.randint(0, len(data)) for _ in range(n))
        want_ids, want_n, vocab, a = [], [], {}, 0
        for e in ends:
            got = data[a:e].split()
            want_n.append(len(got))
            want_ids += [vocab.setdefault(r, len(vocab)) for r in got]
            a = e
        ids, seg_n, *_state = runs.runs_to_ids(np.frombuffer(data, dtype=np.uint8), np.array(ends, dtype=np.int64),
                                               *runs.new_table())
        assert ids.tolist() == want_ids and seg_n.tolist() == want_n, (data, ends)


def test_packed_unicode_texts_give_the_per_run_block(tmp_path):
    rng = random.Random(9)
    texts = _texts(3, 140)
    docs = [{"_id": f"p{i:03d}", "title": _text(rng, rng.randint(0, 6)), "text": t} for i, t in enumerate(texts)]
    ws = Workspace.open(make_workspace(tmp_path, docs, packed=True))
    with Ledger(ws.ledger_path, create=False) as ledger:
        sources = fingerprints(ws.root, ledger.index_view())[2]
    packed = tokenize_fast.packed_texts(sources)
    assert len(packed) == len(docs) and 20 < len(tokenize_fast.as_read(packed)) < len(docs) - 20
    units = np.arange(len(sources), dtype=np.int64) * 3 + 1
    for positions in (True, False):
        slow = segments.tokenize_block(units, sources, tokenize_fast.FIELDS, positions, fast=False)
        assert_same_block(slow, segments.tokenize_block(units, sources, tokenize_fast.FIELDS, positions))
        assert slow.cuts


def test_a_split_s_verdict_is_the_same_told_before_the_words_are_collected():
    """``find_splits`` without ``words`` looks for a split's joined word in the lowercased text before it
    collects the text's words: the verdicts are those of the words collected first (passed in)."""
    from chitragupta.engine.text.hyphens import document_words, find_splits

    rng = random.Random(4)
    pool = WORDS + ["summaries", "Summaries", "email", "database", "data", "base", "SUM", "naïvety", "İ"]
    pairs = ["sum-", "maries", "summaries", "e-", "mail", "email", "data-", "base", "database", "data", "x-"]
    seen = 0
    for k in range(2000):
        words, seps = (pool, SEPS) if k % 2 else (pairs, ["", " ", " ", "\n", "-\n", "\n  "])
        t = "".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 25)))
        got = find_splits(t)
        assert got == find_splits(t, document_words(t)), t
        seen += sum(s.join for s in got)
    assert seen > 20  # (joins happen: the texts exercise both verdicts)
