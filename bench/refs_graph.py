"""The citation graph against hand labels on real PDFs, and what building it costs beside indexing.

    python -m bench refs_graph [--data ../shared/data] [--sources 1000] [--entries 40] [--skip-scale]

1. **The seven real PDFs** of ``pdfs/papermage`` (AI2 papers that cite each other), synced through a BibTeX
   written here (``LIBRARY``: each paper's title as its first page prints it, its year, and its DOI where
   the file name gives one: ACL Anthology ``10.18653/v1/<id>``, arXiv ``10.48550/arXiv.<id>``), parsed with
   the pdftotext backend, entries stored by ``index``'s pass, the graph opened by the service. Scored:
   - citations inside the library against ``CITES``: which of the seven cites which, read by hand from
     each reference list (every entry naming one of the seven titles; 5 edges);
   - missing works against ``MISSING``: every work that two or more of the seven cite and the library
     lacks, found by reading: candidates came from word 5-grams (at least four not function words) shared
     by two papers' reference lists, each checked in the lists by hand (the phrases below are how it is
     recognised in an entry's text, compared letters and digits only), plus the 3-grams that no shared
     5-gram covered, read the same way.
     A predicted work is matched to the hand work whose phrases most of its member entries' texts match;
     it is right when it has one and its citing sources are among that work's; a hand work is found when
     a right prediction with two or more citing sources matches it.
   - ``missing --bib``'s author names: how many carry a given name or initials ("Lo, Kyle"), not the
     family name alone.
   Labelling decisions: GROBID as papermage cites it ("GROBID. 2008-2023. https://github.com/kermitt2/grobid",
   the software) is not the 2009 paper the others cite; 2203.00130's "Incorporating Visual Layout
   Structures for Scientific Text Classification" (arXiv 2106.00676) is VILA's first arXiv title, so it is
   the work papermage cites as "VILA: Improving Structured Content Extraction..." (one work, two titles: a
   miss expected by title rules); 2304.02623's CiteSee entry prints "ArXiv abs/2022.99999", a misprint.
2. **A synthetic library** of ``--sources`` full-text sources (``--words`` words of seeded text each, then a
   numbered reference list of ``--entries`` entries: about a quarter citing other sources of the library by
   their titles, written in varied styles, the rest drawn from a Zipf-distributed pool of outside works):
   the BM25 index build (``refresh``: its pass parses the reference lists and stores them in the ledger),
   the references step after it (``build_references``: resolution and clustering, kept in the ledger) and
   the graph opened afresh (``CitationGraph`` resolving the stored entries: the kept resolution dropped
   first), wall and CPU seconds, one run each on a cold workspace (the graph: the median of three), all in
   this process with ``jobs`` 1. ``--jobs N`` also times the index as ``index --jobs N`` runs it (N worker
   processes parsing the lists as they tokenize; CPU seconds with the workers'). The index is timed twice:
   its first build in the process (what ``chitragupta index`` pays: imports and numba's compiled kernels
   loaded) and the same build again (forced). Resolution P/R and missing-work P/R (works cited by two or
   more, found whole: the right entries and every citing source) against the generator's truth are
   reported too.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import zlib
from pathlib import Path

from bench.data import data_dir
from bench.timer import stopwatch

# the seven PDFs: file stem -> (citekey, title as the first page prints it, year, DOI or None)
LIBRARY = {
    "2020.acl-main.447": ("lo2020s2orc", "S2ORC: The Semantic Scholar Open Research Corpus", 2020,
                          "10.18653/v1/2020.acl-main.447"),
    "2023.eacl-main.121": ("krishna2023longeval", "LongEval: Guidelines for Human Evaluation of Faithfulness in "
                           "Long-form Summarization", 2023, "10.18653/v1/2023.eacl-main.121"),
    "2203.00130v1": ("august2022paperplain", "Paper Plain: Making Medical Research Papers Approachable to "
                     "Healthcare Consumers with Natural Language Processing", 2022, "10.48550/arXiv.2203.00130"),
    "2206.10883v3": ("shen2022multilexsum", "Multi-LexSum: Real-World Summaries of Civil Rights Lawsuits at "
                     "Multiple Granularities", 2022, "10.48550/arXiv.2206.10883"),
    "2302.07302v1": ("chang2023citesee", "CiteSee: Augmenting Citations in Scientific Papers with Persistent and "
                     "Personalized Historical Context", 2023, "10.48550/arXiv.2302.07302"),
    "2304.02623v1": ("shen2023beyond", "Beyond Summarization: Designing AI Support for Real-World Expository "
                     "Writing Tasks", 2023, "10.48550/arXiv.2304.02623"),
    "papermage": ("lo2023papermage", "PaperMage: A Unified Toolkit for Processing, Representing, and "
                  "Manipulating Visually-Rich Scientific Documents", 2023, None),
}
# which of the seven cites which (citing, cited), read from the reference lists by hand
CITES = {
    ("lo2023papermage", "august2022paperplain"), ("lo2023papermage", "chang2023citesee"),
    ("lo2023papermage", "lo2020s2orc"), ("shen2023beyond", "chang2023citesee"),
    ("shen2023beyond", "shen2022multilexsum"),
}
_A, _E, _P, _M = "lo2020s2orc", "krishna2023longeval", "august2022paperplain", "shen2022multilexsum"
_C, _B, _G = "chang2023citesee", "shen2023beyond", "lo2023papermage"
# works two or more of the seven cite that the library lacks:
# (label, phrases that recognise it in an entry's text, the citing citekeys)
MISSING = [
    ("GROBID (Lopez 2009)", r"grobid: combining", {_A, _P, _C}),
    ("ScispaCy (Neumann 2019)", r"scispacy", {_A, _P, _G}),
    ("Structural scaffolds for citation intent (Cohan 2019)", r"structural scaffolds", {_A, _C}),
    ("Identifying meaningful citations (Valenzuela 2015)", r"identifying meaningful citations", {_A, _C}),
    ("Multi-task identification of entities (Luan 2018)", r"multi-task identification of entities", {_A, _C}),
    ("SciBERT (Beltagy 2019)", r"scibert", {_A, _C, _G}),
    ("RoBERTa (Liu 2019)", r"roberta: a robustly", {_A, _G}),
    ("Construction of the literature graph (Ammar 2018)", r"literature graph in semantic scholar", {_A, _G}),
    ("CORD-19 (Wang 2020)", r"cord-19: the covid", {_A, _G}),
    ("SummaC (Laban 2022)", r"summac", {_E, _P}),
    ("SummEval (Fabbri 2021)", r"summeval", {_E, _P}),
    ("Evaluating the factual consistency (Kryscinski 2020)",
     r"evaluating the factual consistency of abstractive", {_E, _P}),
    ("Automated lay language summarization (Guo 2021)", r"lay language summarization", {_E, _P}),
    ("On faithfulness and factuality (Maynez 2020)", r"faithfulness and factuality", {_P, _M}),
    ("A discourse-aware attention model (Cohan 2018)", r"discourse-aware attention", {_E, _M}),
    ("Multi-News (Fabbri 2019)", r"multi-news", {_E, _M}),
    ("Efficient attentions for long document summarization (Huang 2021)", r"efficient attentions", {_E, _M}),
    ("MS^2 (DeYoung 2021)", r"summarization of medical studies", {_E, _M}),
    ("BART (Lewis 2020)", r"bart: denoising", {_E, _M}),
    ("BERTScore (Zhang 2020)", r"bertscore", {_E, _M}),
    ("Abstractive text summarization using seq2seq RNNs (Nallapati 2016)", r"sequence-to-sequence rnns",
     {_E, _M}),
    ("Don't give me the details (Narayan 2018)", r"give me the details", {_E, _M}),
    ("BookSum (Kryscinski 2021)", r"booksum", {_E, _M}),
    ("ROUGE (Lin 2004)", r"rouge: a package", {_E, _M}),
    ("BillSum (Kornilova 2019)", r"billsum", {_E, _M}),
    ("Elastic documents (Badam 2019)", r"elastic documents", {_P, _C}),
    ("Cumulative link models for ordinal regression (Christensen)", r"cumulative link models", {_P, _C}),
    ("ScholarPhi: just-in-time definitions (Head 2021)", r"just-in-time, position-sensitive", {_P, _C, _B, _G}),
    ("Sparks (Gero 2022)", r"sparks: inspiration", {_P, _B}),
    ("GPT-3: Language models are few-shot learners (Brown 2020)", r"few-shot learners", {_P, _B, _G}),
    ("VILA (Shen 2022; arXiv 2106.00676)", r"incorporating visual layout structures|vila: improving", {_P, _G}),
    ("Sentence-BERT (Reimers 2019)", r"sentence-bert", {_M, _B}),
    ("Don't say what you don't know (King 2022)", r"say what you don", {_M, _B}),
    ("FORSense (Rachatasumrit 2021)", r"forsense", {_C, _B}),
    ("SPECTER (Cohan 2020)", r"specter", {_C, _B}),
    ("SciCo (Cattan 2021)", r"scico", {_C, _B}),
    ("Passages (Han 2022)", r"passages: interacting", {_C, _B}),
    ("The cost structure of sensemaking (Russell 1993)", r"cost structure of sensemaking", {_C, _B}),
    ("CiteRead (Rachatasumrit 2022)", r"citeread", {_C, _B, _G}),
    ("Threddy (Kang 2022)", r"threddy", {_C, _B, _G}),
]


def _glued(text: str) -> str:
    """Letters and digits only, lower case: how an entry's text and a hand pattern are compared (immune to
    hyphens, line breaks and spacing)."""
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _matches(pattern: str, text: str) -> bool:
    """``pattern``: alternatives separated by "|", each a phrase compared ``_glued``."""
    t = _glued(text)
    return any(_glued(alt) in t for alt in pattern.split("|"))


def _bib(pdf_dir: Path) -> str:
    out = []
    for stem, (key, title, year, doi) in LIBRARY.items():
        fields = [f"title = {{{title}}}", f"year = {{{year}}}", f"file = {{{pdf_dir / (stem + '.pdf')}}}"]
        if doi:
            fields.append(f"doi = {{{doi}}}")
        out.append(f"@article{{{key},\n  " + ",\n  ".join(fields) + "\n}\n")
    return "\n".join(out)


def _prf(tp: int, predicted: int, truth: int) -> tuple[float, float]:
    return (tp / predicted if predicted else 1.0), (tp / truth if truth else 1.0)


def real_pdfs(data: Path) -> dict:
    from chitragupta import citation_graph
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace

    pdf_dir = data / "pdfs" / "papermage"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "papers").mkdir()
        (root / "papers" / "bibliography.bib").write_text(_bib(pdf_dir), encoding="utf-8")
        ws = Workspace.open(root)
        report = sync(ws)
        built = build_references(ws)
        g = citation_graph(ws)
        edges = {(e["source"], e["target"]) for e in g.to_json()["edges"] if not e["target"].startswith("missing:")}
        tp = len(edges & CITES)
        p_cite, r_cite = _prf(tp, len(edges), len(CITES))
        works = g.missing(min_count=2, k=10_000)
        rx = MISSING
        found: set[str] = set()
        right = exact = 0
        partial: list[dict] = []
        wrong = []
        for w in works:
            votes: dict[str, int] = {}
            for _citing, entry in w.members:
                for label, pat, _c in rx:
                    if _matches(pat, entry.text):
                        votes[label] = votes.get(label, 0) + 1
            label = max(votes, key=votes.get) if votes else None
            truth = next((c for lab, _r, c in rx if lab == label), None)
            if label is not None and set(w.citing) <= truth and votes[label] * 2 > len(w.members) \
                    and label not in found:
                right += 1
                exact += set(w.citing) == truth
                if set(w.citing) != truth:
                    partial.append({"work": label, "citing": sorted(w.citing), "true": sorted(truth)})
                found.add(label)
            else:
                wrong.append({"title": w.title, "citing": list(w.citing), "matched": label})
        p_miss, r_miss = _prf(right, len(works), len(MISSING))
        import bibtexparser

        names = [a.strip() for en in bibtexparser.parse_string(g.missing_bibtex(works)).entries
                 for a in en.fields_dict["author"].value.split(" and ")] if works else []
        return {"bib_names": {"names": len(names), "with_given": sum("," in a for a in names)},
            "parsed": report.parsed, "entries": built["entries"],
            "cites": {"edges_predicted": len(edges), "edges_true": len(CITES), "right": tp,
                      "precision": p_cite, "recall": r_cite,
                      "wrong": sorted(edges - CITES), "missed": sorted(CITES - edges)},
            "missing": {"predicted": len(works), "true": len(MISSING), "right": right,
                        "right_with_every_citing_source": exact, "partial": partial, "precision": p_miss,
                        "recall": r_miss, "wrong": wrong,
                        "missed": [lab for lab, _p, _c in MISSING if lab not in found]},
        }


# -- the synthetic library ---------------------------------------------------------------------------

_SYLL = ("ka", "lo", "mi", "ne", "ru", "ta", "vi", "zo", "pe", "sa", "do", "gu", "ha", "ji", "bo", "fe")
_WORDS_TITLE = ("learning", "neural", "models", "retrieval", "graph", "language", "scientific", "analysis",
                "evaluation", "dataset", "summarization", "citation", "networks", "deep", "robust", "efficient",
                "document", "search", "question", "answering", "knowledge", "transfer", "representation")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLL) for _ in range(rng.randint(2, 4)))


def _title(rng: random.Random) -> str:
    words = [rng.choice(_WORDS_TITLE) if rng.random() < 0.45 else _word(rng) for _ in range(rng.randint(4, 11))]
    t = " ".join(words)
    return t[0].upper() + t[1:]


def _authors(rng: random.Random) -> list[str]:
    return [_word(rng).capitalize() for _ in range(rng.randint(1, 5))]


def _entry(rng: random.Random, title: str, year: int, authors: list[str]) -> str:
    shown = title if rng.random() < 0.7 else title.lower()
    names = ", ".join(f"{a[0]}. {a}" for a in authors)
    style = rng.random()
    if style < 0.4:
        return f"{names}. {year}. {shown}. In Proceedings of the {_word(rng).capitalize()} Conference, pages " \
               f"{rng.randint(1, 900)}-{rng.randint(901, 999)}."
    if style < 0.7:
        return f"{names}. {shown}. Journal of {_word(rng).capitalize()} {rng.randint(1, 60)}, {year}."
    h = zlib.crc32(title.encode())  # one id per work, whoever cites it
    arxiv = f"{15 + h % 9}{1 + h // 9 % 12:02d}.{10000 + h // 108 % 90000}"
    return f"{', '.join(authors)} ({year}). {shown}. arXiv preprint arXiv:{arxiv}."


def _children_cpu() -> float:
    """CPU seconds of this process's finished child processes (the worker pools', once shut down)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def synthetic(n: int, n_entries: int, words: int, seed: int = 0, jobs: int = 1) -> dict:
    from chitragupta.engine.citations.graph import CitationGraph
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    rng = random.Random(seed)
    lib = [(f"s{i:05d}", _title(rng), rng.randint(1995, 2024), _authors(rng)) for i in range(n)]
    pool = [(_title(rng), rng.randint(1970, 2024), _authors(rng)) for _ in range(n * 8)]
    weights = [1.0 / (r + 1) for r in range(len(pool))]
    vocab = [_word(rng) for _ in range(5000)]
    truth: dict[tuple[str, int], str | None] = {}
    work_of: dict[tuple[str, int], int] = {}  # (citing, entry number) -> the outside work it cites
    records = []
    for key, title, year, authors in lib:
        body = " ".join(rng.choices(vocab, k=words))
        refs = []
        cited = rng.sample(range(n), k=min(n - 1, n_entries // 4))
        outside = rng.choices(range(len(pool)), weights=weights, k=n_entries - len(cited))
        items = [("lib", c) for c in cited if lib[c][0] != key] + [("pool", p) for p in outside]
        rng.shuffle(items)
        for i, (kind, j) in enumerate(items):
            if kind == "lib":
                t, y, a = lib[j][1], lib[j][2] + rng.choice((0, 0, 0, 1)), lib[j][3]
                truth[(key, i)] = lib[j][0]
            else:
                t, y, a = pool[j]
                truth[(key, i)] = None
                work_of[(key, i + 1)] = j
            refs.append(f"[{i + 1}] {_entry(rng, t, y, a)}")
        records.append({"_id": key, "title": title, "text": body + "\n\nReferences\n\n" + "\n".join(refs) + "\n",
                        "metadata": {"year": year}})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        ws = Workspace.open(root)
        import_jsonl(ws, corpus)
        with stopwatch() as t_index:
            refresh(ws, unit="document")
        with stopwatch() as t_index2:  # the same build again: numba compiled and the modules imported
            opened = refresh(ws, unit="document", force=True)
        with stopwatch() as t_refs:
            built = build_references(ws, opened)
        walls, cpus = [], []
        g = None
        for _ in range(3):
            with Ledger(ws.ledger_path) as ledger, ledger.transaction():
                ledger.delete_meta("links")  # resolved each time, not read back
            with stopwatch() as t_graph:
                g = CitationGraph.open(ws)
            walls.append(t_graph.wall)
            cpus.append(t_graph.cpu)
        par = {}
        if jobs > 1:  # as ``index --jobs N`` runs it: the lists parsed by the index's workers
            c0 = _children_cpu()
            with stopwatch() as tj_index:
                refresh(ws, unit="document", force=True, jobs=jobs)
            par = {"jobs": jobs, "index_jobs_s": tj_index.wall, "index_jobs_cpu_s": tj_index.cpu + _children_cpu() - c0}
        got = {(k, i): g.resolution.target.get((k, i)) for (k, i) in truth}
        pred = {x for x, v in got.items() if v is not None}
        right = sum(1 for x in pred if got[x] == truth[x])
        true_links = sum(1 for v in truth.values() if v is not None)
        p, r = _prf(right, len(pred), true_links)
        return {"sources": n, "entries_per_source": n_entries, "words_per_source": words,
                "entries_stored": built["entries"], "index_s": t_index.wall, "references_s": t_refs.wall,
                "graph_s": statistics.median(walls), "graph_runs_s": walls, "index_cpu_s": t_index.cpu,
                "index_again_s": t_index2.wall, "index_again_cpu_s": t_index2.cpu,
                "references_cpu_s": t_refs.cpu, "graph_cpu_s": statistics.median(cpus),
                "resolution_precision": p, "resolution_recall": r, "links_true": true_links,
                "missing_works_ge2": len(g.missing(2, k=10**9)), **_missing_truth(g, work_of), **par}


def _missing_truth(g, work_of: dict[tuple[str, int], int]) -> dict:
    """Missing works (cited by two or more) against the generator's: a predicted work is right when all its
    entries cite one outside work and its citing sources are all of that work's."""
    citing_of: dict[int, set[str]] = {}
    for (key, _n), j in work_of.items():
        citing_of.setdefault(j, set()).add(key)
    true = {j for j, c in citing_of.items() if len(c) >= 2}
    works = g.missing(2, k=10**9)
    right = set()
    for w in works:
        js = {work_of.get((k, e.n)) for k, e in w.members}
        if len(js) == 1 and None not in js:
            j = js.pop()
            if j in true and set(w.citing) == citing_of[j]:
                right.add(j)
    p, r = _prf(len(right), len(works), len(true))
    return {"missing_precision": p, "missing_recall": r, "missing_true_ge2": len(true)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench refs_graph", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="the shared data folder (default ../shared/data)")
    ap.add_argument("--sources", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=40)
    ap.add_argument("--words", type=int, default=4000, help="words of body text per synthetic source")
    ap.add_argument("--jobs", type=int, default=1,
                    help="also time the index (and its lists) with N worker processes, wall and CPU with the "
                         "workers' (what `index --jobs N` runs); default 1: not timed")
    ap.add_argument("--skip-scale", action="store_true", help="only the real PDFs")
    ap.add_argument("--skip-pdfs", action="store_true", help="only the synthetic library")
    args = ap.parse_args(argv)
    out: dict = {}
    if not args.skip_pdfs:
        out["pdfs"] = real_pdfs(data_dir(args.data))
        c, m = out["pdfs"]["cites"], out["pdfs"]["missing"]
        print(f"real PDFs: {out['pdfs']['parsed']} parsed, {out['pdfs']['entries']} entries stored", file=sys.stderr)
        print(f"  citations inside the library: precision {c['precision']:.3f}, recall {c['recall']:.3f} "
              f"({c['right']} right of {c['edges_predicted']} predicted, {c['edges_true']} true)", file=sys.stderr)
        print(f"  missing works (cited by >= 2): precision {m['precision']:.3f}, recall {m['recall']:.3f} "
              f"({m['right']} right of {m['predicted']} predicted, {m['true']} true)", file=sys.stderr)
        b = out["pdfs"]["bib_names"]
        print(f"  missing --bib: {b['with_given']} of {b['names']} author names with a given name or initials",
              file=sys.stderr)
    if not args.skip_scale:
        s = out["scale"] = synthetic(args.sources, args.entries, args.words, jobs=args.jobs)
        print(f"synthetic {s['sources']} sources x {s['entries_per_source']} entries ({s['words_per_source']} words "
              f"each): wall (CPU) seconds: index with its lists {s['index_s']:.2f} ({s['index_cpu_s']:.2f}), again "
              f"{s['index_again_s']:.2f} ({s['index_again_cpu_s']:.2f}); references step (resolution kept) "
              f"{s['references_s']:.2f} ({s['references_cpu_s']:.2f}); graph resolved afresh {s['graph_s']:.2f} "
              f"({s['graph_cpu_s']:.2f}); "
              f"resolution P {s['resolution_precision']:.4f} R {s['resolution_recall']:.4f}; missing works P "
              f"{s['missing_precision']:.4f} R {s['missing_recall']:.4f}", file=sys.stderr)
        if args.jobs > 1:
            print(f"  with --jobs {args.jobs}, wall (CPU with the workers') seconds: index with its lists "
                  f"{s['index_jobs_s']:.2f} ({s['index_jobs_cpu_s']:.2f})", file=sys.stderr)
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
