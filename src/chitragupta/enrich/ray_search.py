"""A BM25 batch past one process: the queries scored by Ray actors that memory-map the document index.

    searcher = RaySearcher(bm25_searcher, "auto")       # or "ray://head:10001", "head:6379"
    ranked = searcher.rank_many(queries, 100)           # the Ranked of the one-process batch, to the bit

The driver does what a one-process batch does before and after scoring (``engine.scoring.BM25Scorer``):
the queries planned once against the document index (``QueryPlan``: tokens, acronyms, term ids), the
query syntax's and the metadata filters' masks, and afterwards the ``Ranked`` that the run writer takes.
Only the scoring is sent out, as term ids (the vocabulary is the same in the whole index and in each
shard, ``engine.index.shards``), and what comes back is each query's top-k (ids and scores):

- a sharded index (``chitragupta index --shards N``): one actor per shard, every query to each; a shard is
  scored with the whole index's statistics, so its scores are the whole index's, and the driver merges the
  shards' top-k by (score descending, id ascending), the one-process order (``kernels.shardmerge``);
- an unsharded one: actors over the whole index (one per CPU of the cluster, or ``actors``), each given
  blocks of queries; the blocks' rows are put back in query order.

A query's mask (a phrase, ``+``/``-`` words, a metadata filter) goes with it, cut to the shard's documents;
unconstrained queries send none. Passages (``--unit passage``) are ranked in one process.

Every node reads the index where the driver's workspace has it (a filesystem every node shares: the
actors get paths, not arrays), and needs chitragupta with the ``ray`` extra. Each actor opens the index
through the same checks a search makes (``doc.open_index``, the deep check before the numba kernel) and
refuses a generation other than the driver's: an index rewritten while the batch runs is an error, never
a mix. The cluster is reached as the encoder reaches it (``ray_encode.connect``: ``auto`` or an address).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from chitragupta.engine.index import shards as shard_index
from chitragupta.engine.search.results import Ranked
from chitragupta.errors import UsageError
from chitragupta.kernels.shardmerge import merge_topk, offset_ids, stack_rows
from chitragupta.kernels.types import QueryBatch, TopK

__all__ = ["RaySearcher", "BatchPlan", "LocalTargets", "RayTargets", "rank_sharded", "check_options",
           "BLOCKS_PER_ACTOR"]

log = logging.getLogger(__name__)

BLOCKS_PER_ACTOR = 4  # query blocks per actor over an unsharded index (an actor that finishes early takes none)


def check_options(*, engine: str, unit: str | None, backend: str | None, queries: bool) -> None:
    """UsageError unless ``--ray`` goes with what it supports (a BM25 document batch, numba scoring)."""
    if not queries:
        raise UsageError("--ray scores a batch: give --queries Q.jsonl --run OUT.trec")
    if engine != "bm25":
        raise UsageError(f"--ray scores BM25 batches; --engine {engine} runs in one process")
    if unit not in (None, "document"):
        raise UsageError(f"--ray ranks documents; --unit {unit} runs in one process")
    if backend not in (None, "auto", "numba"):
        raise UsageError(f"--ray scores with numba on its actors; --backend {backend} runs in one process")
    from chitragupta.extras import require

    require("ray", "ray", "searching on a Ray cluster (--ray)")  # before the index is opened or updated


def _rows(batch: QueryBatch, lo: int, hi: int) -> QueryBatch:
    a, b = int(batch.indptr[lo]), int(batch.indptr[hi])
    return QueryBatch(indptr=np.asarray(batch.indptr[lo:hi + 1] - a, dtype=np.int64), terms=batch.terms[a:b])


def _masks(allowed, lo: int, hi: int, start: int, stop: int):
    """Queries ``lo..hi - 1``'s masks cut to documents ``start..stop - 1`` (None when none has one)."""
    if allowed is None:
        return None
    got = [None if m is None else np.ascontiguousarray(m[start:stop]) for m in allowed[lo:hi]]
    return None if all(m is None for m in got) else got


