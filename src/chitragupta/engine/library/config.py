"""Configuration: packaged defaults, overlaid by a workspace's ``config.toml``, validated once at load.

Every setting is declared once in ``SCHEMA`` (type, check, what is allowed); the packaged
``defaults.toml`` holds the values. A bad file is rejected with a message naming the file, the key, the
value and what is allowed; nothing is clamped. Whatever the file holds is one ``ConfigError`` line: a
config path that is a folder, a FIFO, a device or over ``MAX_CONFIG_BYTES`` is refused by what it is
(never opened, never read whole); integers too long for Python or a float, values nested too deep for
the parser, integers outside 32 bits and strings holding a NUL character are rejected by name.
"""

from __future__ import annotations

import math
import os
import reprlib
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from chitragupta.device import DEVICES
from chitragupta.files import FileRefused, read_small
from chitragupta.errors import ConfigError

__all__ = ["Config", "Setting", "SCHEMA", "load_config", "defaults_text", "toml_error", "DEFAULTS_NAME",
           "DIAL_MAX", "INT_MAX", "MAX_CONFIG_BYTES"]

DEFAULTS_NAME = "defaults.toml"
FUSION_METHODS = ("rrf", "minmax", "zscore")
# a config file is a few kilobytes; anything this big is not one (and is not read whole)
MAX_CONFIG_BYTES = 1 << 20
# every integer setting fits a C int, whatever its own check allows (a snippet width of 10**30 overflowed)
INT_MAX = 2**31 - 1


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
    from chitragupta.engine.library.parsers import PARSERS

    return list(PARSERS)


def _stemmers() -> list[str]:
    from chitragupta.engine.text.stem import languages

    return languages()


def _nonneg(v) -> bool:
    return math.isfinite(v) and v >= 0


# BM25's dials are bounded far beyond any useful value, but below where scores overflow: with k1 or a
# field weight of 1e308, tf * (k1 + 1) and tf + (w - 1) * tf_title are inf and every score is inf or nan.
DIAL_MAX = 1000.0


def _dial(v) -> bool:
    return math.isfinite(v) and 0 <= v <= DIAL_MAX


