"""``chitragupta enrich`` as one use case: the optional stages (docling, embed, bertopic) run in their
order, their chunks encoded here or on a Ray cluster (``ray``: "auto" or an address; None: the configured
``[enrich].ray_address``; empty: here).

    from chitragupta.service.enrich import enrich
    enrich("my-review", "embed,bertopic", echo=print)
"""

from __future__ import annotations

from typing import Callable

__all__ = ["enrich"]


def enrich(workspace, stages: str, *, device: str | None = None, ray: str | None = None,
           echo: Callable[[str], None] | None = None, progress: Callable | None = None, config=None) -> list[str]:
    """Run ``stages`` (comma-separated; an unknown one is refused before the workspace is touched). ``echo``
    takes each line a stage reports (all of them are returned too); ``progress(desc, unit)`` gives a context
    manager yielding a ``(done, total)`` callback."""
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.enrich.run import parse_stages, run as run_pipeline
    from chitragupta.errors import UsageError

    names = parse_stages(stages)
    ws = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace, config)
    address = ray if ray is not None else ws.config.enrich.ray_address
    encode_stream = None
    if address:
        if "embed" not in names and "bertopic" not in names:
            raise UsageError("--ray (or [enrich].ray_address) applies to the embed and bertopic stages; add one "
                             "of them to --stages")
        from chitragupta.enrich.ray_encode import RayEncodeStream

        # the actors get the device asked for ("auto": each actor resolves it on its own node)
        encode_stream = RayEncodeStream(ws.config.enrich, address, device=device or ws.config.enrich.device)
    return run_pipeline(ws, names, device=device, echo=echo, progress=progress,
                 encode_stream=encode_stream)
