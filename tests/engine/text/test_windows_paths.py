"""The window chooser's fast paths against their references: ``str.find`` over a short text, the array pass
over a long one and the tokenizer-boundary regex find the same occurrences; the pairwise and the per-term count of the terms
inside each candidate window agree with a brute-force count."""

from __future__ import annotations

import chitragupta.engine.text.windows as windows
import numpy as np
import pytest


def test_short_and_long_text_paths_find_the_same_occurrences(monkeypatch):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    words = ["twin", "model", "twinmodel", "mod", "el", "a1", "x", "ünï", "tw_in", "TWIN", "é", "İtwin", "modelmodel"]
    seps = [" ", "-", "_", "\n", "é", "9", ".", ""]

    @given(st.lists(st.tuples(st.sampled_from(words), st.sampled_from(seps)), max_size=60),
           st.lists(st.sampled_from(["twin", "model", "mod", "a1", "el", "twinmodel"]), min_size=1, max_size=4))
    @settings(max_examples=300, deadline=None)
    def check(parts, terms):
        low = windows.lower_same_length("".join(w + s for w, s in parts))
        terms = sorted(set(terms))
        monkeypatch.setattr(windows, "_SHORT_TEXT", 10**9)
        short = windows._occurrences(low, terms)  # str.find per term
        monkeypatch.setattr(windows, "_SHORT_TEXT", -1)
        long = windows._occurrences(low, terms)  # array operations over the runs
        ref = [], [], []
        for m in windows.term_pattern(terms).finditer(low):  # the regex of the tokenizer's boundary
            ref[0].append(m.start())
            ref[1].append(terms.index(m.group()))
            ref[2].append(m.end() - m.start())
        for a, b, c in zip(short, long, ref):
            assert a.tolist() == b.tolist() == c

    check()


def test_the_two_counts_of_covered_terms_agree_with_brute_force(monkeypatch):
    rng = np.random.default_rng(1)
    for _ in range(1500):
        m, n_terms = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        pos = np.sort(rng.integers(0, 3000, m))
        tid = rng.integers(0, n_terms, m)
        ln = rng.integers(2, 12, m) if rng.random() < 0.3 else rng.integers(2, 12, n_terms)[tid]
        width, size = int(rng.integers(10, 800)), 3100
        starts = np.clip(pos + ln // 2 - width // 2, 0, size - width)
        ends = np.minimum(starts + width, size)
        brute = [len({int(tid[i]) for i in range(m) if pos[i] >= s and pos[i] + ln[i] <= e})
                 for s, e in zip(starts.tolist(), ends.tolist())]
        assert windows._covered(starts, ends, pos, tid, ln, n_terms).tolist() == brute
        monkeypatch.setattr(windows, "_PAIRWISE_MAX", -1)
        assert windows._covered(starts, ends, pos, tid, ln, n_terms).tolist() == brute
        monkeypatch.undo()


@pytest.mark.parametrize("n", [1, 3])
def test_windows_of_a_long_and_a_short_copy_agree(n, monkeypatch):
    text = ("Digital twin models of a bridge. " * 30 + "The sensor fidelity of the twin model. " * 5) * 3
    got = windows.choose_windows(text, ["twin", "fidelity", "sensor"], 120, n)
    monkeypatch.setattr(windows, "_SHORT_TEXT", -1)
    monkeypatch.setattr(windows, "_PAIRWISE_MAX", -1)
    assert windows.choose_windows(text, ["twin", "fidelity", "sensor"], 120, n) == got


def test_few_occurrences_in_python_choose_what_the_array_path_chooses(monkeypatch):
    """An abstract's handful of occurrences is ranked in plain Python; the array path is the reference."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    words = ["twin", "model", "bridge", "sensor", "a1", "x", "ünï", "|", "\n", "the", "modelmodel", "İtwin"]

    @given(st.lists(st.sampled_from(words), max_size=80), st.sampled_from(["", " ", "  ", "-", "\t"]),
           st.lists(st.sampled_from(["twin", "model", "sensor", "a1", "bridge", "zzz"]), min_size=1, max_size=5),
           st.integers(1, 200), st.integers(1, 4))
    @settings(max_examples=400, deadline=None)
    def check(parts, sep, terms, width, n):
        text = sep.join(parts)
        monkeypatch.setattr(windows, "_FEW", 10**9)
        few = windows.choose_windows(text, terms, width, n)
        monkeypatch.setattr(windows, "_FEW", -1)
        assert windows.choose_windows(text, terms, width, n) == few

    check()


def test_trimming_to_words_equals_the_regex_reference():
    import re

    ws = re.compile(r"\s+")

    def reference(text, start, end):  # the earlier implementation: the last whitespace run found by regex
        if start > 0 and not text[start - 1].isspace() and not text[start].isspace():
            nxt = ws.search(text, start, end)
            if nxt:
                start = nxt.end()
        if end < len(text) and not text[end].isspace() and not text[end - 1].isspace():
            last = None
            for last in ws.finditer(text, start, end):
                pass
            if last is not None and last.start() > start:
                end = last.start()
        return start, end

    rng = np.random.default_rng(7)
    alphabet = list("ab \t\n\u00a0\u2003x-")
    for _ in range(4000):
        text = "".join(rng.choice(alphabet, int(rng.integers(1, 40))))
        s = int(rng.integers(0, len(text)))
        e = int(rng.integers(s + 1, len(text) + 1))
        assert windows._trim_to_words(text, s, e) == reference(text, s, e), (text, s, e)


def test_whitespace_normalising_equals_the_regex_reference():
    import re
    import sys

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if re.fullmatch(r"\s", chr(c))]
    assert spaces == [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]  # one notion of space
    rng = np.random.default_rng(3)
    alphabet = spaces + list("ab-é")
    for _ in range(3000):
        s = "".join(rng.choice(alphabet, int(rng.integers(0, 30))))
        assert windows.normalize_ws(s) == re.sub(r"\s+", " ", s).strip()
