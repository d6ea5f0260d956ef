"""Shared fixtures: small seeded corpora and workspaces the tests build themselves (no ../shared)."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).resolve().parent))

WORDS = ("twin digital model sensor fidelity bridge water leak retrieval ranking query index bm25 vector "
         "climate ocean heat soil microbe yield vaccine cohort llm citation prompt table result method "
         "ai ml dt gpu co control simulation error mean score").split()


def random_docs(seed: int, n: int, vocab: int = 40, max_len: int = 60) -> list[dict]:
    """Seeded BEIR-style records with skewed term frequencies and a spread of lengths."""
    rng = np.random.default_rng(seed)
    words = [WORDS[i % len(WORDS)] + ("" if i < len(WORDS) else str(i)) for i in range(vocab)]
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    docs = []
    for i in range(n):
        length = int(rng.integers(0, max_len))
        body = " ".join(rng.choice(words, size=length, p=p))
        title = " ".join(rng.choice(words, size=int(rng.integers(0, 5))))
        docs.append({"_id": f"d{i:04d}", "title": title, "text": body})
    return docs


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def make_workspace(tmp: Path, records, *, packed: bool = False) -> Path:
    """A workspace imported from ``records`` (not yet indexed); one parsed file a record unless ``packed``
    (tests here reach the files; test_import_packed checks that packs give the same outputs)."""
    from chitragupta.engine.corpus.sync import import_jsonl
    from chitragupta.engine.workspace import Workspace

    ws_dir = tmp / "ws"
    ws_dir.mkdir(parents=True, exist_ok=True)
    src = write_jsonl(tmp / "corpus.jsonl", records)
    import_jsonl(Workspace.open(ws_dir), src, packed=packed)
    return ws_dir


SAMPLE_QUERIES = ["twin model sensor", "ocean heat soil", "dt ml gpu", "retrieval ranking bm25 query", "the of a",
                  "zzzz unknownword", "climate", "vaccine cohort llm citation prompt table result"]


def indexed_workspace(tmp: Path, config: str = "", n: int = 80, seed: int = 7, vocab: int = 50):
    """A ``Workspace`` of ``n`` seeded random documents with ``config`` written, its document index built."""
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.workspace import Workspace

    root = make_workspace(tmp, random_docs(seed, n, vocab=vocab))
    if config:
        (root / "config.toml").write_text(config)
    ws = Workspace.open(root)
    refresh(ws, unit="document")
    return ws


STORE_QUERY = "twin model sensor"


def built_workspace(tmp: Path, n: int = 60, seed: int = 41, config: str = ""):
    """The indexed workspace the index-store and lock cases damage (seeded, vocabulary 40)."""
    return indexed_workspace(tmp, config, n, seed, vocab=40)


def numba_hits(ws, query: str = STORE_QUERY, k: int = 8) -> list[tuple[str, float]]:
    """(citekey, score) of a numba search: what a damaged or locked workspace must still answer."""
    from chitragupta.engine.search import Retriever

    return [(h.citekey, h.score) for h in Retriever.open(ws, backend="numba").search(query, k=k).hits]


def make_stale(ws, tmp: Path) -> None:
    """Import ``built_workspace``'s corpus again with one text changed: its index is then older than the ledger."""
    from chitragupta.engine.corpus.sync import import_jsonl

    docs = random_docs(41, 60)
    docs[3]["text"] += " quasarword"
    import_jsonl(ws, write_jsonl(tmp / "corpus.jsonl", docs))


