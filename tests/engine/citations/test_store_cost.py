"""The shortcuts that make the citation graph cheap give the same answers as the plain rules they replace:
``resolve.fold_text`` and ``resolve._tokens`` against ``metadata.fold`` and the full tokenizing path, and
``refcut.plain_reference_span``'s kept spans against a fresh computation."""

from __future__ import annotations

import json
import random
import re

import pytest
from chitragupta.engine.citations import resolve as R
from chitragupta.engine.library.metadata import fold
from chitragupta.engine.text import refcut
from chitragupta.errors import UsageError

_HYPHEN_AS_WRITTEN = re.compile(r"(?<=\w)[-\u2010\u2011]\s*(?=\w)")


def _full_tokens(s: str) -> list[str]:
    """``_tokens`` by the full path only: ``fold`` for any non-ASCII text, and the hyphen pattern as the
    rule reads (what it did before the ASCII shortcut and the hyphen-first pattern)."""
    if not s:
        return []
    if s.isascii():
        s = s.lower()
        if "-" in s:
            s = _HYPHEN_AS_WRITTEN.sub("", s)
        return s.encode("ascii").translate(R._ASCII_WORDS).decode("ascii").split()
    s = fold(s)
    if "-" in s or "\u2010" in s or "\u2011" in s:
        s = _HYPHEN_AS_WRITTEN.sub("", s)
    return R._WORD.findall(s)


TRICKY = [
    "Müller, Łukasz and Ørsted. 2019. “Pre‐training—at scale”: a survey…",
    "Ben Abacha, A. (2019). A question-entailment approach. In Proc. “ACL”, pp. 1–10.",
    "Straße ẞ İstanbul ﬁnal naïve e\u0301te\u0301 Ångström",
    "a-“b", "a‑ b", "x\u00a0-\u00a0y", "ΑΒΓ δέλτα – Ωmega", "日本語のタイトル 2020", "zero\u200bwidth", "\x85next",
    "word-\u2013dash", "pre-  training", "a - b", "x-\ny", "--a", "a--b", "1-2 a-", "\u00e9-\u2010\u00e8",
    "dagger† double‡ section§ pilcrow¶", "\ufe63minus", "", "-", "\u0301",
]


@pytest.mark.parametrize("s", TRICKY)
def test_fold_text_and_tokens_match_the_full_path(s):
    assert R.fold_text(s) == fold(s)
    assert R._tokens(s) == _full_tokens(s)
    assert R.norm_title(s) == " ".join(t for t in _full_tokens(s) if t not in R._STOP)


def test_fold_text_and_tokens_match_on_random_unicode():
    rng = random.Random(7)
    alphabet = ("ab Z9 -_.\u2010\u2011\u2013\u2014\u201c\u201d\u00e9\u0301\u00a0\u00df\u1e9e\u0130\ufb01\u2026"
                "\u200b\u00e6\u0142")
    bad = []
    for _ in range(20000):
        s = "".join(rng.choice(alphabet) if rng.random() < 0.7 else chr(rng.randint(0x80, 0x2FFF))
                    for _ in range(rng.randint(0, 14)))
        if R.fold_text(s) != fold(s) or R._tokens(s) != _full_tokens(s):
            bad.append(s)
    assert bad == []


def test_plain_reference_span_kept_per_text_matches_a_fresh_one():
    body = "Intro text about retrieval.\n" * 40
    refs = "References\n" + "".join(f"[{i}] A. Author. Title number {i}. In Proc. ACL, 20{10 + i % 10}.\n"
                                    for i in range(1, 30))
    text = body + refs
    first = refcut.plain_reference_span(text)
    assert first is not None and text[first[0]:].startswith("References")
    assert refcut.plain_reference_span(text) == first  # the kept one
    refcut._SPANS.clear()
    assert refcut.plain_reference_span(text) == first  # computed again
    other = "Preface.\n" * 10 + text  # a different text: its own span, never the kept one of another
    got = refcut.plain_reference_span(other)
    assert got == (first[0] + 90, first[1] + 90)
    assert refcut.plain_reference_span(body) is None


def test_plain_reference_span_keeps_a_bounded_number(monkeypatch):
    monkeypatch.setattr(refcut, "_SPANS_KEPT", 3)
    refcut._SPANS.clear()
    for i in range(10):
        refcut.plain_reference_span(f"text {i}\nReferences\n")  # (a text without the words is never kept)
    assert len(refcut._SPANS) == 3


