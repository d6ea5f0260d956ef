"""The citation graph (engine/citations/resolve.py, graph.py; service/citations.py; the refs, cites,
cited-by, missing and graph commands; the MCP tools): resolution rules (identifiers first, title with the
year within one, ambiguity left unresolved, never a self-citation), missing-work clustering, filters on the
citing sources, every JSON shape, the exports, and the unknown-citekey error."""

from __future__ import annotations

import io
import json
import random
import xml.etree.ElementTree as ET

import pytest
from chitragupta.engine.citations.graph import CitationGraph, tex_escape
from chitragupta.engine.citations.resolve import Library, arxiv_of, norm_title, resolve
from chitragupta.engine.library.ledger import LedgerRow
from chitragupta.engine.text.entries import Entry
from chitragupta.errors import UsageError, WorkspaceError

from helpers import DOCS, make_workspace, run_main

REFS_KEYS = {"n", "text", "authors", "year", "title", "venue", "doi", "arxiv", "url", "citekey"}
EDGE_KEYS = {"citekey", "title", "text"}
MISSING_KEYS = {"title", "year", "authors", "citing", "count"}


def row(key, title, year=None, doi=None, venue=None):
    return LedgerRow(key, title, "parsed", "t.jsonl", year=year, doi=doi, venue=venue)


def e(n, title, year=None, authors=(), doi=None, arxiv=None, venue=None, text=None):
    text = text if text is not None else f"{', '.join(authors) or 'Anon'}. {title or ''}. {venue or 'J'}, {year or ''}."
    return Entry(n, text, tuple(authors), year, title, venue, doi, arxiv, None)


def targets(rows, refs):
    res = resolve(Library.from_rows(rows), refs)
    return res, {k: v for k, v in res.target.items()}


# -- normalising ------------------------------------------------------------------------------------

def test_norm_title_folds_case_accents_hyphens_and_punctuation():
    assert norm_title("BERT: Pre-training of Deep Bidirectional Transformers") == \
        norm_title("bert pretraining of deep bidirectional transformers")
    assert norm_title("Über die Müller–Funktion!") == "uber die muller funktion"
    assert norm_title("The Art of the Deal") == "art deal"
    assert norm_title(None) == "" and norm_title("  ...  ") == ""


def test_arxiv_ids_from_dois_venues_and_texts():
    assert arxiv_of(doi="10.48550/arxiv.2005.14165") == "2005.14165"
    assert arxiv_of("arXiv preprint arXiv:1810.04805v2") == "1810.04805"
    assert arxiv_of("https://arxiv.org/abs/1706.03762") == "1706.03762"
    assert arxiv_of("CoRR abs/1706.03762, arXiv") is not None
    assert arxiv_of("Journal of Things 12(3), 2019") is None
    assert arxiv_of("ArXiv abs/2022.99999 (2022)") is None  # no month 99: a misprint is no id


# -- resolution -------------------------------------------------------------------------------------

def test_title_resolves_with_the_year_within_one_and_not_beyond():
    rows = [row("a", "Deep residual learning for image recognition", 2016), row("c", "A citing paper", 2020)]
    refs = {"c": [e(1, "Deep Residual Learning for Image Recognition", 2016),
                  e(2, "Deep residual learning for image-recognition", 2017),
                  e(3, "Deep residual learning for image recognition", 2018),
                  e(4, "Deep residual learning for image recognition", None),
                  e(5, "Shallow residual learning for sound recognition", 2016)]}
    res, t = targets(rows, refs)
    assert [t[("c", i)] for i in range(5)] == ["a", "a", None, "a", None]
    assert res.why[("c", 2)] == "none" and res.why[("c", 4)] == "none"


