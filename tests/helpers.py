"""Helpers the tests share that are not fixtures (fixtures live in conftest.py): small seeded corpora and
workspaces the tests build themselves (no ../shared), subprocess runners, and things built locally so that no
test downloads."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from chitragupta.engine.index import segments
from chitragupta.engine.index.manage import doc_folder
from chitragupta.engine.index.source import fingerprints
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.sync import import_jsonl as _import_jsonl
from chitragupta.engine.library.workspace import Workspace
from chitragupta.kernels import Postings, QueryBatch

_VOCAB = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a of and in to is for on with by paper study model data "
          "method result effect cell protein gene water heat ocean vaccine twin digital sensor query "
          "retrieval ranking index citation patient risk cancer treatment").split()


def age_texts(root: Path, seconds: float = 60.0) -> None:
    """Set the workspace's parsed-text folders a minute into the past, so that the warm engines trust their
    stamp (one written within the last 2 s is not trusted, and every call would reopen). The packs folder of
    an import is part of that stamp too."""
    import os
    import time

    old = time.time() - seconds
    for folder in ("parsed", "parsed/packs"):
        path = Path(root) / "content" / folder
        if path.is_dir():
            os.utime(path, (old, old))


def tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """A tiny randomly initialised BERT cross-encoder (2 layers, hidden 32, one output logit) and its
    (fast) WordPiece tokenizer over a small fixed vocabulary, saved to ``folder`` with save_pretrained. Built
    locally: nothing is downloaded. Its scores are arbitrary but deterministic for a seed."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(_VOCAB) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(str(folder))
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(_VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).eval().save_pretrained(str(folder))
    return folder


ROOT = Path(__file__).resolve().parents[1]

SHARED = ROOT.parent / "shared"

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
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

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
    from chitragupta.engine.library.workspace import Workspace

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
    from chitragupta.engine.search.bm25 import Retriever

    return [(h.citekey, h.score) for h in Retriever.open(ws, backend="numba").search(query, k=k).hits]

def make_stale(ws, tmp: Path) -> None:
    """Import ``built_workspace``'s corpus again with one text changed: its index is then older than the ledger."""
    from chitragupta.engine.library.sync import import_jsonl

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
    from chitragupta.engine.library.workspace import Workspace

    (root / "papers").mkdir(parents=True, exist_ok=True)
    (root / "papers" / "bibliography.bib").write_text(bib, encoding="utf-8")
    if config:
        (root / "config.toml").write_text(config, encoding="utf-8")
    return Workspace.open(root)

def ledger_rows(ws) -> dict:
    """citekey -> the ledger row of every entry."""
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws.ledger_path) as led:
        return {r.citekey: r for r in led.rows()}

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


# -- moved from test modules ------------------------------------------------------------


# from test_citations_graph
CITING_BODY = "We study retrieval models for scientific text and compare them with care. " * 30


# from test_citations_graph
LSTM = "S. Hochreiter and J. Schmidhuber. Long short-term memory. Neural Computation, 9(8):1735-1780, 1997."


# from test_citations_graph
RESNET = "K. He, X. Zhang, S. Ren, and J. Sun. Deep residual learning for image recognition. In CVPR, 2016."


# from test_citations_graph
def citing_doc(key, title, year, refs):
    text = CITING_BODY + "\n\nReferences\n\n" + "".join(f"[{i}] {r}\n" for i, r in enumerate(refs, start=1))
    return {"_id": key, "title": title, "text": text, "metadata": {"year": year}}


# from test_citations_graph
DOCS = [
    citing_doc("vaswani2017", "Attention Is All You Need", 2017, [RESNET, LSTM]),
    citing_doc("devlin2019", "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding", 2019,
         ["A. Vaswani, N. Shazeer, and N. Parmar. Attention is all you need. In NIPS, 2017.", RESNET, LSTM]),
    citing_doc("liu2019", "RoBERTa: A Robustly Optimized BERT Pretraining Approach", 2019,
         ["J. Devlin, M. Chang, K. Lee, and K. Toutanova. BERT: Pre-training of deep bidirectional transformers "
          "for language understanding. In NAACL, 2019.", "A. Vaswani et al. Attention is all you need. "
          "In Advances in Neural Information Processing Systems, 2017.", LSTM]),
    citing_doc("new2021", "A Later Study of Retrieval Things", 2021,
         ["J. Devlin, M. Chang, K. Lee, and K. Toutanova. BERT: Pre-training of deep bidirectional transformers "
          "for language understanding. In NAACL, 2019.", RESNET]),
]


