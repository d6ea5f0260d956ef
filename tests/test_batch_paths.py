"""The batch paths users run, checked against their slow references: acronym expansion inside the numba
lookup, the lookup table stored with the index, ids to citekeys, and run files (TREC and JSON lines)
written by the numba formatter, chunked, to files, stdout, FIFOs and devices."""

from __future__ import annotations

import json
import os
import stat
import threading

import numpy as np
import pytest

from chitragupta.errors import IndexDamaged, UsageError
from chitragupta.engine.expand import Expander
from chitragupta.engine.index.strings import StringTable
from chitragupta.engine.search import Retriever
from chitragupta.engine.tokenize import query_terms
from chitragupta.engine.runfile import format_run_lines, run_chunks
from conftest import make_workspace, random_docs, run_cli, write_jsonl

ACRONYMS = {"dt": "digital twin", "ml": "machine learning model", "gpu": "graphics processing unit",
            "llm": "large language model", "ocean9": "ocean heat", "zz": "the of"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("batch"), random_docs(5, 300, vocab=60))
    return root


@pytest.fixture(scope="module")
def retriever(ws):
    return Retriever.open(ws)


def _reference_batch(index, queries, expander):
    terms = [query_terms(q)[0] + (list(expander.expand(q).added) if expander else []) for q in queries]
    return index.query_batch(terms)


def test_expansion_in_the_numba_lookup_equals_the_python_path(retriever):
    from hypothesis import given, settings, strategies as st

    index = retriever.index
    expander = Expander(ACRONYMS)
    words = index.vocab.to_list()[:80] + list(ACRONYMS) + ["DT", "Gpu", "the", "a", "x", "naïve", "dt-ml"]

    @given(st.lists(st.lists(st.sampled_from(words + [" ", ", ", "\n", "-"]), max_size=10).map("".join),
                    min_size=32, max_size=90))
    @settings(max_examples=60, deadline=None)
    def check(queries):
        got = index.query_batch_from_strings(queries, expander)  # >= 32 queries: the numba lookup
        want = _reference_batch(index, queries, expander)
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.terms, want.terms)
        small = index.query_batch_from_strings(queries[:5], expander)  # the Python path
        ref = _reference_batch(index, queries[:5], expander)
        assert np.array_equal(small.terms, ref.terms) and np.array_equal(small.indptr, ref.indptr)

    check()


def test_rank_many_with_expansion_matches_scoring_the_expanded_strings(ws):
    r = Retriever.open(ws)
    queries = [f"dt {w} ml" for w in r.index.vocab.to_list()[:40]] + ["gpu", "ocean9 heat", "zz"]
    expander = r.expander()
    assert expander is not None and "dt" in expander.tokens
    expanded = [q + " " + " ".join(expander.expand(q).added) for q in queries]
    got = r.rank_many(queries, 10)
    r.expander = lambda: None  # score the spelled-out strings instead
    want = r.rank_many(expanded, 10)
    assert np.array_equal(got.topk.ids, want.topk.ids) and np.array_equal(got.topk.scores, want.topk.scores)
    assert got.terms[0][:1] == ["dt"] and "digital" in got.terms[0]
    assert any(n.kind == "expansion" for n in got.notes[0])
    assert got.terms is got.terms and got.notes is got.notes  # worked out once per batch


def test_the_lookup_table_is_stored_with_the_index_and_not_rebuilt(ws, monkeypatch):
    import chitragupta.kernels.lookup as lookup

    r = Retriever.open(ws)
    index = r.index
    assert isinstance(index.slots, np.memmap)
    assert np.array_equal(np.asarray(index.slots), lookup.build_table(index.vocab.blob, index.vocab.offsets))
    built = []
    real = lookup.build_table
    monkeypatch.setattr(lookup, "build_table", lambda blob, off: built.append(len(off) - 1) or real(blob, off))
    r.rank_many(["twin model"] * 40, 5)
    assert len(index.vocab) not in built  # only the small acronym table, never the vocabulary's


