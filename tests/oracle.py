"""An independent BM25, in plain Python over token lists: what the CSR index and kernels must agree with.

Written from the formula alone (no engine or kernels code), so a bug shared by the build and the
scorers cannot hide.
"""

from __future__ import annotations

import math
from collections import Counter

STOP = set("a an and are as at be by for from in is of on that the to was with".split())


def tokens(text: str) -> list[str]:
    out, cur = [], []
    for ch in text.lower() + " ":
        if ("a" <= ch <= "z") or ("0" <= ch <= "9"):
            cur.append(ch)
        else:
            if cur:
                w = "".join(cur)
                if len(w) >= 2 and w not in STOP:
                    out.append(w)
            cur = []
    return out


def bm25(docs: dict[str, list[str]], query: list[str], k1=1.5, b=0.75) -> list[tuple[str, float]]:
    """All matching documents as (key, score), sorted by score desc then key asc."""
    n = len(docs)
    tfs = {k: Counter(v) for k, v in docs.items()}
    avgdl = (sum(len(v) for v in docs.values()) / n) if n else 1.0
    avgdl = avgdl if avgdl > 0 else 1.0
    terms = list(dict.fromkeys(query))
    df = {t: sum(1 for c in tfs.values() if t in c) for t in terms}
    out = []
    for key, c in tfs.items():
        if not any(t in c for t in terms):
            continue
        dl = len(docs[key])
        s = 0.0
        for t in terms:
            f = c.get(t, 0)
            if f:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        out.append((key, s))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


def same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]], k: int, rel: float = 1e-9) -> bool:
    """Tie-aware: scores agree position by position, and the keys agree as sets within each tie group
    (a group cut by k may differ in which members made it)."""
    want = want[:k]
    if len(got) != len(want):
        return False
    for (_, gs), (_, ws) in zip(got, want):
        if not math.isclose(gs, ws, rel_tol=rel, abs_tol=1e-12):
            return False
    i = 0
    while i < len(want):
        j = i
        while j < len(want) and math.isclose(want[j][1], want[i][1], rel_tol=rel, abs_tol=1e-12):
            j += 1
        gk = {g[0] for g in got[i:j]}
        wk = {w[0] for w in want[i:j]}
        if j < len(want) and gk != wk:
            return False
        i = j
    return True
