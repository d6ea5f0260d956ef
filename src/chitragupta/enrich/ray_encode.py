"""Encoding past one machine: chunk texts encoded by Ray Data actors on a cluster, as an ``EncodeStream``.

    stream = RayEncodeStream(ws.config.enrich, "auto", device="auto")   # or "ray://head:10001", "head:6379"
    for block in stream(texts):                                          # (rows, dim) float32, in input order
        ...
    stream.device                                                        # what the actors encoded on

``RayEncodeStream`` is a ``chitragupta.enrich.stream.EncodeStream``: the embed and topic stages write the
same checksummed store and cache, resumable as before, whichever encodes. The texts go to Ray Data in
blocks of ``block_chunks`` rows; ``map_batches`` runs them through an actor pool whose every actor loads
the model once (``chitragupta.enrich.encoders.load_encoder`` with the same ``[enrich]`` settings: model,
batch size, prefixes, L2 normalisation). The driver gets the vectors back block by block, in input order
(Ray Data's ``preserve_order``, checked against each row's index, reordered in a bounded buffer if a block
ever comes early). Each text is the full encoder input (``encode_input``), the passage prefix not yet
added: the actor adds it, as the local stream does.

``device`` (``--device``, else ``[enrich].device``) is what the actors get: "cuda" -- one GPU per actor
(an error when the cluster has none); "cpu" -- CPU actors (one per ``cpus_per_actor`` cores) even where
the cluster has GPUs; "auto" -- GPU actors where the cluster has GPUs, else CPU actors, and each actor
resolves "auto" itself (``chitragupta.enrich.device.resolve_device``). Every batch comes back with the
device its actor used; ``stream.device`` says them ("cuda", "cpu", or "cpu, cuda"), and the stage reports
that, not the driver's device. ``spec()`` is the model as its folder says it; where the folder does not say
``max_seq_length`` or the dimension, one Ray task loads the model and tells, so the store's recipe is
complete whoever built it.

``address``: ``"auto"`` is ``ray.init()``: the cluster this machine belongs to (``RAY_ADDRESS``, or one
started here by ``ray start``), else a new local Ray; anything else is handed to ``ray.init(address=...)``
(``ray://HOST:10001`` through the Ray Client, or a head's ``HOST:6379``). An address that cannot be reached
is one UsageError naming it. A Ray already initialised in this process is used for "auto" and for its own
address; another explicit address is refused (Ray cannot hold two clusters in one process).

Every node needs chitragupta with the ``ray`` extra installed (the actors import it) and the model where
``[enrich].embed_model`` says (the packaged default comes with the extra; a local folder must exist at the
same path on every node). Nothing is downloaded.
"""

from __future__ import annotations

import logging
import socket
from types import SimpleNamespace
from typing import Callable, Iterator, Sequence

import numpy as np

from chitragupta.enrich.encoders import EncoderSettings, encoder_settings, model_spec
from chitragupta.enrich.stream import EncodeStream
from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["RayEncodeStream", "connect", "encoder_settings", "DEFAULT_BLOCK_CHUNKS"]

log = logging.getLogger(__name__)

DEFAULT_BLOCK_CHUNKS = 2048
# Ray Data releases blocks in order; a block that arrives early waits here (a bound, not an expectation).
_MAX_PENDING_BLOCKS = 64
_HINT = ("check the address (ray://HOST:10001 for the Ray Client, HOST:6379 for a head node) and that `ray status` "
         "there answers")
_connected: dict[str, str] = {}  # "address": the explicit address this process's Ray was initialised for here


def connect(address: str = "auto"):
    """The ``ray`` module, initialised for ``address`` (see the module's text); UsageError when it cannot be
    reached or when this process already holds another Ray; MissingExtra when ray is not installed."""
    ray = require("ray", "ray", "encoding on a Ray cluster (--ray)")
    address = str(address).strip()
    if not address:
        raise UsageError('--ray is empty; give "auto" or a cluster address (ray://HOST:10001 or HOST:6379)')
    if ray.is_initialized():
        _refuse_another(ray, address)
        return ray
    if address != "auto":
        _reachable(address)
    try:
        if address == "auto":
            ray.init(logging_level=logging.WARNING, log_to_driver=False)
        else:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except Exception as err:  # ConnectionError, TimeoutError, ValueError for a malformed address, ...
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
        where = "a running Ray or a new local one" if address == "auto" else f"the Ray cluster at {address!r}"
        raise UsageError(f"--ray {address}: could not connect to {where} ({type(err).__name__}: {first}); "
                         f"{_HINT}") from None
    _connected["address"] = address
    return ray