def _arxiv_full_search(s: str):
    """``entries._arxiv`` as it was: both patterns searched from the start of the entry."""
    from chitragupta.engine.citations import entries as E

    if "abs/" not in s and "rxiv" not in s and "RXIV" not in s and "rXiv" not in s:
        return None, None
    m = E._ARXIV_NEW.search(s) or E._ARXIV_OLD.search(s)
    if m is None:
        return None, None
    return m.group(1).lower() if "/" in m.group(1) else m.group(1), m.span()


@pytest.mark.parametrize("s", [
    "T. Brown. 2020. Language models. arXiv preprint arXiv:2005.14165v2.",
    "CoRR abs/1706.03762, 2017.", "xabs/1706.03762 then abs/1409.0473", "https://arxiv.org/pdf/2101.00001v1",
    "ArXiv abs/2022.99999", "ARXIV:hep-th/9901001v3", "arXiv: math.GT/0309136", "see arxiv.org/abs/cs/0101001",
    "Née Müller. arXiv:2101.12345", "no id here, 2019.", "the rXiv of nothing", "abs/ but nothing",
    "A. B. Title. In ArXiv, 2019. arXiv 1234.56789 and arXiv:2001.00001",
])
def test_arxiv_searched_from_its_first_keyword_finds_what_a_full_search_does(s):
    from chitragupta.engine.citations.entries import _arxiv

    assert _arxiv(s) == _arxiv_full_search(s)


def _imported(root, n: int, packed: bool = False):
    """A workspace of ``n`` imported texts, each with a numbered reference list of its own (some lists
    cite another text by its title, one text has no list, one list ends in a 5,000-character entry)."""
    import json

    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    rows = []
    for i in range(n):
        refs = [f"[{j + 1}] A. Author{i}, B. Writer{j}. 20{10 + j % 10}. A study of thing {i * 7 + j}. In Proc. "
                f"of the Venue {j}, pages {j}-{j + 9}." for j in range(6)]
        if i % 5 == 0:
            refs.append(f"[7] C. Cite. 2020. Title of source {i + 1} here. Journal of Tests 3, 2020.")
        if i == 3:
            refs.append("[8] D. Long. 2021. " + "word " * 1000 + ".")
        text = f"Title of source {i} here\n" + "Body text about retrieval. " * 60 + "\n\nReferences\n\n" + \
            "\n".join(refs) + "\n"
        rows.append({"_id": f"s{i:03d}", "title": f"Title of source {i} here",
                     "text": text if i != 7 else "A text without any list at all. " * 50})
    root.mkdir(parents=True, exist_ok=True)
    src = root / "corpus.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ws = Workspace.open(root / "ws", create=True)
    import_jsonl(ws, src, packed=packed)  # one file a text unless asked: a test below touches them
    return ws


@pytest.fixture(autouse=True)
def _workers_for_small_libraries(monkeypatch):
    """These libraries are small: without this, ``jobs=2`` would parse them in this process (the pool starts
    only past ``store.POOL_FROM_BYTES`` of text), and the tests below mean the workers."""
    from chitragupta.engine.citations import store

    monkeypatch.setattr(store, "POOL_FROM_BYTES", 0)


def test_a_small_library_is_parsed_here_whatever_jobs_says(tmp_path, monkeypatch):
    """Below ``POOL_FROM_BYTES`` of text, ``jobs=2`` starts no process pool, and the files are those a
    build by the workers writes."""
    from chitragupta.engine.library import workers
    from chitragupta.engine.citations import store

    n = 69
    one, two = _imported(tmp_path / "one", n), _imported(tmp_path / "two", n)
    rep1 = store.build_references(one, jobs=2)  # POOL_FROM_BYTES 0 (the fixture): the workers parse

    def no_pool(*a, **k):
        raise AssertionError("a process pool was started for a small library")

    monkeypatch.setattr(workers, "process_pool", no_pool)
    monkeypatch.setattr(store, "POOL_FROM_BYTES", 8 << 20)
    assert store._small(two.root, [(p, None) for p in _parsed_paths(two)], 8 << 20)
    assert not store._small(two.root, [(p, None) for p in _parsed_paths(two)], 1000)
    packed = [("content/parsed/packs/000001-0123abcd.pack#0+5000", None)]  # counted by its length, not read
    assert store._small(tmp_path, packed, 5001) and not store._small(tmp_path, packed, 5000)
    rep2 = store.build_references(two, jobs=2)
    assert rep1 == rep2 and rep1["built"] == n
    names = sorted(p.name for p in store.refs_folder(one).iterdir())
    assert names == sorted(p.name for p in store.refs_folder(two).iterdir()) and len(names) > 2
    for name in names:
        if name != "unlocated.idx":
            d1, d2 = (json.loads((store.refs_folder(w) / name).read_bytes()) for w in (one, two))
            d1.pop("stamp"), d2.pop("stamp")
            assert d1 == d2


