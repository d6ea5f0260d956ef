"""The torch backend on a GPU, in one run: the ``gpu`` tests, queries/s, the sweep, parity with numba.

    python -m bench.gpu                        # on CUDA: about 3-6 minutes on an H200
    python -m bench.gpu --device cpu --small   # the same script end to end on torch's CPU device, small sizes

Steps, all in one process (the corpora are built once, in memory):
  (a) ``pytest -m gpu -q``: the CUDA half of tests/test_torch_backend.py;
  (b) queries/s from query strings to top-k (k = 10 and 1,000) for 1,000 and 10,000 queries over synthetic
      corpora of 5k, 100k and 1M documents. Per batch: tokenize + vocabulary lookup on the host, scoring on
      the device (the query arrays' upload included), and the results' download, each timed on its own
      (``torch.cuda.synchronize()`` before every timer read); the index's one-time upload apart, and the
      (k1, b) contribution table built on the warm-up run (an engine builds it once per parameter set);
  (c) an 11 x 11 (k1, b) grid over 1,000 queries at 1M documents through ``chitragupta.kernels.sweep.sweep``;
  (d) parity of CUDA against numba on a sample: same rankings up to ties, scores to 1e-5 relative.
It prints a Markdown block for bench/RESULTS.md, and writes it (with a JSON of the figures) under $OUT
when that variable is set.

Targets: >= 100,000 queries/s over 1M documents at k = 10 on an H200; the 11 x 11 grid over 1,000
queries at 1M documents in under 1 s.

The synthetic corpus is built directly as ``Postings`` arrays (no workspace, no files): document lengths
log-normal (median 120 indexed tokens), tokens drawn from a Zipf law over a 200,000-term vocabulary
(p(rank r) ~ 1 / (r + 30), so the commonest term is in about a third of the documents, as a common
content word is once stopwords are gone), term frequencies as they fall. Queries are 2 to 10 tokens drawn
from the same law (like windows of document text), named ``t<id>`` so the engine's lookup reads them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VOCAB = 200_000
ZIPF_OFFSET = 30.0
MEDIAN_LEN = 120.0
LEN_SIGMA = 0.6
TARGET_QPS = 100_000
TARGET_SWEEP_S = 1.0

FULL = dict(docs=(5_000, 100_000, 1_000_000), queries=(1_000, 10_000), ks=(10, 1_000), repeats=3,
            sweep_docs=1_000_000, sweep_queries=1_000, sweep_k=100, grid=11,
            parity_docs=100_000, parity_queries=500, parity_k=100)
SMALL = dict(docs=(2_000, 20_000), queries=(100, 1_000), ks=(10, 100), repeats=2,
             sweep_docs=20_000, sweep_queries=100, sweep_k=100, grid=3,
             parity_docs=20_000, parity_queries=200, parity_k=100)


@dataclass
class Corpus:
    postings: object  # chitragupta.kernels.types.Postings
    blob: np.ndarray  # the vocabulary as one byte string (uint8) ...
    offsets: np.ndarray  # ... and (VOCAB + 1,) int64 offsets into it
    slots: np.ndarray  # the lookup's hash table
    probs: np.ndarray  # (VOCAB,) float64 token probabilities, for drawing queries
    build_s: float


def term_probs(vocab: int = VOCAB) -> np.ndarray:
    """(vocab,) float64 Zipf-like token probabilities, rank 0 commonest."""
    p = 1.0 / (np.arange(vocab, dtype=np.float64) + ZIPF_OFFSET)
    return p / p.sum()


def synth_corpus(n_docs: int, seed: int, device: str) -> Corpus:
    """A corpus of ``n_docs`` documents as term-major Postings, built with torch on ``device``
    (sorting 10^8 (term, doc) keys takes seconds there, minutes in numpy)."""
    import torch

    from chitragupta.kernels.lookup import build_table
    from chitragupta.kernels.types import Postings

    t0 = time.perf_counter()
    gen = torch.Generator(device=device).manual_seed(seed)
    probs = term_probs()
    lengths = torch.exp(torch.randn(n_docs, generator=gen, device=device, dtype=torch.float64) * LEN_SIGMA
                        + float(np.log(MEDIAN_LEN)))
    lengths = lengths.round().clamp_(5, 4000).to(torch.int64)
    cdf = torch.from_numpy(np.cumsum(probs)).to(device)
    cdf[-1] = 1.0
    total = int(lengths.sum())
    key_parts = []
    # in slices, to bound the device memory of the draws
    doc_of = torch.repeat_interleave(torch.arange(n_docs, device=device), lengths, output_size=total)
    for lo in range(0, total, 50_000_000):
        hi = min(total, lo + 50_000_000)
        u = torch.rand(hi - lo, generator=gen, device=device, dtype=torch.float64)
        term = torch.searchsorted(cdf, u).clamp_(max=VOCAB - 1)
        key_parts.append(term * n_docs + doc_of[lo:hi])
    del doc_of
    keys = torch.sort(torch.cat(key_parts)).values
    del key_parts
    keys, tf = torch.unique_consecutive(keys, return_counts=True)
    term, doc = keys // n_docs, keys % n_docs
    indptr = torch.zeros(VOCAB + 1, dtype=torch.int64, device=device)
    indptr[1:] = torch.cumsum(torch.bincount(term, minlength=VOCAB), 0)
    postings = Postings(indptr=indptr.cpu().numpy(), indices=doc.to(torch.int32).cpu().numpy(),
                        tf=tf.to(torch.int32).cpu().numpy(), doc_len=lengths.to(torch.int32).cpu().numpy())
    del keys, tf, term, doc
    names = [f"t{i}".encode("ascii") for i in range(VOCAB)]
    offsets = np.zeros(VOCAB + 1, dtype=np.int64)
    np.cumsum([len(n) for n in names], out=offsets[1:])
    blob = np.frombuffer(b"".join(names), dtype=np.uint8)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return Corpus(postings, blob, offsets, build_table(blob, offsets), probs, time.perf_counter() - t0)


def synth_queries(n: int, probs: np.ndarray, seed: int) -> list[str]:
    """``n`` query strings of 2-10 tokens drawn from the corpus's token law."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 11, n)
    draws = rng.choice(probs.shape[0], size=int(lengths.sum()), p=probs)
    out, pos = [], 0
    for L in lengths:
        out.append(" ".join(f"t{t}" for t in draws[pos:pos + L]))
        pos += L
    return out


