"""Encoding past one machine: the embed stage's chunks encoded by Ray Data on a cluster.

    stream = ray_encode_stream(ws.config.enrich, "auto")     # or "ray://head:10001", "head:6379"
    for block in stream(texts):                              # (rows, dim) float32 blocks, in input order
        ...

``ray_encode_stream(cfg_enrich, address)`` returns an ``encode_stream(texts) -> Iterator[np.ndarray]``: the
same shape as the local encoder's stream, so the embed stage writes the same checksummed store, resumable as
before, whichever encodes. The texts go to Ray Data in blocks of ``block_chunks`` rows; ``map_batches``
runs them through an actor pool whose every actor loads the model once (``chitragupta.enrich.embed.
load_encoder`` with the same ``[enrich]`` settings: model, batch size, prefixes, L2 normalisation), one GPU
per actor where the cluster has GPUs (one actor per GPU), else CPU actors (one per ``cpus_per_actor``
cores). The driver gets the vectors back block by block, in input order (Ray Data's ``preserve_order``,
checked against each row's index, reordered in a bounded buffer if a block ever comes early). Each text
is the full encoder input (``encode_input``), the passage prefix not yet added: the actor adds it, as the
local stream does (``chitragupta.enrich.embed.EncodeStream``).

``address``: ``"auto"`` is ``ray.init()``: the cluster this machine belongs to (``RAY_ADDRESS``, or one
started here by ``ray start``), else a new local Ray; anything else is handed to ``ray.init(address=...)``
(``ray://HOST:10001`` through the Ray Client, or a head's ``HOST:6379``). An address that cannot be reached
is one UsageError naming it. A Ray already initialised in this process is used as it is.

Every node needs chitragupta with the ``ray`` extra installed (the actors import it) and the model where
``[enrich].embed_model`` says (the packaged default comes with the extra; a local folder must exist at the
same path on every node). Nothing is downloaded.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator, Sequence

import numpy as np

from chitragupta.errors import UsageError
from chitragupta.extras import require

__all__ = ["ray_encode_stream", "RayEncodeStream", "connect", "encoder_settings", "DEFAULT_BLOCK_CHUNKS"]

log = logging.getLogger(__name__)

DEFAULT_BLOCK_CHUNKS = 2048
# Ray Data releases blocks in order; a block that arrives early waits here (a bound, not an expectation).
_MAX_PENDING_BLOCKS = 64


def encoder_settings(cfg_enrich) -> dict:
    """The ``[enrich]`` keys ``load_encoder`` reads, as a plain dict every actor rebuilds its encoder from."""
    return {"embed_model": str(cfg_enrich.embed_model).strip(),
            "embed_batch_size": int(getattr(cfg_enrich, "embed_batch_size", 32)),
            "query_prefix": str(getattr(cfg_enrich, "query_prefix", "")),
            "passage_prefix": str(getattr(cfg_enrich, "passage_prefix", ""))}


def connect(address: str = "auto"):
    """The ``ray`` module, initialised for ``address`` (see the module's text); UsageError when it cannot be
    reached, MissingExtra when ray is not installed."""
    ray = require("ray", "ray", "encoding on a Ray cluster (--ray)")
    address = str(address).strip()
    if not address:
        raise UsageError('--ray is empty; give "auto" or a cluster address (ray://HOST:10001 or HOST:6379)')
    if ray.is_initialized():
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
                         "check the address (ray://HOST:10001 for the Ray Client, HOST:6379 for a head node) and "
                         "that `ray status` there answers") from None
    return ray


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
    import socket

    hp = _host_port(address)
    if hp is None:
        return
    try:
        with socket.create_connection(hp, timeout=timeout):
            pass
    except OSError as err:
        raise UsageError(f"--ray {address}: nothing answers at {hp[0]}:{hp[1]} ({type(err).__name__}: "
                         f"{err.strerror or err}); check the address (ray://HOST:10001 for the Ray Client, "
                         "HOST:6379 for a head node) and that `ray status` there answers") from None


class _EncodeActor:
    """One model per actor: loaded in ``__init__``, then every batch of chunks goes through it."""

    def __init__(self, settings: dict, device: str, threads: int = 0):
        from types import SimpleNamespace

        from chitragupta.enrich.embed import load_encoder

        if device == "cpu" and threads > 0:
            import torch

            torch.set_num_threads(threads)
        self.encoder = load_encoder(SimpleNamespace(**settings), device)

    def __call__(self, batch: dict) -> dict:
        texts = [t if isinstance(t, str) else str(t) for t in batch["text"].tolist()]
        # as the local stream does: one sentence-transformers call per block (the passage prefix added)
        block = getattr(self.encoder, "encode_block", None)
        vecs = block(texts) if block is not None else self.encoder.encode(texts)
        return {"i": np.asarray(batch["i"], dtype=np.int64), "vec": np.asarray(vecs, dtype=np.float32)}


class RayEncodeStream:
    """``encode_stream(texts) -> Iterator[np.ndarray]`` on a Ray cluster (see the module's text).

    ``actors``: the pool's size (default: one per GPU, else one per ``cpus_per_actor`` CPUs of the cluster);
    ``block_chunks``: rows per Ray block (and per yielded array, the last one shorter)."""

    def __init__(self, cfg_enrich, address: str = "auto", *, block_chunks: int = DEFAULT_BLOCK_CHUNKS,
                 actors: int | None = None, cpus_per_actor: int = 1,
                 progress: Callable[[int, int], None] | None = None):
        self.settings = encoder_settings(cfg_enrich)
        if not self.settings["embed_model"]:
            raise UsageError("[enrich].embed_model is empty; set a model name or a local folder")
        if int(block_chunks) < 1:
            raise UsageError(f"block_chunks must be >= 1, got {block_chunks}")
        self.address = address
        self.block_chunks = int(block_chunks)
        self.actors = actors
        self.cpus_per_actor = max(1, int(cpus_per_actor))
        self.progress = progress
        self.ray = connect(address)
        resources = self.ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.cpus = int(resources.get("CPU", 1))
        self.device = "cuda" if self.gpus > 0 else "cpu"
        if self.actors is None:
            self.actors = self.gpus if self.gpus > 0 else max(1, self.cpus // self.cpus_per_actor)
        log.info("ray: %d actor(s) on %s (cluster: %d CPU, %d GPU), blocks of %d chunks", self.actors, self.device,
                 self.cpus, self.gpus, self.block_chunks)

    def describe(self) -> str:
        return (f"Ray {self.ray.__version__}: {self.actors} actor(s) on {self.device} "
                f"(cluster {self.cpus} CPU, {self.gpus} GPU)")

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
        if self.device == "cuda":
            remote = dict(num_gpus=1)
            ctor = dict(settings=self.settings, device="cuda")
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


def ray_encode_stream(cfg_enrich, address: str = "auto", **options) -> RayEncodeStream:
    """``encode_stream(texts) -> Iterator[np.ndarray]`` encoding on Ray (``RayEncodeStream``'s options)."""
    return RayEncodeStream(cfg_enrich, address, **options)
