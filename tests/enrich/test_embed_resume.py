"""The embed stage at corpus scale: committed segments, resume after an interruption, and nothing
loaded that a run does not need (issue 22).

The encoding goes through one replaceable step, ``encode_stream(texts) -> blocks of vectors``; these
tests replace it with the real packaged MiniLM cut into small blocks, so commits happen every few chunks
and an interruption can be placed at a chosen block.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import (  # noqa: F401 (a fixture)
    TOTAL,
    block_stream,
    cli_main,
    corpus_records,
    first_store,
    import_records,
)

pytestmark = pytest.mark.enrich

# ledger order: bridge (3 chunks), llm (2), mixed (1), oceanlong (3), protein (3), soil (2), vaccine (3)






def _clean(tmp_path, encoder):
    root = import_records(tmp_path / "clean", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    return first_store(root)[0]


def _same_as_clean(root, clean) -> None:
    store, _ = first_store(root)
    assert store.citekeys == clean.citekeys and store.count == clean.count == TOTAL
    for name in ("chunk_doc", "chunk_no", "char_start", "char_end"):
        assert np.array_equal(getattr(store, name), getattr(clean, name)), name
    assert np.allclose(store.vectors, clean.vectors, atol=1e-5)
    assert store.index.ntotal == store.count
    assert not (root / "content" / "faiss" / f".{store_slug(root)}.segments").exists()


def store_slug(root) -> str:
    return next(p.name for p in (root / "content" / "faiss").iterdir() if not p.name.startswith("."))


@pytest.mark.slow
def test_an_interrupted_run_commits_what_it_finished_and_the_rerun_encodes_only_the_rest(
        tmp_path, encoder, stream_of, monkeypatch, capsys):
    clean = _clean(tmp_path, encoder)
    root = import_records(tmp_path / "ws", corpus_records())
    monkeypatch.setenv("CHITRAGUPTA_EMBED_COMMIT_CHUNKS", "6")
    # blocks of 3: block 2 (6 chunks) finishes bridge, llm, mixed: committed (>= 6); block 4 finishes
    # oceanlong and protein: committed; block 5 finishes soil; Ctrl-C on block 6 commits soil on the way out.
    stream_of(block_stream(encoder, 3, stop_after=5))
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 130
    seg = root / "content" / "faiss" / f".{encoder.slug}.segments"
    records = [json.loads(p.read_text())["body"] for p in sorted(seg.glob("seg-*.json"))]
    assert [[d["citekey"] for d in r["docs"]] for r in records] == [
        ["bridge", "llm", "mixed"], ["oceanlong", "protein"], ["soil"]]
    assert not (root / "content" / "faiss" / encoder.slug).exists()  # nothing compacted yet
    capsys.readouterr()

    calls = []
    stream_of(block_stream(encoder, 3, calls=calls))
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert calls == [3]  # vaccine only
    assert "embed: 1 doc(s) encoded (3 chunks), 6 unchanged, 0 removed" in out
    assert "resumed: 6 of the unchanged doc(s) (14 chunks) were committed by an interrupted run" in out
    _same_as_clean(root, clean)


@pytest.mark.slow
def test_without_a_fixed_interval_a_small_job_commits_after_every_block(tmp_path, encoder, stream_of, monkeypatch):
    """The interval follows the job: 5% of 17 chunks is one chunk, so every block that finishes a document
    is committed as it arrives (the old fixed 1,024 chunks committed nothing before the way out), and a
    kill loses at most the block in flight."""
    monkeypatch.delenv("CHITRAGUPTA_EMBED_COMMIT_CHUNKS", raising=False)
    root = import_records(tmp_path / "ws", corpus_records())
    seg = root / "content" / "faiss" / f".{encoder.slug}.segments"
    seen = []

    def stream(texts):
        for i, lo in enumerate(range(0, len(texts), 3)):
            if i == 5:  # what was committed before this block, the way-out commit aside
                seen.extend([d["citekey"] for d in json.loads(p.read_text())["body"]["docs"]]
                            for p in sorted(seg.glob("seg-*.json")))
                raise KeyboardInterrupt
            yield encoder.encode_block(texts[lo:lo + 3])

    stream_of(stream)
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 130
    # blocks end at chunks 3, 6, 9, 12, 15: bridge (3) | llm (5), mixed (6) | oceanlong (9) | protein (12) | soil (14)
    assert seen == [["bridge"], ["llm", "mixed"], ["oceanlong"], ["protein"], ["soil"]]


@pytest.mark.slow
def test_a_damaged_segment_is_removed_with_a_note_and_its_documents_encoded_again(
        tmp_path, encoder, stream_of, monkeypatch, capsys):
    clean = _clean(tmp_path, encoder)
    root = import_records(tmp_path / "ws", corpus_records())
    monkeypatch.setenv("CHITRAGUPTA_EMBED_COMMIT_CHUNKS", "6")
    stream_of(block_stream(encoder, 3, stop_after=4))
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 130
    seg = root / "content" / "faiss" / f".{encoder.slug}.segments"
    data = bytearray((seg / "seg-000001.npy").read_bytes())
    data[-7] ^= 0x55
    (seg / "seg-000001.npy").write_bytes(bytes(data))
    (seg / ".seg-000003.npy.999.tmp").write_bytes(b"half a commit")  # a commit killed before its rename
    capsys.readouterr()
    calls = []
    stream_of(block_stream(encoder, 3, calls=calls))
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert "seg-000001.npy" in out and "not usable" in out and "encoded again" in out
    assert calls == [11]  # everything but oceanlong's and protein's 6 chunks (the second segment)
    assert "embed: 5 doc(s) encoded (11 chunks), 2 unchanged, 0 removed" in out
    _same_as_clean(root, clean)


@pytest.mark.slow
def test_segments_of_another_store_generation_are_removed(tmp_path, encoder, stream_of, monkeypatch, capsys):
    from chitragupta.enrich.store import read_segments, segments_folder, write_segment

    root = import_records(tmp_path / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    folder = root / "content" / "faiss" / encoder.slug
    seg = segments_folder(folder)
    store, _ = first_store(root)
    rows = store.doc_rows()["llm"]
    doc = {"citekey": "llm", "title": store.titles[store.citekeys.index("llm")], "hash": "x" * 32,
           "text": "t", "starts": [0] * len(rows), "ends": [1] * len(rows)}
    write_segment(seg, 1, base="not-this-store", model=store.model, dim=store.dim, recipe=store.recipe,
                  docs=[doc], vectors=store.vectors[rows])
    capsys.readouterr()
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    out = capsys.readouterr().out
    assert "extends another generation of the store" in out and "7 doc(s) unchanged, nothing to encode" in out
    assert not seg.exists()
    assert read_segments(seg, base="none", model=store.model, dim=store.dim, recipe=store.recipe) == ([], [])


@pytest.mark.slow
def test_a_run_with_nothing_to_do_loads_no_model(tmp_path, encoder, monkeypatch, capsys):
    import chitragupta.enrich.encoders as encoders
    from chitragupta.errors import UsageError

    root = import_records(tmp_path / "ws", corpus_records())
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0

    def refuse(*_a, **_k):
        raise UsageError("the model was loaded")

    monkeypatch.setattr(encoders, "load_encoder", refuse)
    capsys.readouterr()
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    assert "embed: 7 doc(s) unchanged, nothing to encode" in capsys.readouterr().out
    # a removed document needs no encoding either: the store is rewritten without loading the model
    import_records(root, [r for r in corpus_records() if r["_id"] != "soil"])
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    assert "embed: 0 doc(s) encoded (0 chunks), 6 unchanged, 1 removed" in capsys.readouterr().out
    assert "soil" not in first_store(root)[0].citekeys


def test_the_model_spec_reads_the_packaged_folder_without_loading(encoder):
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import model_spec, recipe

    spec = model_spec(load_config().enrich)
    assert spec.complete and spec.dim == encoder.dim == 384
    assert spec.slug == encoder.slug and recipe(spec) == recipe(encoder)


@pytest.mark.slow
def test_a_custom_encode_stream_is_used_and_its_blocks_checked(tmp_path, encoder):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.embed import run_stage
    from chitragupta.errors import UsageError

    root = import_records(tmp_path / "ws", corpus_records())
    ws = Workspace.open(root)
    with Ledger(ws.ledger_path) as ledger:
        rows = ledger.rows()
    seen = []

    def whole(texts):  # one block, as a remote encoder returning everything at once might
        seen.append(list(texts))
        yield encoder.encode_block(texts)

    lines = run_stage(ws, rows, device="cpu", encode_stream=whole)
    assert len(seen[0]) == TOTAL and "7 doc(s) encoded (17 chunks)" in lines[-1]
    assert seen[0][0].startswith("A study of bridge\n")

    import_records(root, [dict(r, text=r["text"] + " more") if r["_id"] == "llm" else r for r in corpus_records()])
    with Ledger(ws.ledger_path) as ledger:
        rows = ledger.rows()

    def short(texts):
        yield np.zeros((1, 7), dtype=np.float32)

    with pytest.raises(UsageError, match="the encoder returned a block of shape"):
        run_stage(ws, rows, device="cpu", encode_stream=short)


@pytest.mark.slow
def test_a_parsed_file_changed_on_disk_is_read_again_and_encoded(tmp_path, encoder, capsys):
    """The stamp of a document's files decides whether its text is read; the text's hash whether it is
    encoded: a touched file is re-read and kept, an edited one encoded."""
    import os

    root = import_records(tmp_path / "ws", corpus_records(), packed=False)  # a file of its own, touched and edited
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    parsed = root / "content" / "parsed" / "soil.txt"
    st = parsed.stat()
    os.utime(parsed, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched, same text
    capsys.readouterr()
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    assert "embed: 0 doc(s) encoded (0 chunks), 7 unchanged, 0 removed" in capsys.readouterr().out
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0  # the new stamp was recorded
    assert "embed: 7 doc(s) unchanged, nothing to encode" in capsys.readouterr().out
    parsed.write_text(parsed.read_text() + " Nitrogen fixing bacteria.", encoding="utf-8")
    assert cli_main("enrich", "-w", root, "--stages", "embed") == 0
    assert "embed: 1 doc(s) encoded (2 chunks), 6 unchanged, 0 removed" in capsys.readouterr().out


@pytest.mark.slow  # a real process: the model loads, then it is stopped by a signal
# SIGINT is the same path (KeyboardInterrupt); its timed variant finished before the signal on a fast CI run
@pytest.mark.parametrize("sig", ["SIGTERM"])
def test_a_signal_stops_the_cli_with_its_finished_documents_committed(tmp_path, encoder, sig):
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import ROOT

    records = [dict(r, _id=f"{r['_id']}{i}") for i in range(5) for r in corpus_records()]  # 85 chunks
    root = import_records(tmp_path / "ws", records, config="[enrich]\nembed_batch_size = 1\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", CHITRAGUPTA_EMBED_COMMIT_CHUNKS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", "chitragupta.cli.main", "enrich", "-w", str(root), "--stages", "embed"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seg = root / "content" / "faiss" / f".{encoder.slug}.segments"
    deadline = time.monotonic() + 300
    while not list(seg.glob("seg-*.json")) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130 and "interrupted" in err, (p.returncode, err[-500:])
    committed = sum(len(json.loads(f.read_text())["body"]["docs"]) for f in seg.glob("seg-*.json"))
    assert 1 <= committed < len(records)
    assert "committed, a rerun encodes the rest" in err
    r = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", "enrich", "-w", str(root), "--stages", "embed"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-500:]
    assert f"embed: {len(records) - committed} doc(s) encoded" in r.stdout
    assert f"resumed: {committed} of the unchanged doc(s)" in r.stdout


@pytest.mark.slow
def test_the_pipeline_hands_an_encode_stream_to_the_embed_stage(tmp_path, encoder, monkeypatch):
    """``enrich.run.run(..., encode_stream=...)``: how another encoder (a Ray cluster's) plugs in; the
    local model is then never loaded."""
    import chitragupta.enrich.encoders as encoders
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.run import run

    root = import_records(tmp_path / "ws", corpus_records())
    monkeypatch.setattr(encoders, "load_encoder", lambda *a, **k: pytest.fail("the local model was loaded"))
    seen = []

    def remote(texts):
        seen.append(len(texts))
        for lo in range(0, len(texts), 5):
            yield encoder.encode_block(texts[lo:lo + 5])

    lines = run(Workspace.open(root), ["embed"], device="cpu", encode_stream=remote)
    assert seen == [TOTAL] and "7 doc(s) encoded (17 chunks)" in lines[-1]
    assert first_store(root)[0].count == TOTAL
