"""Query encoding in numpy: the forward pass of a BERT-family sentence-transformers model, for what a
search needs -- a few short queries -- without importing torch, transformers or sentence-transformers
(about 10 s of imports on a 2-core machine, for a pass that takes milliseconds).

    enc = load_numpy_encoder(folder)      # None when the model is not one this module reads
    vecs = enc.encode_queries(["digital twin fidelity"])   # (n, dim) float32, rows L2-normalised

What it reads, and refuses anything else (the caller then loads sentence-transformers): a model folder
whose ``modules.json`` is Transformer (the folder itself) -> Pooling (mean or CLS) -> optional Normalize,
whose ``config.json`` is ``model_type = "bert"`` with absolute positions and exact GELU, with a fast
tokenizer (``tokenizer.json``, read by the ``tokenizers`` package) and ``model.safetensors`` weights. That
covers all-MiniLM-L6-v2 (the default), bge and e5 models. Inputs are tokenized as sentence-transformers
does -- truncated to ``max_seq_length`` tokens including [CLS] and [SEP] -- and the pass is BERT's:
embeddings and LayerNorm, then per layer multi-head self-attention, residual and LayerNorm, a GELU
feed-forward, residual and LayerNorm; then pooling over the real tokens and L2 normalisation. Weights and
activations are float32 as in torch (erf, softmax's exponent and LayerNorm's statistics in float64), so a
vector differs from sentence-transformers' by float32 rounding only (tested: within 1e-5, the same
rankings tie-aware); every query path of a process (single query, batch, the server) uses this one.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

__all__ = ["NumpyEncoder", "load_numpy_encoder", "erf"]

log = logging.getLogger(__name__)

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


_ERF_MAX = 6.0  # erf(6) is 1 - 2e-17: 1 in float64
_ERF_STEP = _ERF_MAX / (1 << 14)
_erf_coef: tuple[np.ndarray, ...] | None = None


def _coefficients() -> tuple[np.ndarray, ...]:
    """Per interval of the grid, the cubic's Horner coefficients (c0, c1, c2, c3) in the interval's own
    variable u in [0, 1): the Hermite cubic through erf and its slope at both ends (``math.erf`` at
    2^14 + 2 evenly spaced points of [0, 6], slopes 2/sqrt(pi) exp(-x^2)); made once."""
    global _erf_coef
    if _erf_coef is None:
        xs = np.arange((1 << 14) + 2, dtype=np.float64) * _ERF_STEP
        y = np.array([math.erf(x) for x in xs.tolist()])
        d = (2.0 / math.sqrt(math.pi)) * np.exp(-xs * xs) * _ERF_STEP
        y0, y1, d0, d1 = y[:-1], y[1:], d[:-1], d[1:]
        _erf_coef = (y0.copy(), d0.copy(), 3.0 * (y1 - y0) - 2.0 * d0 - d1, 2.0 * (y0 - y1) + d0 + d1)
    return _erf_coef


def erf(z: np.ndarray) -> np.ndarray:
    """The error function of an array, in float64, to about 1e-15: cubic Hermite interpolation between
    exact values (``math.erf``) and exact slopes (2/sqrt(pi) exp(-x^2)) on a grid of step 6/2^14 (the
    interpolation error is below step^4 x max |4th derivative| / 384, under 1e-15); +-1 beyond |z| = 6.
    In place on two arrays of z's size (a query's feed-forward is 30,000 values per layer)."""
    c0, c1, c2, c3 = _coefficients()
    z = np.asarray(z, dtype=np.float64)
    u = np.abs(z)
    np.minimum(u, _ERF_MAX, out=u)
    u *= 1.0 / _ERF_STEP
    i = u.astype(np.intp)
    np.minimum(i, len(c0) - 1, out=i)
    u -= i
    out = c3.take(i)
    out *= u
    out += c2.take(i)
    out *= u
    out += c1.take(i)
    out *= u
    out += c0.take(i)
    return np.copysign(out, z, out=out)


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * (1 + erf(x / sqrt 2)) / 2 (in float64, then float32)."""
    z = x.astype(np.float64)
    z /= math.sqrt(2.0)
    e = erf(z)
    e += 1.0
    e *= x
    e *= 0.5
    return e.astype(np.float32)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    return (((x64 - mean) / np.sqrt(var + eps)).astype(np.float32) * w + b).astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


_SMALL_TOKENS = 4096  # a batch of at most this many tokens runs its matrix products on one BLAS thread
_controller = None


def _one_blas_thread(tokens: int):
    """One BLAS thread for a small batch's products (a few rows each): a second thread buys nothing at
    that size, and on a busy machine OpenBLAS threads waiting for a core made them 4x slower (measured,
    bench/RESULTS.md). Through threadpoolctl when it is installed (it comes with the enrich extra)."""
    global _controller
    from contextlib import nullcontext

    if tokens > _SMALL_TOKENS:
        return nullcontext()
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas") if _controller else nullcontext()


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