def test_doi_and_arxiv_come_before_the_title_and_a_conflicting_id_refuses_a_title_match():
    rows = [row("a", "Attention is all you need", 2017, doi="10.5555/aaa"),
            row("b", "Something else entirely", 2017, doi="10.5555/bbb"),
            row("gpt3", "Language models are few-shot learners", 2020, venue="arXiv preprint arXiv:2005.14165"),
            row("c", "Citing", 2021)]
    refs = {"c": [e(1, "Attention is all you need", 2017, doi="10.5555/BBB"),  # the DOI says b
                  e(2, "Attention is all you need", 2017, doi="10.5555/zzz"),  # a's title, another DOI: no
                  e(3, None, None, arxiv="2005.14165v3", text="Brown et al. arXiv:2005.14165, 2020."),
                  e(4, "Language models are few shot learners", 2020, arxiv="1901.00002"),  # another arXiv id
                  e(5, "Attention is all you need", 2017)]}
    _, t = targets(rows, refs)
    assert [t[("c", i)] for i in range(5)] == ["b", None, "gpt3", None, "a"]


def test_arxiv_doi_of_a_library_source_matches_an_entry_arxiv_id():
    rows = [row("x", "Some title here", 2019, doi="10.48550/arXiv.1901.00001"), row("c", "Citing", 2021)]
    _, t = targets(rows, {"c": [e(1, "A garbled title", 2019, arxiv="1901.00001")]})
    assert t[("c", 0)] == "x"


def test_two_equally_close_sources_leave_the_entry_unresolved_and_not_missing():
    rows = [row("a1", "Graph neural networks for ranking", 2019), row("a2", "Graph neural networks for ranking", 2019),
            row("b1", "Sparse retrieval with learned weights", 2020),
            row("b2", "Sparse retrieval with learned weight", 2020),
            row("c", "Citing one", 2021), row("d", "Citing two", 2021)]
    refs = {k: [e(1, "Graph neural networks for ranking", 2019), e(2, "Sparse retrieval with learned weightz", 2020)]
            for k in ("c", "d")}
    res, t = targets(rows, refs)
    assert t[("c", 0)] is None and res.why[("c", 0)] == "ambiguous"
    assert t[("c", 1)] is None and res.why[("c", 1)] == "ambiguous"
    assert res.missing == []  # the library holds these works; they are not "missing"
    # and the same ids shared by two sources are ambiguous too
    rows2 = [row("a", "One", 2019, doi="10.1000/x"), row("b", "Two", 2019, doi="10.1000/x"), row("c", "C", 2020)]
    res2, t2 = targets(rows2, {"c": [e(1, "One", 2019, doi="10.1000/x")]})
    assert t2[("c", 0)] is None and res2.why[("c", 0)] == "ambiguous"


def test_a_source_never_cites_itself():
    rows = [row("a", "Self-supervised learning of speech", 2020, doi="10.1000/self"),
            row("b", "Self-supervised learning of speech", 2020)]
    refs = {"a": [e(1, "Self-supervised learning of speech", 2020)],  # names a (itself) and b: b
            "b": [e(1, "Self-supervised learning of speech", 2020, doi="10.1000/self"),  # a by DOI
                  e(2, "Self-supervised learning of speech", 2021)]}
    res, t = targets(rows, refs)
    assert t[("a", 0)] is None and res.why[("a", 0)] == "self"  # its own best match: dropped, not b
    assert t[("b", 0)] == "a"
    assert t[("b", 1)] is None and res.why[("b", 1)] == "self"
    g = CitationGraph(rows, refs)
    assert all(ed["source"] != ed["target"] for ed in g.to_json()["edges"])
    assert g.missing(min_count=1) == []