# from test_serve
def server_params(root: Path, *extra: str):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "chitragupta.cli.main", "serve", "-w", str(root),
                                                               *extra],
                                 env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")})


# from test_serve
def drive_server(root: Path, script, *extra: str):
    """Run ``script(client)`` (a coroutine function) against a served workspace; its return value."""
    from mcp import Client

    async def main():
        async with Client(server_params(root, *extra)) as client:
            return await script(client)

    return asyncio.run(main())


# from test_serve
def tool_json(result) -> dict:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = json.loads(result.content[0].text)  # the same JSON as text, for clients without structured content
    assert text == result.structured_content
    return result.structured_content


# from test_import
def import_jsonl(ws, path, progress=None):
    """The per-file layout (one ``.txt`` a record), which every test here pins: what an import wrote before
    packs, and still writes when asked (``packed=False``). The packed layout, the default, is pinned by
    ``tests/engine/library/test_texts.py``."""
    return _import_jsonl(ws, path, progress, packed=False)


# from test_enrich
TOPICS = {
    "ocean": ("Sea surface temperatures rose across the North Atlantic as the ocean absorbed excess heat from "
              "greenhouse warming. Marine heatwaves bleached coral reefs and pushed fish populations toward the "
              "poles. Warmer water holds less oxygen, and the deep ocean stores most of the added heat."),
    "vaccine": ("Childhood vaccination programmes reduced measles incidence in every region studied. The cohort "
                "study followed infants who received two doses of the vaccine and measured their antibody "
                "response over five years."),
    "bridge": ("A digital twin of the suspension bridge combined strain gauge sensors with a finite element model "
               "to track fatigue damage in the steel cables, updating the simulation as traffic loads changed."),
    "protein": ("Cryo-electron microscopy resolved the structure of the membrane protein, revealing how the ion "
                "channel opens when its voltage sensor moves and potassium ions pass through the pore."),
    "llm": ("Large language models often fabricate citations. Retrieval augmented generation grounds each answer "
            "in documents returned by a search engine, so every claim can be traced to a source."),
    "soil": ("Crop yields in the field trial depended on soil nitrogen and on the microbes living around plant "
             "roots; fertiliser raised the harvest only where rainfall was sufficient."),
}


# from test_enrich
def topic_words(text: str, n: int) -> str:
    """``text`` repeated to exactly ``n`` words."""
    base = text.split()
    return " ".join(base[i % len(base)] for i in range(n))


# from test_enrich
def corpus_records() -> list[dict]:
    """Seven documents, 14 chunks: one long ocean paper (3 chunks), a mixed ocean/soil one, one per topic."""
    recs = [{"_id": "oceanlong", "title": "Ocean heat content and marine heatwaves",
             "text": topic_words(TOPICS["ocean"], 500)},
            {"_id": "mixed", "title": "Field notes",
             "text": topic_words(TOPICS["soil"], 120) + " " + topic_words(TOPICS["ocean"], 60)}]
    for key in ("vaccine", "bridge", "protein", "llm", "soil"):
        # bridge 40 words longer: 3 chunks under the model's window as under the word rule (472 word pieces)
        n = 150 + 40 * len(key) + (40 if key == "bridge" else 0)
        recs.append({"_id": key, "title": f"A study of {key}", "text": topic_words(TOPICS[key], n)})
    return recs


# from test_enrich
def import_records(root: Path, records, config: str = "", *, packed: bool = True) -> Path:
    """``records`` imported into a workspace at ``root``: packed texts (import's default), or one parsed
    file per record (``packed=False``, for a test that edits a parsed file on disk)."""
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    root.mkdir(parents=True, exist_ok=True)
    if config:
        (root / "config.toml").write_text(config, encoding="utf-8")
    import_jsonl(Workspace.open(root), write_jsonl(root.parent / f"{root.name}.jsonl", records), packed=packed)
    return root


# from test_enrich
def cli_main(*argv) -> int:
    from chitragupta.cli.main import main

    return main([str(a) for a in argv])


# from test_enrich
def first_store(root: Path):
    from chitragupta.enrich.store import load_store

    folders = sorted((root / "content" / "faiss").iterdir())
    return load_store(folders[0]), folders


# from test_enrich_resume
TOTAL = 17


