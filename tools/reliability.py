"""The reliability campaign: commands SIGKILLed at seeded write points and rerun, concurrent writers, a
search racing a rebuild, and the hostile-input table.

    python -m tools.reliability --kills 30            # everything, a Markdown table on stdout
    python -m tools.reliability --kills 8 --only kills

A kill is real: the command runs as ``python -m chitragupta.cli.main ...`` with ``tools/_faults`` on
PYTHONPATH, whose ``sitecustomize`` SIGKILLs the process just before its Nth write inside the
workspace (N drawn per stratum of the uninterrupted run's write count, from a seed). After each kill
the workspace is checked as a reader would find it (every parsed file and sidecar is the old version or
the new one, whole; the index opens and answers as the old index or the new one), the same command is
run again, and the result -- ledger rows, parsed files, index arrays, search hits with scores and
snippets -- must equal a run that was never interrupted. ``tools/tests/test_reliability.py`` runs the same
campaign with fewer kills.

``sync-case`` (``case_campaign``) is harsher: a bibliography whose case-colliding citekeys (``Lo2000``,
``lo2000``, ``LO2000``, ...) join and leave their groups and swap PDFs between two versions; each trial
kills a sync of the second version at a seeded write (or after a seeded delay), then a sync of the first
version at another, then runs ONE sync of either version, and the workspace must equal a sync of that
version into an empty workspace (a clean build), not merely a run that was never interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAULTS = Path(__file__).resolve().parent / "_faults"

__all__ = ["Scenario", "KillOutcome", "SCENARIOS", "build_scenario", "kill_campaign", "case_campaign", "cli",
           "snapshot", "allowed_files", "reader_check",
           "concurrent_writers", "search_during_rebuild", "HOSTILE", "run_hostile", "main"]

QUERIES = ("twin model", "sensor fidelity bridge", "climate ocean heat", "zzzunseen", "retrieval ranking query")
WORDS = ("twin digital model sensor fidelity bridge water leak retrieval ranking query index vector climate "
         "ocean heat soil microbe yield vaccine cohort citation prompt table result method control simulation "
         "error mean score").split()


# -- running the CLI --------------------------------------------------------------------------------

def cli(args, *, cwd: Path | None = None, fault_root: Path | None = None, kill_at: int = 0,
        count_file: Path | None = None, popen: bool = False, env: dict | None = None):
    """``python -m chitragupta.cli.main ARGS`` in a subprocess; with ``fault_root`` the fault hook is armed."""
    e = dict(os.environ, **_OFFLINE)  # never the network (the enrich model is installed locally)
    e.pop("CHITRAGUPTA_FAULT_ROOT", None)
    e.update(env or {})
    # this checkout first, whatever the folder the command runs in
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), e.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if fault_root is not None:
        e["PYTHONPATH"] = os.pathsep.join([str(FAULTS), e["PYTHONPATH"]])
        e["CHITRAGUPTA_FAULT_ROOT"] = str(fault_root)
        e["CHITRAGUPTA_FAULT_KILL_AT"] = str(kill_at)
        if count_file is not None:
            e["CHITRAGUPTA_FAULT_COUNT_FILE"] = str(count_file)
    argv = [sys.executable, "-m", "chitragupta.cli.main", *map(str, args)]
    if popen:
        return subprocess.Popen(argv, cwd=cwd or ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(argv, cwd=cwd or ROOT, env=e, capture_output=True, text=True)


def _check(p, what: str) -> None:
    if p.returncode != 0:
        raise RuntimeError(f"{what}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


# -- corpora ----------------------------------------------------------------------------------------

def _records(seed: int, n: int, max_len: int = 30) -> list[dict]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    out = []
    for i in range(n):
        body = " ".join(rng.choice(WORDS, size=int(rng.integers(1, max_len)), p=p))
        title = " ".join(rng.choice(WORDS, size=int(rng.integers(0, 5))))
        out.append({"_id": f"d{i:05d}", "title": title, "text": body})
    return out


def _changed(records: list[dict], seed: int) -> list[dict]:
    """The next version of a corpus: some texts changed, some records gone, some new."""
    rng = np.random.default_rng(seed)
    out = []
    for r in records:
        u = rng.random()
        if u < 0.08:
            continue  # removed
        if u < 0.25:
            r = dict(r, text=r["text"] + " " + " ".join(rng.choice(WORDS, size=4)) + " revisedterm")
        out.append(r)
    out += [{"_id": f"n{i:05d}", "title": "new " + WORDS[i % len(WORDS)], "text": " ".join(rng.choice(WORDS, 12))}
            for i in range(max(1, len(records) // 20))]
    return out


def _write_jsonl(path: Path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _write_bib_sources(papers: Path, records: list[dict], kind: str) -> None:
    """``records`` as documents in ``papers/`` (PDFs, or Markdown for docling) plus bibliography.bib."""
    from chitragupta.engine.library.demo.tinypdf import write_pdf

    papers.mkdir(parents=True, exist_ok=True)
    wanted = set()
    bib = []
    for r in records:
        key = r["_id"]
        if kind == "pdf":
            name = f"{key}.pdf"
            data_path = papers / name
            new = _pdf_bytes(r, write_pdf, papers)
        else:
            name = f"{key}.md"
            data_path = papers / name
            new = (f"# {r['title'] or key}\n\n## Introduction\n\n{r['text']}\n\n- {r['text'][:40]}\n\n"
                   f"## References\n\n1. Someone, {key}. 2020.\n").encode()
        wanted.add(name)
        if not data_path.exists() or data_path.read_bytes() != new:
            data_path.write_bytes(new)
            os.utime(data_path, ns=(time.time_ns(), time.time_ns()))
        bib.append(f"@misc{{{key}, title={{{r['title'] or key}}}, file={{{name}}}}}\n")
    for p in papers.iterdir():
        if p.suffix in (".pdf", ".md") and p.name not in wanted:
            p.unlink()
    (papers / "bibliography.bib").write_text("".join(bib), encoding="utf-8")


def _pdf_bytes(r: dict, write_pdf, papers: Path) -> bytes:
    tmp = papers / ".tmp.pdf"
    write_pdf(tmp, [r["title"] or r["_id"], r["text"]])
    data = tmp.read_bytes()
    tmp.unlink()
    return data


# -- scenarios --------------------------------------------------------------------------------------

@dataclass
class Scenario:
    """A workspace in the state before ``argv`` (under ``start/ws``), and what reaching the compared
    state needs afterwards (``finish``: commands run uninterrupted)."""

    name: str
    start: Path
    argv: list[str]
    finish: list[list[str]]
    units: tuple[str, ...] = ("document", "passage")
    env: dict = field(default_factory=dict)  # for ``argv`` (the embed scenario commits every few chunks)


SCENARIOS = ("import", "index", "sync", "sync-case", "sync-docling", "enrich-embed")


def _enrich_available() -> bool:
    try:
        import faiss  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _docling_available() -> bool:
    try:
        import docling  # noqa: F401
    except ImportError:
        return False
    return True


def build_scenario(name: str, base: Path, *, n_docs: int | None = None, seed: int = 0) -> Scenario:
    """Build ``name``'s start state under ``base/start``: v0 already synced/imported and indexed, v1 pending."""
    start = base / "start"
    ws = start / "ws"
    papers = ws / "papers"
    papers.mkdir(parents=True)
    if name in ("import", "index"):
        n = n_docs or 2000
        v0 = _records(seed, n)
        v1 = _changed(v0, seed + 1)
        _write_jsonl(papers / "corpus.jsonl", v0)
        _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import v0")
        _check(cli(["index", "-w", ws]), "index v0")
        _write_jsonl(papers / "corpus.jsonl", v1)
        if name == "import":
            return Scenario(name, start, ["import", "-w", "ws", "ws/papers/corpus.jsonl"], [["index", "-w", "ws"]])
        _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import v1")
        return Scenario(name, start, ["index", "-w", "ws"], [])
    if name in ("sync", "sync-docling"):
        kind = "pdf" if name == "sync" else "md"
        if kind == "md":
            if not _docling_available():
                raise RuntimeError("sync-docling needs the docling extra")
            (ws / "config.toml").write_text('[parser]\nbackend = "docling"\n', encoding="utf-8")
        n = n_docs or (600 if kind == "pdf" else 40)
        v0 = _records(seed, n)
        v1 = _changed(v0, seed + 1)
        _write_bib_sources(papers, v0, kind)
        _check(cli(["sync", "-w", ws]), "sync v0")
        _check(cli(["index", "-w", ws]), "index v0")
        _write_bib_sources(papers, v1, kind)
        return Scenario(name, start, ["sync", "-w", "ws"], [["index", "-w", "ws"]])
    if name == "enrich-embed":
        if not _enrich_available():
            raise RuntimeError("enrich-embed needs the enrich extra")
        n = n_docs or 300
        # batches of 2 and a commit every EMBED_COMMIT_CHUNKS chunks: blocks of 2, 4, 8, ... chunks, each
        # followed by a committed segment, so kills land before, inside and between commits
        (ws / "config.toml").write_text("[enrich]\nembed_batch_size = 2\n", encoding="utf-8")
        v0 = _records(seed, n, max_len=120)
        v1 = _changed(v0, seed + 1)
        _write_jsonl(papers / "corpus.jsonl", v0)
        _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import v0")
        _check(cli(["index", "-w", ws]), "index v0")
        _check(cli(["enrich", "-w", ws, "--stages", "embed", "--device", "cpu"], env=_OFFLINE), "enrich v0")
        _write_jsonl(papers / "corpus.jsonl", v1)
        _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import v1")
        # commits every EMBED_COMMIT_CHUNKS chunks, so kills land before, between and after segments
        return Scenario(name, start, ["enrich", "-w", "ws", "--stages", "embed", "--device", "cpu"], [],
                        env={"CHITRAGUPTA_EMBED_COMMIT_CHUNKS": str(EMBED_COMMIT_CHUNKS)})
    raise ValueError(f"unknown scenario {name!r}; one of {', '.join(SCENARIOS)}")