class NumpyEncoder:
    """A BERT-family sentence-transformers model run in numpy (see the module docstring)."""

    def __init__(self, folder: Path, config: dict, pooling: str, max_seq_length: int, lower: bool,
                 tokenizer, weights: dict[str, np.ndarray]):
        self.folder = folder
        self.pooling = pooling
        self.max_seq_length = max_seq_length
        self._lower = lower
        self._tok = tokenizer
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._w = weights
        self.dim = int(config["hidden_size"])

    def _p(self, name: str) -> np.ndarray:
        return self._w[name]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        """x (..., d_in) times the layer's weight, plus its bias: one BLAS call on a 2-d view."""
        w = self._p(f"{name}.weight")  # (d_out, d_in), as stored
        # W @ x^T on the weight as stored: no transposed copy (as fast as x @ W^T, measured: 17.6 ms a query)
        flat = (w @ x.reshape(-1, x.shape[-1]).T).T
        flat += self._p(f"{name}.bias")
        return flat.reshape(*x.shape[:-1], w.shape[0])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Hidden states (batch, tokens, dim) of token ids (batch, tokens) with attention mask."""
        n, t = ids.shape
        p = self._p
        x = (p("embeddings.word_embeddings.weight")[ids] + p("embeddings.position_embeddings.weight")[:t][None]
             + p("embeddings.token_type_embeddings.weight")[0][None, None])
        x = _layer_norm(x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"), self._eps)
        h, d = self._heads, self.dim // self._heads
        # masked keys get a large negative score, as BERT's extended attention mask does
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(d))
        for i in range(self._layers):
            pre = f"encoder.layer.{i}"
            q = self._dense(x, f"{pre}.attention.self.query").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            k = self._dense(x, f"{pre}.attention.self.key").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            v = self._dense(x, f"{pre}.attention.self.value").reshape(n, t, h, d).transpose(0, 2, 1, 3)
            att = _softmax((q @ k.transpose(0, 1, 3, 2)) * scale + bias)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, t, h * d)
            x = _layer_norm(self._dense(ctx, f"{pre}.attention.output.dense") + x,
                            p(f"{pre}.attention.output.LayerNorm.weight"), p(f"{pre}.attention.output.LayerNorm.bias"),
                            self._eps)
            inner = _gelu(self._dense(x, f"{pre}.intermediate.dense"))
            x = _layer_norm(self._dense(inner, f"{pre}.output.dense") + x,
                            p(f"{pre}.output.LayerNorm.weight"), p(f"{pre}.output.LayerNorm.bias"), self._eps)
        return x

    def encode_texts(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32 L2-normalised vectors of ``texts`` (no prefix added here)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for lo in range(0, len(texts), max(1, batch_size)):
            batch = [t.lower() if self._lower else t for t in texts[lo:lo + batch_size]]
            enc = self._tok.encode_batch(batch)
            width = max(len(e.ids) for e in enc)
            ids = np.zeros((len(enc), width), dtype=np.int64)
            mask = np.zeros((len(enc), width), dtype=np.float32)
            for j, e in enumerate(enc):
                ids[j, :len(e.ids)] = e.ids
                mask[j, :len(e.ids)] = 1.0
            with _one_blas_thread(ids.size):
                hidden = self._forward(ids, mask)
            if self.pooling == "cls":
                vecs = hidden[:, 0]
            else:
                summed = (hidden.astype(np.float64) * mask[:, :, None]).sum(axis=1)
                vecs = (summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)).astype(np.float32)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            out[lo:lo + len(enc)] = vecs / np.where(norms > 0, norms, 1.0)
        return out


def load_numpy_encoder(folder: str | Path) -> NumpyEncoder | None:
    """The numpy encoder of a sentence-transformers model folder, or None (with the reason logged at
    info) when the folder is not a model this module reads."""
    folder = Path(folder)
    try:
        return _load(folder)
    except _Unsupported as why:
        log.info("query encoder: %s is read by sentence-transformers (%s)", folder, why)
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.info("query encoder: %s is read by sentence-transformers (%s: %s)", folder, type(err).__name__, err)
        return None


class _Unsupported(Exception):
    pass


def _load(folder: Path) -> NumpyEncoder:
    modules = _read_json(folder / "modules.json")
    types = [m.get("type") for m in modules]
    if types[:2] != [_TRANSFORMER, _POOLING] or any(t != _NORMALIZE for t in types[2:]) \
            or modules[0].get("path", "") not in ("", "."):
        raise _Unsupported(f"modules {types}")
    config = _read_json(folder / "config.json")
    if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu" \
            or config.get("position_embedding_type", "absolute") != "absolute":
        raise _Unsupported(f"model_type {config.get('model_type')!r}, hidden_act {config.get('hidden_act')!r}")
    pool = _read_json(folder / modules[1]["path"] / "config.json")
    modes = [k for k, v in pool.items() if k.startswith("pooling_mode") and v]
    if modes == ["pooling_mode_mean_tokens"]:
        pooling = "mean"
    elif modes == ["pooling_mode_cls_token"]:
        pooling = "cls"
    else:
        raise _Unsupported(f"pooling {modes}")
    st_cfg = _read_json(folder / "sentence_bert_config.json") if (folder / "sentence_bert_config.json").is_file() else {}
    max_len = int(st_cfg.get("max_seq_length") or config.get("max_position_embeddings", 512))
    max_len = min(max_len, int(config.get("max_position_embeddings", 512)))
    if not (folder / "tokenizer.json").is_file() or not (folder / "model.safetensors").is_file():
        raise _Unsupported("no tokenizer.json or model.safetensors")
    from tokenizers import Tokenizer
    from safetensors.numpy import load_file

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    raw = load_file(str(folder / "model.safetensors"))
    weights = {(k[len("bert."):] if k.startswith("bert.") else k): np.ascontiguousarray(v, dtype=np.float32)
               for k, v in raw.items() if v.dtype.kind == "f"}
    need = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight"]
    need += [f"encoder.layer.{i}.output.LayerNorm.bias" for i in range(int(config["num_hidden_layers"]))]
    missing = [n for n in need if n not in weights]
    if missing:
        raise _Unsupported(f"weights lack {missing[0]}")
    return NumpyEncoder(folder, config, pooling, max_len, bool(st_cfg.get("do_lower_case", False)), tok, weights)
