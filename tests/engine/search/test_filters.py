"""Metadata filters (engine/search/filters.py): their value syntax, their mask against a plain-Python reading of
the records, and BM25 with filters = the unfiltered ranking restricted to the allowed sources, to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from chitragupta.engine.search.bm25 import Retriever
from chitragupta.engine.search.filters import Filters, per_query
from chitragupta.errors import UsageError

from helpers import make_workspace, random_docs

# (as written in a record, the folded keys a filter matches it by)
FAMILIES = [("Müller, Anna", {"muller"}), ("Smith, John", {"smith"}), ("Jan van der Berg", {"van der berg", "berg"}),
            ("Łukasiewicz, Jan", {"lukasiewicz"}), ("O'Brien, Pat", {"o'brien"})]
KEYWORDS = ["Digital Twin", "fidelity", "Ocean", "sensor"]
VENUES = ["Journal of Fluid Mechanics", "Proc. Digital Twin Conference", "Nature"]
TYPES = ["article", "inproceedings", "phdthesis"]


def _records(seed: int, n: int):
    """Random documents with random metadata (each field missing now and then), and the truth per _id."""
    rng = np.random.default_rng(seed)
    docs, truth = random_docs(seed, n, vocab=40), {}
    for d in docs:
        t = {}
        if rng.random() < 0.85:
            t["year"] = int(rng.integers(1990, 2024))
            d["year"] = str(t["year"]) if rng.random() < 0.5 else t["year"]
        if rng.random() < 0.85:
            picks = rng.choice(len(FAMILIES), size=int(rng.integers(1, 3)), replace=False)
            d["authors"] = [FAMILIES[i][0] for i in picks]
            t["author"] = set().union(*(FAMILIES[i][1] for i in picks))
        if rng.random() < 0.7:
            picks = rng.choice(len(KEYWORDS), size=int(rng.integers(1, 3)), replace=False)
            d["keywords"] = [KEYWORDS[i] for i in picks]
            t["keyword"] = {KEYWORDS[i].lower() for i in picks}
        if rng.random() < 0.8:
            v = VENUES[int(rng.integers(len(VENUES)))]
            d["venue"], t["venue"] = v, v.lower()
        if rng.random() < 0.8:
            ty = TYPES[int(rng.integers(len(TYPES)))]
            d["type"], t["type"] = ty.upper() if rng.random() < 0.3 else ty, ty
        truth[d["_id"]] = t
    return docs, truth


def _allowed(f: dict, t: dict, key: str) -> bool:
    """The plain-Python reading of one filter dict against one record's truth."""
    if "year" in f:
        lo, hi = f["year"]
        if "year" not in t or (lo is not None and t["year"] < lo) or (hi is not None and t["year"] > hi):
            return False
    for name in ("author", "keyword", "type"):
        if name in f and not (t.get(name, set()) if name != "type" else {t.get("type")}) & {x.lower() for x in f[name]}:
            return False
    if "venue" in f and ("venue" not in t or f["venue"].lower() not in t["venue"]):
        return False
    if "keys" in f and key not in f["keys"]:
        return False
    return True


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs, truth = _records(5, 300)
    return make_workspace(tmp_path_factory.mktemp("filters"), docs), truth


# -- the value syntax ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, want", [("2015..2020", (2015, 2020)), ("2015..", (2015, None)),
                                         ("..2020", (None, 2020)), ("2019", (2019, 2019)), (2019, (2019, 2019)),
                                         (" 2015 .. 2020 ", (2015, 2020))])
def test_year_values(value, want):
    assert Filters.from_dict({"year": value}).year == want


