"""Runs of the engine on an arm: one configuration, a grid through ``chitragupta.kernels.sweep``, or a scratch
copy of a workspace with other settings (stemmer, passage floor) so the measured workspace is never
rewritten."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.arms import Arm
from bench.data import WORK

__all__ = ["run", "sweep_runs", "scratch"]


def run(arm: Arm, k: int = 100, *, unit: str = "document", root: Path | None = None, retriever=None):
    """qid -> ranked citekeys (passage hits collapsed to citekeys) with the workspace's own config."""
    from chitragupta.engine.evaluation.measure import collapse_by_source
    from chitragupta.engine.search.bm25 import Retriever

    r = retriever or Retriever.open(root or arm.workspace())
    qids = list(arm.queries)
    ranked = r.rank_many([arm.queries[q] for q in qids], k, unit=unit)
    out = dict(zip(qids, ranked.keys()))
    return collapse_by_source(out) if unit == "passage" else out


def sweep_runs(arm: Arm, grid, k: int = 100, *, root: Path | None = None) -> list[dict[str, list[str]]]:
    """One run per grid point (document unit), every point from one pass over the postings."""
    from chitragupta.engine.search.bm25 import Retriever
    from chitragupta.kernels.sweep import sweep

    r = Retriever.open(root or arm.workspace())
    qids = list(arm.queries)
    texts = [arm.queries[q] for q in qids]
    index = r.checked_index()  # the sweep kernel reads every posting of the batch's terms
    batch = r.plan(texts).batch
    keys = index.citekeys.to_list()
    outs = []
    for top in sweep(index.postings, batch, grid, k):
        outs.append({q: [keys[d] for d in top.ids[i].tolist() if d >= 0] for i, q in enumerate(qids)})
    return outs


def scratch(root: Path, name: str, config: str) -> Path:
    """A copy of ``root``'s corpus (ledger, parsed texts, sidecars; not its index) with ``config``."""
    dst = WORK / "scratch" / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(Path(root) / "content", dst / "content", ignore=shutil.ignore_patterns("index", ".lock", "dossiers"))
    base = (Path(root) / "config.toml").read_text() if (Path(root) / "config.toml").exists() else ""
    (dst / "config.toml").write_text(_merge_toml(base, config))
    return dst


def _merge_toml(base: str, extra: str) -> str:
    """``base`` with ``extra``'s keys set (both tiny, flat [section] key = value files)."""
    import tomllib

    data = tomllib.loads(base) if base else {}
    for sec, table in tomllib.loads(extra).items():
        data.setdefault(sec, {}).update(table)
    lines = []
    for sec, table in data.items():
        lines.append(f"[{sec}]")
        for key, value in table.items():
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)
