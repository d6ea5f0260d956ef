"""Hybrid's default fusion, chosen on training queries: ``python -m bench fusion [--arms scifact,cisi,cranfield]``.

For each arm, in its workspace ``--work``/<arm> (imported and embedded already, e.g. by ``python -m bench
hybrid --work DIR``: nothing is encoded here but the queries), the three lists hybrid search fuses are taken
once per query, ``--depth-max`` sources deep, through the engine's own code (``HybridSearcher._bm25`` and
``._dense``: BM25 documents, and the embedding index collapsed to its best chunk per source): BM25 unstemmed
(the workspace's index), BM25 stemmed (``[hybrid].bm25_stemmer = "english"``: hybrid's own index beside the
plain one, opened by ``chitragupta.enrich.hybrid.open_bm25`` as hybrid search opens it), and dense. They are
cached in ``--work``/fusion-<arm>-{bm25,dense}.npz; every fusion below reuses them.

Queries are split once: scifact's training queries (``qrels_train.tsv``, 809) choose, its test queries
(``qrels.tsv``, 300) report; cisi and cranfield have no training judgments, so a seeded half of their judged
queries (``--seed``) is the dev half that chooses and the other half reports. A grid of fusions is run
with ``chitragupta.enrich.hybrid.fuse`` -- the function hybrid search calls -- over method (rrf with its k,
minmax, zscore), the dense list's weight (BM25's is 1), the depth each list contributes, and BM25
unstemmed or stemmed (``[hybrid].bm25_stemmer`` "same" or "english"), and scored by nDCG@10
(bench.metrics.ndcg, relevant = grade >= 1). The default is the configuration with the best mean dev
nDCG@10 over the arms among those at or above every part it could be compared with on every arm's dev
queries (unstemmed BM25 and dense; for a stemmed one, stemmed BM25 too), a near tie (``TIE``) broken by
every dev query pooled; the best of each BM25 kind is reported beside it. Then every named configuration
is scored on the test queries with the package's evaluation (ir-measures).

``--cost`` measures what hybrid's own stemmed index costs on an arm's workspace: its build seconds and
size beside the plain index's, and hybrid search's ms per query with either BM25 side (alternated).

Prints the tables; ``--json`` writes every grid point's dev and test figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np

__all__ = ["collect", "grid", "main"]

MEASURES = ("nDCG@10", "R@100")
RRF_KS = (1, 5, 10, 20, 40, 60, 100)
DENSE_WEIGHTS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)
DEPTHS = (20, 50, 100, 200)


def splits(name: str, seed: int) -> tuple[dict, dict, dict, str]:
    """(queries, qrels, {qid: "dev" | "test"}, how) for an arm."""
    from bench.arms import get

    if name == "scifact":
        train, test = get("scifact-all"), get("scifact")
        split = {q: ("test" if q in test.qrels else "dev") for q in train.qrels}
        return train.queries, train.qrels, split, "dev = qrels_train.tsv (809 q), test = qrels.tsv (300 q)"
    arm = get(name)
    qids = sorted(arm.qrels)
    random.Random(seed).shuffle(qids)
    dev = set(qids[:len(qids) // 2])
    split = {q: ("dev" if q in dev else "test") for q in arm.qrels}
    return arm.queries, arm.qrels, split, f"seeded half (seed {seed}): {len(dev)} dev q, {len(qids) - len(dev)} test q"


def _save(path: Path, arrays: dict) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _cached(path: Path, qids: list[str], depth: int) -> dict | None:
    if not path.exists():
        return None
    z = np.load(path, allow_pickle=False)
    ok = z["qids"].tolist() == qids and all(z[k].shape[1] >= depth for k in z.files if k.endswith("_keys"))
    return {k: z[k] for k in z.files} if ok else None


def collect_bm25(name: str, root: Path, cache: Path, queries: dict[str, str], depth: int) -> dict:
    """BM25's top ``depth`` documents per query, unstemmed and stemmed (hybrid's BM25 side with
    ``[hybrid].bm25_stemmer`` "none" and "english"), as citekeys ("" pads)."""
    qids = list(queries)
    got = _cached(cache, qids, depth)
    if got is not None:
        return got
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.hybrid import open_bm25

    own = root / "config.toml"
    texts = [queries[q] for q in qids]
    out = {"qids": np.array(qids)}
    for variant, stem in (("stemmed", "english"), ("plain", "none")):
        cfg = load_config(own if own.is_file() else None, overrides={"hybrid": {"bm25_stemmer": stem}})
        t0 = time.perf_counter()
        ranked = open_bm25(Workspace.open(root, cfg)).rank_many(texts, depth)
        keys = ranked.keys()
        out[f"bm25_{variant}_keys"] = np.array([row + [""] * (depth - len(row)) for row in keys])
        out[f"bm25_{variant}_scores"] = np.asarray(ranked.topk.scores, np.float64)
        print(f"{name}: BM25 {variant}, {len(texts)} queries x {depth} in {time.perf_counter() - t0:.1f} s "
              "(index build included)", flush=True)
    _save(cache, out)
    return out


def query_vectors(root: Path, cache: Path, queries: dict[str, str]) -> dict[str, np.ndarray]:
    """Every query encoded by the engine's query encoder for the workspace's model (``load_query_encoder``,
    as ``EmbedSearcher`` loads it) in one call in query order, as ``rank_many`` of the same list encodes
    them (the same batches, so the same vectors), cached in ``cache``: text -> vector. It needs no store,
    so it can run while the embed stage still encodes the corpus."""
    texts = list(queries.values())
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        if z["texts"].tolist() == texts:
            return dict(zip(texts, z["vectors"]))
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.embed import load_query_encoder

    t0 = time.perf_counter()
    enc = load_query_encoder(Workspace.open(root).config.enrich, "cpu")
    vectors = np.asarray(enc.encode_queries(texts), np.float32)
    _save(cache, {"texts": np.array(texts), "vectors": vectors})
    print(f"{root.name}: {len(texts)} queries encoded in {time.perf_counter() - t0:.1f} s", flush=True)
    return dict(zip(texts, vectors))


class _Cached:
    """The searcher's query encoder, answering from ``query_vectors`` for the texts it holds."""

    def __init__(self, enc, vectors: dict[str, np.ndarray]):
        self._enc, self._vectors = enc, vectors

    def encode_queries(self, texts):
        if all(t in self._vectors for t in texts):
            return np.stack([self._vectors[t] for t in texts]) if texts else self._enc.encode_queries(texts)
        return self._enc.encode_queries(texts)

    def __getattr__(self, name):
        return getattr(self._enc, name)


