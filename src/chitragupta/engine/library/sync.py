"""``sync`` (BibTeX + documents) and ``import`` (a BEIR-style JSONL) into the ledger and ``content/parsed/``:
the names other modules import.

- ``bibsync.py``: ``sync`` -- the bibliography and its documents (``docling_artifacts_path`` too);
- ``importer.py``: ``import_jsonl`` and ``text_hash``;
- ``committer.py``: the one committer both use (``SyncReport``, the parsed folder, and the protocol that
  keeps rows and files in step through a kill);
- ``names.py``: the parsed files' names (``assign_names``), unique on a case-insensitive file system.

Both are incremental and resumable; call them under the workspace lock (``Workspace.lock``), as the CLI
does.
"""

from __future__ import annotations

from chitragupta.engine.library.bibsync import docling_artifacts_path, sync
from chitragupta.engine.library.committer import SyncReport
from chitragupta.engine.library.importer import import_jsonl, text_hash
from chitragupta.engine.library.names import assign_names

__all__ = ["SyncReport", "sync", "import_jsonl", "assign_names", "docling_artifacts_path", "text_hash"]
