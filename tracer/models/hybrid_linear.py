"""A hybrid model's linear layer (Gated DeltaNet: Qwen3-Next, Qwen3.5, OLMo-Hybrid; Kimi Delta
Attention), run in float64 NumPy on the normed stream, every intermediate kept under the name of
its step (CONTRACT §16):

    conv      SiLU(causal depthwise conv of h·[W_Q | W_K | W_V])         token × channels
    q, k, v   the conv's channels split per head, q and k L2-normed       heads × token × d
    decay     α = exp(−exp(A_log)·softplus(h·W_a + dt_bias))              heads × token × 1 (kda: × d_k)
    beta      β = β_max·σ(h·W_b)  (β_max 2 in OLMo-Hybrid: the state may overshoot)
    state, o, implicit   the recurrence (tracer/mechanisms/linear), q scaled by 1/√d_k
    z         RMSNorm(o)·act(h·W_Z)  (act SiLU, Kimi's σ)                  heads × token × d_v
    out       z of every head side by side, times W_O

MiniMax's lightning layers (`lightning_layer`) are the decay rule instead: q, k, v = SiLU(h·W_QKV)
per head (no convolution, no L2 norm, q not scaled), a constant α_h = exp(−slope_h) per head, and
z = RMSNorm over every head's o together (one norm over heads·d_v) · σ(h·W_Z).
"""
from __future__ import annotations

import math

import numpy as np

from ..mechanisms.linear.gates import causal_conv, gated_decay, gated_rms_norm, rms_norm, sigmoid, silu
from ..mechanisms.linear.heads import all_heads
from ..mechanisms.linear.formula import l2norm
from .hybrid_config import Hybrid


def split_heads(m: np.ndarray, heads: int) -> np.ndarray:
    """n × (heads·d) → heads × n × d, C-contiguous."""
    n = m.shape[0]
    return np.ascontiguousarray(m.reshape(n, heads, -1).transpose(1, 0, 2))


LIGHTNING_EPS = 1e-6   # MiniMax's norm over all heads keeps its module's default eps, not rms_norm_eps


def decay(h: np.ndarray, w: dict, cfg: Hybrid) -> np.ndarray:
    """α, heads × n × 1 (a decay per token: Gated DeltaNet; MiniMax's constant exp(−slope) per head)
    or × d_k (per key channel: KDA, whose A_log is one per head, its dt_bias one per channel)."""
    if "slope" in w:   # MiniMax: the same α_h on every token
        alpha = np.exp(-w["slope"])[:, None, None]
        return np.ascontiguousarray(np.broadcast_to(alpha, (len(alpha), h.shape[0], 1)))
    a = h @ w["a"] if w["a_down"] is None else (h @ w["a_down"]) @ w["a"]
    if cfg.family.rule != "kda":
        return np.ascontiguousarray(gated_decay(a, w["a_log"], w["dt_bias"]).T[:, :, None])
    a = split_heads(a, cfg.v_heads)
    return gated_decay(a, w["a_log"][:, None, None], w["dt_bias"].reshape(cfg.v_heads, 1, cfg.d_k))


def linear_layer(h: np.ndarray, w: dict, cfg: Hybrid, *, states: bool = True, implicit: bool = True) -> dict:
    """Every step of the linear layer on the normed stream h (n × d_model), and `out` (n × d_model),
    which the residual adds. `states` / `implicit` False leave those (large) arrays out."""
    if cfg.family.projections == "lightning":
        return lightning_layer(h, w, cfg, states=states, implicit=implicit)
    kd = cfg.k_heads * cfg.d_k
    conv = causal_conv(h @ w["qkv"], w["conv"])
    q, k = (l2norm(split_heads(conv[:, j * kd:(j + 1) * kd], cfg.k_heads)) for j in (0, 1))
    v = split_heads(conv[:, 2 * kd:], cfg.v_heads)
    alpha = decay(h, w, cfg)
    beta = np.ascontiguousarray((cfg.beta_max * sigmoid(h @ w["b"])).T)
    rule = cfg.family.rule
    got = all_heads(np.ascontiguousarray(q / math.sqrt(cfg.d_k)), k, v, alpha, beta, rule,
                    states=states, implicit=implicit)
    gate = split_heads(h @ w["z"] if w["z_down"] is None else (h @ w["z_down"]) @ w["z"], cfg.v_heads)
    eps = cfg.eps if cfg.family.gate_eps is None else cfg.family.gate_eps
    z = gated_rms_norm(got.o, gate, w["norm"], eps, cfg.family.gate)
    out = z.transpose(1, 0, 2).reshape(h.shape[0], -1) @ w["out"]
    return dict(conv=conv, q=q, k=k, v=v, decay=alpha, beta=beta, state=got.states, o=got.o,
                implicit=got.implicit, gate=gate, z=z, out=out)


def lightning_layer(h: np.ndarray, w: dict, cfg: Hybrid, *, states: bool = True, implicit: bool = True) -> dict:
    """MiniMax's lightning layer on the normed stream h: act (SiLU(h·W_QKV)), q, k, v, decay, state,
    o, implicit, gate σ(h·W_Z), z (RMSNorm over all heads' o at a token, times the gain and the gate), out."""
    act = silu(h @ w["qkv"])
    q, k, v = (split_heads(part, cfg.v_heads) for part in np.split(act, 3, axis=1))
    alpha = decay(h, w, cfg)
    got = all_heads(q, k, v, alpha, None, "decay", states=states, implicit=implicit)
    n, H = h.shape[0], cfg.v_heads
    joined = got.o.transpose(1, 0, 2).reshape(n, -1)
    gate = sigmoid(h @ w["z"])
    z = rms_norm(joined, w["norm"], LIGHTNING_EPS) * gate
    return dict(act=act, q=q, k=k, v=v, decay=alpha, state=got.states, o=got.o, implicit=got.implicit,
                gate=split_heads(gate, H), z=split_heads(z, H), out=z @ w["out"])