@pytest.mark.parametrize("damage", ["slot", "offsets", "full"])
def test_a_damaged_lookup_table_is_an_error_not_a_crash(retriever, damage):
    from chitragupta.engine.index.terms import TermIndex

    index = retriever.index
    arrays = {"vocab_blob": np.asarray(index.vocab.blob), "vocab_offsets": np.asarray(index.vocab.offsets).copy(),
              "vocab_slots": np.asarray(index.slots).copy(), "indptr": index.postings.indptr,
              "indices": index.postings.indices, "tf": index.postings.tf, "doc_len": index.postings.doc_len}
    if damage == "slot":
        arrays["vocab_slots"][arrays["vocab_slots"] >= 0] = 10**9
    elif damage == "offsets":
        arrays["vocab_offsets"][1:] = 10**12
    else:
        arrays["vocab_slots"][:] = 0  # no empty slot: probing must still stop
        arrays["vocab_offsets"][1:] = 10**12
    broken = TermIndex(arrays, {})
    with pytest.raises(IndexDamaged, match="index --force"):
        broken.query_batch_from_strings(["zzzz twin model qq"] * 40)


# -- run files -----------------------------------------------------------------------------------------
def _reference_run(qids, per_query, fmt):
    lines = []
    for qid, hits in zip(qids, per_query):
        if fmt == "trec":
            lines += [x + "\n" for x in format_run_lines(qid, [(k + (f"#{i}" if i >= 0 else ""), s)
                                                                for k, i, s in hits])]
        else:
            for rank, (k, i, s) in enumerate(hits, start=1):
                d = {"qid": qid, "rank": rank, "citekey": k}
                if i >= 0:
                    d["passage"] = i
                lines.append(json.dumps(d, ensure_ascii=False)[:-1] + f', "score": {s:.10g}}}\n')
    return "".join(lines).encode("utf-8")


def _random_run(seed, keys, passages=False):
    rng = np.random.default_rng(seed)
    n_q = int(rng.integers(1, 40))
    counts = rng.integers(0, 12, n_q)
    n = int(counts.sum())
    docs = rng.integers(0, len(keys), n)
    items = rng.integers(0, 300, n) if passages else np.full(n, -1)
    kind = rng.integers(0, 4, n)
    scores = np.where(kind == 0, rng.random(n) * 40, np.where(kind == 1, np.exp(rng.uniform(-40, 80, n)),
                      np.where(kind == 2, np.round(rng.random(n) * 1e4) / 8, rng.integers(1, 10**12, n) * 1.0)))
    qids = [f"q{i}" for i in range(n_q)]
    return qids, counts, docs, items, scores


PLAIN_KEYS = sorted(["smith2020", "doe-2019a", "müller2021", "x:y/z", "日本2020", "a" * 300, "k9"])
JSON_KEYS = sorted(PLAIN_KEYS + ['quote"key', "back\\slash", "tab\tkey", "nl\nkey", "nbsp\u00a0key", "\x1fctl"])


@pytest.mark.parametrize("fmt", ["trec", "jsonl"])
@pytest.mark.parametrize("passages", [False, True])
def test_run_chunks_equal_the_per_line_reference(fmt, passages):
    keys = PLAIN_KEYS if fmt == "trec" else JSON_KEYS
    table = StringTable.from_sorted(keys)
    table._list = None  # read the bytes, as an opened index does
    for seed in range(25):
        qids, counts, docs, items, scores = _random_run(seed, keys, passages)
        if fmt == "jsonl" and seed % 3 == 0:
            qids = [q + ['"', "\\", "é", "\t"][seed % 4] for q in qids]
        per_query, h = [], 0
        for c in counts:
            per_query.append([(keys[d], int(i), float(s)) for d, i, s in
                              zip(docs[h:h + c], items[h:h + c], scores[h:h + c])])
            h += c
        want = _reference_run(qids, per_query, fmt)
        for chunk_bytes in (1 << 23, 1, 97):
            got = b"".join(bytes(c) for c in run_chunks(qids, counts, docs, scores, table,
                                                         items if passages else None, fmt=fmt,
                                                         chunk_bytes=chunk_bytes))
            assert got == want, (seed, chunk_bytes)
        if fmt == "jsonl":
            for line in want.decode().splitlines():
                assert set(json.loads(line)) >= {"qid", "rank", "citekey", "score"}


