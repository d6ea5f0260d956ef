"""``chitragupta check`` on drafts built from SciFact's judged claims: is a right citation told from a wrong
one, is the source a wrong citation should have named offered, and what does a draft cost?

Each judged claim of a split whose relevant source is in the library becomes four citations, each its own
paragraph of a LaTeX draft (``{claim} \\cite{key}.``), and one uncited sentence (the claim alone):
``relevant`` (its first relevant source), ``random`` (a non-relevant source drawn with a fixed seed),
``hard`` (BM25 search's best-ranked non-relevant source for the claim, the same for both engines) and
``typo`` (the relevant key with one character dropped: no such key). The support model's weights and
thresholds are chosen on the training claims (qrels_train.tsv) alone, by the rules in
``service/check.py``'s docstring; every figure is then measured on the test claims (qrels.tsv) through
``check`` itself, with the weights just chosen and with the shipped ``MODELS``:

    AUC of support, relevant vs random and relevant vs hard (ties count half);
    status shares per kind, and status accuracy (relevant: supported; random: unsupported; hard: weak or
    unsupported; typo: unknown);
    every citation reported on its own line; every typo unknown with the relevant key among did_you_mean;
    relevant among the top 3 alternatives of a random and of a hard citation;
    uncited: the share of claims reported, and the relevant source among a claim's top 3 candidates (a
    claim not reported counts as a miss); and the share of out-of-domain sentences reported (Cranfield's
    even-numbered queries, in the test draft too: the library holds nothing for them);
    the same test draft in Markdown (``[@key]``): the same report;
    the seven real PDFs (``seven_pdfs``): the works they cite and lack, cited by ``authorYEARword`` keys;
    cost: ``chitragupta check --json`` on the 300 relevant citations of the test claims, a whole cold
    process (CPU and wall seconds; peak memory is not given: a child forked from this process reports this
    process's own peak), then on the whole test draft; and each again warm, as the MCP server
    checks (``WarmEngines.check``, its second call).

    python -m bench check [--engines bm25,hybrid] [--seed 0]

Hybrid needs the workspace's embedding index (``chitragupta enrich --stages embed`` on the bench's
scifact workspace, bench/out/ws/scifact); without it the hybrid rows are skipped with a line saying so.
Wrap the run in ``flock /work/wt/heavy.lock`` on a shared host (the cost rows).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

from bench.data import WORK, qrels_arm, workspace_for
from bench.timer import run_timed, stopwatch

KINDS = ("relevant", "random", "hard", "typo")


def auc(pos, neg) -> float:
    """P(a positive's score > a negative's), ties half."""
    pos, neg = np.sort(np.asarray(pos, float)), np.asarray(neg, float)
    if not pos.size or not neg.size:
        return float("nan")
    lo, hi = np.searchsorted(pos, neg, "left"), np.searchsorted(pos, neg, "right")
    return float(((pos.size - hi) + 0.5 * (hi - lo)).sum() / (pos.size * neg.size))


def fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1e-3, monotone: bool = False) -> np.ndarray:
    """Weighted, lightly ridged logistic regression by Newton's method. ``monotone``: every weight but the
    first (the intercept) kept >= 0 -- more evidence never lowers the support -- by dropping the most negative
    feature and fitting again until none is negative (an active set)."""
    keep = np.arange(x.shape[1])
    while True:
        b = np.zeros(keep.size)
        for _ in range(100):
            p = 1.0 / (1.0 + np.exp(-(x[:, keep] @ b)))
            h = x[:, keep].T @ (x[:, keep] * (w * p * (1 - p))[:, None]) + l2 * np.eye(b.size)
            step = np.linalg.solve(h, x[:, keep].T @ (w * (y - p)) - l2 * b)
            b += step
            if np.abs(step).max() < 1e-10:
                break
        if not monotone or (b[1:] >= 0).all():
            out = np.zeros(x.shape[1])
            out[keep] = b
            return out
        keep = np.delete(keep, 1 + int(np.argmin(b[1:])))


def best_threshold(pos, neg) -> float:
    """The threshold maximising balanced accuracy (pos >= t, neg < t); the middle of the best gap."""
    vals = np.unique(np.r_[pos, neg])
    cands = np.r_[vals[0] - 1e-9, (vals[1:] + vals[:-1]) / 2, vals[-1] + 1e-9]
    pos, neg = np.sort(pos), np.sort(neg)
    tpr = 1 - np.searchsorted(pos, cands, "left") / pos.size
    tnr = np.searchsorted(neg, cands, "left") / neg.size
    bal = tpr + tnr
    best = np.flatnonzero(bal >= bal.max() - 1e-12)
    return float(cands[best[len(best) // 2]])


def _typo(key: str, have: set[str], rng: random.Random) -> str:
    for _ in range(100):
        i = rng.randrange(len(key))
        k = key[:i] + key[i + 1:]
        if k and k not in have:
            return k
    return key + "x"


def _tex(claim: str) -> str:
    """A claim as LaTeX prose (``%`` and ``$`` escaped)."""
    return claim.replace("%", "\\%").replace("$", "\\$")


def build(split: str, seed: int, bm25) -> dict:
    """The split's claims and their four citations, and the drafts (LaTeX, Markdown, the relevant ones)."""
    arm = qrels_arm("scifact", qrels_file="qrels_train.tsv" if split == "train" else "qrels.tsv")
    keys = bm25.index.citekeys.to_list()
    have = set(keys)
    qids = [q for q in sorted(arm.queries, key=int) if any(k in have for k in arm.qrels[q])]
    claims = [" ".join(arm.queries[q].split()).rstrip(".") for q in qids]
    ranked = bm25.rank_many(claims, 20).keys()
    rng = random.Random(seed)
    rows = []
    for q, claim, top in zip(qids, claims, ranked):
        rel = set(arm.qrels[q])
        pick = next(k for k in sorted(rel) if k in have)
        rnd = rng.choice(keys)
        while rnd in rel:
            rnd = rng.choice(keys)
        hard = next((k for k in top if k not in rel), None)
        rows.append({"qid": q, "claim": claim, "rel": rel, "relevant": pick, "random": rnd, "hard": hard,
                     "typo": _typo(pick, have, rng)})
    tex, md, lines = [], [], {}
    for r in rows:
        for kind in KINDS:
            if r[kind] is None:
                continue
            lines[(r["qid"], kind)] = 2 * len(tex) + 1
            tex.append(f"{_tex(r['claim'])} \\cite{{{r[kind]}}}.")
            md.append(f"{r['claim']} [@{r[kind]}].")
        lines[(r["qid"], "uncited")] = 2 * len(tex) + 1
        tex.append(f"{_tex(r['claim'])}.")
        md.append(f"{r['claim']}.")
    if split == "test":  # sentences the library cannot support, which check must not report as uncited
        for i, s in enumerate(out_of_domain(split)):
            lines[("ood", i)] = 2 * len(tex) + 1
            tex.append(_tex(s))
            md.append(s)
    relevant_only = "\n\n".join(f"{_tex(r['claim'])} \\cite{{{r['relevant']}}}." for r in rows) + "\n"
    return {"rows": rows, "tex": "\n\n".join(tex) + "\n", "md": "\n\n".join(md) + "\n", "lines": lines,
            "relevant_tex": relevant_only}