def collect_dense(name: str, root: Path, cache: Path, queries: dict[str, str], depth: int) -> dict:
    """The embedding index's top ``depth`` sources per query (best chunk each: what hybrid search fuses)."""
    qids = list(queries)
    got = _cached(cache, qids, depth)
    if got is not None:
        return got
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.search import EmbedSearcher

    texts = [queries[q] for q in qids]
    t0 = time.perf_counter()
    searcher = EmbedSearcher.open(Workspace.open(root), device="cpu")
    searcher.encoder = _Cached(searcher.encoder, query_vectors(root, cache.with_name(f"fusion-{name}-qvec.npz"),
                                                               queries))
    ranked = searcher.rank_many(texts, depth, max_per_source=1)
    keys = [[k.rsplit("#", 1)[0] for k in row] for row in ranked.keys()]
    out = {"qids": np.array(qids), "dense_keys": np.array([row + [""] * (depth - len(row)) for row in keys]),
           "dense_scores": np.asarray(ranked.topk.scores, np.float64)}
    print(f"{name}: dense, {len(texts)} queries x {depth} in {time.perf_counter() - t0:.1f} s", flush=True)
    _save(cache, out)
    return out


def collect(name: str, work: Path, queries: dict[str, str], depth: int, bm25_root: Path | None = None) -> dict:
    """The three lists per query in one id space (``citekeys``; -1 pads), from the caches
    work/fusion-<name>-bm25.npz and work/fusion-<name>-dense.npz (each built once)."""
    b = collect_bm25(name, bm25_root or work / name, work / f"fusion-{name}-bm25.npz", queries, depth)
    d = collect_dense(name, work / name, work / f"fusion-{name}-dense.npz", queries, depth)
    keys: dict[str, int] = {"": -1}
    out = {"qids": b["qids"]}
    for src, dst in (("bm25_plain", b), ("bm25_stemmed", b), ("dense", d)):
        names = dst[f"{src}_keys"][:, :depth]
        out[f"{src}_ids"] = np.array([[keys.setdefault(str(k), len(keys) - 1) for k in row] for row in names],
                                     dtype=np.int64)
        out[f"{src}_scores"] = dst[f"{src}_scores"][:, :depth]
    out["citekeys"] = np.array(sorted((k for k in keys if k), key=keys.get))
    return out


