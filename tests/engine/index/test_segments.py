"""The document index tokenized in blocks by a process pool: the same arrays to the byte as one process."""

from pathlib import Path

import numpy as np
import pytest
from chitragupta.engine.index import segments
from chitragupta.engine.index.manage import doc_folder, refresh
from chitragupta.engine.library.workspace import Workspace

from helpers import (
    assert_same_bytes,
    make_workspace,
    npy_bytes,
    random_docs,
    write_jsonl,
)


@pytest.fixture(autouse=True)
def pool_for_any_size(monkeypatch):
    """These corpora are small: without this, a build with ``jobs`` > 1 would tokenize them in its own
    process (``segments.POOL_FROM_BYTES``), and the pool would go untested."""
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 0)




def build(tmp: Path, docs, jobs: list[int], config: str = "", **patch) -> list[dict[str, bytes]]:
    """The same workspace built from scratch once per entry of ``jobs``: each build's files."""
    root = make_workspace(tmp, docs)
    if config:
        (root / "config.toml").write_text(config)
    ws = Workspace.open(root)
    out = []
    for j in jobs:
        refresh(ws, jobs=j, force=True)
        out.append(npy_bytes(ws))
    return out




@pytest.mark.slow
@pytest.mark.parametrize("config", ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n"])
def test_two_jobs_write_the_same_arrays_as_one(tmp_path, config):
    docs = random_docs(21, 700, vocab=300)
    one, two = build(tmp_path, docs, [1, 2], config)
    assert_same_bytes(one, two)
    assert ("seq.npy" in one) == ("positions" not in config)
    assert "tpos.npy" in one or "positions" in config


@pytest.mark.slow
def test_block_size_does_not_change_the_arrays(tmp_path, monkeypatch):
    docs = random_docs(22, 300, vocab=120)
    root = make_workspace(tmp_path, docs)
    ws = Workspace.open(root)
    refresh(ws, jobs=1)
    whole = npy_bytes(ws)
    monkeypatch.setattr(segments, "_MIN_BLOCK", 1)
    monkeypatch.setattr(segments, "_MAX_BLOCK", 7)  # 43 blocks, each its own vocabulary
    assert segments.block_size(300, 2) == 7
    for jobs in (2, 1):
        refresh(ws, jobs=jobs, force=True)
        assert_same_bytes(whole, npy_bytes(ws))


@pytest.mark.slow
def test_an_update_with_two_jobs_equals_a_fresh_build(tmp_path):
    docs = random_docs(23, 600, vocab=200)
    root = make_workspace(tmp_path / "a", docs)
    ws = Workspace.open(root)
    refresh(ws, jobs=2)
    changed = [dict(d, text=d["text"] + " novelword") if i % 3 == 0 else d for i, d in enumerate(docs)]
    changed += [{"_id": "a-first", "title": "New paper", "text": "ocean heat novelword"}]
    from chitragupta.engine.library.sync import import_jsonl

    import_jsonl(ws, write_jsonl(tmp_path / "a" / "corpus.jsonl", changed))
    report = refresh(ws, jobs=2).report
    assert report.reused and report.retokenized
    updated = npy_bytes(ws)
    refresh(ws, jobs=1, force=True)
    assert_same_bytes(updated, npy_bytes(ws))


def test_blocks_return_compact_arrays_not_token_lists(tmp_path):
    docs = random_docs(24, 40, vocab=60)
    root = make_workspace(tmp_path, docs)
    from chitragupta.engine.index.manage import _rows
    from chitragupta.engine.index.source import fingerprints

    ws = Workspace.open(root)
    _fps, _flags, sources = fingerprints(ws.root, _rows(ws))
    todo = np.arange(len(sources))
    blocks = list(segments.tokenize_blocks(todo, sources, ("title", "abstract"), True, 1, block=16))
    assert [b.units.tolist() for b in blocks] == [list(range(0, 16)), list(range(16, 32)), list(range(32, 40))]
    for b in blocks:
        keys = b.keys.split(b" ")
        assert isinstance(b.keys, bytes) and keys and len(set(keys)) == len(keys) and b"" not in keys
        for u, t, c in b.streams.values():
            assert u.dtype == t.dtype == c.dtype == np.int32
            assert (c > 0).all()
        assert b.seq.dtype == np.int32 and b.seq_units.tolist() == b.units.tolist()
        assert (b.seq == -1).sum() == len(b.units)  # one title break per document


def test_index_jobs_flag(tmp_path, capsys):
    from chitragupta.cli.main import main

    root = make_workspace(tmp_path, random_docs(25, 50))
    assert main(["index", "-w", str(root), "--jobs", "2", "--unit", "document"]) == 0
    assert "50 documents" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["index", "-w", str(root), "--jobs", "0"])
    assert "--jobs wants a whole number" in capsys.readouterr().err


