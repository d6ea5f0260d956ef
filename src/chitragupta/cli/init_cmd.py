"""``chitragupta init``: create a workspace with a commented config.toml."""

from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--force", action="store_true", help="overwrite an existing config.toml")


def run(args) -> int:
    from pathlib import Path

    from chitragupta.engine.library.config import defaults_text
    from chitragupta.engine.search.expand import STARTER
    from chitragupta.engine.library.workspace import CONFIG_NAME, atomic_write_text
    from chitragupta.errors import UsageError, WorkspaceError

    root = Path(args.workspace).expanduser()
    cfg = root / CONFIG_NAME
    acr = root / "content" / "acronyms.toml"
    for folder in (root, root / "papers", root / "content", root / "content" / "parsed"):
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{folder} is not a folder; name a folder for the workspace (or move that file away)")
    if cfg.exists() and not args.force:
        raise UsageError(f"{cfg} exists; pass --force to overwrite it")
    try:
        (root / "papers").mkdir(parents=True, exist_ok=True)
        (root / "content" / "parsed").mkdir(parents=True, exist_ok=True)
        atomic_write_text(cfg, defaults_text())
        if not acr.exists():
            atomic_write_text(acr, STARTER)
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        raise WorkspaceError(f"cannot create the workspace at {root}: {err.strerror or err}{where}") from None
    import shlex

    here = args.workspace == "."
    w = "" if here else f" -w {shlex.quote(args.workspace)}"
    bib = Path("papers") / "bibliography.bib" if here else Path(args.workspace) / "papers" / "bibliography.bib"
    print(f"workspace ready at {root.resolve()}: put your BibTeX at {bib}, "
          f"then run `chitragupta sync{w}` and `chitragupta index{w}`")
    return 0