def choose_model(engines, data: dict):
    """Weights and thresholds from the training claims (``service/check.py``'s rules): the weights by a
    logistic regression, monotone, of every (claim, source) pair ``check`` scores for a claim -- its
    candidates and its relevant, random and hard citations -- relevant or not, the two classes weighted
    alike; then the thresholds on the citations' support."""
    from chitragupta.service.check import Model, score_claims

    rows = data["rows"]
    find = dict(zip(engines.bm25.index.citekeys.to_list(), range(engines.bm25.index.n_docs)))
    cited = [[find[k] for k in [r["relevant"], r["random"], r["hard"], *sorted(r["rel"])] if k in find] for r in rows]
    sc = score_claims(engines, [r["claim"] for r in rows], cited)
    keys = engines.bm25.index.citekeys.strings_at(sc.d).tolist()
    y = np.asarray([k in rows[q]["rel"] for q, k in zip(sc.q.tolist(), keys)], float)
    b = fit_logistic(sc.x, y, np.where(y == 1, 0.5 / y.sum(), 0.5 / (1 - y).sum()) * y.size, monotone=True)
    s = 1.0 / (1.0 + np.exp(-(sc.x @ b)))
    at = {(q, k): v for q, k, v in zip(sc.q.tolist(), keys, s.tolist())}
    kind = {k: np.asarray([at[(c, r[k])] for c, r in enumerate(rows) if r[k] is not None]) for k in KINDS[:3]}
    weak = best_threshold(kind["relevant"], kind["random"])
    supported = best_threshold(kind["relevant"], kind["hard"])
    inside = best_support(engines, [r["claim"] for r in rows], b)
    outside = best_support(engines, out_of_domain("train"), b)
    return Model(tuple(round(float(v), 3) for v in b), round(weak, 3), round(max(supported, weak), 3),
                 round(best_threshold(inside, outside), 3))


def best_support(engines, sentences: list[str], weights) -> np.ndarray:
    """Each sentence's best support over the library under ``weights``."""
    from chitragupta.service.check import score_claims

    sc = score_claims(engines, sentences, [[] for _ in sentences])
    best = np.zeros(len(sentences))
    np.maximum.at(best, sc.q, 1.0 / (1.0 + np.exp(-(sc.x @ np.asarray(weights)))))
    return best


