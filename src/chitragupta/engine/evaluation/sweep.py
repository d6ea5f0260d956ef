"""Sweeping BM25's k1 and b (and the field weights) on one's own queries and judgments.

    r = Retriever.open("my-review")
    result = run_sweep(r, queries, qrels, parse_range("0.5:2:0.25", "k1"), parse_range("0.3:0.9:0.1", "b"))
    result.best, result.current                      # SweepPoint(k1, b, weight_title, weight_abstract, value)
    paths, notes = write_sweep(result, "sweeps/", "sweep-nDCG10")   # .md, .csv and (matplotlib) .png

Every grid point is scored by ``chitragupta.kernels.sweep`` -- one pass over each query's postings for a
block of grid points, the index never rebuilt -- and each point's ranking is exactly what a search with
that k1 and b (and the workspace's other settings) returns -- a query with a one-character word ranked
again with its pairs by ``BM25Scorer.with_pairs``, as search ranks it. Each point's run is evaluated by
``chitragupta.engine.evaluation.measure.evaluate`` (ir-measures), over the queries that have a judgment of grade
>= 1: queries without one are not searched, and a judged query missing from the queries scores 0.

A range is ``START:STOP:STEP`` (STOP included when it falls on the grid) or a comma list; every value
within the config's bounds for its setting (k1 and the field weights in [0, ``DIAL_MAX``], b in [0, 1]:
beyond them scores overflow), and the grid at most ``MAX_GRID_POINTS`` points. A sweep with no judged
query to search is an error, not a grid of zeros, and nothing is written then; the files of a sweep are
all rendered before any is replaced.
"""

from __future__ import annotations

import csv
import errno
import io
import math
import numbers
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from chitragupta.engine.library.config import DIAL_MAX, SCHEMA
from chitragupta.files import discard, put_in_place, temp_beside
from chitragupta.errors import MissingExtra, OutputError, UsageError

__all__ = ["MAX_GRID_POINTS", "SweepPoint", "SweepResult", "parse_range", "check_grid_size", "check_out_dir",
           "check_axis", "judged_queries", "sweep_values", "run_sweep", "write_sweep", "markdown_table",
           "csv_text", "file_stem"]

MAX_GRID_POINTS = 10_000
# the top-k arrays of the grid points scored at once (ids and scores: 16 bytes per hit)
RESULT_BUDGET_BYTES = 256 * 1024 * 1024

_PACKAGE = Path(__file__).resolve().parents[2]


# -- parsing and checking -----------------------------------------------------------------------------

def _number(text: str, what: str) -> float:
    try:
        v = float(text.strip())
    except ValueError:
        raise UsageError(f"{what}: {text.strip()!r} is not a number") from None
    if not math.isfinite(v):
        raise UsageError(f"{what}: {text.strip()!r} is not a finite number")
    return v


def parse_range(text: str, name: str, *, low: float = 0.0, high: float | None = DIAL_MAX,
                max_points: int = MAX_GRID_POINTS) -> list[float]:
    """``START:STOP:STEP`` (STOP included when on the grid) or a comma list, as sorted distinct values
    within [low, high] (by default the config's bounds for k1 and the field weights; b passes
    ``high=1``); anything else is a one-line UsageError naming ``--name``. The bounds are checked before
    the values are counted, and the count before any is made."""
    what = f"--{name} {text!r}"
    allowed = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"

    def check(v: float) -> None:
        if v < low or (high is not None and v > high):
            raise UsageError(f"{what}: {name} must be {allowed}, got {v:g}")

    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise UsageError(f"{what}: a range is START:STOP:STEP (STOP included), or a comma list")
        start, stop, step = (_number(p, what) for p in parts)
        if step <= 0:
            raise UsageError(f"{what}: STEP must be > 0, got {step:g}")
        if stop < start:
            raise UsageError(f"{what}: STOP must be >= START, got {start:g}:{stop:g}")
        check(start)
        check(stop)
        span = (stop - start) / step  # inf for a step like 1e-308: counted as a float first
        if not math.isfinite(span) or span + 1 > max_points:
            shown = f"{math.floor(span) + 1:,}" if math.isfinite(span) else "too many"
            raise UsageError(f"{what}: {shown} values, more than the {max_points:,} a sweep allows")
        n = math.floor(span + 1e-9) + 1
        # kept to 10 decimals (0.1 * 3 is 0.3); a STEP finer than that would repeat values: each kept once
        values = list(dict.fromkeys(round(start + i * step, 10) for i in range(n)))
    else:
        values = sorted({_number(p, what) for p in text.split(",")})
        if len(values) > max_points:
            raise UsageError(f"{what}: {len(values):,} values, more than the {max_points:,} a sweep allows")
    for v in values:
        check(v)
    return values


