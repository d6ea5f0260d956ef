"""``chitragupta init``: create a workspace with a commented config.toml."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="overwrite an existing config.toml")


def run(args) -> int:
    from pathlib import Path

    from chitragupta.engine.config import defaults_text
    from chitragupta.errors import UsageError
    from chitragupta.engine.workspace import CONFIG_NAME, atomic_write_text

    root = Path(args.workspace).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    (root / "papers").mkdir(exist_ok=True)
    (root / "content" / "parsed").mkdir(parents=True, exist_ok=True)
    cfg = root / CONFIG_NAME
    if cfg.exists() and not args.force:
        raise UsageError(f"{cfg} exists; pass --force to overwrite it")
    atomic_write_text(cfg, defaults_text())
    from chitragupta.engine.expand import STARTER

    acr = root / "content" / "acronyms.toml"
    if not acr.exists():
        atomic_write_text(acr, STARTER)
    print(f"workspace ready at {root.resolve()}: put your BibTeX at papers/bibliography.bib, "
          "then run `chitragupta sync` and `chitragupta index`")
    return 0
