"""Evaluation collections in ``../shared/data/<name>/`` (BEIR layout) and cached workspaces built from them."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("CHITRAGUPTA_DATA", REPO.parent / "shared" / "data"))
WORK = Path(os.environ.get("CHITRAGUPTA_BENCH_WORK", REPO / "bench" / "out"))

# name -> relevance threshold: a judgment counts as relevant (gain 1) when its grade >= threshold.
# Cranfield's grades are kept raw in the data and their direction is disputed (see its SOURCE.md),
# so every arm is scored binary unless ``graded=True`` is asked for.
QRELS_ARMS = {"scifact": 1, "cranfield": 1, "cisi": 1}
KEYWORD_ARMS = ("www", "semeval2010", "inspec")


@dataclass
class Arm:
    """Queries (id -> text) and judgments (id -> {doc: grade}) over one collection."""

    name: str
    corpus: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def data_dir(data: Path | None = None) -> Path:
    d = Path(data) if data else DEFAULT_DATA
    if not d.is_dir():
        raise SystemExit(f"evaluation data not found at {d} (set CHITRAGUPTA_DATA or pass --data)")
    return d


def first_lines(corpus: Path, n: int, dest: Path) -> Path:
    """``dest``: the first ``n`` lines of ``corpus`` (a JSONL subset; the folder made)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(corpus, encoding="utf-8") as src, open(dest, "w", encoding="utf-8") as out:
        for i, line in enumerate(src):
            if i >= n:
                break
            out.write(line)
    return dest


def read_jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def qrels_arm(name: str, data: Path | None = None, threshold: int | None = None, qrels_file: str = "qrels.tsv",
              graded: bool = False) -> Arm:
    folder = data_dir(data) / name
    thr = QRELS_ARMS.get(name, 1) if threshold is None else threshold
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / qrels_file, encoding="utf-8") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows)
        for qid, doc, score in rows:
            if int(score) >= thr:
                qrels.setdefault(qid, {})[doc] = int(score) if graded else 1
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(folder / "queries.jsonl") if str(q["_id"]) in qrels}
    return Arm(name=name, corpus=folder / "corpus.jsonl", queries=queries, qrels=qrels)


def keyword_arm(name: str, data: Path | None = None) -> Arm:
    """Keyword self-retrieval: a document's keywords joined as the query; that document the one answer."""
    folder = data_dir(data) / name
    queries, qrels = {}, {}
    for d in read_jsonl(folder / "corpus.jsonl"):
        kws = d.get("keywords") or []
        if kws:
            qid = str(d["_id"])
            queries[qid] = " ".join(kws)
            qrels[qid] = {qid: 1}
    return Arm(name=name, corpus=folder / "corpus.jsonl", queries=queries, qrels=qrels)


def workspace_for(corpus: Path, name: str | None = None) -> Path:
    """A workspace holding ``corpus`` (imported once, re-imported incrementally), indexed."""
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.workspace import Workspace

    root = WORK / "ws" / (name or corpus.parent.name)
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.toml"
    if "query_syntax" not in (config.read_text(encoding="utf-8") if config.exists() else ""):
        # the collections' queries are natural language ("-dash", quoted titles): read them as plain words,
        # as the published BM25 figures do
        config.write_text("[retrieval]\nquery_syntax = false\n", encoding="utf-8")
    ws = Workspace.open(root)
    with ws.lock("bench import"):
        import_jsonl(ws, corpus)
    refresh(ws)
    return root