def _parsed_paths(ws) -> list:
    from chitragupta.engine.library.ledger import Ledger

    with Ledger(ws.ledger_path) as ledger:
        return [r.parsed_path for r in ledger.rows() if r.parsed_path]


def test_entries_parsed_by_workers_are_the_same_files(tmp_path):
    """``build_references(jobs=2)``: lists parsed by two worker processes, more than one chunk each, give
    the same report and byte for byte the same files as a build here."""
    from chitragupta.engine.citations.store import (
        _read_unlocated,
        build_references,
        refs_folder,
    )

    n = 69  # chunks of 8 sources (a quarter of each worker's share): 9 chunks
    one, two = _imported(tmp_path / "one", n), _imported(tmp_path / "two", n)
    rep1, rep2 = build_references(one), build_references(two, jobs=2)
    assert rep1 == rep2 and rep1["sources"] >= n - 2 and rep1["none"] >= 1 and rep1["built"] == n
    files1 = {p.name: p.read_bytes() for p in refs_folder(one).iterdir()}
    files2 = {p.name: p.read_bytes() for p in refs_folder(two).iterdir()}
    # a file per source with a list, and one record of unlocated.idx per source without
    assert files1.keys() == files2.keys() and len(files1) == n - rep1["none"] + 1
    files1.pop("unlocated.idx"), files2.pop("unlocated.idx")
    u1, u2 = _read_unlocated(refs_folder(one)).recs, _read_unlocated(refs_folder(two)).recs
    assert len(u1) == rep1["none"]
    assert u1["key"].tolist() == u2["key"].tolist() and u1["fp"].tolist() == u2["fp"].tolist()
    for name, b1 in files1.items():  # the same but the stamp (another workspace's files, other mtimes)
        d1, d2 = json.loads(b1), json.loads(files2[name])
        d1.pop("stamp"), d2.pop("stamp")
        assert d1 == d2
    again = build_references(two, jobs=2)  # nothing changed: nothing parsed
    assert again["kept"] == n and again["built"] == 0


def test_entries_rebuilt_by_workers_keep_a_file_whose_text_is_the_same(tmp_path):
    """A changed stamp with the same text: the worker reads the text, finds its fingerprint unchanged and
    parses nothing; the file is restamped, its entries kept."""
    import os

    from chitragupta.engine.citations.store import build_references, refs_folder

    n = 65
    ws = _imported(tmp_path, n)
    build_references(ws, jobs=2)
    for p in sorted((ws.content).rglob("*.txt"))[:40]:
        os.utime(p, ns=(1, 1))  # the stamp changes, the text does not
    before = _stored(refs_folder(ws))
    rep = build_references(ws, jobs=2)
    assert rep["built"] == 0 and rep["kept"] == n
    after = _stored(refs_folder(ws))
    assert before.keys() == after.keys() and len(after) == n
    assert sum(before[k]["stamp"] != after[k]["stamp"] for k in after) == 40  # restamped
    assert all(before[k]["entries"] == after[k]["entries"] for k in after)


def _stored(folder) -> dict:
    """name -> {"stamp", "entries"} of every source, from its file or its record of unlocated.idx (named
    by its key's hash there, its stamp a hash too)."""
    from chitragupta.engine.citations.store import _read_unlocated

    out = {}
    for p in folder.iterdir():
        if p.name == "unlocated.idx":
            recs = _read_unlocated(folder).recs
            out.update({f"#{k}": {"stamp": s, "entries": []} for k, s in zip(recs["key"].tolist(),
                                                                            recs["stamp"].tolist())})
        else:
            data = json.loads(p.read_bytes())
            out[p.name[:-len(".json")]] = {"stamp": data["stamp"], "entries": data["entries"]}
    return out


