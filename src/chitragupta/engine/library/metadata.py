"""A source's bibliographic metadata: the rules that read it, and the values a filter compares.

What the ledger keeps per source (schema 3), from BibTeX (``bibtex.py``) or a JSONL record (``jsonl.py``):

- ``authors``: display strings, as the source writes each name (LaTeX-decoded for BibTeX), ``others``
  kept; ``author_names``: the same names as (family, given) pairs, ``others`` left out. A name is split
  as BibTeX splits it (``split_name``): ``von Last, First``, ``von Last, Jr, First`` or ``First von
  Last``, on commas and white space outside braces; the family name holds the ``von`` part
  (``van der Berg``) and a ``Jr`` part is kept after the given names (``John, Jr.``).
- ``year``: an integer (``year_of``): a value of at most four digits (``-350``, ``1999``), else the first
  four-digit run of the text (``2020a``, ``2019/2020``, a biblatex date ``2019-05-01``); anything else
  (``19x5``, ``in press``) is no year, with a note naming the source and the field.
- ``keywords``: a list of strings.
- ``venue``: where the work appeared: ``journal`` (biblatex ``journaltitle``), else ``booktitle``, else,
  for a thesis or report (``phdthesis``, ``mastersthesis``, ``thesis``, ``techreport``, ``report``), the
  ``school`` or ``institution`` that issued it, else its ``publisher`` (``VENUE_FIELDS``). A book's
  publisher is not its venue.
- ``type``: the BibTeX entry type, lower case (``article``, ``inproceedings``).
- ``doi``: normalised (``norm_doi``): a ``https://doi.org/``, ``http://dx.doi.org/`` or ``doi:`` prefix
  dropped, percent-escapes of a URL undone, lower case; a value that is not ``10.<digits>/...`` is no DOI,
  with a note.

``facets(ledger)`` gives per source the folded values a filter compares (``fold``: case and accents).
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass

__all__ = ["split_name", "name_parts", "join_name", "split_and", "year_of", "norm_doi", "fold", "venue_of", "VENUE_FIELDS", "THESIS_TYPES",
           "Facets", "facets"]

THESIS_TYPES = frozenset({"phdthesis", "mastersthesis", "thesis", "techreport", "report"})
VENUE_FIELDS = ("journal", "journaltitle", "booktitle")  # any type; then, for THESIS_TYPES:
_ISSUER_FIELDS = ("school", "institution", "publisher")


def venue_of(entry_type: str, field) -> tuple[str | None, str | None]:
    """(the field that gives the venue, its raw value) for an entry of ``entry_type``; ``field(name)``
    returns a field's raw value or None. (None, None) when it has none."""
    names = VENUE_FIELDS + (_ISSUER_FIELDS if entry_type in THESIS_TYPES else ())
    for name in names:
        v = field(name)
        if v and v.strip():
            return name, v
    return None, None


# -- years ----------------------------------------------------------------------------------------

_SHORT_YEAR = re.compile(r"-?\d{1,4}")
_YEAR4 = re.compile(r"(?<!\d)(\d{4})(?!\d)")


def year_of(text) -> int | None:
    """The year a value gives (see the module docstring), or None. ``text``: a string, an int, or None."""
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text if -9999 <= text <= 9999 else None
    if not isinstance(text, str):
        return None
    s = text.strip()
    if _SHORT_YEAR.fullmatch(s):
        return int(s)
    m = _YEAR4.search(s)
    return int(m.group(1)) if m else None


# -- DOIs -----------------------------------------------------------------------------------------

_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_DOI = re.compile(r"10\.\d{3,}(?:\.\d+)*/\S+")
_TEX_ESCAPE = re.compile(r"\\([_%&#$])")


def norm_doi(value) -> str | None:
    """A DOI as the ledger keeps it (see the module docstring), or None when ``value`` is not one.
    BibTeX escapes (``\\_``) and braces are undone."""
    if not isinstance(value, str):
        return None
    s = _TEX_ESCAPE.sub(r"\1", value.replace("{", "").replace("}", "")).strip()
    m = _DOI_PREFIX.match(s)
    if m:
        url = m.group().lower().startswith("http")
        s = s[m.end():].strip()
        if url:
            s = urllib.parse.unquote(s)
    s = s.lower()
    return s if _DOI.fullmatch(s) else None


# -- names ----------------------------------------------------------------------------------------