def test_missing_works_cluster_by_ids_and_by_close_titles_with_the_year_within_one():
    rows = [row(k, f"Library paper {k}", 2020) for k in ("p", "q", "r", "s")]
    lstm = ["Long short-term memory", "Long Short Term Memory", "Long short-term memory.", "Long short-term memory"]
    refs = {
        "p": [e(1, lstm[0], 1997, ("Hochreiter",), venue="Neural Computation"), e(2, "Dropout: a simple way", 2014,
              doi="10.1000/drop"), e(3, "An old survey of things", 1990)],
        "q": [e(1, lstm[1], 1997, ("Hochreiter", "Schmidhuber")), e(2, "Totally garbled", None, doi="10.1000/DROP"),
              e(3, "An old survey of things", 1993)],
        "r": [e(1, lstm[2], 1998), e(2, "A lonely work cited once", 2001)],
        "s": [e(1, lstm[3], None), e(2, None, None, text="[2] unparseable entry")],
    }
    g = CitationGraph(rows, refs)
    got = {m.title: m for m in g.missing(min_count=2)}
    assert set(got) == {"Long short-term memory", "Dropout: a simple way"}
    assert got["Long short-term memory"].count == 4 and got["Long short-term memory"].year == 1997
    assert got["Long short-term memory"].citing == ["p", "q", "r", "s"]
    assert got["Dropout: a simple way"].citing == ["p", "q"]
    ones = [m.title for m in g.missing(min_count=1, k=100)]
    assert "A lonely work cited once" in ones and ones.count("An old survey of things") == 2  # 3 years apart
    assert [m.count for m in g.missing(min_count=1, k=100)] == sorted((m.count for m in g.missing(1, 100)),
                                                                       reverse=True)
    assert len(g.missing(min_count=1, k=2)) == 2
    with pytest.raises(UsageError, match="k must be"):
        g.missing(k=0)
    with pytest.raises(UsageError, match="min_count must be"):
        g.missing(min_count=True)


def _brute(lib_rows, refs):
    """The rules applied to every (entry, source) pair: the title path only (no identifiers here)."""
    from rapidfuzz.fuzz import ratio

    out = {}
    norm = {r.citekey: norm_title(r.title) for r in lib_rows}
    for k, entries in refs.items():
        for i, en in enumerate(entries):
            t = norm_title(en.title)
            scored = []
            for r in lib_rows:
                if en.year is not None and r.year is not None and abs(en.year - r.year) > 1:
                    continue
                s = ratio(t, norm[r.citekey])
                if s >= (90 if en.year is not None and r.year is not None else 95):
                    scored.append((s, r.citekey))
            scored.sort(key=lambda x: -x[0])
            if not scored or scored[0][1] == k:
                out[(k, i)] = None
                continue
            rivals = [c for s, c in scored[1:] if s >= scored[0][0] - 3 and c != k]
            out[(k, i)] = None if rivals else scored[0][1]
    return out


def test_blocked_resolution_equals_every_pair_compared():
    rng = random.Random(5)
    words = [f"w{i}" + "x" * (i % 4) for i in range(900)]
    lib = [row(f"s{i}", " ".join(rng.sample(words, rng.randint(3, 9))), rng.randint(1990, 2024)) for i in range(400)]
    refs = {}
    for r in lib[:120]:
        entries = []
        for n in range(12):
            src = rng.choice(lib)
            toks = src.title.split()
            roll = rng.random()
            if roll < 0.3:
                toks[rng.randrange(len(toks))] = rng.choice(words)  # one word wrong
            elif roll < 0.4:
                toks = rng.sample(words, len(toks))  # another work
            title = " ".join(toks).upper() if rng.random() < 0.2 else " ".join(toks)
            dy = rng.choice([0, 0, 0, 1, -1, 2, None])
            y = None if dy is None else src.year + dy
            entries.append(e(n + 1, title, y, text=f"A. Author. {title}. Venue."))
        refs[r.citekey] = entries
    res, t = targets(lib, refs)
    assert t == _brute(lib, refs)
    assert sum(v is not None for v in t.values()) > 500  # the test resolves plenty


# -- the graph's answers and exports --------------------------------------------------------------------

def _graph():
    rows = [row("vaswani2017", 'Attention Is All You Need "quoted" & more', 2017),
            row("devlin2019", "BERT: Pre-training of Deep Bidirectional Transformers", 2019),
            row("lonely", "Nobody cites me", 2010)]
    refs = {"devlin2019": [e(1, 'Attention is all you need "quoted" & more', 2017, ("Vaswani",),
                             text='Vaswani et al. Attention is all you need "quoted" & more. In NIPS, 2017.'),
                           e(2, "Long short-term memory", 1997, ("Hochreiter",), venue="Neural Computation")],
            "vaswani2017": [e(1, "Long short-term memory", 1997, ("Hochreiter", "Schmidhuber")),
                            e(2, 'Attention is all you need "quoted" & more', 2017)]}
    return CitationGraph(rows, refs)