def ranked_keys(ids: np.ndarray, citekeys: np.ndarray, qids) -> dict[str, list[str]]:
    return {q: [str(citekeys[i]) for i in row if i >= 0] for q, row in zip(qids, ids)}


def per_query_ndcg(run: dict[str, list[str]], qrels, qids) -> dict[str, float]:
    from bench.metrics import ndcg

    return {q: ndcg(run.get(q, []), qrels[q], 10) for q in qids}


def fused_ids(lists: dict, variant: str, method: str, rrf_k: float, wd: float, depth: int, k: int = 100):
    from chitragupta.enrich.hybrid import fuse

    d = depth  # each list's top `depth`; the fused list is cut to min(k, depth) (nDCG@10 reads its top 10)
    f = fuse(lists[f"bm25_{variant}_ids"][:, :d], lists[f"bm25_{variant}_scores"][:, :d], lists["dense_ids"][:, :d],
             lists["dense_scores"][:, :d], min(k, d), method=method, rrf_k=rrf_k, weight_bm25=1.0, weight_dense=wd)
    return f.ids


def configs():
    for variant in ("plain", "stemmed"):
        for depth in DEPTHS:
            for wd in DENSE_WEIGHTS:
                for rk in RRF_KS:
                    yield {"bm25": variant, "method": "rrf", "rrf_k": float(rk), "weight_dense": wd, "depth": depth}
                for method in ("minmax", "zscore"):
                    yield {"bm25": variant, "method": method, "rrf_k": 60.0, "weight_dense": wd, "depth": depth}


def label(c: dict) -> str:
    m = f"rrf k={c['rrf_k']:g}" if c["method"] == "rrf" else c["method"]
    return f"{m}, w_dense {c['weight_dense']:g}, depth {c['depth']}, BM25 {c['bm25']}"


def grid_arm(name: str, a: dict, cache: Path | None = None) -> list[dict]:
    """Every configuration's mean dev and test nDCG@10 on one arm (bench.metrics.ndcg over each fused
    list's top 10, which a cut at 10 or at 100 orders alike), cached in ``cache`` (JSON, keyed by a digest
    of the arm's lists and split) so that an arm is scored once."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for key in sorted(a["lists"]):
        h.update(key.encode() + np.ascontiguousarray(a["lists"][key]).tobytes())
    h.update(json.dumps(sorted(a["split"].items())).encode())
    key = h.hexdigest()
    if cache is not None and cache.exists():
        got = json.loads(cache.read_text())
        if got.get("key") == key:
            return got["rows"]
    rows = []
    dev = [q for q in a["qids"] if a["split"][q] == "dev"]
    test = [q for q in a["qids"] if a["split"][q] == "test"]
    for c in configs():
        ids = fused_ids(a["lists"], c["bm25"], c["method"], c["rrf_k"], c["weight_dense"], c["depth"], 10)
        per = per_query_ndcg(ranked_keys(ids, a["lists"]["citekeys"], a["qids"]), a["qrels"], a["qids"])
        rows.append({f"{name}.dev": float(np.mean([per[q] for q in dev])),
                     f"{name}.test": float(np.mean([per[q] for q in test]))})
    if cache is not None:
        tmp = cache.with_name(cache.name + ".tmp")
        tmp.write_text(json.dumps({"key": key, "rows": rows}))
        os.replace(tmp, cache)
    return rows


def grid(arms: dict, work: Path | None = None) -> list[dict]:
    """Every configuration's mean dev and test nDCG@10 per arm (``grid_arm``, cached per arm in ``work``)."""
    per_arm = {name: grid_arm(name, a, work / f"fusion-{name}-grid.json" if work else None)
               for name, a in arms.items()}
    rows = []
    for i, c in enumerate(configs()):
        row = dict(c)
        for name in arms:
            row.update(per_arm[name][i])
        rows.append(row)
    return rows


