"""Gemma 4 (`gemma4_text`, and the text model of a `gemma4` checkpoint) and Gemma 3n (`gemma3n_text`),
one decoder layer at a time in float64 NumPy. Their attention: q and k RMS-normed with a gain and
then turned, v RMS-normed without one, scores NOT divided by √d_k (scale 1: the norms keep them
small), sliding and global layers with their own rotary (Gemma 4's global layers: proportional
rotary, their own head size and key/value heads, and K = V), and the last `num_kv_shared_layers`
layers reading the keys and values of the last earlier layer of their type. Around it: PLE,
Gemma 3n's AltUp and LAuReL, Gemma 4's optional experts and each layer's `layer_scalar`."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ScenarioError
from ...mechanisms.kv_sharing.formula import sources
from . import gemma_streams as streams
from .common import Layer, Weights, activation, allowed, attend, gated, heads, rms, side_by_side, turn
from .experts import gemma4_experts
from .settings import layer_types, rope_params, rotary, text_config


def read(data: dict) -> dict:
    """Everything a Gemma 4 or 3n layer needs from config.json, per layer where it varies."""
    data = text_config(data)
    three_n = data.get("model_type") == "gemma3n_text"
    layers, eps = data["num_hidden_layers"], data.get("rms_norm_eps", 1e-6)
    pattern = (lambda i: "full_attention" if (i + 1) % 5 == 0 else "sliding_attention") if three_n else \
        (lambda i: "sliding_attention" if (i + 1) % 6 and i < layers - 1 else "full_attention")
    types = layer_types(data, layers, pattern)
    if data.get("use_bidirectional_attention") == "all":
        raise ScenarioError("use_bidirectional_attention", "\"all\" is not supported; expected causal attention")
    head_dim, groups = [data.get("head_dim", 256)] * layers, [data.get("num_key_value_heads", 4)] * layers
    k_eq_v = [False] * layers
    if not three_n:
        _global_sizes(data, types, head_dim, groups, k_eq_v)
    shared = data.get("num_kv_shared_layers", 0)
    ropes = {}
    for t in sorted(set(types)):
        local = data.get("rope_local_base_freq", 1e4) if three_n else None    # an older 3n config's key
        params = rope_params(data, t, local) or _gemma4_rope(t)
        dim = head_dim[types.index(t)]
        ropes[t] = rotary(params, dim, 1e4 if t == "sliding_attention" else 1e6)
    return dict(model_type=data["model_type"], three_n=three_n, layers=layers, eps=eps, d_model=data["hidden_size"],
                heads=data["num_attention_heads"], types=types, window=data.get("sliding_window", 512),
                head_dim=head_dim, groups=groups, k_eq_v=k_eq_v, source=sources(types, shared), ropes=ropes,
                ple=data.get("hidden_size_per_layer_input", 0) or 0,
                act=data.get("hidden_activation", "gelu_pytorch_tanh"), altup=data.get("altup_num_inputs", 4),
                active=data.get("altup_active_idx", 0), correct_scale=data.get("altup_correct_scale", True),
                sparsity=data.get("activation_sparsity_pattern") or [0.0] * layers,
                moe=dict(top_k=data.get("top_k_experts")) if data.get("enable_moe_block") else None)


def _gemma4_rope(layer_type: str) -> dict:
    """transformers' defaults when config.json gives no rope_parameters."""
    if layer_type == "sliding_attention":
        return {"rope_type": "default", "rope_theta": 1e4}
    return {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}


def _global_sizes(data: dict, types: list, head_dim: list, groups: list, k_eq_v: list) -> None:
    """Gemma 4's global layers: their head size and key/value heads from `per_layer_config` (as
    transformers 5.24 saves it), else `global_head_dim` (512 unless given) and, when K = V,
    `num_global_key_value_heads`; K = V (`attention_k_eq_v`) on global layers only."""
    table = data.get("per_layer_config") or {}
    for i, t in enumerate(types):
        if t != "full_attention":
            continue
        k_eq_v[i] = bool(data.get("attention_k_eq_v", False))
        own = table.get(str(i), table.get(i))
        if own is not None:
            head_dim[i], groups[i] = own.get("head_dim", head_dim[i]), own.get("num_key_value_heads", groups[i])
            continue
        head_dim[i] = data.get("global_head_dim", 512)
        if k_eq_v[i] and data.get("num_global_key_value_heads") is not None:
            groups[i] = data["num_global_key_value_heads"]


