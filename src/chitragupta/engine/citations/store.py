"""The stored reference lists and their kept resolution, read and brought up to date.

    build_references(ws, opened)   the lists current (``index`` stops there), then the resolution kept
    references_of(ws, citekey)     one source's entries (None: no list found in its text, or none stored)
    all_references(ws)             citekey -> entries of every source with a list, in citekey order
    kept_links(ledger, citekey)    the kept resolution's rows, when it is current (else None)

The lists are parsed in the document index's own pass (``engine.index.references``) and live in the
ledger's tables (``engine.library.ledger``), no file of their own. ``build_references`` parses what the
pass did not (``references.update``), then resolves every entry (``resolve``) and keeps in ``ref_links``
each entry that resolved, was ambiguous or named its own source, and each member of a missing work of
several entries, made for ``meta.links`` (``RESOLVE_RULES``, ``RULES``, the ledger's change stamp; writing
a list deletes it): the first question that needs the whole graph keeps it. An older version's
``content/refs/`` and ``content/citation_graph.json`` are removed by the next build, with a note."""

from __future__ import annotations

import shutil

from chitragupta.engine.text.entries import RULES, Entry

__all__ = ["RULES", "RESOLVE_RULES", "references_of", "all_references", "build_references", "kept_links",
           "links_key", "summary_line"]

RESOLVE_RULES = 1  # bumped whenever resolution or clustering rules change: every kept resolution is redone
_OLD_FILES = ("refs", "citation_graph.json")  # what older versions kept in content/


def _entry(row: tuple) -> Entry:
    """An ``Entry`` from a ``Ledger.reference_rows("ref_entries")`` row."""
    _k, n, text, authors, year, title, venue, doi, arxiv, url, names = row
    return Entry(n, text, tuple(authors.split("\n")) if authors else (), year, title, venue, doi, arxiv, url,
                 tuple(names.split("\n")) if names else ())


def references_of(workspace, citekey: str) -> list[Entry] | None:
    """``citekey``'s stored entries, in order; None when no list was found in its text or none is stored."""
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(workspace.ledger_path, create=False) as ledger:
        got = ledger.reference_lists(citekey).get(citekey)
        return [_entry(r) for r in ledger.reference_rows("ref_entries", citekey)] if got and got[2] else None


def all_references(workspace, ledger=None) -> dict[str, list[Entry]]:
    """citekey -> entries of every ledger source whose stored list was found, in citekey order."""
    from chitragupta.engine.library.ledger import Ledger

    if ledger is None:
        with Ledger(workspace.ledger_path, create=False) as opened:
            return all_references(workspace, opened)
    keys = set(ledger.citekeys())
    out: dict[str, list[Entry]] = {k: [] for k, (_fp, _r, located, _n) in sorted(ledger.reference_lists().items())
                                   if located and k in keys}
    for row in ledger.reference_rows("ref_entries"):
        if row[0] in out:
            out[row[0]].append(_entry(row))
    return out


def links_key(ledger) -> str:
    """What a kept resolution was made for: the rules and the ledger's state (``meta.links``)."""
    return f"{RESOLVE_RULES}:{RULES}:{ledger.change_stamp()}"


def kept_links(ledger, citekey: str | None = None) -> list[tuple] | None:
    """The kept resolution's rows (of one source's entries) when it is current, else None."""
    return ledger.reference_rows("ref_links", citekey) if ledger.get_meta("links") == links_key(ledger) else None


def build_references(workspace, opened=None, *, lock: bool = True, links: bool = True) -> dict:
    """Bring the stored lists up to the document index (``opened``: ``manage.refresh``'s answer, its pass
    having parsed what it read; None: opened, built or updated first, as a search does), then the kept
    resolution (``links``): ``{"sources", "entries", "without", "parsed", "notes"}``. ``lock``: take the
    workspace lock when anything is to be written (False: the caller holds it)."""
    from chitragupta.engine.index.manage import open_current
    from chitragupta.engine.index import references as lists
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.errors import WorkspaceError

    if lock:
        try:
            now = opened or open_current(workspace, unit="document", update=False)  # (a reader's check, no lock)
        except WorkspaceError:
            now = None  # no index yet: built under the lock
        with Ledger(workspace.ledger_path, create=False) as ledger:
            done = None if now is None or not now.current else f"{now.index.path.name}:{lists.RULES}"
            if done is not None and ledger.get_meta("references") == done \
                    and not (links and ledger.get_meta("links") != links_key(ledger)) \
                    and not any((workspace.content / name).exists() for name in _OLD_FILES):
                return dict(zip(("sources", "without", "entries"), ledger.reference_counts()), parsed=0, notes=[])
        with workspace.lock("index (references)"):
            return build_references(workspace, opened, lock=False, links=links)
    notes: list[str] = []
    for name in _OLD_FILES:
        old = workspace.content / name
        if old.is_dir() or old.is_file():
            shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink(missing_ok=True)
            notes.append(f"content/{name} of an older version removed: the ledger keeps the reference lists now")
    opened = opened or open_current(workspace, unit="document")
    got = lists.update(workspace, opened.index)
    done = opened.references
    if links:
        _keep_links(workspace)
    with Ledger(workspace.ledger_path, create=False) as ledger:
        sources, without, entries = ledger.reference_counts()
    return {"sources": sources, "entries": entries, "without": without,
            "parsed": got["parsed"] + (done.parsed if done else 0),
            "notes": notes + (done.notes if done else []) + got["notes"]}


def _keep_links(workspace) -> None:
    """Resolve every stored entry and keep the outcome (``ref_links``), unless the kept one is current."""
    from chitragupta.engine.citations.resolve import Library, resolve
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(workspace.ledger_path) as ledger:
        key = links_key(ledger)
        if ledger.get_meta("links") == key:
            return
        refs = all_references(workspace, ledger)
        res = resolve(Library.from_rows(ledger.rows()), refs)
        rows = [(k, i + 1, t, res.why.get((k, i)), None) for (k, i), t in res.target.items()
                if t is not None or res.why.get((k, i)) in ("ambiguous", "self")]
        rows += [(k, e.n, None, None, w) for w, work in enumerate(res.missing) if len(work.members) > 1
                 for k, e in work.members]
        with ledger.transaction():
            ledger.put_links(rows, key)


def summary_line(report: dict) -> str:
    """``build_references``' report as the one line ``index`` prints."""
    return (f"references: {report['sources']} sources, {report['entries']} entries ({report['parsed']} lists "
            f"parsed now; {report['without']} sources without a reference list)")
