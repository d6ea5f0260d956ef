"""The entries step's shortcuts give the answers of the plain rules they replace: each rule is written here
as it read before (line by line, token by token, a pattern tried at every position) and compared with the
module's on seeded random and hand-picked cases; then whole lists in every style through the fast paths."""

from __future__ import annotations

import random
import re

import pytest
from chitragupta.engine.citations import entries as E

# -- the plain rules ------------------------------------------------------------------------------------


def _names_only_by_tokens(s: str, lenient: bool = False) -> bool:
    s = s.strip().rstrip("(").strip()
    if not s or len(s) > 1500 or E._ANY_DIGIT.search(s) or E._sentence_break(s.rstrip(" .,;:")):
        return False
    tokens = [t for t in (t.strip(".") for t in E._NAME_SEP.split(s)) if t]
    lows = [t.lower() for t in tokens]
    if not E._LONG_STOPWORDS.isdisjoint(lows):
        return False
    names = lower = 0
    for t, low in zip(tokens, lows):
        if low in E._JOINERS or low in E._PARTICLES:
            continue
        first = t.lstrip("{\\\"'`^~")[:1]
        if not first:
            continue
        names += 1
        if first.islower():
            lower += 1
    return names >= 2 and (lenient or lower * 4 <= names)


_NOT_NAMES_WORDS = re.compile(r"\bet\s+al\.?|\bothers\b|\(eds?\.?\)|\beds?\.(?=\s|$)", re.IGNORECASE)
_AND_WORDS = re.compile(r"\s(?:and|und)\s")


def _authors_by_parts(block: str) -> tuple[str, ...]:
    block = E.decode_latex(block)
    low = block.lower()
    if "al" in low or "other" in low or "ed" in low:
        block = _NOT_NAMES_WORDS.sub(" ", block)
    block = block.replace(";", ",").replace("&", ",")
    if "nd " in block:
        block = _AND_WORDS.sub(",", block)
    parts = [p for p in (p.strip(" .") for p in block.split(",")) if p]
    if not parts:
        return ()
    if len(parts) >= 2 and len(parts) % 2 == 0 and all(" " not in p for p in parts) and "," in block:
        return tuple(parts[0::2])
    initials = [bool(E._INITIALS.fullmatch(p)) for p in parts]
    names: list[str] = []
    if len(parts) >= 2 and any(initials):
        i = 0
        while i < len(parts):
            if i + 1 < len(parts) and initials[i + 1] and not initials[i]:
                names.append(parts[i])
                i += 2
                continue
            if not initials[i]:
                fam = E._family_of(parts[i])
                if fam:
                    names.append(fam)
            i += 1
        return tuple(n for n in (x.strip(" .") for x in names) if n)
    for p in parts:
        fam = p if " " in p and E._GROUP_WORD.search(p) else E._family_of(p)
        if fam:
            names.append(fam)
    return tuple(names)


_STOP = re.compile(r"[.?!](?=\s|$)")
_NOT_ENDS = frozenset({"vs", "No", "Vol", "pp", "Ed", "Eds", "Inc", "Jr", "St"})


def _sentence_end_by_marks(s: str, pos: int = 0):
    for m in _STOP.finditer(s, pos):
        i = m.start()
        if i > 0 and "A" <= s[i - 1] <= "Z":
            continue
        j, first = i, max(0, i - 4)
        while j > first and (s[j - 1].isalnum() or s[j - 1] == "_"):
            j -= 1
        word = s[j:i]
        if word in _NOT_ENDS or (len(word) == 2 and word[0].isupper() and word[1].islower() and word.isascii()):
            continue
        return i, i + 1 + (1 if i + 1 < len(s) else 0)
    return None


def _furniture_dropped_line_by_line(text: str, running: frozenset = frozenset()) -> list[str]:
    lines = []
    for p, page in enumerate(text.split("\f")):
        for i, line in enumerate(page.split("\n")):
            lines.append((line.rstrip(), p > 0 and i == 0))
    kept, note = [], False
    for ln, first in lines:
        if E._FOOTNOTE.match(ln) or (note and E._FOOTNOTE_MORE.match(ln)):
            note = True
            continue
        note = False
        kept.append((E._STRAY_ACCENT.sub("", ln), first))
    if "\f" not in text:
        return [ln for ln, _f in kept if not E._PAGE_NUMBER.match(ln.strip())]
    running = running | E.running_lines(text)
    pages: list[list[str]] = [[]]
    for ln, first in kept:
        if first:
            pages.append([])
        pages[-1].append(ln)
    out = []
    for pg in pages:
        stripped = [ln.strip() for ln in pg]
        body = [s for s in stripped if s]
        edge = {*body[:2], *body[-2:]}
        for ln, s in zip(pg, stripped):
            if s and (E._PAGE_NUMBER.match(s) or (s in edge and E._furniture_key(s) in running)):
                continue
            out.append(ln)
    return out


