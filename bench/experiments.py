"""The spec's experiments, re-run on this project's arms. Each prints a Markdown section for bench/LOG.md.

    python -m bench experiments [--only kb,floor,short,title,abstract,cut,passage,acronyms,stem,peers]

  kb        k1 and b, one at a time, at k in {3, 5, 10}                  (www, scifact, cranfield, cisi)
  floor     the token-length floor {1, 2, 3}, bench-only tokenizers        (www, scifact, cranfield, cisi)
  short     one-character words: floor 1, pairs with a neighbour by rule   (www, scifact, cranfield, cisi)
  title     weight_title in {0, 0.5, 1, 1.5, 2, 3}                         (scifact, cranfield, cisi)
  abstract  weight_abstract in {0, 0.5, 1, 1.5, 2, 3}                      (semeval2010-md, docling)
  cut       the reference cut on and off                                   (semeval2010-md)
  passage   passage unit against document unit; passage floor and cap      (semeval2010-md)
  acronyms  expansion on and off                                           (derived acronym arms)
  stem      stemmer "english" against "none"                               (every arm)
  peers     bm25s and rank-bm25 configured alike: the same nDCG@10?        (scifact, cranfield, cisi)

The spec's second ground truth, live drafting logs, has no counterpart here; where a spec decision
leaned on it, that is said with the figures. Everything is deterministic: re-running a command gives
the same figures to the fourth decimal.
"""

from __future__ import annotations

import argparse
import statistics

from bench import arms as arms_mod
from bench.metrics import compare, evaluate, mean_query_term_df, per_query, sentence_edges
from bench.runs import run, scratch, sweep_runs
from bench.timer import stopwatch

QRELS = ("scifact", "cranfield", "cisi")
SELF = ("www",)


def table(header: list[str], rows: list[list]) -> str:
    def cell(v):
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def counts(base_run, other_run, qrels, measure: str) -> str:
    b, w, _s = compare(per_query(base_run, qrels, measure), per_query(other_run, qrels, measure))
    return f"+{b} / -{w}"


def _retriever(root, **overrides):
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.engine.library.workspace import Workspace

    cfg_path = root / "config.toml"
    cfg = load_config(cfg_path if cfg_path.exists() else None, overrides={"retrieval": overrides} if overrides else None)
    return Retriever.open(Workspace.open(root, cfg))


# -- k1 and b ---------------------------------------------------------------------------------------
def exp_kb(data) -> str:
    from chitragupta.kernels.sweep import grid_of

    out = ["### k1 and b, one at a time (`python -m bench experiments --only kb`)", ""]
    bs = [0.0, 0.25, 0.5, 0.75, 1.0]
    k1s = [0.5, 0.9, 1.2, 1.5, 2.0, 3.0, 5.0, 8.0]
    for name in SELF + QRELS:
        arm = arms_mod.get(name, data)
        grid = grid_of([1.5], bs) + grid_of(k1s, [0.75])
        runs = sweep_runs(arm, grid, 10)
        base = runs[bs.index(0.75)]
        rows = []
        for p, r in zip(grid, runs):
            e = evaluate(r, arm.qrels, ["R@3", "R@5", "R@10", "nDCG@5", "nDCG@10"])
            rows.append([f"k1={p.k1:g} b={p.b:g}", e["R@3"], e["R@5"], e["R@10"], e["nDCG@5"], e["nDCG@10"],
                         counts(base, r, arm.qrels, "R@5"), counts(base, r, arm.qrels, "nDCG@5")])
        out += [f"{arm.note}", "", table(["setting", "R@3", "R@5", "R@10", "nDCG@5", "nDCG@10",
                                          "R@5 vs default (+better/-worse)", "nDCG@5 vs default"], rows), ""]
    return "\n".join(out)