def test_refs_cites_cited_by_and_missing_shapes():
    g = _graph()
    refs = g.refs("devlin2019")
    assert [r["n"] for r in refs] == [1, 2] and all(set(r) == REFS_KEYS for r in refs)
    assert refs[0]["citekey"] == "vaswani2017" and refs[1]["citekey"] is None and refs[0]["authors"] == ["Vaswani"]
    assert g.cites("devlin2019") == [{"citekey": "vaswani2017", "title": g._rows["vaswani2017"].title,
                                     "text": refs[0]["text"]}]
    assert g.cites("vaswani2017") == []  # its own title: never an edge
    assert [set(x) for x in g.cited_by("vaswani2017")] == [EDGE_KEYS]
    assert g.refs("lonely") == [] and "no reference list" in g.refs_notes("lonely")[0]
    (m,) = g.missing()
    assert set(m.to_dict()) == MISSING_KEYS and m.to_dict()["citing"] == ["devlin2019", "vaswani2017"]
    assert m.to_dict()["count"] == 2 and m.to_dict()["authors"] == ["Hochreiter", "Schmidhuber"] or \
        m.to_dict()["authors"] == ["Hochreiter"]


def test_unknown_citekey_is_the_error_similar_gives():
    g = _graph()
    for call in (g.refs, g.cites, g.cited_by):
        with pytest.raises(UsageError, match=r"unknown citekey 'devlin'; did you mean: devlin2019"):
            call("devlin")


def test_graph_json_graphml_and_dot():
    g = _graph()
    d = g.to_json()
    ids = {n["id"] for n in d["nodes"]}
    assert {"vaswani2017", "devlin2019", "lonely"} <= ids
    kinds = {n["id"]: n["kind"] for n in d["nodes"]}
    assert sorted(k for k, v in kinds.items() if v == "missing") == ["missing:1"]
    assert {(x["source"], x["target"]) for x in d["edges"]} == {
        ("devlin2019", "vaswani2017"), ("devlin2019", "missing:1"), ("vaswani2017", "missing:1")}
    assert all({"source", "target"} <= set(x) for x in d["edges"])
    assert json.loads(json.dumps(d)) == d

    root = ET.fromstring(g.to_graphml())
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    assert len(root.findall(".//g:node", ns)) == len(d["nodes"])
    assert len(root.findall(".//g:edge", ns)) == len(d["edges"])

    dot = g.to_dot()
    assert dot.startswith("digraph citations {") and dot.rstrip().endswith("}")
    assert '"devlin2019" -> "vaswani2017";' in dot and '"vaswani2017" -> "missing:1";' in dot
    assert '\\"quoted\\"' in dot  # a quote in a title escaped


def test_graphml_reads_in_networkx():
    nx = pytest.importorskip("networkx")
    g = _graph()
    G = nx.read_graphml(io.StringIO(g.to_graphml()))
    assert G.is_directed() and G.has_edge("devlin2019", "vaswani2017")
    assert G.nodes["missing:1"]["kind"] == "missing" and G.nodes["missing:1"]["count"] == 2
    assert G.nodes["vaswani2017"]["title"].endswith('"quoted" & more')


def test_missing_bibtex_parses_back_to_the_same_fields():
    import bibtexparser
    from pylatexenc.latex2text import LatexNodes2Text

    rows = [row("a", "Citing A", 2020), row("b", "Citing B", 2021), row("hochreiter1997long", "Taken key", 2000)]
    hard = r"50% of {braces} & $money$ #1 under_score ~tilde back\slash: Müller's Ünïcode"
    refs = {k: [e(1, "Long short-term memory", 1997, ("Hochreiter", "Schmidhuber"), venue="Neural Computation",
                  doi="10.1162/neco.1997.9.8.1735"),
                e(2, hard, 2019, ("Müller", "O'Neil"), venue="Proceedings of the Conference on Things"),
                e(3, "A preprint", 2022, ("Zed",), arxiv="2201.00001")] for k in ("a", "b")}
    g = CitationGraph(rows, refs)
    works = g.missing()
    assert len(works) == 3
    text = g.missing_bibtex(works)
    lib = bibtexparser.parse_string(text)
    assert len(lib.entries) == 3 and not lib.failed_blocks
    dec = LatexNodes2Text().latex_to_text
    by_title = {dec(en.fields_dict["title"].value): en for en in lib.entries}
    assert set(by_title) == {w.title for w in works}
    lstm = by_title["Long short-term memory"]
    assert lstm.key != "hochreiter1997long"  # never a library citekey
    assert lstm.entry_type == "article" and lstm.fields_dict["journal"].value == "Neural Computation"
    assert lstm.fields_dict["doi"].value == "10.1162/neco.1997.9.8.1735"
    assert lstm.fields_dict["author"].value == "Hochreiter and Schmidhuber" and lstm.fields_dict["year"].value == "1997"
    h = by_title[hard]
    assert h.entry_type == "inproceedings" and dec(h.fields_dict["author"].value) == "Müller and O'Neil"
    assert by_title["A preprint"].fields_dict["eprint"].value == "2201.00001"
    assert dec(tex_escape("a_b & {c}")) == "a_b & {c}" and tex_escape("x^2") == r"x\textasciicircum{}2"