def _edge_lines_by_splitting(page: str) -> list[str]:
    """``entries._edge_lines`` by splitting the page's ends into lines (what it did before)."""
    lines = [ln.strip() for ln in page.split("\n") if ln.strip()]
    if len(page) <= 4000:
        return lines[:2] + lines[-2:]  # the first two and the last two (``running_lines`` reads only those)
    head = [ln.strip() for ln in page[:2000].split("\n") if ln.strip()][:2]
    tail = [ln.strip() for ln in page[-2000:].split("\n") if ln.strip()][-2:]
    return head + tail


def test_edge_lines_found_from_the_ends_are_those_of_the_split_page():
    from chitragupta.engine.citations.entries import _edge_lines

    rng = random.Random(11)
    parts = ["\n", " ", "  \n", "\t\n", "Running Title 12", "x" * 1999, "y" * 2001, "z" * rng.randint(0, 300)]
    pages = ["", "\n\n", "a\nb", "one line only " * 400, "\n" * 5000 + "end", "start" + "\n" * 5000]
    pages += ["".join(rng.choice(parts) for _ in range(rng.randint(0, 14))) for _ in range(3000)]
    assert [p for p in pages if set(_edge_lines(p)) != set(_edge_lines_by_splitting(p))] == []


# -- the resolution kept on disk (content/citation_graph.json) ----------------------------------------------

def _graph_workspace(tmp_path):
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.workspace import Workspace

    from helpers import DOCS, make_workspace

    root = make_workspace(tmp_path, DOCS)
    ws = Workspace.open(root)
    build_references(ws)
    return ws


def _answers(g) -> tuple:
    return (g.to_json(), [m.to_dict() for m in g.missing(1, 10**6)], sorted(g.resolution.why.items()),
            [[(k, e.n) for k, e in w.members] for w in g.resolution.missing])


def test_a_new_process_reads_the_kept_resolution_instead_of_resolving(tmp_path, monkeypatch):
    from chitragupta.engine.citations import graph as G

    ws = _graph_workspace(tmp_path)
    first = G.CitationGraph.open(ws)
    path = ws.content / G.GRAPH_FILE
    assert path.is_file() and first.notes() == []
    monkeypatch.setattr(G, "resolve", lambda *a: pytest.fail("resolved again with nothing changed"))
    again = G.CitationGraph.open(ws)
    assert _answers(again) == _answers(first) and again.notes() == []
    assert [c["citekey"] for c in again.cited_by("vaswani2017")] == ["devlin2019", "liu2019"]


def test_the_kept_resolution_is_redone_when_the_library_or_the_entries_change(tmp_path):
    from chitragupta.engine.citations import graph as G
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    from helpers import DOCS, make_workspace, write_jsonl

    ws = Workspace.open(make_workspace(tmp_path, DOCS[:2]))
    build_references(ws)
    assert [c["citekey"] for c in G.CitationGraph.open(ws).cited_by("vaswani2017")] == ["devlin2019"]
    before = (ws.content / G.GRAPH_FILE).read_bytes()
    import_jsonl(ws, write_jsonl(tmp_path / "more.jsonl", DOCS))  # two more sources, one citing vaswani2017
    build_references(ws)
    g = G.CitationGraph.open(ws)
    assert [c["citekey"] for c in g.cited_by("vaswani2017")] == ["devlin2019", "liu2019"]
    assert (ws.content / G.GRAPH_FILE).read_bytes() != before
    assert _answers(g) == _answers(G.CitationGraph(g._rows.values(), g.references))


