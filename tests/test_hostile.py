"""Hostile and broken input through the CLI, writes outside the workspace, and a scan for unsafe calls.

Each case of ``tools.reliability.HOSTILE`` runs its command in-process: it must end with the exit status
wanted and one clear line (an ``error:`` naming the file, line or key, what is wrong and what is
allowed; or a ``[warn]``/``[note]`` while the command goes on), never a traceback, write nothing
outside the workspace, and lose nothing that was in it. Cases already covered at the library level
(tests/test_bibtex.py, test_sync.py, test_config.py, test_passages.py, test_index.py, test_search.py)
are taken here through the command line, which is what a user meets.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.reliability import FAULTS, HOSTILE, ROOT, run_hostile


@pytest.mark.slow
@pytest.mark.parametrize("case", HOSTILE, ids=[f"{c.cls}-{c.name}" for c in HOSTILE])
def test_hostile_input_gets_a_clear_line_and_harms_nothing(tmp_path, case):
    if "docling" in case.name:
        pytest.importorskip("docling")
    o = run_hostile(case, tmp_path)
    assert not o.traceback, o.err
    assert o.rc == case.rc, (o.rc, o.err[-800:], o.out[-300:])
    assert case.needle in o.out or any(case.needle in line for line in o.lines), (case.needle, o.lines, o.out[-300:])
    if o.rc not in (0, 3):  # 3: sync finished, but some entry's document could not be read (named in warnings)
        assert o.err.count("\n") == 1 and o.err.startswith("error: "), o.err
    assert len(o.lines) == len(set(o.lines)), f"a line said twice: {o.lines}"
    assert o.outside == [], f"written outside the workspace: {o.outside}"
    assert o.lost == [], f"lost from the workspace: {o.lost}"


def test_hostile_citekeys_end_to_end_stay_citable(tmp_path):
    """Keys that are paths, device names or 10,000 characters: imported, indexed, found, written to a
    TREC run under their real names, and every file they produced is inside content/parsed."""
    from chitragupta.engine.search import Retriever

    keys = ["../../x", "CON", "a/b", "k" * 10_000, "/etc/y", "nul.txt", "..", "x\\y"]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"_id": k, "title": f"T{i}", "text": f"uniqword{i} twin"}) + "\n"
                           for i, k in enumerate(keys)), encoding="utf-8")
    ws = tmp_path / "ws"
    from conftest import run_cli

    run_cli("import", "-w", ws, src, check=True)
    for i, k in enumerate(keys):
        hits = Retriever.open(ws, backend="numpy").search(f"uniqword{i}", k=3).hits
        assert [h.citekey for h in hits] == [k]
    parsed = {p.resolve().parent for p in (ws / "content" / "parsed").iterdir()}
    assert parsed == {(ws / "content" / "parsed").resolve()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "ws"]


@pytest.mark.slow
def test_every_write_stays_inside_the_workspace(tmp_path):
    """Every file-system write of sync, import, index, search (--log), evidence, traced by audit hooks:
    inside the workspace, except the --run file the user named (and Python's/numba's own caches)."""
    ws = tmp_path / "ws"
    (ws / "papers").mkdir(parents=True)
    from chitragupta.engine.demo.tinypdf import write_pdf

    write_pdf(ws / "papers" / "a.pdf", ["A title", "digital twin bridge"])
    (ws / "papers" / "bibliography.bib").write_text(
        "@misc{../../up, title={Up}, file={a.pdf}}\n@misc{CON, title={Con}, file={/etc/passwd}}\n"
        "@misc{a/b, title={AB}, file={a.pdf}}\n", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "../../../j", "text": "twin"}) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "twin"}) + "\n")
    log = tmp_path / "writes.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAULTS), str(ROOT)]), CHITRAGUPTA_WRITE_LOG=str(log))
    commands = [["sync", "-w", ws], ["import", "-w", ws, tmp_path / "c.jsonl"], ["index", "-w", ws],
                ["search", "-w", ws, "twin", "--log", "../../../draft"], ["evidence", "-w", ws, "twin", "--citekey", "a/b"],
                ["search", "-w", ws, "--queries", tmp_path / "q.jsonl", "--run", tmp_path / "out.trec"]]
    for argv in commands:
        p = subprocess.run([sys.executable, "-m", "chitragupta.cli.main", *map(str, argv)], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
        assert p.returncode == (3 if argv[0] == "sync" else 0), (argv, p.stderr)  # sync: CON's file is refused
    writes = [line.split("\t", 1) for line in log.read_text().splitlines()]
    assert len(writes) > 20  # the hook saw the work
    inside = str(ws.resolve()) + os.sep
    outside = []
    for event, path in writes:
        if path.startswith(inside) or "__pycache__" in Path(path).parts:
            continue
        if event == "os.mkdir" and Path(path).is_dir() and inside.startswith(path + os.sep):
            continue  # mkdir(parents=True, exist_ok=True) of the workspace's own ancestors
        if Path(path).parent == tmp_path and Path(path).name.startswith((".out.trec.", "out.trec")):
            continue  # the run file the user asked for, via its temp file
        outside.append(f"{event} {path}")
    assert outside == []
    assert (ws / "content" / "dossiers").is_dir() and not (tmp_path.parent / "draft").exists()


# -- the source tree holds no unsafe calls ---------------------------------------------------------

SCANNED = ("src", "bench", "tools")


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _dotted(func) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    parts.append(func.id if isinstance(func, ast.Name) else "?")  # "?": a call's or subscript's result
    return ".".join(reversed(parts))


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def unsafe_uses(path: Path) -> list[str]:
    """``file:line: what`` for each pickle import, eval/exec, shell=True, os.system, np.load without
    allow_pickle=False and torch.load without weights_only=True in one Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    where = lambda n: f"{shown}:{n.lineno}"  # noqa: E731
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [f"{where(node)}: import {a.name}" for a in node.names if a.name.split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve"):
            out.append(f"{where(node)}: from {node.module} import")
    for call in _calls(tree):
        name = _dotted(call.func)
        if name in ("eval", "exec", "builtins.eval", "builtins.exec"):
            out.append(f"{where(call)}: {name}(")
        elif name in ("os.system", "os.popen", "pickle.load", "pickle.loads"):
            out.append(f"{where(call)}: {name}(")
        shell = _kw(call, "shell")
        if shell is not None and not (isinstance(shell, ast.Constant) and shell.value is False):
            out.append(f"{where(call)}: shell=...")
        if name in ("np.load", "numpy.load"):
            ap = _kw(call, "allow_pickle")
            if not (isinstance(ap, ast.Constant) and ap.value is False):
                out.append(f"{where(call)}: np.load without allow_pickle=False")
        if name == "torch.load":
            wo = _kw(call, "weights_only")
            if not (isinstance(wo, ast.Constant) and wo.value is True):
                out.append(f"{where(call)}: torch.load without weights_only=True")
    return out


def test_source_tree_has_no_unsafe_calls():
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 40
    found = [u for p in files for u in unsafe_uses(p)]
    assert found == []


def test_the_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "unsafe_sample.py"
    bad.write_text("import pickle\nimport numpy as np, os, subprocess\neval('1')\nexec('x=1')\n"
                       "subprocess.run('ls', shell=True)\nos.system('ls')\nnp.load('x.npy')\n"
                   "np.load('x.npy', allow_pickle=True)\nnp.load('x.npy', allow_pickle=False)\nmodel.eval()\n"
                   "make().eval()\n")
    found = unsafe_uses(bad)
    assert [f.split(": ", 1)[1] for f in found] == [
        "import pickle", "eval(", "exec(", "shell=...", "os.system(", "np.load without allow_pickle=False",
        "np.load without allow_pickle=False"]
