"""The streams around Gemma 3n's and Gemma 4's attention, so that the x a layer's attention reads
is exact: per-layer input embeddings (PLE: a small vector per token and layer, from its own table
and from the embeddings), Gemma 3n's AltUp (several copies of the residual, one of them active:
a layer predicts all of them from the active one and corrects them after) and LAuReL (a low-rank
path beside the attention)."""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from .common import Weights, activation, rms


def per_layer_inputs(w: Weights, cfg: dict, ids: list[int], e: np.ndarray) -> np.ndarray | None:
    """n × layers × p: (RMS-norm(e·W ÷ √d) + table[id]·√p) ÷ √2, e the scaled embeddings; None
    without PLE (hidden_size_per_layer_input 0). Gemma 3n reads ids past the PLE table as 0."""
    p, layers = cfg["ple"], cfg["layers"]
    if not p:
        return None
    vocab = w["embed_tokens_per_layer.weight"].shape[0]
    safe = [i if cfg["model_type"] != "gemma3n_text" or 0 <= i < vocab else 0 for i in ids]
    table = w.rows("embed_tokens_per_layer.weight", safe)[:, : layers * p].reshape(len(ids), layers, p) * math.sqrt(p)
    proj = (e @ w.linear("per_layer_model_projection")) * cfg["d_model"] ** -0.5
    proj = rms(proj.reshape(len(ids), layers, p), cfg["eps"], w["per_layer_projection_norm.weight"])
    return (proj + table) * 2 ** -0.5


def ple_update(x: np.ndarray, w: Weights, at: str, cfg: dict, ple: np.ndarray) -> np.ndarray:
    """What a layer adds from its own PLE vector: RMS-norm(act(x·W_gate) ⊙ ple · W_proj)."""
    act = activation(cfg["act"])
    u = act(x @ w.linear(at + "per_layer_input_gate")) * ple
    return rms(u @ w.linear(at + "per_layer_projection"), cfg["eps"], w[at + "post_per_layer_input_norm.weight"])


def altup_streams(w: Weights, e: np.ndarray, count: int) -> np.ndarray:
    """Gemma 3n's streams before layer 0: e itself, and e·W_i for i = 1 … count − 1, each rescaled
    to e's root mean square (its own clamped at √1e-5 from below)."""
    target = np.sqrt((e * e).mean(axis=-1, keepdims=True))
    out = [e]
    for i in range(1, count):
        s = e @ w.linear(f"altup_projections.{i - 1}")
        out.append(s * target / np.sqrt(np.maximum((s * s).mean(axis=-1, keepdims=True), 1e-5)))
    return np.stack(out)


def _router(w: Weights, at: str, x: np.ndarray, cfg: dict) -> np.ndarray:
    """AltUp's modalities: tanh(RMS-norm(x)·g ÷ d · W_router), n × streams."""
    return np.tanh(rms(x, cfg["eps"], w[at + "router_norm.weight"]) / cfg["d_model"] @ w.linear(at + "modality_router"))


def altup_predict(w: Weights, at: str, streams: np.ndarray, cfg: dict) -> np.ndarray:
    """Each stream y predicted as s_y + Σ_x C[y, x]·s_x, C (streams × streams, per token) from the
    active stream's modalities through prediction_coefs."""
    s = streams.shape[0]
    coefs = (_router(w, at, streams[cfg["active"]], cfg) @ w.linear(at + "prediction_coefs"))
    coefs = coefs.reshape(-1, s, s)                             # n × y × x
    return streams + np.einsum("tyx,xtd->ytd", coefs, streams)


def altup_correct(w: Weights, at: str, predicted: np.ndarray, activated: np.ndarray, cfg: dict) -> np.ndarray:
    """Every stream moved by the active one's innovation (activated − its prediction), each by
    its own coefficient (1 + the correction_coefs of the modalities)."""
    coefs = _router(w, at, activated, cfg) @ w.linear(at + "correction_coefs") + 1.0   # n × streams
    innovation = activated - predicted[cfg["active"]]
    return predicted + coefs.T[:, :, None] * innovation[None]


def laurel(w: Weights, at: str, h: np.ndarray, cfg: dict) -> np.ndarray:
    """LAuReL: h + RMS-norm(h·W_left·W_right)·g (a rank-r path)."""
    low = h @ w.linear(at + "laurel.linear_left") @ w.linear(at + "laurel.linear_right")
    return h + rms(low, cfg["eps"], w[at + "laurel.post_laurel_norm.weight"])


def sparse_gate(u: np.ndarray, sparsity: float) -> np.ndarray:
    """Gemma 3n's activation sparsity: relu(u − (mean + std·Φ⁻¹(s))) per token, keeping about the
    top 1 − s of each row's gate values (std over the row, not the sample's)."""
    if sparsity <= 0.0:
        return u
    cut = u.mean(axis=-1, keepdims=True) + u.std(axis=-1, keepdims=True) * NormalDist().inv_cdf(sparsity)
    return np.maximum(u - cut, 0.0)
