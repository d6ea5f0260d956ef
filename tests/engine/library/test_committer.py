"""Long writes commit as they go (issue 32, item 4): ``import`` and ``sync`` commit every few hundred
sources or every ``BATCH_SECONDS`` (a fake clock here), a run stopped by a full disk keeps what it
committed and leaves no file under ``content/`` that the ledger does not list (or, when it cannot clean
up, the next run removes them and says so), and the embed stage's commit interval follows the job's size
(5% of its chunks or 10 s, whichever first)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import chitragupta.engine.library.bibsync as bibsync_mod
import chitragupta.engine.library.committer as committer_mod
import chitragupta.engine.library.importer as importer_mod
import pytest
from chitragupta.engine.library.committer import SIDECAR_SUFFIX, TXT
from chitragupta.engine.library.demo.tinypdf import write_pdf
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import sync
from chitragupta.engine.library.workspace import Workspace
from chitragupta.enrich.embed import (
    COMMIT_ENV,
    COMMIT_EVERY_SECONDS,
    commit_due,
    commit_every,
)
from chitragupta.errors import WorkspaceError

from helpers import (
    bib_workspace_at,
    import_jsonl,  # one file a record, the layout these tests pin (packs: test_import_packed)
    one_error_line_after_progress,
    run_main,
    write_jsonl,
)

LEDGER_FILES = {"ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm", ".lock", "parsed"}


def _records(n: int) -> list[dict]:
    return [{"_id": f"d{i:04d}", "title": f"title {i}", "text": f"twin fidelity {i} " * 20} for i in range(n)]


def _listed(ws: Workspace) -> set[str]:
    with Ledger(ws.ledger_path) as led:
        return {r.parsed_path for r in led.rows() if r.parsed_path}


def _unlisted(ws: Workspace) -> list[str]:
    """Files under content/ that the ledger does not list: anything in content/parsed/ that is neither a
    row's parsed text nor its sidecar (temp files included), and anything in content/ besides the
    ledger, its lock and the parsed folder."""
    listed = _listed(ws)
    out = [p.name for p in ws.content.iterdir() if p.name not in LEDGER_FILES]
    for p in ws.parsed_dir.iterdir():
        rel = ws.relative(p)
        if rel.endswith(SIDECAR_SUFFIX):
            rel = rel[: -len(SIDECAR_SUFFIX)] + TXT
        if rel not in listed:
            out.append(f"parsed/{p.name}")
    return sorted(out)


def _batches(monkeypatch) -> list[int]:
    """The size of every committed batch of rows (``Ledger.upsert_values`` calls), collected."""
    sizes: list[int] = []
    real = Ledger.upsert_values

    def spy(self, values):
        if values:
            sizes.append(len(values))
        return real(self, values)

    monkeypatch.setattr(Ledger, "upsert_values", spy)
    return sizes


def _clock(monkeypatch, per_write: float = 0.0) -> None:
    """The committer's clock made a fake one that moves ``per_write`` seconds at each parsed-file write
    (and not otherwise), so time-driven commits come after a known number of sources."""
    now = {"t": 1000.0}
    monkeypatch.setattr(committer_mod, "time", SimpleNamespace(monotonic=lambda: now["t"]))
    real = committer_mod.replace_in_folder

    def write(folder, name, data, tag):
        now["t"] += per_write
        return real(folder, name, data, tag)

    monkeypatch.setattr(committer_mod, "replace_in_folder", write)


def _full_disk_at(monkeypatch, at: int, exc: BaseException | None = None) -> None:
    """The ``at``-th parsed-file write (and every later one) fails as on a full disk (or raises ``exc``)."""
    real = committer_mod.replace_in_folder
    calls = {"n": 0}

    def write(folder, name, data, tag):
        calls["n"] += 1
        if calls["n"] >= at:
            raise exc if exc is not None else OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), f"{folder}/{name}")
        return real(folder, name, data, tag)

    monkeypatch.setattr(committer_mod, "replace_in_folder", write)


# -- the cadence ---------------------------------------------------------------------------------------------

def test_import_commits_every_few_hundred_sources(tmp_path, monkeypatch):
    _clock(monkeypatch)  # a clock that never moves: only the row count commits
    sizes = _batches(monkeypatch)
    ws = Workspace.open(tmp_path / "ws", create=True)
    rep = import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", _records(1033)))
    assert rep.parsed == 1033
    assert sizes == [500, 500, 33]  # was one batch of 1,033 (5,000 rows a batch)


def test_import_commits_every_batch_seconds_on_a_fake_clock(tmp_path, monkeypatch):
    assert committer_mod.BATCH_SECONDS == 2.0
    _clock(monkeypatch, per_write=0.5)  # a commit once more than 2 s passed: after every 5th source
    sizes = _batches(monkeypatch)
    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", _records(23)))
    assert sizes == [5, 5, 5, 5, 3]


def _pdf_workspace(root: Path, n: int) -> Workspace:
    papers = root / "papers"
    papers.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"uniqueword{i} twin model"])
    return bib_workspace_at(root, "".join(f"@misc{{k{i:02d}, title={{T {i}}}, file={{p{i}.pdf}}}}\n" for i in range(n)))


def test_sync_commits_every_batch_seconds_on_a_fake_clock(tmp_path, monkeypatch):
    _clock(monkeypatch, per_write=0.5)
    sizes = _batches(monkeypatch)
    ws = _pdf_workspace(tmp_path / "ws", 12)
    assert sync(ws).parsed == 12
    assert sizes == [5, 5, 2]


# -- a full disk in the middle of a run ---------------------------------------------------------------------

def test_a_full_disk_mid_import_keeps_what_it_committed_and_leaves_no_unlisted_file(tmp_path, monkeypatch):
    """The issue's case: 1,033 sources, the disk full at the 742nd parsed text. Was: 0 committed and 742
    texts left behind until the next run."""
    records = _records(1033)
    src = write_jsonl(tmp_path / "c.jsonl", records)
    ws = Workspace.open(tmp_path / "ws", create=True)
    _full_disk_at(monkeypatch, 742)
    with pytest.raises(WorkspaceError) as got:
        import_jsonl(ws, src)
    msg = str(got.value)
    assert "\n" not in msg and "import stopped: No space left on device" in msg
    assert "500 source(s) committed by this run are kept" in msg
    assert "the 241 parsed file(s) it wrote for sources not yet committed were removed" in msg
    assert len(_listed(ws)) == 500
    assert _unlisted(ws) == []
    by_key = {r["_id"]: r["text"] for r in records}
    with Ledger(ws.ledger_path) as led:
        for row in led.rows():
            assert (ws.root / row.parsed_path).read_text(encoding="utf-8") == by_key[row.citekey]
    monkeypatch.undo()
    rep = import_jsonl(ws, src)  # the disk has room again: the import finishes
    assert (rep.entries, rep.parsed, rep.unchanged, rep.orphans) == (1033, 533, 500, 0)
    assert len(_listed(ws)) == 1033 and _unlisted(ws) == []


def test_the_cli_says_what_a_full_disk_import_removed(tmp_path, monkeypatch):
    src = write_jsonl(tmp_path / "c.jsonl", _records(30))
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 10)
    _full_disk_at(monkeypatch, 26)
    monkeypatch.setattr("chitragupta.engine.library.sync.import_jsonl", import_jsonl)  # the CLI, per file
    p = run_main("import", "-w", tmp_path / "ws", src)
    one_error_line_after_progress(p, "import stopped", "No space left on device", "20 source(s) committed",
                                  "the 5 parsed file(s) it wrote for sources not yet committed were removed",
                                  "run the import again")
    assert _unlisted(Workspace.open(tmp_path / "ws")) == []


@pytest.mark.parametrize("how", ["ledger unreadable", "interrupted"])
def test_what_a_stopped_import_could_not_remove_the_next_run_removes_and_says_so(tmp_path, monkeypatch, how):
    src = write_jsonl(tmp_path / "c.jsonl", _records(60))
    ws = Workspace.open(tmp_path / "ws", create=True)
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 25)
    if how == "interrupted":  # not an error the run can handle: Ctrl-C (a kill leaves the same)
        _full_disk_at(monkeypatch, 40, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            import_jsonl(ws, src)
    else:  # the full disk also stops the ledger being read: the run cannot tell its files from the rows'
        _full_disk_at(monkeypatch, 40)

        def unreadable(self):
            raise WorkspaceError("the ledger could not be read (disk I/O error)")

        monkeypatch.setattr(Ledger, "index_view", unreadable)
        with pytest.raises(WorkspaceError, match="import stopped.*are removed by the next run"):
            import_jsonl(ws, src)
    monkeypatch.undo()
    assert len(_listed(ws)) == 25 and len(_unlisted(ws)) == 14  # sources 26..39 written, never committed
    rep = import_jsonl(ws, src)
    assert rep.orphans == 14 and rep.parsed == 35
    assert "14 parsed file(s) that no source listed removed (an earlier run stopped before committing them)" \
        in rep.summary()
    assert _unlisted(ws) == [] and len(_listed(ws)) == 60
    assert import_jsonl(ws, src).orphans == 0


def test_a_full_disk_mid_sync_keeps_what_it_committed_and_leaves_no_unlisted_file(tmp_path, monkeypatch):
    ws = _pdf_workspace(tmp_path / "ws", 30)
    monkeypatch.setattr(bibsync_mod, "_BATCH_ROWS", 10)
    _full_disk_at(monkeypatch, 25)
    p = run_main("sync", "-w", ws.root)  # was: "cannot write the output", as if stdout had failed
    one_error_line_after_progress(p, "sync stopped: No space left on device", "20 source(s) committed",
                                  "the 4 parsed file(s) it wrote for sources not yet committed were removed",
                                  "run the sync again")
    assert len(_listed(ws)) == 20 and _unlisted(ws) == []
    monkeypatch.undo()
    rep = sync(ws)
    assert (rep.parsed, rep.unchanged, rep.orphans) == (10, 20, 0)
    assert len(_listed(ws)) == 30 and _unlisted(ws) == []


def test_a_ledger_that_cannot_commit_keeps_its_message_and_removes_the_batch_files(tmp_path, monkeypatch):
    """The disk fills while the ledger commits (not while a text is written): the ledger's own one-line
    error, with what the run removed after it."""
    ws = Workspace.open(tmp_path / "ws", create=True)
    monkeypatch.setattr(importer_mod, "_BATCH_ROWS", 10)
    real = Ledger.upsert_values
    calls = {"n": 0}

    def full(self, values):
        calls["n"] += 1
        if calls["n"] == 3:
            raise WorkspaceError(f"{ws.ledger_path}: the ledger could not be written (database or disk is full)")
        return real(self, values)

    monkeypatch.setattr(Ledger, "upsert_values", full)
    with pytest.raises(WorkspaceError) as got:
        import_jsonl(ws, write_jsonl(tmp_path / "c.jsonl", _records(35)))
    assert "could not be written (database or disk is full)" in str(got.value)
    assert "the 10 parsed file(s) it wrote for sources not yet committed were removed" in str(got.value)
    assert len(_listed(ws)) == 20 and _unlisted(ws) == []


# -- the embed stage's interval -------------------------------------------------------------------------------

def test_the_embed_stage_commits_every_5_percent_of_its_chunks(monkeypatch):
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert commit_every(1000) == 50
    assert commit_every(1001) == 51  # rounded up
    assert commit_every(1_000_000) == 50_000
    assert commit_every(20) == 1 and commit_every(21) == 2
    assert commit_every(0) == 1 and commit_every(1) == 1  # never 0: a commit needs a finished chunk anyway
    monkeypatch.setenv(COMMIT_ENV, "7")  # the tests' and the kill campaign's fixed number wins
    assert commit_every(1000) == 7


def test_the_embed_stage_commits_at_the_share_or_after_10_seconds_whichever_first(monkeypatch):
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert COMMIT_EVERY_SECONDS == 10.0
    every = commit_every(1000)
    assert not commit_due(0, every, 1e6)  # nothing finished: nothing to commit, however long
    assert not commit_due(every - 1, every, 9.99)
    assert commit_due(every, every, 0.0)  # the share reached
    assert commit_due(1, every, 10.0)  # 10 s passed
    assert commit_due(every + 500, every, 0.5)

