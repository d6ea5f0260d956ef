"""``chitragupta topics``: the topics ``enrich --stages bertopic`` found (``content/topics.json``), largest
first and the outliers last, each with a label (its distinctive words: ``enrich.topics.topic_labels``), its
size and the titles of its most representative documents (those nearest its mean vector). ``--json``: one
``{"id", "label", "size", "words", "examples": [{"citekey", "title"}]}`` per topic (JSON lines);
``--html FILE``: a map to open in a browser, offline (``chitragupta.pages.render_topics``): every document a
point coloured by its topic at the 2-D coordinates the stage wrote, its title on hover, every topic
labelled."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object per topic (JSON lines)")
    p.add_argument("--html", metavar="FILE",
                   help="also write the topic map, a page to open in a browser (- for stdout: the page alone)")


def read(ws) -> dict:
    """``{"topics": [rows as --json prints them], "documents": [{"citekey", "title", "topic", "x", "y"}]
    (empty without a map), "n_docs", "n_outliers", "model", "created", "has_map"}``."""
    import json

    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.enrich.topics import SCHEMA_VERSION, TOPICS_NAME, topic_labels
    from chitragupta.errors import UsageError

    path = ws.content / TOPICS_NAME
    where = ws.relative(path)
    if not path.exists():
        raise UsageError(f"no {where}: run `chitragupta enrich --stages embed,bertopic` first (the enrich extra)")
    with Ledger(ws.ledger_path, create=False) as ledger:
        titles = {r.citekey: r.title for r in ledger.rows()}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"schema {data.get('schema')!r}, this version reads {SCHEMA_VERSION}")
        topics = sorted(data["topics"], key=lambda t: (t["id"] == -1, t["id"]))
        labels = topic_labels(topics)
        assigned = {k: int(t) for k, t in data["assignments"].items()}
        rows = [{"id": t["id"], "label": labels[t["id"]], "size": int(t["size"]), "words": t["words"],
                 "examples": [{"citekey": k, "title": titles.get(k, "")} for k in t.get("examples", ())]}
                for t in topics]
        docs = [{"citekey": k, "title": titles.get(k, ""), "topic": assigned[k], "x": float(x), "y": float(y)}
                for k, (x, y) in ((data.get("map") or {}).get("coords") or {}).items() if k in assigned]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise UsageError(f"{where} is not a topics file this version reads ({type(err).__name__}: {err}); "
                         "run `chitragupta enrich --stages bertopic` again") from None
    return {"topics": rows, "documents": docs, "n_docs": data.get("n_docs"), "n_outliers": data.get("n_outliers"),
            "model": data.get("model"), "created": data.get("created"), "has_map": bool(docs), "file": where}


def _table(got: dict) -> str:
    from chitragupta.cli.refs_cmd import short

    real = [t for t in got["topics"] if t["id"] != -1]
    lines = [f"{len(real)} topics over {got['n_docs']} documents, {got['n_outliers']} outliers "
             f"({got['model']}, {got['file']} of {got['created']})"]
    for t in got["topics"]:
        lines.append(f"{t['id']:>5}  {t['size']:>5}  {t['label']}")
        lines += [f"{'':>14}- {short(e['title'] or e['citekey'], 100)}" for e in t["examples"]]
    return "\n".join(lines)


def run(args) -> int:
    import sys

    from chitragupta.cli._common import open_workspace
    from chitragupta.cli.refs_cmd import print_rows
    from chitragupta.engine.search.runfile import check_destination, describe, open_output
    from chitragupta.errors import UsageError

    if args.html:
        check_destination(args.html, "--html")
    got = read(open_workspace(args))
    if args.html:
        if not got["has_map"]:
            raise UsageError(f"{got['file']} holds no 2-D map (written before maps, or UMAP could not run): run "
                             "`chitragupta enrich --stages bertopic` again (its encodings are cached)")
        from chitragupta.pages import render_topics

        page = render_topics(got, title=f"Topics: {got['n_docs']} documents").encode("utf-8")
        with open_output(args.html, "--html") as out:
            out.write(page)
        if args.html == "-":
            return 0
        print(f"topics: map written to {describe(args.html)}", file=sys.stderr)
    print_rows(got["topics"], [], args.json, lambda rows: _table(got))
    return 0