@pytest.mark.parametrize("damage", [b"{not json", b"[]", b'{"rules": 1, "key": "x"}', "keyed"])
def test_a_damaged_kept_resolution_is_rebuilt_with_a_note_or_quietly_when_stale(tmp_path, damage):
    from chitragupta.engine.citations import graph as G

    ws = _graph_workspace(tmp_path)
    good = _answers(G.CitationGraph.open(ws))
    path = ws.content / G.GRAPH_FILE
    if damage == "keyed":  # its key right, its body not a graph of this library: a note
        data = json.loads(path.read_bytes())
        data["target"] = {"nosuch": [None]}
        data["missing"] = [["t", 2000, [], None, None, None, [["vaswani2017", 99]]]]
        damage = json.dumps(data).encode()
    path.write_bytes(damage)
    g = G.CitationGraph.open(ws)
    assert _answers(g) == good
    if damage == b"{not json" or b"nosuch" in damage:
        assert len(g.notes()) == 1 and G.GRAPH_FILE in g.notes()[0] and "rebuilt" in g.notes()[0]
    else:
        assert g.notes() == []  # another library's or rules' file: redone as a matter of course
    assert G.CitationGraph.open(ws).notes() == [] and _answers(G.CitationGraph.open(ws)) == good  # rewritten


def test_heading_words_check_is_the_reference_spans_first_test():
    """``store.may_have_heading`` (what the build asks before reading a text for its list) is False only
    where ``plain_reference_span`` is None: on random texts made of heading words, their fragments and
    look-alikes, and on the texts of these tests."""
    from chitragupta.engine.citations.store import may_have_heading

    rng = random.Random(5)
    pieces = ["References", "REFERENCES", "Bibliography", "BIBLIOGRAPHY", "Works Cited", "LITERATURE CITED",
              "references", "Refer", "ences", "Biblio", "graphy", "Cit", "ed", "\n", "\n\n", " ", "1. ", "[3] ",
              "A. Author. 2019. Title. In Proc. ACL.", "Body text about retrieval. ", "é", "\u00ad", "eferences",
              "ited", "Reference\n", "2020", "\f"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    texts += ["Intro.\n" * 40 + "References\n" + "[1] A. B. 2010. T. In Proc. X.\n" * 20,
              "A text without any list at all. " * 50, ""]
    lacking = 0
    for t in texts:
        if not may_have_heading(t):
            lacking += 1
            assert refcut.plain_reference_span(t) is None, t
    assert 0 < lacking < len(texts) and any(refcut.plain_reference_span(t) is not None for t in texts)


def test_pack_facts_found_once_per_pack_are_those_of_each_row(tmp_path):
    """``store._Texts`` (a pack stat'ed once a build) gives each row the stamp, "has a text" and "has a
    sidecar" the per-row functions give: packed rows, a file row, a reference past its pack's end, a
    missing pack."""
    import json as json_

    from chitragupta.engine.citations.store import RULES, _Texts
    from chitragupta.engine.index.source import (
        has_text,
        is_regular,
        read_text,
        sidecar_path,
        text_stamp,
    )
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    src = tmp_path / "c.jsonl"
    src.write_text("".join(json_.dumps({"_id": f"d{i}", "title": f"T {i}", "text": f"text {i} " * (i + 1)}) + "\n"
                           for i in range(20)), encoding="utf-8")
    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, src)
    with Ledger(ws.ledger_path, create=False) as ledger:
        paths = [r[3] for r in ledger.index_view()]
    assert any("#" in p for p in paths)
    pack = paths[0].rpartition("#")[0]
    paths += [f"{pack}#0+999999999", "content/parsed/packs/000099-0000abcd.pack#0+3", None]
    (tmp_path / "ws" / "content" / "parsed" / "own.txt").write_text("own text")
    assert any(read_text(ws.root / p) for p in paths[:20])
    paths.append("content/parsed/own.txt")

    def old_stamp(pp):
        parts = [str(RULES), pp or ""]
        if pp:
            p = ws.root / pp
            parts += [text_stamp(p), text_stamp(sidecar_path(p))]
        return "|".join(parts)

    for with_side in (False, True):
        if with_side:  # a sidecar beside the pack (no writer makes one: a hand edit)
            sidecar_path(ws.root / paths[0]).write_text("[]")
        texts = _Texts(ws.root)
        for pp in paths:
            assert texts.stamp(pp) == old_stamp(pp), pp
            if pp:
                assert texts.has_text(pp) == has_text(ws.root / pp), pp
                assert texts.has_sidecar(pp) == is_regular(sidecar_path(ws.root / pp)), pp
                assert texts.read_text(pp) == read_text(ws.root / pp), pp
        texts.close()


