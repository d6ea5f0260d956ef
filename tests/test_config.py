import math
from pathlib import Path

import pytest

from chitragupta.engine.config import SCHEMA, defaults_text, load_config
from chitragupta.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


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
    from chitragupta.engine.corpus.parsers import PARSERS

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

    from conftest import make_workspace, random_docs
    from chitragupta.engine.search import Retriever

    ws = make_workspace(tmp_path, random_docs(5, 40))
    (ws / "config.toml").write_text("[retrieval]\nk1 = 1000\nweight_title = 1000\nweight_abstract = 1000\n")
    resp = Retriever.open(ws).search("twin digital model", k=5, snippet_chars=0)
    assert resp.hits and all(math.isfinite(h.score) and h.score > 0 for h in resp.hits)
