"""The library's use cases: ``sync`` (the BibTeX file and its documents into the ledger) and ``import_corpus``
(a BEIR-style JSONL as the sources), each under the workspace lock, answered as a ``SyncReport``
(``engine.library.committer``). The CLI prints the report; nothing here prints.

    from chitragupta.service.library import sync
    report = sync("my-review")        # report.summary(), report.missing, report.failed, report.incomplete
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

__all__ = ["sync", "import_corpus"]


def _workspace(workspace, config=None, *, create: bool = False):
    from chitragupta.engine.library.workspace import Workspace

    return workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config, create=create)


def sync(workspace, *, jobs: int | None = None, progress: Callable | None = None, config=None):
    """Read ``papers/bibliography.bib``, parse the documents that changed, update the ledger. ``jobs``:
    processes that parse (None: the cores); ``progress``: a ``(done, total)`` callback."""
    from chitragupta.engine.index.segments import available_cores
    from chitragupta.engine.library.sync import sync as sync_library

    ws = _workspace(workspace, config)
    with ws.lock("sync"):
        return sync_library(ws, progress=progress, jobs=jobs or available_cores())


def import_corpus(workspace, path, *, progress: Callable | None = None, config=None):
    """Import ``path`` (one ``{"_id", "title", "text", ...}`` object a line) as the workspace's sources,
    creating the workspace when it does not exist. A folder, a device or a pipe is refused by what it is
    before anything is written; a full disk or an I/O error stops it with what was committed kept whole."""
    from chitragupta.engine.library.jsonl import open_input
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.errors import WorkspaceError

    path = Path(path)
    open_input(path, "corpus").close()  # what the file is, said before anything is written
    try:
        ws = _workspace(workspace, config, create=True)
        with ws.lock("import"):
            return import_jsonl(ws, path, progress=progress)
    except OSError as err:
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        raise WorkspaceError(f"{workspace}: import stopped: {err.strerror or err}{where}; the sources committed "
                             "before it are kept whole, nothing is half-written; fix that and run the import "
                             "again to finish") from None
