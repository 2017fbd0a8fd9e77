"""The 2026 families whose blocks are Llama's with a twist in the attention, one decoder layer at a
time in float64 NumPy: GLM-4.5 (`glm4_moe`: biases on q, k, v, QK-norm per head when `use_qk_norm`,
partial rotary, experts after the first dense layers), MiniMax-M2 (`minimax_m2`: QK-norm over the
whole projected width, partial rotary, experts in every layer), OLMo 3 (`olmo3`: OLMo 2's norms
after the attention and the MLP, QK-norm over the whole width, sliding layers with their own
rotary) and nanochat (`nanochat`: every norm without a gain, the embeddings normed too, q and k
turned FIRST and normed after, its rotation turning the other way, a relu² MLP)."""
from __future__ import annotations

import math

import numpy as np

from .common import Layer, Weights, activation, allowed, attend, gated, heads, rms, side_by_side, turn
from .experts import sigmoid_routed
from .settings import layer_types, rope_params, rotary

THETA = {"glm4_moe": 10000.0, "minimax_m2": 5000000.0, "olmo3": 500000.0, "nanochat": 10000.0}


def rope_data(data: dict) -> dict:
    """config.json with GLM-4.5's default partial rotary (0.5, set by transformers when none is given)."""
    if data["model_type"] == "glm4_moe" and "partial_rotary_factor" not in (data.get("rope_parameters") or {}):
        return {**data, "rope_parameters": {"partial_rotary_factor": data.get("partial_rotary_factor", 0.5),
                                            **(data.get("rope_parameters") or {})}}
    return data


def read(data: dict) -> dict:
    kind, layers = data["model_type"], data["num_hidden_layers"]
    heads_, d = data["num_attention_heads"], data["hidden_size"]
    head_dim = data.get("head_dim") or d // heads_
    data = rope_data(data)
    types = layer_types(data, layers, lambda i: "sliding_attention" if kind == "olmo3" and (i + 1) % 4 else
                        "full_attention")
    sliding = THETA[kind] if kind == "olmo3" else None
    ropes = {t: rotary(rope_params(data, t, sliding), head_dim, THETA[kind]) for t in set(types)}
    first_dense = {"glm4_moe": data.get("first_k_dense_replace", 1), "minimax_m2": 0}.get(kind, layers)
    routing = dict(scoring="sigmoid", top_k=data.get("num_experts_per_tok", 8), n_group=data.get("n_group"),
                   topk_group=data.get("topk_group"), norm_topk_prob=data.get("norm_topk_prob", True),
                   routed_scaling_factor=data.get("routed_scaling_factor", 1.0))
    return dict(kind=kind, layers=layers, heads=heads_, groups=data.get("num_key_value_heads") or heads_,
                head_dim=head_dim, eps=data.get("rms_norm_eps", 1e-5), types=types, ropes=ropes,
                window=data.get("sliding_window"), first_dense=first_dense, routing=routing,
                act=activation(data.get("hidden_act", "silu")),
                qk_norm={"glm4_moe": "head" if data.get("use_qk_norm") else None, "minimax_m2": "all",
                         "olmo3": "all", "nanochat": "after"}[kind])


def attention(w: Weights, i: int, h: np.ndarray, cfg: dict) -> Layer:
    at, eps, norm = f"layers.{i}.self_attn.", cfg["eps"], cfg["qk_norm"]

    def project(name: str, count: int) -> np.ndarray:
        m = h @ w.linear(at + name)
        bias = w.get(at + name + ".bias")
        m = m if bias is None else m + bias
        if norm == "all" and name != "v_proj":       # over every head's features side by side
            m = rms(m, eps, w[at + name[0] + "_norm.weight"])
        return heads(m, count)
    q, k, v = project("q_proj", cfg["heads"]), project("k_proj", cfg["groups"]), project("v_proj", cfg["groups"])
    if norm == "head":
        q, k = rms(q, eps, w[at + "q_norm.weight"]), rms(k, eps, w[at + "k_norm.weight"])
    t = cfg["types"][i]
    theta, factor = cfg["ropes"][t]
    if cfg["kind"] == "nanochat":
        theta = -theta                               # its rotate_half has the signs flipped
    q, k = turn(q, theta, "half", factor), turn(k, theta, "half", factor)
    if norm == "after":
        q, k = rms(q, eps), rms(k, eps)              # nanochat: turned first, normed after, no gain
    ok = allowed(h.shape[0], "sliding" if t == "sliding_attention" else "causal", cfg["window"])
    weights, z = attend(q, k, v, ok, 1.0 / math.sqrt(cfg["head_dim"]))
    out = side_by_side(z) @ w.linear(at + "o_proj")
    bias = w.get(at + "o_proj.bias")
    return Layer(x=None, h=h, q=q, k=k, v=v, weights=weights, out=out if bias is None else out + bias, source=i)


def _mlp(w: Weights, i: int, h: np.ndarray, cfg: dict) -> np.ndarray:
    at = f"layers.{i}."
    if cfg["kind"] == "nanochat":
        return cfg["act"](h @ w.linear(at + "mlp.fc1")) @ w.linear(at + "mlp.fc2")
    if i >= cfg["first_dense"]:
        return sigmoid_routed(w, at, h, cfg["routing"], cfg["act"])
    return gated(h, w, at + "mlp.", cfg["act"])


def layers(source, data: dict, ids: list[int], upto: int | None = None):
    """Each Layer of a GLM-4.5, MiniMax-M2, OLMo 3 or nanochat checkpoint on the token ids, 0 … upto
    (all by default)."""
    cfg = read(data)
    w = Weights(source)
    eps, x = cfg["eps"], w.rows("embed_tokens.weight", ids)
    gain = (lambda name: None) if cfg["kind"] == "nanochat" else w.__getitem__   # noqa: E731  nanochat: no gains
    if cfg["kind"] == "nanochat":
        x = rms(x, eps)                              # its embeddings are normed before layer 0
    for i in range(cfg["layers"] if upto is None else upto + 1):
        at = f"layers.{i}."
        if cfg["kind"] == "olmo3":                   # OLMo 2's order: norms after, not before
            att = attention(w, i, x, cfg)
            att.x, x = x, x + rms(att.out, eps, gain(at + "post_attention_layernorm.weight"))
            x = x + rms(_mlp(w, i, x, cfg), eps, gain(at + "post_feedforward_layernorm.weight"))
        else:
            att = attention(w, i, rms(x, eps, gain(at + "input_layernorm.weight")), cfg)
            att.x, x = x, x + att.out
            x = x + _mlp(w, i, rms(x, eps, gain(at + "post_attention_layernorm.weight")), cfg)
        yield att