_backend_check, _backend_allowed = _choice(_backends)
_device_check, _device_allowed = _choice(lambda: list(DEVICES))
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
        "query_syntax": Setting(bool, "true or false"),
        "short_word_pairs": Setting(bool, "true or false"),
        "positions": Setting(bool, "true or false", index_level=True),
        "stemmer": Setting(str, _stemmer_allowed, _stemmer_check, index_level=True),
        "snippet_chars": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "min_passage_tokens": Setting(int, "an integer >= 0", lambda v: v >= 0),
        "max_passages_per_source": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "device": Setting(str, _device_allowed, _device_check),
    },
    "enrich": {
        "device": Setting(str, _device_allowed, _device_check),
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
        "ray_address": Setting(str, 'where the embed and bertopic stages encode: empty (in this process), "auto" '
                                    '(this machine\'s Ray cluster, else a local Ray) or a cluster address '
                                    '(ray://HOST:10001, HOST:6379)'),
    },
    "hybrid": {
        "method": Setting(str, 'one of "rrf", "minmax", "zscore"', lambda v: v in FUSION_METHODS),
        "rrf_k": Setting(float, "a number in [0, 100000]", lambda v: math.isfinite(v) and 0 <= v <= 1e5),
        "weight_bm25": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "weight_dense": Setting(float, f"a number in [0, {DIAL_MAX:g}]", _dial),
        "depth": Setting(int, "an integer in [1, 100000]", lambda v: 1 <= v <= 100_000),
        "bm25_stemmer": Setting(str, lambda: '"same" (the index [retrieval].stemmer builds), or ' + _stemmer_allowed(),
                                # "english" (a core dependency's) without importing the Snowball package at load
                                lambda v: v in ("same", "english") or _stemmer_check(v)),
    },
    "workspace": {
        "lock_timeout": Setting(float, "a finite number of seconds >= 0", _nonneg),
    },
    "serve": {
        "workers": Setting(int, "an integer >= 0 (0: one per core)", lambda v: v >= 0),
        "call_timeout_s": Setting(float, "a number of seconds > 0", lambda v: math.isfinite(v) and v > 0),
        "max_query_chars": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "max_k": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "max_batch_queries": Setting(int, "an integer >= 1", lambda v: v >= 1),
        "max_reply_chars": Setting(int, "an integer >= 1000", lambda v: v >= 1000),
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
    serve: Any

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
    return resources.files("chitragupta.engine.library").joinpath(DEFAULTS_NAME).read_text(encoding="utf-8")


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
    except ValueError as err:  # an integer past Python's digit limit (int() raises inside the parser)
        why = str(err).split(";")[0]
        raise ConfigError(f"{where}: not valid TOML here: a number too long ({why})") from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid TOML here: arrays or tables nested too deep") from None


_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlong = 40
_SHOW.maxlevel = 3


def _shown(value: Any) -> str:
    """``repr(value)`` cut to a line: long strings and numbers elided in the middle, nesting cut at 3."""
    try:
        return _SHOW.repr(value)
    except (RecursionError, ValueError):
        return f"<a {type(value).__name__}>"


def _coerce(where: str, sec: str, key: str, value: Any, setting: Setting) -> Any:
    shown = f"{where}: [{sec}] {key} = {_shown(value)}"
    kind = setting.kind
    if kind is float:
        # TOML writes 2 for 2.0; a bool is an int in Python but never a number here.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
        try:
            value = float(value)
        except OverflowError:  # an integer beyond any float
            raise ConfigError(f"{shown} is not allowed (too large for a number); "
                              f"allowed: {setting.allowed_text()}") from None
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
        if not -INT_MAX - 1 <= value <= INT_MAX:
            raise ConfigError(f"{shown} is not allowed (outside 32 bits); allowed: {setting.allowed_text()}, "
                              f"at most {INT_MAX}")
    elif kind is str:
        if not isinstance(value, str):
            raise ConfigError(f"{shown} is a {type(value).__name__}; allowed: {setting.allowed_text()}")
        if "\x00" in value:  # no path, model name or prefix holds one; a path with one fails every system call
            raise ConfigError(f"{shown} holds a NUL character (\\u0000); allowed: {setting.allowed_text()}")
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
                f"{where}: unknown section [{_SHOW.repr(sec)[1:-1]}]; "
                f"allowed sections: {', '.join(f'[{s}]' for s in SCHEMA)}"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: {sec} must be a table [{sec}], got {type(table).__name__}")
        for key, value in table.items():
            if key not in SCHEMA[sec]:
                raise ConfigError(
                    f"{where}: unknown key [{sec}] {_SHOW.repr(key)[1:-1]}; "
                    f"allowed keys in [{sec}]: {', '.join(SCHEMA[sec])}"
                )
            base[sec][key] = _coerce(where, sec, key, value, SCHEMA[sec][key])


def read_config_text(p: Path) -> str:
    """The text of the config file ``p`` (a symbolic link followed), or one ConfigError line saying why
    not: missing, a link to nothing, a folder / FIFO / device (never opened: a FIFO would block), over
    ``MAX_CONFIG_BYTES``, unreadable, not UTF-8."""
    try:
        return read_small(p, MAX_CONFIG_BYTES, follow=True)
    except FileNotFoundError as err:
        if os.path.islink(p):
            raise ConfigError(f"{p}: is a symbolic link to a missing file ({os.readlink(p)}), "
                              "not a config file") from None
        raise ConfigError(f"{p}: config file not found") from err
    except FileRefused as err:
        if err.kind is not None:
            raise ConfigError(f"{p}: is {err.kind}, not a config file (a TOML file)") from None
        raise ConfigError(f"{p}: is more than {MAX_CONFIG_BYTES >> 20} MiB, too big for a config file "
                          "(not a config file?)") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: cannot read config file: not UTF-8 text ({err.reason} at byte {err.start})") \
            from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot read config file: {err.strerror or err}") from None


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
        _merge(values, _read_toml(read_config_text(p), str(p)), str(p))
        source = str(p)
    if overrides:
        _merge(values, overrides, "<command line>")
    sections = {sec: _SECTION_CLASSES[sec](**values[sec]) for sec in SCHEMA}
    return Config(source=source, **sections)
