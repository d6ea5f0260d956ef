"""The tokenizer's byte rule, defined once for every layer (the index build's kernels here, the tokenizer,
acronym expansion and the window chooser in ``chitragupta.engine``): a token is a maximal run of the
bytes ``[a-z0-9]`` of the lowercased text, at least ``MIN_TOKEN_CHARS`` long. Anything else -- every
other ASCII byte, and every non-ASCII character (encoded as ``?`` first) -- separates tokens."""

from __future__ import annotations

import numpy as np

__all__ = ["TOKEN_BYTES", "TOKEN_CLASS", "IS_TOKEN_BYTE", "SEPARATE", "MIN_TOKEN_CHARS"]

TOKEN_BYTES = b"0123456789abcdefghijklmnopqrstuvwxyz"
TOKEN_CLASS = "[a-z0-9]"  # the same bytes as a regular-expression class (of lowercased text)
MIN_TOKEN_CHARS = 2

IS_TOKEN_BYTE = np.zeros(256, dtype=np.bool_)  # indexed by a byte
IS_TOKEN_BYTE[np.frombuffer(TOKEN_BYTES, dtype=np.uint8)] = True
# A ``bytes.translate`` table: token bytes kept, every other byte a space (so ``.split()`` gives the runs).
SEPARATE = bytes(c if IS_TOKEN_BYTE[c] else 32 for c in range(256))

assert set(TOKEN_BYTES) == {c for c in range(256) if chr(c).isascii() and (chr(c).islower() or chr(c).isdigit())}
