"""Property-based tests (Hypothesis) for the tokenizer, the window chooser and the config loader.

tests/engine/text/test_tokenize.py already checks ``tokenize`` against an independent tokenizer and the byte-run
fast paths; this file adds the query side, the term boundary, the window chooser's invariants, and the
config loader's contract: any TOML either loads with the value given or raises ConfigError naming the
file, the key and what is allowed -- never another exception.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chitragupta.engine.library.config import SCHEMA, load_config
from chitragupta.engine.text.tokenize import (
    MIN_TOKEN_CHARS,
    STOPWORDS,
    query_terms,
    term_pattern,
    tokenize,
    tokenize_raw,
)
from chitragupta.engine.text.windows import (
    _occurrences,
    _run_occurrences,
    choose_windows,
    lower_same_length,
    normalize_ws,
)
from chitragupta.errors import ConfigError

# Text that exercises the tokenizer's edges: ASCII words, digits, stopwords, underscores, accents,
# characters whose lowercase is longer (İ) or ASCII (K, the Kelvin sign), whitespace and pipes.
WORDS = ["twin", "model", "the", "of", "a", "x", "ai", "42", "naïve", "İstanbul", "\u212aelvin", "co2", "b2b"]
SEPS = [" ", "  ", "\n", "\n\n", "_", "-", ".", ",", "|", "\t", "é", "\u0307"]
texts = st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(SEPS), st.text(max_size=3)), max_size=60).map("".join)
terms_st = st.lists(st.sampled_from(["twin", "model", "ai", "42", "co2", "elvin", "stanbul", "tw", "b2b"]),
                    min_size=1, max_size=4)


@settings(deadline=None)
@given(texts)
def test_query_terms_split_the_runs_into_kept_and_dropped(q):
    terms, dropped = query_terms(q)
    runs = list(dict.fromkeys(tokenize_raw(q)))
    assert terms == [r for r in runs if r in set(terms)] and dropped == [r for r in runs if r in set(dropped)]
    assert set(terms) | set(dropped) == set(runs) and not set(terms) & set(dropped)
    assert all(len(t) >= MIN_TOKEN_CHARS and t not in STOPWORDS for t in terms)
    assert all(len(d) < MIN_TOKEN_CHARS or d in STOPWORDS for d in dropped)
    assert terms == list(dict.fromkeys(tokenize(q)))  # the query side reads text as the index does


@settings(deadline=None)
@given(texts)
def test_tokenize_is_idempotent(text):
    toks = tokenize(text)
    assert tokenize(" ".join(toks)) == toks


@settings(deadline=None)
@given(texts, terms_st)
def test_term_pattern_matches_exactly_the_runs_equal_to_a_term(text, terms):
    low = lower_same_length(text)
    got = [(m.start(), m.group()) for m in term_pattern(terms).finditer(low)]
    want = [(m.start(), m.group()) for m in re.finditer(r"[a-z0-9]+", low) if m.group() in set(terms)]
    assert got == want


@settings(deadline=None)
@given(texts, terms_st)
def test_array_occurrences_equal_the_regex(text, terms):
    low = lower_same_length(text)
    terms = sorted(set(terms))
    index = {t: i for i, t in enumerate(terms)}
    want = [(m.start(), index[m.group()], len(m.group())) for m in term_pattern(terms).finditer(low)]
    pos, tid, ln = _run_occurrences(low, terms)
    assert list(zip(pos.tolist(), tid.tolist(), ln.tolist())) == want
    assert [tuple(a.tolist()) for a in _occurrences(low, terms)] == [tuple(a.tolist()) for a in (pos, tid, ln)]


@settings(max_examples=300, deadline=None)
@given(texts, terms_st, st.integers(1, 80), st.integers(1, 5))
def test_windows_invariants(text, terms, width, n):
    wins = choose_windows(text, terms, width, n)
    again = choose_windows(text, terms, width, n)
    assert wins == again  # deterministic
    low = lower_same_length(text)
    occurrences = [(m.start(), m.group()) for m in term_pattern(terms).finditer(low)]
    if not occurrences:
        assert wins == []
        return
    assert 1 <= len(wins) <= n
    starts = [w.start for w in wins]
    assert starts == sorted(starts)
    distinct = len(set(terms))
    for w in wins:
        assert 0 <= w.start <= w.end <= len(text)
        # a window narrower than a term may hold none whole; otherwise its anchor's term at least
        assert (1 if width >= max(map(len, terms)) else 0) <= w.covered <= distinct
        assert any(p == w.anchor for p, _ in occurrences)  # centred on a real occurrence
    if "|" not in text:  # no table to widen into: windows are disjoint spans, rendered as they are
        for a, b in zip(wins, wins[1:]):
            assert a.end <= b.start
        for w in wins:
            assert w.text == normalize_ws(text[w.start:w.end])
            assert w.end - w.start <= width


@settings(deadline=None)
@given(texts, terms_st, st.integers(1, 80))
def test_the_best_window_covers_as_many_terms_as_any_candidate(text, terms, width):
    """The first choice is a candidate with the most distinct terms whole inside ``width`` characters."""
    assume("|" not in text)
    wins = choose_windows(text, terms, width, 1)
    low = lower_same_length(text)
    occ = [(m.start(), m.end(), m.group()) for m in term_pattern(terms).finditer(low)]
    if not occ:
        return
    size = len(text)
    best = 0
    for s0, e0, _t in occ:
        centre = s0 + (e0 - s0) // 2
        s = min(max(centre - width // 2, 0), max(0, size - width))
        e = min(s + width, size)
        best = max(best, len({t for a, b, t in occ if a >= s and b <= e}))
    assert wins[0].covered == best


# -- the config loader ------------------------------------------------------------------------------

def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML: no raw DEL
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TypeError(v)


values = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
                   st.sampled_from(["auto", "cpu", "cuda", "numba", "numpy", "pdftotext", "docling", "none", ""]),
                   st.lists(st.integers(0, 3), max_size=2))
keys = st.sampled_from([(sec, key) for sec, ks in SCHEMA.items() for key in ks])


def _expected_ok(setting, v) -> bool:
    kind = setting.kind
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        v = float(v)
    elif kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            return False
    elif kind is str:
        if not isinstance(v, str) or "\x00" in v:  # a NUL never reaches a path or a model
            return False
    elif kind is bool:
        if not isinstance(v, bool):
            return False
    return bool(setting.check(v))


def _load(text: str):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "config.toml"
        p.write_text(text, encoding="utf-8")
        try:
            return load_config(p), None, str(p)
        except ConfigError as err:
            return None, str(err), str(p)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(keys, values), min_size=1, max_size=4, unique_by=lambda kv: kv[0]))
def test_config_accepts_exactly_the_allowed_values(pairs):
    by_sec: dict[str, list[str]] = {}
    for (sec, key), v in pairs:
        by_sec.setdefault(sec, []).append(f"{key} = {_toml(v)}")
    text = "".join(f"[{sec}]\n" + "\n".join(lines) + "\n" for sec, lines in by_sec.items())
    cfg, err, where = _load(text)
    bad = [(sec, key, v) for (sec, key), v in pairs if not _expected_ok(SCHEMA[sec][key], v)]
    if not bad:
        assert err is None, (text, err)
        for (sec, key), v in pairs:
            got = getattr(getattr(cfg, sec), key)
            assert got == v and type(got) is SCHEMA[sec][key].kind
        return
    assert cfg is None, (text, "accepted", bad)
    assert err.startswith(where + ": ") and "\n" not in err and "allowed" in err
    assert any(f"[{sec}] {key} = " in err for sec, key, _v in bad), err


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_config_never_fails_with_anything_but_a_config_error(text):
    cfg, err, where = _load(text)
    assert (cfg is None) != (err is None)
    if err is not None:
        assert err.startswith(where) and "\n" not in err.strip() or "not valid TOML" in err


@settings(deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_unknown_sections_and_keys_name_what_is_allowed(sec, key):
    cfg, err, _ = _load(f"[{sec}]\n{key} = 1\n")
    if sec not in SCHEMA:
        assert f"unknown section [{sec}]" in err and "[retrieval]" in err
    elif key not in SCHEMA[sec]:
        assert f"unknown key [{sec}] {key}" in err and next(iter(SCHEMA[sec])) in err
