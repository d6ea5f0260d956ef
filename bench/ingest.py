"""Whole-process ``import`` of a large JSONL corpus beside ``index`` on the same workspace.

    python -m bench ingest --docs 1000000 [--work /work/imp] [--seed 0] [--from ../shared/data/scifact]
                           [--changed 0.01] [--no-index] [--keep] [--json out.json]

The corpus is ``bench.synth``'s (documents drawn from scifact's statistics, ``_id`` = ``syn0000042``),
written once to ``WORK/corpus-<docs>-s<seed>.jsonl`` and reused after; a copy with every
``round(1 / changed)``-th text changed (a word appended) beside it. Then, each as its own process
(``python -m chitragupta.cli.main ...``, what the ``chitragupta`` script runs), timed from start to exit with
the child's own CPU time and peak RSS (``wait4``):

  import fresh     ``import`` into a new, empty workspace ``WORK/ws-<docs>`` (the corpus imported through one
                   path, ``WORK/ws-<docs>.jsonl``, a hard link to the version of the step: the ledger
                   knows a source by its path)
  index            ``index`` on that workspace: the full build, every parsed file read and tokenized
  re-import        ``import`` of the same, unchanged file: nothing written
  import 1% chg    ``import`` of the changed copy: those texts rewritten, their rows updated

The 1-minute load average is shown beside each figure: on a shared host it says whether something else
was running. The workspace is removed at the end unless ``--keep`` (removing a million files takes a
while; it is not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from bench.timer import run_timed, stopwatch

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORK = Path(os.environ.get("CHITRAGUPTA_INGEST_WORK", ROOT / "bench" / "out" / "ingest"))

__all__ = ["corpus", "changed_copy", "timed", "machine", "main"]


def corpus(work: Path, docs: int, seed: int, source: Path, log=print) -> Path:
    """``WORK/corpus-<docs>-s<seed>.jsonl``: generated when missing (through a ``.part`` file), else reused."""
    path = work / f"corpus-{docs}-s{seed}.jsonl"
    if path.is_file():
        log(f"reusing {path}")
        return path
    from bench.synth import _write_jsonl, documents, fit

    with stopwatch() as took:
        stats = fit(source, seed=seed)
        part = path.with_suffix(".jsonl.part")
        n = _write_jsonl(part, documents(stats, docs, seed))
        os.replace(part, path)
    log(f"generated {n:,} documents into {path} in {took.wall:.0f} s")
    return path


def changed_copy(src: Path, frac: float, log=print) -> tuple[Path, int]:
    """A copy of ``src`` with every ``round(1 / frac)``-th record's text changed; (path, records changed)."""
    every = max(1, round(1 / frac))
    path = src.with_name(f"{src.stem}-changed{every}.jsonl")
    changed = 0
    if not path.is_file():
        part = path.with_suffix(".jsonl.part")
        with open(src, "rb") as f, open(part, "wb") as out:
            for i, raw in enumerate(f):
                if i % every == every - 1:
                    rec = json.loads(raw)
                    rec["text"] = rec.get("text", "") + " ingestrevised"
                    raw = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
                    changed += 1
                out.write(raw)
        os.replace(part, path)
        log(f"wrote {path} ({changed:,} texts changed)")
    else:
        with open(src, "rb") as f:
            changed = sum(1 for i, _ in enumerate(f) if i % every == every - 1)
    return path, changed


def timed(argv: list[str], env: dict | None = None) -> dict:
    """Run ``argv`` to its end: wall seconds, the child's user / system CPU seconds and peak RSS (MiB)."""
    load = os.getloadavg()[0]
    took = run_timed(argv, env=env, cwd=ROOT)
    lines = [l for l in took["stdout"].splitlines() if l.strip()]
    return {"wall_s": round(took["wall_s"], 2), "user_s": round(took["user_s"], 2), "sys_s": round(took["sys_s"], 2),
            "cpu_s": round(took["cpu_s"], 2), "peak_rss_mib": round(took["peak_rss_mib"], 1),
            "load1": round(load, 2), "said": lines[0] if lines else ""}