_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
EMBED_COMMIT_CHUNKS = 2


def _encoded_chunks(stdout: str) -> int | None:
    """M of the embed stage's "embed: N doc(s) encoded (M chunks)" line; 0 for "nothing to encode"."""
    import re

    m = re.search(r"^embed: \d+ doc\(s\) encoded \((\d+) chunks\)", stdout, re.MULTILINE)
    if m:
        return int(m.group(1))
    return 0 if re.search(r"^embed: .*nothing to encode", stdout, re.MULTILINE) else None


def _committed_chunks(ws_dir: Path) -> tuple[int, dict]:
    """Chunks in the committed embed segments (content/faiss/.<slug>.segments/seg-*.json), and the
    stores' manifests' bytes (to tell whether the killed run had already written the store whole)."""
    faiss_dir = ws_dir / "content" / "faiss"
    chunks, manifests = 0, {}
    if faiss_dir.is_dir():
        for seg in faiss_dir.glob(".*.segments"):
            for p in seg.glob("seg-*.json"):
                chunks += sum(len(d["starts"]) for d in json.loads(p.read_text(encoding="utf-8"))["body"]["docs"])
        for m in faiss_dir.glob("*/manifest.json"):
            manifests[m.parent.name] = m.read_bytes()
    return chunks, manifests


def _resume_check_from(ref_encoded: int | None, start_manifests: dict, killed: tuple[int, dict],
                       rerun_stdout: str) -> list[str]:
    """The rerun after a kill encodes only what no segment committed: the reference run's chunks less the
    committed ones (none at all when the killed run had written the store whole). ``killed``:
    ``_committed_chunks`` of the workspace right after the kill."""
    committed, manifests = killed
    got = _encoded_chunks(rerun_stdout)
    want = 0 if manifests != start_manifests else (None if ref_encoded is None else ref_encoded - committed)
    if want is None or got != want:
        return [f"rerun encoded {got} chunks; expected {want} (reference {ref_encoded}, {committed} committed)"]
    return []


# -- what a workspace holds -------------------------------------------------------------------------