def check_axis(values: Sequence[float], key: str) -> list[float]:
    """``values`` for the ``[retrieval]`` setting ``key`` (k1, b, weight_title, weight_abstract) as
    floats, or a UsageError naming the first the config would not allow (the sweep's grid obeys the
    bounds a search does: beyond them scores overflow)."""
    setting = SCHEMA["retrieval"][key]
    out = []
    for v in values:
        try:
            ok = not isinstance(v, bool) and isinstance(v, numbers.Real) and setting.check(float(v))
        except (OverflowError, ValueError, TypeError):
            ok = False
        if not ok:
            shown = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
            raise UsageError(f"{key} = {shown} cannot be swept; allowed: {setting.allowed_text()} "
                             f"(as [retrieval] {key})")
        out.append(float(v))
    return out


def check_grid_size(*axes: Sequence[float], max_points: int = MAX_GRID_POINTS) -> int:
    """The number of grid points, or a UsageError when it is over ``max_points``."""
    n = math.prod(len(a) for a in axes)
    if n > max_points:
        raise UsageError(f"the grid has {n:,} points ({' x '.join(str(len(a)) for a in axes)}), more than the "
                         f"{max_points:,} a sweep allows; use fewer values or a larger STEP")
    return n


def check_out_dir(out: str | Path) -> Path:
    """The output folder, refused when it is inside the installed package, is not a folder, or cannot
    be resolved (a symbolic link loop)."""
    p = Path(out).expanduser()
    try:
        real = p.resolve()
    except RuntimeError:  # Python before 3.13: "Symlink loop from ..."
        raise UsageError(f"--out {out}: a symbolic link loop; name a folder") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"--out {out}: cannot be resolved ({getattr(err, 'strerror', None) or err})") from None
    if real == _PACKAGE or _PACKAGE in real.parents:
        raise UsageError(f"--out {out}: inside the installed package ({_PACKAGE}); write sweeps elsewhere")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UsageError(f"--out {out}: a symbolic link loop; name a folder") from None
        raise UsageError(f"--out {out}: cannot be used ({err.strerror or err})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"--out {out}: exists and is not a directory")
    return p


def file_stem(metric: str, prefix: str = "sweep") -> str:
    """``sweep-nDCG10`` for ``nDCG@10``: the metric with only letters, digits, ``.``, ``_``, ``-`` kept."""
    safe = "".join(c for c in metric if c.isascii() and (c.isalnum() or c in "._-"))
    return f"{prefix}-{safe}" if safe else prefix


# -- running ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepPoint:
    k1: float
    b: float
    weight_title: float
    weight_abstract: float
    value: float

    def label(self) -> str:
        text = f"k1={self.k1:g} b={self.b:g}"
        if self.weight_title != 1.0 or self.weight_abstract != 1.0:
            text += f" weight_title={self.weight_title:g} weight_abstract={self.weight_abstract:g}"
        return text


@dataclass
class SweepResult:
    """``points``: one per grid point, k1 slowest, abstract weight fastest; ``current``: the workspace's
    configured point (scored in the same pass when it is off the grid)."""

    metric: str
    points: list[SweepPoint]
    k1s: list[float]
    bs: list[float]
    titles: list[float]
    abstracts: list[float]
    current: SweepPoint | None
    n_queries: int
    k: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> SweepPoint:
        """The highest value; ties go to the first point in grid order."""
        return max(self.points, key=lambda p: p.value)

    def is_2d(self) -> bool:
        return len(self.titles) == 1 and len(self.abstracts) == 1


def _weights(params) -> tuple[float, float]:
    fw = dict(params.field_weights)
    return float(fw.get("title", 1.0)), float(fw.get("abstract", 1.0))


def sweep_values(retriever, queries: Sequence[tuple[str, str]], qrels: Mapping[str, Mapping[str, int]], grid,
                 measure, *, k: int = 100, skip_missing: bool = False) -> list[float]:
    """``measure`` (a name, or a (name, measure) pair from ``parse_measures``) for each ``BM25Params`` of
    ``grid``: the document unit of ``retriever``'s index, ``queries`` as (qid, text), top ``k``. The grid
    is scored in blocks whose top-k arrays fit ``RESULT_BUDGET_BYTES``, each block in one pass."""
    from chitragupta.engine.evaluation.measure import evaluate, parse_measures
    from chitragupta.engine.search.results import Ranked
    from chitragupta.engine.search.searcher import check_k
    from chitragupta.kernels.sweep import sweep

    k = check_k(k)
    parsed = measure if isinstance(measure, tuple) else parse_measures([measure])[0]
    index = retriever.checked_index()  # the sweep kernels read every posting of the batch's terms
    k = min(k, max(1, index.n_docs))
    qids = [q for q, _ in queries]
    texts = [t for _, t in queries]
    plan = retriever.scorer.plan(texts, pairs=retriever.workspace.config.retrieval.short_word_pairs)
    batch = plan.batch
    counts: dict = {}  # each one-character pair's counts, read once for every point
    per_block = max(1, RESULT_BUDGET_BYTES // (16 * k * max(1, len(qids))))
    out: list[float] = []
    for g0 in range(0, len(grid), per_block):
        try:
            tops = sweep(index.postings, batch, list(grid[g0:g0 + per_block]), k)
        except ValueError as err:  # a field the sweep cannot weight
            raise UsageError(str(err)) from None
        for point, top in zip(grid[g0:g0 + per_block], tops):
            top = retriever.scorer.with_pairs(plan, top, params=point, counts=counts)
            keys = Ranked(top, texts, unit="document", table=index.citekeys, plan=plan).keys()
            ev = evaluate(dict(zip(qids, keys)), qrels, [parsed], skip_missing=skip_missing)
            out.append(ev.means[parsed[0]])
    return out


def judged_queries(queries: Mapping[str, str] | Sequence[tuple[str, str]], qrels: Mapping[str, Mapping[str, int]],
                   *, skip_missing: bool = False) -> tuple[list[tuple[str, str]], list[str]]:
    """The (qid, text) pairs of ``queries`` that have a judgment of grade >= 1 in ``qrels``, and notes on
    the rest. A UsageError when there is none: every point would score 0 (or nothing), and a grid of
    zeros is no answer."""
    pairs = list(queries.items()) if isinstance(queries, Mapping) else list(queries)
    judged = set()
    for q, rel in qrels.items():
        try:
            if any(g > 0 for g in rel.values()):
                judged.add(q)
        except (AttributeError, TypeError):
            raise UsageError(f"the qrels of query {str(q)[:40]!r} are not docid -> integer grade") from None
    use = [(q, t) for q, t in pairs if q in judged]
    if not use:
        raise UsageError(f"nothing to sweep: none of the {len(pairs)} queries has a judgment of grade >= 1 in "
                         f"the qrels ({len(judged)} judged queries there; are they the same query ids?)"
                         if judged else "nothing to sweep: the qrels hold no judgment of grade >= 1")
    notes = []
    if len(use) < len(pairs):
        notes.append(f"{len(pairs) - len(use)} of {len(pairs)} queries have no judgment of grade >= 1 and were "
                     "not searched")
    absent = len(judged - {q for q, _ in use})
    if absent:
        notes.append(f"{absent} judged queries are not among the queries: "
                     + ("left out" if skip_missing else "they score 0 at every point"))
    return use, notes


def run_sweep(retriever, queries: Mapping[str, str] | Sequence[tuple[str, str]],
              qrels: Mapping[str, Mapping[str, int]], k1s: Sequence[float], bs: Sequence[float],
              metric: str = "nDCG@10", *, titles: Sequence[float] | None = None,
              abstracts: Sequence[float] | None = None, k: int = 100, skip_missing: bool = False) -> SweepResult:
    """Score the grid k1s x bs (x title weights x abstract weights; by default the workspace's weights)
    on the judged ``queries`` and evaluate ``metric`` at each point, plus the workspace's own point."""
    from chitragupta.engine.evaluation.measure import cutoff_of, parse_measures
    from chitragupta.engine.search.searcher import check_k
    from chitragupta.kernels.sweep import grid_of

    k = check_k(k)
    cur_t, cur_a = _weights(retriever.params)
    titles = [cur_t] if titles is None else list(titles)
    abstracts = [cur_a] if abstracts is None else list(abstracts)
    check_grid_size(k1s, bs, titles, abstracts)
    if not k1s or not bs or not titles or not abstracts:
        raise UsageError("the grid is empty")
    k1s, bs = check_axis(k1s, "k1"), check_axis(bs, "b")
    titles, abstracts = check_axis(titles, "weight_title"), check_axis(abstracts, "weight_abstract")
    parsed = parse_measures([metric])[0]
    use, notes = judged_queries(queries, qrels, skip_missing=skip_missing)
    cut = cutoff_of(parsed[1])
    if cut is not None and cut > k:
        notes.append(f"{metric} looks {cut} deep but each point ranks only k = {k}")
    grid = grid_of(k1s, bs, titles, abstracts)
    cur = (retriever.params.k1, retriever.params.b, cur_t, cur_a)
    keys = [(p.k1, p.b, *_weights(p)) for p in grid]
    extra = [] if cur in keys else grid_of([cur[0]], [cur[1]], [cur_t], [cur_a])
    t0 = time.perf_counter()
    values = sweep_values(retriever, use, qrels, grid + extra, parsed, k=k, skip_missing=skip_missing)
    seconds = time.perf_counter() - t0
    points = [SweepPoint(*key, v) for key, v in zip(keys, values)]
    current = points[keys.index(cur)] if cur in keys else SweepPoint(*cur, values[-1])
    return SweepResult(metric, points, list(k1s), list(bs), titles, abstracts, current, len(use),
                       min(k, max(1, retriever.index.n_docs)), seconds, notes)


# -- writing ------------------------------------------------------------------------------------------

def markdown_table(result: SweepResult) -> str:
    """A k1 x b table (rows k1, columns b) when the grid is 2-D in (k1, b); otherwise one row per point."""
    if result.is_2d():
        val = {(p.k1, p.b): p.value for p in result.points}
        lines = ["| k1 \\ b | " + " | ".join(f"{b:g}" for b in result.bs) + " |", "|---|" + "---|" * len(result.bs)]
        for k1 in result.k1s:
            lines.append(f"| {k1:g} | " + " | ".join(f"{val[(k1, b)]:.4f}" for b in result.bs) + " |")
        return "\n".join(lines) + "\n"
    lines = [f"| k1 | b | weight_title | weight_abstract | {result.metric} |", "|---|---|---|---|---|"]
    lines += [f"| {p.k1:g} | {p.b:g} | {p.weight_title:g} | {p.weight_abstract:g} | {p.value:.4f} |"
              for p in result.points]
    return "\n".join(lines) + "\n"


def csv_text(result: SweepResult) -> str:
    """One row per grid point: k1, b, weight_title, weight_abstract and the metric (full precision)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["k1", "b", "weight_title", "weight_abstract", result.metric])
    w.writerows([(p.k1, p.b, p.weight_title, p.weight_abstract, p.value) for p in result.points])
    return buf.getvalue()


def _replace_all(files: dict[Path, bytes]) -> None:
    """Each file written to a temp file beside it (the one atomic writer's, ``chitragupta.files``:
    created afresh, never through a symlink), then all renamed into place: a failure before the renames
    leaves every old file as it was."""
    for path in files:  # a rename onto a folder fails: found before anything is replaced
        if path.is_dir():
            raise OutputError(f"{path}: is a folder; the sweep cannot write its file there")
    temps: list[tuple[str, Path]] = []
    path = next(iter(files))
    try:
        for path, data in files.items():
            fd, tmp = temp_beside(path, mode=0o666, tag=str(os.getpid()))
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        for tmp, path in temps:
            put_in_place(tmp, path, durable=False)
    except OSError as err:
        for tmp, _ in temps:
            discard(tmp)
        raise OutputError(f"{path}: cannot write: {err.strerror or err}") from err


def _heatmap_png(result: SweepResult, title: str) -> bytes:
    """The metric over (k1, b) as a PNG: k1 up, b across, the best point starred, the configured one ringed."""
    from chitragupta.extras import require

    require("matplotlib", "eval", "the sweep heat map")
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    val = {(p.k1, p.b): p.value for p in result.points}
    grid = [[val[(k1, b)] for b in result.bs] for k1 in result.k1s]
    nb, nk = len(result.bs), len(result.k1s)
    fig = Figure(figsize=(2.2 + 0.75 * nb, 1.9 + 0.45 * nk))
    ax = fig.subplots()
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(nb), [f"{b:g}" for b in result.bs])
    ax.set_yticks(range(nk), [f"{k:g}" for k in result.k1s])
    ax.set_xlabel("b")
    ax.set_ylabel("k1")
    ax.set_title(title, fontsize="medium")
    if nb * nk <= 144:  # small grids: each cell's value written in it
        lo, hi = min(map(min, grid)), max(map(max, grid))
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                light = hi > lo and (v - lo) / (hi - lo) > 0.6
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=6.5,
                        color="black" if light else "white")
    from matplotlib.patches import Rectangle

    def box(k1, b, color, label):
        ax.add_patch(Rectangle((result.bs.index(b) - 0.5, result.k1s.index(k1) - 0.5), 1, 1, fill=False,
                               edgecolor=color, linewidth=2.5, label=label))

    best = result.best
    box(best.k1, best.b, "white", f"best {best.value:.4f} ({best.label()})")
    cur = result.current
    if cur is not None and cur.k1 in result.k1s and cur.b in result.bs:
        box(cur.k1, cur.b, "red", f"config {cur.value:.4f}")
    legend = fig.legend(loc="lower center", ncol=2, fontsize="small", frameon=True, facecolor="0.85")
    legend.get_frame().set_linewidth(0)
    fig.colorbar(im, ax=ax, label=result.metric)
    fig.tight_layout(rect=(0, 0.4 / (1.9 + 0.45 * nk), 1, 1))  # room for the legend below
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def write_sweep(result: SweepResult, out_dir: str | Path, stem: str, title: str | None = None
                ) -> tuple[list[Path], list[str]]:
    """Write ``stem``.md (the table), ``stem``.csv and, when matplotlib is installed and the grid is 2-D in
    (k1, b), ``stem``.png into ``out_dir`` (created if needed; never inside the installed package).
    Returns (paths written, notes: why there is no heat map)."""
    out = check_out_dir(out_dir)
    files = {out / f"{stem}.md": markdown_table(result).encode("utf-8"),
             out / f"{stem}.csv": csv_text(result).encode("utf-8")}
    notes = []
    if not result.is_2d():
        notes.append("no heat map: the grid varies the field weights too (the table lists every point)")
    else:
        try:
            files[out / f"{stem}.png"] = _heatmap_png(result, title or result.metric)
        except MissingExtra as err:
            notes.append(f"no heat map: {err}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"--out {out_dir}: cannot create the folder: {err.strerror or err}") from err
    _replace_all(files)
    return list(files), notes