# -- token floor ------------------------------------------------------------------------------------
def exp_floor(data) -> str:
    from bench.data import read_jsonl
    from bench.variants import build_floor_index

    out = ["### The token-length floor {1, 2, 3}, bench-only tokenizers (`--only floor`)", ""]
    for name in SELF + QRELS:
        arm = arms_mod.get(name, data)
        recs = list(read_jsonl(data / name / "corpus.jsonl"))
        idx = {f: build_floor_index(recs, f) for f in (1, 2, 3)}
        runs = {f: idx[f].run(arm.queries) for f in idx}
        product = run(arm, retriever=_retriever(arm.workspace(), acronym_expansion=False, short_word_pairs=False))
        same = runs[2] == {q: product[q] for q in runs[2]}
        measures = ["R@1", "R@5", "MRR@5", "nDCG@5"] if name in SELF else ["nDCG@10", "R@100", "R@5", "nDCG@5"]
        affected = {q for q, t in arm.queries.items()
                    if len({tuple(idx[f].tokens(t)) for f in (1, 2, 3)}) > 1}
        sub = {q: arm.qrels[q] for q in affected}
        rows = []
        for f in (1, 2, 3):
            e = evaluate(runs[f], arm.qrels, measures)
            es = evaluate(runs[f], sub, measures) if sub else {}
            rows.append([f, *[e[m] for m in measures], counts(runs[2], runs[f], arm.qrels, measures[-1]),
                         len(sub), *[es.get(m, 0.0) for m in measures[:2]], round(idx[f].mean_doc_len(), 1)])
        out += [f"{arm.note}; floor 2 here reproduces the product's run (expansion off, as in every row): {same}", "",
                table(["floor", *measures, f"{measures[-1]} vs floor 2", "queries the floor changes",
                       f"{measures[0]} on those", f"{measures[1]} on those", "mean doc tokens"], rows), ""]
    return "\n".join(out)


# -- one-character words ---------------------------------------------------------------------------
def exp_short(data) -> str:
    from functools import partial

    from bench.data import read_jsonl
    from bench.variants import build_floor_index, build_pair_index, pair_rule
    from chitragupta.engine.text.tokenize import short_pairs

    rules = {"none (floor 2, textbook)": None, "pairs, the product's rule": pair_rule,
             "pairs, also after an apostrophe": partial(pair_rule, clitic=False),
             "pairs, also beside a one-character word": partial(pair_rule, alone=False),
             "pairs, also \"i\" with the word after": partial(pair_rule, pronoun=False),
             "pairs, every rule off": partial(pair_rule, clitic=False, alone=False, pronoun=False),
             "pairs, the word before only": partial(pair_rule, sides=("before",)),
             "pairs, the word after only": partial(pair_rule, sides=("after",)),
             "pairs, \"a\" too": partial(pair_rule, stopword_a=True)}
    out = ["### One-character words: floor 1 against pairs with a neighbour (`--only short`)", "",
           "In-memory indexes (`bench.variants`): floor 1's own; floor 2's terms plus every adjacent pair with a "
           "one-character run, so each rule below is only which pairs a query asks for.", ""]
    measures = ["nDCG@10", "R@100"]
    for name in SELF + QRELS:
        arm = arms_mod.get(name, data)
        recs = list(read_jsonl(data / name / "corpus.jsonl"))
        same = all(pair_rule(t) == short_pairs(t) for t in arm.queries.values())
        idx = build_pair_index(recs)
        runs = {label: idx.run(arm.queries, rule) for label, rule in rules.items()}
        base = runs["none (floor 2, textbook)"]
        runs["floor 1"] = build_floor_index(recs, 1).run(arm.queries)
        rows = []
        for label, r in runs.items():
            e = evaluate(r, arm.qrels, measures)
            rows.append([label, *[e[m] for m in measures], counts(base, r, arm.qrels, "nDCG@10"),
                         sum(r[q] != base[q] for q in r)])
        out += [f"{arm.note}; the product's rule is short_pairs on every query: {same}", "",
                table(["variant", *measures, "nDCG@10 vs none (+better/-worse)", "queries whose run changed"], rows), ""]
    return "\n".join(out)


# -- field weights ----------------------------------------------------------------------------------
WEIGHTS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0]