@dataclass(frozen=True)
class BatchPlan:
    """What the driver sends: the term-id batch, k, the BM25 params and the masks (None, or per query)."""

    batch: QueryBatch
    k: int
    params: object  # BM25Params
    allowed: list | None


class LocalTargets:
    """Shards scored in this process, one after the other: the split and the merge without a cluster
    (what the Ray actors do, for tests and for reading the design)."""

    def __init__(self, shards: list, *, blocks: int = 1):
        self.shards = shards
        self.blocks = max(1, int(blocks))

    @property
    def sharded(self) -> bool:
        return any(s.global_df is not None for s in self.shards)

    def score(self, plan: BatchPlan) -> TopK:
        if self.sharded:
            parts = [offset_ids(s.score(plan.batch, plan.params, plan.k,
                                        _masks(plan.allowed, 0, plan.batch.n_queries, s.start, s.stop)), s.start)
                     for s in self.shards]
            return merge_topk(parts, plan.k)
        whole = self.shards[0]
        parts = [whole.score(_rows(plan.batch, lo, hi), plan.params, plan.k, _masks(plan.allowed, lo, hi, 0, whole.stop))
                 for lo, hi in _blocks(plan.batch.n_queries, self.blocks)]
        return stack_rows(parts, plan.k)


def _blocks(n: int, count: int) -> list[tuple[int, int]]:
    count = max(1, min(count, n))
    return [(i * n // count, (i + 1) * n // count) for i in range(count)]


class _ScoreActor:
    """One index (a shard, or the whole document index) opened once, then scores batches. ``spec``: the
    folder, the generation the driver uses, the settings, the fields to check; ``threads``: numba's."""

    def __init__(self, spec: dict, threads: int = 1):
        from chitragupta.errors import ChitraguptaError
        from chitragupta.kernels.dispatch import set_threads

        set_threads(threads)
        self.where = f"index shard {spec['shard']}" if spec.get("shard") is not None else "the document index"
        self.error = None
        try:
            self.shard = _open_target(spec)
        except ChitraguptaError as err:  # said on the first call: Ray reports a failed creation as itself
            self.shard, self.error = None, err

    def score(self, batch: QueryBatch, params, k: int, allowed):
        from chitragupta.engine.index.store import IndexCorrupt

        if self.error is not None:
            raise self.error
        try:
            top = self.shard.score(batch, params, k, allowed)
        except IndexCorrupt as err:  # its deep check, before the kernel reads it
            raise UsageError(f"{self.where} is damaged ({err}); run `chitragupta index` (it checks every shard and cuts a damaged one again)") from None
        return top.ids, top.scores


def _open_target(spec: dict):
    """The ``Shard`` an actor scores (see ``_ScoreActor``); IndexCorrupt or UsageError when it is not the
    generation the driver planned against."""
    from chitragupta.engine.index import doc as doc_index
    from chitragupta.engine.index.store import IndexCorrupt

    fields = tuple(spec["fields"])
    if spec.get("shard") is None:
        try:
            index = doc_index.open_index(Path(spec["folder"]), spec["settings"], fields=fields, deep=False)
        except IndexCorrupt as err:
            raise UsageError(f"the document index is not usable on this node ({err}); run `chitragupta index`") \
                from None
        if index.path is None or index.path.name != spec["generation"]:
            raise UsageError(f"the document index changed while the batch was sent out ({spec['generation']} -> "
                             f"{index.path.name if index.path else '?'}); run it again")
        return shard_index.whole(index)
    got = shard_index.read_set(Path(spec["folder"]))
    if got is None or got.source != spec["generation"]:
        raise UsageError("the index shards changed while the batch was sent out; run it again")
    try:
        return shard_index.open_shard(got, int(spec["shard"]), spec["settings"], fields=fields)
    except IndexCorrupt as err:
        raise UsageError(f"index shard {spec['shard']} is not usable ({err}); run `chitragupta index`") from None


class RayTargets:
    """The same split as ``LocalTargets``, on Ray actors (the module's text)."""

    def __init__(self, ray, specs: list[dict], spans: list[tuple[int, int]], *, sharded: bool, cpus: float,
                 threads: int):
        self.ray = ray
        self.sharded = sharded
        self.spans = spans
        actor = ray.remote(num_cpus=cpus)(_ScoreActor)
        self.actors = [actor.remote(spec, threads) for spec in specs]

    def score(self, plan: BatchPlan) -> TopK:
        ray = self.ray
        batch, k, params = plan.batch, plan.k, plan.params
        nq = batch.n_queries
        if self.sharded:
            futures = [a.score.remote(batch, params, k, _masks(plan.allowed, 0, nq, s, e))
                       for a, (s, e) in zip(self.actors, self.spans)]
            parts = [offset_ids(TopK(*got), s) for got, (s, _e) in zip(_get(ray, futures), self.spans)]
            return merge_topk(parts, k)
        blocks = _blocks(nq, BLOCKS_PER_ACTOR * len(self.actors))
        stop = self.spans[0][1]
        futures = [self.actors[j % len(self.actors)].score.remote(_rows(batch, lo, hi), params, k,
                                                                 _masks(plan.allowed, lo, hi, 0, stop))
                   for j, (lo, hi) in enumerate(blocks)]
        return stack_rows([TopK(*got) for got in _get(ray, futures)], k)

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # an actor already gone: nothing to free
                pass


def _get(ray, futures):
    """``ray.get``, with an actor's own one-line error (a changed index, a damaged shard) said as itself."""
    from chitragupta.errors import ChitraguptaError

    try:
        return ray.get(futures)
    except Exception as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, ChitraguptaError):
            raise cause from None
        if isinstance(err, ChitraguptaError):
            raise
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"--ray: an actor failed ({type(err).__name__}: {first})") from None


