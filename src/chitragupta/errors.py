"""User-facing errors: each carries one clear line for the CLI to print.

Library code raises these instead of printing; the CLI turns them into ``error: ...`` and a non-zero
exit status. Anything else escaping the CLI is a bug.
"""

from __future__ import annotations

__all__ = [
    "ChitraguptaError",
    "ConfigError",
    "CorpusError",
    "WorkspaceError",
    "WorkspaceBusy",
    "IndexDamaged",
    "UsageError",
    "OutputError",
    "MissingExtra",
]


class ChitraguptaError(Exception):
    """Base class: an error the user can act on, with a one-line message."""


class ConfigError(ChitraguptaError):
    """A config file that cannot be used: names the file, the key, the value and what is allowed."""


class CorpusError(ChitraguptaError):
    """A source (BibTeX, JSONL, a document) that cannot be read at all."""


class WorkspaceError(ChitraguptaError):
    """A workspace folder that is missing, unreadable or not a workspace."""


class WorkspaceBusy(WorkspaceError):
    """Another process holds the workspace's write lock."""


class IndexDamaged(WorkspaceError):
    """An index cache found damaged while it was being read (a table entry out of range)."""


class UsageError(ChitraguptaError):
    """A call with arguments that cannot be honoured (k < 1, an unknown citekey, ...)."""


class OutputError(ChitraguptaError):
    """An output file that could not be written (a full disk, a closed pipe's peer gone, a device error)."""


class MissingExtra(ChitraguptaError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""
