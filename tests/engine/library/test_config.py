import argparse
import contextlib
import math
import os
from pathlib import Path

import pytest
from chitragupta.engine.library.config import (
    INT_MAX,
    MAX_CONFIG_BYTES,
    SCHEMA,
    defaults_text,
    load_config,
)
from chitragupta.engine.library.workspace import Workspace
from chitragupta.errors import ConfigError

from helpers import Feeder, one_error_line, run_main

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path, text):
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_and_root_config_agree():
    cfg = load_config()
    assert cfg.retrieval.k1 == 1.5 and cfg.retrieval.b == 0.75
    assert cfg.retrieval.backend == "auto" and cfg.parser.backend == "pdftotext"
    # The documented root config.toml is the packaged defaults, comments included.
    assert (ROOT / "config.toml").read_text(encoding="utf-8") == defaults_text()


def test_every_schema_key_is_documented_in_defaults():
    text = defaults_text()
    for sec, keys in SCHEMA.items():
        assert f"[{sec}]" in text
        for key in keys:
            assert f"\n{key} = " in text, key


def test_file_overrides_defaults(tmp_path):
    cfg = load_config(write(tmp_path, "[retrieval]\nk1 = 2\nb = 0.5\n"))
    assert cfg.retrieval.k1 == 2.0 and isinstance(cfg.retrieval.k1, float)
    assert cfg.retrieval.b == 0.5 and cfg.retrieval.backend == "auto"