def _running_address(ray) -> str | None:
    """``HOST:PORT`` of the Ray this process is connected to (its GCS), None when Ray does not say."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # a Ray Client connection, an older Ray: not known
        return None
    return str(address) if address else None


def _same_node(a: tuple[str, int], b: tuple[str, int]) -> bool:
    if a[1] != b[1]:
        return False
    try:
        return socket.gethostbyname(a[0]) == socket.gethostbyname(b[0])
    except OSError:
        return a[0] == b[0]


def _refuse_another(ray, address: str) -> None:
    """A Ray is initialised in this process already: fine for "auto" and for its own address; any other
    explicit address is a UsageError (Ray holds one cluster per process; using this one silently would
    encode somewhere else than asked)."""
    if address == "auto" or _connected.get("address") == address:
        return
    running = _running_address(ray)
    want, have = _host_port(address), _host_port(running) if running else None
    if want is not None and have is not None and _same_node(want, have):
        return
    raise UsageError(f"--ray {address}: this process is already connected to "
                     f"{'the Ray at ' + running if running else 'another Ray'}, and Ray holds one cluster per "
                     f"process; give that address or \"auto\", or run in a new process")


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``ray://HOST:PORT`` or ``HOST:PORT``; None for anything else (left to Ray)."""
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        return None
    return host, int(port)


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A TCP connection to the address first: Ray itself waits minutes on one that does not answer."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        with socket.create_connection(hp, timeout=timeout):
            pass
    except OSError as err:
        raise UsageError(f"--ray {address}: nothing answers at {hp[0]}:{hp[1]} ({type(err).__name__}: "
                         f"{err.strerror or err}); {_HINT}") from None


class _EncodeActor:
    """One model per actor: ``device`` resolved here ("auto": this actor's node decides), the model loaded
    once, then every batch of chunks goes through it; each batch comes back with the device used."""

    def __init__(self, settings: dict, device: str, threads: int = 0):
        from chitragupta.enrich.device import resolve_device
        from chitragupta.enrich.encoders import load_encoder

        self.device = resolve_device(device)
        if self.device == "cpu" and threads > 0:
            import torch

            torch.set_num_threads(threads)
        self.encoder = load_encoder(SimpleNamespace(**settings), self.device)

    def __call__(self, batch: dict) -> dict:
        texts = [t if isinstance(t, str) else str(t) for t in batch["text"].tolist()]
        # as the local stream does: one sentence-transformers call per block (the passage prefix added)
        block = getattr(self.encoder, "encode_block", None)
        vecs = block(texts) if block is not None else self.encoder.encode(texts)
        return {"i": np.asarray(batch["i"], dtype=np.int64), "vec": np.asarray(vecs, dtype=np.float32),
                "device": np.array([self.device] * len(texts))}


def _model_facts(settings: dict) -> tuple[int, int | None]:
    """``(dim, max_seq_length)`` of the model loaded on a cluster node's CPU (a Ray task)."""
    from chitragupta.enrich.encoders import load_encoder

    enc = load_encoder(SimpleNamespace(**settings), "cpu")
    return int(enc.dim), enc.max_seq_length


