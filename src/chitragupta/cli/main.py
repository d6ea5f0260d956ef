"""``chitragupta``: the command line. One small module per subcommand, each importing its implementation
inside ``run``, so ``--help`` is instant."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

__all__ = ["main", "build_parser", "COMMANDS"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("chitragupta.cli.init_cmd", "create a workspace: papers/, content/ and a commented config.toml"),
    "sync": ("chitragupta.cli.sync_cmd", "read papers/bibliography.bib, parse what changed, update the ledger"),
    "import": ("chitragupta.cli.import_cmd", "import a BEIR-style corpus.jsonl as the workspace's sources"),
    "index": ("chitragupta.cli.index_cmd", "build or update the BM25 index"),
    "search": ("chitragupta.cli.search_cmd", "search the workspace (one query, or a batch to a TREC run file)"),
    "similar": ("chitragupta.cli.similar_cmd", "papers like this one: the sources most like a citekey (any engine)"),
    "refs": ("chitragupta.cli.refs_cmd", "a source's reference list: its entries and the citekeys they resolve to"),
    "cites": ("chitragupta.cli.cites_cmd", "the library sources a source cites, with the entries as evidence"),
    "cited-by": ("chitragupta.cli.cited_by_cmd", "the library sources that cite a source (search's filters apply)"),
    "missing": ("chitragupta.cli.missing_cmd", "works several sources cite that the library lacks (--bib: BibTeX)"),
    "graph": ("chitragupta.cli.graph_cmd", "the whole citation graph as JSON, GraphML, DOT or a page (html)"),
    "topics": ("chitragupta.cli.topics_cmd", "the topics `enrich` found: labels, sizes, titles (--html: a map)"),
    "check": ("chitragupta.cli.check_cmd", "check a draft's citations against the library: support, evidence, what to cite"),
    "evidence": ("chitragupta.cli.evidence_cmd", "one document's passages that bear on a query"),
    "explain": ("chitragupta.cli.explain_cmd", "each query term's tf, idf and share of one document's BM25 score"),
    "eval": ("chitragupta.cli.eval_cmd", "score a TREC run against qrels (BEIR TSV or TREC) with ir-measures"),
    "sweep": ("chitragupta.cli.sweep_cmd", "score a k1 x b grid on your queries and qrels: table, CSV, heat map"),
    "enrich": ("chitragupta.cli.enrich_cmd", "optional enrichment: --stages docling,embed,bertopic (the enrich extra)"),
    "serve": ("chitragupta.cli.serve_cmd", "an MCP server over stdio keeping the engines warm (the serve extra)"),
    "demo": ("chitragupta.cli.demo_cmd", "build a workspace from the built-in sample corpus and search it"),
}


def common_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("workspace")
    g.add_argument("--workspace", "-w", metavar="DIR", default=".", help="the workspace folder (default: .)")
    g.add_argument("--config", metavar="FILE", default=None,
                   help="config file (default: DIR/config.toml if present, else the packaged defaults)")
    g.add_argument("--verbose", "-v", action="store_true", help="log at info level on stderr")
    return p


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. ``only``: a command name whose options alone are added (the others are
    listed with their help, without importing their modules): what ``main`` parses a command with, so
    ``index`` does not import what ``search`` needs to describe its options."""
    parser = argparse.ArgumentParser(
        prog="chitragupta",
        description="Citable retrieval over a BibTeX bibliography: BM25 over documents, with snippets.",
    )
    parser.add_argument("--version", action="version", version="chitragupta 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parent = common_options()
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[parent])
        if only is None or name == only:
            importlib.import_module(module).add_arguments(p)
    return parser


_ONE_QUERY = {"search", "evidence", "explain", "serve"}
_NO_BLAS = {"index"}  # builds with sorts and counts: never a BLAS call


def _one_blas_thread(argv: list[str]) -> None:
    """A command that answers one query at a time runs numpy's BLAS on one thread: a second thread buys
    nothing at that size, and OpenBLAS starting its threads when numpy is imported cost 0.13 s of CPU,
    a third of a cold query (bench/RESULTS.md). ``index`` too, which calls no BLAS at all (its threads'
    start cost 0.06-0.16 s of an NPL-sized build's wall time on a loaded 2-core host). Only before numpy
    is imported, and never over a user's own OPENBLAS_NUM_THREADS; a batch (``--queries``) keeps every
    thread."""
    import os

    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    command = next((a for a in argv if not a.startswith("-")), None)
    if (command in _ONE_QUERY and "--queries" not in argv) or command in _NO_BLAS:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    _one_blas_thread(given)
    # the top level takes no option with a value: its first word that is not an option names the command
    command = next((a for a in given if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args, extra = parser.parse_known_args(argv)
    if extra:
        _dashed_query(parser, args, extra)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="[%(levelname)s] %(name)s: %(message)s")
    said = logging.getLogger("chitragupta.progress")  # what a first run is about to spend time on: always told
    if not said.handlers:
        told = logging.StreamHandler(sys.stderr)
        told.setFormatter(logging.Formatter("[note] %(message)s"))
        said.addHandler(told)
    said.setLevel(logging.INFO)
    said.propagate = False
    from chitragupta.errors import ChitraguptaError

    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        rc = int(module.run(args) or 0)
        if sys.stdout is not None:  # None: started with stdout closed (>&-); what needed it said so
            sys.stdout.flush()  # a full disk under stdout fails here, inside the handlers below
        return rc
    except ChitraguptaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:
        import errno

        if err.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise
        _drop_stdout()
        print(f"error: cannot write the output: {err.strerror or err}", file=sys.stderr)
        return 1


def _dashed_query(parser, args, extra: list[str]) -> None:
    """A query that starts with "-" (``search "-word"``, ``evidence KEY -word``) is not an option: argparse
    leaves it over, and it is taken as the query where the command's query is still missing; anything else
    left over is the usual error."""
    words = getattr(args, "words", None)
    query_slot = "query" if getattr(args, "query", False) is None else "words" if words is not None else None
    if query_slot is None or not all(a[:1] == "-" and a[1:2] not in ("-", "") for a in extra):
        parser.error("unrecognized arguments: " + " ".join(extra))
    if query_slot == "query":
        args.query = " ".join(extra)
    else:
        words += extra


def _drop_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush of what could not be written is silent."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
