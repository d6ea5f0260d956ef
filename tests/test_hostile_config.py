"""Issue 20, third round, for configuration, eval, sweep and the embedding store's manifest: hostile
values and files end in one line (``error: ...`` from the CLI, a ChitraguptaError from the library),
never a traceback, a hang, a crash of pytrec_eval or an unbounded read; what the user had is kept.

A FIFO that the old code would have opened is fed by ``_Feeder`` (a writer that connects only once a
reader has opened it), so a regression fails the test instead of hanging it; ``/dev/zero`` is read only
in a subprocess with a memory limit, so a regression is a MemoryError there, not a machine out of memory.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import ROOT, make_workspace, random_docs, run_main, write_jsonl

from chitragupta.engine.config import INT_MAX, MAX_CONFIG_BYTES, load_config
from chitragupta.engine.workspace import Workspace
from chitragupta.errors import ConfigError, CorpusError, UsageError


class _Feeder:
    """Writes ``data`` into the FIFO ``path`` if and when a reader opens it (never blocking: the write end
    is tried with O_NONBLOCK, which fails with ENXIO while no reader is there). ``fed`` says whether a
    reader came: code that refuses FIFOs by type never opens one."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data = path, data
        self.fed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno != errno.ENXIO:
                    return
                self._stop.wait(0.01)
                continue
            try:
                os.set_blocking(fd, True)
                os.write(fd, self.data)
            except OSError:
                pass
            finally:
                os.close(fd)
                self.fed = True
            return

    def __enter__(self):
        os.mkfifo(self.path)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _one_line(p, *needles):
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr


