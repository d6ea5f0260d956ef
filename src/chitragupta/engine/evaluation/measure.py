"""Evaluating a run against relevance judgments, with ir-measures underneath (the ``eval`` extra).

    qrels = read_qrels("qrels.tsv")                      # BEIR TSV or TREC qrels, told apart by content
    run = read_trec_run("out.trec")                      # qid -> doc ids, best first
    result = evaluate(collapse_by_source(run), qrels.judgments, ["nDCG@10", "R@100"])
    result.means["nDCG@10"]

Judgments (``qrels``) come in two layouts, recognised from the first non-blank line:

- BEIR TSV: ``query-id <TAB> corpus-id <TAB> score``, with a header line (any first line whose third
  field is not an integer; a headerless file is read too);
- TREC qrels: ``qid iteration docid relevance``, whitespace separated, no header (the second column is
  ignored).

Grades are integers in [-2**31, 2**20 - 1]: trec_eval reads 32-bit grades (beyond them pytrec_eval fails
or scores nonsense), and it keeps a count per grade level up to the largest, about 8 bytes each, so a grade
of 2**31 - 1 cost 16 GB and 16 s per measure; a million levels cost 8 MB. Real collections grade 0-4. A (query, document) pair judged twice keeps its first grade (counted in ``notes``). Query and
doc ids are UTF-8 text without a NUL character (pytrec_eval reads them as C strings: a NUL cut them short
and crashed it).

Either file may be a pipe (read once) or ``-`` for standard input; a folder, a device or a socket is refused
by what it is and never opened, and lines are read one at a time, each up to ``MAX_LINE_BYTES`` (so
``/dev/zero`` through a pipe stops at its first "line", never reads on).

A run is a TREC run, ``qid Q0 docid rank score tag``. A query's hits are ordered by score descending;
equal scores keep the order of the rank column, then of the file (trec_eval would break such ties by
docid descending instead; our own runs never disagree, since their ranks follow their scores). A doc id
listed twice for one query keeps its best-ranked line. The ordered lists are handed to ir-measures with
strictly decreasing scores, so it evaluates exactly that order.

Which queries count: those of the qrels with at least one judgment of grade >= 1. A judged query with no
run lines scores 0 on every measure (trec_eval ``-c``); ``skip_missing=True`` averages over the judged
queries the run has instead. Run queries without judgments are not scored. Measures are written in
ir-measures' syntax (``nDCG@10``, ``R@100``, ``MRR@10`` = ``RR@10``, ``P@5``, ``AP``, ``R(rel=2)@100``);
nDCG uses the grades as gains, the binary measures count grade >= 1 as relevant unless told otherwise.

``collapse_by_source`` turns a passage or chunk run (doc ids ``citekey#n``, as ``search --unit passage``
and ``search --engine embed`` write them) into a source run: each citekey ranked where its best passage
is (max-P), its other passages dropped.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from chitragupta.files import FileRefused, LineTooLong, iter_lines, open_lines
from chitragupta.errors import CorpusError, UsageError

__all__ = ["DEFAULT_MEASURES", "Qrels", "TrecRun", "Evaluation", "read_qrels", "read_trec_run",
           "collapse_by_source", "source_of", "split_measures", "parse_measures", "cutoff_of", "evaluate",
           "passage_hint", "first_relevant", "mean_reciprocal_rank", "GRADE_MIN", "GRADE_MAX", "MAX_LINE_BYTES"]

DEFAULT_MEASURES = ("nDCG@10", "R@100", "MRR@10")
GRADE_MIN, GRADE_MAX = -2**31, 2**20 - 1  # see the module note: memory grows with the top grade
MAX_LINE_BYTES = 1 << 20  # a qrels or run line is a few dozen bytes; a longer one is not such a file

_PASSAGE_ID = re.compile(r"^(.+)#(\d+)$")


@dataclass
class Qrels:
    """``judgments``: qid -> {docid: grade}, in file order; ``format``: "beir" or "trec"; ``notes``:
    what was read but not taken as written (duplicate judgments)."""

    judgments: dict[str, dict[str, int]]
    format: str
    path: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class TrecRun:
    """``ranked``: qid -> doc ids, best first, each once; ``lines``: the run lines read; ``notes``: what
    was read but not taken as written (a doc id listed twice for one query)."""

    ranked: dict[str, list[str]]
    lines: int
    path: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Evaluation:
    """``means``: measure -> mean over ``queries``; ``per_query``: measure -> {qid: value} over the same
    queries (0 for a judged query with no run lines). ``missing``: judged queries with no run lines
    (scored 0, or left out with ``skip_missing``); ``unjudged``: run queries with no judgment of grade >= 1
    (not scored); ``no_relevant``: qrels queries whose judgments are all below grade 1 (not scored)."""

    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    queries: list[str]
    missing: list[str]
    unjudged: int
    no_relevant: int
    skip_missing: bool = False

    def summary(self) -> str:
        """One line on which queries the means are over."""
        text = f"{len(self.queries)} judged queries evaluated"
        if self.missing:
            if self.skip_missing:
                text += f"; {len(self.missing)} judged queries have no run lines and were left out"
            else:
                text += f" ({len(self.missing)} of them have no run lines and score 0)"
        if self.unjudged:
            text += f"; {self.unjudged} run queries have no judgment (not scored)"
        if self.no_relevant:
            text += f"; {self.no_relevant} qrels queries have no judgment of grade >= 1 (not scored)"
        return text


# -- reading ------------------------------------------------------------------------------------------

def _lines(path: Path, what: str):
    """(line number, text) of ``path``'s non-blank lines (``-``: standard input), read one line at a time;
    a missing, refused or unreadable file, a line over ``MAX_LINE_BYTES`` and a non-UTF-8 line are one
    CorpusError each."""
    try:
        f = open_lines(path)
    except FileNotFoundError as err:
        raise CorpusError(f"{path}: {what} file not found") from err
    except FileRefused as err:
        raise CorpusError(f"{path}: is {err.kind}, not a {what} file") from None
    except OSError as err:
        raise CorpusError(f"{path}: cannot read {what} file: {err.strerror or err}") from err
    try:
        for n, raw in iter_lines(f, MAX_LINE_BYTES):
            try:
                text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise CorpusError(f"{path}:{n}: not UTF-8 text ({err.reason}); expected a {what} file") from err
            if text.strip():
                yield n, text
    except LineTooLong as err:
        raise CorpusError(f"{path}:{err.line}: a line longer than {MAX_LINE_BYTES >> 20} MiB (not a {what} "
                          "file?); stopped reading there") from None
    except OSError as err:
        raise CorpusError(f"{path}: cannot read {what} file: {err.strerror or err}") from err
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _short(text: str, limit: int = 40) -> str:
    """``repr(text)``, elided in the middle past ``limit`` characters (a field quoted in a message)."""
    return repr(text) if len(text) <= limit else repr(text[:limit // 2]) + "..." + repr(text[-limit // 2:])


def _nul_field(path, n: int, parts: Sequence[str], names: Sequence[str], expected: str) -> None:
    """A CorpusError naming the first field of ``parts`` holding a NUL character (pytrec_eval reads ids as
    C strings: a NUL cuts one short, or crashes it)."""
    for part, name in zip(parts, names):
        if "\x00" in part:
            raise CorpusError(f"{path}:{n}: the {name} {_short(part)} holds a NUL character; expected {expected}")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


_BEIR = "BEIR qrels (query-id, corpus-id, score: 3 tab-separated fields after a header line)"
_TREC = "TREC qrels (qid 0 docid relevance: 4 whitespace-separated fields)"


def read_qrels(path: str | Path) -> Qrels:
    """Judgments from a BEIR TSV (header line) or a TREC qrels file, told apart by the first line's fields.
    A line that does not fit is a CorpusError naming the file, the line and what was expected."""
    path = Path(path)
    judgments: dict[str, dict[str, int]] = {}
    fmt = None
    duplicates = 0
    first = None
    for n, text in _lines(path, "qrels"):
        parts = text.split()
        if fmt is None:
            first = n
            if len(parts) == 3:
                fmt = "beir"
                if not _is_int(parts[2]):
                    continue  # the header line
            elif len(parts) == 4:
                fmt = "trec"
            else:
                raise CorpusError(f"{path}:{n}: not a qrels line: expected {_BEIR} or {_TREC}, "
                                  f"got {len(parts)} field(s)")
        width, expected = (3, _BEIR) if fmt == "beir" else (4, _TREC)
        if len(parts) != width:
            raise CorpusError(f"{path}:{n}: expected {expected} like line {first}, got {len(parts)} field(s)")
        qid, doc, grade = parts[0], parts[width - 2], parts[width - 1]
        if "\x00" in text:
            _nul_field(path, n, (qid, doc), ("query id", "doc id"), expected)
        try:
            g = int(grade) if len(grade) <= 40 else None  # no 4,300-digit conversion, no ValueError text
        except ValueError:
            raise CorpusError(f"{path}:{n}: relevance {_short(grade)} is not an integer; expected {expected}") \
                from None
        if g is None or not GRADE_MIN <= g <= GRADE_MAX:
            raise CorpusError(f"{path}:{n}: relevance {_short(grade)} is outside [{GRADE_MIN}, {GRADE_MAX}], "
                              "the grades evaluated (trec_eval's memory grows with the largest)")
        rel = judgments.setdefault(qid, {})
        if doc in rel:
            duplicates += 1
            continue
        rel[doc] = g
    if fmt is None or not judgments:
        raise CorpusError(f"{path}: no judgments; expected {_BEIR} or {_TREC}")
    notes = []
    if duplicates:
        notes.append(f"{path}: {duplicates} (query, document) pair(s) judged more than once; the first grade kept")
    return Qrels(judgments, fmt, str(path), notes)


def read_trec_run(path: str | Path) -> TrecRun:
    """A TREC run (``qid Q0 docid rank score tag``) as qid -> doc ids best first (score descending, then
    the rank column, then file order); a doc id listed twice for one query keeps its best line. A line
    that does not fit is a CorpusError naming the file, the line and what was expected."""
    path = Path(path)
    rows: dict[str, list[tuple[float, int, int, str]]] = {}
    lines = 0
    for n, text in _lines(path, "run"):
        parts = text.split()
        if len(parts) != 6:
            raise CorpusError(f"{path}:{n}: expected a TREC run line, 6 whitespace-separated fields "
                              f"(qid Q0 docid rank score tag), got {len(parts)}")
        qid, _q0, doc, rank, score, _tag = parts
        if "\x00" in text:
            _nul_field(path, n, (qid, doc), ("query id", "doc id"), "qid Q0 docid rank score tag")
        try:
            if len(rank) > 40:  # no 4,300-digit conversion; a rank only orders equal scores
                raise ValueError(rank)
            r = int(rank)
        except ValueError:
            raise CorpusError(f"{path}:{n}: rank {_short(rank)} is not an integer "
                              "(of at most 40 digits); expected qid Q0 docid rank score tag") from None
        try:
            s = float(score)
        except ValueError:
            s = math.nan
        if not math.isfinite(s):
            raise CorpusError(f"{path}:{n}: score {_short(score)} is not a finite number; "
                              "expected qid Q0 docid rank score tag")
        rows.setdefault(qid, []).append((-s, r, n, doc))
        lines += 1
    if not lines:
        raise CorpusError(f"{path}: no run lines; expected a TREC run (qid Q0 docid rank score tag)")
    ranked: dict[str, list[str]] = {}
    duplicates = 0
    for qid, hits in rows.items():
        hits.sort()
        seen: set[str] = set()
        out = []
        for *_, doc in hits:
            if doc in seen:
                duplicates += 1
                continue
            seen.add(doc)
            out.append(doc)
        ranked[qid] = out
    notes = []
    if duplicates:
        notes.append(f"{path}: {duplicates} line(s) repeat a doc id already listed for their query; "
                     "the best-ranked kept")
    return TrecRun(ranked, lines, str(path), notes)


# -- passages to sources ------------------------------------------------------------------------------

def source_of(docid: str) -> str:
    """The citekey of a passage or chunk id ``citekey#n``; any other id unchanged."""
    m = _PASSAGE_ID.match(docid)
    return m.group(1) if m else docid