def out_of_domain(split: str) -> list[str]:
    """Sentences the SciFact library cannot support: Cranfield's queries (aeronautics), odd ids for
    training, even ids for test."""
    from bench.data import data_dir, read_jsonl

    odd = split == "train"
    return [" ".join(q["text"].split()).rstrip(" .") + "." for q in read_jsonl(data_dir() / "cranfield" / "queries.jsonl")
            if int(q["_id"]) % 2 == odd]


def measure(report, data: dict) -> dict:
    """The figures of one test report (module docstring)."""
    by_line = {f.line: f for f in report.citations}
    unc = {u.line: u for u in report.uncited}
    got = {kind: [] for kind in KINDS}
    missed_lines, alt_hits = 0, {"random": [], "hard": []}
    uncited_hit, uncited_reported = [], []
    for r in data["rows"]:
        for kind in KINDS:
            line = data["lines"].get((r["qid"], kind))
            if line is None:
                continue
            f = by_line.get(line)
            if f is None or f.key != r[kind]:
                missed_lines += 1
                continue
            got[kind].append(f)
            if kind in alt_hits:
                alt_hits[kind].append(any(k in r["rel"] for k, _s, _e in f.alternatives[:3]))
        u = unc.get(data["lines"][(r["qid"], "uncited")])
        uncited_reported.append(u is not None)
        uncited_hit.append(u is not None and any(k in r["rel"] for k, _s, _e in u.candidates[:3]))
    sup = {k: np.asarray([f.support for f in got[k]], float) for k in ("relevant", "random", "hard")}

    def share(kind, statuses):
        fs = got[kind]
        return sum(f.status in statuses for f in fs) / max(1, len(fs))

    expect = {"relevant": ("supported",), "random": ("unsupported",), "hard": ("weak", "unsupported"),
              "typo": ("unknown",)}
    right = sum(f.status in expect[k] for k in KINDS for f in got[k])
    rel_of = {r["typo"]: r["relevant"] for r in data["rows"]}
    return {
        "citations": len(report.citations), "wrong_line": missed_lines,
        "typo_caught": sum(f.status == "unknown" and rel_of[f.key] in f.did_you_mean for f in got["typo"])
        / max(1, len(got["typo"])),
        "auc_random": auc(sup["relevant"], sup["random"]), "auc_hard": auc(sup["relevant"], sup["hard"]),
        "relevant_supported": share("relevant", ("supported",)),
        "relevant_supported_or_weak": share("relevant", ("supported", "weak")),
        "random_unsupported": share("random", ("unsupported",)), "hard_supported": share("hard", ("supported",)),
        "status_accuracy": right / max(1, sum(len(v) for v in got.values())),
        "alt_random": float(np.mean(alt_hits["random"])), "alt_hard": float(np.mean(alt_hits["hard"])),
        "uncited_reported": float(np.mean(uncited_reported)), "uncited_top3": float(np.mean(uncited_hit)),
        "ood_reported": sum(line in unc for (q, kind), line in data["lines"].items() if q == "ood")
        / max(1, sum(q == "ood" for q, _k in data["lines"])),
    }


def _same(a, b) -> bool:
    return [(f.key, f.line, f.status, round(f.support or 0, 9)) for f in a.citations] == \
           [(f.key, f.line, f.status, round(f.support or 0, 9)) for f in b.citations]


def cost(ws: Path, draft: str, engine: str, name: str) -> dict:
    """One cold ``chitragupta check --json`` of ``draft`` (written to bench/out/check/), a whole process."""
    path = WORK / "check" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(draft, encoding="utf-8")
    code = ("import sys; from chitragupta.cli.main import main; "
            f"rc = main(['check', '-w', {str(ws)!r}, {str(path)!r}, '--engine', {engine!r}, '--json']); "
            "sys.exit(0 if rc in (0, 3) else rc)")
    got = run_timed([sys.executable, "-c", code])
    out = json.loads(got["stdout"])
    return {"citations": len(out["citations"]), "cpu_s": got["cpu_s"], "wall_s": got["wall_s"], "engine": out["engine"]}