def parts(arms: dict) -> dict:
    out = {}
    for name, a in arms.items():
        L = a["lists"]
        for part_name, key in (("BM25 plain", "bm25_plain_ids"), ("BM25 stemmed", "bm25_stemmed_ids"),
                               ("dense", "dense_ids")):
            per = per_query_ndcg(ranked_keys(L[key][:, :100], L["citekeys"], a["qids"]), a["qrels"], a["qids"])
            for part in ("dev", "test"):
                qs = [q for q in a["qids"] if a["split"][q] == part]
                out[name, part_name, part] = float(np.mean([per[q] for q in qs]))
    return out


TIE = 0.001  # mean dev nDCG@10 this close to the best is a tie, broken by the dev queries pooled


def parts_of(row: dict) -> tuple[str, ...]:
    """The parts a configuration is held to: unstemmed BM25 (what BM25 search gives) and dense, and the
    stemmed BM25 it fuses when it does."""
    return ("BM25 plain", "dense") + (("BM25 stemmed",) if row["bm25"] == "stemmed" else ())


def choose(rows: list[dict], base: dict, names: list[str], variant: str | None,
           dev_counts: dict[str, int] | None = None) -> tuple[dict, bool]:
    """Among rows at or above every part they are held to (``parts_of``) on every arm's dev queries:
    the best mean over arms of dev nDCG@10; rows within ``TIE`` of it are a tie, broken by the mean over
    every dev query pooled (``dev_counts``: dev queries per arm), so that the arm with the most training
    judgments decides between configurations the arms' means cannot tell apart. When no row is at or above
    both parts everywhere: the one with the largest worst-arm margin. (row, met)."""
    pool = [r for r in rows if variant is None or r["bm25"] == variant]

    def margin(r):
        return min(r[f"{n}.dev"] - max(base[n, part, "dev"] for part in parts_of(r)) for n in names)

    def macro(r):
        return float(np.mean([r[f"{n}.dev"] for n in names]))

    def micro(r):
        w = dev_counts or {n: 1 for n in names}
        return sum(w[n] * r[f"{n}.dev"] for n in names) / sum(w[n] for n in names)

    ok = [r for r in pool if margin(r) >= 0]
    if ok:
        top = max(macro(r) for r in ok)
        return max((r for r in ok if macro(r) >= top - TIE), key=lambda r: (micro(r), macro(r))), True
    return max(pool, key=margin), False


