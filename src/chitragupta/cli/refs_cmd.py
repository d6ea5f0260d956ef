"""``chitragupta refs CITEKEY``: a source's reference list as parsed entries, in order, each with the library
citekey it resolves to (``-`` in the table, null in ``--json``: not in the library, or not surely). The
table is one line per entry; ``--json`` one JSON object per entry (``n``, ``text``, ``authors``, ``year``,
``title``, ``venue``, ``doi``, ``arxiv``, ``url``, ``citekey``). The printers the other citation commands
(``cites``, ``cited-by``, ``missing``, ``graph``) share live here."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from chitragupta.cli._common import add_citekey

    add_citekey(p, "the source whose reference list to show")
    p.add_argument("--json", action="store_true", help="print one JSON object per entry (JSON lines)")


def short(s: str | None, n: int = 100) -> str:
    s = " ".join((s or "").split())
    return s if len(s) <= n else s[: n - 3] + "..."


def check_stdout() -> None:
    if sys.stdout is None:  # started with stdout closed (>&-): the answer would vanish without a word
        from chitragupta.errors import OutputError

        raise OutputError("cannot print the answer: stdout is closed; redirect it to a file (or /dev/null)")


def print_rows(rows: list[dict], notes: list[str], as_json: bool, table) -> None:
    """Notes on stderr, then ``rows`` as JSON lines or ``table(rows)`` (a string)."""
    import json

    from chitragupta.cli._common import print_notes

    check_stdout()
    print_notes(notes)
    if as_json:
        sys.stdout.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    else:
        print(table(rows))


def edge_table(rows: list[dict], empty: str) -> str:
    """``cites`` / ``cited-by``: the other source's citekey and title, then the entry's text indented."""
    if not rows:
        return empty
    width = max(len(r["citekey"]) for r in rows)
    lines = []
    for r in rows:
        lines.append(f"{r['citekey']:<{width}}  {short(r['title'], 90)}")
        lines.append(f"{'':<{width}}    {short(r['text'], 120)}")
    return "\n".join(lines)


def _table(rows: list[dict]) -> str:
    if not rows:
        return "no entries"
    width = max([1] + [len(r["citekey"]) for r in rows if r["citekey"]])
    return "\n".join(f"{r['n']:>4}  {r['citekey'] or '-':<{width}}  {short(r['text'], 110)}" for r in rows)


def run(args) -> int:
    from chitragupta.cli._common import citekey_of

    args.citekey = citekey_of(args, "refs")
    from chitragupta.cli._common import open_workspace
    from chitragupta.service import citations

    got = citations.references(open_workspace(args), args.citekey)
    print_rows(got["references"], got["notes"], args.json, _table)
    return 0
