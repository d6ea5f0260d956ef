"""The optional stemmer: ``[retrieval].stemmer = "none"`` (default) or a Snowball language.

Stemming changes what is indexed, so it is an index-level setting recorded in the manifest; a change
rebuilds the index. Index, query and window chooser all stem the same way: a token is stemmed after the
tokenizer's rules (lowercase ``[a-z0-9]`` runs, length floor, stopwords), once per distinct token.
Snowball stemmers come from the maintained ``snowballstemmer`` package (pure Python).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from chitragupta.extras import require

__all__ = ["NONE", "languages", "get_stemmer"]

NONE = "none"


def languages() -> list[str]:
    """Every accepted ``[retrieval].stemmer`` value."""
    try:
        import snowballstemmer
    except ImportError:
        return [NONE]
    return [NONE, *snowballstemmer.algorithms()]


@lru_cache(maxsize=8)
def get_stemmer(name: str) -> Callable[[str], str] | None:
    """A cached ``token -> stem`` function, or None for ``"none"``."""
    if name == NONE:
        return None
    snowballstemmer = require("snowballstemmer", None, "[retrieval].stemmer")
    algo = snowballstemmer.stemmer(name)

    @lru_cache(maxsize=1 << 18)
    def stem(token: str) -> str:
        out = algo.stemWord(token)
        return out or token

    return stem