@pytest.mark.parametrize("d, needle", [
    ({"yaer": 2019}, "unknown field 'yaer'; allowed: year, author, keyword, venue, type, keys"),
    ({"year": "2020..2015"}, "filters.year: an empty range"),
    ({"year": ".."}, "filters.year: bad value '..'"),
    ({"year": "in press"}, "allowed: a year (2019) or a range"),
    ({"year": True}, "filters.year"),
    ({"year": 123456}, "filters.year"),
    ({"author": []}, "filters.author: bad value []"),
    ({"author": ["Smith", 3]}, "filters.author"),
    ({"keyword": ""}, "filters.keyword"),
    ({"venue": ["a"]}, "filters.venue"),
    ({"type": 1}, "filters.type"),
    ({"keys": "d0001"}, "filters.keys: bad value 'd0001'; allowed: a list of citekeys"),
    ("year=2019", "filters must be an object"),
])
def test_bad_filters_are_one_clear_usage_error(d, needle):
    with pytest.raises(UsageError) as err:
        Filters.from_dict(d)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_values_are_folded_and_a_string_is_a_list_of_one():
    f = Filters.from_dict({"author": "MÜLLER", "keyword": ["Digital  Twin"], "type": "Article", "venue": "NATURE"})
    assert f.author == ("muller",) and f.keyword == ("digital twin",) and f.type == ("article",)
    assert f.venue == "nature"
    assert Filters.from_dict({}).is_empty() and per_query({}, 3) is None and per_query(None, 2) is None
    with pytest.raises(UsageError, match="2 entries for 3 queries"):
        per_query([None, {}], 3)


def test_merge_is_and():
    a = Filters.from_dict({"year": "2000..", "author": "smith"})
    b = Filters.from_dict({"type": "article"})
    m = a.merge(b)
    assert (m.year, m.author, m.type, m.also) == ((2000, None), ("smith",), ("article",), ())
    c = a.merge(Filters.from_dict({"author": "muller"}))  # same field: both must hold, not either
    assert c.also and c.fields_used() == ["year", "author"]
    assert a.merge(None) is a and Filters().merge(a) is a


# -- the mask ---------------------------------------------------------------------------------------------
FILTERS = [
    {"year": (2000, 2010)}, {"year": (None, 1995)}, {"year": (2015, None)},
    {"author": ["smith"]}, {"author": ["Muller", "berg"]}, {"author": ["van der Berg"]}, {"author": ["lukasiewicz"]},
    {"keyword": ["digital twin"]}, {"keyword": ["ocean", "sensor"]},
    {"venue": "digital"}, {"venue": "JOURNAL"},
    {"type": ["article"]}, {"type": ["phdthesis", "inproceedings"]},
    {"year": (2000, None), "author": ["smith"], "type": ["article"]},
    {"keys": ["d0001", "d0007", "d0100", "nope"]},
]


def _as_dict(f: dict) -> dict:
    d = dict(f)
    if "year" in d:
        lo, hi = d["year"]
        d["year"] = f"{'' if lo is None else lo}..{'' if hi is None else hi}"
    return d


@pytest.mark.parametrize("f", FILTERS)
def test_mask_matches_a_plain_reading_of_the_records(corpus, f):
    ws, truth = corpus
    r = Retriever.open(ws, backend="numpy")
    keys = r.index.citekeys.to_list()
    mask, missing = r.scorer.filter_mask("document", Filters.from_dict(_as_dict(f)))
    want = [_allowed(f, truth[k], k) for k in keys]
    assert mask.tolist() == want and any(want)
    for name, n in missing.items():
        assert n == sum(name not in truth[k] for k in keys)
    assert set(missing) == {n for n in f if n != "keys"}


def test_the_index_columns_give_the_masks_of_the_ledgers_facets_read_now(corpus):
    """The columns written with the index (memory-mapped) against a FacetTable built from the ledger's
    facets at this moment: the same mask and counts, bit for bit, for every filter above."""
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.metadata import facets
    from chitragupta.engine.search.filters import FacetTable

    ws, _truth = corpus
    r = Retriever.open(ws, backend="numpy")
    stored = r.scorer.facet_table("document")
    assert stored._arrays is r.index.facet_arrays and r.index.facet_arrays["facet_year"].base is not None
    with Ledger(r.workspace.ledger_path, create=False) as led:
        fresh = FacetTable(facets(led), r.index.citekeys.to_list())
    for f in FILTERS + [{"venue": "o"}, {"keyword": ["fidelity"], "year": (None, 2000)}]:
        a, b = stored.mask(Filters.from_dict(_as_dict(f))), fresh.mask(Filters.from_dict(_as_dict(f)))
        assert a[0].tobytes() == b[0].tobytes() and a[1] == b[1]