def _weight_sweep(arm, field: str) -> list[list]:
    from chitragupta.kernels.sweep import grid_of

    grid = grid_of([1.5], [0.75], WEIGHTS if field == "title" else [1.0], WEIGHTS if field == "abstract" else [1.0])
    runs = sweep_runs(arm, grid, 10)
    base = runs[WEIGHTS.index(1.0)]
    rows = []
    for w, r in zip(WEIGHTS, runs):
        e = evaluate(r, arm.qrels, ["R@3", "R@5", "R@10", "nDCG@5"])
        rows.append([w, e["R@3"], e["R@5"], e["R@10"], e["nDCG@5"], counts(base, r, arm.qrels, "R@5"),
                     counts(base, r, arm.qrels, "nDCG@5")])
    return rows


def exp_title(data) -> str:
    out = ["### weight_title (`--only title`)", ""]
    for name in QRELS:
        arm = arms_mod.get(name, data)
        out += [arm.note, "", table(["weight_title", "R@3", "R@5", "R@10", "nDCG@5", "R@5 vs 1.0", "nDCG@5 vs 1.0"],
                                    _weight_sweep(arm, "title")), ""]
    return "\n".join(out)


def exp_abstract(data) -> str:
    from chitragupta.engine.index.source import FLAG_HAS_ABSTRACT

    arm = arms_mod.get("semeval2010-md", data)
    r = _retriever(arm.workspace())
    n_abs = r.index.count_flag(FLAG_HAS_ABSTRACT)
    return "\n".join(["### weight_abstract (`--only abstract`)", "",
                      f"{arm.note}; {n_abs} of {r.index.n_docs} documents have an abstract field", "",
                      table(["weight_abstract", "R@3", "R@5", "R@10", "nDCG@5", "R@5 vs 1.0", "nDCG@5 vs 1.0"],
                            _weight_sweep(arm, "abstract")), ""])


# -- the reference cut ------------------------------------------------------------------------------
def exp_cut(data) -> str:
    import chitragupta.engine.text.refcut as refcut
    from bench.units import snippet_stats

    arm = arms_mod.get("semeval2010-md", data)
    root = arm.workspace()
    on = run(arm, 10)
    original = refcut.reference_cut
    off_root = scratch(root, "semeval2010-md-uncut", "")
    refcut.reference_cut = lambda items: None
    try:
        off = run(arm, 10, root=off_root)
    finally:
        refcut.reference_cut = original
    rows = []
    for label, r in (("cut off", off), ("cut on (shipped)", on)):
        e = evaluate(r, arm.qrels, ["R@1", "R@5", "nDCG@5"])
        rows.append([label, e["R@1"], e["R@5"], e["nDCG@5"], counts(off, r, arm.qrels, "nDCG@5")])
    snip_on = snippet_stats(root, arm.queries, cut=True)
    snip_off = snippet_stats(root, arm.queries, cut=False)
    return "\n".join([
        "### The reference cut, on and off (`--only cut`)", "", arm.note, "",
        table(["", "R@1", "R@5", "nDCG@5", "nDCG@5 vs off"], rows), "",
        f"Top-5 snippets from a reference list: {snip_off['from_refs']:.1%} with the cut off, "
        f"{snip_on['from_refs']:.1%} with it on ({snip_on['snippets']} snippets).", ""])


# -- passages ---------------------------------------------------------------------------------------
def _passage_edges(text: str) -> tuple[bool, bool]:
    """A paragraph begins mid-sentence when its first letter is lower case, ends mid-sentence when it
    does not end on sentence punctuation (a table or formula has no sentence to end)."""
    stripped = text.strip()
    first = next((c for c in stripped if c.isalpha()), "")
    return first.islower(), not (stripped.endswith((".", "!", "?", '."', ".)")))