# -- the workspace: service, CLI, filters -----------------------------------------------------------------







@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.workspace import Workspace

    root = make_workspace(tmp_path_factory.mktemp("cg"), DOCS)
    build_references(Workspace.open(root))
    return root


def _lines(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines()]


def test_cli_refs_cites_cited_by(ws):
    p = run_main("refs", "-w", ws, "liu2019", "--json")
    assert p.returncode == 0, p.stderr
    refs = _lines(p.stdout)
    assert [r["n"] for r in refs] == [1, 2, 3] and all(set(r) == REFS_KEYS for r in refs)
    assert [r["citekey"] for r in refs] == ["devlin2019", "vaswani2017", None]
    table = run_main("refs", "-w", ws, "liu2019").stdout
    assert "devlin2019" in table and "Long short-term memory" in table
    cites = _lines(run_main("cites", "-w", ws, "liu2019", "--json").stdout)
    assert [c["citekey"] for c in cites] == ["devlin2019", "vaswani2017"] and all(set(c) == EDGE_KEYS for c in cites)
    assert "Attention is all you need" in cites[1]["text"]
    by = _lines(run_main("cited-by", "-w", ws, "vaswani2017", "--json").stdout)
    assert [c["citekey"] for c in by] == ["devlin2019", "liu2019"] and all(set(c) == EDGE_KEYS for c in by)
    by = _lines(run_main("cited-by", "-w", ws, "devlin2019", "--json", "--year", "2020..").stdout)
    assert [c["citekey"] for c in by] == ["new2021"]
    p = run_main("cited-by", "-w", ws, "devlin2019", "--year", "2025..")
    assert p.returncode == 0 and "no source of the library that the filters allow cites devlin2019" in p.stdout


def test_cli_unknown_citekey(ws):
    for cmd in ("refs", "cites", "cited-by"):
        p = run_main(cmd, "-w", ws, "devlin")
        assert p.returncode == 1 and "error: unknown citekey 'devlin'; did you mean: devlin2019" in p.stderr


def test_cli_missing_and_bib(ws, tmp_path):
    import bibtexparser

    got = _lines(run_main("missing", "-w", ws, "--json").stdout)
    assert [m["title"] for m in got] == ["Deep residual learning for image recognition", "Long short-term memory"]
    assert got[1]["citing"] == ["devlin2019", "liu2019", "vaswani2017"] and got[1]["count"] == 3  # ties by title
    assert got[0]["citing"] == ["devlin2019", "new2021", "vaswani2017"]
    assert all(set(m) == MISSING_KEYS for m in got)
    assert _lines(run_main("missing", "-w", ws, "--json", "--min", "4").stdout) == []
    assert len(_lines(run_main("missing", "-w", ws, "--json", "-k", "1").stdout)) == 1
    only = _lines(run_main("missing", "-w", ws, "--json", "--year", "..2018").stdout)
    assert only == []  # one citing source before 2019: no work reaches two
    two = _lines(run_main("missing", "-w", ws, "--json", "--year", "2019..").stdout)
    assert [(m["title"], m["count"]) for m in two] == [("Deep residual learning for image recognition", 2),
                                                       ("Long short-term memory", 2)]
    bib = tmp_path / "out" / "missing.bib"
    p = run_main("missing", "-w", ws, "--bib", bib)
    assert p.returncode == 0 and "2 BibTeX entries written" in p.stderr
    lib = bibtexparser.parse_string(bib.read_text(encoding="utf-8"))
    assert sorted(en.fields_dict["title"].value for en in lib.entries) == \
        ["Deep residual learning for image recognition", "Long short-term memory"]
    p = run_main("missing", "-w", ws, "--min", "0")
    assert p.returncode == 1 and "min_count must be" in p.stderr