# from test_enrich_resume
def block_stream(encoder, size=3, stop_after=None, calls=None):
    """An EncodeStream: ``encoder`` on ``size`` texts at a time; KeyboardInterrupt when asked for block
    ``stop_after + 1``. ``calls`` collects the number of texts each stream was given."""

    def stream(texts):
        if calls is not None:
            calls.append(len(texts))
        for i, lo in enumerate(range(0, len(texts), size)):
            if stop_after is not None and i == stop_after:
                raise KeyboardInterrupt
            yield encoder.encode_block(texts[lo:lo + size])

    return stream


# from test_bench
def random_run(seed, n_q=40, n_d=60):
    rng = np.random.default_rng(seed)
    qrels, run, scored = {}, {}, {}
    for q in range(n_q):
        qid = f"q{q}"
        rel_docs = rng.choice(n_d, rng.integers(1, 6), replace=False)
        qrels[qid] = {f"d{d}": int(rng.integers(1, 4)) for d in rel_docs}
        ranked = rng.permutation(n_d)[: rng.integers(0, 40)]
        run[qid] = [f"d{d}" for d in ranked]
        # strictly decreasing scores so the evaluator sorts exactly like our rank order
        scored[qid] = {f"d{d}": float(len(ranked) - i) for i, d in enumerate(ranked)}
    return qrels, run, scored


# from test_passages
LONG_TEXT = "the digital twin of the bridge deck streams strain data to a finite element model every minute"


# from test_passages
def sidecar_item(text, label="text", page=None):
    return {"text": text, "label": label, "page": page}


# from test_passages
PAPERS = {
    "alpha2020twin": [
        sidecar_item("Alpha: a digital twin for bridges", "title", 1), sidecar_item("Abstract", "section_header", 1),
        sidecar_item(LONG_TEXT + " and calibrates stiffness weekly for the operator", "text", 1),
        sidecar_item("1 Method", "section_header", 2),
        sidecar_item("| sensor | rate |\n|---|---|\n| strain | 1 Hz |\n| tilt | 10 Hz |", "table", 2),
        sidecar_item("We compare the twin with inspection records over three winters of freeze thaw cycles on the deck", "text", 3),
        sidecar_item("short line", "text", 3),
        sidecar_item("References", "section_header", 4),
        sidecar_item("[1] Okafor C. Soil microbiome yield vaccination cohort ocean heat content. 2019.", "list_item", 4),
    ],
    "beta2021soil": [
        sidecar_item("Soil microbes and yield", "title", 1),
        sidecar_item("Soil microbiome composition shifts after biochar amendment raising maize yield across twelve field plots", "text", 1),
        sidecar_item("Nitrogen fixing bacteria rose in amended plots while fungal diversity stayed level across all seasons", "text", 2),
        sidecar_item("Yield gains were largest on sandy plots where water retention improved most under the biochar amendment", "text", 2),
        sidecar_item("A fourth paragraph about soil microbiome and yield in maize under biochar amendment in dry years", "text", 3),
        sidecar_item("7 References", "section_header", 3),
        sidecar_item("[1] Digital twin of a bridge deck with strain sensors. 2020.", "list_item", 3),
    ],
}