def _unit_stats(r, arm, unit: str, k: int = 5, cap: int | None = None) -> dict:
    qids = list(arm.queries)
    texts = [arm.queries[q] for q in qids]
    ranked = r.rank_many(texts, k, unit=unit, max_per_source=cap)
    hits = r.search_many(texts, k, unit="passage", max_per_source=cap) if unit == "passage" else None
    from chitragupta.engine.evaluation.measure import source_of

    def collapse(ids):
        return list(dict.fromkeys(map(source_of, ids)))

    run_ = {}
    mid = paged = n = 0
    sources = []
    terms = ranked.terms
    keys = ranked.keys()
    for i, q in enumerate(qids):
        ids = keys[i]
        run_[q] = collapse(ids) if unit == "passage" else ids
        sources.append(len(set(collapse(ids))))
        for j, key in enumerate(ids):
            if unit == "passage":
                hit = hits[i].hits[j]
                b, e = _passage_edges(hit.snippet)
                paged += hit.page is not None
            else:
                from chitragupta.engine.text.windows import choose_windows

                body = r.body(key)
                wins = choose_windows(body.text, terms[i], r.workspace.config.retrieval.snippet_chars, 1,
                                      stem=r.index.stem)
                if not wins:
                    continue
                b, e = sentence_edges(body.text, wins[0].start, wins[0].end)
                paged += body.page_at(wins[0].anchor) is not None
            mid += b or e
            n += 1
    ev = evaluate(run_, arm.qrels, ["R@5", "nDCG@5"])
    return {"run": run_, "R@5": ev["R@5"], "nDCG@5": ev["nDCG@5"], "mid": mid / max(1, n), "paged": paged / max(1, n),
            "sources": statistics.mean(sources) if sources else 0.0}


def exp_passage(data) -> str:
    arm = arms_mod.get("semeval2010-md", data)
    root = arm.workspace()
    r = _retriever(root)
    doc = _unit_stats(r, arm, "document")
    rows = [["document", doc["R@5"], doc["nDCG@5"], f"{doc['mid']:.1%}", f"{doc['paged']:.0%}", round(doc["sources"], 2), ""]]
    for cap in (1, 3, 5):
        st = _unit_stats(r, arm, "passage", cap=cap)
        rows.append([f"passage, floor 20, cap {cap}", st["R@5"], st["nDCG@5"], f"{st['mid']:.1%}",
                     f"{st['paged']:.0%}", round(st["sources"], 2), counts(doc["run"], st["run"], arm.qrels, "R@5")])
    floor_rows = []
    for floor in (1, 10, 20, 40):
        sroot = scratch(root, f"semeval2010-md-floor{floor}", f"[retrieval]\nmin_passage_tokens = {floor}\n")
        rs = _retriever(sroot)
        st = _unit_stats(rs, arm, "passage", cap=3)
        floor_rows.append([floor, rs.passage_index().n_passages, st["R@5"], st["nDCG@5"], f"{st['mid']:.1%}",
                           round(st["sources"], 2)])
    return "\n".join([
        "### The passage unit against the document unit (`--only passage`)", "", arm.note, "",
        "Passage hits collapsed to citekeys, so recall@5 means the same thing on every row; top 5 hits.", "",
        table(["unit", "R@5", "nDCG@5", "hits beginning or ending mid-sentence", "hits with a page",
               "distinct sources in the top 5", "R@5 vs document"], rows), "",
        "Passage floor (min_passage_tokens), cap 3:", "",
        table(["floor", "passages", "R@5", "nDCG@5", "mid-sentence", "distinct sources"], floor_rows), ""])


# -- acronyms ---------------------------------------------------------------------------------------
def exp_acronyms(data) -> str:
    out = ["### Acronym expansion on the derived arms (`--only acronyms`)", ""]
    for base in ("www", "semeval2010", "inspec"):
        arm = arms_mod.get(f"acronyms-{base}", data)
        if not arm.queries:
            out += [f"{arm.note}: nothing to measure", ""]
            continue
        root = arm.workspace()
        rows = []
        runs = {}
        for label, on in (("off", False), ("on", True)):
            r = _retriever(root, acronym_expansion=on)
            runs[label] = run(arm, 10, retriever=r)
            ranked = r.rank_many(list(arm.queries.values()), 1)
            e = evaluate(runs[label], arm.qrels, ["R@1", "R@5", "MRR@5", "nDCG@5"])
            rows.append([label, e["R@1"], e["R@5"], e["MRR@5"], e["nDCG@5"],
                         round(mean_query_term_df(r.index, ranked.terms), 1)])
        rows[1].append(counts(runs["off"], runs["on"], arm.qrels, "nDCG@5"))
        rows[0].append("")
        expanded = sum(1 for t in arm.queries.values() if _expands(root, t))
        out += [f"{arm.note}; {expanded} of them expand", "",
                table(["expansion", "R@1", "R@5", "MRR@5", "nDCG@5", "mean query-term DF", "nDCG@5 vs off"], rows), ""]
    return "\n".join(out)


