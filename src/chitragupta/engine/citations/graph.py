"""The library's citation graph: who cites whom inside the library, and which works several sources cite
that the library lacks.

    g = CitationGraph.open(ws)                    # the ledger's rows and every source's parsed entries
    g.refs("smith2020")                           # its entries, in order, each with the citekey it names
    g.cites("smith2020"); g.cited_by("jones2019", filters=Filters(year=(2019, None)))
    g.missing(min_count=2, k=50)                  # most-cited first; MissingEntry.to_dict() is the JSON
    g.to_json(); g.to_graphml(); g.to_dot(); g.missing_bibtex(g.missing())

Resolution is ``resolve.py``'s. Nodes are the library's sources (ids: their citekeys) and the missing works
cited by at least ``min_count`` sources; an edge is one citing source's entry naming the target (a source
citing the same work twice gives one edge, the first entry's). Filters (``engine/search/filters.py``) apply to the
citing sources: ``cited_by`` lists only citing sources that match, ``missing`` counts only them. An unknown
citekey is the UsageError ``similar`` gives (naming the closest citekeys).

``open`` keeps its resolution in ``content/citation_graph.json`` (``GRAPH_FILE``: each entry's target,
why an entry stayed unresolved, and the missing works as positions of their entries), keyed by what it
depends on -- ``GRAPH_RULES`` and the entry rules, every ledger row's citekey, title, year, DOI and venue,
and each stored entries file's fingerprint -- so a new process (``cited-by``, ``missing``, ``graph``, the
MCP server's first call) reads the entries and that file instead of resolving again. Written atomically
(not fsynced: it is rebuilt when lost); one of another library or other rules is redone quietly, a
damaged one is redone with a note (``notes``); a workspace that cannot be written keeps none. A library
whose stored lists hold no entry (abstracts only) keeps no resolution: ``open`` reads no ledger row until a
question needs one (``missing`` needs none; ``cited_by`` reads them once), so at 1M sources it costs what
``all_references`` costs, not a pass over every row. Entries written by a build of the same process are
taken from it, not read back (``store._Handover``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chitragupta.engine.citations.resolve import Library, MissingWork, Resolution, no_gc, resolve
from chitragupta.errors import UsageError

__all__ = ["CitationGraph", "MissingEntry", "ENTRY_FIELDS", "GRAPH_FILE", "GRAPH_RULES"]

GRAPH_FILE = "citation_graph.json"  # in content/: the last resolution, kept for a new process (``open``)
GRAPH_RULES = 1  # bumped whenever resolution or clustering rules change: every kept resolution is redone

ENTRY_FIELDS = ("n", "text", "authors", "year", "title", "venue", "doi", "arxiv", "url")
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class MissingEntry:
    """A work the library lacks, as ``missing`` reports it: ``citing`` the citing citekeys counted (those
    the filters allow), ``count`` how many."""

    title: str
    year: int | None
    authors: tuple[str, ...]
    citing: tuple[str, ...]
    venue: str | None = None
    doi: str | None = None
    arxiv: str | None = None
    members: tuple = field(default=(), compare=False, repr=False)  # (citing citekey, its first entry) each

    @property
    def count(self) -> int:
        return len(self.citing)

    def to_dict(self) -> dict:
        return {"title": self.title, "year": self.year, "authors": list(self.authors), "citing": list(self.citing),
                "count": self.count}


class _Keys:
    """A list of citekeys as ``engine.search.near_citekeys`` reads an index's table."""

    def __init__(self, keys):
        self._keys = list(keys)

    def to_list(self) -> list[str]:
        return self._keys


