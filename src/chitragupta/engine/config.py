"""Configuration: packaged defaults, overlaid by a workspace's ``config.toml``, validated once at load.

Every setting is declared once in ``SCHEMA`` (type, check, what is allowed); the packaged
``defaults.toml`` holds the values. A bad file is rejected with a message naming the file, the key, the
value and what is allowed; nothing is clamped.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from chitragupta.device import DEVICES
from chitragupta.errors import ConfigError

__all__ = ["Config", "Setting", "SCHEMA", "load_config", "defaults_text", "toml_error", "DEFAULTS_NAME"]

DEFAULTS_NAME = "defaults.toml"
FUSION_METHODS = ("rrf", "minmax")


@dataclass(frozen=True)
class Setting:
    """One key: its Python type, a check returning True when the value is allowed, and the allowed text."""

    kind: type
    allowed: str | Callable[[], str]
    check: Callable[[Any], bool] = lambda v: True
    index_level: bool = False  # changing it changes what is indexed (recorded in the manifest)

    def allowed_text(self) -> str:
        return self.allowed() if callable(self.allowed) else self.allowed


def _choice(names: Callable[[], list[str]]) -> tuple[Callable[[Any], bool], Callable[[], str]]:
    """A check and an allowed-text built from a registry's keys when needed, so they cannot drift."""
    return (lambda v: v in names()), (lambda: "one of " + ", ".join(f'"{n}"' for n in names()))


def _backends() -> list[str]:
    from chitragupta.kernels.dispatch import BACKENDS

    return list(BACKENDS)


def _parsers() -> list[str]:
    from chitragupta.engine.corpus.parsers import PARSERS

    return list(PARSERS)


def _stemmers() -> list[str]:
    from chitragupta.engine.stem import languages

    return languages()


def _nonneg(v) -> bool:
    return math.isfinite(v) and v >= 0


# BM25's dials are bounded far beyond any useful value, but below where scores overflow: with k1 or a
# field weight of 1e308, tf * (k1 + 1) and tf + (w - 1) * tf_title are inf and every score is inf or nan.
DIAL_MAX = 1000.0


def _dial(v) -> bool:
    return math.isfinite(v) and 0 <= v <= DIAL_MAX


_backend_check, _backend_allowed = _choice(_backends)
_parser_check, _parser_allowed = _choice(_parsers)
_stemmer_in, _stemmer_allowed = _choice(_stemmers)


def _stemmer_check(v) -> bool:
    return v == "none" or _stemmer_in(v)  # the default needs no import of the Snowball package

SCHEMA: dict[str, dict[str, Setting]] = {
    "corpus": {
        "bibliography": Setting(str, "a path to a .bib file, relative to the workspace", lambda v: bool(v.strip())),
    },
    "parser": {
        "backend": Setting(str, _parser_allowed, _parser_check, index_level=False),
        "docling_artifacts_path": Setting(str, "a folder path, or empty for none"),
    },
    "retrieval": {
        "k1": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "b": Setting(float, "a number in [0, 1]", lambda v: math.isfinite(v) and 0.0 <= v <= 1.0),
        "backend": Setting(str, _backend_allowed, _backend_check),
        "threads": Setting(int, "an integer >= 0 (0: every core)", lambda v: v >= 0),
        "weight_title": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "weight_abstract": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "acronym_expansion": Setting(bool, "true or false"),
        "stemmer": Setting(str, _stemmer_allowed, _stemmer_check, index_level=True),
        "snippet_chars": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "min_passage_tokens": Setting(int, "an integer >= 0", lambda v: v >= 0),
        "max_passages_per_source": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "device": Setting(str, 'one of "auto", "cpu", "cuda"', lambda v: v in DEVICES),
    },
    "enrich": {
        "device": Setting(str, 'one of "auto", "cpu", "cuda"', lambda v: v in DEVICES),
        "embed_model": Setting(str, "a sentence-transformers model name or a local model folder",
                               lambda v: bool(v.strip())),
        "embed_batch_size": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "embed_max_passages_per_source": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "embed_overfetch": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "rerank_model": Setting(str, "empty (off), or a local cross-encoder model folder"),
        "min_topic_size": Setting(int, "an integer >= 2", lambda v: v >= 2),
        "umap_n_neighbors": Setting(int, "an integer >= 2", lambda v: v >= 2),
        "umap_n_components": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "seed": Setting(int, "an integer >= 0", lambda v: v >= 0),
        "query_prefix": Setting(str, "a string put before every query before it is encoded (empty: none)"),
        "passage_prefix": Setting(str, "a string put before every chunk before it is encoded (empty: none)"),
    },
    "hybrid": {
        "method": Setting(str, 'one of "rrf", "minmax"', lambda v: v in FUSION_METHODS),
        "rrf_k": Setting(float, "a number in [0, 100000]", lambda v: math.isfinite(v) and 0 <= v <= 1e5),
        "weight_bm25": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "weight_dense": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "depth": Setting(int, "an integer in [1, 100000]", lambda v: 1 <= v <= 100_000),
    },
    "workspace": {
        "lock_timeout": Setting(float, "a finite number of seconds >= 0", _nonneg),
    },
}