def enospc(*_a, **_k):
    """A stand-in for a write call on a full disk."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def rewrite_index_array(gen: Path, name: str, arr: np.ndarray) -> None:
    """Replace an index array and keep the generation's manifest consistent with it (size, shape, CRC):
    damage that only the content checks can catch."""
    import zlib

    p = gen / f"{name}.npy"
    np.save(p, arr, allow_pickle=False)
    m = json.loads((gen / "manifest.json").read_text())
    m["files"][name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "bytes": p.stat().st_size,
                        "crc32": zlib.crc32(p.read_bytes())}
    (gen / "manifest.json").write_text(json.dumps(m))


def run_cli(*args, cwd=None, env=None, check=False) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", *map(str, args)], cwd=cwd or ROOT,
                       capture_output=True, text=True, env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def run_main(*args) -> subprocess.CompletedProcess:
    """``run_cli`` in this process (``chitragupta.cli.main.main``): the same exit status and output
    without a Python start and numba's first load (~0.8 s), for tests of messages and flags."""
    import contextlib
    import io

    from chitragupta.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory) -> Path:
    """The built-in sample corpus as PDFs + BibTeX, synced and indexed once per session."""
    from chitragupta.engine.corpus.sync import sync
    from chitragupta.engine.demo.build import build_sources
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.workspace import Workspace

    root = tmp_path_factory.mktemp("demo")
    build_sources(root)
    ws = Workspace.open(root)
    sync(ws)
    refresh(ws)
    return root


def write_lines(path: Path, *lines: str) -> Path:
    """``path`` holding each of ``lines`` and a newline after each."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def imported_workspace(tmp_path: Path, n: int = 6) -> Path:
    """An imported and indexed workspace of ``n`` small documents (all holding "twin")."""
    src = write_lines(tmp_path / "c.jsonl", *(json.dumps({"_id": f"d{i}", "title": f"title {i}",
                                                     "text": f"twin model number {i} sensor"}) for i in range(n)))
    ws = tmp_path / "ws"
    assert run_main("import", "-w", ws, src).returncode == 0
    assert run_main("index", "-w", ws).returncode == 0
    return ws


PROGRESS_LINE = re.compile(r"^[\w ]+: (\d+ \w+ to do|\d+/\d+ \w+ \(\d+%\).*)$")


def one_error_line_after_progress(p, *needles: str) -> None:
    """As ``one_error_line``, progress lines (stderr not a terminal) allowed before the error line."""
    assert p.returncode == 1, (p.returncode, p.stderr)
    # progress lines (stderr not a terminal) may come first; then exactly one error line
    err = "".join(line + "\n" for line in p.stderr.splitlines() if not PROGRESS_LINE.match(line))
    assert err.startswith("error: ") and err.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    for needle in needles:
        assert needle in p.stderr, (needle, p.stderr)


PAPER_BODY = "".join(f"Paragraph {i} of the paper body, discussing digital twin fidelity at length.\n" for i in range(40))
PAPER_REFS = "".join(f"[{i}] A. Author and B. Author. {2000 + i}. A cited work. In Proc. of a venue, pp. 1-10.\n"
               for i in range(1, 25))


def one_error_line(p, *needles):
    """A CLI run that failed with exit 1 and exactly one ``error: ...`` line holding every needle."""
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr


class Feeder:
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


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the block takes longer than ``seconds``."""
    def boom(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (blocked on a FIFO?)")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def bib_workspace_at(root: Path, bib: str, config: str = ""):
    """A workspace at ``root`` whose papers/bibliography.bib is ``bib`` (and config.toml ``config``)."""
    from chitragupta.engine.workspace import Workspace

    (root / "papers").mkdir(parents=True, exist_ok=True)
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    if config:
        (root / "config.toml").write_text(config, encoding="utf-8")
    return Workspace.open(root)


def ledger_rows(ws) -> dict:
    """citekey -> the ledger row of every entry."""
    from chitragupta.engine.corpus.ledger import Ledger

    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}


def pytest_collection_modifyitems(config, items):
    if SHARED.is_dir():
        return
    skip = pytest.mark.skip(reason="../shared is absent (real data tests run only in the project checkout)")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


def local_ray(*needs: str):
    """A local two-CPU Ray for a module's tests (a generator for a module-scoped fixture to ``yield from``);
    ``needs``: further modules the tests import, each skipped when absent."""
    import logging

    ray = pytest.importorskip("ray")
    for name in needs:
        pytest.importorskip(name)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level=logging.WARNING,
             log_to_driver=False)
    yield ray
    ray.shutdown()
