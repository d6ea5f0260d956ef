"""Reading a draft: its citations, the claim each one is asked to support, and the sentences citing nothing.

    draft = read_draft(text, "latex")          # "latex", "markdown", "text", or None: guessed
    for c in draft.cites: c.key, c.line, c.claim, draft.sentences[c.sentence].text
    [s for s in draft.sentences if not s.cited]

Citations: LaTeX ``\\cite``, ``\\citep``, ``\\citet`` (any ``\\cite...``), ``\\parencite``, ``\\textcite``,
``\\autocite``, ``\\footcite``, ``\\smartcite`` and ``\\supercite`` (capitalised too), a ``*``, up to two
``[...]`` arguments, then ``{a, b}``; pandoc ``[@a]``, ``[see @a, p. 3; -@b]``, ``@{key}`` and ``@a`` in the
running text (a key starting with a letter, never after a word character: an e-mail address or "CPU @2.45"
is none). Markdown and plain text are read for both syntaxes, LaTeX for its commands alone. The format says
what is not prose: LaTeX comments, the preamble, what follows ``\\end{document}``, display maths, verbatim,
``thebibliography``, and heading-like commands (each a sentence break, as a table row's ``\\\\`` is); Markdown
front matter, code, HTML comments, headings (a break) and everything after a References or Bibliography
heading. ``\\nocite`` cites nothing in the text.

Sentences end at ``.``, ``!`` or ``?`` (closing quotes and brackets kept) before white space and a capital,
a digit, a quote or an opening bracket, or before a command that is not a parenthetical citation; never
after an abbreviation (``et al.``, ``e.g.``, ``Fig.``) or a single capital (an initial); and at every blank
line and list item. A sentence's claim is its text with the markup out; where two or more citation groups
(a command, a bracket, a narrative ``@key``) stand in one sentence, each group's claim is its clause: the
text since the group before it, or, when that holds fewer than ``CLAUSE_WORDS`` words, the clause before
it (or after it), or the whole sentence. Line numbers are the draft's own, 1-based: a key's line is the
line its own characters are on.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["Cite", "Sentence", "Draft", "read_draft", "guess_format", "FORMATS", "CLAUSE_WORDS"]

FORMATS = ("latex", "markdown", "text")
CLAUSE_WORDS = 3  # a clause of fewer words is not a claim of its own

_LATEX = re.compile(r"\\((?:[Cc]ite[a-zA-Z]*|[Pp]arencite|[Tt]extcite|[Aa]utocite|[Ff]ootcite[a-z]*|[Ss]martcite|"
                    r"[Ss]upercite)\*?)((?:\s*\[[^\]]*\]){0,2})\s*\{([^{}]*)\}")
_BRACKET = re.compile(r"\[([^\[\]]*?(?<=[\[\s;-])-?@[^\[\]]*)\](?!\()")
_KEY = r"@(?:\{([^{}]+)\}|([\w][\w:.#$%&+?<>~/-]*[\w]|[\w]))"
_NARRATIVE = re.compile(r"(?<![\w@\\])@(?:\{([^{}]+)\}|([^\W\d][\w:.#$%&+?<>~/-]*[\w]|[^\W\d]))")
_IN_BRACKET = re.compile(r"(?:^|(?<=[\s;\-\[]))-?" + _KEY)
_ABBREV = {"al", "e.g", "i.e", "eg", "ie", "cf", "fig", "figs", "eq", "eqs", "vs", "etc", "sec", "ch", "no", "dr", "mr", "ms",
           "prof", "approx", "resp", "ref", "refs", "tab", "p", "pp", "vol", "ed", "eds", "st", "viz", "ca"}
_END = re.compile(r"[.!?][)\"'\u201d\u2019\]]*(?=\s+(?:[A-Z0-9\"'\u201c\u2018(]|\\(?!(?:cite|citep|parencite|autocite|"
                  r"footcite|supercite)\b)|@))")
_BREAK = re.compile(r"\n[ \t]*\n|\n[ \t]*(?:[-*+]|\d+[.)])[ \t]+")
_MARKUP = re.compile(r"\\[a-zA-Z@]+\*?|\\([%$&#_{}])|\\.|\$[^$]*\$|[{}~]|\*\*?|__|`|<[^>]*>|\[([^\]]*)\]\([^)]*\)|https?://\S+")
_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True)
class Cite:
    """One citation of one key: ``line`` (1-based) and ``start``/``end`` (offsets of the whole command or
    bracket in the draft), ``sentence`` (its index in ``Draft.sentences``) and ``claim`` (the clause it is to
    support, markup removed)."""

    key: str
    line: int
    start: int
    end: int
    sentence: int
    claim: str


@dataclass(frozen=True)
class Sentence:
    """A sentence of the draft's prose: ``text`` (as written, white space folded), ``claim`` (markup and
    citations removed), ``line`` (where it starts), ``start``/``end`` offsets, ``cited`` (holds a citation)."""

    text: str
    claim: str
    line: int
    start: int
    end: int
    cited: bool


@dataclass(frozen=True)
class Draft:
    format: str
    cites: list[Cite]
    sentences: list[Sentence]


_EXTENSIONS = {"tex": "latex", "ltx": "latex", "md": "markdown", "markdown": "markdown", "qmd": "markdown",
               "rmd": "markdown", "txt": "text"}


def guess_format(text: str, name: str | None = None) -> str:
    """The format by the file name's extension, else by what the text holds."""
    got = _EXTENSIONS.get(name.rsplit(".", 1)[-1].lower()) if name and "." in name else None
    if got is None and ("\\begin{document}" in text or _LATEX.search(text)):
        return "latex"
    return got or ("markdown" if _BRACKET.search(text) or re.search(r"^#{1,6} ", text, re.M) else "text")