def test_a_build_read_a_few_rows_at_a_time_is_the_same(tmp_path, monkeypatch):
    """The ledger read in pages of 7 rows (the workers kept from page to page) gives the report, the
    notes and the files of a build that reads it in one page; a source gone from the ledger since has its
    record dropped."""
    from chitragupta.engine.citations import store
    from chitragupta.engine.library.ledger import Ledger

    one, two = _imported(tmp_path / "one", 41), _imported(tmp_path / "two", 41)
    rep1 = store.build_references(one)
    monkeypatch.setattr(store, "_PAGE", 7)
    rep2 = store.build_references(two, jobs=2)
    assert rep1 == rep2 and rep1["built"] == 41 and rep1["none"] >= 1
    names = sorted(p.name for p in store.refs_folder(one).iterdir())
    assert names == sorted(p.name for p in store.refs_folder(two).iterdir())
    for name in names:
        if name != "unlocated.idx":
            d1, d2 = (json.loads((store.refs_folder(w) / name).read_bytes()) for w in (one, two))
            d1.pop("stamp"), d2.pop("stamp")
            assert d1 == d2
    assert store.build_references(two)["kept"] == 41
    with Ledger(two.ledger_path) as ledger:
        gone = [r.citekey for r in ledger.rows()][7]  # the source without a list (s007)
        assert gone == "s007"
        with ledger.transaction():
            ledger.delete([gone])
    rep = store.build_references(two)
    assert (rep["kept"], rep["none"], rep["built"]) == (40, rep1["none"] - 1, 0)
    assert len(store._read_unlocated(store.refs_folder(two))) == rep1["none"] - 1


def test_entries_handed_to_the_graph_are_those_its_files_hold(tmp_path):
    """``all_references`` right after a build of this process takes the entries the build wrote (no file
    read back) and gives what reading the files gives; a file rewritten since is read again."""
    from chitragupta.engine.citations import store as S
    from chitragupta.engine.citations.entries import Entry

    ws = _imported(tmp_path / "ws", 12)
    S.build_references(ws)
    fps: dict = {}
    handed = S.all_references(ws, fingerprints=fps)
    assert handed and S._Handover.of(S.refs_folder(ws))
    key = sorted(handed)[0]
    S._Handover.last = None  # what a new process has: every file read
    fps_read: dict = {}
    read = S.all_references(ws, fingerprints=fps_read)
    assert read == handed and fps_read == fps
    # a fresh build, then one file rewritten by hand: its entries are read from it, not handed over
    for p in S.refs_folder(ws).iterdir():
        p.unlink()
    S.build_references(ws)
    file = next(p for p in S.refs_folder(ws).iterdir() if p.suffix == ".json" and json.loads(p.read_bytes())["citekey"] == key)
    data = json.loads(file.read_bytes())
    data["entries"] = data["entries"][:1]
    file.write_text(json.dumps(data), encoding="utf-8")
    got = S.all_references(ws)
    assert got[key] == [Entry.from_json(data["entries"][0])]
    assert {k: v for k, v in got.items() if k != key} == {k: v for k, v in handed.items() if k != key}


def test_blocking_drops_only_pairs_that_cannot_hold_the_share():
    """``_blocking`` drops a pair whose row has fewer words than the share needs before counting overlaps:
    the pairs it gives are those of every candidate's overlap counted."""
    rng = random.Random(3)
    vocab = R._Vocab()
    words = [f"w{i}" for i in range(60)]
    cols = vocab.matrix([rng.sample(words, rng.randint(1, 9)) for _ in range(300)], grow=True)
    rows = R._pad(vocab.matrix([rng.sample(words, rng.randint(0, 12)) for _ in range(2000)], grow=False),
                  cols.shape[1])
    r, c = R._blocking(rows, cols, R.BLOCK_SHARE)
    got = set(zip(r.tolist(), c.tolist()))
    assert got == _blocking_every_overlap(rows, cols, R.BLOCK_SHARE) and len(got) > 50


