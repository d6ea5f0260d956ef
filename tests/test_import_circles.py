"""No import circles among the package's modules, read from the source: every import statement, top-level
or inside a function, is an edge (a reader follows it either way), so a circle cannot be hidden by moving
an import into a function. A module importing its own package's ``__init__`` is not an edge."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules(src: Path) -> dict[str, Path]:
    mods = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _graph(src: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports (``from a import b`` counts ``a.b`` when that is a module)."""
    mods = _modules(src)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + (node.module.split(".") if node.module else []))
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in mods:  # ``a.b.func`` -> the module ``a.b``
                    name = name.rpartition(".")[0]
                if name and name != mod and not mod.startswith(name + ".") and mods[name].name != "__init__.py":
                    graph[mod].add(name)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_walk_finds_a_circle_through_a_function_level_import(tmp_path):
    """The check itself: a circle closed by an import inside a function, and one by a relative import, are
    found; a package importing its own ``__init__`` is not a circle."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from p.b import thing\n")
    (pkg / "b.py").write_text("def f():\n    from p import a\n    return a\nthing = 1\n")
    (pkg / "sub" / "c.py").write_text("from . import d\nimport p\n")
    (pkg / "sub" / "d.py").write_text("from .c import x\n")
    (pkg / "e.py").write_text("import p.a\n")
    assert _circles(_graph(tmp_path)) == [["p.a", "p.b"], ["p.sub.c", "p.sub.d"]]


def test_the_package_has_no_import_circle():
    graph = _graph(SRC)
    assert "chitragupta.engine.search.query" in graph and len(graph) > 50  # the walk read the real tree
    assert _circles(graph) == []
