"""The text a hit hands back: the reference cut, the passage unit against the document unit.

    python -m bench units [--data ../shared/data]

On ``semeval2010-md`` synced with the docling backend (Markdown papers with ABSTRACT and REFERENCES
headings; the paper's own keywords from the BibTeX as its self-retrieval query), and on the three
docling Markdown exports in ``pdfs/docling/groundtruth``:
  - how much of each document the cut removes (share of indexed tokens after the reference heading);
  - the passage index's size and per-query cost against the document unit's;
  - on the document unit, with the cut on and off: the share of top-5 snippets that begin or end
    mid-sentence, that carry a page, and that come from a reference list.
"Off" is measured in a scratch copy of the workspace with the cut disabled in this process only; the
product has no switch for it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path


from bench.data import WORK, data_dir
from bench.metrics import sentence_edges
from bench.timer import stopwatch

def sync_semeval_md(data: Path) -> Path:
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace

    root = WORK / "ws" / "semeval2010-md"
    root.mkdir(parents=True, exist_ok=True)
    bib = data / "semeval2010-md" / "papers" / "bibliography.bib"
    (root / "config.toml").write_text(f'[corpus]\nbibliography = "{bib}"\n[parser]\nbackend = "docling"\n')
    ws = Workspace.open(root)
    with ws.lock("bench sync"):
        sync(ws)
    return root


def keyword_queries(root: Path) -> dict[str, str]:
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(root / "content" / "ledger.sqlite") as led:
        return {r.citekey: " ".join(r.keywords) for r in led.rows() if r.keywords}


def cut_share(items: list[dict]) -> tuple[int, int]:
    """(tokens before the cut, tokens in all kept-label items) of one sidecar."""
    from chitragupta.engine.text.sidecar import EXCLUDED_LABELS
    from chitragupta.engine.text.refcut import reference_span
    from chitragupta.engine.text.tokenize import tokenize

    span = reference_span(items)
    total = kept = 0
    for i, it in enumerate(items):
        if it["label"] in EXCLUDED_LABELS:
            continue
        n = len(tokenize(it["text"]))
        total += n
        if span is None or not span[0] <= i < span[1]:
            kept += n
    return kept, total


def cut_stats(sidecars: list[Path]) -> dict:
    from chitragupta.engine.text.sidecar import read_sidecar
    from chitragupta.engine.text.refcut import reference_cut

    shares, kept_all, total_all, with_heading = [], 0, 0, 0
    for p in sidecars:
        items = read_sidecar(p)
        kept, total = cut_share(items)
        with_heading += reference_cut(items) is not None
        kept_all += kept
        total_all += total
        shares.append(1 - kept / total if total else 0.0)
    return {"docs": len(sidecars), "with_heading": with_heading, "tokens": total_all,
            "removed": total_all - kept_all, "removed_share": (total_all - kept_all) / max(1, total_all),
            "median_share": statistics.median(shares) if shares else 0.0, "worst_share": max(shares, default=0.0)}


def snippet_stats(root: Path, queries: dict[str, str], *, cut: bool, k: int = 5) -> dict:
    """Top-k document-unit snippets over the keyword queries, in a scratch copy when ``cut`` is off."""
    import chitragupta.engine.text.refcut as refcut
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.text.windows import choose_windows
    from chitragupta.engine.library.workspace import Workspace

    original = refcut.reference_cut
    scratch = None
    if not cut:
        scratch = WORK / "ws" / "semeval2010-md-uncut"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(root / "content", scratch / "content", ignore=shutil.ignore_patterns("index", ".lock"))
        shutil.copy(root / "config.toml", scratch / "config.toml")
        refcut.reference_cut = lambda items: None
    try:
        ws = Workspace.open(scratch or root)
        r = Retriever.open(ws)
        qids = list(queries)
        ranked = r.rank_many([queries[q] for q in qids], k)
        terms = ranked.terms
        keys = ranked.keys()
        n = begins = ends = either = paged = in_refs = 0
        hits_at_1 = 0
        for i, q in enumerate(qids):
            ids = keys[i]
            hits_at_1 += bool(ids) and ids[0] == q
            for d in ids:
                body = r.body(d)
                wins = choose_windows(body.text, terms[i], ws.config.retrieval.snippet_chars, 1, body_start=body.front)
                if not wins:
                    continue
                w = wins[0]
                b, e = sentence_edges(body.text, w.start, w.end)
                n += 1
                begins += b
                ends += e
                either += b or e
                paged += body.page_at(w.anchor) is not None
                # A reference list runs from the cut heading's item to the appendix after it (or the end):
                # the sidecar item the window is anchored in, by the body's item spans
                refcut.reference_cut = original
                ref_span = refcut.reference_span(list(body.items)) if body.items else None
                if not cut:
                    refcut.reference_cut = lambda items: None
                item = next((num for a, b, num, _pg in body.spans if a <= w.anchor < b), None)
                in_refs += ref_span is not None and item is not None and ref_span[0] <= item < ref_span[1]
        return {"queries": len(qids), "snippets": n, "begin_mid": begins / max(1, n), "end_mid": ends / max(1, n),
                "either_mid": either / max(1, n), "with_page": paged / max(1, n), "from_refs": in_refs / max(1, n),
                "R@1": hits_at_1 / max(1, len(qids))}
    finally:
        refcut.reference_cut = original


def unit_costs(root: Path, queries: dict[str, str], repeats: int = 5) -> dict:
    from chitragupta.engine.index.manage import index_folder
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.library.workspace import Workspace

    ws = Workspace.open(root)
    r = Retriever.open(ws)
    pidx = r.passage_index()
    qs = list(queries.values())
    out = {"docs": r.index.n_docs, "passages": pidx.n_passages, "doc_terms": len(r.index.vocab),
           "passage_terms": len(pidx.vocab), "doc_nnz": r.index.postings.nnz, "passage_nnz": pidx.postings.nnz}
    for unit in ("document", "passage"):
        folder = index_folder(ws, unit)
        gen = folder / (folder / "CURRENT").read_text().strip()
        out[f"{unit}_bytes"] = sum(p.stat().st_size for p in gen.iterdir())
        r.rank_many(qs, 5, unit=unit)
        batch = []
        for _ in range(repeats):
            with stopwatch() as took:
                r.rank_many(qs, 5, unit=unit)
            batch.append(took.wall / len(qs))
        single = []
        for q in qs[:50]:
            with stopwatch() as took:
                r.search(q, k=5, unit=unit)
            single.append(took.wall)
        out[f"{unit}_batch_us"] = statistics.median(batch) * 1e6
        out[f"{unit}_single_ms"] = statistics.median(single) * 1e3
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", default=str(WORK / "units.json"))
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    root = sync_semeval_md(data)
    queries = keyword_queries(root)
    sidecars = sorted((root / "content" / "parsed").glob("*.passages.json"))
    res = {"cut_semeval": cut_stats(sidecars)}
    # the three docling Markdown exports, through a workspace of their own
    res["cut_groundtruth"] = cut_stats(_groundtruth_sidecars(data))
    res["snippets_cut_on"] = snippet_stats(root, queries, cut=True)
    res["snippets_cut_off"] = snippet_stats(root, queries, cut=False)
    res["costs"] = unit_costs(root, queries)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0


def _groundtruth_sidecars(data: Path) -> list[Path]:
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace

    root = WORK / "ws" / "docling-groundtruth"
    (root / "papers").mkdir(parents=True, exist_ok=True)
    gt = data / "pdfs" / "docling" / "groundtruth"
    papers = [p for p in sorted(gt.glob("*.md")) if "-pg9" not in p.name]
    bib = "".join(f"@misc{{gt{i}, title = {{{p.stem}}}, file = {{{p}}}}}\n" for i, p in enumerate(papers))
    (root / "papers" / "bibliography.bib").write_text(bib)
    (root / "config.toml").write_text('[parser]\nbackend = "docling"\n')
    ws = Workspace.open(root)
    with ws.lock("bench sync"):
        sync(ws)
    return sorted((root / "content" / "parsed").glob("*.passages.json"))


if __name__ == "__main__":
    raise SystemExit(main())
