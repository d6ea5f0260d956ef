"""Chunks against the encoder's window: ``python -m bench chunks [--arms scifact,cisi,cranfield] [--work DIR]``.

For each arm (imported into ``--work``/<arm> when not there yet), every ledger row's text as the embed stage
reads it (``document_text``, else the ledger abstract) is cut twice -- by the spec's word rule (200 words, 40
shared: ``chunk_spans``) and by the model's token rule (``TokenChunker``) -- and every chunk's full encoder
input (``title + newline + chunk``, the passage prefix, [CLS] and [SEP]) is counted with the model's own
tokenizer. A chunk is truncated when that count exceeds the model's ``max_seq_length``: the model never
reads its last word pieces. No encoding: the tokenizer alone (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

__all__ = ["count_arm", "main"]


def count_arm(name: str, work: Path) -> dict:
    from bench.data import data_dir
    from chitragupta.cli.main import main as cli
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.chunking import CHUNK_OVERLAP, CHUNK_WORDS, chunk_spans, document_text
    from chitragupta.enrich.encoders import model_spec
    from chitragupta.enrich.stream import chunker_for

    ws_dir = work / name
    if not (ws_dir / "content").is_dir():
        ws_dir.mkdir(parents=True, exist_ok=True)
        if cli(["import", "-w", str(ws_dir), str(data_dir() / name / "corpus.jsonl")]) != 0:
            raise SystemExit(f"import of {name} failed")
    ws = Workspace.open(ws_dir)
    spec = model_spec(ws.config.enrich)
    chunker = chunker_for(spec)
    if chunker is None:
        raise SystemExit(f"{spec.model_name}: no tokenizer in its folder")
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.rows()
    out = {"arm": name, "model": spec.model_name, "max_seq_length": spec.max_seq_length, "docs": 0}
    for rule in ("words", "tokens"):
        out[rule] = {"chunks": 0, "truncated": 0, "pieces_lost": 0, "max_input": 0}
    for row in rows:
        text = document_text(ws, row.citekey, row.parsed_path)
        if not text.strip():  # as the embed stage: the ledger abstract when the row has no text
            text = (row.abstract or "").strip()
        if not text.strip():
            continue
        out["docs"] += 1
        title = row.title or ""
        for rule, spans in (("words", chunk_spans(text, CHUNK_WORDS, CHUNK_OVERLAP)),
                            ("tokens", chunker.spans(text, title))):
            r = out[rule]
            for s, e in spans:
                n = chunker.input_tokens(title, text[s:e])
                r["chunks"] += 1
                r["max_input"] = max(r["max_input"], n)
                if n > spec.max_seq_length:
                    r["truncated"] += 1
                    r["pieces_lost"] += n - spec.max_seq_length
    return out


def table(results: list[dict]) -> str:
    lines = ["| arm | docs | chunks, word rule | truncated | chunks, token rule | truncated | longest input (tokens) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        w, t = r["words"], r["tokens"]
        lines.append(f"| {r['arm']} | {r['docs']} | {w['chunks']} | {w['truncated']} ({w['truncated'] / max(w['chunks'], 1):.1%}) "
                     f"| {t['chunks']} | {t['truncated']} ({t['truncated'] / max(t['chunks'], 1):.1%}) | "
                     f"{w['max_input']} -> {t['max_input']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench chunks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="scifact,cisi,cranfield")
    ap.add_argument("--work", type=Path, default=Path("/tmp/chitragupta-hybrid"))
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.work.mkdir(parents=True, exist_ok=True)
    results = [count_arm(a.strip(), args.work) for a in args.arms.split(",") if a.strip()]
    for r in results:
        print(json.dumps(r))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