def _run(argv: list[str]) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout first
    return timed([sys.executable, "-m", "chitragupta.cli.main", *map(str, argv)], env=dict(os.environ, PYTHONPATH=path))


def machine(work: Path) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(next(l.split()[1] for l in f if l.startswith("MemTotal")))
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    fs = ""
    try:
        best = ""
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                dev, mnt, kind = line.split()[:3]
                if str(work.resolve()).startswith(mnt.rstrip("/") + "/") and len(mnt) >= len(best):
                    best, fs = mnt, f"{kind} on {mnt}"
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "filesystem": fs,
            "python": platform.python_version(), "host": platform.node()}


def _cmd(argv: list[str]) -> str:
    return "chitragupta " + " ".join(str(a) for a in argv)


def main(argv: list[str] | None = None) -> int:
    from bench.data import DEFAULT_DATA

    ap = argparse.ArgumentParser(prog="python -m bench ingest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, required=True, help="documents in the corpus")
    ap.add_argument("--work", default=str(DEFAULT_WORK),
                    help=f"where the corpus and workspace go (default {DEFAULT_WORK})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from", dest="source", default=str(DEFAULT_DATA / "scifact"),
                    help="the BEIR collection whose statistics the corpus is drawn from")
    ap.add_argument("--changed", type=float, default=0.01, help="share of records changed for the last import")
    ap.add_argument("--no-index", action="store_true", help="skip the index build")
    ap.add_argument("--keep", action="store_true", help="keep the workspace afterwards")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.docs < 1 or not 0 < args.changed <= 1:
        ap.error("--docs must be >= 1 and --changed in (0, 1]")
    log = lambda s: print(f"# {s}", file=sys.stderr, flush=True)  # noqa: E731
    work = Path(args.work).expanduser()
    work.mkdir(parents=True, exist_ok=True)
    src = corpus(work, args.docs, args.seed, Path(args.source), log=log)
    chg, n_changed = changed_copy(src, args.changed, log=log)
    ws = work / f"ws-{args.docs}"
    if ws.exists():
        log(f"removing the previous {ws}")
        shutil.rmtree(ws)
    ws.mkdir()
    # One path for every import (the ledger knows its sources by path): a hard link to the version imported.
    into = work / f"ws-{args.docs}.jsonl"
    steps = [("import fresh", src, ["import", "-w", ws, into])]
    if not args.no_index:
        steps.append(("index", None, ["index", "-w", ws]))
    steps += [("re-import, unchanged", src, ["import", "-w", ws, into]),
              (f"import, {n_changed:,} changed", chg, ["import", "-w", ws, into])]
    rows = []
    for what, version, cmd in steps:
        if version is not None:
            into.unlink(missing_ok=True)
            os.link(version, into)
            what += f" ({version.name})"
        else:
            time.sleep(2.5)  # past the parsed folder's racy window (chitragupta.engine.index.manage.RACY_NS)
        log(f"{what}: {_cmd(cmd)}")
        got = _run(cmd)
        log(f"  {got}")
        rows.append({"step": what, "command": _cmd(cmd), **got})
    m = machine(work)
    print(f"\nmachine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['filesystem']}, Python {m['python']}")
    print(f"corpus: {src} ({args.docs:,} documents, {src.stat().st_size / 2**20:,.0f} MiB)\n")
    print("| step | command | wall s | user s | sys s | CPU s | peak RSS MiB | load (1 min) | said |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | `{r['command']}` | {r['wall_s']:.1f} | {r['user_s']:.1f} | {r['sys_s']:.1f} | "
              f"{r['cpu_s']:.1f} | {r['peak_rss_mib']:,.0f} | {r['load1']:.2f} | {r['said'][:110]} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "docs": args.docs, "corpus": str(src), "steps": rows},
                                              indent=1) + "\n", encoding="utf-8")
    into.unlink(missing_ok=True)
    if not args.keep:
        log(f"removing {ws}")
        shutil.rmtree(ws, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
