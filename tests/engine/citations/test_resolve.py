"""Resolution (``engine.citations.resolve``) held to its rules applied to every pair (ambiguous matches left
unresolved, the year within one, a DOI or arXiv id before the title), clustering into missing works, the
blocking budget, and a kept resolution read back as the one it was made from."""

from __future__ import annotations

import random
import zlib

import pytest
from chitragupta.engine.citations import resolve as R
from chitragupta.engine.citations.resolve import Library, kept, norm_title, resolve
from chitragupta.engine.library.ledger import LedgerRow
from chitragupta.engine.text.entries import Entry


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
            doi, arx = R.entry_ids(en)
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
    info = [(norm_title(en.title), en.year, R.entry_ids(en)) for _k, _i, en in items]
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
def test_resolution_and_clusters_equal_the_rules_over_every_pair(seed):
    rows, refs = _library(seed)
    res = resolve(Library.from_rows(rows), refs)
    want, want_why = _every_pair(rows, refs)
    assert res.target == want and res.why == want_why
    got = [[(k, e.n - 1) for k, e in m.members] for m in res.missing]
    assert got == _every_pair_clusters(refs, res.why)
    assert sum(len(g) > 1 for g in got) > 10  # works cited several times, under title variants
    assert sum(t is not None for t in res.target.values()) > 300 and set(res.why.values()) == {"none", "ambiguous",
                                                                                                "self"}


@pytest.mark.parametrize("seed", [7, 8])
def test_a_kept_resolution_reads_back_as_made(seed):
    """What ``store`` keeps -- the resolved, ambiguous and self entries and each work's members -- gives the
    same resolution, works and their fields, in the same order."""
    rows, refs = _library(seed)
    res = resolve(Library.from_rows(rows), refs)
    links = [(k, i + 1, t, res.why.get((k, i)), None) for (k, i), t in res.target.items()
             if t is not None or res.why.get((k, i)) in ("ambiguous", "self")]
    links += [(k, e.n, None, None, w) for w, m in enumerate(res.missing) if len(m.members) > 1 for k, e in m.members]
    again = kept(refs, links)
    assert again.target == res.target and again.why == res.why and again.missing == res.missing
    one = resolve(Library.from_rows(rows), {"s3": refs["s3"]}, cluster=False)
    assert one.missing == [] and one.target == {k: t for k, t in res.target.items() if k[0] == "s3"}


def test_a_key_past_the_budget_blocks_nothing_and_exact_titles_still_join(monkeypatch):
    """10,000 entries whose second-rarest title word is the same ("hostile"): blocking on it would pair every
    entry with every other; past ``BLOCK_BUDGET`` it is no key, the titles' own rare words are, and the
    same title still makes one work."""
    monkeypatch.setattr(R, "BLOCK_BUDGET", 50)
    refs = {"h": [Entry(i + 1, f"A. B. {2000 + i % 20}. Hostile entry number{i % 500} of a list.", ("B",),
                        2000 + i % 20, f"Hostile entry number{i % 500} of a list") for i in range(2000)]}
    res = resolve(Library.from_rows([_row("h", "The hostile source", 2020)]), refs)
    assert len(res.missing) == 500 and all(len(m.members) == 4 for m in res.missing)
    m = R._matrix([norm_title(e.title).split() for e in refs["h"][:600]], {}, grow=True)
    rows, cols = R._blocking(m, m)
    assert len(rows) <= 600 * 2 * 50 and len(rows) >= 600  # each title pairs with its own copies