def test_merged_filters_mask_is_the_and_of_both(corpus):
    ws, truth = corpus
    r = Retriever.open(ws, backend="numpy")
    a, b = Filters.from_dict({"author": "smith"}), Filters.from_dict({"author": "muller", "year": "2000.."})
    ma, mb = r.scorer.filter_mask("document", a)[0], r.scorer.filter_mask("document", b)[0]
    m = r.scorer.filter_mask("document", a.merge(b))[0]
    assert m.tolist() == (ma & mb).tolist() and m.any()


# -- BM25 with filters: to the bit ---------------------------------------------------------------------------
QUERIES = ["twin model sensor", "ocean heat", "model", "fidelity sensor water", "zzzz", "twin -ocean"]


@pytest.fixture(scope="module", params=["numpy", "numba"])
def retriever(corpus, request):
    return Retriever.open(corpus[0], backend=request.param)


@pytest.mark.parametrize("f", FILTERS)
def test_filtered_bm25_is_the_unfiltered_ranking_restricted(retriever, corpus, f):
    truth_meta = corpus[1]
    keys = retriever.index.citekeys.to_list()
    allowed = {d for d, k in enumerate(keys) if _allowed(f, truth_meta[k], k)}
    full = retriever.rank_many(QUERIES, k=10_000).topk
    for k in (3, len(allowed) + 7):
        top = retriever.rank_many(QUERIES, k=k, filters=_as_dict(f)).topk
        for q in range(len(QUERIES)):
            truth = [(int(d), s) for d, s in zip(full.ids[q], full.scores[q]) if d >= 0 and int(d) in allowed][:k]
            n = int(top.counts()[q])
            assert [(int(d), s) for d, s in zip(top.ids[q, :n], top.scores[q, :n])] == truth
            assert np.asarray(top.scores[q, :n]).tobytes() == np.asarray([s for _d, s in truth]).tobytes()
            assert not set(top.ids[q, :n].tolist()) - allowed


def test_per_query_filters_in_a_batch_equal_one_query_at_a_time(retriever):
    fs = [_as_dict(FILTERS[i % len(FILTERS)]) if i % 3 else None for i in range(len(QUERIES) * 3)]
    queries = QUERIES * 3
    batch = retriever.rank_many(queries, k=9, filters=fs)
    for q, (query, f) in enumerate(zip(queries, fs)):
        one = retriever.rank_many([query], k=9, filters=f).topk
        assert one.ids[0].tolist() == batch.topk.ids[q].tolist()
        assert one.scores[0].tobytes() == batch.topk.scores[q].tobytes()


def test_search_notes_how_many_sources_had_no_value(corpus):
    ws, truth = corpus
    r = Retriever.open(ws, backend="numpy")
    resp = r.search("twin model", k=5, filters={"year": "2000..", "venue": "nature"})
    notes = [n.text for n in resp.notes if n.kind == "filter"]
    no_year = sum("year" not in t for t in truth.values())
    no_venue = sum("venue" not in t for t in truth.values())
    assert notes == [f"{no_year} source(s) have no year and were excluded by the year filter",
                     f"{no_venue} source(s) have no venue and were excluded by the venue filter"]
    assert all(truth[h.citekey].get("year", 0) >= 2000 and truth[h.citekey].get("venue") == "nature" for h in resp)


def test_filtered_passages_come_only_from_allowed_sources(corpus):
    """The passage unit's mask is the source mask through p_doc (a workspace without sidecars has no
    passages: the call still checks its filters and returns nothing)."""
    ws, _truth = corpus
    r = Retriever.open(ws, backend="numpy")
    f = Filters.from_dict({"author": "smith"})
    mask, _missing = r.scorer.filter_mask("passage", f)
    pidx = r.passage_index()
    p_doc = np.asarray(pidx.p_doc)
    assert mask.shape == (pidx.n_passages,)
    doc_mask = r.scorer.facet_table("passage").mask(f)[0]
    assert mask.tolist() == doc_mask[p_doc].tolist()
    top = r.rank_many(QUERIES, k=50, unit="passage", filters=f).topk
    assert all(mask[u] for u in top.ids[top.ids >= 0].tolist())
    with pytest.raises(UsageError, match="filters.year"):
        r.rank_many(QUERIES, k=5, unit="passage", filters={"year": "x"})


