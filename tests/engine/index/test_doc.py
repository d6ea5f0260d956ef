"""The document index: correct against the oracle, incremental == fresh, corrupt caches rebuilt."""

import json

import numpy as np
import pytest
from chitragupta.engine.index import doc as doc_index
from chitragupta.engine.index.manage import doc_folder, open_current, refresh
from chitragupta.engine.library.ledger import Ledger
from chitragupta.engine.library.workspace import Workspace
from chitragupta.engine.search.bm25 import Retriever

from helpers import (
    arrays_of,
    assert_identical,
    make_workspace,
    random_docs,
    write_jsonl,
)
from oracle import bm25, same_ranking, tokens


def test_scores_match_the_oracle(tmp_path):
    docs = random_docs(11, 120)
    root = make_workspace(tmp_path, docs)
    (root / "config.toml").write_text("[retrieval]\nacronym_expansion = false\n")  # the oracle does not expand
    ws = Workspace.open(root)
    r = Retriever.open(ws)
    oracle_docs = {d["_id"]: tokens(d["title"] + "\n" + d["text"]) for d in docs}
    rng = np.random.default_rng(3)
    words = sorted({t for v in oracle_docs.values() for t in v})
    queries = [" ".join(rng.choice(words, rng.integers(1, 5))) for _ in range(50)] + ["twin of the DT", "zzz"]
    for params in [(1.5, 0.75), (0.9, 0.4)]:
        r.params = type(r.params)(k1=params[0], b=params[1])
        for resp in r.search_many(queries, k=10):
            got = [(h.citekey, h.score) for h in resp.hits]
            want = bm25(oracle_docs, tokens(resp.query), *params)
            assert same_ranking(got, want, 10), (resp.query, got, want[:10])


def test_incremental_update_equals_fresh_build(tmp_path):
    docs = random_docs(12, 200)
    root = make_workspace(tmp_path / "a", docs)
    ws = Workspace.open(root)
    refresh(ws)
    # change one text, delete one record, add two, and remove one parsed file behind the ledger's back
    docs[5]["text"] += " brandnewterm twin"
    del docs[17]
    docs += [{"_id": "zz-new", "title": "New paper", "text": "ocean heat"}, {"_id": "a-first", "title": "", "text": "x"}]
    from chitragupta.engine.library.sync import import_jsonl

    import_jsonl(ws, write_jsonl(tmp_path / "a" / "corpus.jsonl", docs))
    with Ledger(ws.ledger_path) as l:
        gone = l.get("d0042").parsed_path
    (root / gone).unlink()
    updated = refresh(ws)
    assert updated.report.retokenized == 4 and updated.report.removed == 1  # 2 new, 1 changed, 1 missing text
    inc = arrays_of(updated.index)
    fresh = arrays_of(refresh(ws, force=True).index)
    assert_identical(inc, fresh)
    # and equal to a build in a workspace that never saw the old corpus (same text, same mtimes)
    assert "brandnewterm" in inc["vocab"] and "d0017" not in inc["citekeys"]


def test_index_is_reused_when_nothing_changed(tmp_path):
    ws = Workspace.open(make_workspace(tmp_path, random_docs(13, 30)))
    first = refresh(ws)
    again = refresh(ws)
    assert first.report.rebuilt and again.report is None  # current: nothing rebuilt
    gen = (doc_folder(ws) / "CURRENT").read_text().strip()
    Retriever.open(ws).search("twin")
    assert (doc_folder(ws) / "CURRENT").read_text().strip() == gen


def test_search_updates_a_stale_index(tmp_path):
    docs = random_docs(14, 30)
    root = make_workspace(tmp_path, docs)
    ws = Workspace.open(root)
    refresh(ws)
    docs.append({"_id": "late", "title": "Late arrival", "text": "quasarword"})
    from chitragupta.engine.library.sync import import_jsonl

    import_jsonl(ws, write_jsonl(tmp_path / "corpus.jsonl", docs))
    resp = Retriever.open(ws).search("quasarword")
    assert [h.citekey for h in resp.hits] == ["late"]


