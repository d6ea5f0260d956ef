"""qrels arms: any BEIR-style folder with human judgments (graded or binary; a threshold for
collections like cranfield where relevance is grade >= 1)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench.arms import Arm
from bench.data import qrels_arm, workspace_for


def beir(folder: str, data: Path, *, threshold: int = 1, qrels_file: str = "qrels.tsv", graded: bool = False,
         name: str | None = None) -> Arm:
    a = qrels_arm(folder, data, threshold=threshold, qrels_file=qrels_file, graded=graded)
    return Arm(name=name or folder, queries=a.queries, qrels=a.qrels,
               build=lambda: workspace_for(a.corpus, folder),
               note=f"{folder}: {len(a.queries)} judged queries, relevant = grade >= {threshold}")


def _scifact_all(data: Path) -> Arm:
    test = beir("scifact", data)
    train = beir("scifact", data, qrels_file="qrels_train.tsv")
    return Arm(name="scifact-all", queries={**train.queries, **test.queries}, qrels={**train.qrels, **test.qrels},
               build=test.build, note="scifact test + train judgments (1,109 queries)")


ARMS = {
    "scifact": partial(beir, "scifact"),
    "scifact-all": _scifact_all,
    "cranfield": partial(beir, "cranfield"),
    "cisi": partial(beir, "cisi"),
}