def to_batch(corpus: Corpus, queries: list[str]):
    """Query strings -> QueryBatch through the engine's numba lookup (the engine's batched path)."""
    from chitragupta.kernels.lookup import lookup_batch
    from chitragupta.kernels.types import QueryBatch

    encoded = [q.lower().encode("ascii", "replace") for q in queries]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    starts = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths + 1, out=starts[1:])
    buf = np.frombuffer(b"\n".join(encoded) + b"\n", dtype=np.uint8)
    indptr, terms = lookup_batch(buf, starts, corpus.blob, corpus.offsets, corpus.slots)
    return QueryBatch(indptr=indptr, terms=terms)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_batch(corpus: Corpus, queries: list[str], k: int, device: str, repeats: int, dtype=None) -> dict:
    """Medians over ``repeats`` runs after a warm-up (one run only when the warm-up took over 5 s):
    tokenize, device scoring, download. ``dtype``: the scores' dtype on the device (default: the
    backend's, float32 on CUDA)."""
    from chitragupta.kernels.torch_backend import default_dtype, score_grid_device
    from chitragupta.kernels.types import BM25Params

    dtype = dtype or default_dtype(device)
    params = [BM25Params()]
    runs = []
    r = 0
    while r <= repeats:
        _sync(device)
        t0 = time.perf_counter()
        batch = to_batch(corpus, queries)
        t1 = time.perf_counter()
        ids, scores = score_grid_device(corpus.postings, batch, params, k, device, dtype=dtype)
        _sync(device)
        t2 = time.perf_counter()
        ids_h, scores_h = ids.cpu().numpy(), scores.cpu().numpy()
        _sync(device)
        t3 = time.perf_counter()
        if r:  # the first run is the warm-up (allocator, kernels' first launch, the contribution table)
            runs.append((t1 - t0, t2 - t1, t3 - t2))
        elif t3 - t0 > 5.0:
            repeats = 1
        r += 1
        del ids, scores, ids_h, scores_h
    tok, comp, d2h = (statistics.median(x) for x in zip(*runs))
    postings_per_query = float(np.diff(corpus.postings.indptr)[batch.terms].sum()) / max(1, len(queries))
    return dict(queries=len(queries), k=k, dtype=str(dtype).replace("torch.", ""), tokenize_s=tok,
                device_s=comp, d2h_s=d2h,
                qps=len(queries) / (tok + comp + d2h), postings_per_query=postings_per_query)