class RayEncodeStream(EncodeStream):
    """An ``EncodeStream`` on a Ray cluster (see the module's text).

    ``device``: "auto", "cpu" or "cuda", for the actors; ``actors``: the pool's size (default: one per GPU
    for GPU actors, else one per ``cpus_per_actor`` CPUs of the cluster); ``block_chunks``: rows per Ray
    block (and per yielded array, the last one shorter)."""

    def __init__(self, cfg_enrich, address: str = "auto", *, device: str = "auto",
                 block_chunks: int = DEFAULT_BLOCK_CHUNKS, actors: int | None = None, cpus_per_actor: int = 1,
                 progress: Callable[[int, int], None] | None = None):
        from chitragupta.device import DEVICES

        self._settings = EncoderSettings.of(cfg_enrich)
        self.settings = self._settings.as_config()
        if int(block_chunks) < 1:
            raise UsageError(f"block_chunks must be >= 1, got {block_chunks}")
        requested = str(device or "auto").strip().lower()
        if requested not in DEVICES:
            raise UsageError(f"--device {device!r} for the Ray actors; allowed: {', '.join(DEVICES)}")
        self.address = address
        self.requested = requested
        self.block_chunks = int(block_chunks)
        self.actors = actors
        self.cpus_per_actor = max(1, int(cpus_per_actor))
        self.progress = progress
        self.ray = connect(address)
        resources = self.ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.cpus = int(resources.get("CPU", 1))
        if requested == "cuda" and self.gpus < 1:
            raise UsageError(f"--device cuda: the Ray cluster ({address}) has no GPU "
                             f"({self.cpus} CPU); use --device auto or cpu")
        self.gpu_actors = self.gpus > 0 and requested != "cpu"
        if self.actors is None:
            self.actors = self.gpus if self.gpu_actors else max(1, self.cpus // self.cpus_per_actor)
        self.used: set[str] = set()  # the devices the actors reported
        self._spec = None
        log.info("ray: %d actor(s) with %s, device %s (cluster: %d CPU, %d GPU), blocks of %d chunks", self.actors,
                 "a GPU each" if self.gpu_actors else f"{self.cpus_per_actor} CPU(s) each", requested, self.cpus,
                 self.gpus, self.block_chunks)

    @property
    def device(self) -> str:
        """The devices the actors encoded on (after a run); before one, what they were asked for."""
        return ", ".join(sorted(self.used)) if self.used else self.requested

    def describe(self) -> str:
        return (f"Ray {self.ray.__version__}: {self.actors} actor(s) on {self.device} "
                f"(cluster {self.cpus} CPU, {self.gpus} GPU)")

    def spec(self):
        """The model as its folder says it; where the folder does not say the recipe or the dimension, one
        Ray task loads it on a node and tells (so a store built here has a complete recipe)."""
        if self._spec is None:
            spec = model_spec(self._settings)
            if not spec.complete or spec.dim is None:
                probe = self.ray.remote(num_cpus=1)(_model_facts)
                spec.dim, spec.max_seq_length = self.ray.get(probe.remote(self.settings))
                log.info("ray: the model reports dim %d, max_seq_length %s", spec.dim, spec.max_seq_length)
            self._spec = spec
        return self._spec

    def _dataset(self, texts: Sequence[str]):
        import pyarrow as pa

        ray = self.ray
        n, step = len(texts), self.block_chunks
        tables = [pa.table({"i": np.arange(lo, min(n, lo + step), dtype=np.int64),
                            "text": pa.array([str(t) for t in texts[lo:lo + step]], type=pa.string())})
                  for lo in range(0, n, step)]
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False  # the caller's progress callback says how far it is
        if not log.isEnabledFor(logging.INFO):  # Ray Data's per-10-s progress lines, unless --verbose
            logging.getLogger("ray.data").setLevel(logging.WARNING)
        ds = ray.data.from_arrow(tables)
        if self.gpu_actors:
            remote = dict(num_gpus=1)
            ctor = dict(settings=self.settings, device=self.requested)
        else:
            remote = dict(num_cpus=self.cpus_per_actor)
            ctor = dict(settings=self.settings, device="cpu", threads=self.cpus_per_actor)
        return ds.map_batches(_EncodeActor, fn_constructor_kwargs=ctor, batch_size=step, batch_format="numpy",
                              compute=ray.data.ActorPoolStrategy(size=int(self.actors)), **remote)

    def __call__(self, texts: Sequence[str]) -> Iterator[np.ndarray]:
        texts = list(texts)
        n = len(texts)
        if n == 0:
            return
        done = 0
        pending: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for batch in self._dataset(texts).iter_batches(batch_size=None, batch_format="numpy"):
            idx = np.asarray(batch["i"], dtype=np.int64)
            vecs = np.ascontiguousarray(np.stack(batch["vec"]) if batch["vec"].dtype == object else batch["vec"],
                                        dtype=np.float32)
            if len(idx) == 0:
                continue
            self.used.update(str(d) for d in np.unique(np.asarray(batch["device"]).astype(str)))
            order = np.argsort(idx, kind="stable")
            idx, vecs = idx[order], vecs[order]
            pending[int(idx[0])] = (idx, vecs)
            if len(pending) > _MAX_PENDING_BLOCKS:
                raise RuntimeError(f"ray: {len(pending)} blocks arrived ahead of row {done}; order lost")
            while done in pending:
                idx, vecs = pending.pop(done)
                if not np.array_equal(idx, np.arange(done, done + len(idx))):
                    raise RuntimeError(f"ray: rows {int(idx[0])}..{int(idx[-1])} are not contiguous from {done}")
                done += len(idx)
                if self.progress is not None:
                    self.progress(done, n)
                yield vecs
        if done != n or pending:
            raise RuntimeError(f"ray: {done} of {n} chunks came back ({len(pending)} block(s) out of order)")
