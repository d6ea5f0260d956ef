"""The docs name only what exists: every module, folder and dotted name of the package that README.md,
ARCHITECTURE.md or a page of docs/ mentions is found in src/chitragupta/, and every docs/ page the README
links to is there."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from helpers import ROOT

PKG = ROOT / "src" / "chitragupta"
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
# a path inside the package ("engine/search/query.py", "src/chitragupta/serve/", "kernels/cpu.py") ...
_PATH = re.compile(r"(?<![\w/.-])(?:src/chitragupta/|chitragupta/)?"
                   r"((?:kernels|engine|enrich|service|serve|cli|pages)(?:/[a-z_0-9]+)*(?:\.py|/))")
# ... or a dotted name ("chitragupta.engine.search.query.QueryPlan")
_DOTTED = re.compile(r"(?<![\w.])chitragupta(?:\.[A-Za-z_][A-Za-z_0-9]*)+")


def _mentions(pattern: re.Pattern) -> list[tuple[str, str]]:
    return [(doc.relative_to(ROOT).as_posix(), m.group(1) if m.groups() else m.group(0))
            for doc in DOCS for m in pattern.finditer(doc.read_text(encoding="utf-8"))]


def test_every_module_path_the_docs_name_exists():
    missing = [(doc, path) for doc, path in _mentions(_PATH) if not (PKG / path).exists()]
    assert missing == []


def test_every_dotted_name_the_docs_name_imports():
    missing = []
    for doc, name in _mentions(_DOTTED):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes on it
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append((doc, name))
            break
        else:
            missing.append((doc, name))
    assert missing == []


def test_the_readme_links_to_pages_that_exist():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(((?:docs/|bench/)?[\w./-]+\.md)\)", text)
    assert links and [link for link in links if not (ROOT / link).exists()] == []