@pytest.mark.slow
def test_a_build_past_the_spill_budget_writes_the_same_arrays(tmp_path, monkeypatch):
    docs = random_docs(26, 400, vocab=150)
    root = make_workspace(tmp_path / "a", docs)
    ws = Workspace.open(root)
    refresh(ws, jobs=1)
    in_memory = npy_bytes(ws)
    made = []
    real_note = segments.Spill.note

    def note(self, nbytes, acc):
        got = real_note(self, nbytes, acc)
        if self.dir is not None and self.dir not in made:
            made.append(self.dir)
        return got

    monkeypatch.setattr(segments, "SPILL_BYTES", 0)  # every block's triples and ids to disk
    monkeypatch.setattr(segments, "_MAX_BLOCK", 50)
    monkeypatch.setattr(segments.Spill, "note", note)
    for jobs in (1, 2):
        refresh(ws, jobs=jobs, force=True)
        assert_same_bytes(in_memory, npy_bytes(ws))
    assert len(made) == 2 and not any(d.exists() for d in made)  # spilled, then removed
    # an update (reused documents' positions copied) past the budget equals a fresh build in memory
    changed = [dict(d, text=d["text"] + " novelword") if i % 4 == 0 else d for i, d in enumerate(docs)]
    from chitragupta.engine.library.sync import import_jsonl

    import_jsonl(ws, write_jsonl(tmp_path / "a" / "corpus.jsonl", changed))
    assert refresh(ws, jobs=2).report.reused == 300
    updated = npy_bytes(ws)
    monkeypatch.setattr(segments, "SPILL_BYTES", 1 << 40)
    refresh(ws, jobs=1, force=True)
    assert_same_bytes(updated, npy_bytes(ws))


@pytest.mark.slow
@pytest.mark.parametrize("config", ["", '[retrieval]\nstemmer = "english"\n', "[retrieval]\npositions = false\n"])
def test_a_tiny_output_budget_writes_the_same_arrays(tmp_path, monkeypatch, config):
    """The output arrays written a few terms (and a few ids) at a time, through scratch buckets, are the
    default build's to the byte: fresh, updated, with stemming (pairs summed within a range)."""
    from chitragupta.engine.index import csr, store

    docs = random_docs(27, 500, vocab=220)
    root = make_workspace(tmp_path / "a", docs)
    if config:
        (root / "config.toml").write_text(config)
    ws = Workspace.open(root)
    refresh(ws, jobs=1)
    default = npy_bytes(ws)
    ranges, scratch = [], []
    real_ranges, real_scratch = csr._term_ranges, store.NewGeneration.scratch

    def term_ranges(per_term, budget):
        got = real_ranges(per_term, budget)
        ranges.append(got.shape[0] - 1)
        return got

    def note_scratch(self, name):
        scratch.append(real_scratch(self, name))
        return scratch[-1]

    monkeypatch.setattr(csr, "_term_ranges", term_ranges)
    monkeypatch.setattr(store.NewGeneration, "scratch", note_scratch)
    monkeypatch.setattr(csr, "RANGE_POSTINGS", 97)
    monkeypatch.setattr(csr, "POSITIONS_PER_RANGE", 301)
    monkeypatch.setattr(csr, "_POS_BLOCK", 250)  # a pass over seq in blocks of a few documents
    monkeypatch.setattr(segments, "SPILL_BYTES", 4096)
    monkeypatch.setattr(segments, "_MAX_BLOCK", 64)
    for jobs in (1, 2):
        refresh(ws, jobs=jobs, force=True)
        assert_same_bytes(default, npy_bytes(ws))
    assert min(ranges) > 20  # (many ranges: the CSR's and the positions')
    assert scratch and not any(p.exists() for p in scratch)
    gen = doc_folder(ws) / (doc_folder(ws) / "CURRENT").read_text().strip()
    assert sorted(p.name for p in gen.iterdir() if not p.name.endswith(".npy")) == ["manifest.json"]
    # an update from the ranged generation equals a fresh build with the default budget
    changed = [dict(d, text=d["text"] + " novelword") if i % 5 == 0 else d for i, d in enumerate(docs)]
    from chitragupta.engine.library.sync import import_jsonl

    import_jsonl(ws, write_jsonl(tmp_path / "a" / "corpus.jsonl", changed))
    assert refresh(ws, jobs=2).report.reused == 400
    updated = npy_bytes(ws)
    monkeypatch.undo()
    refresh(ws, jobs=1, force=True)
    assert_same_bytes(updated, npy_bytes(ws))