# -- surfaces: the CLI's flags and a batch line's own filters ----------------------------------------------------
def test_cli_flags_filter_as_the_python_call_does(corpus, tmp_path):
    import json

    from helpers import run_main

    ws, truth = corpus
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("d0001\nd0002\n\nd0150\nd0007\n", encoding="utf-8")
    got = run_main("search", "-w", ws, "twin model", "-k", "50", "--json", "--year", "1995..2015",
                   "--author", "smith", "--author", "BERG", "--type", "article")
    assert got.returncode == 0, got.stderr
    r = Retriever.open(ws, backend="numpy")
    want = r.search("twin model", k=50, filters={"year": "1995..2015", "author": ["smith", "berg"], "type": "article"})
    assert [h["citekey"] for h in json.loads(got.stdout)] == [h.citekey for h in want.hits] and want.hits
    assert "have no year and were excluded by the year filter" in got.stderr
    got = run_main("search", "-w", ws, "model", "-k", "50", "--json", "--keys", keys_file, "--venue", "nature")
    hits = [h["citekey"] for h in json.loads(got.stdout)]
    assert set(hits) <= {"d0001", "d0002", "d0150", "d0007"}
    assert all(truth[k].get("venue") == "nature" for k in hits)
    bad = run_main("search", "-w", ws, "model", "--year", "20x5")
    assert bad.returncode != 0 and "--year: bad value '20x5'; allowed: a year (2019)" in bad.stderr
    missing = run_main("search", "-w", ws, "model", "--keys", tmp_path / "nope.txt")
    assert missing.returncode != 0 and "--keys" in missing.stderr


def test_a_batch_lines_filters_are_anded_with_the_flags_for_that_query_only(corpus, tmp_path):
    import json

    from helpers import run_main, write_jsonl

    ws, _truth = corpus
    lines = [{"_id": "a", "text": "twin model"},
             {"_id": "b", "text": "twin model", "filters": {"author": ["smith", "muller"]}},
             {"_id": "c", "text": "ocean heat", "filters": {"year": 2001}},
             {"_id": "d", "text": "ocean heat", "filters": {"yaer": 2001}}]
    q = write_jsonl(tmp_path / "q.jsonl", lines)
    out = tmp_path / "run.jsonl"
    got = run_main("search", "-w", ws, "--queries", q, "--run", out, "--json", "-k", "20", "--year", "2000..")
    assert got.returncode == 0, got.stderr
    assert "q.jsonl:4: filters: unknown field 'yaer'" in got.stderr
    run: dict = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        run.setdefault(row["qid"], []).append(row["citekey"])
    r = Retriever.open(ws, backend="numpy")
    base = {"year": "2000.."}
    want = {"a": r.rank_many(["twin model"], k=20, filters=base).keys()[0],
            "b": r.rank_many(["twin model"], k=20, filters=Filters.from_dict(base).merge(
                Filters.from_dict({"author": ["smith", "muller"]}))).keys()[0],
            "c": r.rank_many(["ocean heat"], k=20, filters=Filters.from_dict(base).merge(
                Filters.from_dict({"year": 2001}))).keys()[0]}
    assert {k: v for k, v in run.items()} == {k: v for k, v in want.items() if v}
    assert want["b"] != want["a"] and want["c"]


# -- embed and hybrid: an exact scan of the allowed chunks ------------------------------------------------------
from helpers import cli_main  # noqa: E402,F401  (the session's MiniLM)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, encoder):
    docs, truth = _records(9, 60)
    root = make_workspace(tmp_path_factory.mktemp("filters_embed"), docs)
    assert cli_main("enrich", "-w", root, "--stages", "embed", "--device", "cpu") == 0
    return root, truth


EMBED_FILTERS = [{"year": (2000, 2012)}, {"author": ["smith", "berg"]}, {"type": ["article"], "venue": "journal"},
                 {"keys": ["d0003", "d0010", "d0011", "d0040"]}]