def seven_pdfs(data=None) -> dict:
    """The seven real PDFs (``bench.refs_graph``'s library) checked by a draft citing, by an ``authorYEARword``
    key, each hand-labelled work two or more of them cite that the library lacks (``refs_graph.MISSING``, those
    labelled with a family name and a year), and each of the seven by its own key with its title as the claim:
    how many missing works are named with their citing sources, and the seven's statuses."""
    import tempfile

    from bench.data import data_dir
    from bench.refs_graph import LIBRARY, MISSING
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.service.check import check

    pdfs = data_dir(data) / "pdfs" / "papermage"
    bib = "\n".join(f"@article{{{key},\n  title = {{{title}}},\n  year = {{{year}}},\n  file = {{{pdfs / (stem + '.pdf')}}}\n}}"
                     for stem, (key, title, year, _doi) in LIBRARY.items())
    works = []
    for label, phrase, citing in MISSING:
        m = re.search(r"\((\w+) (\d{4})", label)
        if m:
            works.append((f"{m.group(1).lower()}{m.group(2)}{re.match(r'[a-z0-9]+', phrase).group()}", citing, label))
    lines = [f"{label.split(' (')[0]} is a work this draft builds on \\cite{{{key}}}." for key, _c, label in works]
    lines += [f"{title} \\cite{{{key}}}." for key, title, _y, _d in LIBRARY.values()]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "papers").mkdir()
        (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
        ws = Workspace.open(root)
        sync(ws)
        build_references(ws)
        rep = check(ws, "\n\n".join(lines) + "\n", fmt="latex", engine="bm25")
    named = 0
    for key, citing, _label in works:
        note = next((n for n in rep.notes if f": {key} is cited by" in n), "")
        named += bool(note) and set(re.search(r"sources \(([^)]*)\)", note).group(1).split(", ")) <= citing
    own = [f.status for f in rep.citations if f.key in {v[0] for v in LIBRARY.values()}]
    return {"missing_works": len(works), "named_with_citing": named,
            "unknown": sum(f.status == "unknown" for f in rep.citations[:len(works)]),
            "own_supported": own.count("supported"), "own": len(own)}


def main(argv=None) -> int:
    from chitragupta.service.check import MODELS, check, open_engines
    from chitragupta.service.warm import WarmEngines

    ap = argparse.ArgumentParser(prog="python -m bench check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="bm25,hybrid")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-cost", action="store_true", help="skip the cold-process cost rows")
    args = ap.parse_args(argv)
    ws = WORK / "ws" / "scifact"
    if not (ws / "content" / "index").is_dir():  # built once (an enrich running on it holds its lock)
        ws = workspace_for(qrels_arm("scifact").corpus, "scifact")
    rows_out = []
    for engine in [e for e in args.engines.split(",") if e]:
        engines = open_engines(ws, engine)
        if engines.name != engine:
            print(f"{engine}: skipped ({'; '.join(engines.notes) or 'not available'})", flush=True)
            continue
        train, test = build("train", args.seed, engines.bm25), build("test", args.seed + 1, engines.bm25)
        chosen = choose_model(engines, train)
        print(f"{engine}: chosen on {len(train['rows'])} training claims: {chosen}; shipped: {MODELS[engine]}",
              flush=True)
        for label, model in (("chosen", chosen), ("shipped", MODELS[engine])):
            models = dict(MODELS, **{engine: model})
            rep = check(ws, test["tex"], fmt="latex", engine=engine, models=models)
            m = measure(rep, test)
            if label == "chosen":
                m["markdown_same"] = _same(rep, check(ws, test["md"], fmt="markdown", engine=engine, models=models))
            rows_out.append((engine, label, len(test["rows"]), m))
    if rows_out:
        cols = list(rows_out[0][3])
        print("\n| engine | model | test claims | " + " | ".join(cols) + " |")
        print("|---|---|---|" + "---|" * len(cols))
        for engine, label, n, m in rows_out:
            cells = [f"{v:.4f}" if isinstance(v, float) else str(v) for v in m.values()]
            print(f"| {engine} | {label} | {n} | " + " | ".join(cells) + " |")
    print(f"\nseven PDFs: {seven_pdfs()}", flush=True)
    if not args.no_cost:
        bm = open_engines(ws, "bm25").bm25
        test = build("test", args.seed + 1, bm)
        print("\n| engine | draft | citations | CPU s | wall s |\n|---|---|---|---|---|")
        for engine in [e for e in args.engines.split(",") if e]:
            for name, draft in (("relevant", test["relevant_tex"]), ("whole", test["tex"])):
                c = cost(ws, draft, engine, f"test-{name}.tex")
                if c["engine"] != engine:
                    continue
                print(f"| {engine} | test {name}, cold process | {c['citations']} | {c['cpu_s']:.2f} | {c['wall_s']:.2f} |",
                      flush=True)
                warm = WarmEngines(ws)
                warm.check(draft, "latex", engine)  # as the MCP server: engines open, kernels loaded, texts read
                with stopwatch() as took:
                    warm.check(draft, "latex", engine)
                print(f"| {engine} | test {name}, warm (WarmEngines.check) | {c['citations']} | {took.cpu:.2f} | "
                      f"{took.wall:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