# from test_index_jobs
def npy_bytes(ws: Workspace) -> dict[str, bytes]:
    """Every array file of the current generation (and its manifest but the time and the ledger's stamp, which
    holds the ledger's own random id), as bytes."""
    folder = doc_folder(ws)
    gen = folder / (folder / "CURRENT").read_text().strip()
    got = {p.name: p.read_bytes() for p in sorted(gen.glob("*.npy"))}
    manifest = json.loads((gen / "manifest.json").read_text())
    del manifest["written"]  # (the time it was written)
    manifest.pop("metadata_stamp", None)
    got["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    return got


# from test_index_jobs
def assert_same_bytes(a: dict[str, bytes], b: dict[str, bytes]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


# from test_tokenize_fast
TOKEN_WORDS = ["twin", "model", "the", "of", "a", "x", "9", "b2b", "summaries", "sum", "data", "base", "email", "ocean",
         "heat", "soil", "and", "is", "co2", "ai_model", "naïve", "Straße", "İstanbul", "\u212aelvin", "ǅemal",
         "ﬁnal", "日本語", "😀", "MiXeD", "UPPER", "x86-64", "e-", "-mail", "state-of-the-", "art", "non-", "linear"]


# from test_tokenize_fast
TOKEN_SEPS = [" ", " ", " ", "\n", "-\n", "-", ", ", ". ", "\t", "\f", "  ", "/", "_", "\u00a0", "\u2028"]


# from test_tokenize_fast
def token_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(TOKEN_WORDS) + rng.choice(TOKEN_SEPS) for _ in range(n))


# from test_tokenize_fast
def token_docs(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        kind = i % 7
        title = "" if kind == 0 else token_text(rng, rng.randint(1, 8))
        text = {1: "", 2: "the of a and is", 3: "x y z 1 2"}.get(kind, token_text(rng, rng.randint(0, 300)))
        if kind == 4:  # a reference list the plain-text cut blanks, an appendix after it
            text += ("\n\nReferences\n" + "".join(f"[{j}] A. Author. Title {j}. Journal, 19{50 + j}.\n" for j in range(30))
                     + "\nAppendix A: Proofs\n" + token_text(rng, 80))
        if kind == 5:
            text = "sum-\nmaries here; summaries there. e-\nmail and email, data-\nbase beside data and base " + text
        docs.append({"_id": f"d{i:03d}", "title": title, "text": text})
    return docs


# from test_tokenize_fast
def sidecar_workspace(tmp_path, n: int = 120, seed: int = 3) -> Workspace:
    root = make_workspace(tmp_path, token_docs(seed, n))
    ws = Workspace.open(root)
    parsed = sorted(ws.parsed_dir.glob("*.txt"))
    # sidecars: one with an Abstract heading and a reference list, one that is not the documented shape
    items = [{"text": "A Title", "label": "title", "page": 1}, {"text": "Abstract", "label": "section_header", "page": 1},
             {"text": "naïve sum-\nmaries of İstanbul twins", "label": "text", "page": 1},
             {"text": "1 Introduction", "label": "section_header", "page": 1},
             {"text": "summaries of ocean heat, e-mail", "label": "text", "page": 2},
             {"text": "References", "label": "section_header", "page": 3},
             {"text": "[1] B. Author. Soil. 1999.", "label": "list_item", "page": 3}]
    parsed[8].with_suffix(".passages.json").write_text(json.dumps(items))
    parsed[9].with_suffix(".passages.json").write_text(json.dumps({"not": "a list"}))
    parsed[10].unlink()  # the ledger says parsed; the text is gone
    parsed[11].write_text("")  # an empty body
    return ws


# from test_tokenize_fast
def doc_sources(ws: Workspace):
    with Ledger(ws.ledger_path, create=False) as ledger:
        rows = ledger.index_view()
    return fingerprints(ws.root, rows)[2]


# from test_tokenize_fast
def assert_same_block(a: segments.Block, b: segments.Block) -> None:
    assert a.keys == b.keys
    assert np.array_equal(a.units, b.units) and a.units.dtype == b.units.dtype
    assert np.array_equal(a.flags, b.flags) and a.notes == b.notes and a.cuts == b.cuts
    assert a.streams.keys() == b.streams.keys()
    for name in a.streams:
        for x, y in zip(a.streams[name], b.streams[name]):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
    for f in ("seq", "seq_units", "seq_starts"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), f


# from test_index
def arrays_of(index):
    return {
        "citekeys": index.citekeys.to_list(), "vocab": index.vocab.to_list(),
        "indptr": np.asarray(index.postings.indptr), "indices": np.asarray(index.postings.indices),
        "tf": np.asarray(index.postings.tf), "doc_len": np.asarray(index.postings.doc_len),
        "fingerprints": np.asarray(index.fingerprints), "flags": np.asarray(index.flags),
    }


# from test_index
def assert_identical(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], list):
            assert a[k] == b[k], k
        else:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k


# from test_serve_wire
WAIT_S = 120  # how long a reply may take before the test gives up (a guard against a hang, not a timing)


# from test_serve_wire
INIT_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


# from test_serve_wire
class RawServer:
    """A ``chitragupta serve`` subprocess driven with raw lines; every stdout line kept in order."""

    def __init__(self, argv: list[str], env: dict | None = None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
        self.lines: list[bytes] = []  # every stdout line, as written
        self.messages: list = []  # the same lines parsed
        self._new: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err: list[bytes] = []
        self._err_reader = threading.Thread(target=lambda: self._err.extend(self.proc.stderr), daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                msg = ("NOT JSON", line)
            self.messages.append(msg)
            self._new.put(msg)
        self._new.put(None)

    def send(self, line: str | bytes | dict) -> None:
        if isinstance(line, dict):
            line = json.dumps(line)
        data = line if isinstance(line, bytes) else line.encode("utf-8")
        self.proc.stdin.write(data + (b"" if data.endswith(b"\n") else b"\n"))
        self.proc.stdin.flush()

    def request(self, id_, method: str, params: dict | None = None) -> None:
        msg = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def next(self):
        """The next message written (after those already taken)."""
        msg = self._new.get(timeout=WAIT_S)
        assert msg is not None, f"the server closed stdout; stderr: {self._stderr()}"
        return msg

    def reply(self, id_):
        """The reply to request ``id_`` (messages in between are kept in ``messages``)."""
        for msg in self.messages:
            if isinstance(msg, dict) and msg.get("id") == id_ and "method" not in msg:
                return msg
        while True:
            msg = self.next()
            if isinstance(msg, dict) and msg.get("id") == id_ and "method" not in msg:
                return msg

    def initialise(self, id_=0) -> dict:
        self.request(id_, "initialize", INIT_PARAMS)
        got = self.reply(id_)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return got

    def call(self, id_, tool: str, arguments: dict) -> None:
        self.request(id_, "tools/call", {"name": tool, "arguments": arguments})

    def _stderr(self) -> str:
        return b"".join(self._err).decode("utf-8", "replace")[-2000:]

    def close(self) -> str:
        """Close stdin (the server exits on end of input); its stderr."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=WAIT_S)
        self._err_reader.join(timeout=WAIT_S)
        return self._stderr()


# from test_serve_wire
def serve_argv(root: Path, *extra: str, code: str | None = None) -> list[str]:
    """``chitragupta serve -w root``; with ``code``, that Python first (it may register engines)."""
    if code is None:
        return [sys.executable, "-m", "chitragupta.cli.main", "serve", "-w", str(root), *extra]
    boot = (f"{code}\nfrom chitragupta.cli.main import main\n"
            f"raise SystemExit(main(['serve', '-w', {str(root)!r}, *{list(extra)!r}]))\n")
    return [sys.executable, "-c", boot]


# from test_kernels
def best_of_dense(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of a dense score array (hits: score > 0) by score descending, then id ascending: the
    plain sort every top-k kernel is checked against."""
    ids = np.flatnonzero(scores > 0)
    order = np.lexsort((ids, -scores[ids]))[:k]
    return ids[order].astype(np.int64), scores[ids][order]


def random_postings(seed, n_docs, n_terms, density=0.05, max_tf=6, ties=False):
    rng = np.random.default_rng(seed)
    m = sp.random(n_terms, n_docs, density=density, random_state=seed, format="csr")
    m.data = rng.integers(1, max_tf, m.nnz).astype(np.int32)
    if ties:  # identical documents force score ties, which must break by id
        m = sp.hstack([m, m[:, : n_docs // 4]]).tocsr()
    m.sort_indices()
    doc_len = np.asarray(m.sum(axis=0)).ravel().astype(np.int32)
    doc_len += rng.integers(0, 5, doc_len.shape[0]).astype(np.int32)
    if ties:
        doc_len[n_docs:] = doc_len[: n_docs // 4]
    return Postings(m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data.astype(np.int32), doc_len)


# from test_kernels
def random_queries(seed, n_terms, n_queries, max_len=7):
    rng = np.random.default_rng(seed + 1000)
    return QueryBatch.from_lists([rng.choice(n_terms, rng.integers(0, max_len)) for _ in range(n_queries)])


# from test_kernels
CASES = [
    dict(seed=1, n_docs=300, n_terms=80),
    dict(seed=2, n_docs=1000, n_terms=400, density=0.01),
    dict(seed=3, n_docs=200, n_terms=30, density=0.3, ties=True),
    dict(seed=4, n_docs=1, n_terms=5, density=1.0),
]


def open_page(browser, path: Path, region: str = "#stage") -> dict:
    """Open ``path`` in the session's Chromium and wait for its scripts: it must log no error, ask for nothing
    but itself, and paint more than its background inside ``region`` (a CSS selector) of a screenshot.
    ``{"ready": ms since navigation, "wall_s"}``."""
    import io

    from matplotlib.image import imread

    got = browser.open(path)
    assert browser.errors == []
    assert [u for u in browser.requests if u != path.resolve().as_uri()] == []
    x, y, w, h = browser.evaluate(f"(r => [r.x, r.y, r.width, r.height].map(Math.round))"
                                  f"(document.querySelector({json.dumps(region)}).getBoundingClientRect())")
    px = (imread(io.BytesIO(browser.screenshot()), format="png")[y:y + h, x:x + w, :3] * 255).round().astype(np.uint32)
    colours, counts = np.unique((px[..., 0] << 16 | px[..., 1] << 8 | px[..., 2]).ravel(), return_counts=True)
    assert w * h > 0 and len(colours) > 10 and counts.max() < 0.995 * w * h, (len(colours), counts.max(), w * h)
    return got
