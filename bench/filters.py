"""What metadata filters cost, in two forms, each in alternating rounds, the median CPU of the whole process:

    python -m bench filters --arm scifact --queries 20000 --rounds 5
    python -m bench filters --cold 200000 [--before OLD/src] --rounds 7

Batch (issue 30, item 5): the same 20,000 queries unfiltered, with one year filter that allows half the
sources, and with each query its own year range (a batch line's ``"filters"``). The arm's corpus is copied
with a seeded year (2000-2019, uniform) on every source, imported into a scratch workspace
(``query_syntax = false``: the collection's queries are plain words) and indexed once.

Cold (issue 45, item 3): one ``chitragupta search`` process each, unfiltered, ``--year 2000..`` and
``--author NAME``, on a synthetic library of N documents (``bench.synth`` texts drawn from scifact) with
seeded metadata (``_metadata``: years, Zipf-drawn family names with particles and accents, keywords,
venues, entry types; some fields missing). With ``--before``, the same searches by the code before the
change, each tree on its own copy of the workspace (its index built by its own code), and the hits of
the two trees compared: a figure of a changed answer is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np

from bench.data import WORK, data_dir, read_jsonl
from bench.timer import run_timed


def _prepare(arm: str, n_queries: int, seed: int) -> tuple[Path, Path, Path]:
    folder = WORK / "filters" / arm
    folder.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    corpus = folder / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as out:
        for d in read_jsonl(data_dir() / arm / "corpus.jsonl"):
            out.write(json.dumps({**d, "year": rnd.randint(2000, 2019)}) + "\n")
    texts = [q["text"] for q in read_jsonl(data_dir() / arm / "queries.jsonl")]
    plain, own = folder / "queries.jsonl", folder / "queries-own-filters.jsonl"
    with open(plain, "w", encoding="utf-8") as p, open(own, "w", encoding="utf-8") as o:
        for i in range(n_queries):
            lo = rnd.randint(2000, 2019)
            hi = min(2019, lo + rnd.randint(0, 12))
            p.write(json.dumps({"_id": f"q{i}", "text": texts[i % len(texts)]}) + "\n")
            o.write(json.dumps({"_id": f"q{i}", "text": texts[i % len(texts)], "filters": {"year": f"{lo}..{hi}"}}) + "\n")
    ws = folder / "ws"
    cli = [sys.executable, "-m", "chitragupta.cli.main"]
    if not (ws / "content" / "ledger.sqlite").exists():
        run_timed(cli + ["init", "-w", str(ws)])
        (ws / "config.toml").write_text("[retrieval]\nquery_syntax = false\n", encoding="utf-8")
    run_timed(cli + ["import", "-w", str(ws), str(corpus)])
    run_timed(cli + ["index", "-w", str(ws)])
    return ws, plain, own


_SYLLABLES = ("ka", "ro", "mi", "ten", "lu", "sa", "ber", "gon", "vi", "del", "shi", "na", "ko", "ma", "rin", "to")


def _word(rank: int) -> str:
    """A pronounceable word for a rank (its base-16 digits as syllables): distinct ranks, distinct words."""
    out, r = [], rank + 17
    while r:
        out.append(_SYLLABLES[r % 16])
        r //= 16
    return "".join(out)


def _family(rank: int) -> str:
    """Family name ``rank``: every 11th with a particle ("van der Berg"), every 7th with an accent."""
    w = _word(rank).capitalize()
    if rank % 7 == 3:
        w = w.replace("o", "ö", 1).replace("a", "á", 1)
    return ("van der " if rank % 11 == 5 else "de " if rank % 11 == 8 else "") + w


def _metadata(rng, n: int) -> list[dict]:
    """Seeded metadata for ``n`` records (module docstring): each field missing now and then."""
    out = []
    zipf = lambda a, cap, size=None: np.minimum(rng.zipf(a, size), cap) - 1  # noqa: E731
    for _ in range(n):
        d: dict = {}
        if rng.random() < 0.95:
            d["year"] = int(rng.integers(1960, 2025))
        if rng.random() < 0.97:
            d["authors"] = [f"{_family(int(r))}, {_SYLLABLES[int(r) % 16][0].upper()}."
                            for r in zipf(1.3, 50_000, int(rng.integers(1, 7)))]
        if rng.random() < 0.6:
            d["keywords"] = [_word(int(r)) + " " + _word(int(r) * 7 + 1)
                             for r in zipf(1.4, 3000, int(rng.integers(1, 5)))]
        if rng.random() < 0.9:
            r = int(zipf(1.2, 800))
            d["venue"] = f"Journal of {_word(r).capitalize()}" if r % 3 else f"Proc. {_word(r).upper()} Conference"
        if rng.random() < 0.95:
            d["type"] = ("article", "article", "inproceedings", "phdthesis", "techreport")[int(rng.integers(5))]
        out.append(d)
    return out


def _cold_workspace(n: int, seed: int) -> Path:
    """A workspace of ``n`` synthetic documents with seeded metadata, imported (not indexed); made once."""
    from bench.synth import documents, fit

    base = WORK / "filters" / f"synth-{n}"
    if (base / "content" / "ledger.sqlite").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    stats = fit(data_dir() / "scifact", seed=seed)
    rng = np.random.default_rng(seed)
    corpus = base / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as out:
        for (key, title, text), meta in zip(documents(stats, n, seed), _metadata(rng, n)):
            out.write(json.dumps({"_id": key, "title": title, "text": text, **meta}, ensure_ascii=False) + "\n")
    cli = [sys.executable, "-m", "chitragupta.cli.main"]
    run_timed(cli + ["init", "-w", str(base)])
    run_timed(cli + ["import", "-w", str(base), str(corpus)])
    corpus.unlink()
    return base


def cold(args) -> int:
    """The cold form (module docstring)."""
    trees = {"after": Path(__file__).resolve().parents[1] / "src"}
    if args.before:
        trees = {"before": Path(args.before).resolve(), **trees}
    base = _cold_workspace(args.cold, args.seed)
    query, author = "cell protein expression receptor", _family(2)
    flags = {"unfiltered": [], "--year 2000..": ["--year", "2000.."], f"--author {author!r}": ["--author", author]}
    cases, env = {}, {}
    for tree, src in trees.items():
        ws = WORK / "filters" / f"synth-{args.cold}-{tree}"
        env[tree] = dict(os.environ, PYTHONPATH=str(src), HF_HUB_OFFLINE="1")
        if not ws.exists():  # (kept for the next run: each tree's copy is only ever indexed by that tree)
            shutil.copytree(base, ws)
            took = run_timed([sys.executable, "-m", "chitragupta.cli.main", "index", "-w", str(ws)], env=env[tree])
            print(f"{tree}: index built in {took['cpu_s']:.1f} s CPU, {took['wall_s']:.1f} s wall", flush=True)
        for name, extra in flags.items():
            cases[tree, name] = [sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), query,
                                 "-k", "10", "--json", "--snippet-chars", "0", *extra]
    hits = {}
    for (tree, name), argv_ in cases.items():  # untimed: numba's caches, the page cache; and the answers
        hits[tree, name] = [h["citekey"] for h in json.loads(run_timed(argv_, env=env[tree])["stdout"])]
    for name in flags:
        if len({tuple(hits[t, name]) for t in trees}) != 1:
            raise SystemExit(f"{name}: the trees' hits differ: " + "; ".join(f"{t} {hits[t, name]}" for t in trees))
    if not args.rounds:
        print(f"cold search, {args.cold:,} synthetic documents: workspaces ready, hits identical across trees")
        return 0
    got: dict = {c: [] for c in cases}
    order = list(cases)
    for i in range(args.rounds):
        for c in (order if i % 2 == 0 else order[::-1]):
            got[c].append(run_timed(cases[c], env=env[c[0]])["cpu_s"])
    print(f"cold search, {args.cold:,} synthetic documents, {args.rounds} rounds (median CPU of the whole process; "
          f"hits identical across trees):")
    for tree in trees:
        ref = statistics.median(got[tree, "unfiltered"])
        for name in flags:
            v = got[tree, name]
            m = statistics.median(v)
            print(f"  {tree:<6} {name:<22} {m:.3f} s, {m / ref:.2f}x unfiltered, {len(hits[tree, name])} hits "
                  f"(rounds {', '.join(f'{x:.2f}' for x in v)})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench filters", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold", type=int, metavar="N", help="the cold form on N synthetic documents")
    ap.add_argument("--before", metavar="SRC", help="with --cold: the src/ folder of the code before the change")
    ap.add_argument("--arm", default="scifact")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-k", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if args.cold:
        return cold(args)
    ws, plain, own = _prepare(args.arm, args.queries, args.seed)
    run = [sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--run", str(ws / "out.trec"),
           "-k", str(args.k)]
    cases = {"unfiltered": run + ["--queries", str(plain)],
             "one year filter, half the sources (--year 2010..2019)": run + ["--queries", str(plain), "--year", "2010..2019"],
             "each query its own year range": run + ["--queries", str(own)]}
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for argv_ in cases.values():
        run_timed(argv_, env=env)  # untimed: numba's caches, the page cache
    got: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(args.rounds):
        for name in (list(cases) if i % 2 == 0 else list(reversed(cases))):
            got[name].append(run_timed(cases[name], env=env)["cpu_s"])
    ref = statistics.median(got["unfiltered"])
    print(f"{args.arm}, {args.queries} queries, k = {args.k}, {args.rounds} rounds (median CPU of the whole process):")
    for name, v in got.items():
        m = statistics.median(v)
        print(f"  {name}: {m:.3f} s, {m / ref:.2f}x unfiltered (rounds {', '.join(f'{x:.2f}' for x in v)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
