"""``chitragupta check DRAFT``: every citation of a draft (LaTeX, Markdown with pandoc citations, or plain
text) checked against the library (``service/check.py`` says how): a table, one line per finding, worst
first; ``--json`` the report; ``--markdown FILE`` and ``--html FILE`` the draft with each citation marked
and its evidence beside it (the page: ``chitragupta.pages.render_check``, self-contained and offline). Exit status 0 when every citation is supported, 3 when there are findings, 1 on an error."""

from __future__ import annotations

import sys

MARK = {"supported": "✓", "weak": "~", "unsupported": "✗", "unknown": "?", "no-text": "∅"}
DRAFT_BYTES = 1 << 26


def add_arguments(p) -> None:
    from chitragupta.engine.text.draft import FORMATS
    from chitragupta.service.check import ENGINES

    p.add_argument("draft", help="the draft: LaTeX (.tex), Markdown (.md) or plain text; - reads stdin")
    p.add_argument("--format", choices=FORMATS, default=None, help="how to read it (default: by its extension)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="auto (default): hybrid when an embedding index covers the library, else bm25")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--markdown", metavar="FILE",
                   help="write a Markdown copy of the draft, each citation marked and its evidence beside it (-: stdout)")
    p.add_argument("--html", metavar="FILE",
                   help="write the draft as a page: each citation marked by status, its evidence and alternatives "
                        "beside it (self-contained, opens offline)")
    p.add_argument("--no-update", action="store_true", help="check against the index as it is")
    p.add_argument("--log", metavar="DRAFT", help="append the run to content/dossiers/DRAFT/retrieval.md")


