"""The library's citation graph: who cites whom inside the library, and which works several sources cite
that the library lacks.

    g = CitationGraph.open(ws)                    # the ledger's rows, the stored entries, their resolution
    g.refs("smith2020"); g.cites("smith2020"); g.cited_by("jones2019", filters=Filters(year=(2019, None)))
    g.missing(min_count=2, k=50)                  # most-cited first; MissingWork.to_dict() is the JSON
    g.to_json(); g.to_graphml(); g.to_dot(); g.missing_bibtex(g.missing())

Resolution is ``resolve.py``'s, read where it was kept (``store.kept_links``), else made now. Nodes are the
library's sources (ids: citekeys) and the missing works cited by at least ``min_count`` sources; an edge is
one citing source's first entry naming the target. Filters (``engine/search/filters.py``) choose the citing
sources. An unknown citekey is the UsageError ``similar`` gives. ``of_source`` answers ``refs`` and
``cites`` of one source from its entries alone."""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

from chitragupta.engine.citations.resolve import Library, Resolution, kept, resolve
from chitragupta.errors import UsageError

__all__ = ["CitationGraph", "ENTRY_FIELDS", "tex_escape"]

ENTRY_FIELDS = ("n", "text", "authors", "year", "title", "venue", "doi", "arxiv", "url")
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class CitationGraph:
    """From ledger rows and ``{citekey: [Entry]}``; ``facets`` for filters (or a callable giving them;
    None: filters refused); ``resolution`` (else resolved here); ``stored``: False when no list was ever
    stored; ``list_notes``: citekey -> the notes its list earned."""

    def __init__(self, rows, references: dict[str, list], facets=None, *, stored: bool = True,
                 resolution: Resolution | None = None, list_notes: dict | None = None):
        self.stored = stored
        self._rows = {r.citekey: r for r in rows}
        self._library: Library | None = None
        self.references = {k: list(v) for k, v in references.items() if v is not None}
        self.resolution = resolution or resolve(self.library, self.references)
        self._notes: list[str] = []
        self._list_notes = list_notes or {}
        self._facets = facets
        self._facet_table = None
        self._out: dict[str, list[tuple[str, object]]] = {}
        self._in: dict[str, list[tuple[str, object]]] = {}
        for citing, entries in self.references.items():  # each (citing, target) pair once: its first entry
            for i, e in enumerate(entries):
                t = self.resolution.target.get((citing, i))
                if t is not None and t != citing and all(t != x for x, _e in self._out.get(citing, ())):
                    self._out.setdefault(citing, []).append((t, e))
                    self._in.setdefault(t, []).append((citing, e))

    @property
    def library(self) -> Library:
        """The library's sources as resolution matches them (made when first needed)."""
        if self._library is None:
            self._library = Library.from_rows(self._rows.values())
        return self._library

    @classmethod
    def open(cls, ws) -> "CitationGraph":
        """The graph of an open ``Workspace``: its rows, stored entries and their kept (or a new) resolution."""
        from chitragupta.engine.citations.store import all_references, kept_links
        from chitragupta.engine.library.ledger import Ledger
        from chitragupta.engine.library.metadata import facets

        with Ledger(ws.ledger_path, create=False) as ledger:
            rows = ledger.rows()
            refs = all_references(ws, ledger)
            links = kept_links(ledger)
            stored = any(ledger.reference_counts()[:2])

            def facets_():
                with Ledger(ws.ledger_path, create=False) as again:
                    return facets(again)

            return cls(rows, refs, facets_, stored=stored, resolution=None if links is None else kept(refs, links))

    @classmethod
    def of_source(cls, ws, citekey: str) -> "CitationGraph":
        """A graph that answers ``refs`` and ``cites`` for one source: its entries alone, resolved as kept or
        now (nobody else's entries read, no missing works)."""
        from chitragupta.engine.citations.store import _entry, kept_links
        from chitragupta.engine.library.ledger import Ledger

        with Ledger(ws.ledger_path, create=False) as ledger:
            rows = ledger.rows()
            got = ledger.reference_lists(citekey).get(citekey) if any(r.citekey == citekey for r in rows) else None
            rows_ = ledger.reference_rows("ref_entries", citekey) if got and got[2] else None
            refs = {} if rows_ is None else {citekey: [_entry(r) for r in rows_]}
            links = kept_links(ledger, citekey)
            stored = any(ledger.reference_counts()[:2])
        res = kept(refs, links) if links is not None else resolve(Library.from_rows(rows), refs, cluster=False)
        return cls(rows, refs, stored=stored, resolution=res, list_notes={citekey: got[3]} if got else {})

    def notes(self) -> list[str]:
        """What a user should know about the graph as a whole."""
        if not self.stored:
            return ["no reference entries are stored yet: run `chitragupta index` to parse the reference lists"]
        return list(self._notes)

    # -- questions -----------------------------------------------------------------------------------
    def _check(self, citekey: str) -> None:
        if not isinstance(citekey, str) or citekey not in self._rows:
            from chitragupta.engine.search.bm25 import near_citekeys

            near = near_citekeys(str(citekey), SimpleNamespace(to_list=lambda: sorted(self._rows)))
            raise UsageError(f"unknown citekey {citekey!r}" + near)

    def _title(self, citekey: str) -> str:
        r = self._rows.get(citekey)
        return r.title if r is not None else ""

    def refs(self, citekey: str) -> list[dict]:
        """The source's entries, in order: ``ENTRY_FIELDS`` and ``citekey`` (the source it names, or None)."""
        self._check(citekey)
        out = []
        for i, e in enumerate(self.references.get(citekey, ())):
            d = {f: getattr(e, f, None) for f in ENTRY_FIELDS}
            d["authors"] = list(d["authors"] or ())
            d["citekey"] = self.resolution.target.get((citekey, i))
            out.append(d)
        return out

    def refs_notes(self, citekey: str, parse: bool = True) -> list[str]:
        """Why the source has no entries; ``parse``: and the notes its list's parse earned."""
        self._check(citekey)
        if citekey not in self.references:
            return [f"{citekey}: no reference list was found in its text (or it has no parsed text)"]
        if not self.references[citekey]:
            return [f"{citekey}: its reference list holds no entry"]
        return [f"{citekey}: {n}" for n in self._list_notes.get(citekey, ())] if parse else []

    def cites(self, citekey: str) -> list[dict]:
        """The library sources ``citekey`` cites: ``{"citekey", "title", "text"}`` (the entry), entry order."""
        self._check(citekey)
        return [{"citekey": t, "title": self._title(t), "text": e.text} for t, e in self._out.get(citekey, ())]

    def cited_by(self, citekey: str, filters=None) -> list[dict]:
        """The library sources citing ``citekey`` (only those ``filters`` allow): ``{"citekey", "title",
        "text"}`` (the citing entry), in citekey order."""
        self._check(citekey)
        allowed = self._allowed(filters)
        got = sorted(self._in.get(citekey, ()), key=lambda t: t[0])
        return [{"citekey": c, "title": self._title(c), "text": e.text} for c, e in got
                if allowed is None or c in allowed]

    def missing(self, min_count: int = 2, k: int = 50, filters=None) -> list:
        """Works the library lacks (``resolve.MissingWork``) that at least ``min_count`` sources (those
        ``filters`` allow) cite, most cited first (then by title), at most ``k``; a work's ``members`` are
        its citing sources counted, each with its first entry."""
        for name, v in (("min_count", min_count), ("k", k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be a whole number >= 1, got {v!r}")
        allowed = self._allowed(filters)
        out = []
        for w in self.resolution.missing:  # each citing source counted once, by its first entry
            firsts = {c: e for c, e in reversed(w.members) if allowed is None or c in allowed}
            if len(firsts) >= min_count:
                out.append(replace(w, members=[(c, firsts[c]) for c in w.citing if c in firsts]))
        out.sort(key=lambda m: (-m.count, m.title.casefold(), m.year or 0))
        return out[:k]

    def filter_notes(self, filters) -> list[str]:
        """What filtering the citing sources left out for lack of a value (as a search's notes say)."""
        f = self._filters(filters)
        if f is None:
            return []
        _, missing = f.mask(self._table(), self.library.keys)
        return [f"{n} source(s) have no {name} and were excluded by the {name} filter"
                for name, n in missing.items() if n]

    def _filters(self, filters):
        from chitragupta.engine.search.filters import to_filters

        return to_filters(filters)

    def _table(self):
        from chitragupta.engine.search.filters import FacetTable

        if callable(self._facets):
            self._facets = self._facets()
        if self._facets is None:
            raise UsageError("filters need the ledger's metadata; open the graph with CitationGraph.open(ws)")
        if self._facet_table is None:
            self._facet_table = FacetTable(self._facets, self.library.keys)
        return self._facet_table

    def _allowed(self, filters) -> set[str] | None:
        f = self._filters(filters)
        if f is None:
            return None
        mask, _ = f.mask(self._table(), self.library.keys)
        return {k for k, ok in zip(self.library.keys, mask.tolist()) if ok}

    # -- the whole graph -----------------------------------------------------------------------------
    def _graph(self, min_count: int = 2) -> tuple[list[dict], list[dict]]:
        nodes = [{"id": k, "kind": "source", "title": r.title, "year": r.year} for k, r in sorted(self._rows.items())]
        edges = [{"source": citing, "target": t, "kind": "cites", "n": getattr(e, "n", None), "text": e.text}
                 for citing in sorted(self._out) for t, e in self._out[citing]]
        taken = set(self._rows)
        for i, m in enumerate(self.missing(min_count=min_count, k=max(1, len(self.resolution.missing))), start=1):
            wid = f"missing:{i}"
            while wid in taken:
                wid = "_" + wid
            taken.add(wid)
            nodes.append({"id": wid, "kind": "missing", "title": m.title, "year": m.year,
                          "authors": list(m.authors), "count": m.count})
            edges += [{"source": citing, "target": wid, "kind": "cites", "n": getattr(e, "n", None), "text": e.text}
                      for citing, e in m.members]
        return nodes, edges

    def to_json(self, min_count: int = 2) -> dict:
        """``{"nodes": [...], "edges": [{"source", "target", "kind", "n", "text"}]}``: sources (``kind``
        "source", id the citekey) and missing works (``kind`` "missing", id ``missing:N``, most cited first)."""
        nodes, edges = self._graph(min_count)
        return {"nodes": nodes, "edges": edges}

    def to_graphml(self, min_count: int = 2) -> str:
        """The graph as GraphML (networkx.read_graphml, Gephi)."""
        import xml.etree.ElementTree as ET

        nodes, edges = self._graph(min_count)
        root = ET.Element("graphml", {"xmlns": "http://graphml.graphdrawing.org/xmlns"})
        keys = (("node", "kind", "string"), ("node", "title", "string"), ("node", "year", "int"),
                ("node", "count", "int"), ("edge", "n", "int"), ("edge", "text", "string"))
        for what, name, typ in keys:
            ET.SubElement(root, "key", {"id": f"{what[0]}_{name}", "for": what, "attr.name": name, "attr.type": typ})
        g = ET.SubElement(root, "graph", {"id": "citations", "edgedefault": "directed"})

        def data(el, key, value):
            if value is not None:
                ET.SubElement(el, "data", {"key": key}).text = _XML_BAD.sub(" ", str(value))

        for nd in nodes:
            el = ET.SubElement(g, "node", {"id": _XML_BAD.sub(" ", nd["id"])})
            for name in ("kind", "title", "year", "count"):
                data(el, f"n_{name}", nd.get(name))
        for ed in edges:
            el = ET.SubElement(g, "edge", {"source": _XML_BAD.sub(" ", ed["source"]),
                                           "target": _XML_BAD.sub(" ", ed["target"])})
            data(el, "e_n", ed.get("n"))
            data(el, "e_text", ed.get("text"))
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def to_dot(self, min_count: int = 2) -> str:
        """The graph in Graphviz DOT: sources as boxes, missing works as dashed ellipses."""
        nodes, edges = self._graph(min_count)
        lines = ["digraph citations {", "  rankdir=LR;", "  node [shape=box];"]
        for nd in nodes:
            if nd["kind"] == "source":
                label = nd["id"] + (f" ({nd['year']})" if nd["year"] is not None else "")
                lines.append(f"  {_dot(nd['id'])} [label={_dot(label)}, tooltip={_dot(nd['title'])}];")
            else:
                label = _short(nd["title"], 60) + f"\n(cited by {nd['count']})"
                lines.append(f"  {_dot(nd['id'])} [label={_dot(label)}, shape=ellipse, style=dashed];")
        lines += [f"  {_dot(ed['source'])} -> {_dot(ed['target'])};" for ed in edges]
        return "\n".join(lines + ["}"]) + "\n"

    def missing_bibtex(self, works) -> str:
        """BibTeX entries for missing works (``missing``'s): title, authors (as the entries print them,
        family name first: "Lo, Kyle"), year, venue, DOI and arXiv id where the citing entries print them;
        keys ``family<year><word>``, made unique and never a library citekey."""
        import bibtexparser
        from bibtexparser import model

        lib = bibtexparser.Library()
        taken = set(self._rows)
        for w in works:
            key = _bibkey(w, taken)
            taken.add(key)
            etype, fields = _bib_fields(w)
            lib.add(model.Entry(etype, key, [model.Field(name, value) for name, value in fields]))
        return bibtexparser.write_string(lib)


def _short(s: str, n: int) -> str:
    s = " ".join((s or "").split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _dot(s: str) -> str:
    """A DOT quoted string."""
    s = _XML_BAD.sub(" ", str(s)).replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "\\n")
    return f'"{s}"'


_TEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_TEX_RE = re.compile(r"[\\{}&%$#_~^]")
_PROCEEDINGS = re.compile(r"proc\.|proceedings|conference|workshop|symposium|meeting", re.IGNORECASE)


def tex_escape(s: str) -> str:
    """``s`` as a BibTeX field value that LaTeX (and a LaTeX-decoding reader) reads back as ``s``."""
    return _TEX_RE.sub(lambda m: _TEX[m.group()], " ".join(_XML_BAD.sub(" ", s).split()))


def _bib_name(family: str, printed: str) -> str:
    """One author for BibTeX, family name first, the given names or initials as printed ("Kyle Lo" ->
    "Lo, Kyle"; "Lo, K." as it is); a family name alone braced when it is several words ("OGC of Harvard")."""
    if "," in printed:
        family, given = (x.strip() for x in printed.split(",", 1))
    elif printed.endswith(family):
        given = printed[:-len(family)].strip()
    else:
        given = printed[len(family):].strip() if printed.startswith(family) else ""
    if not given:
        return "{" + tex_escape(family) + "}" if " " in family else tex_escape(family)
    return f"{tex_escape(family)}, {tex_escape(given)}"


def _bib_fields(w) -> tuple[str, list[tuple[str, str]]]:
    fields = [("title", tex_escape(w.title))]
    if w.authors:
        names = w.names if len(w.names) == len(w.authors) else w.authors
        fields.append(("author", " and ".join(_bib_name(f, p) for f, p in zip(w.authors, names))))
    if w.year is not None:
        fields.append(("year", str(w.year)))
    etype = "misc"
    if w.venue:
        said_in = any(re.search(r"\bIn:?\s+(?:the\s+)?(?:Proc|" + re.escape(w.venue[:20]) + ")",
                                getattr(e, "text", "") or "") for _, e in w.members)
        if said_in or _PROCEEDINGS.search(w.venue):
            etype = "inproceedings"
            fields.append(("booktitle", tex_escape(w.venue)))
        elif "arxiv" in w.venue.lower():
            fields.append(("howpublished", tex_escape(w.venue)))
        else:
            etype = "article"
            fields.append(("journal", tex_escape(w.venue)))
    if w.doi:
        fields.append(("doi", tex_escape(w.doi)))
    if w.arxiv:
        fields.extend([("eprint", tex_escape(w.arxiv)), ("archiveprefix", "arXiv")])
    return etype, fields


def _bibkey(w, taken: set[str]) -> str:
    from chitragupta.engine.library.metadata import fold

    fam = re.sub(r"[^a-z0-9]", "", fold(w.authors[0])) if w.authors else ""
    word = next((t for t in re.sub(r"[^a-z0-9 ]", " ", fold(w.title)).split()
                 if len(t) > 3 and t not in {"with", "from", "that", "this", "their", "towards", "toward"}), "")
    base = (fam or "anon") + (str(w.year) if w.year is not None else "") + word
    key, n = base, 0
    while key in taken:  # base, then base + a, b, ..., z, aa, ab, ...
        n, m, key = n + 1, n + 1, ""
        while m:
            m, r = divmod(m - 1, 26)
            key = chr(97 + r) + key
        key = base + key
    return key