@pytest.mark.slow
@pytest.mark.enrich
@pytest.mark.parametrize("f", EMBED_FILTERS)
def test_filtered_embed_is_the_unfiltered_ranking_restricted(embedded, f):
    from chitragupta.enrich.search import EmbedSearcher

    root, truth = embedded
    e = EmbedSearcher.open(root, device="cpu")
    queries = QUERIES[:4]
    n = e.store.count
    full = e.rank_many(queries, n, max_per_source=n)
    cap = int(e.workspace.config.enrich.embed_max_passages_per_source)
    for k in (3, n):
        got = e.rank_many(queries, k, filters=_as_dict(f))
        for q in range(len(queries)):
            rows = [int(x) for x in full.topk.ids[q] if x >= 0]
            scores = {int(x): s for x, s in zip(full.topk.ids[q], full.topk.scores[q]) if x >= 0}
            kept, per = [], {}
            for row in rows:  # restricted to the allowed sources, then capped per source as rank_many caps
                key = e.citekey(row)
                if _allowed(f, truth[key], key) and per.get(key, 0) < cap:
                    per[key] = per.get(key, 0) + 1
                    kept.append(row)
            m = int(got.topk.counts()[q])
            assert [int(x) for x in got.topk.ids[q, :m]] == kept[:k]
            assert np.allclose(got.topk.scores[q, :m], [scores[x] for x in kept[:k]], atol=1e-5)


@pytest.mark.enrich
@pytest.mark.parametrize("unit", ["document", "passage"])
def test_hybrid_never_returns_a_disallowed_source(embedded, unit):
    from chitragupta.enrich.hybrid import HybridSearcher

    root, truth = embedded
    h = HybridSearcher.open(root, device="cpu")
    f = {"year": (1995, 2015), "author": ["smith", "muller"]}
    ranked = h.rank_many(QUERIES, 50, unit=unit, filters=_as_dict(f))
    allowed = {k for k, t in truth.items() if _allowed(f, t, k)}
    got = {k for keys in ranked.keys() for k in keys}
    assert got <= allowed and (got or unit == "passage")
    if unit == "document":  # and every allowed source either side ranks came back (k above the allowed set)
        plain = h.rank_many(QUERIES, 60, unit=unit)
        for q, keys in enumerate(ranked.keys()):
            assert set(keys) == set(plain.keys()[q]) & allowed
    resp = h.search("twin model", k=5, unit=unit, filters=_as_dict(f))
    assert {x.citekey for x in resp.hits} <= allowed
    assert any(n.kind == "filter" for n in resp.notes)


