"""The plain-text reference cut against docling's structural cut, and against hand-read truth on real PDFs.

    python -m bench.refcut [--data ../shared/data] [--show N]

The plain-text rule (``chitragupta.engine.text.refcut.plain_reference_cut``) is what the index applies to
a parsed ``.txt`` without a sidecar (the default pdftotext backend, an imported corpus); docling's rule
(``reference_cut`` over a sidecar's items) is the one the docling backend gets. Four measurements:

1. semeval2010: the 243 ACM papers' plain text (``semeval2010/corpus.jsonl``) cut by the plain rule,
   against the same papers as Markdown (``semeval2010-md``: made from that text, headings recovered)
   converted by docling (no models needed for Markdown) and cut by the sidecar rule. Both cut, or
   neither; where both cut, the cuts agree when the kept texts end on the same 8 words.
2. docling's own conversions: the LaTeX sources in ``pdfs/docling/latex`` (converted here by docling)
   and its checked-in PDF outputs in ``pdfs/docling/groundtruth``: the sidecar cut's offset against the
   plain cut's in the ``.txt`` docling writes (the items joined by blank lines) -- the same text, so
   the offsets must be equal.
3. The real PDFs in ``pdfs/papermage`` through the pdftotext backend (pdfium): no docling conversion of
   them is possible offline (docling's PDF layout models are not shipped), so each cut is checked
   against the first reference entry read by hand from the PDF: correct when only the heading line lies
   between the cut and that entry.
4. False cuts: every abstract of scifact, cranfield, cisi, inspec and www (none holds a reference list):
   any cut there is false.
5. What each guard of the rule does: the semeval2010 texts and the real PDFs cut again with the
   position floor off (``PLAIN_MIN_FRACTION = 0``) and with the reference-list test off
   (``PLAIN_MIN_MARKERS = 0``): how many cuts move.
6. What the cut takes and keeps, per document: words of the reference list cut and words after it kept
   (appendices), before (the cut ran to the end of the document) and now (it ends at an appendix), for
   the semeval2010 plain texts, their docling sidecars and the real PDFs; on the PDFs, the hand-read
   last entry of each reference list lies inside the cut (no entry admitted back).
7. Line-end hyphens on the real PDFs: split words joined and kept, the tail fragments left in the
   indexed text, and a seeded sample of each to read by hand (``--show``).
8. Snippets opening on the author block, on the real PDFs: for each paper and query (its title and a
   fixed list), whether the chosen 500-character window starts before the front matter's end, without
   and with the chooser's preference for the body.
9. Reference-list words past the list (plain rule: the semeval2010 texts and the real PDFs): every source
   whose span ends before its text does, with the line the span ends at, the line before it, and the
   entry-like lines in the text kept after it (a line opening with ``[n]`` or with a surname and
   initials, a year later on the same line), for reading by hand: a source with such lines,
   or ending at a line that is no appendix heading, indexes reference words past its list.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from bench.data import data_dir, read_jsonl

# pdfs/papermage: the first words of each paper's first reference entry, read from the PDF by hand
# pdfs/papermage: the last words of each paper's last reference entry, read from the PDF by hand
LAST_ENTRY = {
    "2020.acl-main.447": "bibliographic networks. In SDM.",
    "2023.eacl-main.121": "ence on Learning Representations.",
    "2203.00130v1": "Information Research 15 (2010).",
    "2206.10883v3": "pages 163–172, 2019.",
    "2302.07302v1": "(ICKG) (2020), 297–304.",
    "2304.02623v1": "arXiv preprint arXiv:1909.08593 (2019).",
    "papermage": "1015–1022. IEEE.",
}
# pdfs/papermage: the titles (SOURCE.md), each a query of measurement 8 beside QUERIES
TITLES = {
    "2020.acl-main.447": "S2ORC: The Semantic Scholar Open Research Corpus",
    "2023.eacl-main.121": "LongEval: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization",
    "2203.00130v1": "Paper Plain: Making Medical Research Papers Approachable to Healthcare Consumers",
    "2206.10883v3": "Multi-LexSum: Real-World Summaries of Civil Rights Lawsuits at Multiple Granularities",
    "2302.07302v1": "CiteSee: Augmenting Citations in Scientific Papers with Persistent and Personalized Context",
    "2304.02623v1": "Beyond Summarization: Designing AI Support for Real-World Expository Writing Tasks",
    "papermage": "PaperMage: A Unified Toolkit for Processing Visually-Rich Scientific Documents",
}
QUERIES = ("human evaluation", "summaries", "dataset", "citation", "reading", "language models", "annotation",
           "pdf parsing", "university", "institute")
FIRST_ENTRY = {
    "2020.acl-main.447": "Riaz Ahmad and Muhammad Tanvir Afzal",
    "2023.eacl-main.121": "Nader Akoury, Shufan Wang, Josh Whiting",
    "2203.00130v1": "[1] 2021. Fermat",
    "2206.10883v3": "[1] Iz Beltagy, Matthew E Peters",
    "2302.07302v1": "[1] 2019. CHI",
    "2304.02623v1": "[1] Griffin Adams, Emily Alsentzer",
    "papermage": "Waleed Ammar, Dirk Groeneveld",
}
ABSTRACT_ARMS = ("scifact", "cranfield", "cisi", "inspec", "www")
_WORD = re.compile(r"\w+")


def _tail_words(text: str, n: int = 8) -> list[str]:
    return _WORD.findall(text[-2000:].lower())[-n:]


def _docling_items(path: Path) -> list[dict] | None:
    from chitragupta.engine.library.parsers import ParseError, parse

    try:
        return parse(path, "docling").items
    except ParseError as err:
        print(f"  {path.name}: docling could not convert it ({err})")
        return None


def _sidecar_offset(items: list[dict]) -> int | None:
    """The sidecar cut as a character offset into ``join_items(items)`` (the ``.txt`` docling writes)."""
    from chitragupta.engine.text.sidecar import ITEM_SEPARATOR
    from chitragupta.engine.text.refcut import reference_cut

    cut = reference_cut(items)
    if cut is None:
        return None
    return sum(len(it["text"]) for it in items[:cut]) + len(ITEM_SEPARATOR) * cut


def semeval(data: Path, show: int) -> dict:
    from chitragupta.engine.text.sidecar import join_items
    from chitragupta.engine.text.refcut import kept_items, plain_reference_cut, reference_cut

    folder = data / "semeval2010-md" / "papers"
    counts = {"papers": 0, "both": 0, "agree": 0, "disagree": 0, "plain_only": 0, "docling_only": 0, "neither": 0}
    disagreements = []
    t = time.perf_counter()
    for rec in read_jsonl(data / "semeval2010" / "corpus.jsonl"):
        text = rec["text"]
        md = folder / ("p" + rec["_id"].replace("-", "") + ".md")
        plain = plain_reference_cut(text)
        items = _docling_items(md) if md.is_file() else []
        if items is None:
            continue
        counts["papers"] += 1
        side = _sidecar_offset(items)
        side_cut = reference_cut(items) if items else None
        if plain is None and side is None:
            counts["neither"] += 1
        elif side is None:
            counts["plain_only"] += 1
            disagreements.append((rec["_id"], "plain cut, docling did not", plain / len(text)))
        elif plain is None:
            counts["docling_only"] += 1
            disagreements.append((rec["_id"], "docling cut, plain did not", None))
        else:
            counts["both"] += 1
            # what precedes the list (appendices after it are measurement 6's)
            kept = join_items([it for n, it in kept_items(items) if n < side_cut])
            if _tail_words(text[:plain]) == _tail_words(kept):
                counts["agree"] += 1
            else:
                counts["disagree"] += 1
                disagreements.append((rec["_id"], f"plain kept ...{' '.join(_tail_words(text[:plain], 5))!r}, "
                                                  f"docling kept ...{' '.join(_tail_words(kept, 5))!r}", plain / len(text)))
    counts["seconds"] = round(time.perf_counter() - t, 1)
    print(f"1. semeval2010, plain text vs docling on its Markdown: {json.dumps(counts)}")
    for d in disagreements[:show]:
        print(f"   {d[0]}: {d[1]}" + (f" (plain cut at {d[2]:.0%} of the text)" if d[2] is not None else ""))
    return counts


def docling_outputs(data: Path) -> dict:
    from chitragupta.engine.text.sidecar import join_items
    from chitragupta.engine.text.refcut import plain_reference_cut

    base = data / "pdfs" / "docling"
    sources = sorted((base / "latex").glob("*/main.tex")) + sorted((base / "groundtruth").glob("*.md"))
    counts = {"documents": 0, "agree": 0, "disagree": 0}
    for src in sources:
        items = _docling_items(src)
        if items is None:
            continue
        counts["documents"] += 1
        text = join_items(items)
        side, plain = _sidecar_offset(items), plain_reference_cut(text)
        ok = side == plain
        counts["agree" if ok else "disagree"] += 1
        name = src.parent.name if src.name == "main.tex" else src.name
        where = lambda x: "no cut" if x is None else f"{x} ({x / len(text):.0%})"  # noqa: E731
        print(f"   {'agree   ' if ok else 'DISAGREE'} {name}: docling {where(side)}, plain {where(plain)}, "
              f"{len(text)} chars")
    print(f"2. docling's conversions (LaTeX here, PDF outputs checked in): {json.dumps(counts)}")
    return counts


def pdfs(data: Path) -> dict:
    from chitragupta.engine.library.parsers import parse
    from chitragupta.engine.text.refcut import plain_reference_cut

    counts = {"papers": 0, "correct": 0, "wrong": 0, "missed": 0}
    for pdf in sorted((data / "pdfs" / "papermage").glob("*.pdf")):
        text = parse(pdf, "pdftotext").text
        counts["papers"] += 1
        cut = plain_reference_cut(text)
        entry = text.find(FIRST_ENTRY[pdf.stem])
        if cut is None:
            verdict = "missed"
        else:
            between = text[cut:entry].strip().splitlines() if entry >= cut else None
            verdict = "correct" if between is not None and len(between) == 1 else "wrong"
        counts[verdict] += 1
        shown = "no cut" if cut is None else f"cut at {cut} ({cut / len(text):.0%}): {text[cut:entry].strip()!r}"
        print(f"   {verdict:<8} {pdf.name}: {shown}; first entry at {entry}, {len(text)} chars, "
              f"{len(text) - (cut if cut is not None else len(text))} chars cut")
    print(f"3. real PDFs (pdftotext backend) against the hand-read first reference: {json.dumps(counts)}")
    return counts


def false_cuts(data: Path, show: int) -> dict:
    from chitragupta.engine.text.refcut import plain_reference_cut

    counts = {}
    t = time.perf_counter()
    for arm in ABSTRACT_ARMS:
        path = data / arm / "corpus.jsonl"
        if not path.is_file():
            continue
        n = cut = 0
        for rec in read_jsonl(path):
            n += 1
            text = rec.get("title", "") + "\n" + rec.get("text", "")
            at = plain_reference_cut(text)
            if at is not None:
                cut += 1
                if cut <= show:
                    print(f"   false cut in {arm}/{rec['_id']} at {at}: {text[at:at + 80]!r}")
        counts[arm] = {"documents": n, "cut": cut}
    secs = time.perf_counter() - t
    total = sum(c["documents"] for c in counts.values())
    print(f"4. false cuts on abstracts: {json.dumps(counts)} ({total} documents in {secs:.1f} s, "
          f"{secs / max(total, 1) * 1e6:.1f} us a document)")
    return counts


def guards(data: Path) -> dict:
    from chitragupta.engine.library.parsers import parse
    import chitragupta.engine.text.refcut as refcut

    texts = [rec["text"] for rec in read_jsonl(data / "semeval2010" / "corpus.jsonl")]
    texts += [parse(pdf, "pdftotext").text for pdf in sorted((data / "pdfs" / "papermage").glob("*.pdf"))]
    base = [refcut.plain_reference_cut(t) for t in texts]
    out = {}
    for name, value in (("PLAIN_MIN_FRACTION", 0.0), ("PLAIN_MIN_MARKERS", 0)):
        saved = getattr(refcut, name)
        setattr(refcut, name, value)
        try:
            moved = sum(refcut.plain_reference_cut(t) != b for t, b in zip(texts, base))
        finally:
            setattr(refcut, name, saved)
        out[f"{name}={value}"] = moved
    print(f"5. cuts that move with one guard off, of {len(texts)} papers: {json.dumps(out)}")
    return out


def _pdf_texts(data: Path) -> dict[str, str]:
    from chitragupta.engine.library.parsers import parse

    return {pdf.stem: parse(pdf, "pdftotext").text for pdf in sorted((data / "pdfs" / "papermage").glob("*.pdf"))}


def _words(s: str) -> int:
    return len(s.split())


def kept_and_cut(data: Path, have_docling: bool, texts: dict[str, str]) -> dict:
    """Measurement 6."""
    from chitragupta.engine.text.refcut import plain_reference_cut, plain_reference_span, reference_span

    def plain_row(text: str) -> tuple[int, int, int, int] | None:
        """(words cut before, kept after before (0), words cut now, kept after now)."""
        start = plain_reference_cut(text)
        if start is None:
            return None
        a, b = plain_reference_span(text)
        return _words(text[start:]), 0, _words(text[a:b]), _words(text[b:])

    def side_row(items: list[dict]) -> tuple[int, int, int, int] | None:
        span = reference_span(items)
        if span is None:
            return None
        a, b = span
        return (sum(_words(it["text"]) for it in items[a:]), 0, sum(_words(it["text"]) for it in items[a:b]),
                sum(_words(it["text"]) for it in items[b:]))

    def summary(name: str, rows: dict) -> dict:
        got = [r for r in rows.values() if r is not None]
        out = {"documents": len(rows), "cut": len(got), "with_appendix_kept": sum(1 for r in got if r[3]),
               "words_cut_before": sum(r[0] for r in got), "words_cut_now": sum(r[2] for r in got),
               "words_after_kept_now": sum(r[3] for r in got)}
        print(f"6. {name}: {json.dumps(out)}")
        for key, r in rows.items():
            if r is not None and r[3]:
                print(f"   {key}: cut {r[0]} -> {r[2]} words; {r[3]} words after the list kept "
                      f"({r[3] / max(1, r[0]):.0%} of what was cut before)")
        return out

    out = {}
    semeval_rows = {rec["_id"]: plain_row(rec["text"]) for rec in read_jsonl(data / "semeval2010" / "corpus.jsonl")}
    out["semeval_plain"] = summary("semeval2010, plain rule", semeval_rows)
    if have_docling:
        folder = data / "semeval2010-md" / "papers"
        side = {}
        for rec in read_jsonl(data / "semeval2010" / "corpus.jsonl"):
            md = folder / ("p" + rec["_id"].replace("-", "") + ".md")
            items = _docling_items(md) if md.is_file() else None
            if items is not None:
                side[rec["_id"]] = side_row(items)
        out["semeval_docling"] = summary("semeval2010, docling sidecar rule", side)
    rows = {k: plain_row(t) for k, t in texts.items()}
    out["pdfs"] = summary("real PDFs, plain rule", rows)
    inside = 0
    for key, text in texts.items():
        span = plain_reference_span(text)
        at = text.find(LAST_ENTRY[key])
        ok = span is not None and at >= 0 and span[0] <= at and at + len(LAST_ENTRY[key]) <= span[1]
        inside += ok
        if not ok:
            print(f"   ADMITTED BACK {key}: the last entry at {at}, the cut {span}")
    print(f"   the hand-read last reference entry lies inside the cut in {inside} of {len(texts)} PDFs")
    out["pdfs"]["last_entry_inside"] = inside
    return out


def hyphens(texts: dict[str, str], show: int) -> dict:
    """Measurement 7."""
    import random

    from chitragupta.engine.text.hyphens import document_words, find_splits, join_hyphens
    from chitragupta.engine.text.refcut import cut_plain

    joined, kept = [], []
    counts = {"line_end_splits": 0, "line_end_joined": 0, "inline_splits": 0, "inline_joined": 0}
    tails_before = tails_after = 0
    for key, raw in texts.items():
        text = cut_plain(raw)
        words = document_words(text)
        out = join_hyphens(text, words)
        tok_before = re.findall(r"[a-z0-9]+", text.lower())
        tok_after = re.findall(r"[a-z0-9]+", out.lower())
        tails = set()
        for sp in find_splits(text, words):
            kind = "line_end" if sp.gap else "inline"
            counts[f"{kind}_splits"] += 1
            counts[f"{kind}_joined"] += sp.join
            shown = (kind, sp.head + "-" + ("\\n" if sp.gap else "") + sp.tail)
            (joined if sp.join else kept).append(shown)
            if sp.join:
                tails.add(sp.tail)
        # the joined words' tails as tokens of their own, before and after (after: where they also stand alone)
        tails_before += sum(tok_before.count(t) for t in tails)
        tails_after += sum(tok_after.count(t) for t in tails)
    rng = random.Random(21)
    counts.update(tail_fragment_tokens_before=tails_before, tail_fragment_tokens_after=tails_after)
    print(f"7. line-end hyphens on the real PDFs: {json.dumps(counts)}")
    for kind in ("line_end", "inline"):
        for verdict, pool in (("joined", joined), ("kept", kept)):
            pick = [w for k, w in pool if k == kind]
            sample = rng.sample(pick, min(show, len(pick)))
            print(f"   {kind} {verdict}, a seeded sample of {len(sample)} of {len(pick)}: " + ", ".join(sample))
    return counts


def front_matter(texts: dict[str, str]) -> dict:
    """Measurement 8."""
    from chitragupta.engine.text.tokenize import query_terms
    from chitragupta.engine.text.front import plain_front_end
    from chitragupta.engine.text.hyphens import join_hyphens
    from chitragupta.engine.text.refcut import cut_plain
    from chitragupta.engine.text.windows import choose_windows

    counts = {"pairs": 0, "with_a_window": 0, "front_before": 0, "front_now": 0, "front_now_only_match": 0}
    for key, raw in texts.items():
        text = join_hyphens(cut_plain(raw))
        front = plain_front_end(text)
        for query in (TITLES[key],) + QUERIES:
            terms = query_terms(query)[0]
            counts["pairs"] += 1
            before = choose_windows(text, terms, 500, 1)
            now = choose_windows(text, terms, 500, 1, body_start=front)
            if not before:
                continue
            counts["with_a_window"] += 1
            counts["front_before"] += before[0].start < front
            if now and now[0].start < front:
                counts["front_now"] += 1
                counts["front_now_only_match"] += not choose_windows(text[front:], terms, 500, 1)
    print(f"8. snippets opening on the front matter of the real PDFs (500 characters, {len(texts)} papers x "
          f"{1 + len(QUERIES)} queries): {json.dumps(counts)}")
    return counts


# an entry-like line: "[12] ..." or "Smith, J., Doe, K. ... 2019" / "J. Smith and K. Doe. 2019."
_ENTRY_LINE = re.compile(r"^\s*(?:\[\d{1,3}\]\s|[A-Z][a-z]+,\s(?:[A-Z]\.\s?){1,3}|(?:[A-Z]\.\s){1,2}[A-Z][a-z]+,?\s)"
                         r".*(?<!\d)(?:19|20)\d\d(?!\d)")


def past_the_list(data: Path, texts: dict[str, str], show: int) -> dict:
    """Measurement 9."""
    from chitragupta.engine.text.refcut import plain_reference_span

    sources = {f"semeval2010/{rec['_id']}": rec["text"] for rec in read_jsonl(data / "semeval2010" / "corpus.jsonl")}
    sources.update({f"pdfs/{k}": t for k, t in texts.items()})
    counts = {"sources": len(sources), "cut": 0, "kept_after": 0, "with_entry_lines_after": 0}
    for key, text in sources.items():
        span = plain_reference_span(text)
        if span is None:
            continue
        counts["cut"] += 1
        end = span[1]
        if end >= len(text):
            continue
        counts["kept_after"] += 1
        line = text[end:].split("\n", 1)[0].strip()
        before = text[:end].rstrip().rsplit("\n", 1)[-1].strip()
        entries = [ln.strip() for ln in text[end:].split("\n") if _ENTRY_LINE.match(ln)]
        counts["with_entry_lines_after"] += bool(entries)
        print(f"   {key}: ends at {line[:60]!r} (after {before[-50:]!r}); {len(text[end:].split())} words kept, "
              f"{len(entries)} entry-like lines" + (f": {entries[:min(show, 3)]}" if entries else ""))
    print(f"9. text kept after the reference list (plain rule): {json.dumps(counts)}")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.refcut", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="the evaluation data folder (default ../shared/data)")
    ap.add_argument("--show", type=int, default=10, help="disagreements and false cuts to print (default 10)")
    args = ap.parse_args(argv)
    data = data_dir(args.data)
    try:
        import docling  # noqa: F401
    except ImportError:
        have_docling = False
        print("docling is not installed (pip install -e '.[docling]'): measurements 1 and 2 skipped")
    else:
        have_docling = True
    if have_docling:
        semeval(data, args.show)
        docling_outputs(data)
    pdfs(data)
    false_cuts(data, args.show)
    guards(data)
    texts = _pdf_texts(data)
    kept_and_cut(data, have_docling, texts)
    hyphens(texts, args.show)
    front_matter(texts)
    past_the_list(data, texts, args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
