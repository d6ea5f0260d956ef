"""The package's layers point down (ARCHITECTURE.md), read from the source: every import statement of
every installed module, top-level or inside a function, is checked against the layer it may use. And the
bench, which is not installed, reaches the package through public names only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# layer -> the chitragupta modules it may import (by prefix); "bottom" is errors, extras, device
BOTTOM = ("chitragupta.errors", "chitragupta.notes", "chitragupta.extras", "chitragupta.device",
          "chitragupta.files", "chitragupta.pages")
ALLOWED = {
    "bottom": BOTTOM,
    "kernels": BOTTOM + ("chitragupta.kernels",),
    "engine": BOTTOM + ("chitragupta.kernels", "chitragupta.engine"),
    "enrich": BOTTOM + ("chitragupta.kernels", "chitragupta.engine", "chitragupta.enrich"),
    "service": BOTTOM + ("chitragupta.kernels", "chitragupta.engine", "chitragupta.enrich", "chitragupta.service"),
    "serve": BOTTOM + ("chitragupta.kernels", "chitragupta.engine", "chitragupta.enrich", "chitragupta.service",
                       "chitragupta.serve"),
    "cli": BOTTOM + ("chitragupta.kernels", "chitragupta.engine", "chitragupta.enrich", "chitragupta.service",
                     "chitragupta.serve", "chitragupta.cli"),
    # chitragupta/__init__.py re-exports the engine's names and the service's open_searcher, loaded on first use
    "root": ("chitragupta.engine", "chitragupta.service"),
}


PKG = ROOT / "src" / "chitragupta"


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    if rel[0] in ("cli", "serve", "service", "kernels", "engine", "enrich"):
        return rel[0]
    return "root" if rel[0] == "__init__.py" else "bottom"


def _modules():
    yield from sorted(PKG.rglob("*.py"))


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                yield node.lineno, "." * node.level + (node.module or "")
            else:
                yield node.lineno, node.module or ""


def test_every_installed_module_imports_only_its_layer_and_below():
    bad = []
    for path in _modules():
        layer = _layer(path)
        for line, name in _imports(path):
            where = f"{path.relative_to(ROOT)}:{line}: {layer} imports {name}"
            top = name.split(".")[0]
            if name.startswith("."):
                bad.append(where + " (relative: use the chitragupta. name)")
            elif top in ("engine", "kernels", "enrich", "bench", "tests", "conftest"):
                bad.append(where + " (a top-level name: not installed)")
            elif top == "chitragupta" and not any(name == p or name.startswith(p + ".") for p in ALLOWED[layer]):
                bad.append(where)
    assert bad == []


# engine's folders, lowest first: each imports only itself and the folders before it (citations and
# evaluation are siblings at the top)
ENGINE_FOLDERS = {"text": 0, "library": 1, "index": 2, "search": 3, "citations": 4, "evaluation": 4}


def test_engine_folders_import_only_themselves_and_the_folders_below():
    bad = []
    engine = PKG / "engine"
    assert sorted(p.name for p in engine.iterdir() if (p / "__init__.py").exists()) == sorted(ENGINE_FOLDERS)
    for path in sorted(engine.rglob("*.py")):
        rel = path.relative_to(engine).parts
        if len(rel) < 2:
            continue
        for line, name in _imports(path):
            parts = name.split(".")
            if parts[:2] != ["chitragupta", "engine"] or len(parts) < 3 or parts[2] == rel[0]:
                continue
            if ENGINE_FOLDERS.get(parts[2], 99) >= ENGINE_FOLDERS[rel[0]]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: engine/{rel[0]} imports {name}")
    assert bad == []


def test_the_bottom_layer_and_the_kernels_import_no_heavy_package_at_module_level():
    """errors/extras/device and the kernels' own modules import torch, faiss and friends only inside
    functions, so importing them stays cheap."""
    heavy = {"torch", "faiss", "sentence_transformers", "transformers", "bertopic", "umap", "hdbscan", "docling"}
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for n in names:
                if n.split(".")[0] in heavy and "torch_backend" not in path.name:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {n}")
    assert bad == []


def _private_uses(path: Path, own: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chitragupta"):
            out += [f"{path.name}:{node.lineno}: imports {a.name} from {node.module}" for a in node.names
                    if a.name.startswith("_")]
            if any(part.startswith("_") for part in (node.module or "").split(".")):
                out.append(f"{path.name}:{node.lineno}: imports from private module {node.module}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls", "os", "sys"):
                continue
            if node.attr in own:
                continue  # bench's own helper, reached through a bench module
            out.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return out


def test_bench_and_tools_use_only_public_names_of_the_package():
    files = sorted((ROOT / "bench").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))
    own = set()  # names bench defines itself (functions, classes, attributes it sets)
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                own.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        own.add(t.id)
                    elif isinstance(t, ast.Attribute):
                        own.add(t.attr)
    bad = [u for path in files for u in _private_uses(path, own)]
    assert bad == []


@pytest.mark.parametrize("name", ["engine", "kernels", "enrich"])
def test_the_package_does_not_install_top_level_names(name):
    """Hugging Face's ``kernels`` (which transformers probes) and the PyPI ``enrich`` are other projects."""
    import importlib.metadata as md

    assert "chitragupta" not in (md.packages_distributions().get(name) or [])