def rank_sharded(searcher, queries: Sequence[str], k: int, targets, filters=None, syntax=None) -> Ranked:
    """``queries`` ranked to ``k`` documents as ``BM25Scorer.rank`` ranks them, the scoring done by
    ``targets`` (``LocalTargets`` or ``RayTargets``); ``filters``: None or per query None or a ``Filters``;
    ``syntax`` as for ``BM25Scorer.rank``."""
    from chitragupta.engine.search.query import QueryPlan
    from chitragupta.engine.search.scoring import _Rebuilt  # a damaged index rebuilt on the way: plan again

    scorer = searcher.scorer
    queries = list(queries)
    for _attempt in range(2):
        index = scorer.index
        kk = min(k, max(1, index.n_units))
        plan = QueryPlan(queries, index, scorer.expander(),
                         syntax=searcher.workspace.config.retrieval.query_syntax if syntax is None else syntax)
        try:
            allowed = None if plan.constraints is None else scorer.allowed("document", plan)
        except _Rebuilt:
            continue
        allowed, notes = scorer.filtered("document", filters, allowed)
        top = targets.score(BatchPlan(plan.batch, kk, scorer.params, allowed))
        ranked = Ranked(top, queries, unit="document", table=index.citekeys, plan=plan)
        ranked.filter_notes = notes
        return ranked
    from chitragupta.errors import IndexDamaged

    raise IndexDamaged(f"{scorer.index.where} is damaged again after a rebuild; run `chitragupta index --force`")


