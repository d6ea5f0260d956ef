"""The stdio side of ``chitragupta serve``: a thin JSON-RPC 2.0 front in front of the MCP SDK, and the
worker pool the tool calls run in.

The front reads stdin line by line and answers, itself, every line the SDK would drop without a word:

    not JSON (or not UTF-8)                        -> -32700 Parse error, id null
    JSON the SDK's reader refuses (nested deeper
    than it reads, a lone surrogate escape)        -> -32700 Parse error, its id when one is readable
    JSON but not a request, notification or
    response (an array: batches are not part of
    MCP; an object without "method"; "jsonrpc"
    other than "2.0"; a bad id, method or params)  -> -32600 Invalid Request, its id when one is readable
    a request other than initialize / ping before
    the session is initialised                     -> -32600 saying the session is not initialised

and passes every other line on, unchanged, to the SDK's own stdio reader. Everything written to stdout
goes through one writer, a whole line at a time; while serving, file descriptor 1 points at stderr and 0
at the null device, so nothing else (a library printing, a child process) can reach the wire.

``Calls`` runs a tool call off the event loop in a pool of ``[serve].workers`` threads (daemon threads: a
call abandoned at its time limit never holds the process at exit), so a quick call answers while a slow
one runs; a call cancelled (``notifications/cancelled``) while it waits for a worker never runs, and one
that runs past ``[serve].call_timeout_s`` is answered with a tool error (its thread finishes on its own).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from concurrent.futures import Future

__all__ = ["Calls", "Front", "check_line", "default_workers", "serve_stdio", "PARSE_ERROR", "INVALID_REQUEST",
           "NOT_INITIALISED"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NOT_INITIALISED = INVALID_REQUEST  # JSON-RPC has no code of its own for it; the message says which
# what a client may send before the session is initialised (the MCP lifecycle)
_BEFORE_INIT = frozenset({"initialize", "ping"})


def default_workers() -> int:
    """The cores this process may use (``os.process_cpu_count``, else its CPU affinity, else all)."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        got = count()
    else:
        try:
            got = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            got = os.cpu_count()
    return max(1, got or 1)


# -- the worker pool ----------------------------------------------------------------------------------

