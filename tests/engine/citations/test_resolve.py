"""Resolution's fast paths held to the rules they replace: ``kernels.citewords`` (the entries' library
words, their normalised titles, the blocking overlaps) against the per-entry Python path, the whole
resolution with and without them, and resolution and clustering against the rules applied to every pair
(ambiguous matches left unresolved, the year within one, a DOI or arXiv id before the title)."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest
from chitragupta.engine.citations import resolve as R
from chitragupta.engine.citations.entries import Entry
from chitragupta.engine.citations.resolve import Library, norm_title, resolve
from chitragupta.engine.library.ledger import LedgerRow

_PIECES = ["pre-training", "Pre- training", "pre -training", "pre-\n  training", "a_-b", "x--y", "-lead", "trail-",
           "co-\u00adop", "state-of-the-art", "don't", "\u201cQuoted\u201d", "na\u00efve", "\ufb01ne-tuning", "Stra\u00dfe",
           "\u00e9t\u00e9", "\u2013", "\u2014dash", "\u0416\u0443\u0440\u043d\u0430\u043b", "\u65e5\u672c\u8a9e",
           "pre\u2010training", "A\x1cB", "tab\there", "v\x0bw", "UPPER", "MiXeD", "12-34", "a1-b2", "_-_", "--",
           "x" * 40, "word" * 12, "", " ", "\x00nul", "re-\x00x", "1997.", "(2019)", "arXiv:2106.00676v2"]


def _text(rng: random.Random, words: list[str]) -> str:
    parts = [rng.choice(words) if rng.random() < 0.6 else rng.choice(_PIECES) for _ in range(rng.randint(0, 14))]
    seps = [" ", " ", ", ", ". ", "-", " - ", "\n", "- ", "\u2013", ""]
    return "".join(p + rng.choice(seps) for p in parts)


def _library_words(rng: random.Random) -> list[str]:
    base = ["pretraining", "training", "fine", "tuning", "naive", "strasse", "ete", "upper", "mixed", "1234",
            "a1b2", "state", "art", "word" * 12, "x" * 40, "cooperative", "quoted", "dont", "the", "of"]
    return base + [f"w{i}" for i in range(40)]


def _entries(seed: int, n: int = 400):
    rng = random.Random(seed)
    words = _library_words(rng)
    texts = [_text(rng, words) for _ in range(n)]
    raw_titles = [None if rng.random() < 0.1 else _text(rng, words) for _ in range(n)]
    lib_titles = [" ".join(rng.sample(words, rng.randint(1, 6))) for _ in range(50)] + [
        "Pre-training of things", "Na\u00efve \ufb01ne-tuning", "\u0416\u0443\u0440\u043d\u0430\u043b \u65e5\u672c\u8a9e"]
    return texts, raw_titles, lib_titles


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_incidence_and_titles_equal_the_per_entry_path(seed):
    texts, raw_titles, lib_titles = _entries(seed)
    vocab = R._Vocab()
    vocab.matrix([norm_title(t).split() for t in lib_titles], grow=True)
    titles = list(map(norm_title, raw_titles))
    packed = R._Packed(texts, raw_titles)
    assert packed.titles(raw_titles) == titles
    slow = R._entry_matrix(vocab, texts, titles, None)
    fast = R._entry_matrix(vocab, texts, titles, packed)
    slow.sort_indices()
    fast.sort_indices()
    assert fast.shape == slow.shape and (fast != slow).nnz == 0
    assert slow.nnz > 100 and packed.slow  # the test reaches both paths: plenty of words, some entries per entry


def test_packed_pieces_are_the_texts_made_ascii():
    texts = ["plain", "caf\u00e9 \ufb01n", "\u65e5\u672c", "a\x00b", ""]
    titles = [None, "Na\u00efve", "x", "y", "\u2013"]
    p = R._Packed(texts, titles)
    assert p.slow == [2, 3]  # a script with no ASCII form, a NUL
    got = [bytes(p.buf[a:b]).decode("ascii") for a, b in zip(p.starts, p.ends)]
    assert got == ["plain", "", "cafe fin", "Naive", "", "", "", "", "", "#"]


def test_pair_overlaps_equal_the_sparse_product():
    from chitragupta.kernels.citewords import pair_overlaps

    rng = random.Random(4)
    vocab = R._Vocab()
    words = [f"w{i}" for i in range(50)]
    cols = vocab.matrix([rng.sample(words, rng.randint(1, 8)) for _ in range(120)], grow=True)
    rows = R._pad(vocab.matrix([rng.sample(words, rng.randint(0, 12)) for _ in range(700)], grow=False), cols.shape[1])
    r = np.asarray(sorted(rng.randrange(700) for _ in range(3000)), dtype=np.int64)
    c = np.asarray([rng.randrange(120) for _ in range(3000)], dtype=np.int64)
    want = np.asarray(rows[r].multiply(cols[c]).sum(axis=1)).ravel()
    assert pair_overlaps(rows, cols, r, c).tolist() == want.tolist()
    shuffled = rng.sample(range(3000), 3000)  # pairs not grouped by row: the same counts
    assert pair_overlaps(rows, cols, r[shuffled], c[shuffled]).tolist() == want[shuffled].tolist()


# -- the whole resolution -------------------------------------------------------------------------------

def _row(key, title, year=None, doi=None, venue=None):
    return LedgerRow(key, title, "parsed", "t.jsonl", year=year, doi=doi, venue=venue)


def _library(seed: int):
    """A library whose entries cite its sources by exact, re-cased, hyphen-varied or one-letter-off titles,
    the year off by 0, 1 or 2 or unknown, DOIs and arXiv ids equal or conflicting, sources sharing a
    title (ambiguous) and outside works cited by several sources under variants of one title."""
    rng = random.Random(seed)
    words = [f"{w}{i}" for i, w in enumerate(("graph", "neural", "retrieval", "model", "citation", "deep",
                                               "learning", "robust", "search", "transfer") * 30)]
    rows = []
    for i in range(150):
        title = " ".join(rng.sample(words, rng.randint(3, 8)))
        doi = f"10.1000/s{i}" if rng.random() < 0.3 else None
        venue = f"arXiv preprint arXiv:{2001 + i % 9}.{10000 + i}" if rng.random() < 0.2 else None
        rows.append(_row(f"s{i}", title, rng.randint(1995, 2024) if rng.random() < 0.9 else None, doi, venue))
    for k in range(6):  # two sources with one title: an entry naming it is ambiguous
        rows.append(_row(f"twin{k}", rows[k].title, rows[k].year))
    outside = [(" ".join(rng.sample(words, rng.randint(3, 7))), rng.randint(1980, 2024)) for _ in range(40)]

    def vary(title: str) -> str:
        roll = rng.random()
        if roll < 0.25:
            return title.upper()
        if roll < 0.45:  # a hyphen inside a word (dropped when normalised), maybe with a line break after it
            toks = title.split()
            t = rng.randrange(len(toks))
            toks[t] = toks[t][:2] + rng.choice(["-", "- ", "-\n"]) + toks[t][2:]
            return " ".join(toks)
        if roll < 0.65:
            toks = title.split()
            t = rng.randrange(len(toks))
            toks[t] = toks[t][:-1] + "z"  # one letter off in one word
            return " ".join(toks)
        return title

    refs = {}
    for r in rows[:100]:
        entries = []
        for n in range(1, 16):
            roll = rng.random()
            doi = arxiv = None
            if roll < 0.5:
                src = rng.choice(rows)
                title, year = vary(src.title), src.year
                if year is not None:
                    year += rng.choice([0, 0, 0, 1, -1, 2])
                if src.doi and rng.random() < 0.5:
                    doi = src.doi if rng.random() < 0.8 else "10.1000/other"
                if src.venue and rng.random() < 0.5:
                    arxiv = src.venue.rsplit(":", 1)[1] if rng.random() < 0.8 else "1999.99999"
            else:
                title, year = rng.choice(outside)
                title = vary(title)
                year = year + rng.choice([0, 0, 1, 2]) if rng.random() < 0.9 else None
                if rng.random() < 0.1:
                    doi = f"10.2000/{zlib.crc32(title.encode()) % 7}"
            text = f"A. Author and B. Other. {year or ''}. {title}. In Proceedings, pages 1-9."
            entries.append(Entry(n, text, ("Author", "Other"), year, title, "Proceedings", doi, arxiv, None))
        refs[r.citekey] = entries
    return rows, refs


def _dump(res) -> tuple:
    works = [(m.title, m.year, m.authors, m.venue, m.doi, m.arxiv, [(k, e.n) for k, e in m.members], list(m.at))
             for m in res.missing]
    return list(res.target.items()), list(res.why.items()), works


@pytest.mark.parametrize("seed", [7, 8])
def test_resolution_is_the_same_with_and_without_the_kernels(seed, monkeypatch):
    rows, refs = _library(seed)
    monkeypatch.setattr(R, "_numba_loaded", lambda: True)
    fast = _dump(resolve(Library.from_rows(rows), refs))
    monkeypatch.setattr(R, "_numba_loaded", lambda: False)
    slow = _dump(resolve(Library.from_rows(rows), refs))
    assert fast == slow
    assert sum(t is not None for _k, t in fast[0]) > 300 and {w for _k, w in fast[1]} == {"none", "ambiguous", "self"}


def _every_pair(rows, refs):
    """Issue 31's rules over every (entry, source) pair: an equal DOI or arXiv id decides (two sources
    sharing it: ambiguous; the citing source itself: self), a conflicting one refuses a title; else
    fuzz.ratio of the normalised titles at least 90 (95 with a year unknown) with the year within one,
    a second source within 3 of the best is ambiguous, the citing source among the best is self."""
    from rapidfuzz.fuzz import ratio

    lib = Library.from_rows(rows)
    out, why = {}, {}
    for k, entries in refs.items():
        for i, en in enumerate(entries):
            doi, arx = R._entry_ids(en)
            me = lib.pos.get(k, -1)
            by_id = {c for c, s in enumerate(lib.sources) if (doi and s.doi == doi) or (arx and s.arxiv == arx)}
            if by_id:
                by_id.discard(me)
                out[(k, i)] = lib.keys[next(iter(by_id))] if len(by_id) == 1 else None
                if len(by_id) != 1:
                    why[(k, i)] = "ambiguous" if by_id else "self"
                continue
            t = norm_title(en.title)
            scored = []
            for c, s in enumerate(lib.sources):
                if (doi and s.doi and doi != s.doi) or (arx and s.arxiv and arx != s.arxiv):
                    continue
                if not t or not lib.norm[c]:
                    continue
                if en.year is not None and s.year is not None and abs(en.year - s.year) > 1:
                    continue
                sc = ratio(t, lib.norm[c])
                if sc >= (90 if en.year is not None and s.year is not None else 95):
                    scored.append((sc, c))
            scored.sort(key=lambda x: -x[0])
            if not scored:
                out[(k, i)], why[(k, i)] = None, "none"
            elif any(c == me and sc >= scored[0][0] - 3 for sc, c in scored):
                out[(k, i)], why[(k, i)] = None, "self"
            elif any(sc >= scored[0][0] - 3 and c != scored[0][1] for sc, c in scored[1:]):
                out[(k, i)], why[(k, i)] = None, "ambiguous"
            else:
                out[(k, i)] = lib.keys[scored[0][1]]
    return out, why


def _every_pair_clusters(refs, why) -> list[list[tuple[str, int]]]:
    """The unresolved entries ("none") joined over every pair: an equal DOI or arXiv id; one normalised
    title with one year, years of it one apart (a chain), an unknown year with its earliest known one;
    else close titles (different ones) with the year within one and no conflicting id. Works in the order
    of their first entry, entries in order; entries with neither a title nor an id left out."""
    from rapidfuzz.fuzz import ratio

    items = [(k, i, en) for k, entries in refs.items() for i, en in enumerate(entries) if why.get((k, i)) == "none"]
    info = [(norm_title(en.title), en.year, R._entry_ids(en)) for _k, _i, en in items]
    keep = [j for j, (t, _y, ids) in enumerate(info) if t or ids[0] or ids[1]]
    parent = list(range(len(items)))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    def join(a, b):
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)

    by_title: dict[str, dict] = {}
    for j in keep:
        t, y, _ids = info[j]
        if t:
            by_title.setdefault(t, {}).setdefault(y, []).append(j)
    for years in by_title.values():  # one title: the same year, a chain of years one apart, an unknown year
        for js in years.values():
            for j in js[1:]:
                join(js[0], j)
        known = sorted(y for y in years if y is not None)
        for y0, y1 in zip(known, known[1:]):
            if y1 - y0 <= 1:
                join(years[y0][0], years[y1][0])
        if known and None in years:
            join(years[known[0]][0], years[None][0])
    for x, a in enumerate(keep):
        ta, ya, ia = info[a]
        for b in keep[x + 1:]:
            tb, yb, ib = info[b]
            if (ia[0] and ia[0] == ib[0]) or (ia[1] and ia[1] == ib[1]):
                join(a, b)
            elif ta and tb and ta != tb and not ((ia[0] and ib[0] and ia[0] != ib[0]) or
                                                 (ia[1] and ib[1] and ia[1] != ib[1])):
                if R._title_score(ratio, ta, tb, ya, yb) > 0:
                    join(a, b)
    groups: dict[int, list[tuple[str, int]]] = {}
    for j in keep:
        groups.setdefault(find(j), []).append(items[j][:2])
    return list(groups.values())


@pytest.mark.parametrize("seed", [7, 8])
@pytest.mark.parametrize("kernels", [True, False])
def test_resolution_and_clusters_equal_the_rules_over_every_pair(seed, kernels, monkeypatch):
    monkeypatch.setattr(R, "_numba_loaded", lambda: kernels)
    rows, refs = _library(seed)
    res = resolve(Library.from_rows(rows), refs)
    want, want_why = _every_pair(rows, refs)
    assert res.target == want and res.why == want_why
    got = [[(k, e.n - 1) for k, e in m.members] for m in res.missing]
    assert got == _every_pair_clusters(refs, res.why)
    assert [list(m.at) for m in res.missing] == got
    assert sum(len(g) > 1 for g in got) > 10  # works cited several times, under title variants


def test_modes_are_each_groups_most_common_value():
    rng = random.Random(9)
    pool = [None, "", 0, (), "a", "b", "c", 1997, 1998, ("Lo", "Wang"), ("Lo",), "A"]
    groups = [[rng.choice(pool) for _ in range(rng.randint(1, 9))] for _ in range(400)]
    values = [v for g in groups for v in g]
    group = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    got = R._modes(values, group, len(groups))
    assert got == [R._most_common(g) for g in groups]
    assert [type(x) for x in got] == [type(R._most_common(g)) for g in groups]
    assert sum(x is None for x in got) > 10 and len(set(map(str, got))) > 5