def _expands(root, text: str) -> bool:
    r = _retriever(root)
    ex = r.expander()
    return bool(ex and ex.expand(text).added)


# -- stemming ---------------------------------------------------------------------------------------
def exp_stem(data) -> str:
    out = ["### Stemming: `stemmer = \"english\"` against `\"none\"` (`--only stem`)", ""]
    rows = []
    for name in ("scifact", "cranfield", "cisi", "www", "semeval2010", "inspec", "semeval2010-md"):
        arm = arms_mod.get(name, data)
        root = arm.workspace()
        base = run(arm)
        sroot = scratch(root, f"{name}-stem", '[retrieval]\nstemmer = "english"\n')
        stem = run(arm, root=sroot)
        ms = ["nDCG@10", "R@100"] if name in QRELS else ["R@1", "R@5", "MRR@5", "nDCG@5"]
        eb, es = evaluate(base, arm.qrels, ms), evaluate(stem, arm.qrels, ms)
        rows.append([name, " / ".join(f"{eb[m]:.4f}" for m in ms), " / ".join(f"{es[m]:.4f}" for m in ms),
                     " / ".join(ms), counts(base, stem, arm.qrels, ms[0])])
    out += [table(["arm", "none", "english", "measures", f"per query on the first measure (+better/-worse)"], rows), ""]
    return "\n".join(out)


# -- peers ------------------------------------------------------------------------------------------
def exp_peers(data) -> str:
    from bench.data import read_jsonl
    from bench.peers import Bm25s, RankBm25, positive_hits

    rows = []
    for name in QRELS:
        arm = arms_mod.get(name, data)
        docs = list(read_jsonl(data / name / "corpus.jsonl"))
        texts = [d["title"] + "\n" + d["text"] for d in docs]
        keys = [str(d["_id"]) for d in docs]
        qids = list(arm.queries)
        qtexts = [arm.queries[q] for q in qids]
        ours = evaluate(run(arm, retriever=_retriever(arm.workspace(), short_word_pairs=False)), arm.qrels,
                        ["nDCG@10"])["nDCG@10"]
        b = Bm25s()
        b.build(texts)
        found, sc = b.search(qtexts, 100, 1)
        b_run = {q: [keys[i] for i in row] for q, row in zip(qids, positive_hits(found, sc))}
        row = [name, ours, evaluate(b_run, arm.qrels, ["nDCG@10"])["nDCG@10"]]
        if len(docs) <= 2000:
            rb = RankBm25(texts)
            with stopwatch() as took:
                rb_run = {q: [keys[i] for i in rb.top(qt, 100)] for q, qt in zip(qids, qtexts)}
                ndcg = evaluate(rb_run, arm.qrels, ["nDCG@10"])["nDCG@10"]
            row += [ndcg, f"{took.wall / len(qids) * 1e3:.1f} ms"]
        else:
            row += ["(not run: large)", ""]
        rows.append(row)
    return "\n".join(["### Peers configured alike (`--only peers`)", "",
                      "Same tokens, k1 = 1.5, b = 0.75; rank-bm25's BM25Okapi with the same idf formula.", "",
                      table(["arm", "ours nDCG@10", "bm25s nDCG@10", "rank-bm25 nDCG@10", "rank-bm25 per query"], rows), ""])


EXPERIMENTS = {"kb": exp_kb, "floor": exp_floor, "short": exp_short, "title": exp_title, "abstract": exp_abstract, "cut": exp_cut,
               "passage": exp_passage, "acronyms": exp_acronyms, "stem": exp_stem, "peers": exp_peers}


def main(argv=None) -> int:
    from bench.data import data_dir

    ap = argparse.ArgumentParser(prog="python -m bench experiments", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    for name in args.only.split(","):
        with stopwatch() as took:
            print(EXPERIMENTS[name](data))
        print(f"<!-- {name}: {took.wall:.1f} s -->\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