class RaySearcher:
    """A ``BM25Searcher`` whose ``rank_many`` scores on Ray (the module's text); everything else is the
    searcher's own. ``actors``: over an unsharded index, how many (default: one per CPU of the cluster);
    a sharded index has one per shard. ``close()`` frees the actors."""

    def __init__(self, searcher, address: str = "auto", *, actors: int | None = None):
        from chitragupta.extras import require

        require("ray", "ray", "searching on a Ray cluster (--ray)")
        self._searcher = searcher
        self.address = address
        self.actors = actors
        self._targets = None
        self.notes: list[str] = []

    def __getattr__(self, name):
        return getattr(self._searcher, name)

    def _open_targets(self):
        from chitragupta.enrich.ray_encode import connect
        from chitragupta.engine.index.manage import doc_folder

        ws = self._searcher.workspace
        scorer = self._searcher.scorer
        index = scorer.checked_index("document")  # a damaged index is rebuilt here, not found by the actors
        settings = ws.config.index_settings()
        fields = [name for name, _d in scorer.params.active_fields()]  # what check_deep checks
        folder = shard_index.folder_of(ws)
        got = shard_index.read_set_or_none(folder)
        if got is not None and not got.current_for(index):
            got = self._recut(ws, got)
        ray = connect(self.address)
        resources = ray.cluster_resources()
        cpus = max(1, int(resources.get("CPU", 1)))
        if got is not None:
            specs = [{"folder": str(folder), "generation": got.source, "shard": i, "settings": settings,
                      "fields": fields} for i in range(got.count)]
            spans = list(got.spans)
            sharded = True
        else:
            n = self.actors or cpus
            specs = [{"folder": str(doc_folder(ws)), "generation": index.path.name, "shard": None,
                      "settings": settings, "fields": fields}] * n
            spans = [(0, index.n_docs)] * n
            sharded = False
        per = min(1.0, cpus / len(specs))  # more shards than CPUs: the actors share them
        threads = max(1, int(math.floor(cpus / len(specs))))
        log.info("ray: %d actor(s) over %s (cluster: %d CPU)", len(specs),
                 f"{len(specs)} shards" if sharded else "the whole document index", cpus)
        self.describe = (f"{len(specs)} Ray actor(s), one per shard" if sharded else
                         f"{len(specs)} Ray actor(s) over the whole index")
        return RayTargets(ray, specs, spans, sharded=sharded, cpus=per, threads=threads)

    def _recut(self, ws, stale):
        """The shards were cut from another generation than the index the search opened: cut them again
        (under the workspace lock), or refuse when the search may not write."""
        from chitragupta.engine.index import doc as doc_index
        from chitragupta.engine.index.manage import doc_folder

        if not self._searcher.scorer.update:
            raise UsageError(f"the index shards were cut from an older index ({stale.count} shards); run "
                             "`chitragupta index` to cut them again")
        with ws.lock("search --ray (cutting the index shards again)"):
            index = doc_index.open_index(doc_folder(ws), ws.config.index_settings(), verify=True, deep=True)
            if index.path.name != self._searcher.scorer.index.path.name:
                raise UsageError("the document index changed while the search opened it; run it again")
            self.notes.append(f"the index shards were cut from an older index; cut again ({stale.count} shards)")
            return shard_index.write(stale.folder, index, stale.count)

    def rank_many(self, queries: Sequence[str], k: int = 10, *, unit: str | None = None,
                  max_per_source: int | None = None, filters=None, syntax: bool | str | None = None) -> Ranked:
        from chitragupta.engine.search.filters import per_query
        from chitragupta.engine.search.searcher import check_k

        k = check_k(k)
        if self._searcher.check_unit(unit) != "document":
            raise UsageError(f"--ray ranks documents; --unit {unit} runs in one process")
        queries = list(queries)
        if self._targets is None:
            self._targets = self._open_targets()
        return rank_sharded(self._searcher, queries, k, self._targets, per_query(filters, len(queries)), syntax)

    def index_notes(self, unit: str | None = None) -> list:
        """The searcher's notes, then what the Ray side did (shards cut again, the actors used)."""
        got = list(self._searcher.index_notes(unit))
        return got + self.notes + ([f"scored by {self.describe}"] if self._targets is not None else [])

    def close(self) -> None:
        if self._targets is not None:
            self._targets.close()
            self._targets = None