@pytest.mark.parametrize("jobs, where", [(1, "_place"), (2, "_place"), (2, "_term_positions")])
def test_a_failed_build_leaves_no_generation_behind(tmp_path, monkeypatch, jobs, where):
    """A disk that fills while the CSR or (with two jobs, in its thread beside the CSR) the positions
    are written: one line, no generation left, the previous index unchanged."""
    from chitragupta.engine.index import csr
    from chitragupta.errors import WorkspaceError

    root = make_workspace(tmp_path, random_docs(28, 120, vocab=80))
    ws = Workspace.open(root)
    refresh(ws, jobs=1)
    before = npy_bytes(ws)
    monkeypatch.setattr(csr, "RANGE_POSTINGS", 50)

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(csr, where, full)
    with pytest.raises(WorkspaceError, match="No space left on device; the previous index is unchanged"):
        refresh(ws, jobs=jobs, force=True)
    assert [p.name for p in doc_folder(ws).iterdir() if p.name.startswith(".")] == []
    assert_same_bytes(before, npy_bytes(ws))


def test_workers_die_with_a_killed_command():
    """A SIGKILLed ``sync`` / ``index`` leaves no worker behind holding its output open (a caller waiting
    for the output would wait forever): the pool's workers die with their parent."""
    import os
    import signal
    import subprocess
    import sys
    import time

    code = ("import os, sys, time\n"
            "from chitragupta.engine.library.workers import process_pool\n"
            "pool = process_pool(2)\n"
            "list(pool.map(time.sleep, [0.2] * 4))  # both workers started\n"
            "print(' '.join(map(str, pool._processes)), flush=True)\n"
            "time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = [int(x) for x in p.stdout.readline().split()]
    assert len(workers) == 2
    os.kill(p.pid, signal.SIGKILL)
    out, _err = p.communicate(timeout=60)  # returns only once every holder of the pipe is gone
    deadline = time.monotonic() + 60
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [w for w in workers if os.path.exists(f"/proc/{w}") and "Z" not in _state(w)]
        time.sleep(0.1)
    assert alive == []


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_small_corpus_is_tokenized_in_process_whatever_the_jobs(tmp_path, monkeypatch):
    from chitragupta.engine.library import workers

    docs = random_docs(23, 300, vocab=200)
    root = make_workspace(tmp_path / "ws", docs)
    ws = Workspace.open(root)
    refresh(ws, jobs=1, force=True)
    one = npy_bytes(ws)
    started = []
    real = workers.process_pool

    def spy(jobs):
        started.append(jobs)
        return real(jobs)

    monkeypatch.setattr(workers, "process_pool", spy)
    monkeypatch.setattr(segments, "_MAX_BLOCK", 64)  # (several blocks: the pool would be used if allowed)
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 8 << 20)
    refresh(ws, jobs=2, force=True)
    assert started == [] and npy_bytes(ws) == one
    monkeypatch.setattr(segments, "POOL_FROM_BYTES", 0)
    refresh(ws, jobs=2, force=True)
    assert started == [2] and npy_bytes(ws) == one


def test_small_text_counts_titles_packed_lengths_and_file_sizes(tmp_path):
    from chitragupta.engine.index.source import DocSource

    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 1000)
    pack = str(tmp_path / "content/parsed/packs/000001-0123abcd.pack")
    sources = [DocSource("a", "t" * 10, str(f), 0), DocSource("b", "u" * 5, pack + "#0+500", 0),
               DocSource("c", "v" * 7, None, 2), DocSource("d", "w", str(tmp_path / "gone.txt"), 0)]
    todo = np.arange(4)
    total = 10 + 1000 + 5 + 500 + 7 + 1
    assert segments.small_text(sources, todo, total + 1)
    assert not segments.small_text(sources, todo, total)
    assert not segments.small_text(sources, todo[:2], 1015)
    assert segments.small_text(sources, todo[2:], 9)
