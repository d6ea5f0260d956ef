"""The citekey as every command takes it (cli/_common.py ``add_citekey``): positional, or ``--citekey`` /
``-c`` (the older form of ``evidence`` and ``explain``), with one message naming both forms."""

from __future__ import annotations

import pytest

from helpers import make_workspace, random_docs, run_main


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("keys"), random_docs(3, 30, vocab=30))


def _key(ws) -> str:
    from chitragupta.engine.search.bm25 import Retriever

    return Retriever.open(ws).citekey(0)


@pytest.mark.parametrize("command", ["evidence", "explain"])
def test_a_command_with_a_query_takes_the_key_either_way(ws, command):
    key = _key(ws)
    forms = [(key, "twin model"), ("twin model", "--citekey", key), ("--citekey", key, "twin model"),
             ("twin model", "-c", key)]
    outs = [run_main(command, "-w", ws, *form) for form in forms]
    assert all(p.returncode == 0 for p in outs), [p.stderr for p in outs]
    assert len({p.stdout for p in outs}) == 1
    p = run_main(command, "-w", ws, "twin model")
    assert p.returncode == 1 and f'give the citekey and the query: chitragupta {command} KEY "QUERY" (or ' \
        f'{command} "QUERY" --citekey KEY)' in p.stderr
    p = run_main(command, "-w", ws, key, "twin", "model")
    assert p.returncode == 1 and "3 words where a citekey and one query go; quote a query" in p.stderr


@pytest.mark.parametrize("command", ["similar", "refs", "cites", "cited-by"])
def test_a_command_of_one_key_takes_it_either_way(ws, command):
    key = _key(ws)
    a, b = run_main(command, "-w", ws, key), run_main(command, "-w", ws, "--citekey", key)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout)
    p = run_main(command, "-w", ws)
    assert p.returncode == 1 and f"give the citekey: chitragupta {command} KEY (or --citekey KEY)" in p.stderr
    p = run_main(command, "-w", ws, key, "-c", "other")
    assert p.returncode == 1 and "two citekeys given" in p.stderr