def test_score_text_is_pythons_g10_everywhere():
    from chitragupta.kernels.runfmt import score_lengths

    rng = np.random.default_rng(7)
    xs = np.concatenate([rng.random(50_000) * 40, np.exp(rng.uniform(-60, 120, 50_000)),
                         [1e-5, 1e-4, 9.9999999995, 9.99999999949, 0.5, 1.0, 10.0, 1e10, 9999999999.5, 1e-13,
                          1e31, 1e22, 5e-324, 1.7976931348623157e308, 0.0, -1.5, np.inf, np.nan, 1e100, 1e9]])
    lens = score_lengths(xs)
    assert (lens >= 0).mean() > 0.7  # the numba path does the bulk
    table = StringTable.from_sorted(["d"])
    got = b"".join(bytes(c) for c in run_chunks(["q"], np.array([xs.size]), np.zeros(xs.size, np.int64), xs,
                                                table)).decode().splitlines()
    assert [line.split()[4] for line in got] == ["%.10g" % x for x in xs.tolist()]


@pytest.mark.parametrize("key", ["has space", "nbsp\u00a0key", "ideo\u3000key", "fs\x1ckey", "tab\tkey"])
def test_trec_refuses_a_citekey_holding_whitespace(key):
    table = StringTable.from_sorted(sorted(["ok2020", key]))
    d = table.find(key)
    with pytest.raises(UsageError, match="whitespace"):
        list(run_chunks(["q1"], np.array([1]), np.array([d]), np.array([1.0]), table))
    got = b"".join(run_chunks(["q1"], np.array([1]), np.array([d]), np.array([1.0]), table, fmt="jsonl"))
    assert json.loads(got)["citekey"] == key


def test_strings_at_decodes_only_what_it_needs_and_agrees_with_indexing():
    keys = sorted(f"key{i:05d}" + ("é" if i % 7 == 0 else "") for i in range(5000))
    table = StringTable.from_sorted(keys)
    table._list = None
    rows = np.array([4999, 3, 3, 0, 1234, 7])
    assert table.strings_at(rows).tolist() == [keys[i] for i in rows]
    assert table.strings_at(rows.reshape(2, 3)).tolist() == [[keys[i] for i in r] for r in rows.reshape(2, 3)]
    assert table._list is None  # a few rows: no full decode
    many = np.random.default_rng(0).integers(0, 5000, (1000, 4))
    assert table.strings_at(many).tolist() == [[keys[i] for i in r] for r in many]
    assert table._list is not None  # many rows: the table decoded once, and kept
    assert table.strings_at(np.zeros(0, np.int64)).tolist() == []


def test_ranked_keys_match_the_per_hit_reference(retriever):
    queries = ["twin model sensor", "ocean heat", "the of", "fidelity bridge water"] * 10
    ranked = retriever.rank_many(queries, 7)
    keys = ranked.keys()
    for q in range(len(queries)):
        want = [retriever.index.citekeys[int(d)] for d in ranked.topk.ids[q] if d >= 0]
        assert keys[q] == want
        assert ranked.docids(q) == list(zip(want, [float(s) for s in ranked.topk.scores[q][:len(want)]]))
    assert ranked.unmatched() == 10


# -- the CLI: destinations ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_ws(ws, tmp_path_factory):
    run_cli("index", "-w", ws, check=True)
    q = write_jsonl(tmp_path_factory.mktemp("q") / "q.jsonl",
                    [{"_id": f"q{i}", "text": t} for i, t in enumerate(["twin model", "ocean heat dt", "the of",
                                                                         "sensor fidelity"] * 12)])
    return ws, q


@pytest.mark.slow
def test_cli_run_to_stdout_file_and_json_lines(cli_ws, tmp_path):
    ws, q = cli_ws
    out = tmp_path / "run.trec"
    run_cli("search", "-w", ws, "--queries", q, "--run", out, "-k", "5", check=True)
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "-", "-k", "5", check=True)
    assert p.stdout == out.read_text() and "written to stdout" in p.stderr
    r = Retriever.open(ws)
    texts = [json.loads(x)["text"] for x in q.read_text().splitlines()]
    ranked = r.rank_many(texts, 5)
    want = "".join(x + "\n" for i in range(len(texts)) for x in format_run_lines(f"q{i}", ranked.docids(i)))
    assert out.read_text() == want
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "-", "-k", "5", "--json", check=True)
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(d["qid"], d["rank"], d["citekey"]) for d in rows] == [
        (f"q{i}", n, k) for i in range(len(texts)) for n, (k, _s) in enumerate(ranked.docids(i), start=1)]
    assert all(abs(d["score"] - s) <= 1e-9 * s for d, (_k, s) in
               zip(rows, [h for i in range(len(texts)) for h in ranked.docids(i)]))