# -- the passage unit, on sidecars written here ------------------------------------------------------------------
@pytest.fixture(scope="module", params=["numpy", "numba"])
def passages(tmp_path_factory, request):
    from chitragupta.engine.library.ledger import Ledger
    from chitragupta.engine.library.workspace import Workspace
    from chitragupta.engine.text.sidecar import dump_sidecar, join_items

    docs, truth = _records(13, 60)
    rng = np.random.default_rng(13)
    sidecars = {}
    for d in docs:
        words = (d["text"] + " twin model sensor ocean").split()
        items, at = [], 0
        while at < len(words):
            n = int(rng.integers(6, 15))
            items.append({"text": " ".join(words[at:at + n]), "label": "text", "page": 1})
            at += n
        sidecars[d["_id"]] = items
        d["text"] = join_items(items)
    root = make_workspace(tmp_path_factory.mktemp(f"filters_passages_{request.param}"), docs)
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 1\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for key, items in sidecars.items():
            (w.root / led.get(key).parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    return Retriever.open(w, backend=request.param), truth


@pytest.mark.parametrize("f", [FILTERS[0], FILTERS[4], FILTERS[9], FILTERS[13], FILTERS[14]])
def test_filtered_passages_are_the_unfiltered_ranking_restricted(passages, f):
    r, truth = passages
    pidx = r.passage_index()
    assert pidx.n_passages > 100
    keys = pidx.citekeys.to_list()
    p_doc = np.asarray(pidx.p_doc)
    n = pidx.n_passages
    full = r.rank_many(QUERIES, k=n, unit="passage", max_per_source=n).topk
    for cap in (n, 2):
        for k in (4, n):
            got = r.rank_many(QUERIES, k=k, unit="passage", max_per_source=cap, filters=_as_dict(f)).topk
            for q in range(len(QUERIES)):
                want, per = [], {}
                for u, s in zip(full.ids[q], full.scores[q]):
                    if u < 0:
                        break
                    key = keys[p_doc[u]]
                    if _allowed(f, truth[key], key) and per.get(key, 0) < cap:
                        per[key] = per.get(key, 0) + 1
                        want.append((int(u), s))
                m = int(got.counts()[q])
                assert [(int(u), s) for u, s in zip(got.ids[q, :m], got.scores[q, :m])] == want[:k]
                assert np.asarray(got.scores[q, :m]).tobytes() == np.asarray([s for _u, s in want[:k]]).tobytes()


# -- the columns follow the ledger, and a damaged one is rebuilt -------------------------------------------------
def _small(tmp_path, n=40):
    docs, truth = _records(21, n)
    return make_workspace(tmp_path, docs), docs, truth


def test_a_metadata_change_without_a_text_change_updates_the_columns(tmp_path):
    from chitragupta.engine.index.manage import open_current
    from chitragupta.engine.library.workspace import Workspace

    from helpers import import_jsonl, write_jsonl

    root, docs, _truth = _small(tmp_path)
    r = Retriever.open(root, backend="numpy")
    f = Filters.from_dict({"year": "3000"})
    assert not r.scorer.filter_mask("document", f)[0].any()
    docs[3] = dict(docs[3], year=3000, authors=["Zed, Ann"])  # the same file imported again: its metadata alone changed
    import_jsonl(Workspace.open(root), write_jsonl(tmp_path / "corpus.jsonl", docs))
    opened = open_current(Workspace.open(root))
    assert opened.check == "built" and opened.report.retokenized == 0  # the texts reused, the columns new
    r = Retriever.open(root, backend="numpy")
    keys = r.index.citekeys.to_list()
    assert [keys[d] for d in np.flatnonzero(r.scorer.filter_mask("document", f)[0])] == [docs[3]["_id"]]
    assert r.search("twin", k=50, filters={"author": "zed"}).hits[0].citekey == docs[3]["_id"]
    assert open_current(Workspace.open(root)).check in ("stamp", "scan")  # and then nothing to do


@pytest.mark.parametrize("how", ["damaged", "missing"])
def test_a_damaged_or_missing_filter_column_is_rebuilt_with_a_note(tmp_path, how):
    import json

    root, _docs, truth = _small(tmp_path)
    r = Retriever.open(root, backend="numpy")
    gen = r.index.path
    want = [h.citekey for h in r.search("twin model", k=40, filters={"author": "smith"}).hits]
    assert want and all("smith" in truth[k].get("author", ()) for k in want)
    del r
    if how == "damaged":  # a byte rotted in place: size, mtime and inode as they were
        p = gen / "facet_author_ids.npy"
        st = p.stat()
        raw = bytearray(p.read_bytes())
        raw[-1] ^= 0x7F
        p.write_bytes(bytes(raw))
        import os

        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:  # an index written before the columns existed
        manifest = json.loads((gen / "manifest.json").read_text())
        for name in [n for n in manifest["files"] if n.startswith("facet_")]:
            del manifest["files"][name]
            (gen / f"{name}.npy").unlink()
        (gen / "manifest.json").write_text(json.dumps(manifest))
    r = Retriever.open(root, backend="numpy")
    resp = r.search("twin model", k=40, filters={"author": "smith"})
    assert [h.citekey for h in resp.hits] == want
    said = [n.text for n in resp.notes if n.kind == "index"] + [n.text for n in r.index_notes()]
    assert any("facet_author" in t or "filter column" in t for t in said), said
    assert r.index.path != gen


# -- notes: what a filter did that its user would not guess ------------------------------------------------------
def _filter_notes(r, f) -> list[str]:
    return [n.text for n in r.search("twin model", k=5, filters=f).notes if n.kind == "filter"]


def test_a_filter_that_excludes_every_source_says_so(corpus):
    r = Retriever.open(corpus[0], backend="numpy")
    notes = _filter_notes(r, {"year": 2030})
    assert notes[-1] == "the filters (year 2030..2030) excluded every source"
    assert not any("excluded every source" in t for t in _filter_notes(r, {"year": "2000.."}))


def test_citekeys_not_in_the_library_are_named_with_the_nearest_one(corpus):
    r = Retriever.open(corpus[0], backend="numpy")
    notes = _filter_notes(r, {"keys": ["d0007", "d0013x", "zzz-nothing"]})
    assert notes[0] == "2 of 3 citekey(s) are not in the library: d0013x (did you mean 'd0013'?), zzz-nothing"
    assert not any("excluded every source" in t for t in notes)
    assert _filter_notes(r, {"keys": []})[0] == "the citekeys filter lists no citekey, so it excluded every source"
    assert _filter_notes(r, {"keys": ["d0001"]}) == []


def test_a_partial_keyword_is_told_which_keywords_hold_it(corpus):
    r = Retriever.open(corpus[0], backend="numpy")
    notes = _filter_notes(r, {"keyword": ["twin"]})
    assert notes[1] == "no source has the keyword 'twin' (a keyword matches whole); keywords holding it: 'digital twin'"
    assert not any("no source has" in t for t in _filter_notes(r, {"keyword": ["Digital Twin"]}))


def test_zero_width_characters_fold_away_like_accents(tmp_path):
    docs = random_docs(3, 6, vocab=20)
    docs[0]["authors"] = ["Smi\u200bth, John"]
    docs[1]["authors"] = ["M\u00fcl\u200dler, Anna"]
    docs[2]["venue"] = "Na\ufefftu\u00adre"
    r = Retriever.open(make_workspace(tmp_path, docs), backend="numpy")
    keys = r.index.citekeys.to_list()

    def allowed(f):
        return [keys[d] for d in np.flatnonzero(r.scorer.filter_mask("document", Filters.from_dict(f))[0])]

    assert allowed({"author": "smith"}) == allowed({"author": "Sm\u200bith"}) == [docs[0]["_id"]]
    assert allowed({"author": "MULLER"}) == [docs[1]["_id"]]
    assert allowed({"venue": "nature"}) == [docs[2]["_id"]]


# -- topics: content/topics.json's assignments --------------------------------------------------------------------
def test_the_topic_filter_narrows_to_a_topic_and_refuses_without_topics(corpus):
    import json

    ws, _truth = corpus
    r = Retriever.open(ws, backend="numpy")
    topics = r.workspace.content / "topics.json"
    topics.unlink(missing_ok=True)
    with pytest.raises(UsageError, match=r"this workspace has no topics .*enrich --stages bertopic"):
        r.search("twin", k=5, filters={"topic": 0})
    keys = r.index.citekeys.to_list()
    assign = {k: (i % 4) - 1 for i, k in enumerate(keys[:-10])}  # the last ten clustered by no fit
    topics.write_text(json.dumps({"schema": 1, "topics": [{"id": t} for t in (-1, 0, 1, 2)],
                                  "assignments": dict(assign, ghost=1)}))
    try:
        r = Retriever.open(ws, backend="numpy")
        m, missing = r.scorer.filter_mask("document", Filters.from_dict({"topic": [0, 2]}))
        assert [keys[d] for d in np.flatnonzero(m)] == [k for k, t in assign.items() if t in (0, 2)]
        assert missing == {"topic": 10}
        hits = r.search("twin model", k=50, filters={"topic": -1}).hits
        assert hits and all(assign[h.citekey] == -1 for h in hits)
        assert _filter_notes(r, {"topic": [1, 7]})[-1] == "no topic 7 in topics.json: its topics are -1..2"
        topics.write_text(json.dumps({"topics": [{"id": 0}], "assignments": {keys[5]: 0}}))  # fitted again
        assert [keys[d] for d in np.flatnonzero(r.scorer.filter_mask("document", Filters.from_dict({"topic": 0}))[0])] \
            == [keys[5]]  # the same open searcher (a warm server) reads the new topics
        with pytest.raises(UsageError, match="filters.topic: bad value"):
            Filters.from_dict({"topic": "x"})
        topics.write_text("[1, 2")
        r = Retriever.open(ws, backend="numpy")
        with pytest.raises(UsageError, match="is not a topics file"):
            r.search("twin", k=5, filters={"topic": 0})
    finally:
        topics.unlink()
