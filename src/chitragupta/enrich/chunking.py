"""What the embed and topic stages read for one document, and how it is cut into overlapping chunks.

    document_text(ws, citekey, parsed_path) -> str     the text BM25 indexes after the row's title:
                                                       chitragupta.engine.index.source.row_body (the
                                                       reference cut, the appendix rule, the hyphen join)
    chunker = token_chunker(folder, max_seq_length, passage_prefix)   # the model's own tokenizer
    chunker.spans(text, title) -> [(start, end), ...]  chunks that fit the model's window (the rule both
                                                       stages use when the model folder has a tokenizer)
    chunk_spans(text, words=200, overlap=40) -> [(start, end), ...]   the spec's word rule (kept for a
                                                       model without a tokenizer the chunker can read)

One text path: whether a row's text came from pdftotext, docling (a sidecar) or a JSONL import, the chunks
that are embedded and the documents topics see are cut from the very string the document index tokenizes
and the snippets quote. The docling stage's Markdown (``content/docling/<name>.md``) is not read here.

The model's rule (``TokenChunker``): the encoder reads at most ``max_seq_length`` word pieces, special
tokens ([CLS], [SEP]) included, and the string it reads for a chunk is ``passage_prefix + title + newline
+ chunk`` (``chitragupta.enrich.stream.encode_input``). So a document's chunks get the window less the
special tokens, the prefix and the title (at least ``MIN_CHUNK_TOKENS``), counted with the model's own
fast tokenizer (``tokenizer.json``, read by the ``tokenizers`` package; else ``transformers``' fast
tokenizer of the folder). A chunk ends at the end of a whitespace word (a word longer than the whole budget
is cut between two of its word pieces); the next one starts at the first whole word among the last
``CHUNK_OVERLAP_TOKENS`` word pieces of the one before (so consecutive chunks share at most that many word
pieces, and always move on). Every chunk is checked by encoding its full input once more, and shortened
until it fits, so no chunk is truncated by the model unless its title alone leaves less than
``MIN_CHUNK_TOKENS`` (then the chunk keeps that many and the model cuts its end). The rule goes into the
store's recipe (``TokenChunker.rule``): a store cut by the word rule is rebuilt once, with a note.

The word rule (``chunk_spans``): a chunk is ``words`` whitespace-separated words; consecutive chunks share
``overlap`` words, so the step is ``words - overlap``. With all-MiniLM-L6-v2 (256 word pieces) 200 words
overflowed the window on 46% of scifact's chunks, so it is used only where no tokenizer can be read.

Offsets are kept so a hit's snippet is cut from the very text that was encoded. Nothing here imports the
enrich extra at module level (``tokenizers`` is imported when a chunker is first built).
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

from chitragupta.engine.index.source import row_body
from chitragupta.engine.library.workspace import Workspace, safe_name

__all__ = ["chunk_spans", "document_text", "docling_name", "docling_paths", "CHUNK_WORDS", "CHUNK_OVERLAP",
           "TokenChunker", "token_chunker", "load_tokenizer", "CHUNK_OVERLAP_TOKENS", "MIN_CHUNK_TOKENS"]

CHUNK_WORDS = 200  # words per chunk, the spec's rule (the embed and topic stages cut with these)
CHUNK_OVERLAP = 40  # words a chunk shares with the one before it

CHUNK_OVERLAP_TOKENS = 32  # word pieces a token chunk may share with the one before it (whole words only)
MIN_CHUNK_TOKENS = 64  # a chunk's budget when the title leaves less than this of the window

_WORD = re.compile(r"\S+")


def chunk_spans(text: str, words: int = CHUNK_WORDS, overlap: int = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of ``words``-word chunks of ``text`` overlapping by ``overlap`` words.

    The first chunk starts at the first word, each next one ``words - overlap`` words later, and the last
    one is the first that reaches the final word (so no word is left out and no chunk lies wholly inside
    its predecessor). ``end`` is the end of a chunk's last word; ``text[start:end]`` is the chunk. Empty
    or all-whitespace text gives ``[]``.
    """
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"words must be an integer >= 1, got {words!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < words:
        raise ValueError(f"overlap must be an integer with 0 <= overlap < words ({words}), got {overlap!r}")
    bounds = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    n = len(bounds)
    spans: list[tuple[int, int]] = []
    step = words - overlap
    first = 0
    while first < n:
        last = min(first + words, n) - 1
        spans.append((bounds[first][0], bounds[last][1]))
        if last == n - 1:
            break
        first += step
    return spans


def load_tokenizer(folder):
    """The fast (Rust) tokenizer of a model folder, with its own truncation and padding switched off (the
    default model's ``tokenizer.json`` truncates at 128); None when the folder has none that loads."""
    folder = Path(folder)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        Tokenizer = None
    tok = None
    if Tokenizer is not None and (folder / "tokenizer.json").is_file():
        try:
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception:  # a file this version of tokenizers does not read
            tok = None
    if tok is None:
        try:
            from transformers import AutoTokenizer

            fast = AutoTokenizer.from_pretrained(str(folder), use_fast=True, local_files_only=True)
            tok = getattr(fast, "backend_tokenizer", None)
        except Exception:  # no tokenizer files, or transformers not installed
            return None
    if tok is None:
        return None
    tok.no_truncation()
    tok.no_padding()
    return tok