def _section_class(name: str, keys: dict[str, Setting]):
    from dataclasses import make_dataclass

    return make_dataclass(
        name.capitalize() + "Config", [(k, s.kind) for k, s in keys.items()], frozen=True
    )


_SECTION_CLASSES = {name: _section_class(name, keys) for name, keys in SCHEMA.items()}


@dataclass(frozen=True)
class Config:
    """The validated configuration: one frozen dataclass per section, and where it came from."""

    source: str
    corpus: Any
    parser: Any
    retrieval: Any
    enrich: Any
    hybrid: Any
    workspace: Any

    def index_settings(self) -> dict[str, Any]:
        """The settings that decide what is indexed; a change forces a rebuild."""
        out = {}
        for sec, keys in SCHEMA.items():
            for key, s in keys.items():
                if s.index_level:
                    out[f"{sec}.{key}"] = getattr(getattr(self, sec), key)
        return out


def defaults_text() -> str:
    """The packaged defaults file, comments and all (what ``chitragupta init`` writes)."""
    return resources.files("chitragupta.engine").joinpath(DEFAULTS_NAME).read_text(encoding="utf-8")


def toml_error(where: str, err: Exception) -> str:
    """``file:LINE: not valid TOML: ...`` from a tomllib error (which says "(at line L, column C)")."""
    import re

    m = re.search(r"\(at line (\d+), column (\d+)\)", str(err))
    loc = f"{where}:{m.group(1)}" if m else where
    return f"{loc}: not valid TOML: {err}"


def _read_toml(text: str, where: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(toml_error(where, err)) from err


def _coerce(where: str, sec: str, key: str, value: Any, setting: Setting) -> Any:
    shown = f"{where}: [{sec}] {key} = {value!r}"
    kind = setting.kind
    if kind is float:
        # TOML writes 2 for 2.0; a bool is an int in Python but never a number here.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
        value = float(value)
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
    elif kind is str:
        if not isinstance(value, str):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
    elif kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: true or false")
    if not setting.check(value):
        raise ConfigError(f"{shown} is not allowed; allowed: {setting.allowed_text()}")
    return value


def _merge(base: dict, overlay: dict, where: str) -> None:
    for sec, table in overlay.items():
        if sec not in SCHEMA:
            raise ConfigError(
                f"{where}: unknown section [{sec}]; allowed sections: {', '.join(f'[{s}]' for s in SCHEMA)}"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {sec} must be a table [{sec}], got {type(table).__name__}")
        for key, value in table.items():
            if key not in SCHEMA[sec]:
                raise ConfigError(
                    f"{where}: unknown key [{sec}] {key}; allowed keys in [{sec}]: {', '.join(SCHEMA[sec])}"
                )
            base[sec][key] = _coerce(where, sec, key, value, SCHEMA[sec][key])


def load_config(path: str | Path | None = None, *, overrides: dict[str, dict[str, Any]] | None = None) -> Config:
    """Load the packaged defaults, then ``path`` over them (if given), then ``overrides``.

    Raises ConfigError naming the file, key, value and what is allowed.
    """
    values: dict[str, dict[str, Any]] = {sec: {} for sec in SCHEMA}
    _merge(values, _read_toml(defaults_text(), f"<package>/{DEFAULTS_NAME}"), f"<package>/{DEFAULTS_NAME}")
    for sec, keys in SCHEMA.items():
        missing = set(keys) - set(values[sec])
        if missing:  # a packaging bug, not a user error
            raise RuntimeError(f"packaged defaults lack [{sec}] {', '.join(sorted(missing))}")
    source = "<defaults>"
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError as err:
            raise ConfigError(f"{p}: config file not found") from err
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{p}: cannot read config file: {err}") from err
        _merge(values, _read_toml(text, str(p)), str(p))
        source = str(p)
    if overrides:
        _merge(values, overrides, "<command line>")
    sections = {sec: _SECTION_CLASSES[sec](**values[sec]) for sec in SCHEMA}
    return Config(source=source, **sections)
