"""A small build (less than ``segments.POOL_FROM_BYTES`` of text) runs without numba -- the per-run
tokenizer, ``kernels.build_numpy``, the numpy integrity checks and lookup table -- and writes the same
arrays and manifest, to the byte, as the numba build of the same workspace."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from chitragupta.engine.index import segments
from chitragupta.engine.index.manage import refresh
from chitragupta.engine.library.workspace import Workspace
from chitragupta.kernels import build

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
    """The workspace built small (numpy) and then large (numba: no text counts as small)."""
    seen = []
    real = build.numpy_passes

    def spy(on=True):
        seen.append(on)
        return real(on)

    monkeypatch.setattr(build, "numpy_passes", spy)
    refresh(ws, jobs=jobs, force=True)
    small = npy_bytes(ws)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 0)
    refresh(ws, jobs=jobs, force=True)
    large = npy_bytes(ws)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 8 << 20)
    assert seen == [True, False]  # (each build took the path meant)
    return small, large


CONFIGS = ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n",
           '[retrieval]\npositions = false\nstemmer = "english"\n', "[retrieval]\nweight_title = 0.0\n"]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("docs", ["random", "odd"])
def test_a_small_build_writes_the_numba_builds_bytes(tmp_path, monkeypatch, config, docs):
    records = random_docs(31, 400, vocab=250) if docs == "random" else _odd_docs(32, 300)
    root = make_workspace(tmp_path, records)
    if config:
        (root / "config.toml").write_text(config)
    small, large = _both(Workspace.open(root), monkeypatch)
    assert_same_bytes(small, large)
    assert ("seq.npy" in small) == ("positions = false" not in config)


def test_a_small_update_writes_what_the_numba_update_writes(tmp_path, monkeypatch):
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



@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("piece_bytes,long_text", [(1 << 23, 1 << 22), (200, 500), (1, 1)])
def test_the_numpy_runs_give_the_numba_block(tmp_path, monkeypatch, positions, piece_bytes, long_text):
    """``tokenize_fast`` with ``kernels.runs_numpy`` (inside ``numpy_passes``) against ``kernels.runs``: the
    same Block on Unicode, hyphenated, empty and sidecar texts, handed over in one piece or many."""
    from chitragupta.engine.index import tokenize_fast

    from helpers import assert_same_block, doc_sources, sidecar_workspace

    sources = doc_sources(sidecar_workspace(tmp_path))
    monkeypatch.setattr(tokenize_fast, "_PIECE_BYTES", piece_bytes)
    monkeypatch.setattr(tokenize_fast, "_LONG", long_text)
    units = np.arange(len(sources), dtype=np.int64) * 3 + 1
    for k in (len(sources), 0, 1):
        want = segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions)
        with build.numpy_passes():
            assert tokenize_fast._kernels()[0].__module__ == "chitragupta.kernels.runs_numpy"
            got = segments.tokenize_block(units[:k], sources[:k], tokenize_fast.FIELDS, positions)
        assert_same_block(got, want)