def _join_line_by_line(chunk: list[str], words) -> str:
    out = ""
    for ln in chunk:
        s = " ".join(ln.split())
        if not s:
            continue
        if not out:
            out = s
            continue
        last = out[out.rfind(" ") + 1:]
        if out[-1] in E._URLISH_LAST and E._URLISH_END.search(last):
            out += s
            continue
        h = E._HYPHEN_HEAD.search(last) if out[-1] == "-" else None
        t = E._TAIL_WORD.match(s) if h else None
        if h and t:
            head, tail = h.group(1).lower(), t.group(1)
            keep = (head + tail) not in words and head in words and tail in words
            out = out + s if keep else out[:-1] + s
            continue
        if out[-1] in "-\u2013" and len(last) > 1 and (s[0].isdigit() or s[0].isupper()):
            out += s
            continue
        out += " " + s
    return out


def _ends_entry(s: str) -> bool:
    s = s.rstrip()
    if not s:
        return False
    c = s[-1]
    if not (c in ".)]" or c.isdigit() or ("a" <= c <= "z" and len(s) > 1 and s[-2].isdigit())):
        last = s[s.rfind(" ") + 1:]
        if not ("http://" in last or "https://" in last or E._DOI.search(last)):
            return False
    return not (c == "." and len(s) > 1 and "A" <= s[-2] <= "Z" and (len(s) == 2 or s[-3] in " \t.,-"))


def _author_year_starts_calling_ends(lines: list[str]) -> list[int]:
    starts, prev_end = [], True
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s:
            continue
        if prev_end:
            if not starts:
                starts.append(i)
            else:
                window, size = [], 0
                for x in lines[i:i + 16]:
                    window.append(x)
                    size += len(x)
                    if size > 1500 or E._YEAR.search(x):
                        break
                if E._starts_author_block(E._quick_join(window)) or E._name_line(s):
                    starts.append(i)
        prev_end = _ends_entry(s)
    return starts


# -- the pieces cases are made of ------------------------------------------------------------------------

NAME_PIECES = ["and", "And", "AND", "und", "van", "Van", "der", "al", "al.", "et", "the", "The", "of", "in", "st",
               "St.", "others", "Others", "Smith", "J.", "K. L.", "M.-C.", "li", "xiang", "{\\'e}", "\\\"o", "`", "^",
               "~", "{", "}", ".", "..", ",", ";", "&", "(", ")", "[", "]", " ", "\t", "\u0130n", "\u03a3\u03a3",
               "\u212aen", "\u017ft", "dos", "do\u017f", "e", "y", "-", "'", "O'Hara", "\u00f8", "\u00dcnal", "ed",
               "eds.", "(eds.)", "(Ed)", "Ed.", "pp", "a", "x", "\u00a0", "de.la", ".de.", "{.}", ".{.", "{..x",
               "OGC of Harvard", "Ahmed", "Jr", "III", "Ben", "Le", "Nguyen", "de la Cruz", "\u4e00\u4e8c",
               "\u0410\u043d\u043d\u0430", "1", "In. The"]


def _random_names(rng: random.Random, spaces_only: bool) -> str:
    s = "".join(rng.choice(NAME_PIECES) + rng.choice(["", " ", ", ", ".", " and ", "; "])
                for _ in range(rng.randint(1, 12)))
    return " ".join(s.split()) if spaces_only else s


def test_names_only_by_token_kinds_is_the_token_by_token_rule():
    rng = random.Random(31)
    cases = ["Smith, J. and Lee, K.", "Given Family and Given Family", "david nicholas, peter williams",
             "In ICCSA. Qi He", "The Author", "\u0130lker Ay, B. C", "{\\\"O}zt{\\\"u}rk, A.", "..., ;", ""]
    cases += [_random_names(rng, False) for _ in range(20000)]
    for lenient in (False, True):
        assert [s for s in cases if E._names_only(s, lenient) != _names_only_by_tokens(s, lenient)] == []
    assert sum(_names_only_by_tokens(s, True) for s in cases) > 1000  # the cases hold lists of names


def test_authors_by_kept_parts_are_the_part_by_part_rule():
    rng = random.Random(32)
    cases = ["Smith, J., Lee, K. and Wu, X.", "A. Vaswani, N. Shazeer, et al.", "OGC of Harvard",
             "Family, Given, and Family, Given", "B. Scholkopf and A. J. Smola (eds.)", "M\u00fcller und Schmidt",
             "x and und and y", "van der Maaten, L. and Hinton, G."]
    cases += [_random_names(rng, True) for _ in range(20000)]
    E._PART_FAMILY.clear()
    E._PART_INITIALS.clear()
    first = [E._authors(s) for s in cases]
    again = [E._authors(s) for s in cases]  # now from the kept parts
    want = [_authors_by_parts(s) for s in cases]
    assert [c for c, a, w in zip(cases, first, want) if a != w] == []
    assert again == want