def test_cli_graph_formats(ws, tmp_path):
    d = json.loads(run_main("graph", "-w", ws).stdout)
    keys = {n["id"] for n in d["nodes"] if n["kind"] == "source"}
    assert keys == {x["_id"] for x in DOCS}
    lib_edges = {(x["source"], x["target"]) for x in d["edges"] if x["target"] in keys}
    assert lib_edges == {("devlin2019", "vaswani2017"), ("liu2019", "devlin2019"), ("liu2019", "vaswani2017"),
                         ("new2021", "devlin2019")}
    out = tmp_path / "g.graphml"
    assert run_main("graph", "-w", ws, "--format", "graphml", "--out", out).returncode == 0
    root = ET.parse(out).getroot()
    assert len(root.findall(".//{http://graphml.graphdrawing.org/xmlns}edge")) == len(d["edges"])
    dot = run_main("graph", "-w", ws, "--format", "dot").stdout
    assert '"liu2019" -> "devlin2019";' in dot


def test_service_keeps_the_graph_until_the_workspace_changes(tmp_path):
    import chitragupta
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    from helpers import write_jsonl

    root = make_workspace(tmp_path, DOCS[:2])
    g1 = chitragupta.citation_graph(root)  # nothing built yet: the index and its lists are built first
    assert g1.notes() == [] and chitragupta.citation_graph(root) is g1
    assert [c["citekey"] for c in g1.cited_by("vaswani2017")] == ["devlin2019"]
    import_jsonl(Workspace.open(root), write_jsonl(tmp_path / "more.jsonl", DOCS))
    g2 = chitragupta.citation_graph(root)
    assert g2 is not g1 and [c["citekey"] for c in g2.cited_by("vaswani2017")] == ["devlin2019", "liu2019"]
    assert "citation_graph" in dir(chitragupta)


def test_cited_by_and_missing_never_answer_empty_for_lack_of_a_build(tmp_path, monkeypatch):
    """Issue 46, 7: in a workspace where nothing was built, ``cited-by`` and ``missing`` build the index and
    its lists (as ``search`` builds the index); where they cannot be built and none is stored, an error."""
    root = make_workspace(tmp_path / "a", DOCS)
    p = run_main("cited-by", "-w", root, "vaswani2017", "--json")
    assert p.returncode == 0 and [c["citekey"] for c in _lines(p.stdout)] == ["devlin2019", "liu2019"]
    root = make_workspace(tmp_path / "b", DOCS)
    assert run_main("missing", "-w", root, "--json").stdout.count("\n") == 2

    from chitragupta.engine.citations import store
    from chitragupta.service import citations

    def refused(*a, **k):
        raise WorkspaceError("read-only")

    monkeypatch.setattr(store, "build_references", refused)
    with pytest.raises(WorkspaceError, match="no reference lists are stored"):
        citations.missing(make_workspace(tmp_path / "c", DOCS))
    got = citations.missing(root)  # stored before: answered from them, with a note
    assert len(got["missing"]) == 2 and "could not be brought up to date (read-only)" in got["notes"][0]


