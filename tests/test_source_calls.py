"""The source tree (src, bench, tools) holds no unsafe calls: a scan of every module's syntax tree, and a
check that the scan finds what it looks for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

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


@pytest.mark.slow
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