def _short(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _scores(pairs) -> str:
    return ", ".join(f"{k} ({s:.2f})" for k, s, _ in pairs)


def table(report) -> str:
    """One line per finding, worst first (then by line): citations, then uncited claims."""
    from chitragupta.service.check import STATUSES

    rows = []
    for f in sorted(report.citations, key=lambda f: (STATUSES.index(f.status), f.line)):
        ev = f.evidence
        why = ("did you mean: " + (", ".join(f.did_you_mean) or "nothing close") if f.status == "unknown" else
               "no passage holds a word of the claim" if ev is None else
               (f"p. {ev.page}: " if ev.page else "") + f'"{_short(ev.text, 60)}"')
        if f.alternatives and f.status != "supported":
            why += "; better: " + _scores(f.alternatives)
        support = "-" if f.support is None else f"{f.support:.2f}"
        rows.append(f"{f.line:>5}  {f.status:<11}  {support:>4}  {f.key}  {why}  | {_short(f.claim, 70)}")
    for u in report.uncited:
        rows.append(f"{u.line:>5}  {'uncited':<11}  {'-':>4}  -  cite: {_scores(u.candidates)}  | {_short(u.sentence, 70)}")
    head = f"{'line':>5}  {'status':<11}  supp  key  evidence  | claim"
    return "\n".join([head, *rows]) if rows else "no citation and no uncited claim"


def _quote(label: str, ev) -> str:
    if ev is None:
        return f"> {label}: no passage holds a word of the claim"
    where = f", p. {ev.page}" if ev.page else ""
    words = f" (matched: {', '.join(ev.words)})" if ev.words else ""
    return f"> {label}{where}: \"{' '.join(ev.text.split())}\"{words}"


def markdown(report, text: str) -> str:
    """The draft with ``[n status]`` after each citation and, after each paragraph, a quote block holding
    its citations' evidence and alternatives, and its uncited claims' candidates."""
    import re

    text = text.replace("\r\n", "\n").replace("\r", "\n")
    marks: dict[int, list[str]] = {}  # offset -> what is inserted there
    notes: dict[int, list[str]] = {}  # paragraph end -> quote lines
    ends = [m.start() for m in re.finditer(r"\n[ \t]*\n", text)] + [len(text)]

    def para(at: int) -> int:
        return next(e for e in ends if e >= at)

    by_span: dict[tuple[int, int], list] = {}
    for f in report.citations:
        by_span.setdefault((f.start, f.end), []).append(f)
    n = 0
    for (start, end), group in sorted(by_span.items()):
        labels = []
        for f in group:
            n += 1
            labels.append(f"{n} {MARK[f.status]}")
            head = f"**[{n}] {f.key}: {f.status}**" + ("" if f.support is None else f" ({f.support:.2f})")
            lines = [f"> {head}" + (f"; did you mean: {', '.join(f.did_you_mean)}" if f.did_you_mean else "")]
            if f.status != "unknown":
                lines.append(_quote("evidence", f.evidence))
            lines += [_quote(f"better: {k} ({s:.2f})", ev) for k, s, ev in f.alternatives]
            notes.setdefault(para(end), []).append("\n>\n".join(lines))
        marks.setdefault(end, []).append(" **[" + "; ".join(labels) + "]**")
    for i, u in enumerate(report.uncited, start=1):
        marks.setdefault(u.end, []).append(f" **[u{i} uncited]**")
        lines = [f"> **[u{i}] uncited claim**; the library holds:"]
        lines += [_quote(f"{k} ({s:.2f})", ev) for k, s, ev in u.candidates]
        notes.setdefault(para(u.end), []).append("\n>\n".join(lines))
    out, at = [], 0
    for pos in sorted(set(marks) | set(notes)):
        out.append(text[at:pos])
        out += marks.get(pos, [])
        if pos in notes:
            out.append("\n\n" + "\n\n".join(notes[pos]) + ("\n" if pos == len(text) else ""))
        at = pos
    out.append(text[at:])
    head = f"<!-- chitragupta check: engine {report.engine}" + "".join(f"; {n}" for n in report.notes) + " -->\n\n"
    return head + "".join(out)


def _read(path: str) -> str:
    from chitragupta.errors import UsageError
    from chitragupta.files import read_limited

    try:
        data = sys.stdin.buffer.read(DRAFT_BYTES + 1) if path == "-" else read_limited(path, DRAFT_BYTES, follow=True)
        if len(data) > DRAFT_BYTES:
            raise UsageError(f"the draft on stdin is more than {DRAFT_BYTES} bytes")
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (byte {err.start}); save the draft as UTF-8") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read the draft ({err.strerror or err})") from None


def run(args) -> int:
    import json

    from chitragupta.cli._common import open_workspace, print_notes
    from chitragupta.engine.search.runfile import check_destination, open_output
    from chitragupta.service.check import check

    for flag, dest in (("--markdown", args.markdown), ("--html", args.html)):
        if dest:
            check_destination(dest, flag)
    text = _read(args.draft)
    ws = open_workspace(args)
    report = check(ws, text, fmt=args.format, name=args.draft, engine=args.engine, passages=bool(args.markdown or args.html),
                   update=not args.no_update)
    print_notes(report.notes)
    if args.markdown == "-":
        sys.stdout.write(markdown(report, text))
    elif args.markdown:
        with open_output(args.markdown, "--markdown") as out:
            out.write(markdown(report, text).encode("utf-8"))
    if args.html:
        from pathlib import Path

        from chitragupta.pages import render_check

        with open_output(args.html, "--html") as out:
            out.write(render_check(report.to_dict(), text, title=f"{Path(args.draft).name}: checked").encode("utf-8"))
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    elif args.markdown != "-":
        print(table(report))
    if args.log:
        from chitragupta.engine.library.dossier import LogRow, append_rows

        append_rows(ws, args.log, [
            LogRow("check", f"{report.engine} document", f"[{f.key} line {f.line}: {f.status}] {f.claim}", "",
                   1 + len(f.alternatives), (f.evidence is not None) + len(f.alternatives),
                   len(f.evidence.text) if f.evidence is not None else 0) for f in report.citations])
    return report.exit_code