@pytest.mark.parametrize("damage", ["truncate", "garbage-manifest", "other-schema", "bad-current", "missing-array",
                                    "flipped-byte", "foreign-npy"])
@pytest.mark.slow
def test_corrupt_cache_is_rebuilt_with_a_note(tmp_path, damage):
    ws = Workspace.open(make_workspace(tmp_path, random_docs(15, 40)))
    refresh(ws)
    want = [(h.citekey, h.score) for h in Retriever.open(ws).search("twin model", k=5)]
    folder = doc_folder(ws)
    gen = folder / (folder / "CURRENT").read_text().strip()
    if damage == "truncate":
        p = gen / "tf.npy"
        p.write_bytes(p.read_bytes()[:-7])
    elif damage == "garbage-manifest":
        (gen / "manifest.json").write_text("{not json")
    elif damage == "other-schema":
        m = json.loads((gen / "manifest.json").read_text())
        m["schema"] = 999
        (gen / "manifest.json").write_text(json.dumps(m))
    elif damage == "bad-current":
        (folder / "CURRENT").write_text("../../etc")
    elif damage == "missing-array":
        (gen / "indices.npy").unlink()
    elif damage == "flipped-byte":
        p = gen / "doc_len.npy"
        b = bytearray(p.read_bytes())
        b[-1] ^= 0xFF
        p.write_bytes(bytes(b))
    elif damage == "foreign-npy":
        np.save(gen / "tf.npy", np.array(["x"], dtype=object), allow_pickle=True)
    r = Retriever.open(ws)
    resp = r.search("twin model", k=5)
    assert [(h.citekey, h.score) for h in resp.hits] == want
    assert any(n.kind == "index" and "not usable" in n.text for n in resp.notes), resp.notes
    assert not any(n.kind == "index" for n in Retriever.open(ws).search("twin").notes)  # healed


def test_title_only_sources_are_counted_from_the_cache(tmp_path):
    docs = random_docs(16, 20)
    docs[3]["title"] = "Unmistakable heading"
    ws = Workspace.open(make_workspace(tmp_path, docs))
    with Ledger(ws.ledger_path) as l:
        for key in ("d0003", "d0004"):
            (ws.root / l.get(key).parsed_path).unlink()
    resp = Retriever.open(ws).search("unmistakable")
    assert [h.citekey for h in resp.hits] == ["d0003"]
    note = [n.text for n in resp.notes if n.kind == "title-only"]
    assert note == ["2 parsed source(s) have no parsed text on disk and were ranked on their title alone; "
                    "`chitragupta sync -v` names them and re-parses what it can (an imported corpus: `import` it "
                    "again)."]
    # served from the cache (nothing changed since): still counted
    again = Retriever.open(ws)
    assert again.scorer.opened["document"].report is None
    assert [n.kind for n in again.search("unmistakable").notes].count("title-only") == 1


def test_arrays_are_memory_mapped_and_pickle_free(tmp_path):
    ws = Workspace.open(make_workspace(tmp_path, random_docs(17, 20)))
    refresh(ws)
    idx = open_current(ws).index
    # read through a plain ndarray view (np.memmap's per-slice cost), the pages still the file's mapping
    import mmap

    base = idx.postings.indices
    while getattr(base, "base", None) is not None and not isinstance(base, mmap.mmap):
        base = base.base
    assert isinstance(base, mmap.mmap)
    gen = idx.path
    for p in gen.glob("*.npy"):
        np.load(p, allow_pickle=False)
    man = json.loads((gen / "manifest.json").read_text())
    assert man["schema"] == doc_index.SCHEMA_VERSION and man["kind"] == "doc" and set(man["files"]) >= {"indptr", "indices", "tf"}


def test_empty_corpus(tmp_path):
    root = make_workspace(tmp_path, [])
    r = Retriever.open(root)
    assert r.index.n_docs == 0 and len(r.search("anything")) == 0
