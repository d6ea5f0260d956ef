"""Fault injection and write tracing for the reliability tests (``tools/reliability.py``).

Put this folder on PYTHONPATH and set

    CHITRAGUPTA_FAULT_ROOT=<folder>      only writes to paths under it count
    CHITRAGUPTA_FAULT_KILL_AT=<N>        SIGKILL the process just before its Nth counted write (0: never)
    CHITRAGUPTA_FAULT_COUNT_FILE=<file>  write the number of counted writes to this file at exit
    CHITRAGUPTA_WRITE_LOG=<file>         write every write's event and path, anywhere, to this file at exit

A *write* is an audit event (PEP 578) that changes the file system: opening for writing or creating,
a rename or replace, a removal, a folder made or removed, a truncation, a link. The hook runs before
the operation, so a kill at a rename leaves the temp file complete and the target untouched, and a kill
at an open leaves the previous file in place. SQLite's own writes are not audit events; its commits
happen between the counted writes. The kill is a real SIGKILL: no ``finally``, no ``atexit``.
"""

import os
import sys

_ROOT = os.environ.get("CHITRAGUPTA_FAULT_ROOT")
_LOG = os.environ.get("CHITRAGUPTA_WRITE_LOG")

if _ROOT or _LOG:
    import atexit
    import signal

    _ROOT = os.path.realpath(_ROOT) + os.sep if _ROOT else None
    _KILL_AT = int(os.environ.get("CHITRAGUPTA_FAULT_KILL_AT", "0") or 0)
    _COUNT_FILE = os.environ.get("CHITRAGUPTA_FAULT_COUNT_FILE")
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    _PATH_EVENTS = {"os.rename", "os.remove", "os.mkdir", "os.rmdir", "shutil.rmtree", "os.truncate",
                    "os.unlink", "os.link", "os.symlink", "os.chmod", "os.utime"}
    _seen = 0
    _logged = []

    def _abs(p):
        if isinstance(p, int):
            return None
        try:
            return os.path.abspath(os.fsdecode(p))
        except (TypeError, ValueError):
            return None

    def _write_paths(event, args):
        """The paths a write event touches, or () when the event is not a write."""
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            return (path,) if writing else ()
        if event in _PATH_EVENTS:
            return tuple(a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))
        return ()

    def _hook(event, args):
        global _seen
        if event != "open" and event not in _PATH_EVENTS:
            return
        paths = [p for p in map(_abs, _write_paths(event, args)) if p]
        if not paths:
            return
        if _LOG:
            _logged.extend(f"{event}\t{p}" for p in paths)
        if _ROOT and any((p + os.sep).startswith(_ROOT) for p in paths):
            _seen += 1
            if _seen == _KILL_AT:
                os.kill(os.getpid(), signal.SIGKILL)

    def _report():
        global _LOG
        lines, log, _LOG = list(_logged), _LOG, None  # the report's own writes are not the command's
        if _COUNT_FILE:
            with open(_COUNT_FILE, "w") as f:
                f.write(str(_seen))
        if log:
            with open(log, "a") as f:
                f.write("".join(line + "\n" for line in lines))

    atexit.register(_report)
    sys.addaudithook(_hook)