def _blocking_every_overlap(rows, cols, share, keys=R.BLOCK_KEYS) -> set:
    """``_blocking`` as it was before the row-size test: the overlap counted for every candidate pair."""
    import numpy as np
    from scipy import sparse

    df = np.bincount(cols.indices, minlength=cols.shape[1])
    coo = cols.tocoo()
    order = np.lexsort((df[coo.col], coo.row))
    r_sorted, c_sorted = coo.row[order], coo.col[order]
    pos = np.arange(len(order))
    start = np.maximum.accumulate(np.where(np.r_[True, r_sorted[1:] != r_sorted[:-1]], pos, 0))
    keep = pos - start < keys
    key_m = sparse.csr_matrix((np.ones(int(keep.sum()), dtype=np.float32), (r_sorted[keep], c_sorted[keep])),
                              shape=cols.shape)
    cand = (rows @ key_m.T).tocoo()
    r, c = cand.row.astype(np.int64), cand.col.astype(np.int64)
    need = np.ceil(np.diff(cols.indptr) * share)
    overlap = np.asarray(rows[r].multiply(cols[c]).sum(axis=1)).ravel()
    ok = overlap >= need[c]
    return set(zip(r[ok].tolist(), c[ok].tolist()))


def test_a_library_without_entries_opens_without_resolving(tmp_path, monkeypatch):
    """No source with a reference list: the graph opens without reading the ledger's rows, normalising the
    library's titles, keeping or reading a resolution; ``missing`` reads no row, the other questions read
    them when asked; the answers are empty and a filter still works."""
    from chitragupta.engine.citations import graph as G
    from chitragupta.engine.citations import resolve as Rz
    from chitragupta.engine.citations.store import build_references
    from chitragupta.engine.library.sync import import_jsonl
    from chitragupta.engine.library.workspace import Workspace

    rows = [{"_id": f"a{i}", "title": f"Abstract {i}", "text": "Only an abstract, no list. " * 20,
             "metadata": {"year": 2015 + i}} for i in range(6)]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ws = Workspace.open(tmp_path / "ws", create=True)
    import_jsonl(ws, src)
    assert build_references(ws)["none"] == 6
    from chitragupta.engine.library.ledger import Ledger

    monkeypatch.setattr(Rz.Library, "from_rows", classmethod(lambda cls, r: pytest.fail("library built")))
    monkeypatch.setattr(Ledger, "rows", lambda self: pytest.fail("every row read"))
    g = G.CitationGraph.open(ws)
    assert not (ws.content / G.GRAPH_FILE).exists()
    assert g.missing() == [] and g.notes() == []
    monkeypatch.undo()
    monkeypatch.setattr(Rz.Library, "from_rows", classmethod(lambda cls, r: pytest.fail("library built")))
    assert g.cited_by("a1") == [] and g.refs("a2") == [] and g.cites("a3") == []
    with pytest.raises(UsageError, match="unknown citekey"):
        g.cited_by("nobody")
    assert len(g.to_json()["nodes"]) == 6 and g.to_json()["edges"] == []
    monkeypatch.undo()
    assert g.cited_by("a1", filters={"year": "2018.."}) == []
    assert g.filter_notes({"year": "2018.."}) == []


def _sentence_break_by_marks(s: str) -> bool:
    """``entries._sentence_break`` as written before its pattern looked behind: every mark then a space,
    the two characters before it checked."""
    for m in re.finditer(r"[.?!]\s", s):
        i = m.start()
        if i >= 2 and s[i - 1].isalpha() and s[i - 2].isalpha():
            return True
    return False


def test_sentence_break_found_by_lookbehind_is_the_one_found_by_marks():
    from chitragupta.engine.citations.entries import _sentence_break

    rng = random.Random(11)
    alphabet = "aZ. ?!_9\u00b2\u00bd\u0663\u00e9\u0301\u4e00\t\n,J"
    cases = ["J. Smith. In Proc.", "Scientometrics. Zhihong", "ab.", "x\u00b2. y", "\u00bd\u00bd. a", "a_. b",
             "\u0663\u0663. b", "\u4e00\u4e00. b", "e\u0301. x", "", ". ", "ab! ", "ab?\n"]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    assert [_sentence_break(s) for s in cases] == [_sentence_break_by_marks(s) for s in cases]