def collapse_by_source(run: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Max-P: each query's ranked ids mapped to their citekeys (``citekey#n`` -> ``citekey``), each
    citekey kept at the rank of its best passage."""
    out = {}
    for qid, ids in run.items():
        seen: set[str] = set()
        keys = []
        for d in ids:
            k = source_of(d)
            if k not in seen:
                seen.add(k)
                keys.append(k)
        out[qid] = keys
    return out


def first_relevant(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
                   depth: int | None = None) -> dict[str, int]:
    """Each query judged relevant somewhere (grade >= 1), in the qrels' order -> the rank (from 1) of its
    first relevant id in its run list within ``depth`` (None: all), or 0 (none there, or no run lines).
    Needs no ir-measures: a summary that must run without the ``eval`` extra (``chitragupta demo``) reads
    its figures off it; ``mean_reciprocal_rank`` of it is ir-measures' ``RR@depth`` (tested)."""
    out = {}
    for q, rel in qrels.items():
        if not any(g > 0 for g in rel.values()):
            continue
        ids = list(run.get(q, ()))[:depth]
        out[q] = next((i for i, d in enumerate(ids, start=1) if rel.get(d, 0) > 0), 0)
    return out


def mean_reciprocal_rank(ranks: Mapping[str, int]) -> float:
    """The mean over ``ranks``' queries of 1 / rank (0 for a rank of 0: nothing relevant found)."""
    return math.fsum(1.0 / r for r in ranks.values() if r) / len(ranks) if ranks else 0.0


def passage_hint(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> str | None:
    """A note when a run's doc ids look like passage ids (``citekey#n``), none of them is judged, and their
    citekeys are: the run wants ``collapse_by_source``."""
    direct = collapsed = False
    looks = False
    for qid, ids in run.items():
        rel = qrels.get(qid)
        if not rel:
            continue
        for d in ids:
            if d in rel:
                direct = True
                break
            m = _PASSAGE_ID.match(d)
            if m:
                looks = True
                collapsed = collapsed or m.group(1) in rel
        if direct:
            return None
    if looks and collapsed:
        return ("the run's doc ids are passages or chunks (citekey#n) and none of them is judged, while their "
                "citekeys are: scored by source, each citekey at its best-ranked unit (max-P, as --by-source)")
    return None


# -- measures -----------------------------------------------------------------------------------------

def split_measures(text: str) -> list[str]:
    """A comma list of measures, commas inside parentheses kept (``R(rel=2,judged_only=True)@10``)."""
    out, depth, cur = [], 0, []
    for c in text:
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        depth += (c == "(") - (c == ")")
        cur.append(c)
    out.append("".join(cur).strip())
    if any(not m for m in out):
        raise UsageError(f"measures {text!r}: an empty name in the comma list (e.g. nDCG@10,R@100,MRR@10)")
    return out


def _ir_measures():
    from chitragupta.extras import require

    return require("ir_measures", "eval", "evaluation")


def parse_measures(names: Sequence[str]) -> list[tuple[str, object]]:
    """(name as written, ir-measures measure) for each name; an unknown or unsupported measure is a
    UsageError naming it. Each is tried once on a one-document case, so a measure ir-measures cannot
    compute here fails now, not after a sweep."""
    ir = _ir_measures()
    out = []
    for name in names:
        try:
            m = ir.parse_measure(name.strip())
        except Exception as err:  # ir-measures raises NameError, ValueError, ... for a bad measure
            raise UsageError(f"unknown measure {name!r} ({err}); write measures as ir-measures does, "
                             "e.g. nDCG@10, R@100, MRR@10, P@5, AP") from None
        try:
            list(ir.iter_calc([m], {"q": {"d": 1}}, {"q": {"d": 1.0}}))
        except Exception as err:  # a measure no installed provider computes, or one missing a parameter
            why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise UsageError(f"ir-measures cannot compute {name!r} here: {why}") from None
        out.append((name.strip(), m))
    if not out:
        raise UsageError("no measures given")
    return out


def cutoff_of(measure) -> int | None:
    """A measure's rank cutoff (``@10`` -> 10), None when it has none."""
    c = getattr(measure, "params", {}).get("cutoff")
    return c if isinstance(c, int) else None


# -- evaluating ---------------------------------------------------------------------------------------

def _check_ids(ids, what: str) -> None:
    """UsageError unless every id is a string pytrec_eval can take: UTF-8 text without a NUL character
    (it reads ids as C strings; a NUL or a lone surrogate crashed it). One join, so cheap per call."""
    try:
        joined = "\n".join(ids)
    except TypeError:
        raise UsageError(f"{what} must be strings") from None
    if "\x00" in joined:
        raise UsageError(f"{what}: an id holds a NUL character")
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what}: an id is not Unicode text (a lone surrogate)") from None


def _check_qrels(qrels: Mapping[str, Mapping[str, int]]) -> None:
    """UsageError unless ``qrels`` is qid -> {docid: integer grade in [GRADE_MIN, GRADE_MAX]} with ids
    ``_check_ids`` accepts (what ``read_qrels`` guarantees; a library caller may pass anything)."""
    _check_ids(qrels, "the qrels' query ids")
    for q, rel in qrels.items():
        if not isinstance(rel, Mapping):
            raise UsageError(f"the qrels of query {_short(q)} are a {type(rel).__name__}, not docid -> grade")
        _check_ids(rel, f"the qrels' doc ids for query {_short(q)}")
        for d, g in rel.items():
            if not isinstance(g, numbers.Integral) or not GRADE_MIN <= g <= GRADE_MAX:
                shown = (f"an integer of {int(g).bit_length()} bits" if isinstance(g, numbers.Integral)
                         else f"a {type(g).__name__}")
                raise UsageError(f"the qrels' grade for query {_short(q)}, doc {_short(d)} is {shown}; "
                                 f"grades are integers in [{GRADE_MIN}, {GRADE_MAX}]")


def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
             measures: Sequence[str] | Sequence[tuple[str, object]] = DEFAULT_MEASURES, *,
             skip_missing: bool = False) -> Evaluation:
    """Means and per-query values of ``measures`` for ``run`` (qid -> doc ids, best first) against
    ``qrels`` (qid -> {docid: grade}), computed by ir-measures on exactly the run's order.

    Queries: those with a judgment of grade >= 1; one with no run lines scores 0 (or, with
    ``skip_missing``, is left out). A UsageError when no query is left to evaluate, and when a grade or an
    id is one pytrec_eval cannot take (see ``_check_qrels``)."""
    ir = _ir_measures()
    if isinstance(measures, str):
        measures = split_measures(measures)
    if not measures:
        raise UsageError("no measures given")
    parsed = list(measures) if all(isinstance(m, tuple) for m in measures) else \
        parse_measures([m if isinstance(m, str) else m[0] for m in measures])
    _check_qrels(qrels)
    judged = {q: rel for q, rel in qrels.items() if any(g > 0 for g in rel.values())}
    no_relevant = len(qrels) - len(judged)
    scored: dict[str, dict[str, float]] = {}
    for q, rel in judged.items():
        ids = run.get(q)
        if not ids:
            continue
        _check_ids(ids, f"the run's doc ids for query {_short(q)}")
        seen: dict[str, float] = {}
        n = len(ids)
        for i, d in enumerate(ids):
            if d not in seen:
                seen[d] = float(n - i)  # strictly decreasing: ir-measures keeps this order
        scored[q] = seen
    missing = [q for q in judged if q not in scored]
    unjudged = sum(1 for q in run if q not in judged)
    queries = list(scored) if skip_missing else list(judged)
    if not queries:
        raise UsageError(f"nothing to evaluate: none of the run's {len(run)} queries has a judgment of grade >= 1 "
                         f"in the qrels ({len(judged)} judged queries)" if judged else
                         "nothing to evaluate: the qrels hold no judgment of grade >= 1")
    labels: dict[object, list[str]] = {}
    for label, m in parsed:
        labels.setdefault(m, []).append(label)
    values: dict[str, dict[str, float]] = {label: {} for label, _ in parsed}
    if scored:
        sub = {q: dict(judged[q]) for q in scored}
        for metric in ir.iter_calc(list(labels), sub, scored):
            for label in labels[metric.measure]:
                values[label][metric.query_id] = float(metric.value)
    per_query = {label: {q: values[label].get(q, 0.0) for q in queries} for label in values}
    means = {label: math.fsum(v.values()) / len(queries) for label, v in per_query.items()}
    return Evaluation(means, per_query, queries, missing, unjudged, no_relevant, skip_missing)
