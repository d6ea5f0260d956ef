"""Keyword self-retrieval arms: a document's author keywords joined as the query, that document the
one relevant answer. www is the arm with room to move; semeval2010 and inspec are saturated (sanity
checks); semeval2010-md is the structural arm (docling sidecars: the cut, passages, abstracts)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench.arms import Arm
from bench.data import keyword_arm, workspace_for


def jsonl(folder: str, data: Path) -> Arm:
    a = keyword_arm(folder, data)
    return Arm(name=folder, queries=a.queries, qrels=a.qrels, build=lambda: workspace_for(a.corpus, folder),
               note=f"{folder}: {len(a.queries)} keyword self-retrieval queries")


def semeval_md(data: Path) -> Arm:
    from bench.units import keyword_queries, sync_semeval_md

    root = sync_semeval_md(data)
    queries = keyword_queries(root)
    return Arm(name="semeval2010-md", queries=queries, qrels={q: {q: 1} for q in queries}, build=lambda: root,
               note="semeval2010-md synced with the docling backend; BibTeX keywords as queries")


ARMS = {
    "www": partial(jsonl, "www"),
    "semeval2010": partial(jsonl, "semeval2010"),
    "inspec": partial(jsonl, "inspec"),
    "semeval2010-md": semeval_md,
}
