"""Phrase queries, warm (issue 30, item 5): one ``search('"w1 w2" w3', k=10)`` at a time in a process that
has the workspace open, with the positions array (``[retrieval].positions``, the default) and, for the same
phrases, the check that reads each candidate's text instead; every hit is checked to hold its phrase.

    python -m bench phrase --ws /work/scale-ws/synth-1m --phrases 200
    python -m bench phrase --arm scifact

Each phrase query is also timed without its quotes (plain BM25 over the same words), and both as wall
and as the thread's CPU time (on a shared host, the CPU time is what the query costs). Phrases are windows of 2-3 consecutive words drawn (seeded) from the workspace's own parsed texts, each
followed by one word of the same document to score, so every phrase is held by at least one source; a
window of stop words only (no indexed word: refused by the syntax) is skipped. Times are per query, after
one untimed query; ``--text-sample`` phrases also take the text-reading path (slow at 1M: it is the
reason for the positions array).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

from bench.data import WORK

DEFAULT_PHRASES = 200


def _windows(root: Path, n: int, seed: int) -> list[str]:
    from chitragupta import Retriever
    from chitragupta.engine.text.tokenize import DROPPED_RUNS, runs_bytes

    r = Retriever.open(root)
    rnd = random.Random(seed)
    dropped = set(DROPPED_RUNS)
    unit_texts = r.scorer.unit_access("document")[1]
    out: list[str] = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        d = rnd.randrange(r.index.n_units)
        body = unit_texts(d)[1]
        runs = runs_bytes(body)
        if len(runs) < 6:
            continue
        m = rnd.choice((2, 2, 3))
        j = rnd.randrange(len(runs) - m - 1)
        words = [w.decode() for w in runs[j:j + m]]
        if all(w.encode() in dropped for w in words):
            continue
        extra = runs[rnd.randrange(len(runs))].decode()
        out.append(f'"{" ".join(words)}" {extra}')
    return out


def _quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "median_ms": round(1e3 * statistics.median(xs), 2),
            "p95_ms": round(1e3 * xs[min(len(xs) - 1, int(0.95 * len(xs)))], 2), "max_ms": round(1e3 * xs[-1], 2)}


def measure(root: Path, n: int, text_sample: int, seed: int = 0) -> dict:
    from chitragupta import Retriever
    from chitragupta.engine.search.constraints import allowed_mask, phrase_in, read_syntax

    phrases = _windows(root, n, seed)
    r = Retriever.open(root)
    if r.index.positions is None:
        raise SystemExit(f"{root}: the index has no positions array ([retrieval].positions = false)")
    term_docs, texts, check = r.scorer.unit_access("document")
    r.search(phrases[0], k=10)  # warm: the index open, the kernels loaded
    wall, cpu, plain_wall, plain_cpu, hits_checked, empty = [], [], [], [], 0, 0
    for q in phrases:
        t, c = time.perf_counter(), time.thread_time()
        resp = r.search(q, k=10)
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
        t, c = time.perf_counter(), time.thread_time()
        r.search(q.replace('"', " "), k=10)  # the same words without the phrase: plain BM25
        plain_wall.append(time.perf_counter() - t)
        plain_cpu.append(time.thread_time() - c)
        _scored, cons = read_syntax(q)
        runs = cons.items[0].runs
        if not resp.hits:
            empty += 1
        for h in resp.hits:  # every hit holds its phrase, read from its text
            d = r.index.doc_id(h.citekey)
            assert phrase_in(runs, texts(d)), (q, h.citekey)
            hits_checked += 1
    agree, text_times, pos_times = 0, [], []
    for q in phrases[:text_sample]:
        _scored, cons = read_syntax(q)
        t = time.perf_counter()
        a = allowed_mask(cons, r.index.n_units, term_docs, texts, check)
        pos_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = allowed_mask(cons, r.index.n_units, term_docs, texts, None)
        text_times.append(time.perf_counter() - t)
        agree += int((a == b).all())
    return {"workspace": str(root), "documents": r.index.n_units, "phrases": len(phrases),
            "search_warm": _quantiles(wall), "search_warm_cpu": _quantiles(cpu),
            "plain_words_warm": _quantiles(plain_wall), "plain_words_warm_cpu": _quantiles(plain_cpu),
            "load_avg": os.getloadavg()[0], "queries_with_no_hit": empty, "hits_checked_hold_phrase": hits_checked,
            "mask_positions": _quantiles(pos_times) if pos_times else None,
            "mask_text_read": _quantiles(text_times) if text_times else None,
            "masks_equal": f"{agree}/{len(pos_times)}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench phrase", description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--ws", help="an indexed workspace (e.g. a bench synth one)")
    where.add_argument("--arm", help="a collection under ../shared/data (its bench workspace, indexed here)")
    ap.add_argument("--phrases", type=int, default=DEFAULT_PHRASES)
    ap.add_argument("--text-sample", type=int, default=20, help="phrases also checked by reading texts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bench/out/phrase.json")
    args = ap.parse_args(argv)
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.workspace import Workspace

    if args.ws:
        root = Path(args.ws)
    else:  # a workspace of its own: the bench's shared ones read quotes as plain words (query_syntax false)
        from chitragupta.engine.library.sync import import_jsonl

        from bench.data import data_dir

        root = WORK / "phrase" / args.arm
        if not (root / "content" / "ledger.sqlite").exists():
            root.mkdir(parents=True, exist_ok=True)
            import_jsonl(Workspace.open(root), data_dir() / args.arm / "corpus.jsonl")

    t = time.perf_counter()
    refresh(Workspace.open(root), unit="document")
    built = time.perf_counter() - t
    got = measure(root, args.phrases, args.text_sample, args.seed)
    from bench.ingest import machine

    got.update(machine=machine(root), index_refresh_s=round(built, 2))
    print(json.dumps(got, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
