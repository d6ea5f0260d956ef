"""The citation graph's page (``graph --format html``) opened in headless Chromium: size, the command's
cost, and the time until the page's scripts are done.

    python -m bench pages [--sources 2000 10] [--entries 40] [--opens 5]

For each size, a synthetic library written as ``refs_graph``'s is (``--sources`` full-text sources, each
1,000 words of text -- fewer, and the reference cut takes the list for the body -- and a numbered reference
list of ``--entries`` entries, a quarter citing other sources of the library by title, the rest drawn from a
Zipf-distributed pool of outside works), imported and indexed in a temporary workspace; then
``chitragupta graph --format html --out FILE`` runs as a child process (wall and CPU seconds: the graph
read back, the layout, the page written; the layout is also timed alone in this process), and the page is
opened ``--opens`` times in one headless Chromium (``tools/browser.py``: network off), each time a new
navigation: ``ready_ms`` is the page's own ``performance.now()`` when its scripts were done (decoding,
inflating and parsing the data, the lists built, the first paint), ``wall_s`` the time from the navigation
command to seeing it. Reported: the median and the worst of each, node and citation counts, the page's
bytes, and whether the page made a request or logged an error. JSON on stdout. The host's load average
is printed with each size: on a shared host the browser's times stretch with it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from bench.refs_graph import _authors, _entry, _title
from bench.timer import run_timed, stopwatch


def library(n: int, n_entries: int, words: int = 1000, seed: int = 0) -> list[dict]:
    """``n`` corpus.jsonl records with reference lists, as ``refs_graph.synthetic`` draws them."""
    rng = random.Random(seed)
    lib = [(f"s{i:05d}", _title(rng), rng.randint(1995, 2024), _authors(rng)) for i in range(n)]
    pool = [(_title(rng), rng.randint(1970, 2024), _authors(rng)) for _ in range(n * 8)]
    weights = [1.0 / (r + 1) for r in range(len(pool))]
    vocab = ["".join(rng.choice("aeioubdfgklmnprstv") for _ in range(rng.randint(3, 8))) for _ in range(3000)]
    out = []
    for key, title, year, authors in lib:
        cited = [lib[c] for c in rng.sample(range(n), k=min(n - 1, n_entries // 4)) if lib[c][0] != key]
        outside = [pool[p] for p in rng.choices(range(len(pool)), weights=weights, k=n_entries - len(cited))]
        items = [(t, y, a) for _k, t, y, a in cited] + outside
        rng.shuffle(items)
        refs = "\n".join(f"[{i + 1}] {_entry(rng, t, y, a)}" for i, (t, y, a) in enumerate(items))
        out.append({"_id": key, "title": title, "text": " ".join(rng.choices(vocab, k=words)) +
                    "\n\nReferences\n\n" + refs + "\n", "metadata": {"year": year, "authors": authors}})
    return out


def measure(n: int, n_entries: int, opens: int) -> dict:
    from chitragupta.pages import layout
    from tools.browser import Chromium

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        corpus = Path(tmp) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in library(n, n_entries)), encoding="utf-8")
        cli = [sys.executable, "-m", "chitragupta.cli.main"]
        run_timed(cli + ["import", str(corpus), "-w", str(root)])
        run_timed(cli + ["index", "-w", str(root)])
        page = Path(tmp) / "graph.html"
        run_timed(cli + ["graph", "-w", str(root), "--format", "json", "--out", str(Path(tmp) / "g.json")])
        took = run_timed(cli + ["graph", "-w", str(root), "--format", "html", "--out", str(page)])
        g = json.loads((Path(tmp) / "g.json").read_text(encoding="utf-8"))
        at = {nd["id"]: i for i, nd in enumerate(g["nodes"])}
        with stopwatch() as t_layout:  # the layout alone, in this process, as render_graph computes it
            layout(len(g["nodes"]), [(at[e["source"]], at[e["target"]]) for e in g["edges"]])
        ready, walls, errors, requests = [], [], [], set()
        with Chromium() as b:
            for _ in range(opens):
                got = b.open(page)
                ready.append(int(got["ready"]))
                walls.append(got["wall_s"])
                errors += b.errors
                requests |= {u for u in b.requests if not u.startswith("file:")}
            drawn = b.evaluate("['sources', 'missing'].map((k) => Number(document.getElementById('canvas').dataset[k]))")
        return {"sources": n, "entries_per_source": n_entries,
                "nodes": len(g["nodes"]), "missing_nodes": sum(nd["kind"] == "missing" for nd in g["nodes"]),
                "citations": len(g["edges"]), "json_bytes": (Path(tmp) / "g.json").stat().st_size,
                "page_bytes": page.stat().st_size, "graph_html_wall_s": took["wall_s"],
                "graph_html_cpu_s": took["cpu_s"], "layout_s": t_layout.wall, "layout_cpu_s": t_layout.cpu,
                "ready_ms_median": statistics.median(ready),
                "ready_ms_max": max(ready), "open_wall_s_median": statistics.median(walls),
                "open_wall_s_max": max(walls), "opens": opens, "drawn_on_open": drawn,
                "errors": errors, "requests_leaving_the_file": sorted(requests), "load_average": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench pages", description=__doc__.split("\n")[0])
    ap.add_argument("--sources", type=int, nargs="+", default=[2000, 10])
    ap.add_argument("--entries", type=int, default=40)
    ap.add_argument("--opens", type=int, default=5)
    args = ap.parse_args(argv)
    out = []
    for n in args.sources:
        r = measure(n, args.entries, args.opens)
        out.append(r)
        print(f"{n} sources: {r['nodes']} nodes ({r['missing_nodes']} missing works), {r['citations']} citations; "
              f"page {r['page_bytes'] / 1e6:.2f} MB (JSON {r['json_bytes'] / 1e6:.2f} MB); graph --format html "
              f"{r['graph_html_wall_s']:.2f} s wall ({r['graph_html_cpu_s']:.2f} CPU; the layout {r['layout_cpu_s']:.2f}); "
              f"scripts done after "
              f"{r['ready_ms_median']:.0f} ms (worst {r['ready_ms_max']} of {r['opens']}); "
              f"{len(r['errors'])} errors, {len(r['requests_leaving_the_file'])} requests; load average "
              f"{r['load_average']:.1f}", file=sys.stderr)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
