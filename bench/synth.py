"""Seeded synthetic corpora drawn from a real collection's statistics, written as normal workspaces.

    python -m bench synth --docs 100000 --out /work/scale-ws/synth-100k [--seed 0] [--from ../shared/data/scifact]
                          [--mean-length RUNS]

The model, fitted to the source collection's ``corpus.jsonl`` (every statistic is over the tokenizer's raw
``[a-z0-9]+`` runs of the lowercased text, stopwords included):

- a document's body length is drawn from the empirical distribution of body lengths, its title length
  from the titles';
- each token is drawn from the collection's unigram distribution (bodies and titles separately), except
  that with probability ``p_new`` -- the Good-Turing estimate of an unseen word, hapax tokens / tokens --
  it is a word of an open Zipf tail (rank ``r ~ Zipf(ZIPF_A)``, spelled ``zz`` + ``r`` in base 26), so
  the vocabulary keeps growing with the corpus, as real vocabularies do (Heaps' law);
- ``--mean-length RUNS``: the source's body lengths scaled to that mean (each at least 1), the rest of
  the fit kept -- a short-document corpus such as NPL (11,429 abstracts, ~20-25 terms each) from a source
  with the same kind of vocabulary but longer documents (cisi, cranfield);
- burstiness: a body token repeats an earlier token of its own document with probability ``repeat``,
  fitted so the mean distinct-terms / length ratio of a document matches the source's (independent draws
  would spread every word over too many documents and make the postings unrealistically long).

Documents are generated in blocks of ``BLOCK`` with a generator seeded by ``(seed, block)``, so document
``i`` is the same whatever ``--docs`` is: a 100k corpus is the first 100k documents of the 1M one.

The output folder is a normal workspace: ``corpus.jsonl`` at its root (BEIR layout, ``_id`` = ``syn0000042``),
and ``content/`` as ``chitragupta import -w DIR DIR/corpus.jsonl`` leaves it: the product's own import
writes it (its texts in a few packs, ``chitragupta.engine.library.texts``; the bulk writer that once
wrote one file a document faster than import did is gone). The workspace is assembled in
``DIR.tmp-<pid>`` and renamed into place at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from bench.timer import wall_clock

__all__ = ["Stats", "fit", "documents", "write_workspace", "ZIPF_A", "BLOCK"]

ZIPF_A = 1.15  # exponent of the open tail: ~4e5 new words over 1M scifact-like documents
BLOCK = 2048  # documents per seeded block
_RUN = re.compile(r"[a-z0-9]+")
_ALPHA = "abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Stats:
    """What the generator draws from (fitted by :func:`fit`)."""

    source: str
    words: tuple[str, ...]  # body vocabulary
    probs: np.ndarray  # (V,) float64, sums to 1
    title_words: tuple[str, ...]
    title_probs: np.ndarray
    lengths: np.ndarray  # (n_source_docs,) int64 body lengths in runs
    title_lengths: np.ndarray  # (n_source_docs,) int64
    p_new: float  # chance a token comes from the open tail
    repeat: float  # chance a body token repeats an earlier one of its document
    distinct_ratio: float  # the source's mean distinct / length, what ``repeat`` was fitted to


def _unigram(counter: Counter) -> tuple[tuple[str, ...], np.ndarray]:
    words = tuple(sorted(counter))  # sorted: the fit does not depend on dict order
    counts = np.fromiter((counter[w] for w in words), dtype=np.float64, count=len(words))
    return words, counts / counts.sum()


def _mean_distinct_ratio(token_ids: np.ndarray, lengths: np.ndarray) -> float:
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ratios = [np.unique(token_ids[s:s + n]).size / n for s, n in zip(starts.tolist(), lengths.tolist()) if n]
    return float(np.mean(ratios)) if ratios else 1.0


def fit(collection: Path, *, calibrate_docs: int = 1500, seed: int = 0, mean_length: float | None = None) -> Stats:
    """Fit the model to ``collection/corpus.jsonl``; ``mean_length``: body lengths scaled to that mean
    afterwards (the burstiness fitted on the source's own lengths)."""
    body, title = Counter(), Counter()
    lengths, title_lengths, ratios = [], [], []
    with open(Path(collection) / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            runs = _RUN.findall((d.get("text") or "").lower())
            truns = _RUN.findall((d.get("title") or "").lower())
            body.update(runs)
            title.update(truns)
            lengths.append(len(runs))
            title_lengths.append(len(truns))
            if runs:
                ratios.append(len(set(runs)) / len(runs))
    if not lengths:
        raise SystemExit(f"{collection}/corpus.jsonl holds no documents")
    words, probs = _unigram(body)
    twords, tprobs = _unigram(title)
    n_tokens = sum(body.values())
    p_new = sum(1 for v in body.values() if v == 1) / max(1, n_tokens)
    target = float(np.mean(ratios)) if ratios else 1.0
    stats = Stats(str(collection), words, probs, twords, tprobs, np.asarray(lengths, dtype=np.int64),
                  np.asarray(title_lengths, dtype=np.int64), p_new, 0.0, target)
    # Fit ``repeat`` by bisection on a fixed sample (the distinct ratio falls as ``repeat`` rises).
    rng = np.random.default_rng([seed, 1 << 30])
    lens = rng.choice(stats.lengths, size=calibrate_docs)
    draws = rng.choice(len(words), size=int(lens.sum()), p=probs)
    tail = rng.random(draws.size) < p_new
    draws[tail] = len(words) + rng.zipf(ZIPF_A, size=int(tail.sum()))
    lo, hi = 0.0, 0.95
    for _ in range(14):
        mid = (lo + hi) / 2
        got = _mean_distinct_ratio(_bursty(draws, lens, mid, np.random.default_rng([seed, 1 << 31])), lens)
        lo, hi = (mid, hi) if got > target else (lo, mid)
    fitted = Stats(**{**stats.__dict__, "repeat": round((lo + hi) / 2, 4)})
    if mean_length is None:
        return fitted
    if not mean_length > 0:
        raise SystemExit("--mean-length must be > 0")
    scaled = np.maximum(1, np.rint(fitted.lengths * (mean_length / max(1e-9, fitted.lengths.mean())))).astype(np.int64)
    return Stats(**{**fitted.__dict__, "lengths": scaled})


def _bursty(draws: np.ndarray, lengths: np.ndarray, repeat: float, rng) -> np.ndarray:
    """Each token after a document's first becomes, with probability ``repeat``, a copy of a uniformly
    chosen earlier draw of the same document."""
    out = draws.copy()
    if repeat <= 0 or draws.size == 0:
        return out
    starts = np.repeat(np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    within = np.arange(draws.size) - starts
    copy = (rng.random(draws.size) < repeat) & (within > 0)
    src = starts[copy] + (rng.random(int(copy.sum())) * within[copy]).astype(np.int64)
    out[copy] = draws[src]
    return out


def _tail_word(rank: int) -> str:
    s = []
    while True:
        rank, r = divmod(rank, 26)
        s.append(_ALPHA[r])
        if rank == 0:
            break
    return "zz" + "".join(reversed(s))


class _Spell:
    """Token id -> word: the source vocabulary, then tail ranks spelled on first use."""

    def __init__(self, words: tuple[str, ...]):
        self.words = list(words)
        self.v = len(words)
        self.tail: dict[int, str] = {}

    def strings(self, ids: np.ndarray) -> list[str]:
        words, v, tail = self.words, self.v, self.tail
        out = []
        for t in ids.tolist():
            if t < v:
                out.append(words[t])
            else:
                w = tail.get(t)
                if w is None:
                    w = tail[t] = _tail_word(t - v)
                out.append(w)
        return out


def _draw(rng, n_tokens: int, vocab: int, probs: np.ndarray, p_new: float) -> np.ndarray:
    ids = rng.choice(vocab, size=n_tokens, p=probs)
    tail = rng.random(n_tokens) < p_new
    # zipf ranks start at 1; tail id = vocab + rank - 1, and the rank is capped so ids fit int64
    ids[tail] = vocab + np.minimum(rng.zipf(ZIPF_A, size=int(tail.sum())), 1 << 40) - 1
    return ids


def doc_id(i: int) -> str:
    return f"syn{i:07d}"


def documents(stats: Stats, n: int, seed: int = 0, start: int = 0) -> Iterator[tuple[str, str, str]]:
    """(``_id``, title, text) of documents ``start`` .. ``n - 1``, in order."""
    body_spell, title_spell = _Spell(stats.words), _Spell(stats.title_words)
    first_block = start // BLOCK
    for block in range(first_block, (n + BLOCK - 1) // BLOCK):
        lo, hi = block * BLOCK, min(n, (block + 1) * BLOCK)
        rng = np.random.default_rng([seed, block])
        size = BLOCK  # always draw a whole block, so a document does not depend on n
        lens = rng.choice(stats.lengths, size=size)
        tlens = rng.choice(stats.title_lengths, size=size)
        body = _draw(rng, int(lens.sum()), len(stats.words), stats.probs, stats.p_new)
        body = _bursty(body, lens, stats.repeat, rng)
        titles = _draw(rng, int(tlens.sum()), len(stats.title_words), stats.title_probs, stats.p_new)
        b_words, t_words = body_spell.strings(body), title_spell.strings(titles)
        b_end, t_end = np.cumsum(lens).tolist(), np.cumsum(tlens).tolist()
        for j in range(max(lo, start) - lo, hi - lo):
            b0 = b_end[j - 1] if j else 0
            t0 = t_end[j - 1] if j else 0
            title = " ".join(t_words[t0:t_end[j]])
            yield doc_id(lo + j), title[:1].upper() + title[1:], " ".join(b_words[b0:b_end[j]]) + "."


def _write_jsonl(path: Path, docs) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for key, title, text in docs:
            f.write(json.dumps({"_id": key, "title": title, "text": text}, ensure_ascii=False))
            f.write("\n")
            n += 1
    return n


def write_workspace(stats: Stats, n: int, out: Path, *, seed: int = 0, log=None) -> dict:
    """Generate ``n`` documents into a new workspace at ``out`` (which must not exist). Returns timings."""
    out = Path(out)
    if out.exists():
        raise SystemExit(f"{out} exists; remove it or choose another --out")
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    try:
        t0 = wall_clock()
        corpus = tmp / "corpus.jsonl"
        _write_jsonl(corpus, documents(stats, n, seed))
        t1 = wall_clock()
        if log:
            log(f"generated {n:,} documents into {corpus.name} in {t1 - t0:.1f} s")
        from chitragupta.engine.library.sync import import_jsonl
        from chitragupta.engine.library.workspace import Workspace

        ws = Workspace.open(tmp)
        with ws.lock("synth import"):
            report = import_jsonl(ws, corpus)
        if report.problems:
            raise SystemExit("\n".join(report.problems[:5]))
        t2 = wall_clock()
        meta = {"docs": n, "seed": seed, "source": stats.source, "writer": "import", "zipf_a": ZIPF_A,
                "mean_length": round(float(stats.lengths.mean()), 2),
                "p_new": stats.p_new, "repeat": stats.repeat, "distinct_ratio": stats.distinct_ratio,
                "generate_s": round(t1 - t0, 2), "write_s": round(t2 - t1, 2)}
        (tmp / "synth.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if log:
        log(f"workspace {out}: imported in {t2 - t1:.1f} s")
    return meta


def main(argv=None) -> int:
    from bench.data import DEFAULT_DATA

    ap = argparse.ArgumentParser(prog="python -m bench synth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, required=True, help="documents to generate")
    ap.add_argument("--out", required=True, help="the workspace folder to create (must not exist)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from", dest="source", default=str(DEFAULT_DATA / "scifact"),
                    help="a BEIR collection folder whose corpus.jsonl gives the statistics")
    ap.add_argument("--mean-length", type=float, default=None,
                    help="scale the source's body lengths to this mean (in runs): short documents, as NPL's")
    args = ap.parse_args(argv)
    if args.docs < 1:
        ap.error("--docs must be >= 1")
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    t = wall_clock()
    stats = fit(Path(args.source), seed=args.seed, mean_length=args.mean_length)
    log(f"fitted {Path(args.source).name}: {len(stats.words):,} body words, p_new {stats.p_new:.4f}, "
        f"repeat {stats.repeat:.3f} (distinct/length {stats.distinct_ratio:.3f}) in {wall_clock() - t:.1f} s")
    meta = write_workspace(stats, args.docs, Path(args.out), seed=args.seed, log=log)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