def _blank(mask: list[str], start: int, end: int, brk: bool = False) -> None:
    """Replace ``[start, end)`` of the mask by spaces (newlines kept); ``brk``: a sentence break there."""
    for i in range(start, end):
        if mask[i] != "\n":
            mask[i] = " "
    if brk and end - start >= 2:
        mask[start], mask[start + 1] = "\n", "\n"


def _mask(text: str, fmt: str) -> str:
    """``text`` with what is not prose blanked (same length, so offsets and lines hold)."""
    mask = list(text)
    if fmt == "latex":
        begin = text.find("\\begin{document}")
        if begin >= 0:
            _blank(mask, 0, begin + len("\\begin{document}"))
        end = text.find("\\end{document}")
        if end >= 0:
            _blank(mask, end, len(text))
        for m in re.finditer(r"(?<!\\)%[^\n]*", text):
            _blank(mask, m.start(), m.end())
        for m in re.finditer(r"\\begin\{(equation|align|gather|multline|eqnarray|displaymath|thebibliography|"
                             r"verbatim|lstlisting)(\*?)\}.*?\\end\{\1\2\}|\$\$.*?\$\$|\\\[.*?\\\]|\\\\", text, re.S):
            _blank(mask, m.start(), m.end(), brk=True)
        for m in re.finditer(r"\\(?:part|chapter|(?:sub)*section|paragraph|title|author|date|label|begin|end|"
                             r"bibliography|bibliographystyle|nocite|ref|eqref|includegraphics|usepackage|"
                             r"documentclass)\*?(?:\[[^\]]*\])?\{(?:[^{}]|\{[^{}]*\})*\}(?:\[[^\]]*\]|\{[^{}]*\})*|"
                             r"\\(?:item|caption|maketitle)\b", text):
            _blank(mask, m.start(), m.end(), brk=not m.group().startswith(("\\ref", "\\eqref", "\\label")))
    elif fmt == "markdown":
        front = re.match(r"---\n.*?\n(?:---|\.\.\.)\n", text, re.S)
        if front:
            _blank(mask, 0, front.end())
        for m in re.finditer(r"^(```|~~~).*?^\1[^\n]*$|<!--.*?-->|`[^`\n]+`", text, re.S | re.M):
            _blank(mask, m.start(), m.end(), brk=m.group().startswith(("```", "~~~")))
        for m in re.finditer(r"^#{1,6}[ \t][^\n]*|^::: *\{#refs\}[^\n]*", text, re.M):
            if re.match(r"#{1,6}\s+(references|bibliography|works cited)\s*$|:::", m.group(), re.I):
                _blank(mask, m.start(), len(text))
                break
            _blank(mask, m.start(), m.end(), brk=True)
    return "".join(mask)


