"""The passage unit on plain text (no docling sidecar): its quality beside the document unit, and its cost.

    python -m bench passages [--data ../shared/data] [--pdfs WS] [--first 1,2]

- semeval2010 (243 full-text ACM papers, pdftotext-like lines, no form feeds) imported one file a paper
  (``packed=False``: a packed import is not split), each paper's first N keyphrases its query and the paper
  the one relevant source: nDCG@10 / R@10 of BM25 documents and of BM25 passages collapsed to sources
  (max-P, one passage a source), and the passage index's cost: a cold build's wall and CPU seconds, its
  passages, their median length, its size on disk, and a batch's wall seconds on either unit.
- ``--pdfs WS``: a workspace synced from PDFs with the default parser (the seven papermage PDFs): a few
  queries on the passage unit, how many hits carry a page, and the same build cost.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

from bench.data import WORK, data_dir, read_jsonl
from bench.timer import stopwatch

PDF_QUERIES = ["long-form summarization faithfulness", "PDF parsing layout models", "citation context reading",
               "legal case summaries", "medical papers for healthcare consumers", "annotation agreement"]


def import_files(corpus: Path, root: Path) -> Path:
    """``corpus`` imported into a fresh workspace at ``root``, one parsed file a record (split into passages)."""
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    import_jsonl(Workspace.open(root), corpus, packed=False)
    return root


def build_cost(root: Path) -> dict:
    """A cold passage build (``refresh(unit="passage", force=True)``): seconds, size, passages, lengths."""
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.index.passage import passage_items
    from chitragupta.engine.index.source import load_body
    from chitragupta.engine.library.workspace import Workspace

    ws = Workspace.open(root)
    refresh(ws, unit="document")
    with stopwatch() as took:
        got = refresh(ws, unit="passage", force=True)
    idx = got.index
    lengths = []
    for d in sorted(set(idx.p_doc.tolist()))[:50]:  # a sample of sources: the lengths of their passages
        rel = next(r for r in got.rows if r[0] == idx.citekeys[d])[3]
        items = passage_items(load_body(root / rel))
        a, b = idx.passages_of(d)
        lengths += [len(items[int(i)]["text"]) for i in idx.p_item[a:b]]
    size, doc_size = (_current_bytes(root / "content" / "index" / unit) for unit in ("passage", "doc"))
    return {"wall": took.wall, "cpu": took.cpu, "passages": idx.n_passages, "docs": len(set(idx.p_doc.tolist())),
            "median_chars": statistics.median(lengths) if lengths else 0, "mib": size / 2**20,
            "doc_mib": doc_size / 2**20}


def _current_bytes(folder: Path) -> int:
    """Bytes of an index's current generation (``CURRENT`` names it; older ones may linger beside it)."""
    gen = folder / (folder / "CURRENT").read_text().strip()
    return sum(p.stat().st_size for p in gen.rglob("*") if p.is_file())


def quality(root: Path, queries: dict[str, str]) -> list[tuple[str, float, float, float]]:
    """(unit, nDCG@10, R@10, batch wall seconds) of keyword self-retrieval, collapsed to sources."""
    from bench.metrics import evaluate
    from chitragupta.engine.evaluation.measure import collapse_by_source
    from chitragupta.engine.search.bm25 import BM25Searcher

    qids = list(queries)
    texts = [queries[q] for q in qids]
    qrels = {q: {q: 1} for q in qids}
    bm25 = BM25Searcher.open(root)
    out = []
    for unit in ("document", "passage"):
        bm25.rank_many(texts[:2], 10, unit=unit, max_per_source=1 if unit == "passage" else None)  # warm
        with stopwatch() as took:
            ranked = bm25.rank_many(texts, 10, unit=unit, max_per_source=1 if unit == "passage" else None)
        m = evaluate(collapse_by_source(dict(zip(qids, ranked.keys()))), qrels, ("nDCG@10", "R@10"))
        out.append((unit, m["nDCG@10"], m["R@10"], took.wall))
    return out


def pdf_pages(root: Path) -> tuple[int, int, int]:
    """(queries with hits, hits, hits with a page) of ``PDF_QUERIES`` on the passage unit of ``root``."""
    from chitragupta.engine.search.bm25 import BM25Searcher

    r = BM25Searcher.open(root)
    hits = [h for q in PDF_QUERIES for h in r.search(q, 10, unit="passage").hits]
    answered = sum(1 for q in PDF_QUERIES if r.search(q, 10, unit="passage").hits)
    return answered, len(hits), sum(1 for h in hits if h.page is not None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench passages", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--pdfs", type=Path, default=None, help="a workspace synced from PDFs (default parser)")
    ap.add_argument("--first", default="1,2", help="query = the first N keyphrases, for each N (default 1,2)")
    args = ap.parse_args(argv)
    if args.pdfs:
        cost = build_cost(args.pdfs)
        answered, n, paged = pdf_pages(args.pdfs)
        print(f"{args.pdfs.name}: {cost['passages']} passages from {cost['docs']} sources, median "
              f"{cost['median_chars']:.0f} chars; cold build {cost['wall']:.2f} s wall ({cost['cpu']:.2f} CPU), "
              f"{cost['mib']:.2f} MiB (document index {cost['doc_mib']:.2f} MiB); {len(PDF_QUERIES)} queries: "
              f"{answered} with hits, {paged} of {n} hits with a page")
    corpus = data_dir(args.data) / "semeval2010" / "corpus.jsonl"
    root = import_files(corpus, WORK / "ws" / "semeval2010-files")
    cost = build_cost(root)
    print(f"semeval2010 (files): {cost['passages']} passages from {cost['docs']} sources, median "
          f"{cost['median_chars']:.0f} chars; cold build {cost['wall']:.2f} s wall ({cost['cpu']:.2f} CPU), "
          f"{cost['mib']:.2f} MiB (document index {cost['doc_mib']:.2f} MiB)")
    keywords = {str(d["_id"]): d.get("keywords") or [] for d in read_jsonl(corpus)}
    print("| query | unit | nDCG@10 | R@10 | batch s |\n|---|---|---|---|---|")
    for n in (int(x) for x in args.first.split(",")):
        queries = {q: " ".join(kw[:n]) for q, kw in keywords.items() if kw}
        for unit, ndcg, r10, wall in quality(root, queries):
            print(f"| first {n} keyphrase(s), {len(queries)} q | {unit} | {ndcg:.4f} | {r10:.4f} | {wall:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