def _h(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _results(ws_dir: Path, units, *, with_snippets: bool) -> dict:
    from chitragupta.engine.search.bm25 import Retriever

    out = {}
    r = Retriever.open(ws_dir, update=False, backend="numpy")
    for unit in units:
        for q in QUERIES:
            resp = r.search(q, k=10, unit=unit)
            out[f"{unit}:{q}"] = [(h.citekey, h.passage, round(float(h.score), 9)) + ((h.snippet,) if with_snippets else ())
                                  for h in resp.hits]
    notes = [n.text for n in r.index_notes("document") if n.kind == "index" and "not usable" in n.text]
    return {"results": out, "index_notes": notes}


def snapshot(ws_dir: Path, units=("document", "passage")) -> dict:
    """Everything a run leaves that a reader can see, made comparable across folders."""
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.index import store
    from chitragupta.engine.index.manage import index_folder
    from chitragupta.engine.library.workspace import Workspace

    from chitragupta.engine.library.texts import is_ref, read_ref

    ws = Workspace.open(ws_dir)
    prefix = str(ws.root.parent)

    def norm(v):
        if isinstance(v, str) and is_ref(v):  # a packed text: where it lies differs between runs (garbage, pack names), its bytes not
            data = read_ref(ws.root / v)
            return "packed:" + ("missing" if data is None else _h(data))
        return v.replace(prefix, "<T>") if isinstance(v, str) else v

    with Ledger(ws.ledger_path, create=False) as led:
        rows = [tuple(norm(getattr(r, f)) for f in ("citekey", "title", "abstract", "keywords", "status", "reason",
                                                    "parsed_path", "origin", "source_path", "source_size",
                                                    "source_mtime_ns", "source_hash", "backend"))
                for r in led.rows()]
    parsed = {p.name: _h(p.read_bytes()) for p in sorted(ws.parsed_dir.iterdir()) if p.is_file()}
    arrays = {}
    for unit in units:
        st = store.load(index_folder(ws, unit), expect={})
        for name, arr in sorted(st.arrays.items()):
            if name == "fingerprints":  # size and mtime of each parsed file: differ between folders
                continue
            a = np.asarray(arr)
            arrays[f"{unit}/{name}"] = (a.dtype.str, a.shape, _h(a.tobytes()))
    snap = {"rows": rows, "parsed": parsed, "arrays": arrays}
    snap.update(_results(ws_dir, units, with_snippets=True))
    snap.update(_embed_state(ws.content))
    return snap


class _Close:
    """Float vectors compared to 1e-5 (batch composition moves the last bits of an encoding)."""

    def __init__(self, a: np.ndarray):
        self.a = a

    def __eq__(self, other) -> bool:
        return isinstance(other, _Close) and self.a.shape == other.a.shape and bool(
            np.allclose(self.a, other.a, rtol=0, atol=1e-5))

    def __repr__(self) -> str:
        return f"vectors {self.a.shape}"


def _embed_state(content: Path) -> dict:
    """The enrich embedding stores (content/faiss/<model>/): arrays, vectors to 1e-5, the documents
    (without their stamps of this copy's files)."""
    out = {}
    faiss_dir = content / "faiss"
    if not faiss_dir.is_dir():
        return out
    for folder in sorted(p for p in faiss_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for f in sorted(folder.glob("*.npy")):
            a = np.load(f, allow_pickle=False)
            if a.dtype.kind == "f":  # a resumed run encodes in other batches: float noise, not a difference
                out[f"embed/{folder.name}/{f.name}"] = _Close(a)
                continue
            out[f"embed/{folder.name}/{f.name}"] = (a.dtype.str, a.shape, _h(np.ascontiguousarray(a).tobytes()))
        docs = json.loads((folder / "docs.json").read_text(encoding="utf-8"))
        docs.pop("stamps", None)  # sizes, mtimes and inodes of this copy's files: not content
        out[f"embed/{folder.name}/docs.json"] = _h(json.dumps(docs, sort_keys=True).encode("utf-8"))
    return {"embed": out} if out else {}


def diff(a: dict, b: dict) -> list[str]:
    """Where two snapshots differ, briefly."""
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            ks = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            out.append(f"{key}: {len(ks)} differ ({', '.join(map(str, ks[:4]))})")
        elif isinstance(x, list) and isinstance(y, list):
            out.append(f"{key}: {len(x)} vs {len(y)} entries, {sum(p != q for p, q in zip(x, y))} differ")
        else:
            out.append(f"{key}: {str(x)[:80]} != {str(y)[:80]}")
    return out


# -- the kill campaign ------------------------------------------------------------------------------

@dataclass
class KillOutcome:
    scenario: str
    kill_at: int
    writes: int
    killed: bool
    torn: list[str] = field(default_factory=list)  # what a reader found half-done right after the kill
    rerun_rc: int | None = None
    rerun_err: str = ""
    differences: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # temp files still there after the rerun
    note: str = ""  # what else happened before the rerun (case_campaign: the second, killed sync)

    @property
    def recovered(self) -> bool:
        return self.rerun_rc == 0

    @property
    def identical(self) -> bool:
        return self.recovered and not self.differences

    @property
    def ok(self) -> bool:
        return self.killed and not self.torn and self.identical and not self.leftovers


def _run_all(sc: Scenario, cwd: Path, argv_list) -> None:
    for argv in argv_list:
        _check(cli(argv, cwd=cwd), " ".join(argv))


def _kill_points(writes: int, kills: int, seed: int) -> list[int]:
    """One seeded write number per stratum of ``[1, writes]``, so kills spread over the whole run."""
    rng = np.random.default_rng(seed)
    kills = min(kills, writes)
    edges = np.linspace(1, writes + 1, kills + 1)
    pts = sorted({int(rng.integers(int(lo), max(int(lo) + 1, int(hi)))) for lo, hi in zip(edges[:-1], edges[1:])})
    return pts


def allowed_files(before: dict, after: dict) -> dict[str, set]:
    allowed: dict[str, set] = {}
    for snap in (before, after):
        for name, h in snap["parsed"].items():
            allowed.setdefault(name, set()).add(h)
    return allowed


def _packed_check(ws_dir: Path) -> list[str]:
    """Every row whose text is packed (``import``'s packs) points at bytes that are there, whole: the text
    its ``source_hash`` stands for."""
    from chitragupta.engine.library.importer import text_hash
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.texts import is_ref, read_ref

    out = []
    with Ledger(ws_dir / "content" / "ledger.sqlite", create=False) as led:
        for r in led.rows():
            if r.status == "parsed" and is_ref(r.parsed_path):
                data = read_ref(ws_dir / r.parsed_path)
                if data is None:
                    out.append(f"{r.citekey}: its row points at packed bytes that are not there ({r.parsed_path})")
                elif text_hash(r.title, data.decode("utf-8", errors="replace"), r.abstract) != r.source_hash:
                    out.append(f"{r.citekey}: its packed text is not the row's ({r.parsed_path})")
    return out


def reader_check(ws_dir: Path, allowed: dict[str, set], answers: list[dict]) -> list[str]:
    """What a reader would see right after a kill: each problem found (empty when all is whole)."""
    from chitragupta.engine.text.sidecar import SidecarError, read_sidecar

    problems = []
    parsed = ws_dir / "content" / "parsed"
    for p in sorted(parsed.iterdir()):
        if not p.is_file() or p.name.startswith("."):
            continue  # a temp file of the killed writer: never read
        h = _h(p.read_bytes())
        if h not in allowed.get(p.name, ()):
            problems.append(f"{p.name}: neither the old nor the new content")
        if p.name.endswith(".passages.json"):
            try:
                read_sidecar(p)
            except SidecarError as err:
                problems.append(f"{p.name}: {err}")
    problems += _packed_check(ws_dir)
    faiss_dir = ws_dir / "content" / "faiss"
    if faiss_dir.is_dir():
        from chitragupta.enrich.store import StoreCorrupt, load_store

        slugs = {p.name.lstrip(".").split(".old-")[0].split(".tmp-")[0] for p in faiss_dir.iterdir()
                 if p.is_dir() and not p.name.endswith(".segments")}  # committed embed segments: not a store
        for slug in sorted(slugs):
            try:
                if load_store(faiss_dir / slug, with_index=True) is None:
                    problems.append(f"embedding store {slug}: not there (moved aside, the new one not yet in place)")
            except StoreCorrupt as err:
                problems.append(f"embedding store {slug}: {err}")
    try:
        got = _results(ws_dir, ("document",), with_snippets=False)
    except Exception as err:  # a reader must never fail on a killed writer's leftovers
        return problems + [f"search failed: {type(err).__name__}: {err}"]
    if got["index_notes"]:
        problems.append(f"index not usable after the kill: {got['index_notes']}")
    if not any(got["results"] == a for a in answers):
        problems.append("search results are neither the old index's nor the new one's")
    return problems


def _leftovers(ws_dir: Path) -> list[str]:
    content = ws_dir / "content"
    out = [p.name for p in (content / "parsed").iterdir() if p.name.startswith(".")]
    for folder in [*(content / "index").glob("*"), content / "faiss"]:
        if folder.is_dir():
            out += [f"{folder.name}/{p.name}" for p in folder.iterdir() if p.name.startswith(".") and p.is_dir()]
    return out


def _kill_after(argv, cwd: Path, delay: float, env: dict | None = None):
    """Start the command, SIGKILL it after ``delay`` seconds if it still runs; its CompletedProcess-like."""
    import signal

    p = cli(argv, cwd=cwd, popen=True, env=env)
    try:
        p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
    out, err = p.communicate()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def kill_campaign(name: str, base: Path, kills: int, *, seed: int = 0, n_docs: int | None = None,
                  log=None, mode: str = "write", points: list[int] | None = None) -> list[KillOutcome]:
    """Kill ``name`` at ``kills`` seeded write points (``mode="write"``), or after seeded delays spread
    over a clean run's wall time (``mode="time"``: kills also land between writes and inside them);
    each outcome says whether the workspace recovered identically."""
    base.mkdir(parents=True, exist_ok=True)
    sc = build_scenario(name, base / "scenario", n_docs=n_docs, seed=seed)
    # The run never interrupted, counting its writes, and the answers before and after it.
    ref = base / "reference"
    shutil.copytree(sc.start, ref, symlinks=True)
    before = snapshot(ref / "ws", sc.units)
    count_file = base / "writes"
    t0 = time.monotonic()
    p = cli(sc.argv, cwd=ref, fault_root=ref / "ws", count_file=count_file, env=sc.env)
    wall = time.monotonic() - t0
    _check(p, "reference run")
    ref_encoded = _encoded_chunks(p.stdout) if name == "enrich-embed" else None
    start_manifests = _committed_chunks(sc.start / "ws")[1] if name == "enrich-embed" else {}
    writes = int(count_file.read_text())
    _run_all(sc, ref, sc.finish)
    after = snapshot(ref / "ws", sc.units)
    answers = [{k: [h[:3] for h in v] for k, v in snap["results"].items() if k.startswith("document:")}
               for snap in (before, after)]
    allowed = allowed_files(before, after)
    outcomes = []
    if points is not None:  # given write numbers (to aim at one step)
        pass
    elif mode == "time":  # delays in milliseconds, one per stratum of the clean run's wall time
        points = _kill_points(max(kills, int(wall * 1000)), kills, seed)
    else:
        points = _kill_points(writes, kills, seed)
    for i, at in enumerate(points):
        trial = base / f"kill{i:02d}"
        shutil.copytree(sc.start, trial, symlinks=True)
        if mode == "time":
            p = _kill_after(sc.argv, trial, at / 1000, env=sc.env)
        else:
            p = cli(sc.argv, cwd=trial, fault_root=trial / "ws", kill_at=at, env=sc.env)
        out = KillOutcome(name, at, writes if mode == "write" else int(wall * 1000), killed=p.returncode == -9)
        out.torn = reader_check(trial / "ws", allowed, answers)
        if name == "enrich-embed":
            snapshot_before_rerun = _committed_chunks(trial / "ws")
        again = cli(sc.argv, cwd=trial, env=sc.env)
        out.rerun_rc = again.returncode
        out.rerun_err = next((l for l in reversed(again.stderr.splitlines()) if l.strip()), "")[-300:]
        if again.returncode == 0:
            _run_all(sc, trial, sc.finish)
            out.leftovers = _leftovers(trial / "ws")
            out.differences = diff(after, snapshot(trial / "ws", sc.units))
            if name == "enrich-embed":
                out.differences += _resume_check_from(ref_encoded, start_manifests, snapshot_before_rerun,
                                                      again.stdout)
                out.note = (f"{snapshot_before_rerun[0]} of {ref_encoded} chunks committed before the kill, "
                            f"{_encoded_chunks(again.stdout)} encoded by the rerun")
        outcomes.append(out)
        if log:
            log(f"{name}: kill at {'write' if mode == 'write' else 'ms'} {at}/{out.writes}: killed={out.killed} torn={len(out.torn)} "
                f"rerun={out.rerun_rc} identical={out.identical} leftovers={len(out.leftovers)}"
                + (f" ({out.note})" if out.note else ""))
        shutil.rmtree(trial, ignore_errors=True)
    return outcomes


# -- the case-collision campaign: two killed syncs of two versions, ONE rerun, a clean build ----------

def _case_versions(seed: int, groups: int, plain: int) -> tuple[dict[str, int], dict[str, int], int]:
    """Two versions of a bibliography (citekey -> PDF number) over one folder of PDFs. Keys come in
    case-folded groups (``Lo2000 lo2000 LO2000 lO2000``) and plain ones; from the first version to the
    second, groups gain and lose members (a file name goes plain <-> hashed), every grouped key that stays
    and half the plain ones point at another key's PDF (the PDFs swap), and some plain keys come and go."""
    rng = np.random.default_rng(seed)
    a_keys, b_keys = [], []
    for g in range(groups):
        base = f"lo{2000 + g}"
        variants = [base.capitalize(), base, base.upper(), "lO" + base[2:]]
        a_keys += [v for v in variants if rng.random() < 0.6] or variants[:2]
        b_keys += [v for v in variants if rng.random() < 0.6] or variants[1:2]
    fillers = [f"p{j:03d}" for j in range(plain)]
    a_keys += [k for k in fillers if rng.random() < 0.9]
    b_keys += [k for k in fillers if rng.random() < 0.9]
    n_pdfs = len(set(a_keys) | set(b_keys))
    a = dict(zip(a_keys, (int(x) for x in rng.permutation(n_pdfs))))
    common = [k for k in b_keys if k in a and (not k.startswith("p") or rng.random() < 0.5)]
    b = {k: a[k] for k in b_keys if k in a}
    for k, shifted in zip(common, common[1:] + common[:1]):  # each swapped key: the next one's PDF
        b[k] = a[shifted]
    spare = [int(x) for x in rng.permutation(n_pdfs)]
    for k in b_keys:
        if k not in b:
            b[k] = spare.pop()
    return a, b, n_pdfs


def _case_bib(papers: Path, version: dict[str, int]) -> None:
    (papers / "bibliography.bib").write_text(
        "".join(f"@misc{{{k}, title={{On {k}}}, file={{doc{j:03d}.pdf}}}}\n" for k, j in version.items()),
        encoding="utf-8")


def _case_start(base: Path, seed: int, groups: int, plain: int) -> tuple[Path, dict, dict]:
    """``base/start/ws``: the PDFs, the first version synced and indexed."""
    from chitragupta.engine.library.demo.tinypdf import write_pdf

    a, b, n_pdfs = _case_versions(seed, groups, plain)
    ws = base / "start" / "ws"
    papers = ws / "papers"
    papers.mkdir(parents=True)
    rng = np.random.default_rng(seed + 1)
    for j in range(n_pdfs):
        body = " ".join(rng.choice(WORDS, size=int(rng.integers(4, 25))))
        write_pdf(papers / f"doc{j:03d}.pdf", [f"Document {j}", f"uniqword{j} {body}"])
    _case_bib(papers, a)
    _check(cli(["sync", "-w", ws]), "sync (first version)")
    _check(cli(["index", "-w", ws]), "index (first version)")
    return base / "start", a, b


def _clean_build(start: Path, dest: Path, version: dict[str, int]) -> dict:
    """A sync and index of ``version`` into an empty workspace over the same PDFs (same size and mtime)."""
    ws = dest / "ws"
    shutil.copytree(start / "ws" / "papers", ws / "papers")
    _case_bib(ws / "papers", version)
    _check(cli(["sync", "-w", ws]), "clean sync")
    _check(cli(["index", "-w", ws]), "clean index")
    return snapshot(ws)


def case_campaign(base: Path, kills: int, *, seed: int = 0, groups: int = 8, plain: int = 30, log=None,
                  mode: str = "write") -> list[KillOutcome]:
    """``kills`` trials of: a sync of the second version killed at a seeded write (``mode="write"``) or
    after a seeded delay (``"time"``), a sync of the first version killed at a seeded later point (or let
    finish, if the point falls past its end), then ONE sync of one version (the trials alternate) and
    ``index``; each outcome compares the workspace with a clean build of that version."""
    base.mkdir(parents=True, exist_ok=True)
    start, a, b = _case_start(base / "scenario", seed, groups, plain)
    versions = {"first": a, "second": b}
    clean = {name: _clean_build(start, base / f"clean-{name}", v) for name, v in versions.items()}
    before = snapshot(start / "ws")
    allowed = allowed_files(before, clean["first"])
    for name, h in clean["second"]["parsed"].items():
        allowed.setdefault(name, set()).add(h)
    answers = [{k: [h[:3] for h in v] for k, v in before["results"].items() if k.startswith("document:")}]
    argv = ["sync", "-w", "ws"]
    # the writes (and wall time) of each sync run alone: second over first, and first over second
    counts = []
    for name, (src, version) in {"second": (start, b), "first": (base / "clean-second", a)}.items():
        ref = base / f"count-{name}"
        shutil.copytree(src, ref, symlinks=True)
        _case_bib(ref / "ws" / "papers", version)
        t0 = time.monotonic()
        _check(cli(argv, cwd=ref, fault_root=ref / "ws", count_file=base / "writes"), f"counting sync ({name})")
        counts.append((int((base / "writes").read_text()), time.monotonic() - t0))
        shutil.rmtree(ref, ignore_errors=True)
    (w1, wall1), (w2, wall2) = counts
    if mode == "time":
        first_points = _kill_points(max(kills, int(wall1 * 1000)), kills, seed)
        total2 = max(1, int(wall2 * 1000))
    else:
        first_points = _kill_points(w1, kills, seed)
        total2 = w2
    rng = np.random.default_rng(seed + 7)
    outcomes = []
    for i, at in enumerate(first_points):
        trial = base / f"kill{i:02d}"
        shutil.copytree(start, trial, symlinks=True)
        papers = trial / "ws" / "papers"

        def killed_sync(point: int):
            if mode == "time":
                return _kill_after(argv, trial, point / 1000)
            return cli(argv, cwd=trial, fault_root=trial / "ws", kill_at=point)

        _case_bib(papers, b)
        p = killed_sync(at)
        out = KillOutcome("sync-case", at, w1 if mode == "write" else int(wall1 * 1000), killed=p.returncode == -9)
        out.torn = reader_check(trial / "ws", allowed, answers)
        _case_bib(papers, a)
        at2 = int(rng.integers(1, total2 + 1))
        p2 = killed_sync(at2)
        out.note = (f"then a sync of the first version killed at {'write' if mode == 'write' else 'ms'} {at2}"
                    if p2.returncode == -9 else f"then a sync of the first version ran to its end (exit {p2.returncode})")
        out.torn += reader_check(trial / "ws", allowed, answers)
        final = "second" if i % 2 == 0 else "first"
        _case_bib(papers, versions[final])
        again = cli(argv, cwd=trial)  # the ONE rerun
        out.rerun_rc = again.returncode
        out.rerun_err = next((l for l in reversed(again.stderr.splitlines()) if l.strip()), "")[-300:]
        if again.returncode == 0:
            _check(cli(["index", "-w", "ws"], cwd=trial), "index after the rerun")
            out.leftovers = _leftovers(trial / "ws")
            out.differences = diff(clean[final], snapshot(trial / "ws"))
        outcomes.append(out)
        if log:
            log(f"sync-case: kill at {'write' if mode == 'write' else 'ms'} {at}/{out.writes}, {out.note}; rerun "
                f"({final} version): killed={out.killed} torn={len(out.torn)} rerun={out.rerun_rc} "
                f"equal to a clean build={out.identical} leftovers={len(out.leftovers)}")
        shutil.rmtree(trial, ignore_errors=True)
    return outcomes


# -- concurrency ------------------------------------------------------------------------------------

@dataclass
class ConcurrentOutcome:
    what: str
    runs: int
    exit_codes: list[int]
    busy: int  # runs that said the workspace is busy
    unclear: list[str]  # failures that were not a clear "busy"
    identical: bool


def concurrent_writers(name: str, base: Path, *, runs: int = 2, seed: int = 0, n_docs: int | None = None,
                       lock_timeout: float | None = None) -> ConcurrentOutcome:
    """Start ``runs`` copies of the scenario's command at once; each must finish or say "busy", and the
    result must equal one uninterrupted run."""
    base.mkdir(parents=True, exist_ok=True)
    sc = build_scenario(name, base / "scenario", n_docs=n_docs, seed=seed)
    ref = base / "reference"
    shutil.copytree(sc.start, ref, symlinks=True)
    _check(cli(sc.argv, cwd=ref), "reference run")
    _run_all(sc, ref, sc.finish)
    want = snapshot(ref / "ws", sc.units)
    trial = base / "trial"
    shutil.copytree(sc.start, trial, symlinks=True)
    if lock_timeout is not None:
        cfg = trial / "ws" / "config.toml"
        old = cfg.read_text(encoding="utf-8") if cfg.exists() else ""
        cfg.write_text(old + f"\n[workspace]\nlock_timeout = {lock_timeout}\n", encoding="utf-8")
    procs = [cli(sc.argv, cwd=trial, popen=True) for _ in range(runs)]
    codes, busy, unclear = [], 0, []
    for pr in procs:
        _out, err = pr.communicate()
        codes.append(pr.returncode)
        if pr.returncode == 0:
            continue
        lines = [l for l in err.strip().splitlines() if l]
        if pr.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and "workspace is busy" in lines[0]:
            busy += 1
        else:
            unclear.append(err.strip()[-300:])
    _run_all(sc, trial, sc.finish)
    got = snapshot(trial / "ws", sc.units)
    return ConcurrentOutcome(f"{runs} x {name}" + (f" (lock_timeout = {lock_timeout:g})" if lock_timeout is not None else ""),
                             runs, codes, busy, unclear, not diff(want, got))


_SEARCHER = r"""
import json, sys, os
from chitragupta.engine.search.bm25 import Retriever
ws, stop, out, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
n = 0
with open(out, "w") as f:
    while True:
        last = os.path.exists(stop)
        r = Retriever.open(ws, update=bool(n % 2), backend="numpy")
        res = {q: [(h.citekey, h.passage, round(float(h.score), 9)) for h in r.search(q, k=10).hits] for q in queries}
        f.write(json.dumps(res) + "\n")
        f.flush()
        n += 1
        if last:
            break
"""


@dataclass
class RaceOutcome:
    rebuilds: int
    searches: int
    old: int
    new: int
    mixed: int
    errors: str


def search_during_rebuild(base: Path, *, rounds: int = 3, n_docs: int = 2000, seed: int = 0) -> RaceOutcome:
    """Loop searches in one process while another alternates the corpus between two versions and
    rebuilds the index; every answer must be one of the two reference answers."""
    base.mkdir(parents=True, exist_ok=True)
    ws = base / "ws"
    papers = ws / "papers"
    papers.mkdir(parents=True)
    v0 = _records(seed, n_docs)
    v1 = _changed(v0, seed + 1)
    answers = []
    for i, version in enumerate((v1, v0)):  # v0 is left as the start state
        _write_jsonl(papers / f"v{1 - i}.jsonl", version)
        _write_jsonl(papers / "corpus.jsonl", version)
        _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import")
        _check(cli(["index", "-w", ws]), "index")
        answers.insert(0, _results(ws, ("document",), with_snippets=False)["results"])
    queries = [q.split(":", 1)[1] for q in answers[0]]
    stop, out = base / "stop", base / "searches.jsonl"
    searcher = subprocess.Popen([sys.executable, "-c", _SEARCHER, str(ws), str(stop), str(out), json.dumps(queries)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not out.exists() or not out.read_text():
            if searcher.poll() is not None:
                break
            time.sleep(0.05)
        versions = ["v1", "v0"] * rounds + ["v1"]  # the first search sees v0, the last v1
        for version in versions:
            shutil.copyfile(papers / f"{version}.jsonl", papers / "corpus.jsonl")
            _check(cli(["import", "-w", ws, papers / "corpus.jsonl"]), "import")
            _check(cli(["index", "-w", ws, "--force"]), "index")
    finally:
        stop.touch()
        _o, err = searcher.communicate(timeout=300)
    want = [{f"document:{q}": v for q, v in json.loads(line).items()} for line in out.read_text().splitlines()]
    norm = [{k: [tuple(h) for h in v] for k, v in a.items()} for a in want]
    ref = [{k: [tuple(h) for h in v] for k, v in a.items()} for a in answers]
    old = sum(a == ref[0] for a in norm)
    new = sum(a == ref[1] for a in norm)
    return RaceOutcome(len(versions), len(norm), old, new, len(norm) - old - new,
                       err.strip()[-500:] if searcher.returncode else "")


# -- hostile input ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hostile:
    """One hostile input: its class, a name, a setup writing files under the case folder, the argv
    (``{ws}`` and ``{dir}`` are filled in), the exit status wanted, and a needle the one-line error or
    warning must hold."""

    cls: str
    name: str
    setup: object  # (dir: Path) -> None
    argv: tuple[str, ...]
    rc: int
    needle: str


def _bib(text: bytes | str):
    def setup(d: Path):
        (d / "ws" / "papers").mkdir(parents=True, exist_ok=True)
        data = text.encode() if isinstance(text, str) else text
        (d / "ws" / "papers" / "bibliography.bib").write_bytes(data)
    return setup


def _docling_bib(text: str, link: tuple[str, str] | None = None):
    def setup(d: Path):
        _bib(text)(d)
        (d / "ws" / "config.toml").write_text('[parser]\nbackend = "docling"\n', encoding="utf-8")
        if link:
            (d / "ws" / "papers" / link[0]).symlink_to(link[1])
    return setup


def _synced_then(bib: str):
    """A workspace synced from four PDFs, then its bibliography replaced by ``bib``."""
    def setup(d: Path):
        from chitragupta.engine.library.demo.tinypdf import write_pdf

        papers = d / "ws" / "papers"
        papers.mkdir(parents=True)
        for i in range(4):
            write_pdf(papers / f"p{i}.pdf", [f"Paper {i}", f"digital twin text {i}"])
        (papers / "bibliography.bib").write_text(
            "".join(f"@misc{{p{i:04d}, title={{P{i}}}, file={{p{i}.pdf}}}}\n" for i in range(4)), encoding="utf-8")
        _check(cli(["sync", "-w", d / "ws"]), "sync")
        (papers / "bibliography.bib").write_text(bib, encoding="utf-8")
    return setup


def _jsonl(data: bytes):
    def setup(d: Path):
        (d / "ws").mkdir(parents=True, exist_ok=True)
        (d / "c.jsonl").write_bytes(data)
    return setup


def _cfg(text: str):
    def setup(d: Path):
        _jsonl(b'{"_id": "a", "title": "T", "text": "twin model"}\n')(d)
        (d / "ws" / "config.toml").write_text(text, encoding="utf-8")
    return setup


def _indexed(extra=None, records=None, *, packed: bool = True):
    """A workspace of imported records. ``packed=False``: one parsed file per record, imported through the
    API (the CLI's import packs its texts), for a case that puts a file beside a parsed ``.txt``."""
    def setup(d: Path):
        recs = records() if callable(records) else (_records(3, 30) if records is None else records)
        _jsonl("".join(json.dumps(r) + "\n" for r in recs).encode())(d)
        if packed:
            _check(cli(["import", "-w", d / "ws", d / "c.jsonl"]), "import")
        else:
            from chitragupta.engine.library.sync import import_jsonl
            from chitragupta.engine.library.workspace import Workspace

            report = import_jsonl(Workspace.open(d / "ws", create=True), d / "c.jsonl", packed=False)
            if report.problems:
                raise RuntimeError(f"import: {report.problems[:3]}")
        if extra:
            extra(d)
    return setup


def _indexed_files(extra=None):
    """``_indexed`` with one parsed file per record."""
    return _indexed(extra, packed=False)


def _sidecar(content: bytes):
    """A docling sidecar beside d00001's parsed file (a sync writes them; imported texts have none)."""
    def extra(d: Path):
        parsed = d / "ws" / "content" / "parsed"
        (parsed / "d00001.passages.json").write_bytes(content)
    return extra


def _cache(damage: str):
    def extra(d: Path):
        _check(cli(["index", "-w", d / "ws"]), "index")
        folder = d / "ws" / "content" / "index" / "doc"
        gen = folder / (folder / "CURRENT").read_text().strip()
        if damage == "truncated":
            p = gen / "indices.npy"
            p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
        elif damage == "foreign":  # another index kind's generation named as current
            other = d / "ws" / "content" / "index" / "passage"
            shutil.copytree(other / (other / "CURRENT").read_text().strip(), folder / "gforeign")
            (folder / "CURRENT").write_text("gforeign\n")
        elif damage == "empty-current":
            (folder / "CURRENT").write_bytes(b"")
        elif damage == "pickle":  # an object array, with a manifest that vouches for it
            import zlib

            p = gen / "tf.npy"
            np.save(p, np.array([{"x": 1}], dtype=object), allow_pickle=True)
            man = json.loads((gen / "manifest.json").read_text())
            man["files"]["tf"].update(bytes=p.stat().st_size, crc32=zlib.crc32(p.read_bytes()))
            (gen / "manifest.json").write_text(json.dumps(man))
    return extra


def _big_doc(d: Path, mb: int = 50):
    words = ("alpha beta gamma delta twin model " * 8).encode()
    body = (words * (mb * 1024 * 1024 // len(words) + 1))[: mb * 1024 * 1024].decode()
    rec = {"_id": "big", "title": "Big", "text": body + " needleword"}
    (d / "ws").mkdir(parents=True, exist_ok=True)
    with open(d / "c.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
        f.write(json.dumps({"_id": "small", "title": "Small", "text": "twin"}) + "\n")
    _check(cli(["import", "-w", d / "ws", d / "c.jsonl"]), "import")


def _one_word_doc(d: Path):
    rec = {"_id": "rep", "title": "Repeated", "text": "twin " * 2_000_000}
    (d / "ws").mkdir(parents=True, exist_ok=True)
    (d / "c.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps({"_id": "b", "title": "B", "text": "model"}) + "\n")
    _check(cli(["import", "-w", d / "ws", d / "c.jsonl"]), "import")


_LONG_KEY = "k" * 10_000
_INCOMPLETE = 3  # sync's exit status when it finished but some entry's document could not be read
_KEYS = ["../../x", "CON", "a/b", _LONG_KEY, "/etc/x", "nul.txt", "..", "x\\y"]

HOSTILE: list[Hostile] = [
    # BibTeX
    Hostile("bibtex", "malformed entry", _bib("@article{ok, title={Fine}}\n@article{bad, title = {unclosed\n\n"
                                              "@misc{ok2, title={Two}}\n"), ("sync", "-w", "{ws}"), 0, "malformed entry skipped"),
    Hostile("bibtex", "truncated file", _bib("@article{ok, title={Fine}}\n@misc{trunc, title = {Sec"),
            ("sync", "-w", "{ws}"), 0, "bibliography.bib:2"),
    Hostile("bibtex", "duplicate citekey", _bib("@misc{a, title={One}}\n@misc{a, title={Two}}\n"),
            ("sync", "-w", "{ws}"), 0, "duplicate citekey 'a'"),
    Hostile("bibtex", "non-UTF-8 bytes", _bib(b"@misc{a, title={Caf\xe9}}\n"), ("sync", "-w", "{ws}"), 0, "not UTF-8"),
    Hostile("bibtex", "NUL bytes", _bib(b"@misc{a, title={N\x00UL}}\n"), ("sync", "-w", "{ws}"), 0, "NUL bytes removed"),
    Hostile("bibtex", "binary garbage", _bib(bytes(range(256)) * 40), ("sync", "-w", "{ws}"), 0, "sync: 0 entries"),
    Hostile("bibtex", "empty file", _bib(b""), ("sync", "-w", "{ws}"), 0, "sync: 0 entries"),
    Hostile("bibtex", "hostile citekeys", _bib("".join(f"@misc{{{k}, title={{T}}}}\n" for k in _KEYS)),
            ("sync", "-w", "{ws}"), 0, "sync:"),
    Hostile("bibtex", "file = /etc/passwd", _bib("@misc{pw, title={P}, file={/etc/passwd}}\n"),
            ("sync", "-w", "{ws}"), _INCOMPLETE, "not a document the pdftotext backend reads"),
    Hostile("bibtex", "file = /etc/passwd (docling)", _docling_bib("@misc{pw, title={P}, file={/etc/passwd}}\n"),
            ("sync", "-w", "{ws}"), _INCOMPLETE, "not a document the docling backend reads"),
    Hostile("bibtex", "file = a .md link to /etc/passwd (docling)", _docling_bib("@misc{pw, title={P}, file={notes.md}}\n",
                                                                                 link=("notes.md", "/etc/passwd")),
            ("sync", "-w", "{ws}"), _INCOMPLETE, "not a document the docling backend reads"),
    Hostile("bibtex", "file = a folder", _bib("@misc{dir, title={D}, file={/etc}}\n"),
            ("sync", "-w", "{ws}"), _INCOMPLETE, "sync: 1 entry"),
    Hostile("bibtex", "truncated over a synced workspace", _synced_then("@misc{p0000, title={P0}, file={p0.pdf}}\n@misc{p0001, ti"),
            ("sync", "-w", "{ws}"), 0, "no longer lists were kept"),
    Hostile("bibtex", "emptied over a synced workspace", _synced_then(""), ("sync", "-w", "{ws}"), 0,
            "it yields no entries"),
    Hostile("bibtex", "missing bibliography", lambda d: (d / "ws").mkdir(), ("sync", "-w", "{ws}"), 1,
            "bibliography not found"),
    # JSONL
    Hostile("jsonl", "bad lines", _jsonl(b'{"_id": "a", "text": "x"}\nnot json\n[1]\n{"_id": null}\n{"_id": "b", "title": 3}\n'),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "c.jsonl:2: not valid JSON"),
    Hostile("jsonl", "duplicate _id", _jsonl(b'{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n'),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "c.jsonl:2: duplicate _id 'a'"),
    Hostile("jsonl", "non-UTF-8 and NUL", _jsonl(b'{"_id": "a", "text": "caf\xe9"}\n{"_id": "b", "text": "n\\u0000ul"}\n'),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "c.jsonl:1: not UTF-8"),
    Hostile("jsonl", "NUL in _id", _jsonl(b'{"_id": "a\\u0000b", "text": "x"}\n'),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "holds a NUL byte"),
    Hostile("jsonl", "a line nested 100,000 deep", _jsonl(b'{"_id": "a", "text": "x"}\n{"_id": "b", "k": '
                                                         + b"[" * 100_000 + b"]" * 100_000 + b"}\n"),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "c.jsonl:2: not valid JSON (nested too deeply)"),
    Hostile("query", "queries file nested 100,000 deep",
            _indexed(lambda d: (d / "q.jsonl").write_bytes(b'{"_id": "q0", "text": "twin"}\n{"_id": "q1", "text": '
                                                           + b"[" * 100_000 + b"}\n")),
            ("search", "-w", "{ws}", "--queries", "{dir}/q.jsonl", "--run", "{ws}/run.trec"), 0, "q.jsonl:2: not valid JSON"),
    Hostile("query", "queries file with no usable query", _indexed(lambda d: (d / "q.jsonl").write_bytes(b"[1]\n\n")),
            ("search", "-w", "{ws}", "--queries", "{dir}/q.jsonl", "--run", "{ws}/run.trec"), 1,
            "no query to run: every line was refused ("),
    Hostile("jsonl", "empty corpus", _jsonl(b""), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "import: 0 entries"),
    Hostile("jsonl", "binary file", _jsonl(bytes(range(256)) * 64), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0,
            "line skipped"),
    Hostile("jsonl", "hostile _ids", _jsonl("".join(json.dumps({"_id": k, "text": "twin"}) + "\n" for k in _KEYS).encode()),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, f"import: {len(_KEYS)} entries"),
    Hostile("jsonl", "truncated over an imported workspace", _indexed(lambda d: (d / "c.jsonl").write_bytes(
                (d / "c.jsonl").read_bytes()[:700])), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 0, "no longer lists were kept"),
    Hostile("jsonl", "missing file", lambda d: (d / "ws").mkdir(), ("import", "-w", "{ws}", "{dir}/nope.jsonl"), 1,
            "corpus file not found"),
    Hostile("jsonl", "a folder as the corpus", lambda d: (d / "ws").mkdir(), ("import", "-w", "{ws}", "{dir}"), 1,
            "is a folder"),
    # documents
    Hostile("document", "50 MB document", _big_doc, ("search", "-w", "{ws}", "needleword", "-k", "3"), 0, "big"),
    Hostile("document", "one word repeated 2M times", _one_word_doc, ("search", "-w", "{ws}", "twin", "-k", "3"), 0, "rep"),
    Hostile("document", "empty corpus indexed", _indexed(records=[]), ("index", "-w", "{ws}"), 0, "0 documents"),
    Hostile("document", "empty corpus searched", _indexed(records=[]), ("search", "-w", "{ws}", "twin"), 0, "no hits"),
    Hostile("document", "workspace is a file", lambda d: (d / "ws").write_text("x"), ("index", "-w", "{ws}"), 1,
            "workspace folder does not exist"),
    # config
    Hostile("config", "wrong type", _cfg("[retrieval]\nk1 = \"high\"\n"), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1,
            "[retrieval] k1 = 'high' is a str; allowed: a number in [0, 1000]"),
    Hostile("config", "NaN", _cfg("[retrieval]\nb = nan\n"), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1,
            "[retrieval] b = nan is not allowed; allowed: a number in [0, 1]"),
    Hostile("config", "unknown section", _cfg("[retreival]\nk1 = 1\n"), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1,
            "unknown section [retreival]"),
    Hostile("config", "not TOML", _cfg("[retrieval\n"), ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1, "not valid TOML"),
    Hostile("config", "not UTF-8", lambda d: (_cfg("")(d), (d / "ws" / "config.toml").write_bytes(b"k1 = \xff\n")),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1, "cannot read config file"),
    Hostile("config", "a table where a value goes", _cfg("[retrieval.k1]\nx = 1\n"),
            ("import", "-w", "{ws}", "{dir}/c.jsonl"), 1, "[retrieval] k1 = {'x': 1} is a dict"),
    # sidecars
    Hostile("sidecar", "not JSON", _indexed_files(_sidecar(b"{not json")), ("search", "-w", "{ws}", "twin"), 0, "not valid JSON"),
    Hostile("sidecar", "not a list", _indexed_files(_sidecar(b'{"text": "x"}')), ("search", "-w", "{ws}", "twin"), 0,
            "expected a JSON list"),
    Hostile("sidecar", "missing label", _indexed_files(_sidecar(b'[{"text": "x"}]')), ("search", "-w", "{ws}", "twin"), 0,
            "has no 'label'"),
    Hostile("sidecar", "negative page", _indexed_files(_sidecar(b'[{"text": "x", "label": "text", "page": -3}]')),
            ("search", "-w", "{ws}", "twin"), 0, "page -3"),
    Hostile("sidecar", "nested 100,000 deep", _indexed_files(_sidecar(b"[" * 100_000 + b"]" * 100_000)),
            ("search", "-w", "{ws}", "twin"), 0, "nested too deeply"),
    Hostile("sidecar", "binary", _indexed_files(_sidecar(bytes(range(256)))), ("search", "-w", "{ws}", "twin"), 0,
            "passages.json"),
    # index cache
    Hostile("cache", "truncated array", _indexed(_cache("truncated")), ("search", "-w", "{ws}", "twin"), 0, "not usable"),
    Hostile("cache", "foreign generation", _indexed(_cache("foreign")), ("search", "-w", "{ws}", "twin"), 0, "not usable"),
    Hostile("cache", "empty CURRENT", _indexed(_cache("empty-current")), ("search", "-w", "{ws}", "twin"), 0, "not usable"),
    Hostile("cache", "pickled array", _indexed(_cache("pickle")), ("search", "-w", "{ws}", "twin"), 0, "not usable"),
    # queries
    Hostile("query", "100,000 characters", _indexed(), ("search", "-w", "{ws}", "twin model " * 10_000, "-k", "3"), 1,
            "the query is 110,000 characters long; at most 10,000 ([serve].max_query_chars)"),
    Hostile("query", "only stopwords", _indexed(), ("search", "-w", "{ws}", "the of and to"), 0, "no indexable"),
    Hostile("query", "only punctuation", _indexed(), ("search", "-w", "{ws}", "!?.,;:()[]{}"), 0, "no indexable"),
    Hostile("query", "k = 0", _indexed(), ("search", "-w", "{ws}", "twin", "-k", "0"), 1, "-k must be an integer >= 1, got 0"),
    Hostile("query", "k negative", _indexed(), ("search", "-w", "{ws}", "twin", "-k", "-5"), 1, "-k must be an integer >= 1, got -5"),
    Hostile("query", "k larger than the corpus", _indexed(), ("search", "-w", "{ws}", "twin", "-k", "10000", "--json"),
            0, "citekey"),
    Hostile("query", "k = 10**30", _indexed(), ("search", "-w", "{ws}", "twin", "-k", str(10**30), "--unit", "passage"),
            1, f"-k must be at most 10000 ([serve].max_k), got {10**30}"),
    Hostile("query", "k = a billion", _indexed(), ("search", "-w", "{ws}", "twin", "-k", "1000000000"), 1,
            "-k must be at most 10000 ([serve].max_k), got 1000000000"),
    Hostile("query", "--snippet-chars a trillion", _indexed(), ("search", "-w", "{ws}", "twin", "--snippet-chars",
                                                                 str(10**12)), 1,
            "--snippet-chars must be an integer in [0, 2147483647] (0: no snippet), got 1000000000000"),
    Hostile("query", "--log ../../escape", _indexed(), ("search", "-w", "{ws}", "twin", "--log", "../../escape"), 0, "twin"),
]


@dataclass
class HostileOutcome:
    case: Hostile
    rc: int | None
    out: str
    err: str
    traceback: bool
    outside: list[str]  # files created or changed outside the workspace (and the case's own inputs)
    lost: list[str]  # files that were in the workspace before and are gone or changed after

    @property
    def lines(self) -> list[str]:
        return [l for l in self.err.splitlines() if l.startswith(("error:", "[warn]", "[note]"))]

    @property
    def ok(self) -> bool:
        errors = [l for l in self.err.splitlines() if l.startswith("error:")]
        clear = (self.case.needle in self.out or any(self.case.needle in l for l in self.lines))
        # an error is one line; exit 0, or sync's "finished, some documents unread", says what it must in warnings
        one_line = self.rc in (0, _INCOMPLETE) or (len(errors) == 1 and self.err.strip().count("\n") == 0)
        said_once = len(self.lines) == len(set(self.lines))
        return (self.rc == self.case.rc and clear and one_line and said_once and not self.traceback
                and not self.outside and not self.lost)


def _tree(folder: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        if skip is not None and Path(dirpath) == skip.parent:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for f in filenames:
            p = Path(dirpath, f)
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def run_hostile(case: Hostile, base: Path) -> HostileOutcome:
    """Set the case up under ``base/case``, run its command in-process (so a traceback is seen as such)."""
    from chitragupta.cli.main import main as cli_main

    d = base / "case"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    case.setup(d)
    ws = d / "ws"
    argv = [a.replace("{ws}", str(ws)).replace("{dir}", str(d)) for a in case.argv]
    kept = {k: v for k, v in _tree(ws).items() if "/content/index/" not in k and not k.endswith(("-wal", "-shm", ".lock"))}
    outside_before = _tree(base, skip=ws)
    out, err = io.StringIO(), io.StringIO()
    tb = False
    rc = None
    cwd = os.getcwd()
    os.chdir(d)  # a relative escape would land here, inside base
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli_main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    except BaseException:  # noqa: BLE001 - exactly what this campaign looks for
        import traceback

        tb = True
        err.write(traceback.format_exc())
    finally:
        os.chdir(cwd)
    outside_after = _tree(base, skip=ws)
    outside = sorted(k for k in set(outside_after) if outside_before.get(k) != outside_after[k])
    after = _tree(ws)
    lost = sorted(k for k, v in kept.items() if k not in after)
    if case.argv[0] == "search":  # a search changes nothing the user put there
        lost += sorted(k for k, v in kept.items() if k in after and after[k] != v and "/papers/" in k)
    return HostileOutcome(case, rc, out.getvalue(), err.getvalue(), tb, outside, lost)


# -- the report -------------------------------------------------------------------------------------

def _kill_rows(outcomes: list[KillOutcome]) -> str:
    killed = sum(o.killed for o in outcomes)
    torn = sum(bool(o.torn) for o in outcomes)
    rec = sum(o.recovered for o in outcomes)
    ident = sum(o.identical for o in outcomes)
    left = sum(bool(o.leftovers) for o in outcomes)
    w = outcomes[0].writes if outcomes else 0
    return f"{len(outcomes)} | {w} | {killed} | {torn} | {rec} | {ident} | {left}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.reliability", description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=30, help="kills per command (default 30)")
    ap.add_argument("--time-kills", type=int, default=10,
                    help="kills per command after a seeded delay instead of at a write (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=["kills", "concurrency", "hostile"], action="append",
                    help="run only these parts (repeatable; default: all)")
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    args = ap.parse_args(argv)
    parts = set(args.only or ["kills", "concurrency", "hostile"])
    log = lambda s: print(f"# {s}", file=sys.stderr, flush=True)  # noqa: E731
    report = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="chitragupta-reliability-") as tmp:
        tmp = Path(tmp)
        if "kills" in parts:
            report += ["### Crash safety: SIGKILL at a seeded write or after a seeded delay, then the same command again", "",
                       "| command, killed | corpus | kills | writes (or ms) in a clean run | died by SIGKILL | torn state seen by a reader "
                       "| rerun exit 0 | identical to a clean run | temp files left |", "|---|---|---|---|---|---|---|---|---|"]
            for name in args.scenarios:
                if name == "sync-docling" and not _docling_available():
                    report.append("| sync (docling) | - | not run: docling is not installed | | | | | | |")
                    continue
                if name == "enrich-embed" and not _enrich_available():
                    report.append("| enrich --stages embed | - | not run: the enrich extra is not installed | | | | | | |")
                    continue
                corpus = {"import": "2,000 JSONL records", "index": "2,000 JSONL records", "sync": "600 PDFs",
                          "sync-case": "case-colliding citekeys, two .bib versions swapping PDFs; then ONE rerun "
                                       "against a clean build",
                          "sync-docling": "40 Markdown files (docling, sidecars)",
                          "enrich-embed": "300 JSONL records (all-MiniLM-L6-v2, CPU)"}[name]
                for mode, n in (("write", args.kills), ("time", args.time_kills)):
                    if n < 1:
                        continue
                    t = time.time()
                    if name == "sync-case":
                        outs = case_campaign(tmp / f"kill-{name}-{mode}", n, seed=args.seed, log=log, mode=mode)
                    else:
                        outs = kill_campaign(name, tmp / f"kill-{name}-{mode}", n, seed=args.seed, log=log, mode=mode)
                    # a timed kill may land after the command ended: only the recovery is judged then
                    failures += sum(not (o.ok or (mode == "time" and not o.killed and not o.torn and o.identical
                                                  and not o.leftovers)) for o in outs)
                    what = "at a seeded write" if mode == "write" else "after a seeded delay (ms of a clean run)"
                    report.append(f"| `{_cmd_name(name)}` {what} | {corpus} | {_kill_rows(outs)} |")
                    for o in outs:
                        if o.torn or not o.identical or o.leftovers:
                            report.append(f"|  | kill at {o.kill_at} | torn: {'; '.join(o.torn)[:200]} | "
                                          f"rerun {o.rerun_rc} {o.rerun_err[:100]} | {'; '.join(o.differences)[:200]} | "
                                          f"{o.leftovers[:3]} | | | |")
                    log(f"{name} ({mode}): {time.time() - t:.0f} s")
            report.append("")
        if "concurrency" in parts:
            report += ["### Concurrency", "", "| what | runs | exit codes | said busy | unclear failures | result |",
                       "|---|---|---|---|---|---|"]
            for name in ("import", "index", "sync"):
                for lt in (None, 0.0):
                    o = concurrent_writers(name, tmp / f"conc-{name}-{lt}", n_docs=600 if name == "sync" else 2000,
                                           lock_timeout=lt)
                    failures += bool(o.unclear) or not o.identical
                    report.append(f"| {o.what} | {o.runs} | {o.exit_codes} | {o.busy} | {len(o.unclear)} | "
                                  f"{'identical to one clean run' if o.identical else 'DIFFERS'} |")
            race = search_during_rebuild(tmp / "race", rounds=3)
            failures += bool(race.mixed) or bool(race.errors)
            report.append(f"| searches looping while `import` + `index --force` alternate two corpora "
                          f"({race.rebuilds} rebuilds) | {race.searches} searches | - | - | {race.mixed} mixed"
                          f"{', error: ' + race.errors if race.errors else ''} | {race.old} old, {race.new} new answers |")
            report.append("")
        if "hostile" in parts:
            report += ["### Hostile and broken input", "", "| class | input | exit | outcome (first line) |",
                       "|---|---|---|---|"]
            for case in HOSTILE:
                o = run_hostile(case, tmp / "hostile")
                failures += not o.ok
                first = next((l for l in o.lines if case.needle in l), None) or (o.lines[0] if o.lines else o.out.strip().splitlines()[0] if o.out.strip() else "")
                verdict = "" if o.ok else " **NOT OK**" + (" traceback" if o.traceback else "") + (
                    f" outside: {o.outside[:2]}" if o.outside else "") + (f" lost: {o.lost[:2]}" if o.lost else "")
                first = first.replace("|", "\\|")
                report.append(f"| {case.cls} | {case.name} | {o.rc} | {first[:160]}{verdict} |")
            report.append("")
    print("\n".join(report))
    return 1 if failures else 0


def _cmd_name(name: str) -> str:
    return {"import": "import", "index": "index", "sync": "sync", "sync-case": "sync (case-colliding keys, killed twice)",
            "sync-docling": "sync (docling)", "enrich-embed": "enrich --stages embed"}[name]


if __name__ == "__main__":
    raise SystemExit(main())
