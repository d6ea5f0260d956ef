"""The rerank stage, measured: ``python -m bench rerank [--arm cisi] [--work DIR] [--queries N]``.

In an arm's workspace (``--work``/<arm>, embedded already, e.g. by ``python -m bench hybrid``), embedding
search with and without ``[enrich].rerank_model`` set to a cross-encoder built locally by the tests
(``tests/helpers.py``'s ``tiny_cross_encoder``: 2 layers, hidden 32, random weights -- a real
``sentence_transformers.CrossEncoder`` folder loaded from a local path, as a user's would be; no
cross-encoder model is packaged and none is downloaded). Per query: k = 10 sources (one chunk each), the
``k x [enrich].embed_overfetch`` nearest chunks scored by the cross-encoder and reordered before the cap.
Reports ms per query (in process, model loaded, after one warm-up query) and nDCG@10 of both: the tiny
model's ordering is random, so its nDCG@10 shows the rerank really reorders (and what an untrained model
does to a good first stage), never what a trained one gains (see bench/RESULTS.md for published figures).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

__all__ = ["main"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench rerank", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", default="cisi")
    ap.add_argument("--work", type=Path, default=Path("/tmp/chitragupta-hybrid"))
    ap.add_argument("--queries", type=int, default=76, help="the first N judged queries")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.arms import get
    from bench.metrics import evaluate
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher
    from tests.helpers import tiny_cross_encoder  # the tests' locally built model (bench runs from a checkout)

    arm = get(args.arm)
    root = args.work / args.arm
    qids = list(arm.queries)[:args.queries]
    texts = [arm.queries[q] for q in qids]
    ce = tiny_cross_encoder(args.work / "tiny-cross-encoder")
    own = root / "config.toml"
    rows = []
    for name, over in (("dense", {}), ("dense + rerank (tiny cross-encoder)", {"enrich": {"rerank_model": str(ce)}})):
        cfg = load_config(own if own.is_file() else None, overrides=over)
        s = EmbedSearcher.open(Workspace.open(root, cfg), device="cpu")
        s.rank_many(texts[:1], 10, max_per_source=1)  # warm-up: model loads, first batch
        t0 = time.perf_counter()
        ranked = [s.rank_many([t], 10, max_per_source=1) for t in texts]  # one query at a time, as a user asks
        ms = 1000 * (time.perf_counter() - t0) / len(texts)
        run = {q: [key.rsplit("#", 1)[0] for key in r.keys()[0]] for q, r in zip(qids, ranked)}  # one chunk a source
        m = evaluate(run, {q: arm.qrels[q] for q in qids}, ["nDCG@10"])
        pairs = 10 * int(cfg.enrich.embed_overfetch) if over else 0
        rows.append((name, m["nDCG@10"], ms, pairs))
        print(f"{name}: nDCG@10 {m['nDCG@10']:.4f}, {ms:.1f} ms/query ({pairs} pairs scored a query)", flush=True)
    print(f"\n| {args.arm} ({len(qids)} q), k = 10 | nDCG@10 | ms / query | pairs scored |\n|---|---|---|---|")
    for name, nd, ms, pairs in rows:
        print(f"| {name} | {nd:.4f} | {ms:.1f} | {pairs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
