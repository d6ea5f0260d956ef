"""engine/library/parsers.py: what a parser refuses before it opens anything."""

from __future__ import annotations

import os

import pytest
from chitragupta.engine.library.parsers import ParseError, parse

from helpers import deadline


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_parsers_never_open_a_fifo(tmp_path):
    fifo = tmp_path / "x.pdf"
    os.mkfifo(fifo)
    from chitragupta.engine.library.docling_convert import detect_format

    with deadline(10):
        for backend in ("pdftotext", "docling"):
            with pytest.raises(ParseError, match=r"is a pipe \(FIFO\)"):
                parse(fifo, backend)
        assert detect_format(fifo) is None
