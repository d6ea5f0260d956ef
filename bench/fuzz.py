"""A coverage-guided fuzz run (atheris / libFuzzer) of the readers of untrusted files: BibTeX, the
structural sidecar, and the JSONL corpus.

    pip install -e ".[fuzz]"
    python -m bench fuzz --seconds 120                 # all three readers, inputs split by a first byte
    python -m bench fuzz --seconds 60 --target bibtex

The contract under test: a reader returns (entries and line-numbered problems, or validated items) or
raises its own one-line error (CorpusError, SidecarError); anything else -- another exception, a NUL in
a citekey, an item of the wrong shape -- is a *finding*. Findings are collected (not fatal), each
distinct one saved under ``--out`` with the input that caused it, and a summary is printed at the end:
executions, executions per second, distinct findings. Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

TARGETS = ("bibtex", "sidecar", "jsonl")

SEEDS = {
    "bibtex": [
        b"@article{good1,\n  title = {A {Digital} Twin of Caf{\\'e} Networks},\n  abstract = {An abstract.},\n"
        b"  keywords = {digital twin; networks},\n  file = {Full Text:papers/a.pdf:application/pdf;b.pdf}\n}\n",
        b"@misc{k2, title = \"Second\", year = 2020}\n@misc{k2, title = {dup}}\n@string{x = \"y\"}\n",
        b"@comment{ignored}\n@preamble{\"\\newcommand\"}\n@book{k3, author = {A and B}, title = x # {y}}\n",
        b"@article{broken, title = {unclosed\n\n@misc{after, title={ok}}\n",
    ],
    "sidecar": [
        b'[{"text": "1 Introduction", "label": "section_header", "page": 1}, {"text": "Body.", "label": "text"}]',
        b'[{"text": "| a | b |\\n|---|---|\\n| 1 | 2 |", "label": "table", "page": 2}]',
        b'[]', b'{"text": "x"}', b'[{"text": "x", "label": "text", "page": -1}]',
    ],
    "jsonl": [
        b'{"_id": "d1", "title": "One", "text": "first", "keywords": ["a", "b"]}\n{"_id": 7, "text": "x"}\n',
        b'{"_id": "d1", "text": "dup"}\n{"_id": "d1"}\nnot json\n[1]\n',
    ],
}


class Finding(Exception):
    pass


def _check_bibtex(path: Path) -> None:
    from chitragupta.engine.library.bibtex import read_bibtex
    from chitragupta.errors import CorpusError

    try:
        entries, problems = read_bibtex(path)
    except CorpusError as err:
        if "\n" in str(err).strip():
            raise Finding(f"CorpusError over several lines: {str(err)[:200]!r}")
        return
    for e in entries:
        if not e.citekey or "\x00" in e.citekey or e.citekey != e.citekey.strip():
            raise Finding(f"bad citekey {e.citekey[:80]!r}")
        if not isinstance(e.title, str) or "\x00" in e.title:
            raise Finding(f"bad title {e.title[:80]!r}")
        if e.line < 1:
            raise Finding(f"entry line {e.line}")
    for p in problems:
        if not p.startswith(str(path) + ":"):
            raise Finding(f"problem without file:line: {p[:200]!r}")


def _check_sidecar(path: Path) -> None:
    from chitragupta.engine.text.sidecar import SidecarError, dump_sidecar, read_sidecar

    try:
        items = read_sidecar(path)
    except SidecarError as err:
        if not str(err).startswith(str(path)):
            raise Finding(f"SidecarError without the file name: {str(err)[:200]!r}")
        return
    for it in items:
        if set(it) != {"text", "label", "page"} or not isinstance(it["text"], str) or not it["label"]:
            raise Finding(f"item of the wrong shape: {str(it)[:200]!r}")
        if it["page"] is not None and (type(it["page"]) is not int or it["page"] < 1):
            raise Finding(f"page {it['page']!r}")
    # what is read back must serialise and read back to the same items
    again = Path(str(path) + ".rt")
    again.write_text(dump_sidecar(items), encoding="utf-8")
    if read_sidecar(again) != items:
        raise Finding("dump_sidecar / read_sidecar round trip changed the items")


def _check_jsonl(path: Path) -> None:
    from chitragupta.engine.library.jsonl import iter_jsonl
    from chitragupta.errors import CorpusError

    problems: list[str] = []
    try:
        records = list(iter_jsonl(path, problems))
    except CorpusError:
        return
    seen = set()
    for r in records:
        if not r.citekey.strip() or "\x00" in r.citekey or r.citekey in seen:
            raise Finding(f"bad or duplicate _id {r.citekey[:80]!r}")
        seen.add(r.citekey)
        if "\x00" in r.text or "\x00" in r.title:
            raise Finding("NUL byte in a record's text")
    for p in problems:
        if not p.startswith(str(path) + ":"):
            raise Finding(f"problem without file:line: {p[:200]!r}")


CHECKS = {"bibtex": _check_bibtex, "sidecar": _check_sidecar, "jsonl": _check_jsonl}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="how long to fuzz (default 120)")
    ap.add_argument("--target", choices=["all", *TARGETS], default="all")
    ap.add_argument("--out", default=None, help="folder for the inputs of findings (default: a temp folder)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        import atheris
    except ImportError as err:
        print(f"error: the fuzz run needs atheris (pip install -e '.[fuzz]'): {err}", file=sys.stderr)
        return 1
    with atheris.instrument_imports():
        import bibtexparser  # noqa: F401  (the BibTeX reader's parser is what most of the input reaches)

        import chitragupta.engine.library.bibtex  # noqa: F401
        import chitragupta.engine.library.jsonl  # noqa: F401
        import chitragupta.engine.text.sidecar  # noqa: F401

    targets = TARGETS if args.target == "all" else (args.target,)
    work = Path(tempfile.mkdtemp(prefix="chitragupta-fuzz-"))
    out = Path(args.out) if args.out else work / "findings"
    out.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus"
    corpus.mkdir()
    for t_i, t in enumerate(targets):
        for s_i, seed in enumerate(SEEDS[t]):
            prefix = bytes([t_i]) if len(targets) > 1 else b""
            (corpus / f"{t}-{s_i}").write_bytes(prefix + seed)
    stats = {"execs": 0, "per_target": {t: 0 for t in targets}}
    findings: dict[str, tuple[str, bytes]] = {}
    start = time.monotonic()
    files = {t: work / f"input-{t}" for t in targets}

    def report_and_exit() -> None:
        took = time.monotonic() - start
        print(f"fuzz: {stats['execs']} executions in {took:.0f} s ({stats['execs'] / max(took, 1e-9):.0f}/s); "
              + ", ".join(f"{t} {n}" for t, n in stats["per_target"].items()), flush=True)
        print(f"fuzz: {len(findings)} distinct finding(s)" + (f", inputs in {out}" if findings else ""), flush=True)
        for key, (what, _data) in findings.items():
            print(f"  - {key}: {what}", flush=True)
        sys.stdout.flush()
        if not findings or args.out:  # keep the temp folder only when it holds the findings' inputs
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        os._exit(1 if findings else 0)

    def one_input(data: bytes) -> None:
        if time.monotonic() - start > args.seconds:
            report_and_exit()
        if len(targets) > 1:
            if not data:
                return
            t = targets[data[0] % len(targets)]
            data = data[1:]
        else:
            t = targets[0]
        stats["execs"] += 1
        stats["per_target"][t] += 1
        path = files[t]
        path.write_bytes(data)
        try:
            CHECKS[t](path)
        except Finding as f:
            key = f"{t}: {str(f)[:60]}"
            what = str(f)
        except RecursionError:
            key, what = f"{t}: RecursionError", "RecursionError"
        except Exception as err:  # noqa: BLE001 - any other exception is a finding
            frame = traceback.extract_tb(err.__traceback__)[-1]
            key = f"{t}: {type(err).__name__} at {Path(frame.filename).name}:{frame.lineno}"
            what = f"{type(err).__name__}: {str(err)[:200]}"
        else:
            return
        if key not in findings:
            findings[key] = (what, data)
            (out / f"finding-{len(findings):03d}-{t}").write_bytes(data)
            print(f"fuzz: finding {len(findings)}: {key}: {what}", file=sys.stderr, flush=True)

    # -len_control=0: long inputs from the start (deep nesting needs a few thousand bytes)
    atheris.Setup([sys.argv[0], f"-seed={args.seed}", "-max_len=8192", "-len_control=0", "-rss_limit_mb=4096",
                   str(corpus)], one_input)
    atheris.Fuzz()
    report_and_exit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
