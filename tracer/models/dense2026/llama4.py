"""Llama 4 (`llama4_text`, and the text model of a `llama4` checkpoint), one decoder layer at a time
in float64 NumPy. Three layers in four turn their queries and keys (interleaved pairs), norm them
AFTER the rotation with the weightless "L2" norm, and see only their own chunk of
`attention_chunk_size` tokens; every `no_rope_layer_interval`-th layer has no positions and no
QK-norm, sees every earlier key, and warms its queries by τ(p) = 1 + β·ln(1 + ⌊(p + 1)/F⌋).
Every `interleave_moe_layer_step`-th layer's MLP is a mixture of experts."""
from __future__ import annotations

import math

import numpy as np

from ...mechanisms.l2_norm.formula import l2_norm
from ...mechanisms.q_temp.formula import temperature
from .common import Layer, Weights, activation, allowed, attend, blocks, gated, heads, side_by_side, turn
from .experts import llama4_moe
from .settings import layer_types, rope_params, rotary, text_config


def read(data: dict) -> dict:
    data = text_config(data)
    layers, every = data["num_hidden_layers"], data.get("no_rope_layer_interval", 4)
    rotates = data.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(layers)]
    chunk = data.get("attention_chunk_size", 8192)
    types = layer_types(data, layers, lambda i: "chunked_attention" if rotates[i] and chunk else "full_attention")
    heads_, d = data["num_attention_heads"], data["hidden_size"]
    head_dim = data.get("head_dim") or d // heads_
    step = data.get("interleave_moe_layer_step", 1)
    moe = data.get("moe_layers")
    moe = list(range(step - 1, layers, step)) if moe is None else moe
    return dict(layers=layers, d_model=d, heads=heads_, groups=data.get("num_key_value_heads") or heads_,
                head_dim=head_dim, eps=data.get("rms_norm_eps", 1e-5), rotates=[bool(r) for r in rotates],
                types=types, chunk=chunk, qk_norm=data.get("use_qk_norm", True),
                tuning=data.get("attn_temperature_tuning", True), beta=data.get("attn_scale", 0.1),
                floor=data.get("floor_scale", 8192), moe=set(moe), top_k=data.get("num_experts_per_tok", 1),
                rope=rotary(rope_params(data), head_dim, 500000.0), act=activation(data.get("hidden_act", "silu")))


def attention(w: Weights, i: int, h: np.ndarray, cfg: dict) -> Layer:
    at, n = f"layers.{i}.self_attn.", h.shape[0]
    q = heads(h @ w.linear(at + "q_proj"), cfg["heads"])
    k = heads(h @ w.linear(at + "k_proj"), cfg["groups"])
    v = heads(h @ w.linear(at + "v_proj"), cfg["groups"])
    extra = {}
    if cfg["rotates"][i]:
        theta, factor = cfg["rope"]
        q, k = turn(q, theta, "interleaved", factor), turn(k, theta, "interleaved", factor)
        if cfg["qk_norm"]:
            q, k = l2_norm(q, cfg["eps"]), l2_norm(k, cfg["eps"])     # after the rotation
    elif cfg["tuning"]:
        extra["temperature"] = tau = temperature(np.arange(n), cfg["beta"], cfg["floor"], offset=1)
        q = q * tau[:, None]
    ok = allowed(n, "chunked" if cfg["types"][i] == "chunked_attention" else "causal", cfg["chunk"])
    weights, z = attend(q, k, v, ok, 1.0 / math.sqrt(cfg["head_dim"]))
    return Layer(x=None, h=h, q=q, k=k, v=v, weights=weights, out=side_by_side(z) @ w.linear(at + "o_proj"),
                 source=i, extra=extra)


def layers(source, data: dict, ids: list[int], upto: int | None = None):
    """Each Layer of a Llama 4 checkpoint on the token ids, 0 … upto (all by default)."""
    return blocks(source, read(data), ids, upto, attention, _mlp)


def _mlp(w, i: int, h, cfg: dict):
    """Layer i's feed-forward: routed experts on the MoE layers, a gated MLP on the others."""
    ff = f"layers.{i}.feed_forward."
    return llama4_moe(w, ff, h, cfg["top_k"], cfg["act"]) if i in cfg["moe"] else gated(h, w, ff, cfg["act"])