def attention(w: Weights, i: int, h: np.ndarray, cfg: dict, store: dict) -> Layer:
    """Layer i's attention on h. A layer that computes its own keys and values leaves them in
    `store` under its index; a sharing layer reads its source's from there."""
    at, t = f"layers.{i}.self_attn.", cfg["types"][i]
    theta, factor = cfg["ropes"][t]
    q = heads(h @ w.linear(at + "q_proj"), cfg["heads"])
    q = turn(rms(q, cfg["eps"], w[at + "q_norm.weight"]), theta, "half", factor)
    src = cfg["source"][i]
    if src == i:
        raw = heads(h @ w.linear(at + "k_proj"), cfg["groups"][i])
        k = turn(rms(raw, cfg["eps"], w[at + "k_norm.weight"]), theta, "half", factor)
        v = raw if cfg["k_eq_v"][i] else heads(h @ w.linear(at + "v_proj"), cfg["groups"][i])
        store[i] = k, rms(v, cfg["eps"])            # v_norm: RMS without a gain
    k, v = store[src]
    ok = allowed(h.shape[0], "sliding" if t == "sliding_attention" else "causal", cfg["window"])
    weights, z = attend(q, k, v, ok, 1.0)
    return Layer(x=None, h=h, q=q, k=k, v=v, weights=weights, out=side_by_side(z) @ w.linear(at + "o_proj"), source=src)


def _mlp(w: Weights, i: int, h: np.ndarray, cfg: dict) -> np.ndarray:
    at = f"layers.{i}.mlp."
    act = activation(cfg["act"])
    if not cfg["three_n"]:
        return gated(h, w, at, act)
    u = streams.sparse_gate(h @ w.linear(at + "gate_proj"), cfg["sparsity"][i])
    return (act(u) * (h @ w.linear(at + "up_proj"))) @ w.linear(at + "down_proj")


def gemma4_layer(w: Weights, i: int, x: np.ndarray, ple, cfg: dict, store: dict) -> tuple[np.ndarray, Layer]:
    """Gemma 4's decoder layer: the residual after it, and what its attention did."""
    at, eps = f"layers.{i}.", cfg["eps"]
    att = attention(w, i, rms(x, eps, w[at + "input_layernorm.weight"]), cfg, store)
    att.x = x
    x = x + rms(att.out, eps, w[at + "post_attention_layernorm.weight"])
    m = _mlp(w, i, rms(x, eps, w[at + "pre_feedforward_layernorm.weight"]), cfg)
    if cfg["moe"]:
        routed = gemma4_experts(w, at, rms(x, eps, w[at + "pre_feedforward_layernorm_2.weight"]), x, cfg)
        m = rms(m, eps, w[at + "post_feedforward_layernorm_1.weight"]) + \
            rms(routed, eps, w[at + "post_feedforward_layernorm_2.weight"])
    x = x + rms(m, eps, w[at + "post_feedforward_layernorm.weight"])
    if ple is not None:
        x = x + streams.ple_update(x, w, at, cfg, ple[:, i])
    scalar = w.get(at + "layer_scalar")
    return (x if scalar is None else x * scalar), att


def gemma3n_layer(w: Weights, i: int, s: np.ndarray, ple, cfg: dict, store: dict) -> tuple[np.ndarray, Layer]:
    """Gemma 3n's decoder layer on its AltUp streams s (streams × n × d): predict, attend from the
    active prediction (with LAuReL beside), MLP, correct, and the PLE vector added to every
    stream but the first."""
    at, eps = f"layers.{i}.", cfg["eps"]
    predicted = streams.altup_predict(w, at + "altup.", s, cfg)
    active = predicted[cfg["active"]]
    h = rms(active, eps, w[at + "input_layernorm.weight"])
    att = attention(w, i, h, cfg, store)
    att.x = s
    mixed = (active + rms(att.out, eps, w[at + "post_attention_layernorm.weight"]) + streams.laurel(w, at, h, cfg)) \
        / math.sqrt(2)
    m = _mlp(w, i, rms(mixed, eps, w[at + "pre_feedforward_layernorm.weight"]), cfg)
    activated = mixed + rms(m, eps, w[at + "post_feedforward_layernorm.weight"])
    corrected = streams.altup_correct(w, at + "altup.", predicted, activated, cfg)
    first = corrected[cfg["active"]]
    if cfg["correct_scale"]:
        first = first * w[at + "altup.correct_output_scale"]
    corrected[1:] += streams.ple_update(first, w, at, cfg, ple[:, i])
    return corrected, att


def layers(source, data: dict, ids: list[int], upto: int | None = None):
    """What the attention of layers 0 … upto (all by default) of a Gemma 4 or 3n checkpoint did on
    the token ids, one Layer at a time (a caller keeps only what it needs)."""
    cfg = read(data)
    w = Weights(source)
    e = w.rows("embed_tokens.weight", ids) * math.sqrt(cfg["d_model"])
    ple = streams.per_layer_inputs(w, cfg, ids, e)
    x = streams.altup_streams(w, e, cfg["altup"]) if cfg["three_n"] else e
    step = gemma3n_layer if cfg["three_n"] else gemma4_layer
    store = {}
    for i in range(cfg["layers"] if upto is None else upto + 1):
        x, att = step(w, i, x, ple, cfg, store)
        yield att


def cache_table(data: dict) -> list:
    """Gemma 4's (or 3n's) KV cache table from its config.json (kv_sharing.cache.table)."""
    from ...mechanisms.kv_sharing.cache import table
    cfg = read(data)
    shared = text_config(data).get("num_kv_shared_layers", 0)
    return table(cfg["types"], cfg["head_dim"], cfg["groups"], cfg["k_eq_v"], shared)