def _config(tmp_path, text: str, name: str = "config.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# -- configuration: values (item 6) -------------------------------------------------------------------

@pytest.mark.parametrize("text, needles", [
    ("[retrieval]\nk1 = " + "9" * 400 + "\n", ["[retrieval] k1", "too large for a number", "[0, 1000]"]),
    ("[retrieval]\nk1 = " + "9" * 5000 + "\n", ["a number too long", "4300 digits"]),
    ("[retrieval]\nk1 = " + "[" * 3000 + "]" * 3000 + "\n", ["nested too deep"]),
    ("[retrieval]\nk1 = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", ["nested too deep"]),
    ("[retrieval]\nsnippet_chars = " + "9" * 30 + "\n", ["snippet_chars", "outside 32 bits", str(INT_MAX)]),
    ("[retrieval]\nthreads = -" + "9" * 30 + "\n", ["threads", "outside 32 bits"]),
    ('[corpus]\nbibliography = "a\\u0000b.bib"\n', ["bibliography", "NUL character"]),
    ('[enrich]\nrerank_model = "m\\u0000"\n', ["rerank_model", "NUL character"]),
])
def test_hostile_values_are_one_short_config_error(tmp_path, text, needles):
    p = _config(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert msg.startswith(str(p)) and "\n" not in msg and len(msg) < 400, msg
    for n in needles:
        assert n in msg, msg


def test_the_largest_32_bit_integer_is_still_allowed(tmp_path):
    cfg = load_config(_config(tmp_path, f"[retrieval]\nsnippet_chars = {INT_MAX}\n"))
    assert cfg.retrieval.snippet_chars == INT_MAX


def test_a_long_unknown_key_is_shown_cut(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(_config(tmp_path, "[retrieval]\n" + "x" * 100_000 + " = 1\n"))
    assert "unknown key [retrieval] xxx" in str(ei.value) and len(str(ei.value)) < 400


def test_sync_with_a_nul_in_the_bibliography_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    _config(ws, '[corpus]\nbibliography = "a\\u0000b.bib"\n')
    _one_line(run_main("sync", "-w", ws), "bibliography", "NUL character")


def test_device_choices_follow_the_device_table(tmp_path, monkeypatch):
    """``enrich --device`` and the config's device settings list ``chitragupta.device.DEVICES``, not a copy."""
    from chitragupta.cli import enrich_cmd
    from chitragupta.device import DEVICES

    monkeypatch.setitem(DEVICES, "xpu", "a device added to the table")
    parser = argparse.ArgumentParser()
    enrich_cmd.add_arguments(parser)
    (action,) = [a for a in parser._actions if "--device" in a.option_strings]
    assert list(action.choices) == list(DEVICES)
    with pytest.raises(ConfigError) as ei:
        load_config(_config(tmp_path, '[enrich]\ndevice = "tpu"\n'))
    assert '"xpu"' in str(ei.value)


# -- configuration: files (items 5 and 6) -------------------------------------------------------------

@pytest.mark.parametrize("what, needle", [
    ("folder", "is a folder, not a config file"),
    ("device", "is a character device, not a config file"),
    ("dangling", "is a symbolic link to a missing file"),
    ("huge", "too big for a config file"),
])
def test_a_config_path_that_is_not_a_config_file(tmp_path, what, needle):
    if what == "folder":
        p = tmp_path / "cfg"
        p.mkdir()
    elif what == "device":
        p = Path("/dev/null")  # read whole it is an empty config: the defaults, silently
    elif what == "dangling":
        p = tmp_path / "cfg.toml"
        p.symlink_to(tmp_path / "nowhere.toml")
    else:
        p = _config(tmp_path, "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(ei.value).startswith(f"{p}: ") and needle in str(ei.value), str(ei.value)


def test_a_config_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "cfg.toml"
    with _Feeder(fifo, b"[retrieval]\nk1 = 2\n") as feeder:
        with pytest.raises(ConfigError, match=r"is a pipe \(FIFO\), not a config file"):
            load_config(fifo)
    assert not feeder.fed


def test_a_symlinked_config_is_still_read(tmp_path):
    real = _config(tmp_path, "[retrieval]\nk1 = 2\n", "real.toml")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    assert load_config(link).retrieval.k1 == 2.0


@pytest.mark.parametrize("what", ["fifo", "folder", "dangling"])
def test_a_workspace_config_that_is_not_a_file_is_said_not_ignored(tmp_path, what):
    """It was silently ignored (the defaults used): now one line naming it, and nothing removed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = ws / "config.toml"
    needle = {"fifo": "is a pipe (FIFO)", "folder": "is a folder", "dangling": "is a symbolic link to a missing file"}[what]
    if what == "folder":
        cfg.mkdir()
    elif what == "dangling":
        cfg.symlink_to(ws / "gone.toml")
    feeder = _Feeder(cfg, b"[retrieval]\nk1 = 2\n") if what == "fifo" else contextlib.nullcontext()
    with feeder:
        with pytest.raises(ConfigError) as ei:
            Workspace.open(ws)
        assert str(ei.value).startswith(f"{ws.resolve() / 'config.toml'}: {needle}"), str(ei.value)
        _one_line(run_main("search", "-w", ws, "twin"), "config.toml: " + needle)
    assert what != "fifo" or not feeder.fed
    assert os.path.lexists(cfg) and (what != "folder" or cfg.is_dir())


# -- eval: files and values (items 5 and 8) -----------------------------------------------------------

ir_measures = pytest.importorskip("ir_measures")

from chitragupta.engine.evaluation import (GRADE_MAX, GRADE_MIN, evaluate, read_qrels,  # noqa: E402
                                           read_trec_run)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("grade", ["99999999999999999999999", str(GRADE_MAX + 1), str(GRADE_MIN - 1),
                                   "9" * 5000, str(2**31 - 1)])  # the last: 16 GB inside trec_eval
def test_a_grade_pytrec_eval_cannot_take_is_refused_with_its_line(tmp_path, grade):
    q = _write(tmp_path / "qrels.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t{grade}\n")
    with pytest.raises(CorpusError) as ei:
        read_qrels(q)
    msg = str(ei.value)
    assert msg.startswith(f"{q}:3: relevance ") and "outside" in msg and len(msg) < 300, msg
    run = _write(tmp_path / "run", "q1 Q0 d1 1 2 t\nq1 Q0 d2 2 1 t\n")
    _one_line(run_main("eval", "--qrels", q, run), f"{q}:3: relevance", "outside")


def test_grades_at_the_bounds_are_evaluated(tmp_path):
    q = read_qrels(_write(tmp_path / "qrels", f"q1 0 d1 {GRADE_MAX}\nq1 0 d2 {GRADE_MIN}\n"))
    ev = evaluate({"q1": ["d2", "d1"]}, q.judgments, ["MRR@10", "R@100"])
    assert ev.means == {"MRR@10": 0.5, "R@100": 1.0}


@pytest.mark.parametrize("qrels, run, needle", [
    ({"q": {"d": 2**64}}, {"q": ["d"]}, "an integer of 65 bits"),
    ({"q": {"d": "1"}}, {"q": ["d"]}, "is a str"),
    ({"q": {"d": 1.5}}, {"q": ["d"]}, "is a float"),
])
def test_evaluate_refuses_grades_a_library_caller_passes(qrels, run, needle):
    with pytest.raises(UsageError, match=needle):
        evaluate(run, qrels, ["nDCG@10"])


def test_ids_pytrec_eval_would_crash_on_are_refused():
    """A NUL or a lone surrogate in an id crashed pytrec_eval (a segfault): checked in a subprocess, so a
    regression fails this test instead of ending the run."""
    script = r"""
from chitragupta.engine.evaluation import evaluate
from chitragupta.errors import UsageError
for qrels, run in [({"q": {"\udcff": 1}}, {"q": ["\udcff"]}), ({"q": {"d": 1}}, {"q": ["d\x00x", "d\x00y"]}),
                   ({"q\x00a": {"d": 1}}, {"q\x00a": ["d"]}), ({"q": {"d\x00x": 1, "d\x00y": 1}}, {"q": ["d"]})]:
    try:
        evaluate(run, qrels, ["nDCG@10", "R@100"])
        print("accepted")
    except UsageError as err:
        print("refused", err)
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, (p.returncode, p.stderr)
    lines = p.stdout.splitlines()
    assert len(lines) == 4 and all(line.startswith("refused ") for line in lines), p.stdout
    assert "lone surrogate" in lines[0] and all("NUL character" in line for line in lines[1:])


def test_nul_in_a_qrels_or_run_id_names_its_line(tmp_path):
    q = tmp_path / "qrels"
    q.write_bytes(b"q1 0 d1 1\nq1 0 d\x00x 1\n")
    with pytest.raises(CorpusError, match=r"qrels:2: the doc id .* holds a NUL character"):
        read_qrels(q)
    r = tmp_path / "run"
    r.write_bytes(b"q1 Q0 d1 1 2 t\nq\x001 Q0 d1 1 2 t\n")
    with pytest.raises(CorpusError, match=r"run:2: the query id .* holds a NUL character"):
        read_trec_run(r)


@pytest.mark.parametrize("what, needle", [("folder", "is a folder"), ("device", "is a character device")])
def test_qrels_and_run_refused_by_what_they_are(tmp_path, what, needle):
    bad = tmp_path if what == "folder" else Path("/dev/null")  # /dev/null read whole: "no judgments"
    good_q = _write(tmp_path / "qrels", "q1 0 d1 1\n")
    good_r = _write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    with pytest.raises(CorpusError, match=f"{needle}, not a qrels file"):
        read_qrels(bad)
    with pytest.raises(CorpusError, match=f"{needle}, not a run file"):
        read_trec_run(bad)
    _one_line(run_main("eval", "--qrels", bad, good_r), f"{needle}, not a qrels file")
    _one_line(run_main("eval", "--qrels", good_q, bad), f"{needle}, not a run file")


def test_a_qrels_pipe_is_read_once(tmp_path):
    fifo = tmp_path / "qrels.fifo"
    run = _write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    with _Feeder(fifo, b"q1 0 d1 1\n"):
        p = run_main("eval", "--qrels", fifo, run, "--metrics", "MRR@10")
    assert p.returncode == 0 and p.stdout.split() == ["MRR@10", "1.0000"], p.stderr


def test_a_line_without_end_stops_the_read(tmp_path):
    from chitragupta.engine.evaluation import MAX_LINE_BYTES

    q = tmp_path / "qrels"
    with open(q, "wb") as f:
        f.write(b"q1 0 d1 1\n")
        f.write(b"x" * (MAX_LINE_BYTES + 10))
    with pytest.raises(CorpusError) as ei:
        read_qrels(q)
    assert str(ei.value).startswith(f"{q}:2: a line longer than 1 MiB") and len(str(ei.value)) < 200


def test_a_5000_digit_rank_is_a_short_line(tmp_path):
    r = _write(tmp_path / "run", "q1 Q0 d1 " + "9" * 5000 + " 2 t\n")
    with pytest.raises(CorpusError) as ei:
        read_trec_run(r)
    assert "rank '9999" in str(ei.value) and len(str(ei.value)) < 300


# -- /dev/zero, under a memory limit -------------------------------------------------------------------

@pytest.mark.slow  # a subprocess
def test_dev_zero_everywhere_is_one_line_and_a_bounded_read(tmp_path):
    """``eval --qrels /dev/zero``, ``eval /dev/zero``, ``eval -`` fed from /dev/zero, ``--config
    /dev/zero`` and a store manifest linked to /dev/zero: each one line, read (at most) a line's worth."""
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "manifest.json").symlink_to("/dev/zero")
    run = _write(tmp_path / "run", "q1 Q0 d1 1 2 t\n")
    qrels = _write(tmp_path / "qrels", "q1 0 d1 1\n")
    script = f"""
import contextlib, io, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from chitragupta.cli.main import main
from chitragupta.engine.config import load_config
from chitragupta.enrich.store import load_store
from chitragupta.errors import ChitraguptaError

def cli(*argv, stdin=None):
    err = io.StringIO()
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(open(stdin, "rb"))
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(list(argv))
    print("cli", rc, err.getvalue().count(chr(10)), err.getvalue().strip())

def lib(call):
    try:
        call()
        print("lib accepted")
    except ChitraguptaError as err:
        print("lib", type(err).__name__, err)

cli("eval", "--qrels", "/dev/zero", {str(run)!r})
cli("eval", "--qrels", {str(qrels)!r}, "/dev/zero")
cli("eval", "--qrels", {str(qrels)!r}, "-", stdin="/dev/zero")
cli("search", "-w", {str(tmp_path)!r}, "--config", "/dev/zero", "twin")
lib(lambda: load_store(Path({str(folder)!r})))
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-2000:])
    lines = p.stdout.splitlines()
    assert len(lines) == 5, p.stdout
    assert lines[0] == "cli 1 1 error: /dev/zero: is a character device, not a qrels file"
    assert lines[1] == "cli 1 1 error: /dev/zero: is a character device, not a run file"
    assert lines[2] == "cli 1 1 error: -:1: a line longer than 1 MiB (not a run file?); stopped reading there"
    assert lines[3] == "cli 1 1 error: /dev/zero: is a character device, not a config file (a TOML file)"
    assert lines[4].startswith("lib StoreCorrupt manifest.json cannot be the store's manifest") \
        and "symbolic link" in lines[4], lines[4]


# -- the embedding store's manifest (item 5) ----------------------------------------------------------

def _store(tmp_path) -> Path:
    pytest.importorskip("faiss")
    import numpy as np

    from chitragupta.enrich.store import Store, save_store

    vecs = np.eye(4, dtype=np.float32)[:2]
    folder = tmp_path / "content" / "faiss" / "m-1"
    save_store(folder, Store(model="m", dim=4, recipe={"words": 200}, citekeys=["k0"], titles=[""], hashes=["h"],
                             texts=["a b c d"], vectors=vecs, chunk_doc=np.zeros(2, dtype=np.int32),
                             chunk_no=np.arange(2, dtype=np.int32), char_start=np.array([0, 2], dtype=np.int64),
                             char_end=np.array([3, 7], dtype=np.int64)))
    return folder


def test_a_store_manifest_fifo_is_corrupt_not_a_hang(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = _store(tmp_path)
    (folder / "manifest.json").unlink()
    with _Feeder(folder / "manifest.json", b"{}") as feeder:
        with pytest.raises(StoreCorrupt, match=r"manifest.json is a pipe \(FIFO\)"):
            load_store(folder)
    assert not feeder.fed


def test_a_store_array_fifo_is_corrupt_not_a_hang(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = _store(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["chunk_no.npy"]["bytes"] = 0  # the manifest agrees with what a FIFO's size reads
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "chunk_no.npy").unlink()
    with _Feeder(folder / "chunk_no.npy", b"\x93NUMPY") as feeder:
        with pytest.raises(StoreCorrupt, match=r"chunk_no.npy .*is a pipe \(FIFO\)"):
            load_store(folder)
    assert not feeder.fed


def test_a_store_manifest_linked_to_a_device_is_corrupt(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = _store(tmp_path)
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").symlink_to("/dev/null")
    with pytest.raises(StoreCorrupt, match="manifest.json is a symbolic link"):
        load_store(folder)


@pytest.mark.parametrize("edit, needle", [
    (lambda m: m.__setitem__("count", "two"), "count is not a count"),
    (lambda m: m.__setitem__("dim", [4]), "dim is not a count"),
    (lambda m: m.__setitem__("files", [1]), "lists no files"),
    (lambda m: m.pop("model"), "names no model"),
    (lambda m: m["files"]["vectors.npy"].__setitem__("bytes", "12"), "no byte length and checksum"),
    (lambda m: m.__setitem__("recipe", 3), "recipe is not an object"),
])
def test_store_manifest_fields_of_the_wrong_type_are_corrupt(tmp_path, edit, needle):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = _store(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreCorrupt, match=needle):
        load_store(folder)


def test_a_deeply_nested_store_manifest_is_corrupt(tmp_path):
    from chitragupta.enrich.store import StoreCorrupt, load_store

    folder = _store(tmp_path)
    (folder / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(StoreCorrupt, match="not JSON"):
        load_store(folder)


# -- sweep (items 3, 4 and 10) ------------------------------------------------------------------------

from chitragupta.engine.sweep import check_out_dir, parse_range, run_sweep, write_sweep  # noqa: E402


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from chitragupta.engine.search import Retriever

    tmp = tmp_path_factory.mktemp("hostile_sweep")
    docs = random_docs(7, 50)
    ws = make_workspace(tmp, docs)
    Retriever.open(ws)
    queries = [{"_id": f"q{i}", "text": docs[i * 3]["text"][:40] or "twin model"} for i in range(8)]
    write_jsonl(tmp / "queries.jsonl", queries)
    _write(tmp / "qrels.tsv", "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{docs[i * 3]['_id']}\t1\n"
                                                                       for i in range(8)))
    _write(tmp / "other.tsv", "query-id\tcorpus-id\tscore\nx1\td0001\t1\nx2\td0002\t2\n")
    return {"ws": ws, "tmp": tmp, "queries": {q["_id"]: q["text"] for q in queries},
            "qrels": read_qrels(tmp / "qrels.tsv").judgments}


@pytest.mark.parametrize("text, name, high, needle", [
    ("1e308", "k1", None, "k1 must be in [0, 1000], got 1e+308"),
    ("0:1e308:1e-308", "k1", None, "k1 must be in [0, 1000], got 1e+308"),
    ("0:1000:1e-308", "k1", None, "more than the 10,000"),
    ("0:1:5e-324", "b", 1.0, "more than the 10,000"),
    ("1001", "weight-title", None, "weight-title must be in [0, 1000], got 1001"),
    (",".join(str(i / 100) for i in range(10_001)), "k1", None, "10,001 values, more than the 10,000"),
])
def test_ranges_keep_to_the_configs_bounds_and_a_countable_grid(text, name, high, needle):
    kwargs = {"high": high} if high is not None else {}
    with pytest.raises(UsageError) as ei:
        parse_range(text, name, **kwargs)
    assert needle in str(ei.value), str(ei.value)


def test_a_step_finer_than_the_kept_decimals_repeats_no_value():
    values = parse_range("0:1e-9:1e-12", "k1")
    assert values == sorted(set(values)) and len(values) == 11


def test_run_sweep_holds_library_grids_to_the_configs_bounds(toy):
    from chitragupta.engine.search import Retriever

    r = Retriever.open(toy["ws"])
    for kwargs, needle in [({"k1s": [1e308]}, "k1 = 1e+308 cannot be swept; allowed: a number in [0, 1000]"),
                           ({"bs": [1.5]}, "b = 1.5 cannot be swept"),
                           ({"k1s": [float("nan")]}, "k1 = nan cannot be swept"),
                           ({"k1s": [10**400]}, "k1 = 1000000"),
                           ({"titles": [1e308]}, "weight_title = 1e+308 cannot be swept"),
                           ({"abstracts": [-1]}, "weight_abstract = -1 cannot be swept")]:
        args = {"k1s": [1.0], "bs": [0.5], **kwargs}
        with pytest.raises(UsageError) as ei:
            run_sweep(r, toy["queries"], toy["qrels"], args.pop("k1s"), args.pop("bs"), k=10, **args)
        assert needle in str(ei.value) and len(str(ei.value)) < 300, str(ei.value)


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "10"])
def test_run_sweep_checks_k_as_search_does(toy, k):
    from chitragupta.engine.search import Retriever

    with pytest.raises(UsageError, match=r"k must be an integer >= 1"):
        run_sweep(Retriever.open(toy["ws"]), toy["queries"], toy["qrels"], [1.0], [0.5], k=k)


def test_sweep_cli_k_message_is_check_ks(toy, tmp_path):
    t = toy["tmp"]
    _one_line(run_main("sweep", "-w", toy["ws"], "--queries", t / "queries.jsonl", "--qrels", t / "qrels.tsv",
                       "--k1", "1", "--b", "0.5", "--k", "0", "--out", tmp_path / "o"),
              "--k must be an integer >= 1, got 0")


def test_sweep_out_on_a_symlink_loop_is_one_line(toy, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError, match="symbolic link loop"):
        check_out_dir(loop)
    with pytest.raises(UsageError, match="symbolic link loop"):
        check_out_dir(loop / "sub")
    t = toy["tmp"]
    _one_line(run_main("sweep", "-w", toy["ws"], "--queries", t / "queries.jsonl", "--qrels", t / "qrels.tsv",
                       "--k1", "1", "--b", "0.5", "--out", loop), f"--out {loop}: a symbolic link loop")
    assert loop.is_symlink()


def test_sweep_with_no_judged_query_is_an_error_and_keeps_the_old_output(toy, tmp_path):
    from chitragupta.engine.search import Retriever

    t = toy["tmp"]
    out = tmp_path / "out"
    base = ("sweep", "-w", toy["ws"], "--queries", t / "queries.jsonl", "--k1", "1,2", "--b", "0.5,0.75",
            "--k", "10", "--out", out)
    assert run_main(*base, "--qrels", t / "qrels.tsv").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["sweep-nDCG10.csv", "sweep-nDCG10.md", "sweep-nDCG10.png"]
    for extra in ((), ("--skip-missing",)):
        _one_line(run_main(*base, "--qrels", t / "other.tsv", *extra),
                  "nothing to sweep: none of the 8 queries has a judgment of grade >= 1", "2 judged queries")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    r = Retriever.open(toy["ws"])
    with pytest.raises(UsageError, match="nothing to sweep"):
        run_sweep(r, toy["queries"], read_qrels(t / "other.tsv").judgments, [1.0], [0.5], k=10)
    with pytest.raises(UsageError, match="the qrels hold no judgment of grade >= 1"):
        run_sweep(r, toy["queries"], {"q1": {"d0001": 0}}, [1.0], [0.5], k=10)


def test_sweep_files_are_never_written_through_a_planted_temp_link(toy, tmp_path):
    from chitragupta.engine.search import Retriever

    res = run_sweep(Retriever.open(toy["ws"]), toy["queries"], toy["qrels"], [1.0], [0.5], k=10)
    out = tmp_path / "out"
    out.mkdir()
    precious = _write(tmp_path / "precious.txt", "keep me")
    (out / f".s.md.{os.getpid()}.tmp").symlink_to(precious)
    paths, _ = write_sweep(res, out, "s")
    assert precious.read_text() == "keep me"
    assert (out / "s.md").read_text().startswith("| k1 \\ b |") and not (out / f".s.md.{os.getpid()}.tmp").exists()
    assert [p.name for p in paths][:2] == ["s.md", "s.csv"]


def test_a_folder_where_a_sweep_file_goes_keeps_every_old_file(toy, tmp_path):
    from chitragupta.engine.search import Retriever
    from chitragupta.errors import OutputError

    res = run_sweep(Retriever.open(toy["ws"]), toy["queries"], toy["qrels"], [1.0, 2.0], [0.5], k=10)
    out = tmp_path / "out"
    write_sweep(res, out, "s")
    (out / "s.png").unlink()
    (out / "s.png").mkdir()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    res2 = run_sweep(Retriever.open(toy["ws"]), toy["queries"], toy["qrels"], [1.0, 3.0], [0.5], k=10)
    with pytest.raises(OutputError, match="s.png: is a folder"):
        write_sweep(res2, out, "s")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == ["s.csv", "s.md", "s.png"]  # no temp file left
