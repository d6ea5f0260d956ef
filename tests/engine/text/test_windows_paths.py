"""The window chooser's fast paths against their references: the pairwise and the per-term count of the terms
inside each candidate window agree with a brute-force count (the array pass against the regex:
test_properties.py)."""

from __future__ import annotations

import chitragupta.engine.text.windows as windows
import numpy as np
import pytest


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
def test_windows_of_the_pairwise_and_the_per_term_count_agree(n, monkeypatch):
    text = ("Digital twin models of a bridge. " * 30 + "The sensor fidelity of the twin model. " * 5) * 3
    got = windows.choose_windows(text, ["twin", "fidelity", "sensor"], 120, n)
    monkeypatch.setattr(windows, "_PAIRWISE_MAX", -1)
    assert windows.choose_windows(text, ["twin", "fidelity", "sensor"], 120, n) == got


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