def upload_time(corpus: Corpus, device: str) -> tuple[float, int]:
    from chitragupta.kernels import torch_backend as tb

    tb.release(corpus.postings)
    _sync(device)
    t0 = time.perf_counter()
    ix = tb.device_index(corpus.postings, device)
    _sync(device)
    return time.perf_counter() - t0, ix.nbytes()


def same_ranking(got_ids, got_scores, want_ids, want_scores, rel: float = 1e-5) -> bool:
    """Tie-aware: scores agree position by position to ``rel``; ids agree as sets within each group of
    (nearly) tied scores, except a group cut by k, which may keep different members."""
    n_got, n_want = int((got_ids >= 0).sum()), int((want_ids >= 0).sum())
    if n_got != n_want:
        return False
    if not np.allclose(got_scores[:n_want], want_scores[:n_want], rtol=rel, atol=0.0):
        return False
    i = 0
    while i < n_want:
        j = i
        while j < n_want and abs(want_scores[j] - want_scores[i]) <= rel * abs(want_scores[i]):
            j += 1
        if j < n_want and set(got_ids[i:j].tolist()) != set(want_ids[i:j].tolist()):
            return False
        i = j
    return True


def parity(corpus: Corpus, n_queries: int, k: int, device: str, seed: int) -> dict:
    from chitragupta.kernels import score_topk
    from chitragupta.kernels.types import BM25Params

    batch = to_batch(corpus, synth_queries(n_queries, corpus.probs, seed))
    params = BM25Params(k1=1.2, b=0.75)
    want = score_topk(corpus.postings, batch, params, k, backend="numba")
    got = score_topk(corpus.postings, batch, params, k, backend="torch", device=device)
    ok = [same_ranking(got.ids[q], got.scores[q], want.ids[q], want.scores[q]) for q in range(batch.n_queries)]
    hit = want.ids >= 0
    rel = np.abs(got.scores[hit] - want.scores[hit]) / np.abs(want.scores[hit]) if hit.any() else np.zeros(1)
    exact = float((got.ids == want.ids).all(axis=1).mean())
    return dict(queries=batch.n_queries, k=k, agree=int(sum(ok)), identical_rows=exact,
                max_rel_diff=float(rel.max()), counts_equal=bool((got.counts() == want.counts()).all()))


def time_sweep(corpus: Corpus, n_queries: int, k: int, grid_n: int, device: str, seed: int) -> dict:
    from chitragupta.kernels.sweep import grid_of, sweep

    batch = to_batch(corpus, synth_queries(n_queries, corpus.probs, seed))
    grid = grid_of(np.linspace(0.5, 2.5, grid_n), np.linspace(0.0, 1.0, grid_n))
    sweep(corpus.postings, batch, grid[:2], k, backend="torch", device=device)  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    tops = sweep(corpus.postings, batch, grid, k, backend="torch", device=device)
    _sync(device)
    took = time.perf_counter() - t0
    return dict(grid=f"{grid_n}x{grid_n}", points=len(grid), queries=n_queries, k=k, seconds=took,
                hits=int(sum(int(t.counts().sum()) for t in tops)))


def run_tests(device: str) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    lines = [x for x in (p.stdout + p.stderr).strip().splitlines() if x.strip()]
    return dict(command="pytest -m gpu -q", returncode=p.returncode, summary=lines[-1] if lines else "",
                seconds=time.perf_counter() - t0, tail="\n".join(lines[-15:]))