def test_texts_read_in_a_stretch_are_kept_for_the_page_and_read_as_alone(tmp_path, monkeypatch):
    """The packed texts ``_read_packed`` reads are kept in ``_Texts`` for the page's later reads: each is
    the text ``packed_alone`` reads of it afresh, taken once; a build that keeps none (a budget of 0
    characters) writes the same files and report, and a build leaves nothing kept."""
    from chitragupta.engine.citations import store
    from chitragupta.engine.library.ledger import Ledger

    one, two = _imported(tmp_path / "one", 23, True), _imported(tmp_path / "two", 23, True)
    with Ledger(one.ledger_path, create=False) as ledger:
        paths = [r[3] for r in ledger.index_view()]
    texts = store._Texts(one.root)
    got = store._read_packed(one.root, paths, texts)
    assert len(got) == len(paths) == len(texts.kept)
    fresh = store._Texts(one.root)
    for j, pp in enumerate(paths):
        assert got[j][0] == fresh.packed_alone(pp) and got[j][0]
        assert store._read_packed(one.root, [pp], texts)[0] == got[j]  # (from what is kept: the same)
        assert texts.packed_alone(pp) == got[j][0] and pp not in texts.kept
    texts.forget()
    assert texts.kept == {} and texts.kept_chars == 0
    texts.close(), fresh.close()

    seen = []
    real_close = store._Texts.close

    def close(self):
        seen.append(len(self.kept))
        real_close(self)

    monkeypatch.setattr(store._Texts, "close", close)
    rep1 = store.build_references(one)
    monkeypatch.setattr(store._Texts, "KEPT_CHARS", 0)
    rep2 = store.build_references(two)
    assert rep1 == rep2 and rep1["built"] == 23 and seen == [0, 0]
    names = sorted(p.name for p in store.refs_folder(one).iterdir())
    assert names == sorted(p.name for p in store.refs_folder(two).iterdir())
    for name in names:
        b1, b2 = ((store.refs_folder(w) / name).read_bytes() for w in (one, two))
        if name != "unlocated.idx":
            d1, d2 = json.loads(b1), json.loads(b2)
            d1.pop("stamp"), d2.pop("stamp")
            assert d1 == d2


def test_a_source_file_written_field_by_field_is_the_general_encoders():
    """``store._source_json`` (each entry's JSON made field by field) writes what ``_DUMPS`` writes of the
    same data: entries made by the parser, by ``from_json`` and by the dataclass itself, with quotes,
    back-slashes, control characters, non-ASCII and astral text, empty and missing fields."""
    import random

    from chitragupta.engine.citations import store
    from chitragupta.engine.citations.entries import Entry, parse_entry

    rng = random.Random(44)
    pieces = ["a", "Z", " ", '"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "\u00e9", "\u201c", "\u2028",
              "\ud83d\ude00", "10.1000/x", "http://x.org/?a=b&c", "</script>", "null", "2019"]

    def text() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))

    def opt():
        return None if rng.random() < 0.3 else text()

    entries = [parse_entry(text() + " 2019. " + text(), 1), Entry(2, "x"), Entry(3, "", (), None, "", "", "", "", "")]
    for n in range(300):
        e = Entry(n, text(), tuple(text() for _ in range(rng.randint(0, 4))), rng.choice([None, 0, 1999, 2024]),
                  opt(), opt(), opt(), opt(), opt())
        entries += [e, Entry.from_json(e.to_json())]
    for k in range(0, len(entries), 7):
        chunk = [vars(e) for e in entries[k:k + 7]]
        notes = rng.choice([[], ["a note", text()], None])
        located = rng.choice([True, False])
        want = store._DUMPS({"rules": store.RULES, "citekey": text(), "stamp": "s", "fingerprint": "f",
                             "located": located, "entries": chunk, "notes": notes})
        key = json.loads(want)["citekey"]
        assert store._source_json(key, "s", "f", located, chunk, notes) == want


def test_a_source_file_is_the_compact_json_of_its_data(tmp_path):
    """Each source's file holds the bytes ``json.dumps(data, ensure_ascii=False, separators=(",", ":"))``
    writes of its data (the encoder the build keeps, without the check for cycles, writes the same), a
    non-ASCII entry included."""
    from chitragupta.engine.citations import store

    ws = _imported(tmp_path, 9)
    rep = store.build_references(ws)
    files = [p for p in store.refs_folder(ws).iterdir() if p.suffix == ".json"]
    assert len(files) == rep["sources"] >= 7
    for p in files:
        raw = p.read_bytes()
        assert raw == json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    data = {"entries": [{"n": 1, "text": "Müller, \u00e9t\u00e9 \u201cquoted\u201d", "authors": ("Müller",)}],
            "notes": ["a\nb"], "located": True, "year": None}
    assert store._DUMPS(data) == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
