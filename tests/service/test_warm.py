"""``service/warm.py``: the units a workspace serves (what the MCP search tool advertises) are exactly those
that answer -- an advertised unit returns hits for a word of the corpus, one left out returns none or an
error -- before and after the embedding store is built; and ``source`` names no absolute path."""

from __future__ import annotations

import pytest

from chitragupta.errors import ChitraguptaError

from helpers import corpus_records, import_records


def _answers(warm, engine: str, unit: str) -> bool:
    try:
        return bool(warm.search("ocean heat soil", k=3, engine=engine, unit=unit)["hits"])
    except ChitraguptaError:
        return False


def _check(warm) -> dict:
    from chitragupta.service import registry

    served = warm.served_units()
    for name, spec in registry.ENGINES.items():
        for unit in spec.units:
            assert (unit in served[name]) == _answers(warm, name, unit), (name, unit, served)
    return served


@pytest.mark.enrich
@pytest.mark.slow
def test_the_units_served_are_the_units_that_answer(tmp_path, encoder):
    from chitragupta.service.warm import WarmEngines

    from helpers import cli_main

    root = import_records(tmp_path / "ws", corpus_records())
    assert cli_main("index", "-w", root) == 0
    before = _check(WarmEngines(root))
    assert before == {"bm25": ("document",), "embed": (), "hybrid": ("document",)} or "passage" in before["bm25"]
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    after = _check(WarmEngines(root))
    assert after["embed"] == ("chunk",) and after["hybrid"] == ("document", "passage")


def test_source_names_its_files_relative_to_the_workspace(tmp_path):
    from chitragupta.service.warm import WarmEngines

    from helpers import make_workspace, random_docs, run_cli

    root = make_workspace(tmp_path, random_docs(3, 5))
    run_cli("index", "-w", root, check=True)
    got = WarmEngines(root).source("d0001")
    assert (got["origin"], got["parsed_path"]) == ("../corpus.jsonl", "content/parsed/d0001.txt")
    assert str(tmp_path) not in repr(got)