class TokenChunker:
    """Chunks that fit a model's window, counted with its own tokenizer (the rule in the module's text).

    ``tokenizer``: a ``tokenizers.Tokenizer`` (truncation off); ``max_seq_length``: the model's window in
    word pieces, special tokens included; ``passage_prefix``: what the encoder puts before every chunk.
    """

    def __init__(self, tokenizer, max_seq_length: int, passage_prefix: str = "",
                 overlap: int = CHUNK_OVERLAP_TOKENS, min_tokens: int = MIN_CHUNK_TOKENS):
        if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or max_seq_length < 8:
            raise ValueError(f"max_seq_length must be an integer >= 8, got {max_seq_length!r}")
        self.tok = tokenizer
        self.max_seq_length = max_seq_length
        self.passage_prefix = passage_prefix
        self.specials = len(tokenizer.encode("", add_special_tokens=True).ids)
        self.window = max_seq_length - self.specials  # word pieces of input the model reads
        self.min_tokens = max(1, min(min_tokens, self.window))
        if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < self.min_tokens:
            raise ValueError(f"overlap must be an integer with 0 <= overlap < {self.min_tokens}, got {overlap!r}")
        self.overlap = overlap

    @property
    def rule(self) -> dict:
        """The chunking rule as the store's recipe records it."""
        return {"unit": "model word pieces", "window": self.window, "overlap_tokens": self.overlap,
                "min_chunk_tokens": self.min_tokens, "cut": "whole words"}

    def count(self, text: str) -> int:
        """Word pieces of ``text`` as the model reads it, special tokens included."""
        return len(self.tok.encode(text, add_special_tokens=True).ids)

    def input_tokens(self, title: str, chunk: str) -> int:
        """Word pieces of the full encoder input of ``chunk`` under ``title`` (prefix and specials included)."""
        title = " ".join(title.split())
        return self.count(self.passage_prefix + (f"{title}\n{chunk}" if title else chunk))

    def _head_tokens(self, title: str) -> int:
        head = self.passage_prefix + " ".join(title.split())
        return len(self.tok.encode(head, add_special_tokens=False).ids) if head.strip() else 0

    def budget(self, title: str = "") -> int:
        """Word pieces left to a chunk of a document titled ``title`` (at least ``min_tokens``)."""
        return max(self.min_tokens, self.window - self._head_tokens(title))

    def spans(self, text: str, title: str = "") -> list[tuple[int, int]]:
        """Character spans ``(start, end)`` of ``text``'s chunks under ``title``; ``[]`` for blank text."""
        offs = [(a, b) for a, b in self.tok.encode(text, add_special_tokens=False).offsets if b > a]
        if not offs:  # nothing the model reads (all dropped by its normaliser): one chunk, as the text is
            words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
            return [(words[0][0], words[-1][1])] if words else []
        word_starts = [m.start() for m in _WORD.finditer(text)]
        word = [bisect.bisect_right(word_starts, a) - 1 for a, _ in offs]  # the whitespace word of each piece
        n = len(offs)
        room = self.window - self._head_tokens(title)
        budget, checked = max(self.min_tokens, room), room >= self.min_tokens
        out: list[tuple[int, int]] = []
        s = 0
        while s < n:
            e = min(s + budget, n)
            if e < n and word[e] == word[e - 1]:  # would cut a word: end before it, unless it is all there is
                back = e
                while back > s and word[back - 1] == word[e]:
                    back -= 1
                if back > s:
                    e = back
            while checked and e - s > 1 and \
                    self.input_tokens(title, text[offs[s][0]:offs[e - 1][1]]) > self.max_seq_length:
                e -= 1  # a piece of a cut word can tokenise longer on its own: shorten until it fits
            out.append((offs[s][0], offs[e - 1][1]))
            if e == n:
                break
            nxt = max(s + 1, e - self.overlap)
            while nxt < e and word[nxt] == word[nxt - 1]:
                nxt += 1  # start at a whole word (less overlap rather than half a word)
            s = nxt
        return out


_CHUNKERS: dict[tuple, TokenChunker | None] = {}


def token_chunker(folder, max_seq_length: int | None, passage_prefix: str = "") -> TokenChunker | None:
    """The model's chunker for a model folder (its tokenizer loaded once per process); None when the
    window is unknown or the folder has no tokenizer that loads (the word rule is used then)."""
    if max_seq_length is None or folder is None or not Path(folder).is_dir():
        return None
    key = (str(Path(folder).resolve()), int(max_seq_length), passage_prefix)
    if key not in _CHUNKERS:
        tok = load_tokenizer(folder)
        _CHUNKERS[key] = TokenChunker(tok, int(max_seq_length), passage_prefix) if tok is not None else None
    return _CHUNKERS[key]


def docling_name(citekey: str, parsed_path: str | None) -> str:
    """The file-name stem the docling stage uses for a row: the parsed file's stem (sync assigns it
    collision-free), else ``safe_name(citekey)``."""
    if parsed_path:
        stem = Path(parsed_path).name
        if stem.endswith(".txt"):
            return stem[:-4]
    return safe_name(citekey)


def docling_paths(ws: Workspace, citekey: str, parsed_path: str | None) -> tuple[Path, Path]:
    """``(content/docling/<name>.md, content/docling/<name>.json)``, checked to stay inside content/."""
    name = docling_name(citekey, parsed_path)
    folder = ws.content / "docling"
    return ws.inside_content(folder / f"{name}.md"), ws.inside_content(folder / f"{name}.json")


def document_text(ws: Workspace, citekey: str, parsed_path: str | None) -> str:
    """The text the embed (and topic) stage reads for one ledger row: exactly the text the document index
    reads after the row's title (``chitragupta.engine.index.source.row_body``: its reference span cut,
    appendices kept, line-end hyphens joined); "" when the row has no text on disk. ``citekey`` is unused:
    the parsed path names the file."""
    return row_body(ws.root, parsed_path).text