def _top_split(s: str, seps: str) -> list[str]:
    """``s`` split at characters of ``seps`` outside braces (empty pieces dropped when splitting on space)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and c in seps:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


def _lower_first(tok: str) -> bool | None:
    """Whether a name token starts lower case, as BibTeX decides it: the first letter outside braces;
    a braced group that starts with a backslash is a special character whose letter counts (``{\\"u}ber``
    is lower case); another braced group has no case and is skipped. None: no letter at all."""
    i, n = 0, len(tok)
    while i < n:
        c = tok[i]
        if c == "\\" or (c == "{" and i + 1 < n and tok[i + 1] == "\\"):
            j = i + (2 if c == "{" else 1)
            k = j
            while k < n and tok[k].isalpha():
                k += 1
            word = tok[j:k]
            if not word:
                k = j + 1  # a control symbol (\" \' \^): one character
            rest = tok[k:]
            for ch in rest:
                if ch == "}" and c == "{":
                    break
                if ch.isalpha():
                    return ch.islower()
            if word:
                return word[0].islower()
            return None
        if c == "{":  # a braced group without a backslash: no case
            depth = 0
            while i < n:
                if tok[i] == "{":
                    depth += 1
                elif tok[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            i += 1
            continue
        if c.isalpha():
            return c.islower()
        i += 1
    return None


def name_parts(raw: str) -> tuple[str, str, str, bool]:
    """(family, jr, given, written with commas) of one name as BibTeX reads it, in the text given."""
    raw = " ".join(_top_split(raw.replace("~", " "), " \t\r\n"))  # white space outside braces, collapsed
    parts = [p.strip() for p in _top_split(raw, ",")]
    words = lambda s: [w for w in _top_split(s, " ") if w]  # noqa: E731
    if len(parts) == 1:
        toks = words(parts[0])
        if not toks:
            return "", "", "", False
        last = len(toks) - 1
        lows = [i for i in range(last) if _lower_first(toks[i])]
        if lows:  # First von Last: von from the first lower-case word to the last one before the last word
            return " ".join(toks[lows[0]:]), "", " ".join(toks[:lows[0]]), False
        return toks[last], "", " ".join(toks[:last]), False
    if len(parts) == 2:
        return " ".join(words(parts[0])), "", parts[1], True
    return " ".join(words(parts[0])), parts[1], ", ".join(parts[2:]), True


def join_name(family: str, jr: str, given: str, commas: bool) -> tuple[str, str, str]:
    """(display, family, given) of ``name_parts``' parts: the display as the name was written (``Family,
    Given``, ``Family, Jr, Given`` or ``Given Family``), the given names with a ``Jr`` part after them."""
    if commas:
        shown = ", ".join([family] + ([jr] if jr else []) + [given]) if given or jr else family
    else:
        shown = f"{given} {family}" if given else family
    return shown, family, (f"{given}, {jr}" if given and jr else given or jr)


def split_name(raw: str) -> tuple[str, str]:
    """(family, given) of one name as BibTeX reads it (see the module docstring), in the text given
    (LaTeX left as it is: the caller decodes). A name of one word is all family name."""
    return join_name(*name_parts(raw))[1:]


# -- folding and facets -----------------------------------------------------------------------------

_NO_DECOMPOSE = str.maketrans({"ø": "o", "Ø": "o", "ł": "l", "Ł": "l", "đ": "d", "Đ": "d", "æ": "ae", "Æ": "ae",
                               "œ": "oe", "Œ": "oe", "ı": "i", "þ": "th", "Þ": "th", "ð": "d", "Ð": "d"})


def fold(s: str) -> str:
    """``s`` for comparing: accents dropped (``Müller`` -> ``muller``, ``Łukasz`` -> ``lukasz``) and so
    are invisible format characters (zero-width spaces and joiners, soft hyphens, bidi controls: Unicode
    category Cf), case folded (``ß`` -> ``ss``), white space collapsed."""
    if not s.isascii():
        s = "".join(c for c in unicodedata.normalize("NFKD", s.translate(_NO_DECOMPOSE))
                    if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return " ".join(s.casefold().split())


def family_keys(family: str) -> tuple[str, ...]:
    """The folded forms a family name is matched by: the whole (``van der berg``) and, when it starts
    with lower-case particles, the name after them (``berg``)."""
    whole = fold(family)
    if not whole:
        return ()
    toks = family.split()
    i = 0
    while i < len(toks) - 1 and toks[i][:1].islower():
        i += 1
    tail = fold(" ".join(toks[i:])) if i else ""
    return (whole, tail) if tail and tail != whole else (whole,)


@dataclass(frozen=True)
class Facets:
    """Per source, aligned with ``citekeys`` (citekey order), the values a filter compares:
    ``families`` the folded family names of its authors (``family_keys``), ``year`` an int or None,
    ``keywords`` folded, ``venue`` folded or None, ``type`` (lower case) or None, ``doi`` or None."""

    citekeys: list[str]
    families: list[tuple[str, ...]]
    year: list[int | None]
    keywords: list[tuple[str, ...]]
    venue: list[str | None]
    type: list[str | None]
    doi: list[str | None]

    def __len__(self) -> int:
        return len(self.citekeys)


def facets(ledger) -> Facets:
    """The ``Facets`` of every source in ``ledger`` (an open ``Ledger``), in citekey order. Each distinct
    name, keyword and venue is folded once (they repeat across a library)."""
    keys, fams, years, kws, venues, types, dois = [], [], [], [], [], [], []
    by_family: dict[str, tuple[str, ...]] = {}
    by_text: dict[str, str] = {}

    def folded(s: str) -> str:
        got = by_text.get(s)
        if got is None:
            got = by_text[s] = fold(s)
        return got

    for key, names, year, keywords, venue, typ, doi in ledger.metadata_view():
        keys.append(key)
        got: tuple = ()
        for fam, _ in names:
            k = by_family.get(fam)
            if k is None:
                k = by_family[fam] = family_keys(fam)
            got += k
        fams.append(tuple(dict.fromkeys(got)) if len(got) > 1 else got)
        years.append(year)
        kws.append(tuple(dict.fromkeys(f for f in map(folded, keywords) if f)) if keywords else ())
        venues.append(folded(venue) or None if venue else None)
        types.append(typ)
        dois.append(doi)
    return Facets(keys, fams, years, kws, venues, types, dois)


def split_and(value: str, limit: int | None = None) -> list[str]:
    """A BibTeX name list split on ``and`` (any case, between white space) outside braces, pieces stripped,
    empty ones dropped. With ``limit``, the reading stops once more than ``limit`` pieces are found (a
    caller that keeps ``limit`` names learns there were more, without splitting a list of thousands)."""
    out, depth, start = [], 0, 0
    for m in re.finditer(r"[{}]|\s+and\s+", value, re.IGNORECASE):
        tok = m.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(value[start:m.start()])
            start = m.end()
            if limit is not None and len(out) > limit:
                break
    else:
        out.append(value[start:])
    return [p for p in (x.strip() for x in out) if p]
