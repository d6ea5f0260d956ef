"""``python -m enrich [--stages docling,embed,bertopic] [-w DIR]``: the same as ``chitragupta enrich``."""

import sys

from engine.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["enrich", *sys.argv[1:]]))