def describe(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        return (f"{props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}, "
                f"CUDA {torch.version.cuda}")
    cpu = platform.processor() or platform.machine()
    return f"torch {torch.__version__} CPU device ({os.cpu_count()} cores, {cpu})"


def markdown(res: dict) -> str:
    lines = [f"### GPU backend: `python -m bench.gpu{' ' + res['argv'] if res['argv'] else ''}` ({res['date']})", "",
             f"Device: {res['device']}. Scores float32 on CUDA (float64 on the CPU device). "
             f"Synthetic corpora built in memory: Zipf tokens over {VOCAB:,} terms, log-normal lengths "
             f"(median {MEDIAN_LEN:.0f}); queries 2-10 tokens from the same law.", ""]
    t = res.get("tests")
    if t:
        lines += [f"Tests: `{t['command']}` -> {t['summary']} (exit {t['returncode']}).", ""]
    lines += ["| docs | postings | index upload s | queries | k | scores | postings/query | tokenize ms | device ms | "
              "download ms | queries/s | postings/s |", "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for c in res["corpora"]:
        for b in c["batches"]:
            lines.append(f"| {c['docs']:,} | {c['nnz']:,} | {c['upload_s']:.3f} | {b['queries']:,} | {b['k']} | "
                         f"{b['dtype']} | "
                         f"{b['postings_per_query']:,.0f} | {b['tokenize_s'] * 1e3:.1f} | {b['device_s'] * 1e3:.1f} | "
                         f"{b['d2h_s'] * 1e3:.1f} | {b['qps']:,.0f} | {b['qps'] * b['postings_per_query']:.2e} |")
    lines += ["", "Device ms: the query arrays' upload, scoring and exact top-k, synchronized; the index's upload "
              "is once per index (its own column), and the per-posting contribution table for (k1, b) is built "
              "on the warm-up call and reused, as in an engine with fixed parameters. postings/s: queries/s x "
              "postings per query, the work an exhaustive scorer cannot skip.", ""]
    big = [b for c in res["corpora"] if c["docs"] == 1_000_000 for b in c["batches"]
           if b["k"] == 10 and b["dtype"] == "float32"]
    if big:
        best = max(big, key=lambda b: b["qps"])
        lines.append(f"Target >= {TARGET_QPS:,} q/s over 1M documents at k=10: best {best['qps']:,.0f} q/s -> "
                     f"{'met' if best['qps'] >= TARGET_QPS else 'NOT met'} (at {best['postings_per_query']:,.0f} "
                     f"postings per query the target needs {TARGET_QPS * best['postings_per_query']:.2e} postings/s).")
    s = res.get("sweep")
    if s:
        verdict = ""
        if s["docs"] == 1_000_000 and s["queries"] == 1_000 and s["grid"] == "11x11":
            verdict = f" (target < {TARGET_SWEEP_S:.0f} s: {'met' if s['seconds'] < TARGET_SWEEP_S else 'NOT met'})"
        lines.append(f"Sweep: {s['grid']} (k1, b) grid, {s['queries']:,} queries, {s['docs']:,} documents, "
                     f"k={s['k']}, through `chitragupta.kernels.sweep.sweep(backend=\"torch\")`: {s['seconds']:.3f} s{verdict}.")
    p = res.get("parity")
    if p:
        lines.append(f"Parity with numba ({p['docs']:,} documents, {p['queries']} queries, k={p['k']}): "
                     f"{p['agree']}/{p['queries']} rankings agree up to ties, {p['identical_rows'] * 100:.1f}% of "
                     f"rows identical, max relative score difference {p['max_rel_diff']:.2e}.")
    if res.get("skipped"):
        lines.append(f"Skipped for the time budget: {'; '.join(res['skipped'])}.")
    lines.append(f"Whole run: {res['seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--small", action="store_true", help="small sizes (to check the script, e.g. on the CPU)")
    ap.add_argument("--skip-tests", action="store_true", help="do not run pytest -m gpu first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-budget", type=float, default=330.0,
                    help="seconds after which the remaining speed rows are skipped (and listed as skipped)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError as err:
        print(f"bench.gpu: torch is not installed ({err}); install the 'gpu' extra: pip install 'chitragupta[gpu]'",
              file=sys.stderr)
        return 2
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print(f"bench.gpu: no CUDA device: torch {torch.__version__} (CUDA build: {torch.version.cuda or 'no'}) sees "
              "none. Nothing was measured. Run it on a GPU machine, or `python -m bench.gpu --device cpu --small` "
              "to exercise the script on torch's CPU device.", file=sys.stderr)
        return 2
    sizes = SMALL if args.small else FULL
    t_start = time.perf_counter()
    res = dict(argv=" ".join(argv if argv is not None else sys.argv[1:]), device=describe(device),
               date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), corpora=[])

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    if not args.skip_tests:
        say("pytest -m gpu -q ...")
        res["tests"] = run_tests(device)
        say(f"tests: {res['tests']['summary']}")
    from chitragupta.kernels import torch_backend as tb

    deadline = t_start + args.time_budget
    res["skipped"] = []
    for n_docs in sizes["docs"]:
        if time.perf_counter() > deadline:
            res["skipped"].append(f"the {n_docs:,}-document corpus")
            continue
        corpus = synth_corpus(n_docs, args.seed + n_docs, device)
        say(f"corpus {n_docs:,} docs: {corpus.postings.nnz:,} postings, built in {corpus.build_s:.1f} s")
        up_s, up_bytes = upload_time(corpus, device)
        entry = dict(docs=n_docs, nnz=corpus.postings.nnz, upload_s=up_s, upload_bytes=up_bytes, batches=[])
        res["corpora"].append(entry)
        # parity and the sweep first on their corpus: they matter more than the last speed rows
        if n_docs == sizes["parity_docs"]:
            res["parity"] = dict(docs=n_docs, **parity(corpus, sizes["parity_queries"], sizes["parity_k"], device,
                                                       args.seed + 13))
            say(f"parity: {res['parity']['agree']}/{res['parity']['queries']} agree")
        if n_docs == sizes["sweep_docs"]:
            res["sweep"] = dict(docs=n_docs, **time_sweep(corpus, sizes["sweep_queries"], sizes["sweep_k"],
                                                           sizes["grid"], device, args.seed + 11))
            say(f"sweep: {res['sweep']['seconds']:.3f} s")
        for n_q in sizes["queries"]:
            queries = synth_queries(n_q, corpus.probs, args.seed + 7)
            for k in sizes["ks"]:
                if time.perf_counter() > deadline:
                    res["skipped"].append(f"{n_q:,} queries at k={k} over {n_docs:,} documents")
                    continue
                b = time_batch(corpus, queries, k, device, sizes["repeats"])
                entry["batches"].append(b)
                say(f"  {n_q:,} queries k={k}: {b['qps']:,.0f} q/s (device {b['device_s'] * 1e3:.1f} ms)")
        if n_docs == sizes["docs"][-1] and time.perf_counter() < deadline:
            # the other dtype, once: on CUDA what exact float64 costs (its sums equal the reference's to the
            # last bit), on the CPU device float32
            other = torch.float64 if device == "cuda" else torch.float32
            b = time_batch(corpus, queries, sizes["ks"][0], device, sizes["repeats"], dtype=other)
            entry["batches"].append(b)
            say(f"  {b['dtype']}: {b['qps']:,.0f} q/s")
        tb.release(corpus.postings)
        del corpus
        if device == "cuda":
            torch.cuda.empty_cache()
    res["seconds"] = time.perf_counter() - t_start
    md = markdown(res)
    print(md)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_gpu.md").write_text(md, encoding="utf-8")
        (Path(out) / "bench_gpu.json").write_text(json.dumps(res, indent=1), encoding="utf-8")
    failed = res.get("tests", {}).get("returncode", 0) not in (0, 5)  # 5: no tests collected
    p = res.get("parity")
    return 1 if failed or (p is not None and p["agree"] != p["queries"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