class CitationGraph:
    """Built from ledger rows and ``{citekey: [Entry]}`` (``open`` reads both from a workspace);
    ``facets``: ``metadata.Facets`` for filters (None: filters refused); ``rows`` and ``facets`` may be
    callables giving them, called when first needed (``open`` of a library without entries); ``stored``:
    False when no entries were ever stored (``notes`` then says to run ``index``)."""

    def __init__(self, rows, references: dict[str, list], facets=None, *, stored: bool = True,
                 resolution: Resolution | None = None):
        self.stored = stored
        self._row_source = rows if callable(rows) else list(rows)  # a callable: read when first asked
        self._rows_d: dict | None = None
        self._library: Library | None = None
        self.references = {k: list(v) for k, v in references.items() if v is not None}
        if resolution is None:
            # no entry at all (a library of abstracts): nothing to resolve, and the library's titles are
            # not normalised until a filter asks for its citekeys
            resolution = resolve(self.library, self.references) if any(self.references.values()) \
                else Resolution({}, {}, [])
        self.resolution = resolution
        self._notes: list[str] = []
        self._facets = facets
        self._facet_table = None
        self._out: dict[str, list[tuple[str, object]]] = {}
        self._in: dict[str, list[tuple[str, object]]] = {}
        # the resolved entries (most are not), in the sources' order and each source's entry order
        order = {k: n for n, k in enumerate(self.references)}
        hits = sorted((order[c], i, c, t) for (c, i), t in self.resolution.target.items()
                      if t is not None and t != c and c in order and 0 <= i < len(self.references[c]))
        seen: set[tuple[str, str]] = set()
        for _n, i, citing, t in hits:
            if (citing, t) in seen:
                continue
            seen.add((citing, t))
            e = self.references[citing][i]
            self._out.setdefault(citing, []).append((t, e))
            self._in.setdefault(t, []).append((citing, e))

    @property
    def _row_list(self) -> list:
        src = self._row_source  # read once: another thread may set it meanwhile (the same rows)
        if callable(src):
            src = self._row_source = list(src())
        return src

    @property
    def _rows(self) -> dict:
        if self._rows_d is None:
            self._rows_d = {r.citekey: r for r in self._row_list}
        return self._rows_d

    @property
    def library(self) -> Library:
        """The library's sources as resolution matches them (made when first needed)."""
        if self._library is None:
            self._library = Library.from_rows(self._row_list)
        return self._library

    @classmethod
    def open(cls, ws) -> "CitationGraph":
        """The graph of a workspace (an open ``Workspace``): its ledger and its stored entries."""
        from chitragupta.engine.citations.store import all_references, refs_folder
        from chitragupta.engine.library.ledger import Ledger
        from chitragupta.engine.library.metadata import facets


        with no_gc():
            fps: dict[str, str] = {}
            refs = all_references(ws, fingerprints=fps)
            stored = refs_folder(ws).is_dir()
            notes: list[str] = []
            if not any(refs.values()):
                # no entry to resolve: no resolution to key, keep or read back, and the ledger's rows and
                # facets read only when a question needs them (``missing`` needs neither)
                def rows_():
                    with Ledger(ws.ledger_path, create=False) as ledger:
                        return ledger.rows()

                def facets_():
                    with Ledger(ws.ledger_path, create=False) as ledger:
                        return facets(ledger)

                g = cls(rows_, refs, facets_, stored=stored)
                g._notes = notes
                return g
            with Ledger(ws.ledger_path, create=False) as ledger:
                rows = ledger.rows()
                fac = facets(ledger)
            key = _graph_key(rows, refs, fps)
            path = ws.inside_content(ws.content / GRAPH_FILE)
            got = _load_resolution(path, key, refs, notes) if stored else None
            g = cls(rows, refs, fac, stored=stored, resolution=got)
            g._notes = notes
            if got is None and stored:
                _save_resolution(path, key, g.resolution, refs)
            return g

    @classmethod
    def of_source(cls, ws, citekey: str) -> "CitationGraph":
        """A graph that answers ``refs`` and ``cites`` for one source (its entries resolved against the
        whole library; nobody else's entries read): what a one-off command about one source needs, at a
        fraction of ``open``'s cost. ``cited_by`` and ``missing`` need ``open``."""
        from chitragupta.engine.citations.store import references_of, refs_folder
        from chitragupta.engine.library.ledger import Ledger

        with Ledger(ws.ledger_path, create=False) as ledger:
            rows = ledger.rows()
        got = references_of(ws, citekey) if any(r.citekey == citekey for r in rows) else None
        return cls(rows, {} if got is None else {citekey: got}, stored=refs_folder(ws).is_dir())

    def notes(self) -> list[str]:
        """What a user should know about the graph as a whole."""
        if not self.stored:
            return ["no reference entries are stored yet: run `chitragupta index` to parse the reference lists"]
        return list(self._notes)

    # -- questions -----------------------------------------------------------------------------------
    def _check(self, citekey: str) -> None:
        if not isinstance(citekey, str) or citekey not in self._rows:
            from chitragupta.engine.search.bm25 import near_citekeys

            raise UsageError(f"unknown citekey {citekey!r}" + near_citekeys(str(citekey), _Keys(sorted(self._rows))))

    def _title(self, citekey: str) -> str:
        r = self._rows.get(citekey)
        return r.title if r is not None else ""

    def refs(self, citekey: str) -> list[dict]:
        """The source's entries, in order: ``ENTRY_FIELDS`` and ``citekey`` (the library source the entry
        names, or None)."""
        self._check(citekey)
        out = []
        for i, e in enumerate(self.references.get(citekey, ())):
            d = {f: getattr(e, f, None) for f in ENTRY_FIELDS}
            d["authors"] = list(d["authors"] or ())
            d["citekey"] = self.resolution.target.get((citekey, i))
            out.append(d)
        return out

    def refs_notes(self, citekey: str) -> list[str]:
        self._check(citekey)
        if citekey not in self.references:
            return [f"{citekey}: no reference list was found in its text (or it has no parsed text)"]
        if not self.references[citekey]:
            return [f"{citekey}: its reference list holds no entry"]
        return []

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

    def missing(self, min_count: int = 2, k: int = 50, filters=None) -> list[MissingEntry]:
        """Works the library lacks that at least ``min_count`` sources (those ``filters`` allow) cite, most
        cited first (then by title), at most ``k``."""
        for name, v in (("min_count", min_count), ("k", k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be a whole number >= 1, got {v!r}")
        allowed = self._allowed(filters)
        out = []
        for w in self.resolution.missing:
            citing = tuple(c for c in w.citing if allowed is None or c in allowed)
            if len(citing) >= min_count:
                out.append(_entry(w, citing))
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

        fac = self._facets
        if callable(fac):
            fac = self._facets = fac()
        if fac is None:
            raise UsageError("filters need the ledger's metadata; open the graph with CitationGraph.open(ws)")
        if self._facet_table is None:
            self._facet_table = FacetTable(fac, self.library.keys)
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
        edges = []
        for citing in sorted(self._out):
            for t, e in self._out[citing]:
                edges.append({"source": citing, "target": t, "kind": "cites", "n": getattr(e, "n", None),
                              "text": e.text})
        taken = set(self._rows)
        works = self.missing(min_count=min_count, k=max(1, len(self.resolution.missing)))
        for i, m in enumerate(works, start=1):
            wid = f"missing:{i}"
            while wid in taken:
                wid = "_" + wid
            taken.add(wid)
            nodes.append({"id": wid, "kind": "missing", "title": m.title, "year": m.year,
                          "authors": list(m.authors), "count": m.count})
            for citing, e in m.members:
                edges.append({"source": citing, "target": wid, "kind": "cites", "n": getattr(e, "n", None),
                              "text": e.text})
        return nodes, edges

    def to_json(self, min_count: int = 2) -> dict:
        """``{"nodes": [...], "edges": [{"source", "target", "kind", "n", "text"}]}``: library sources
        (``kind`` "source", id the citekey) and missing works cited by ``min_count`` or more (``kind``
        "missing", id ``missing:N`` in most-cited order)."""
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
            if value is None:
                return
            d = ET.SubElement(el, "data", {"key": key})
            d.text = _XML_BAD.sub(" ", str(value))

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
        """The graph in Graphviz DOT: sources as boxes labelled by citekey and year, missing works as
        dashed ellipses labelled by title and count."""
        nodes, edges = self._graph(min_count)
        lines = ["digraph citations {", "  rankdir=LR;", "  node [shape=box];"]
        for nd in nodes:
            if nd["kind"] == "source":
                label = nd["id"] + (f" ({nd['year']})" if nd["year"] is not None else "")
                lines.append(f"  {_dot(nd['id'])} [label={_dot(label)}, tooltip={_dot(nd['title'])}];")
            else:
                label = _short(nd["title"], 60) + f"\n(cited by {nd['count']})"
                lines.append(f"  {_dot(nd['id'])} [label={_dot(label)}, shape=ellipse, style=dashed];")
        for ed in edges:
            lines.append(f"  {_dot(ed['source'])} -> {_dot(ed['target'])};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def missing_bibtex(self, works) -> str:
        """BibTeX entries for missing works (``missing``'s): title, authors (family names), year, venue, DOI
        and arXiv id where the citing entries print them; keys ``family<year><word>``, made unique and never
        a library citekey."""
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


def _entry(w: MissingWork, citing: tuple[str, ...]) -> MissingEntry:
    first: dict[str, object] = {}
    for c, e in w.members:
        first.setdefault(c, e)
    return MissingEntry(w.title, w.year, tuple(w.authors), citing, w.venue, w.doi, w.arxiv,
                        tuple((c, first[c]) for c in citing))


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


def tex_escape(s: str) -> str:
    """``s`` as a BibTeX field value that LaTeX (and a LaTeX-decoding reader) reads back as ``s``."""
    return _TEX_RE.sub(lambda m: _TEX[m.group()], " ".join(_XML_BAD.sub(" ", s).split()))


_PROCEEDINGS = re.compile(r"proc\.|proceedings|conference|workshop|symposium|meeting", re.IGNORECASE)


def _bib_fields(w) -> tuple[str, list[tuple[str, str]]]:
    fields = [("title", tex_escape(w.title))]
    if w.authors:
        fields.append(("author", " and ".join(tex_escape(a) for a in w.authors)))
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
    while key in taken:
        n += 1
        key = base + _suffix(n)
    return key


def _suffix(n: int) -> str:
    s = ""
    while n:
        n, r = divmod(n - 1, 26)
        s = chr(97 + r) + s
    return s


# -- the kept resolution ----------------------------------------------------------------------------

def _graph_key(rows, refs: dict[str, list], fps: dict[str, str]) -> str:
    """What a resolution depends on: the rules, the library as resolution reads it (each row's citekey,
    title, year, DOI and venue, in ledger order) and each citing source's stored entries (their file's
    fingerprint: its text and the entry rules), in order."""
    import hashlib
    import json

    from chitragupta.engine.citations.store import RULES

    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([GRAPH_RULES, RULES, [[r.citekey, r.title, r.year, r.doi, r.venue] for r in rows],
                         [[k, fps.get(k)] for k in refs]], ensure_ascii=False, default=str).encode("utf-8"))
    return h.hexdigest()


def _save_resolution(path, key: str, res: Resolution, refs: dict[str, list]) -> None:
    """``res`` as JSON at ``path`` (atomically; not durable: it is rebuilt when lost); a workspace that
    cannot be written keeps none."""
    import json

    from chitragupta.files import atomic_write_bytes

    pos: dict[int, tuple[str, int]] = {}  # made only for a work that does not carry its positions

    def at(w) -> list:
        if len(w.at) == len(w.members):  # (set by ``resolve`` and ``_load_resolution`` over these entries)
            return w.at
        if not pos:
            pos.update({id(e): (k, i) for k, entries in refs.items() for i, e in enumerate(entries)})
        return [pos[id(e)] for _k, e in w.members]

    targets = {k: [res.target.get((k, i)) for i in range(len(entries))] for k, entries in refs.items()}
    why: dict[str, dict[str, str]] = {}
    for (k, i), w in res.why.items():
        why.setdefault(k, {})[str(i)] = w
    # (a member's (citekey, position) tuple is written as the JSON array a list would be)
    missing = [[w.title, w.year, list(w.authors), w.venue, w.doi, w.arxiv, at(w)] for w in res.missing]
    data = {"rules": GRAPH_RULES, "key": key, "target": targets, "why": why, "missing": missing}
    try:
        atomic_write_bytes(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                           durable=False, tag="graph")
    except OSError:
        pass


def _load_resolution(path, key: str, refs: dict[str, list], notes: list[str]) -> Resolution | None:
    """The resolution kept at ``path`` when it was made for ``key``; None when there is none or it is of
    other sources or rules (rebuilt then), with a note when the file is damaged."""
    from chitragupta.engine.citations.store import _NO_FILE, read_json

    try:
        data = read_json(path)
    except ValueError:
        notes.append(f"content/{GRAPH_FILE} is not a readable JSON file: the citation graph was rebuilt")
        return None
    if data is _NO_FILE:
        return None
    if not isinstance(data, dict) or data.get("rules") != GRAPH_RULES or data.get("key") != key:
        return None  # another library, other entries or other rules: rebuilt, as a matter of course
    try:
        target, why = {}, {}
        for k, entries in refs.items():
            got = data["target"][k]
            if not isinstance(got, list) or len(got) != len(entries):
                raise ValueError(k)
            for i, t in enumerate(got):
                if t is not None and not isinstance(t, str):
                    raise ValueError(k)
                target[(k, i)] = t
        for k, ws in data["why"].items():
            for i, w in ws.items():
                if (k, int(i)) not in target or not isinstance(w, str):
                    raise ValueError(k)
                why[(k, int(i))] = w
        missing = []
        for title, year, authors, venue, doi, arxiv, members in data["missing"]:
            if not (isinstance(title, str) and (year is None or isinstance(year, int)) and isinstance(authors, list)
                    and all(isinstance(a, str) for a in authors) and members
                    and all(isinstance(i, int) and i >= 0 for _k, i in members)):
                raise ValueError(title)
            missing.append(MissingWork(title, year, tuple(authors), venue, doi, arxiv,
                                       [(k, refs[k][i]) for k, i in members], [(k, i) for k, i in members]))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        notes.append(f"content/{GRAPH_FILE} does not hold a citation graph of this library: rebuilt")
        return None
    return Resolution(target, why, missing)
