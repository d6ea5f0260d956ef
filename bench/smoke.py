"""The benchmark smoke CI runs when ``../shared/data`` exists: quality on every arm against the
independent reference figures, bm25s agreeing on SciFact, and real PDFs through ``sync``.

    python -m bench smoke

Exits non-zero when a figure falls outside its bound, so a regression in the formula, the tokenizer
or the index build fails CI rather than a number quietly moving.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench import arms as arms_mod
from bench.data import data_dir
from bench.metrics import evaluate
from bench.quality import KEYWORD_ARMS, QRELS_ARMS, measures_for
from bench.runs import run
from bench.timer import stopwatch

# Textbook BM25 with this tokenizer, measured independently (../shared/data/README.md): compared with runs
# scored without the one-character pairs ([retrieval].short_word_pairs = false), which textbook BM25 lacks.
REFERENCE = {
    "scifact": {"nDCG@10": 0.6624, "R@100": 0.8759},
    "cranfield": {"nDCG@10": 0.3651, "R@100": 0.7060},
    "cisi": {"nDCG@10": 0.2877, "R@100": 0.3823},
    "www": {"R@1": 0.577, "R@5": 0.756, "MRR@5": 0.649, "nDCG@5": 0.676},
    "inspec": {"R@1": 0.984, "R@5": 0.994, "MRR@5": 0.988, "nDCG@5": 0.990},
    "semeval2010": {"R@1": 0.996, "R@5": 1.000, "MRR@5": 0.998, "nDCG@5": 0.999},
}
TOLERANCE = 0.0015


def textbook(arm):
    """The arm's retriever without the one-character pairs: textbook BM25, what the references measure."""
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.search.bm25 import Retriever

    root = arm.workspace()
    cfg = root / "config.toml"
    over = {"retrieval": {"short_word_pairs": False}}
    return Retriever.open(Workspace.open(root, load_config(cfg if cfg.exists() else None, overrides=over)))


def main(argv: list[str] | None = None) -> int:
    if argv:
        raise SystemExit(f"python -m bench smoke takes no options (got {' '.join(argv)})")
    failures = []
    for name in [*QRELS_ARMS, *KEYWORD_ARMS]:
        arm = arms_mod.get(name)
        got = evaluate(run(arm, retriever=textbook(arm)), arm.qrels, measures_for(name))
        for m, want in REFERENCE[name].items():
            ok = abs(got[m] - want) <= TOLERANCE
            print(f"{'ok  ' if ok else 'FAIL'} {name:<12} {m:<8} {got[m]:.4f} (reference {want:.4f})")
            if not ok:
                failures.append(f"{name} {m}")
    try:
        failures += _bm25s_agrees()
    except ImportError:
        print("skip bm25s parity: bm25s not installed (pip install -e '.[bench]')")
    failures += _pdfs()
    if failures:
        print("smoke failed: " + ", ".join(failures))
        return 1
    print("smoke passed")
    return 0


def _bm25s_agrees() -> list[str]:
    from bench.data import read_jsonl
    from bench.peers import Bm25s, positive_hits

    arm = arms_mod.get("scifact")
    docs = list(read_jsonl(data_dir() / "scifact" / "corpus.jsonl"))
    peer = Bm25s()
    peer.build([d["title"] + "\n" + d["text"] for d in docs])
    qids = list(arm.queries)
    found, scores = peer.search([arm.queries[q] for q in qids], 100, 1)
    peer_run = {q: [str(docs[i]["_id"]) for i in row] for q, row in zip(qids, positive_hits(found, scores))}
    theirs = evaluate(peer_run, arm.qrels, ["nDCG@10"])["nDCG@10"]
    ours = evaluate(run(arm, retriever=textbook(arm)), arm.qrels, ["nDCG@10"])["nDCG@10"]
    ok = abs(theirs - ours) <= 0.002  # bm25s scores in float32, so near-ties may order differently
    print(f"{'ok  ' if ok else 'FAIL'} bm25s parity scifact nDCG@10: ours {ours:.4f}, bm25s {theirs:.4f}")
    return [] if ok else ["bm25s parity"]


def _pdfs() -> list[str]:
    """The real PDFs in pdfs/papermage through a BibTeX file and ``sync`` (pdftotext backend)."""
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.library.workspace import Workspace

    folder = data_dir() / "pdfs" / "papermage"
    pdfs = sorted(folder.glob("*.pdf"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "papers").mkdir()
        bib = "".join(f"@misc{{p{i}, title = {{{p.stem}}}, file = {{{p}}}}}\n" for i, p in enumerate(pdfs))
        (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
        ws = Workspace.open(root)
        with stopwatch() as took:
            report = sync(ws)
        secs = took.wall
        words = sum(len((root / "content" / "parsed" / f"p{i}.txt").read_text().split()) for i in range(len(pdfs))
                    if (root / "content" / "parsed" / f"p{i}.txt").exists())
        hits = Retriever.open(ws).search("semantic scholar open research corpus", k=3)
        ok = report.parsed == len(pdfs) and not report.failed and hits.hits and words > 50_000
        print(f"{'ok  ' if ok else 'FAIL'} pdf sync: {report.parsed}/{len(pdfs)} parsed, {words} words in "
              f"{secs:.1f} s; top hit for 'semantic scholar open research corpus': "
              f"{hits.hits[0].title if hits.hits else None}")
        return [] if ok else ["pdf sync"]


if __name__ == "__main__":
    sys.exit(main())