def test_figures(arms: dict, c: dict, which: str = "test") -> dict:
    """A configuration on each arm's test queries by the package's evaluation, as hybrid search answers
    them: nDCG@10 of a k = 10 search (each list's top ``depth``), R@100 of a k = 100 search (each list's top
    ``max(depth, 100)``)."""
    from bench.metrics import evaluate

    out = {}
    for name, a in arms.items():
        qs = [q for q in a["qids"] if (which == "all" and name != "scifact") or a["split"][q] == "test"]
        qrels = {q: a["qrels"][q] for q in qs}
        figures = {}
        for measure, k in (("nDCG@10", 10), ("R@100", 100)):
            if c.get("part"):
                ids = a["lists"][c["part"]][:, :k]
            else:
                ids = fused_ids(a["lists"], c["bm25"], c["method"], c["rrf_k"], c["weight_dense"],
                                max(c["depth"], k), k)
            run = ranked_keys(ids, a["lists"]["citekeys"], a["qids"])
            figures[measure] = evaluate({q: run[q] for q in qs}, qrels, [measure])[measure]
        out[name] = figures
    return out


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def cost(root: Path, queries: list[str], repeats: int = 3) -> list[str]:
    """What hybrid's own stemmed BM25 index costs on ``root``: each document index built from scratch
    (seconds, bytes of its live generation), and ms per query of hybrid search (k = 10, one batch of the
    first 20 queries) and of its BM25 side alone (every query), with ``bm25_stemmer`` "same" (the plain
    index) and "english", alternated ``repeats`` times, best of each."""
    from chitragupta.engine.library.config import load_config
    from chitragupta.engine.index.manage import current_generation, index_folder, refresh
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.hybrid import HybridSearcher, bm25_workspace, open_bm25

    own_cfg = root / "config.toml"
    wss = {stem: Workspace.open(root, load_config(own_cfg if own_cfg.is_file() else None,
                                                  overrides={"hybrid": {"bm25_stemmer": stem}}))
           for stem in ("same", "english")}
    out = [f"{root.name}: {len(queries)} queries, load {os.getloadavg()[0]:.2f}"]
    for stem, ws in wss.items():
        side = bm25_workspace(ws)
        t0 = time.perf_counter()
        refresh(side, force=True)
        secs = time.perf_counter() - t0
        gen = index_folder(side, "document") / (current_generation(side) or "")
        out.append(f"  document index, bm25_stemmer {stem} ({side.config.retrieval.stemmer}): built in {secs:.2f} s, "
                   f"{_folder_bytes(gen) / 1e6:.1f} MB ({gen.relative_to(root)})")
    from chitragupta.enrich.search import store_signature

    sides = {stem: open_bm25(ws) for stem, ws in wss.items()}  # the BM25 that hybrid search fuses
    searchers = ({stem: HybridSearcher.open(ws, device="cpu") for stem, ws in wss.items()}
                 if store_signature(wss["same"]) is not None else {})  # no store: the BM25 sides alone
    for stem in wss:
        sides[stem].rank_many(queries[:5], 10)  # warm: numba
        if searchers:
            searchers[stem].rank_many(queries[:5], 10)  # and the model
    best = {(stem, what): float("inf") for stem in wss for what in ("hybrid", "bm25")}
    few = queries[:20]  # hybrid's time is mostly the query encoder's, the same either way
    for _ in range(repeats):
        for stem in wss:
            timed = [("bm25", sides[stem].rank_many, queries)]
            if searchers:
                timed.append(("hybrid", searchers[stem].rank_many, few))
            for what, rank, qs in timed:
                t0 = time.perf_counter()
                rank(qs, 10)
                best[stem, what] = min(best[stem, what], (time.perf_counter() - t0) * 1000 / len(qs))
    for stem in wss:
        out.append(f"  bm25_stemmer {stem}: BM25 side {best[stem, 'bm25']:.3f} ms/query ({len(queries)} queries)"
                   + (f", hybrid search {best[stem, 'hybrid']:.1f} ms/query ({len(few)} queries)" if searchers
                      else " (no embedding store: hybrid search not timed)"))
    out.append(f"  load after: {os.getloadavg()[0]:.2f}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench fusion", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="scifact,cisi,cranfield")
    ap.add_argument("--work", type=Path, default=Path("/tmp/chitragupta-hybrid"))
    ap.add_argument("--depth-max", type=int, default=max(DEPTHS))
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--json", type=Path, help="write every grid point's figures here")
    ap.add_argument("--bm25-work", type=Path, help="take BM25's lists from <this>/<arm> (a copy of the workspace, "
                                                   "e.g. while the embed stage holds the real one's lock)")
    ap.add_argument("--cost", action="store_true", help="instead: what hybrid's own stemmed index costs on each "
                                                        "arm's workspace (build s, MB, ms per query)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.cost:
        for name in names:
            queries, _qrels, split, _how = splits(name, args.seed)
            print("\n".join(cost(args.work / name, [queries[q] for q in split if split[q] == "test"])), flush=True)
        return 0
    arms = {}
    for name in names:
        queries, qrels, split, how = splits(name, args.seed)
        lists = collect(name, args.work, queries, args.depth_max,
                        args.bm25_work / name if args.bm25_work else None)
        arms[name] = {"lists": lists, "qids": lists["qids"].tolist(), "qrels": qrels, "split": split, "how": how}
        print(f"{name}: {how}", flush=True)
    t0 = time.perf_counter()
    rows = grid(arms, args.work)
    base = parts(arms)
    print(f"grid: {len(rows)} configurations x {len(names)} arms in {time.perf_counter() - t0:.0f} s", flush=True)
    dev_counts = {n: sum(1 for q in a["qids"] if a["split"][q] == "dev") for n, a in arms.items()}
    chosen, met = choose(rows, base, names, None, dev_counts)
    plain, met_p = choose(rows, base, names, "plain", dev_counts)
    stemmed, met_s = choose(rows, base, names, "stemmed", dev_counts)
    first = max(rows, key=lambda r: np.mean([r[f"{n}.dev"] for n in names]))
    shipped = next(r for r in rows if r["bm25"] == "plain" and r["method"] == "zscore"
                   and r["weight_dense"] == 2.0 and r["depth"] == 200)
    print(f"CHOSEN: {label(chosen)}; at or above its parts on every dev split: {met}")
    print(f"  as [hybrid]: method = \"{chosen['method']}\", rrf_k = {chosen['rrf_k']:g}, weight_bm25 = 1.0, "
          f"weight_dense = {chosen['weight_dense']:g}, depth = {chosen['depth']}, "
          f"bm25_stemmer = \"{'english' if chosen['bm25'] == 'stemmed' else 'same'}\"")
    print(f"best with unstemmed BM25: {label(plain)}; at or above its parts on every dev split: {met_p}")
    print(f"best with stemmed BM25: {label(stemmed)}; at or above its parts on every dev split: {met_s}")

    lines = ["| configuration | " + " | ".join(f"{n} dev" for n in names) + " |", "|---|" + "---|" * len(names)]
    for nm, part in (("BM25 plain", "BM25 plain"), ("BM25 stemmed", "BM25 stemmed"), ("dense", "dense")):
        lines.append(f"| {nm} | " + " | ".join(f"{base[n, part, 'dev']:.4f}" for n in names) + " |")
    best_by = {}
    for r in rows:  # the best of each kind on dev (the rejected options)
        kind = (r["method"], r["bm25"])
        if kind not in best_by or np.mean([r[f"{n}.dev"] for n in names]) > np.mean([best_by[kind][f"{n}.dev"] for n in names]):
            best_by[kind] = r
    named = [("shipped before (zscore, w 1/2, depth 200, plain)", shipped), ("CHOSEN", chosen),
             ("best mean dev, no tie-break", first), ("best with unstemmed BM25", plain),
             ("best with stemmed BM25", stemmed)] + [(f"best {m} ({v})", r) for (m, v), r in sorted(best_by.items())]
    for nm, r in named:
        lines.append(f"| {nm}: {label(r)} | " + " | ".join(f"{r[f'{n}.dev']:.4f}" for n in names) + " |")
    print("\nDev nDCG@10 (bench.metrics.ndcg):\n" + "\n".join(lines))

    tl = ["| run | " + " | ".join(f"{n} test nDCG@10 / R@100" for n in names) + " |", "|---|" + "---|" * len(names)]
    for nm, part in (("BM25 plain", "bm25_plain_ids"), ("BM25 stemmed", "bm25_stemmed_ids"), ("dense", "dense_ids")):
        f = test_figures(arms, {"part": part})
        tl.append(f"| {nm} | " + " | ".join(f"{f[n]['nDCG@10']:.4f} / {f[n]['R@100']:.4f}" for n in names) + " |")
    for nm, r in named:
        f = test_figures(arms, r)
        tl.append(f"| {nm}: {label(r)} | " + " | ".join(f"{f[n]['nDCG@10']:.4f} / {f[n]['R@100']:.4f}" for n in names)
                  + " |")
    print("\nTest queries (the package's evaluation):\n" + "\n".join(tl))
    # the query sets bench/RESULTS.md's tables use (scifact's 300 test queries; every judged cisi and
    # cranfield query, dev half included): the before/after of the chunk rule, and the chosen default there
    fl = ["| run | " + " | ".join(f"{n} ({sum(1 for q in arms[n]['qids'] if n != 'scifact' or arms[n]['split'][q] == 'test')} q)"
                                   for n in names) + " |", "|---|" + "---|" * len(names)]
    for nm, c in (("BM25 plain", {"part": "bm25_plain_ids"}), ("BM25 stemmed", {"part": "bm25_stemmed_ids"}),
                  ("dense", {"part": "dense_ids"}), ("hybrid, shipped before", shipped), ("hybrid, CHOSEN", chosen)):
        f = test_figures(arms, c, "all")
        fl.append(f"| {nm} | " + " | ".join(f"{f[n]['nDCG@10']:.4f} / {f[n]['R@100']:.4f}" for n in names) + " |")
    print("\nEvery judged query (scifact: its test set), nDCG@10 / R@100:\n" + "\n".join(fl))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "parts": {"|".join(k): v for k, v in base.items()},
                                         "chosen": chosen, "plain": plain, "stemmed": stemmed,
                                         "splits": {n: a["how"] for n, a in arms.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