def test_sentence_end_pattern_is_the_mark_by_mark_rule():
    rng = random.Random(33)
    pieces = ["vs", "pp", "No", "Vol", "Eds", "Inc", "Jr", "St", "Ab", "ab", "AB", "xVol", "_", "\u00e9",
              "\u00c9a", "1", "ab1", "J", " ", ".", "?", "!", "\n", "\t", "Volume", "a", "\u00a0", "\u00bd"]
    cases = ["J. Smith. Title. In Proc.", "Vol. 3. Next", "Eds. x. y", "et al. A title? In ACL.", "x!"]
    cases += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 14))) for _ in range(30000)]
    for s in cases:
        for pos in (0, len(s) // 2):
            m = E._SENTENCE_END.search(s, pos)
            assert (None if m is None else (m.start(), m.end())) == _sentence_end_by_marks(s, pos), (s, pos)


@pytest.mark.parametrize("new, old", [
    (E._YEAR, re.compile(r"(?=[12])(?<![\d/.:-])(?:1[89]|20)\d\d[a-z]?(?![\d/])")),
    (E._SPLIT_WORD, re.compile(r"(?<=[^\W\d_])-\n\s*(?=[a-z])")),
    (E._NOT_NAMES, _NOT_NAMES_WORDS),
    (E._NOT_NAMES, E._NOT_NAMES_PLAIN),
])
def test_patterns_that_open_with_characters_match_where_their_look_behind_first_forms_do(new, old):
    rng = random.Random(34)
    pieces = ["1", "2", "9", "0", "8", "19", "20", "2019", "1899a", "/", ".", ":", "-", "a", "z", " ", "\n",
              "\u00e9", "_", "x-\n a", "-\nb", "A-\n\tc", "et", "ET", "al", "Al.", "others", "(eds.)", "Ed.", "eds.",
              "\u017f", "\u0661"]
    for _ in range(30000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert [m.span() for m in new.finditer(s)] == [m.span() for m in old.finditer(s)], s
        pos = rng.randint(0, len(s))
        a, b = new.search(s, pos), old.search(s, pos)
        assert (a and a.span()) == (b and b.span()), (s, pos)


FURNITURE_PIECES = ["12", "3", " 4 ", "Page 5", "- 6 -", "7 of 9", "19The Kaggle data", "See Wang 2020.",
                    "https://x.org", "[1] Smith, J. 2019.", "Running Title 2019", "Running Title 2020", "Com- \u00b4",
                    "\u00b4", "  \u00b4", "x `", "", "  ", "\t", "Foo bar.", "In Proc. 12", "1Abc", "2Def see",
                    "\u00a0", "\x1c", "12 \u00b4", "\u0663", "Journal", "p. 4"]


def test_furniture_dropped_by_page_is_the_line_by_line_rule():
    rng = random.Random(35)
    for _ in range(20000):
        parts = []
        for _ in range(rng.randint(0, 40)):
            parts.append(rng.choice(FURNITURE_PIECES))
            parts.append(rng.choice(["\n", "\n", "\n", "\f", "\n\f", "\f\n", " "]))
        text = "".join(parts)
        running = frozenset(rng.sample(["Running Title", "Journal", "Foo bar."], rng.randint(0, 2)))
        assert E._drop_furniture(text, running) == _furniture_dropped_line_by_line(text, running), (text, running)


def test_lines_joined_in_c_are_the_loops_join():
    rng = random.Random(36)
    pieces = ["infor-", "mation", "data-", "base", "Sci-", "BERT", "1435-", "1446", "https://doi.org/", "10.1234/",
              "abc.", "www.x.org/a.", "2010.", "pages 1\u2013", "end.", "word", "a  b", "\t", "x=", "y?", "#", "_"]
    words = E.LazyWords("information data base infor mation word")
    for _ in range(20000):
        chunk = [" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 5))]
        assert E._join(chunk, words) == _join_line_by_line(chunk, words), chunk


def test_author_year_scan_with_its_line_end_test_inline_is_the_calling_one():
    rng = random.Random(37)
    pieces = ["Smith, J. 2019.", "Quoc V.", "A.", "B. Jones and K. Lee. 2020. Title.", "In Proc. 12", "pages 1-10",
              "2019a", "http://x.org/a", "see https://y", "doi 10.1234/abc", "10.1234/x.", "Foo bar", "(2019)", "x.y",
              "J.-C. Bolot, S. Fosse", "OGC of Harvard. 2016.", "Waleed Ammar, Dirk Groeneveld, Chandra Bhagavat-",
              "  ", "", "Z.", " Q.", "\tR."]
    for _ in range(5000):
        lines = [rng.choice(pieces) + rng.choice(["", " ", ".", "a"]) for _ in range(rng.randint(1, 25))]
        words = E.LazyWords("\n".join(lines))
        assert E._author_year_starts(lines, words) == _author_year_starts_calling_ends(lines), lines


def test_furniture_key_of_an_ascii_line_is_the_patterns():
    for line in ["Page 12 of 30", "Proceedings 2019 ACL 12", "", " 1 2 3 ", "\u0663\u0664 x 12", "a\u00a0 1b"]:
        assert E._furniture_key(line) == " ".join(re.sub(r"\d+", "", line).split())


# as e12956d read them: every pattern tried, no test before it, the venue's stop searched at every position

def _initials_list_end_plain(block: str) -> int | None:
    """Where an IEEE-style author list that a comma ends, not a period, stops in ``block`` (the text up to
    the entry's first sentence end): "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of Correlation"
    -> the comma before "On". None unless ``block`` opens with initials-first names, each a comma-separated
    part, followed by a part that is none (the title: a capital or a quote, then two words at least, and
    not names only from there on)."""
    if not E._INITIALS_FIRST.match(block + " "):
        return None
    pos = 0
    while True:
        comma = block.find(",", pos)
        if comma < 0:
            return None
        if not E._INITIALS_PART.fullmatch(block[pos:comma].strip()):
            return None
        nxt = block[comma + 1:].lstrip()
        if (nxt[:1].isupper() and nxt[1:2] != ".") or nxt[:1] in "\"\u201c":  # not an initial ("W. G.")
            following = block[comma + 1:block.find(",", comma + 1) if "," in block[comma + 1:] else len(block)]
            if not E._INITIALS_PART.fullmatch(following.strip()) and len(following.split()) >= 2 \
                    and not E._names_only(block[comma + 1:]):  # "J. Smith, Dan Frankowski, and K. Lee": names
                return comma
        pos = comma + 1


def _venue_plain(rest: str) -> str | None:
    v = rest.strip(" ,.;:")
    if v[:2] in ("In", "in"):
        m = E._IN.match(v)  # (anchored: what ``sub`` would cut, at most once)
        if m is not None:
            v = v[m.end():]
    m = E._EDITORS.match(v) if " ed" in v or " (ed" in v else None  # what the pattern needs, looked for first
    if m is not None:
        v = v[m.end():]  # "B. Scholkopf and A. J. Smola, editors, Advances in ..."
    if not v:
        return None
    m = E._VENUE_STOP_PLAIN.search(v)
    if m is not None:
        v = v[:m.start()]
    for m in E._DOT_SPACE.finditer(v):
        i = j = m.start()
        while j > 0 and v[j - 1].isalpha():
            j -= 1
        word = v[j:i]
        if not (word[:1].isupper() and (len(word) == 1 or len(word) <= 4 and not word.isupper()
                                        or word in E._ABBREVIATIONS)):  # "J.", "Proc.", "Comput."
            v = v[:i]
            break
    v = v.strip(" ,.;:(")
    if v.endswith("arXiv"):
        m = E._PREPRINT.match(v)  # (anchored at both ends: the whole ``v``, or nothing)
        if m is not None:
            v = m.group(1) + v[m.end():]
    if not v or not E._TWO_LETTERS.search(v) or E._DOI.match(v) or E._URL.match(v):
        return None
    return v[:300]


def _parse_entry_plain(text: str, n: int) -> E.Entry:
    """``parse_entry`` of an entry whose white space is collapsed already (``_split``'s entries are)."""
    lead = E._LEAD_MARK.match(text)
    s = (text[lead.end():] if lead else text)[:E.MAX_ENTRY_CHARS]
    if not s.isascii() and E._ACCENTS_ALONE.search(s):  # (the accents are not ASCII)
        s = E._ACCENT_IN_WORD.sub("", s)  # pdfium's accents set apart: "Krysci \u00b4 nski" -> "Kryscinski"
    doi, doi_span = E._doi(s)
    arxiv, arxiv_span = E._arxiv(s)
    url = None
    linked = "://" in s or "www." in s or "WWW." in s
    for m in E._URL.finditer(s) if linked else ():
        u = E._strip_trail(m.group(0))
        if "doi.org/" in u.lower() and doi:
            continue
        url = u
        break
    # the first year outside a DOI, an arXiv id or a URL
    spans = []
    if doi_span:
        spans.append(doi_span)
    if arxiv_span:
        spans.append(arxiv_span)
    if url is not None:
        spans += [m.span() for m in E._URL.finditer(s)]
    y0 = None
    for m in E._YEAR.finditer(s):
        if not spans or not any(a <= m.start() < b for a, b in spans):
            y0 = m
            break
    authors: tuple[str, ...] = ()
    year = None
    title = venue = None
    rest = s
    # the author block: up to the first year when only names come before it; else up to a quoted title;
    # else up to the first sentence end
    block = None
    if y0 is not None and y0.start() > 0 and (E._name_prefix(s[:y0.start()], True) or E._GROUP_YEAR.match(s)):
        block = s[:y0.start()]
        year = int(y0.group(0)[:4])
        rest = s[y0.end():]
        m = E._AFTER_YEAR.match(rest)  # "). ", "-2023. " (anchored: what ``sub`` would cut)
        if m is not None:
            rest = rest[m.end():]
    else:
        q = E._QUOTED.search(s) if E._has_quote(s, 600) else None
        if q is not None and q.start() < 600:
            block = s[:q.start()]
            title = q.group("t").strip(" ,.")
            rest = s[q.end():]
        else:
            m = E._SENTENCE_END.search(s)
            if m is not None and m.start() < E.MAX_ENTRY_CHARS:
                block = s[:m.start()]
                rest = s[m.end():]
                cut = _initials_list_end_plain(block)
                if cut is not None:  # "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of ..."
                    v = E._COMMA_VENUE.search(block, cut + 1)  # "..., Proc. of SC 2002": a venue after a comma
                    if v is not None:
                        title, rest = block[cut:v.start()], s[v.start() + 1:]
                    else:
                        title = block[cut:]
                    title = title.strip(" ,.;:")[:500] or None
                    block = block[:cut]
    if block is not None:
        authors = E._authors(block.strip(" ,.;:("))
        if len(authors) > 200:
            authors = authors[:200]
    if year is None and y0 is not None:
        year = int(y0.group(0)[:4])
    if title is None:
        q = E._QUOTED.search(rest) if E._has_quote(rest, 5) else None
        if q is not None and q.start() < 5:
            title, rest = q.group("t").strip(" ,."), rest[q.end():]
        else:
            end, nxt = E._title_end(rest)
            t = rest[:end].strip(" ,.;:")
            if t:
                title = t[:500]
            rest = rest[nxt:]
    venue = _venue_plain(rest)
    # the frozen dataclass's fields set as its own __init__ sets them, in one update (one E.Entry per entry)
    e = E._new_entry(E.Entry)
    e.__dict__.update(n=n, text=text, authors=authors, year=year, title=title or None, venue=venue, doi=doi,
                      arxiv=arxiv, url=url)
    return e


ENTRY_PIECES = ["[12] ", "12. ", "A. Vaswani, N. Shazeer, and N. Parmar", "Smith, J. and Lee, K.", "T. Tado, B. Bodo",
                "I. Ashlagi, D. Monderer and M. Tenneholtz, On the Value of Correlation", ", Proc. of SC 2002",
                "Femi, Sagudogu (2011)", "OGC of Harvard. 2016.", "2019", "2019a", "(2020)", "1999.", ". ", ", ",
                "Attention is all you need", "\u201cA quoted title,\u201d", '"Another one."', "What's in a name?",
                " In Proceedings of the ACL", "Journal of Things 51, 2024.", "pages 237-989.", "vol. 3, no. 4",
                "(pp. 1-10)", "12(3):45-67", ", A. B. Editor, editors,", "arXiv preprint arXiv:2103.93359.",
                "arXiv:hep-th/9901001v2", "abs/1409.0473", "https://doi.org/10.18653/v1/N19-1423.",
                "doi:10.1000/xyz123);", "10.1234/abc.", "http://www.example.org/a_b?c=d", "www.x.org.",
                "\u674e\u660e, \u738b\u82b3. 2020. \u4e2d\u6587\u6807\u9898.",
                "\u0418. \u0418\u0432\u0430\u043d\u043e\u0432",
                "M\u00fcller und Schmidt", "Krysci \u00b4 nski", "{\\\"O}zt{\\\"u}rk, A.", "et al.", "(eds.)", "Jr.",
                "van der Maaten, L.", "In: ", "In ", "CoRR", "Vol. 2", "Eds. x", "J. Mach. Learn. Res.", " ",
                "Dream? In Proceedings", "1st", "Q2", ";", ":", "(", ")", "x" * 60]


def _random_entry(rng: random.Random) -> str:
    s = "".join(rng.choice(ENTRY_PIECES) + rng.choice(["", " ", ". ", ", "]) for _ in range(rng.randint(1, 14)))
    return " ".join(s.split())


def test_fields_with_their_tests_first_are_the_plain_rules():
    """``_parse_entry`` (a DOI looked for only where "10." stands, the year searched once when no span can
    hold it, no name prefix looked for before a year with a digit before it, the venue's patterns tried
    only where they can match, an initials-first list let go when no comma can end it) gives what it gave
    when every pattern was tried, on seeded random entries and the bad inputs of a reference list."""
    rng = random.Random(41)
    cases = [_random_entry(rng) for _ in range(20000)]
    cases += ["", "[1]", "2019", "A. B. 2019. " + "word " * 2000,
              " ".join(f"A. Author{i}. 2019. T {i}." for i in range(300)),
              "Smith, J. 2019. A DOI with trailing punctuation. https://doi.org/10.1000/ABC.def).;",
              "\u0418\u0432\u0430\u043d\u043e\u0432 \u0418. 2019. \u041e \u0447\u0451\u043c-\u0442\u043e. "
              "\u0416\u0443\u0440\u043d\u0430\u043b 5.",
              "T. Tado, B. Bodo, H. Halogune, G. Gubone. answering efficient search models. Journal of Doguloru 51, "
              "2024.",
              "A. Smith, \u201cA title,\u201d in Proc. X, 2019.",
              "J. Smith, Dan Frankowski, and K. Lee, Title words here. X.",
              "A. B,", "A. Smith, ", "1. 2. 3.", "\u00c9. Dupont, On things, IEEE Trans. 2001."]
    for i, t in enumerate(cases):
        assert E._parse_entry(t, i) == _parse_entry_plain(t, i), t


def test_name_prefix_never_holds_a_digit():
    """What lets ``_parse_entry`` skip ``_name_prefix`` before a year with a digit before it."""
    rng = random.Random(42)
    for _ in range(20000):
        s = _random_names(rng, rng.random() < 0.5)
        k = rng.randint(0, len(s))
        s = s[:k] + rng.choice(["1", "0", "\u0661", "2019"]) + s[k:]
        assert not E._name_prefix(s, True) and not E._name_prefix(s, False), s


def test_venue_stop_opening_with_its_characters_is_the_look_ahead_first_form():
    rng = random.Random(43)
    pieces = [",", " ", "(", ":", "\t", "\u00a0", "pages", "PP.", "vol", "Volume", "no.", "num", "number", "issue",
              "art.", "article", "12", "3", "1999", "2019a", "2019.", "1899", "A.", "B", "Proc", "J", "x", "\u0663",
              "(pp", "pagesx", ".", "-"]
    for _ in range(30000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert [m.span() for m in E._VENUE_STOP.finditer(s)] == [m.span() for m in E._VENUE_STOP_PLAIN.finditer(s)], s
        pos = rng.randint(0, len(s))
        a, b = E._VENUE_STOP.search(s, pos), E._VENUE_STOP_PLAIN.search(s, pos)
        assert (a and a.span()) == (b and b.span()), (s, pos)



def test_digit_and_sentence_break_tests_before_their_patterns_are_the_patterns():
    rng = random.Random(45)
    pieces = ["a", "Z", "0", "9", "\u0661", "\u00b2", "\u00bd", " ", ".", "?", "!", "\t", "\x1c", "\u00a0", "ab", "J",
              "\u00e9", "_", "Ab. ", "x? ", "1. "]
    for _ in range(30000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert E._has_digit(s) == (E._ANY_DIGIT.search(s) is not None), s
        plain = any(s[m.start() - 1].isalpha() and s[m.start() - 2].isalpha() for m in E._MARK_SPACE.finditer(s))
        assert E._sentence_break(s) == plain, s


# -- whole lists through the fast paths ------------------------------------------------------------------

def test_lists_of_every_style_parse_as_written():
    numbered = ("[1] A. Vaswani, N. Shazeer, and N. Parmar. 2017. Attention is all you\n"
                "need. In Advances in Neural Information Processing Systems, pages 5998\u2013\n6008.\n"
                "[2] J. Devlin and K. Lee. 2019. BERT: Pre-training of deep bidirectional trans-\n"
                "formers. In NAACL. https://doi.org/10.18653/v1/N19-1423.\n")
    got = E.parse_reference_list(numbered)[0]
    assert [e.n for e in got] == [1, 2]
    assert got[0].authors == ("Vaswani", "Shazeer", "Parmar") and got[0].year == 2017
    assert got[0].title == "Attention is all you need"
    assert got[1].title == "BERT: Pre-training of deep bidirectional transformers"
    assert got[1].doi == "10.18653/v1/n19-1423"  # its trailing period dropped
    author_year = ("Ahmad, R. and Afzal, M. T. 2018. Cad: an algorithm for citation-anchors detection.\n"
                   "   Scientometrics, 115(3):1\u201318.\n"
                   "Giles, C. L., Bollacker, K. D., and Lawrence, S. 1998. Citeseer: an automatic citation\n"
                   "   indexing system. In Proc. of DL.\n")
    got = E.parse_reference_list(author_year)[0]
    assert [(e.authors[0], e.year) for e in got] == [("Ahmad", 2018), ("Giles", 1998)]
    # a page break with a running title and a page number between the lines of one entry
    paged = ("[1] A. Author. 2019. A first title. In Proc.\n[2] B. Writer. 2020. A title that runs\n"
             "Running Title\n\f12\nRunning Title\nover the page. Journal 3.\n[3] C. Third. 2021. Last. J.\n"
             "Running Title\n\f13\nRunning Title\n")
    got = E.parse_reference_list(paged)[0]
    assert [e.title for e in got] == ["A first title", "A title that runs over the page", "Last"]
    # non-Latin names and a stray accent at a line's end
    other = ("[1] \u674e\u660e, \u738b\u82b3. 2020. \u4e2d\u6587\u6807\u9898. \u671f\u520a.\n"
             "[2] \u0418. \u0418\u0432\u0430\u043d\u043e\u0432. 2019. \u041e \u0447\u0451\u043c-\u0442\u043e. \u00b4\n"
             "\u0416\u0443\u0440\u043d\u0430\u043b 5.\n")
    got = E.parse_reference_list(other)[0]
    assert [e.year for e in got] == [2020, 2019] and got[1].authors == ("\u0418\u0432\u0430\u043d\u043e\u0432",)
    assert "\u00b4" not in got[1].text


def test_a_run_on_list_and_a_10000_character_entry_get_notes_not_errors():
    run_on = " ".join(f"A. Author{i}. 2019. Title {i}. Journal {i}." for i in range(400))
    entries, notes = E.parse_reference_list(run_on)
    assert entries and notes
    long = "[1] A. Author. 2019. " + "word " * 2000 + "\n[2] B. Writer. 2020. Short. J.\n"
    entries, notes = E.parse_reference_list(long)
    assert [e.n for e in entries] == [1, 2] and len(entries[0].text) > 10000
    assert any("longer than" in n for n in notes)


# -- the tails in numba (``kernels.citefields``) ----------------------------------------------------------

TAIL_PIECES = ["Attention is all you need", "What's in a name?", "Dream?", "Wow!", " In Proceedings of the ACL",
               "In", "in", "In:", "In :", "In  ", "Journal of Things 51, 2024.", "pages 237-989.", "vol. 3, no. 4",
               "(pp. 1-10)", "( pp 3)", "(2019)", "(1899", "12(3):45-67", "12 (3)", "7:12", ", A. B. Editor, editors,",
               ", A.B", ", A. x", "editors", " ed.", " (eds.)", "arXiv preprint arXiv", "ArXiv preprint  arXiv",
               "arXiv:2103.93359.", "https://doi.org/10.18653/v1/N19-1423.", "10.1234/abc.", "10.123/x",
               "10.1234567890/x", "http://www.example.org/a_b?c=d", "HTTPS://X.org", "www.x.org.", "Www.", "http://",
               "CoRR", "Vol.", "Vol", "vs.", "pp.", "Eds.", "Inc.", "Xy.", "A.", "J. Mach. Learn. Res.", "IEEE Trans.",
               "Pattern Anal. Mach. Intell.", "Proc.", "Comput.", "Conf.", "NASA.", "ACM.", "Findings", "Advances",
               "pages", "Pages", "PP", "numbers", "number", "no", "no.", "nos", "art.", "article", "issue", "volume",
               "1999", "2019a", "2019a.", "2019.", "2020b,", "20", "3", "x" * 60, '"', '"Quoted,"', "_", "a_b",
               ";", ":", ",", ".", "(", ")", "?", "!", "-", "  ", " ", "\t", "\u00e9t\u00e9", "\x7f",
               # non-ASCII: dashes and quotes (read as "~"), and what must not be (spaces, letters, digits, marks)
               "\u2013", "5998\u20136008", "\u2019s", "\u2014", "\u2018x\u2019", "\u2026", "\u2022", "\u00a9", "\u201c",
               "\u201d", "\u201e", "\u00a0", "\u2009", "\u3000", "\u017f", "\u212a", "\u0131", "\u0130", "\u00e9",
               "\u0663",
               "\u00b2", "\u02c6", "\u0345", "\u24d0", "\u00c9. Dupont", "Proc.\u00a0X", "12\u00a0(3)", "I\u0307n"]


def _random_tail(rng: random.Random) -> str:
    return "".join(rng.choice(TAIL_PIECES) + rng.choice(["", " ", ". ", ", ", "? "]) for _ in range(rng.randint(0, 9)))


def _kernel_tails(rests: list[str], titles: list) -> list[tuple]:
    import numpy as np
    from chitragupta.kernels import citefields

    if citefields.ABBREVIATIONS_BLOB[0].shape[0] == 0:
        citefields.set_abbreviations(E._ABBREVIATIONS)
    lens = np.array([len(r) for r in rests], dtype=np.int64)
    ends = np.cumsum(lens)
    need = np.array([t is None for t in titles], dtype=np.bool_)
    buf = "".join(rests).encode("ascii", E._AS_DASH_OR_NUL)
    got = citefields.tails(np.frombuffer(buf, dtype=np.uint8), ends - lens, ends, need)
    out = []
    for rest, title, (status, ta, tb, va, vb) in zip(rests, titles, got.tolist()):
        if status:
            out.append(None)
            continue
        out.append((rest[ta:tb] if title is None and ta >= 0 else title, rest[va:vb] if va >= 0 else None))
    return out


def test_tails_in_numba_are_the_python_tails():
    """``kernels.citefields.tails`` finds the title and the venue ``_tail`` finds (``_title_end``, ``_venue``)
    on seeded random tails, wherever it does not leave the tail to Python -- and it leaves few."""
    rng = random.Random(46)
    rests = [_random_tail(rng) for _ in range(30000)]
    rests += ["", " ", "In", "In:", "In x", "x ed", "Proc. X", "arXiv preprint arXiv", "10.1234/x", "www.x", "Ab.",
              "a" * 1000 + ". " + "b" * 400, "T. " * 200]
    titles = [None if rng.random() < 0.7 else "Given" for _ in rests]
    got = _kernel_tails(rests, titles)
    for rest, title, k in zip(rests, titles, got):
        if k is not None:
            assert k == E._tail(rest, title), (rest, title)
    printable = [k for r, k in zip(rests, got) if r.isascii() and r.isprintable()]
    assert sum(k is None for k in printable) < 0.2 * len(printable)
    dashed = [k for r, k in zip(rests, got) if not r.isascii() and all(E._byte_of(c) == "~" for c in r if ord(c) > 127)]
    assert len(dashed) > 1000 and sum(k is None for k in dashed) < 0.2 * len(dashed)


def test_only_characters_no_tail_rule_can_tell_from_a_dash_read_as_one():
    """``_byte_of``: "~" only for a character each of the tail rules' classes treats as it treats "~"."""
    probes = [chr(c) for c in range(128, 0x3000)] + ["\U0001d7ce", "\U0001f600", "\ufeff", "\uff0c"]
    classes = [re.compile(p) for p in (r"\s", r"\w", r"\d", r"[^\W\d_]", r"(?i)[a-z]", r"[\u201c\u201d\u201e\"]")]
    for c in probes:
        if E._byte_of(c) == "~":
            assert not any(k.match(c) for k in classes) and not c.isalpha() and c.lower() == c == c.upper(), hex(ord(c))
    assert E._byte_of("\u2013") == E._byte_of("\u2019") == "~" and E._byte_of("\u00a0") == "\x00"


def test_lists_parsed_with_the_kernel_are_the_lists_parsed_in_python():
    """``_parse_entries`` (the tails in numba) gives ``_parse_entry``'s entries, on seeded random entries and
    the bad inputs of a reference list, and through ``parse_reference_list`` once numba is loaded."""
    import numba  # noqa: F401  (loaded: ``parse_reference_list`` takes the kernel's path)

    rng = random.Random(47)
    cases = [_random_entry(rng) for _ in range(20000)]
    cases += ["", "[1]", "2019", "A. B. 2019. " + "word " * 2000, "Smith, J. 2019. A DOI. https://doi.org/10.1/AB.).;",
              "A. Smith, \u201cA title,\u201d in Proc. X, 2019.", "J. Smith. 2019. T? In Proc. X, pp. 1-2."]
    for i in range(0, len(cases), 37):
        chunk = cases[i:i + 37]
        assert E._parse_entries(chunk) == [E._parse_entry(r, n) for n, r in enumerate(chunk, start=1)]
    text = "".join(f"[{i}] A. Author{i}, B. Writer. 20{i % 25:02d}. Title {i}? In Proc. X {i}, pages {i}-9.\n"
                   for i in range(1, 60))
    kernel_path = E.parse_reference_list(text)
    old, E._KERNEL_FROM = E._KERNEL_FROM, 10 ** 9
    try:
        assert E.parse_reference_list(text) == kernel_path
    finally:
        E._KERNEL_FROM = old
