"""``python -m bench.encode_speed``: the embed stage's encoding throughput beside a bare
``SentenceTransformer.encode`` of exactly the same chunk texts, same model, batch size and device, in
one run (issue 22: the stage must reach >= 0.9x of bare encode).

    python -m bench.encode_speed                      # the first 300 scifact abstracts (~450 chunks), CPU
    python -m bench.encode_speed --docs 600 --json

What it does:

1. imports the first ``--docs`` documents of ``../shared/data/scifact/corpus.jsonl`` into a fresh
   workspace under ``bench/out/encode_speed/`` and loads the model once (its load time is reported apart:
   it is paid once per run, not per chunk);
2. **stage**: ``chitragupta.enrich.run.run(ws, ["embed"])`` -- chunking, the encode stream, periodic
   commits, progress callbacks and the final store write, all timed;
3. **bare**: the chunk texts the stage encoded (read back from its store: ``encode_input(title, chunk)``)
   through ``SentenceTransformer.encode(texts, batch_size=B, normalize_embeddings=True)`` in one call;
4. prints chunks/s and CPU seconds per chunk of both, their ratio, the largest difference between the
   two sets of vectors, and the facts that decide the speed: torch threads, token lengths against
   ``max_seq_length``, and the time the whole scifact corpus would take at the measured rate.

The machine may be shared: the ratio of CPU seconds per chunk is given beside the wall-clock one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench.data import DEFAULT_DATA, WORK, first_lines

SCIFACT_CHUNKS = 7727  # chunks of the whole scifact corpus (5,183 abstracts) with the default recipe


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def measure(n_docs: int, *, device: str = "cpu", work: Path | None = None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch

    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.encoders import load_encoder
    from chitragupta.enrich.run import run as run_stages
    from chitragupta.enrich.store import load_store, store_folder
    from chitragupta.enrich.stream import encode_input

    work = (work or WORK) / "encode_speed"
    shutil.rmtree(work, ignore_errors=True)
    corpus = first_lines(DEFAULT_DATA / "scifact" / "corpus.jsonl", n_docs, work / "corpus.jsonl")
    ws = Workspace.open(work / "ws", create=True)
    import_jsonl(ws, corpus)
    enc, _w_load, _c_load = _timed(lambda: load_encoder(ws.config.enrich, device))
    model = enc.model  # the SentenceTransformer the stage uses: same weights, same device
    folder = store_folder(ws.content, enc.slug)

    def stage():
        _, wall, cpu = _timed(lambda: run_stages(ws, ["embed"], device=device))
        store = load_store(folder)
        texts = [encode_input(store.titles[int(store.chunk_doc[r])], store.chunk_text(r)) for r in range(store.count)]
        return {"wall": wall, "cpu": cpu, "vectors": store.vectors, "texts": texts}

    def bare(texts):
        vecs, wall, cpu = _timed(lambda: model.encode(texts, batch_size=enc.batch_size, convert_to_numpy=True,
                                                      normalize_embeddings=True, show_progress_bar=False))
        return {"wall": wall, "cpu": cpu, "vectors": np.asarray(vecs, dtype=np.float32)}

    s = stage()
    b = bare(s["texts"])
    same = True
    n = len(s["texts"])
    tok = model.tokenizer(s["texts"], truncation=True, max_length=model.max_seq_length)["input_ids"]
    lengths = np.array([len(t) for t in tok])
    rate_s, rate_b = n / s["wall"], n / b["wall"]
    return {
        "docs": n_docs, "chunks": n, "device": device, "batch_size": enc.batch_size,
        "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(), "model_load_s": round(_w_load, 1),
        "stage_s": round(s["wall"], 1), "stage_cpu_s": round(s["cpu"], 1), "bare_s": round(b["wall"], 1),
        "bare_cpu_s": round(b["cpu"], 1), "stage_chunks_per_s": round(rate_s, 2), "bare_chunks_per_s": round(rate_b, 2),
        "ratio_wall": round(rate_s / rate_b, 3), "ratio_cpu": round((b["cpu"] / n) / (s["cpu"] / n), 3),
        "max_abs_diff": float(np.abs(s["vectors"] - b["vectors"]).max()) if same and len(b["vectors"]) == n else None,
        "tokens_median": int(np.median(lengths)), "tokens_p95": int(np.percentile(lengths, 95)),
        "max_seq_length": model.max_seq_length,
        "truncated_share": round(float((lengths >= model.max_seq_length).mean()), 3),
        "scifact_minutes_at_stage_rate": round(SCIFACT_CHUNKS / rate_s / 60, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.encode_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=300, help="scifact documents (default 300, about 450 chunks)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    r = measure(args.docs, device=args.device)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"encode speed: {r['chunks']} chunks of the first {r['docs']} scifact documents on {r['device']} "
          f"({r['torch_threads']} torch threads, {r['cpus']} CPUs), batch {r['batch_size']}; the stage ran first")
    print(f"  model load            {r['model_load_s']:8.1f} s (once per run, not in the figures below)")
    print(f"  stage (enrich embed)  {r['stage_s']:8.1f} s  {r['stage_cpu_s']:8.1f} CPU s  {r['stage_chunks_per_s']:7.2f} chunks/s")
    print(f"  bare ST.encode        {r['bare_s']:8.1f} s  {r['bare_cpu_s']:8.1f} CPU s  {r['bare_chunks_per_s']:7.2f} chunks/s")
    print(f"  ratio stage/bare      {r['ratio_wall']:.3f} (wall)  {r['ratio_cpu']:.3f} (CPU per chunk)")
    print(f"  vectors               max |stage - bare| = {r['max_abs_diff']}")
    print(f"  tokens per chunk      median {r['tokens_median']}, p95 {r['tokens_p95']}, max_seq_length "
          f"{r['max_seq_length']}: {r['truncated_share']:.0%} truncated")
    print(f"  whole scifact ({SCIFACT_CHUNKS} chunks) at the stage rate: {r['scifact_minutes_at_stage_rate']} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