class Calls:
    """Tool calls run in ``workers`` threads; ``await calls.run(fn, *args)`` is ``fn(*args)``'s value.
    ``timeout_s``: a call still running then raises ``CallTimeout`` (the thread is left to finish)."""

    def __init__(self, workers: int, timeout_s: float):
        self.workers = max(1, int(workers))
        self.timeout_s = float(timeout_s)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._start = threading.Lock()

    def _started(self) -> None:
        with self._start:
            while len(self._threads) < self.workers:
                t = threading.Thread(target=self._work, name=f"chitragupta-call-{len(self._threads)}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        while True:
            fut, fn, args, kwargs = self._jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue  # cancelled while it waited: it never runs
            try:
                result = fn(*args, **kwargs)
            except BaseException as err:  # handed to the awaiting call, which raises it
                fut.set_exception(err)
            else:
                fut.set_result(result)
            del fut, fn, args, kwargs

    def submit(self, fn, *args, **kwargs) -> Future:
        self._started()
        fut: Future = Future()
        self._jobs.put((fut, fn, args, kwargs))
        return fut

    async def run(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` in a worker; cancelling the awaiting task cancels a call not started."""
        import asyncio

        fut = asyncio.wrap_future(self.submit(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout_s)
        except asyncio.TimeoutError:
            fut.cancel()
            raise CallTimeout(self.timeout_s) from None
        except asyncio.CancelledError:
            fut.cancel()  # a call still queued never runs; one running finishes, its result dropped
            raise


class CallTimeout(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"the call ran past [serve].call_timeout_s = {seconds:g} s and was abandoned; ask for "
                         "less (a smaller k, the document unit) or raise [serve].call_timeout_s in the workspace's "
                         "config.toml")


# -- the JSON-RPC front -------------------------------------------------------------------------------

def _error(code: int, message: str, id_=None, data=None) -> dict:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": err}


def _is_id(value) -> bool:
    return isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def check_line(line: bytes | str, initialised: bool) -> tuple[dict | None, dict | None]:
    """(the message to pass on, None) or (None, the error response to write; None for a blank line).
    ``initialised``: whether an ``initialize`` request has been passed on."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as err:
            return None, _error(PARSE_ERROR, f"Parse error: the line is not UTF-8 ({err.reason} at byte {err.start})")
    if not line.strip():
        return None, None
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError) as err:
        return None, _error(PARSE_ERROR, f"Parse error: not JSON ({err})" if isinstance(err, ValueError)
                            else "Parse error: nested too deeply to read")
    if isinstance(msg, list):
        return None, _error(INVALID_REQUEST, "Invalid Request: a JSON array (a batch); MCP takes one message a line")
    if not isinstance(msg, dict):
        return None, _error(INVALID_REQUEST, f"Invalid Request: a JSON {type(msg).__name__}, not a JSON-RPC object")
    raw_id = msg.get("id")
    id_ = raw_id if _is_id(raw_id) else None
    if msg.get("jsonrpc") != "2.0":
        return None, _error(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0", got '
                            + json.dumps(msg.get("jsonrpc"))[:40], id_)
    if "id" in msg and not _is_id(raw_id):
        return None, _error(INVALID_REQUEST, "Invalid Request: an id must be a string or a number")
    if "method" not in msg:
        if "id" in msg and ("result" in msg) != ("error" in msg):
            return msg, None  # a response to a request of the server's
        return None, _error(INVALID_REQUEST, 'Invalid Request: no "method" (and not a response: an id with '
                            'one of "result" or "error")', id_)
    method = msg["method"]
    if not isinstance(method, str):
        return None, _error(INVALID_REQUEST, 'Invalid Request: "method" must be a string', id_)
    if "params" in msg and not isinstance(msg["params"], (dict, list)):
        return None, _error(INVALID_REQUEST, 'Invalid Request: "params" must be an object', id_)
    try:
        import mcp_types

        # the line as the SDK's reader takes it (its JSON parser nests less deep than json's, and refuses
        # a lone surrogate escape): whatever it would drop without an answer is answered here
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as err:
        errors = err.errors() if hasattr(err, "errors") else []
        if errors and errors[0].get("type") == "json_invalid":
            why = str(errors[0].get("ctx", {}).get("error", "not JSON"))
            hint = "nested too deeply for the server's JSON reader: " if "recursion limit" in why else ""
            return None, _error(PARSE_ERROR, f"Parse error: {hint}{why}", id_)
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return None, _error(INVALID_REQUEST, f"Invalid Request: {first}", id_)
    if "id" in msg and not initialised and method not in _BEFORE_INIT:
        return None, _error(NOT_INITIALISED, f"Invalid Request: the session is not initialised: send `initialize` "
                            f"(then `notifications/initialized`) before {method!r}", id_)
    return msg, None


class Wire:
    """stdout: whole lines, one writer at a time, each flushed; watches the answer to ``initialize``."""

    def __init__(self, binary, front: "Front | None" = None):
        import anyio

        self._out = binary
        self._lock = anyio.Lock()
        self.front = front

    async def write(self, text: str) -> None:
        import anyio

        if self.front is not None and self.front.init_id is not None:
            self.front.saw_answer(text)
        data = text.encode("utf-8")
        async with self._lock:
            await anyio.to_thread.run_sync(self._out.write, data)

    async def flush(self) -> None:
        import anyio

        async with self._lock:
            await anyio.to_thread.run_sync(self._out.flush)

    async def send(self, message: dict) -> None:
        await self.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
        await self.flush()


class Front:
    """stdin as the SDK's stdio reader takes it (an async iterable of lines): each line checked
    (``check_line``), the bad ones answered on ``wire`` and not passed on."""

    def __init__(self, binary):
        self._in = binary
        self.wire: Wire | None = None
        self.initialised = False
        self.init_id = None  # the id of the initialize request passed on, until its answer is seen

    def saw_answer(self, text: str) -> None:
        """An outgoing line: an error answering ``initialize`` leaves the session uninitialised."""
        try:
            msg = json.loads(text)
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("id") == self.init_id and "method" not in msg:
            if "error" in msg:
                self.initialised = False
            self.init_id = None

    def __aiter__(self):
        return self._lines()

    async def _lines(self):
        import anyio

        while True:
            line = await anyio.to_thread.run_sync(self._in.readline)
            if not line:
                return
            try:
                msg, error = check_line(line, self.initialised)
            except Exception as err:  # a bug here must not stop the reading: the line is answered
                msg, error = None, _error(-32603, f"Internal error reading the line: {type(err).__name__}")
            if msg is not None:
                if msg.get("method") == "initialize" and "id" in msg:
                    self.initialised, self.init_id = True, msg["id"]
                yield line.decode("utf-8")
            elif error is not None:
                await self.wire.send(error)


def _claim_stdio():
    """(stdin, stdout) as private binary files on the wire's descriptors; fd 0 then reads the null
    device and fd 1 writes to stderr, so nothing but the protocol reaches stdout. Returns a restore()."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)

    return os.fdopen(wire_in, "rb", buffering=0), os.fdopen(wire_out, "wb", buffering=1 << 16), restore


async def serve_stdio(server) -> None:
    """Serve ``server`` (an ``mcp`` MCPServer) on this process's stdin and stdout, through the front."""
    from mcp.server.stdio import stdio_server

    stdin, stdout, restore = _claim_stdio()
    try:
        front = Front(stdin)
        front.wire = wire = Wire(stdout, front)
        low = server._lowlevel_server
        async with stdio_server(stdin=front, stdout=wire) as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        restore()