def _groups(mask: str, fmt: str) -> list[tuple[int, int, list[tuple[str, int]]]]:
    """Every citation group as (start, end, [(key, offset of the key)]), in order; pandoc's only outside LaTeX."""
    out = []
    for m in _LATEX.finditer(mask):
        keys, at = [], m.start(3)
        for part in m.group(3).split(","):
            k = part.strip()
            if k:
                keys.append((k, at + part.index(k)))
            at += len(part) + 1
        if keys:
            out.append((m.start(), m.end(), keys))
    if fmt == "latex":
        return out
    taken = [(s, e) for s, e, _ in out]
    for m in _BRACKET.finditer(mask):
        keys = [(km.group(1) or km.group(2), m.start(1) + km.start(1 if km.group(1) else 2))
                for km in _IN_BRACKET.finditer(m.group(1))]
        if keys:
            out.append((m.start(), m.end(), keys))
            taken.append((m.start(), m.end()))
    for m in _NARRATIVE.finditer(mask):
        if not any(s <= m.start() < e for s, e in taken):
            out.append((m.start(), m.end(), [(m.group(1) or m.group(2), m.start(1 if m.group(1) else 2))]))
    return sorted(out)


def _spans(mask: str) -> list[tuple[int, int]]:
    """Sentence spans of the masked text: broken at blank lines, list items and sentence ends."""
    cuts = {0, len(mask)}
    cuts.update(m.start() + 1 for m in _BREAK.finditer(mask))
    for m in _END.finditer(mask):
        before = mask[max(0, m.start() - 24):m.start()].split()
        word = before[-1].lstrip("([{") if before else ""
        if mask[m.start()] == "." and (word.lower() in _ABBREV or re.fullmatch(r"[A-Z]", word)):
            continue
        cuts.add(m.end())
    bounds = sorted(cuts)
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if mask[a:b].strip()]


def _clean(s: str) -> str:
    """Prose without markup: white space folded, no space before punctuation, no list marker or leading
    punctuation."""
    s = " ".join(_MARKUP.sub(lambda m: m.group(1) or m.group(2) or " ", s).split())
    return re.sub(r"^(?:(?:[-*+]|\d+[.)])\s+|[,;:.]\s*)", "", re.sub(r"\s+([.,;:!?)])", r"\1", s))


def _words(s: str) -> int:
    return len(_WORD.findall(s))


def read_draft(text: str, fmt: str | None = None, name: str | None = None) -> Draft:
    """The draft's citations and sentences (module docstring). ``fmt``: one of ``FORMATS``, or None to
    guess it from ``name`` and the text."""
    fmt = fmt or guess_format(text, name)
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}; allowed: {', '.join(FORMATS)}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    mask = _mask(text, fmt)
    newlines = [i for i, c in enumerate(text) if c == "\n"]
    groups = _groups(mask, fmt)
    cites, sentences, g = [], [], 0
    for a, b in _spans(mask):
        inside = []
        while g < len(groups) and groups[g][0] < b:
            if groups[g][0] >= a:
                inside.append(groups[g])
            g += 1
        lo = a + len(mask[a:b]) - len(mask[a:b].lstrip())
        hi = a + len(mask[a:b].rstrip())
        raw, at = [], lo
        for s, e, _keys in inside:
            raw.append(mask[at:s])
            at = e
        raw.append(mask[at:hi])
        pieces, whole = [_clean(r) for r in raw], _clean(" ".join(raw))
        if not whole and not inside:
            continue
        index = len(sentences)
        sentences.append(Sentence(" ".join(mask[lo:hi].split()), whole, bisect_right(newlines, lo - 1) + 1, lo, hi,
                                  bool(inside)))
        for j, (s, e, keys) in enumerate(inside):
            claim = whole
            if len(inside) > 1:
                order = [pieces[j], *reversed(pieces[:j]), *pieces[j + 1:]]
                claim = next((p for p in order if _words(p) >= CLAUSE_WORDS), whole)
            for key, off in keys:
                cites.append(Cite(key, bisect_right(newlines, off - 1) + 1, s, e, index, claim))
    return Draft(fmt, cites, sentences)
