"""A hit's byline: its authors' family names and its year, read from the ledger, so that every engine's hits
on every surface (the CLI's ``--json``, the MCP tools, the Python API) are enough to write "Lo et al.
(2020)" without asking for the source's record.

    responses = with_bylines(workspace, responses)   # each hit's ``authors`` and ``year`` filled in

One query per call for every hit's citekey, on a read-only connection kept per thread and ledger file
(opened again when the file is replaced). ``authors`` holds at most ``AUTHORS_SHOWN`` names, then
"others" (as BibTeX writes "and others") when the source has more.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

__all__ = ["with_bylines", "AUTHORS_SHOWN"]

AUTHORS_SHOWN = 5
_KEPT = 4  # ledgers a thread keeps a connection to (a test session opens many workspaces)
_local = threading.local()


def _ledger(path):
    from chitragupta.engine.library.ledger import Ledger

    st = os.stat(path)
    ident = (str(path), st.st_ino, st.st_dev)
    held = getattr(_local, "held", None)
    if held is None:
        held = _local.held = {}
    got = held.pop(str(path), None)
    if got is not None and got[0] != ident:
        got[1].close()
        got = None
    if got is None:
        got = (ident, Ledger(path, create=False))
    held[str(path)] = got  # most recent last
    while len(held) > _KEPT:
        held.pop(next(iter(held)))[1].close()
    return got[1]


def with_bylines(workspace, responses: list) -> list:
    """``responses`` (``SearchResponse`` s) with each hit's ``authors`` and ``year`` from the ledger of
    ``workspace``; unchanged when it has no ledger to read."""
    path = getattr(workspace, "ledger_path", None)
    keys = {h.citekey for r in responses for h in r.hits} if path is not None else None
    if not keys:
        return responses
    from chitragupta.errors import ChitraguptaError

    try:
        cited = _ledger(path).cited_as(keys)
    except (OSError, ChitraguptaError):  # the ledger gone or unreadable now: the bylines stay unknown
        return responses
    for r in responses:
        r.hits = [_bylined(h, cited.get(h.citekey)) for h in r.hits]
    return responses


def _bylined(hit, got):
    if got is None:
        return hit
    names, year = got
    if len(names) > AUTHORS_SHOWN:
        names = names[:AUTHORS_SHOWN] + ("others",)
    return replace(hit, authors=names, year=year)