@pytest.mark.slow
def test_mcp_tools_answer_what_the_cli_answers(ws):
    pytest.importorskip("mcp")
    from helpers import drive_server, tool_json

    async def script(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        refs = tool_json(await c.call_tool("references", {"citekey": "liu2019"}))
        by = tool_json(await c.call_tool("cited_by", {"citekey": "devlin2019", "filters": {"year": "2020.."}}))
        miss = tool_json(await c.call_tool("missing", {"min_count": 2, "k": 5}))
        bad = await c.call_tool("cited_by", {"citekey": "devlin"})
        bad_k = await c.call_tool("missing", {"k": 0})
        return tools, refs, by, miss, bad, bad_k

    tools, refs, by, miss, bad, bad_k = drive_server(ws, script)
    assert {"references", "cited_by", "missing"} <= set(tools)
    assert tools["cited_by"].description and "filters" in tools["cited_by"].input_schema["properties"]
    for name, props in (("references", ("citekey",)), ("cited_by", ("citekey",)), ("missing", ("min_count", "k"))):
        schema = tools[name].input_schema["properties"]
        assert all(schema[p].get("description") for p in props), (name, schema)
    assert refs["references"] == _lines(run_main("refs", "-w", ws, "liu2019", "--json").stdout)
    assert (refs["total"], refs["offset"], refs["remaining"]) == (3, 0, 0)
    assert by["cited_by"] == _lines(run_main("cited-by", "-w", ws, "devlin2019", "--json", "--year", "2020..").stdout)
    assert miss["missing"] == _lines(run_main("missing", "-w", ws, "--json", "-k", "5").stdout)
    assert bad.is_error and "did you mean: devlin2019" in bad.content[0].text
    assert bad_k.is_error and "k must be a whole number >= 1, got 0" in bad_k.content[0].text


def test_filters_choose_the_citing_sources_and_say_what_they_left_out():
    from chitragupta.engine.library.metadata import Facets
    from chitragupta.engine.search.filters import Filters

    rows = [row("t", "The cited target paper here", 2010), row("a", "A", 2015), row("b", "B", 2021),
            row("c", "C", None)]
    cite = e(1, "The cited target paper here", 2010)
    lstm = e(2, "Long short-term memory", 1997)
    refs = {k: [cite, lstm] for k in ("a", "b", "c")}
    keys = [r.citekey for r in rows]
    facets = Facets(keys, [("smith",), ("jones",), ("smith",), ()], [r.year for r in rows], [()] * 4,
                    [None] * 4, ["article"] * 4, [None] * 4)
    g = CitationGraph(rows, refs, facets)
    assert [x["citekey"] for x in g.cited_by("t")] == ["a", "b", "c"]
    since = Filters(year=(2019, None))
    assert [x["citekey"] for x in g.cited_by("t", since)] == ["b"]
    assert [x["citekey"] for x in g.cited_by("t", {"author": "smith"})] == ["b"]
    assert g.filter_notes(since) == ["1 source(s) have no year and were excluded by the year filter"]
    assert g.filter_notes(None) == []
    assert [m.count for m in g.missing()] == [3]
    assert g.missing(filters=since) == [] and [m.citing for m in g.missing(min_count=1, filters=since)] == [["b"]]
    with pytest.raises(UsageError, match="year"):
        g.cited_by("t", {"year": "soon"})
    bare = CitationGraph(rows, refs)  # built without the ledger's metadata: filters refused, plainly
    with pytest.raises(UsageError, match="filters need the ledger's metadata"):
        bare.cited_by("t", since)


def test_one_source_graph_answers_as_the_whole_graph(ws):
    from chitragupta.engine.library.workspace import Workspace

    w = Workspace.open(ws)
    whole = CitationGraph.open(w)
    for key in [d["_id"] for d in DOCS]:
        one = CitationGraph.of_source(w, key)
        assert one.refs(key) == whole.refs(key) and one.cites(key) == whole.cites(key)
        assert one.refs_notes(key) == whole.refs_notes(key)
    with pytest.raises(UsageError, match="did you mean: devlin2019"):
        CitationGraph.of_source(w, "devlin").refs("devlin")


def test_mcp_replies_are_pages_under_16_kb_that_say_what_remains(tmp_path):
    """Issue 46, 6 and 47, 5: ``references`` of a long list (a paper of 111 entries, one of them 60 KB)
    answers a page under 16 KB by default, with ``total`` and ``remaining``; ``offset`` gives the next."""
    from chitragupta.service import citations
    from chitragupta.serve.citations import REPLY_BYTES

    refs = [f"A. Author{i}, B. Other, and C. Third. 2020. A reasonably long title of the work number {i} that "
            f"runs on. In Proceedings of the Conference on Things, pages {i}-{i + 9}. doi:10.1000/x{i}."
            for i in range(110)] + ["Z. Long. 2021. " + "word " * 12_000 + "Venue."]
    from helpers import citing_doc

    doc = citing_doc("big", "A big list", 2022, refs)
    doc["text"] = "Prose of the paper, at length. " * 3000 + doc["text"]  # (the list after the first 30%)
    root = make_workspace(tmp_path, [doc])
    first = citations.references(root, "big", 25, 0, REPLY_BYTES)
    assert len(json.dumps(first).encode()) < 16_000 and first["total"] == 111 and first["offset"] == 0
    n = len(first["references"])
    assert 0 < n <= 25 and first["remaining"] == 111 - n
    seen, offset = n, n
    while offset < 111:
        page = citations.references(root, "big", 25, offset, REPLY_BYTES)
        assert len(json.dumps(page).encode()) < 16_000 and page["references"]
        assert page["references"][0]["n"] == offset + 1
        offset += len(page["references"])
    assert page["remaining"] == 0 and page["references"][-1].get("text_cut") is True
    assert len(citations.references(root, "big")["references"]) == 111  # the CLI's: every entry


def test_missing_bibtex_writes_the_names_as_the_entries_print_them():
    import bibtexparser

    rows = [row("a", "Citing A", 2020), row("b", "Citing B", 2021)]
    refs = {k: [Entry(1, "x", ("Lo", "van der Maaten", "OGC of Harvard"), 2020, "A shared work", None, None,
                      "2101.00001", None, ("Kyle Lo", "Maaten, L. van der" if k == "b" else "Laurens van der Maaten",
                                           "OGC of Harvard"))] for k in ("a", "b")}
    (w,) = CitationGraph(rows, refs).missing()
    en = bibtexparser.parse_string(CitationGraph(rows, refs).missing_bibtex([w])).entries[0]
    assert en.fields_dict["author"].value == "Lo, Kyle and van der Maaten, Laurens and {OGC of Harvard}"
    assert en.fields_dict["eprint"].value == "2101.00001"


@pytest.mark.slow
def test_a_source_with_10000_entries_is_answered_in_bounded_time(tmp_path):
    """Issue 47, 4: ``refs``, ``cites`` and ``missing`` of a source whose list holds 10,000 entries (their
    titles sharing most words) finish; ``refs`` reads that source alone, the clustering is bounded by the
    blocking budget. Run in a child with a time bound (the figures: bench/RESULTS.md)."""
    import subprocess
    import sys

    from chitragupta.engine.library.ledger import Ledger

    names = ["Smith", "Jones", "Brown", "Taylor", "Wilson", "Davies", "Evans", "Thomas", "Roberts", "Walker"]
    refs = [f"A. {names[i % 10]} and B. {names[i // 10 % 10]}. {1990 + i % 30}. Hostile entry number {i} of a very "
            f"long list about graphs and models. In Proceedings of Things, pages {i}-{i + 3}." for i in range(10_000)]
    root = make_workspace(tmp_path, [{"_id": "hostile", "title": "A hostile list", "text": "x"}] + DOCS)
    with Ledger(root / "content" / "ledger.sqlite", create=False) as ledger:
        parsed = root / ledger.get("hostile").parsed_path
    items = [{"text": "A paper with a very long list.", "label": "text", "page": 1},
             {"text": "References", "label": "section_header", "page": 1}]
    items += [{"text": r, "label": "list_item", "page": 2 + i // 50} for i, r in enumerate(refs)]
    parsed.with_suffix(".passages.json").write_text(json.dumps(items), encoding="utf-8")  # a docling sidecar
    parsed.write_text("\n\n".join(it["text"] for it in items), encoding="utf-8")
    assert run_main("index", "-w", root).returncode == 0
    code = (f"from chitragupta.service import citations as c; r = {str(root)!r}\n"
            "assert c.references(r, 'hostile')['total'] == 10000\n"
            "assert c.cites(r, 'hostile')['cites'] == []\n"
            "m = c.missing(r, 1, None)\nassert m['total'] >= 10000, m['total']\nprint('ok')")
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
