"""A hybrid model's softmax layers, run in float64 NumPy on the normed stream, with what each family
adds: Qwen3-Next and Qwen3.5 an output gate σ(h·W_G) on each head's z (W_G is the second half of
each head's rows of q_proj), QK-norm per head with zero-centred gains and rotary positions on the
first features only; OLMo-Hybrid QK-norm over the whole width and rotary positions or none (NoPE);
Kimi Linear latent attention (DeepSeek's) without any positions."""
from __future__ import annotations

import math

import numpy as np

from ..mechanisms.linear.gates import output_gate, rms_norm
from .forward import rotate
from .hybrid_config import Hybrid
from .hybrid_linear import split_heads

LATENT_EPS = 1e-6   # Kimi's latent norms keep their module's default eps, not rms_norm_eps


def causal_weights(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """softmax(q·kᵀ·scale) under the causal mask, heads × n × n; k's heads repeated for q's
    (grouped-query: query head h reads key head h // (heads / key heads))."""
    k = np.repeat(k, q.shape[0] // k.shape[0], axis=0)
    s = np.einsum("hid,hjd->hij", q, k) * scale
    s[:, np.triu(np.ones(s.shape[1:], dtype=bool), 1)] = -np.inf
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _lin(h: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return h @ w if b is None else h @ w + b


def _read(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    return weights @ np.repeat(v, weights.shape[0] // v.shape[0], axis=0)


def attention_layer(h: np.ndarray, w: dict, cfg: Hybrid) -> dict:
    """Every step of the softmax layer on h (n × d_model): q, k, v per head (after QK-norm and the
    rotation), weights, z, the gate and gated z where the family gates, and `out`."""
    if cfg.family.attention == "latent":
        return latent_layer(h, w, cfg)
    n, hd = h.shape[0], cfg.head_dim
    q, k = _lin(h, w["q"], w["bq"]), _lin(h, w["k"], w["bk"])
    if cfg.family.attention == "olmo":      # over the whole width, before the heads are split
        q, k = rms_norm(q, w["q_norm"], cfg.eps), rms_norm(k, w["k_norm"], cfg.eps)
    q, k = split_heads(q, cfg.heads), split_heads(k, cfg.kv_heads)
    v = split_heads(_lin(h, w["v"], w["bv"]), cfg.kv_heads)
    if cfg.family.attention == "gated":     # per head, zero-centred gains (1 + w, added when read)
        q, k = rms_norm(q, w["q_norm"], cfg.eps), rms_norm(k, w["k_norm"], cfg.eps)
    if cfg.rope is not None:
        q, k = rotate(q, cfg.rope), rotate(k, cfg.rope)
    parts = dict(q=q, k=k, v=v, weights=causal_weights(q, k, 1 / math.sqrt(hd)))
    parts["z"] = _read(parts["weights"], v)
    joined = parts["z"]
    if cfg.family.attention == "gated":
        logits = split_heads(_lin(h, w["gate"], w.get("bgate")), cfg.heads)
        parts["gate"], parts["gated"] = output_gate(parts["z"], logits)
        joined = parts["gated"]
    parts["out"] = _lin(joined.transpose(1, 0, 2).reshape(n, -1), w["o"], w["bo"])
    return parts


def latent_layer(h: np.ndarray, w: dict, cfg: Hybrid) -> dict:
    """Kimi Linear's latent attention: c_kv = RMSNorm(h·W_DKV) (the cache's latent), k_pe = h·W_KR
    shared by every head and not rotated (no positions anywhere), k_nope and v rebuilt per head
    from c_kv; scores q_nope·k_nopeᵀ + q_pe·k_peᵀ, divided by √(nope + rope)."""
    m, n, heads = cfg.mla, h.shape[0], cfg.heads
    q = h @ w["q"] if m["q_rank"] is None else rms_norm(h @ w["q_a"], w["q_norm"], LATENT_EPS) @ w["q_b"]
    q = split_heads(q, heads)
    kv = h @ w["kv_a"]
    c_kv, k_pe = rms_norm(kv[:, : m["kv_rank"]], w["kv_norm"], LATENT_EPS), kv[:, m["kv_rank"]:]
    up = split_heads(c_kv @ w["kv_b"], heads)
    k_nope, v = up[..., : m["nope"]], up[..., m["nope"]:]
    k = np.concatenate([k_nope, np.broadcast_to(k_pe, (heads,) + k_pe.shape)], axis=-1)
    parts = dict(c_kv=c_kv, k_pe=k_pe, q_nope=q[..., : m["nope"]], q_pe=q[..., m["nope"]:], k_nope=k_nope, v=v,
                 weights=causal_weights(q, k, 1 / math.sqrt(m["nope"] + m["rope"])))
    parts["z"] = parts["weights"] @ v
    parts["out"] = parts["z"].transpose(1, 0, 2).reshape(n, -1) @ w["o"]
    return parts
