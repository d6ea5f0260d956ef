"""A small build (less than ``segments.POOL_FROM_BYTES`` of text: in this process, the table of runs carried
from block to block, the numpy integrity checks) writes the same arrays and manifest, to the byte, as a
large build of the same workspace, and never imports numba."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from chitragupta.engine.index import segments
from chitragupta.engine.index.manage import refresh
from chitragupta.engine.library.workspace import Workspace

from helpers import assert_same_bytes, make_workspace, npy_bytes, random_docs


def _odd_docs(seed: int, n: int) -> list[dict]:
    """Random records with Unicode, hyphens, digits, empty titles and bodies, and repeated words."""
    rng = np.random.default_rng(seed)
    words = ["naïve", "café", "Ünïcode", "x-ray", "co-op", "état", "βeta", "日本語", "3d", "a1b2", "the", "of",
             "model", "Model", "MODEL", "data", "set", "dataset", "über", "façade", "a", "zz"]
    docs = []
    for i in range(n):
        body = " ".join(rng.choice(words, size=int(rng.integers(0, 40))))
        title = " ".join(rng.choice(words, size=int(rng.integers(0, 4))))
        if i % 7 == 0:
            body = ""
        docs.append({"_id": f"u{i:04d}", "title": title, "text": body})
    return docs


def _both(ws: Workspace, monkeypatch, jobs: int = 1):
    """The workspace built small and then large (no text counts as small)."""
    seen = []
    real = segments.small_text
    monkeypatch.setattr(segments, "small_text", lambda *args: seen.append(real(*args)) or seen[-1])
    refresh(ws, jobs=jobs, force=True)
    small = npy_bytes(ws)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 0)
    refresh(ws, jobs=jobs, force=True)
    large = npy_bytes(ws)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 8 << 20)
    assert seen == [True, True, False, False]  # (each build took the path meant: its own, its blocks')
    return small, large


CONFIGS = ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n",
           '[retrieval]\npositions = false\nstemmer = "english"\n', "[retrieval]\nweight_title = 0.0\n"]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("docs", ["random", "odd"])
def test_a_small_build_writes_the_large_builds_bytes(tmp_path, monkeypatch, config, docs):
    records = random_docs(31, 400, vocab=250) if docs == "random" else _odd_docs(32, 300)
    root = make_workspace(tmp_path, records)
    if config:
        (root / "config.toml").write_text(config)
    small, large = _both(Workspace.open(root), monkeypatch)
    assert_same_bytes(small, large)
    assert ("seq.npy" in small) == ("positions = false" not in config)


def test_a_small_update_writes_what_the_large_update_writes(tmp_path, monkeypatch):
    """An update (reused documents, new ones tokenized) small and large: the same bytes."""
    import shutil

    from chitragupta.engine.library.sync import import_jsonl

    from helpers import write_jsonl

    docs = random_docs(33, 300, vocab=150)
    changed = [dict(d, text=d["text"] + " novelword café") if i % 4 == 0 else d for i, d in enumerate(docs)]
    root = make_workspace(tmp_path / "a", docs)
    ws = Workspace.open(root)
    refresh(ws, jobs=1)
    changed += [{"_id": "a-first", "title": "Nouveau", "text": "ocean heat novelword"}]
    import_jsonl(ws, write_jsonl(tmp_path / "a" / "corpus.jsonl", changed))
    shutil.copytree(root, tmp_path / "b", copy_function=shutil.copy2)  # (the same files, times and all)
    out = []
    for limit, where in ((8 << 20, root), (0, tmp_path / "b")):
        monkeypatch.setattr(segments, "POOL_FROM_BYTES", limit)
        ws = Workspace.open(where)
        report = refresh(ws, jobs=1).report
        assert report.reused and report.retokenized
        got = npy_bytes(ws)
        # the scan's fingerprints differ between the two copies (not the build's): left out, and their checksum
        del got["fingerprints.npy"]
        manifest = json.loads(got["manifest.json"])
        del manifest["files"]["fingerprints"]
        got["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
        out.append(got)
    assert_same_bytes(*out)


def test_a_small_build_with_two_jobs_is_the_same(tmp_path, monkeypatch):
    root = make_workspace(tmp_path, random_docs(34, 500, vocab=300))
    small, large = _both(Workspace.open(root), monkeypatch, jobs=2)
    assert_same_bytes(small, large)


@pytest.mark.parametrize("unit", ["document", "all"])
def test_a_small_index_command_never_imports_numba(tmp_path, unit):
    """`chitragupta index` of a small workspace: numba never imported (its references step and the passage
    index included), nor, for the document index alone, what searching needs (the CLI builds only the
    options of the command it runs) or the passage index."""
    root = make_workspace(tmp_path, _odd_docs(35, 200))
    code = textwrap.dedent(f"""
        import sys
        from chitragupta.cli.main import main
        rc = main(["index", "-w", {str(root)!r}, "--unit", {unit!r}, "--jobs", "2", "--force"])
        print("RC", rc, "NUMBA", "numba" in sys.modules)
        print("ALSO", sorted(m for m in ("scipy", "chitragupta.engine.search.searcher", "chitragupta.engine.search.bm25",
                                         "chitragupta.enrich.hybrid", "chitragupta.engine.index.passage",
                                         "chitragupta.cli.search_cmd") if m in sys.modules))
    """)
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RC 0 NUMBA False" in got.stdout, got.stdout + got.stderr
    assert unit == "all" or "ALSO []" in got.stdout, got.stdout
