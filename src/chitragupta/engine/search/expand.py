"""Acronym expansion: an acronym in the query can reach the words it stands for.

The vocabulary is the packaged ``engine/assets/style/acronyms.toml`` merged with the workspace's
``content/acronyms.toml`` (the workspace wins on conflicts), each an ``[acronyms]`` table of
``dt = "digital twin"`` entries. Keys match query tokens case-insensitively; an expansion goes through
the same tokenizer, so its stopwords drop out. A query term that is a known acronym adds its
expansion's tokens, counted exactly like typed terms; a word already typed (or already added) is never
added again; a one-character acronym never expands (the tokenizer drops it from the query first). With
``[retrieval].acronym_expansion = false`` nothing is loaded at all. Nothing here touches the index.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from chitragupta.engine.library.config import toml_error
from chitragupta.errors import ConfigError
from chitragupta.engine.text.tokenize import MIN_TOKEN_CHARS, STOPWORDS, TOKEN_CLASS, runs_bytes, tokenize

__all__ = ["Expander", "Expansion", "load_expander", "packaged_vocabulary", "STARTER", "PACKAGED"]

PACKAGED = "assets/style/acronyms.toml"
_KEY = re.compile(TOKEN_CLASS + "+")

STARTER = """\
# Your acronyms, merged over chitragupta's packaged list (yours win). A query term that is one of these
# keys also searches for the words it stands for; edits take effect on the next query, no re-index.
# [retrieval].acronym_expansion = false in config.toml turns expansion off.
[acronyms]
# dt = "digital twin"
# bim = "building information modelling"
"""


@dataclass(frozen=True)
class Expansion:
    """What expansion did to one query: the tokens it added and the ``acr -> phrase`` pairs behind them."""

    added: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()

    def note(self) -> str | None:
        if not self.pairs:
            return None
        return "acronym expansion added: " + ", ".join(f"{a} -> {p}" for a, p in self.pairs)


def _line_of(text: str, key: str) -> int:
    pat = re.compile(r'^[ \t]*["\']?' + re.escape(key) + r'["\']?[ \t]*=', re.MULTILINE)
    m = pat.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else 0


def _read(path_name: str, text: str) -> dict[str, str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(toml_error(path_name, err)) from err
    for top in data:
        if top != "acronyms":
            raise ConfigError(f"{path_name}:{_line_of(text, top) or 1}: unknown table or key {top!r}; "
                              "allowed: one [acronyms] table of  dt = \"digital twin\"  entries")
    table = data.get("acronyms", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path_name}: 'acronyms' must be a table ([acronyms])")
    out = {}
    for key, value in table.items():
        line = _line_of(text, key)
        where = f"{path_name}:{line}" if line else path_name
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: acronym {key!r} must map to a non-empty string, e.g. {key} = \"digital twin\"")
        low = key.lower()
        if not _KEY.fullmatch(low):
            raise ConfigError(f"{where}: acronym {key!r} is not a single token; allowed: letters and digits only")
        out[low] = value.strip()
    return out


class Expander:
    """The merged vocabulary, ready to expand queries."""

    def __init__(self, vocabulary: dict[str, str]):
        self.phrases = dict(vocabulary)
        # Inert entries (one character, stopword keys, expansions of only stopwords) are dropped here.
        self.tokens = {k: tuple(dict.fromkeys(tokenize(v))) for k, v in vocabulary.items()
                       if len(k) >= MIN_TOKEN_CHARS and k not in STOPWORDS}
        self.tokens = {k: v for k, v in self.tokens.items() if v}
        self._keys_bytes = {k.encode("ascii") for k in self.tokens}

    def expand(self, query: str) -> Expansion:
        """The tokens acronyms in ``query`` add, in query order, never repeating a typed word."""
        return self.expand_runs(runs_bytes(query))

    def expand_runs(self, runs: list[bytes]) -> Expansion:
        """``expand`` of a query already cut into its runs (``chitragupta.engine.text.tokenize.runs_bytes``: the
        query plan cuts each query once)."""
        if not self._keys_bytes.intersection(runs):
            return Expansion()
        typed = [r.decode("ascii") for r in runs]
        have = set(typed)
        added, pairs = [], []
        for t in dict.fromkeys(typed):
            extra = [w for w in self.tokens.get(t, ()) if w not in have]
            if extra:
                added += extra
                have.update(extra)
                pairs.append((t, self.phrases[t]))
        return Expansion(tuple(added), tuple(pairs))


def packaged_vocabulary() -> dict[str, str]:
    """The acronyms chitragupta ships (``acronym -> phrase``), before a workspace's own."""
    packaged = resources.files("chitragupta.engine.search").joinpath(PACKAGED).read_text(encoding="utf-8")
    return _read(f"<package>/{PACKAGED}", packaged)


def load_expander(content_dir: Path, enabled: bool) -> Expander | None:
    """The packaged vocabulary with ``content/acronyms.toml`` over it; None when expansion is off."""
    if not enabled:
        return None
    vocab = packaged_vocabulary()
    user = Path(content_dir) / "acronyms.toml"
    if user.is_file():
        try:
            text = user.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{user}: cannot read ({err})") from err
        vocab.update(_read(str(user), text))
    return Expander(vocab)