@pytest.mark.parametrize("line, needle", [
    ("k1 = -0.1", "a number in [0, 1000]"),
    ("k1 = nan", "a number in [0, 1000]"),
    ("k1 = inf", "a number in [0, 1000]"),
    ("k1 = -inf", "a number in [0, 1000]"),
    ("k1 = 1e308", "a number in [0, 1000]"),  # passed before and scored inf
    ("weight_title = 1e308", "a number in [0, 1000]"),
    ("weight_abstract = 1001", "a number in [0, 1000]"),
    ("b = 1.01", "[0, 1]"),
    ("b = -0.5", "[0, 1]"),
    ("b = nan", "[0, 1]"),
    ("k1 = \"1.5\"", "is a str"),
    ("k1 = true", "is a bool"),
    ("threads = 1.5", "is a float"),
    ("threads = -1", "integer >= 0"),
    ("snippet_chars = 0", "integer >= 1"),
    ("backend = \"cuda-magic\"", '"numba"'),
])
def test_bad_retrieval_values_rejected_with_file_key_value_allowed(tmp_path, line, needle):
    p = write(tmp_path, f"[retrieval]\n{line}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    key, value = (s.strip() for s in line.split("=", 1))
    assert str(p) in msg and key in msg and needle in msg
    assert "allowed" in msg


def test_nan_in_every_float_setting_is_rejected(tmp_path):
    for sec, keys in SCHEMA.items():
        for key, s in keys.items():
            if s.kind is float:
                with pytest.raises(ConfigError, match=key):
                    load_config(write(tmp_path, f"[{sec}]\n{key} = nan\n"))


def test_unknown_key_and_section(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key \[retrieval\] k3.*allowed keys.*k1"):
        load_config(write(tmp_path, "[retrieval]\nk3 = 1\n"))
    with pytest.raises(ConfigError, match=r"unknown section \[retrievel\].*\[retrieval\]"):
        load_config(write(tmp_path, "[retrievel]\nk1 = 1\n"))
    with pytest.raises(ConfigError, match="must be a table"):
        load_config(write(tmp_path, "retrieval = 3\n"))


def test_parser_backend_choices_come_from_the_registry(tmp_path):
    from chitragupta.engine.library.parsers import PARSERS

    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, '[parser]\nbackend = "tika"\n'))
    for name in PARSERS:
        assert f'"{name}"' in str(e.value)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[retrieval\nk1 = 1\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_config_is_frozen():
    cfg = load_config()
    with pytest.raises(Exception):
        cfg.retrieval.k1 = 3.0
    assert math.isfinite(cfg.workspace.lock_timeout)


@pytest.mark.parametrize("line, needle", [
    ('method = "borda"', '"rrf", "minmax"'),
    ("rrf_k = -1", "[0, 100000]"),
    ("weight_dense = 1e308", "[0, 1000]"),
    ("depth = 0", "[1, 100000]"),
])
def test_bad_hybrid_values_rejected(tmp_path, line, needle):
    p = write(tmp_path, f"[hybrid]\n{line}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert "[hybrid]" in str(ei.value) and needle in str(ei.value)


def test_the_largest_allowed_dials_score_finite(tmp_path):
    """k1 and the field weights at their bound still give finite scores (1e308 passed and gave inf)."""
    import math

    from chitragupta.engine.search.bm25 import Retriever

    from helpers import make_workspace, random_docs

    ws = make_workspace(tmp_path, random_docs(5, 40))
    (ws / "config.toml").write_text("[retrieval]\nk1 = 1000\nweight_title = 1000\nweight_abstract = 1000\n")
    resp = Retriever.open(ws).search("twin digital model", k=5, snippet_chars=0)
    assert resp.hits and all(math.isfinite(h.score) and h.score > 0 for h in resp.hits)


# -- hostile values and files: one error line, never a traceback or a hang -----------------------------------
def _config(tmp_path, text: str, name: str = "config.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("text, needles", [
    ("[retrieval]\nk1 = " + "9" * 400 + "\n", ["[retrieval] k1", "too large for a number", "[0, 1000]"]),
    ("[retrieval]\nk1 = " + "9" * 5000 + "\n", ["a number too long", "4300 digits"]),
    ("[retrieval]\nk1 = " + "[" * 3000 + "]" * 3000 + "\n", ["nested too deep"]),
    ("[retrieval]\nk1 = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", ["nested too deep"]),
    ("[retrieval]\nsnippet_chars = " + "9" * 30 + "\n", ["snippet_chars", "outside 32 bits", str(INT_MAX)]),
    ("[retrieval]\nthreads = -" + "9" * 30 + "\n", ["threads", "outside 32 bits"]),
    ('[corpus]\nbibliography = "a\\u0000b.bib"\n', ["bibliography", "NUL character"]),
    ('[enrich]\nrerank_model = "m\\u0000"\n', ["rerank_model", "NUL character"]),
])
def test_hostile_values_are_one_short_config_error(tmp_path, text, needles):
    p = _config(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert msg.startswith(str(p)) and "\n" not in msg and len(msg) < 400, msg
    for n in needles:
        assert n in msg, msg


def test_the_largest_32_bit_integer_is_still_allowed(tmp_path):
    cfg = load_config(_config(tmp_path, f"[retrieval]\nsnippet_chars = {INT_MAX}\n"))
    assert cfg.retrieval.snippet_chars == INT_MAX


def test_a_long_unknown_key_is_shown_cut(tmp_path):
    with pytest.raises(ConfigError) as ei:
        load_config(_config(tmp_path, "[retrieval]\n" + "x" * 100_000 + " = 1\n"))
    assert "unknown key [retrieval] xxx" in str(ei.value) and len(str(ei.value)) < 400


def test_sync_with_a_nul_in_the_bibliography_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    _config(ws, '[corpus]\nbibliography = "a\\u0000b.bib"\n')
    one_error_line(run_main("sync", "-w", ws), "bibliography", "NUL character")


def test_device_choices_follow_the_device_table(tmp_path, monkeypatch):
    """``enrich --device`` and the config's device settings list ``chitragupta.device.DEVICES``, not a copy."""
    from chitragupta.cli import enrich_cmd
    from chitragupta.device import DEVICES

    monkeypatch.setitem(DEVICES, "xpu", "a device added to the table")
    parser = argparse.ArgumentParser()
    enrich_cmd.add_arguments(parser)
    (action,) = [a for a in parser._actions if "--device" in a.option_strings]
    assert list(action.choices) == list(DEVICES)
    with pytest.raises(ConfigError) as ei:
        load_config(_config(tmp_path, '[enrich]\ndevice = "tpu"\n'))
    assert '"xpu"' in str(ei.value)


@pytest.mark.parametrize("what, needle", [
    ("folder", "is a folder, not a config file"),
    ("device", "is a character device, not a config file"),
    ("dangling", "is a symbolic link to a missing file"),
    ("huge", "too big for a config file"),
])
def test_a_config_path_that_is_not_a_config_file(tmp_path, what, needle):
    if what == "folder":
        p = tmp_path / "cfg"
        p.mkdir()
    elif what == "device":
        p = Path("/dev/null")  # read whole it is an empty config: the defaults, silently
    elif what == "dangling":
        p = tmp_path / "cfg.toml"
        p.symlink_to(tmp_path / "nowhere.toml")
    else:
        p = _config(tmp_path, "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(ei.value).startswith(f"{p}: ") and needle in str(ei.value), str(ei.value)


def test_a_config_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "cfg.toml"
    with Feeder(fifo, b"[retrieval]\nk1 = 2\n") as feeder:
        with pytest.raises(ConfigError, match=r"is a pipe \(FIFO\), not a config file"):
            load_config(fifo)
    assert not feeder.fed


def test_a_symlinked_config_is_still_read(tmp_path):
    real = _config(tmp_path, "[retrieval]\nk1 = 2\n", "real.toml")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    assert load_config(link).retrieval.k1 == 2.0


@pytest.mark.parametrize("what", ["fifo", "folder", "dangling"])
def test_a_workspace_config_that_is_not_a_file_is_said_not_ignored(tmp_path, what):
    """It was silently ignored (the defaults used): now one line naming it, and nothing removed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = ws / "config.toml"
    needle = {"fifo": "is a pipe (FIFO)", "folder": "is a folder", "dangling": "is a symbolic link to a missing file"}[what]
    if what == "folder":
        cfg.mkdir()
    elif what == "dangling":
        cfg.symlink_to(ws / "gone.toml")
    feeder = Feeder(cfg, b"[retrieval]\nk1 = 2\n") if what == "fifo" else contextlib.nullcontext()
    with feeder:
        with pytest.raises(ConfigError) as ei:
            Workspace.open(ws)
        assert str(ei.value).startswith(f"{ws.resolve() / 'config.toml'}: {needle}"), str(ei.value)
        one_error_line(run_main("search", "-w", ws, "twin"), "config.toml: " + needle)
    assert what != "fifo" or not feeder.fed
    assert os.path.lexists(cfg) and (what != "folder" or cfg.is_dir())