@pytest.mark.slow
def test_cli_run_destinations_that_are_not_regular_files(cli_ws, tmp_path):
    ws, q = cli_ws
    p = run_cli("search", "-w", ws, "--queries", q, "--run", tmp_path, "-k", "5")
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("error: --run")
    assert "directory" in p.stderr and "Traceback" not in p.stderr
    # a character device is written, never replaced by a file
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/null", "-k", "5", check=True)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # a FIFO is written directly and stays a FIFO
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    run_cli("search", "-w", ws, "--queries", q, "--run", fifo, "-k", "5", check=True)
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].count(b"\n") > 40
    # a symlink: the file it points at is replaced, the link kept; an existing file keeps its mode
    target = tmp_path / "real.trec"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.trec"
    link.symlink_to(target)
    run_cli("search", "-w", ws, "--queries", q, "--run", link, "-k", "5", check=True)
    assert link.is_symlink() and target.read_bytes() == got[0]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    # a missing folder is made before the work (as sweep --out does), not found missing after it
    p = run_cli("search", "-w", ws, "--queries", q, "--run", tmp_path / "no" / "such" / "x.trec", "-k", "5")
    assert p.returncode == 0 and (tmp_path / "no" / "such" / "x.trec").read_bytes() == got[0]
    if os.path.exists("/dev/full"):
        p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/full", "-k", "5")
        assert p.returncode == 1 and "error: cannot write --run /dev/full" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_cli_run_to_dev_stdout_writes_the_open_descriptor(cli_ws, tmp_path):
    import subprocess
    import sys

    ws, q = cli_ws
    base = [sys.executable, "-m", "chitragupta.cli.main", "search", "-w", str(ws), "--queries", str(q), "-k", "3", "--run"]
    piped = subprocess.run(base + ["/dev/stdout"], capture_output=True, text=True, check=True)
    assert piped.stdout.count("\n") > 40
    log = tmp_path / "log.txt"
    log.write_text("kept line\n")
    with open(log, "a") as f:  # `>> log`: appended to, never truncated or replaced
        subprocess.run(base + ["/dev/stdout"], stdout=f, stderr=subprocess.DEVNULL, check=True)
    assert log.read_text() == "kept line\n" + piped.stdout
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/dev/fd/9", "-k", "3")
    assert p.returncode == 1 and "name the file itself" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("search", "-w", ws, "--queries", q, "--run", "/proc/self/status", "-k", "3")
    assert p.returncode == 1 and "kernel interface" in p.stderr


@pytest.mark.slow
def test_cli_passage_batch_writes_item_docids(tmp_path):
    from chitragupta.engine.corpus.ledger import Ledger
    from chitragupta.engine.corpus.sidecar import dump_sidecar, join_items
    from chitragupta.engine.workspace import Workspace

    items = [{"text": f"soil microbiome yield paragraph number {i} with biochar amendment", "label": "text",
              "page": 1 + i // 3} for i in range(9)]
    records = [{"_id": f"p{j}", "title": "Soil", "text": join_items(items)} for j in range(4)]
    root = make_workspace(tmp_path, records)
    (root / "config.toml").write_text("[retrieval]\nmin_passage_tokens = 5\n")
    w = Workspace.open(root)
    with Ledger(w.ledger_path) as led:
        for j in range(4):
            (w.root / led.get(f"p{j}").parsed_path).with_suffix(".passages.json").write_text(dump_sidecar(items))
    q = write_jsonl(tmp_path / "q.jsonl", [{"_id": f"q{i}", "text": "soil yield biochar"} for i in range(3)])
    p = run_cli("search", "-w", root, "--queries", q, "--run", "-", "--unit", "passage", "-k", "6", check=True)
    ranked = Retriever.open(root).rank_many(["soil yield biochar"] * 3, 6, unit="passage")
    want = "".join(x + "\n" for i in range(3) for x in format_run_lines(f"q{i}", ranked.docids(i)))
    assert p.stdout == want and "#" in p.stdout
    p = run_cli("search", "-w", root, "--queries", q, "--run", "-", "--unit", "passage", "-k", "6", "--json",
                check=True)
    first = json.loads(p.stdout.splitlines()[0])
    assert first["citekey"] + f"#{first['passage']}" == ranked.docids(0)[0][0]
