"""Mistral 4 (`mistral4`, and the text model of Mistral Small 4's `mistral3` checkpoint), one decoder
layer at a time in float64 NumPy: DeepSeek-V3's latent attention (a query through a rank-r_q
bottleneck or straight, one latent c_kv per token and one shared rotary key, interleaved pairs),
every layer's queries warmed by τ(p) = 1 + β·ln(1 + ⌊p/F⌋) (β = `llama_4_scaling_beta`,
F = `original_max_position_embeddings`: Llama 4's curve without its + 1), yarn's mscale² on the
scale; experts routed by softmax scores within groups. transformers has Mistral4ForCausalLM but no
auto mapping to it: a checkpoint saved from that class (or the text weights of the multimodal
one) is what this reads."""
from __future__ import annotations

import math

import numpy as np

from ...mechanisms.q_temp.formula import temperature
from .common import Layer, Weights, activation, allowed, attend, blocks, gated, heads, rms, side_by_side, turn
from .experts import mistral4_moe
from .settings import rope_params, rotary, text_config


def read(data: dict) -> dict:
    data = text_config(data)
    nope, rot, v = data["qk_nope_head_dim"], data["qk_rope_head_dim"], data["v_head_dim"]
    params = rope_params(data)
    theta, factor = rotary({**params, "partial_rotary_factor": rot / (nope + rot)}, nope + rot, 10000.0)
    scale = (nope + rot) ** -0.5
    kind, every = params.get("rope_type", params.get("type", "default")), params.get("mscale_all_dim", 0)
    if kind != "default" and every and params["factor"] > 1:     # yarn's mscale, squared, on the scores
        scale *= (0.1 * every * math.log(params["factor"]) + 1.0) ** 2
    return dict(layers=data["num_hidden_layers"], heads=data["num_attention_heads"], nope=nope, rot=rot, v=v,
                rank=data["kv_lora_rank"], q_rank=data.get("q_lora_rank"), eps=data.get("rms_norm_eps", 1e-6),
                theta=theta, factor=factor, scale=scale, beta=params.get("llama_4_scaling_beta"),
                floor=params.get("original_max_position_embeddings"), interleave=data.get("rope_interleave", True),
                first_dense=data.get("first_k_dense_replace", 0), act=activation(data.get("hidden_act", "silu")),
                routing=dict(top_k=data.get("num_experts_per_tok", 4), n_group=data.get("n_group") or 1,
                             topk_group=data.get("topk_group") or 1, norm_topk_prob=data.get("norm_topk_prob", True),
                             routed_scaling_factor=data.get("routed_scaling_factor", 1.0)))


def attention(w: Weights, i: int, h: np.ndarray, cfg: dict) -> Layer:
    at, eps, n = f"layers.{i}.self_attn.", cfg["eps"], h.shape[0]
    if cfg["q_rank"]:
        q = rms(h @ w.linear(at + "q_a_proj"), eps, w[at + "q_a_layernorm.weight"]) @ w.linear(at + "q_b_proj")
    else:
        q = h @ w.linear(at + "q_proj")
    q = heads(q, cfg["heads"])                                   # heads × n × (nope + rope)
    latent = h @ w.linear(at + "kv_a_proj_with_mqa")             # n × (rank + rope)
    c_kv = rms(latent[:, : cfg["rank"]], eps, w[at + "kv_a_layernorm.weight"])
    style = "interleaved" if cfg["interleave"] else "half"
    q_rot = turn(q[..., cfg["nope"]:], cfg["theta"], style, cfg["factor"])
    k_rot = turn(latent[None, :, cfg["rank"]:], cfg["theta"], style, cfg["factor"])   # one, shared
    q = np.concatenate([q[..., : cfg["nope"]], q_rot], axis=-1)
    extra = {"c_kv": c_kv, "k_rot": k_rot[0]}
    if cfg["beta"] is not None and cfg["floor"]:
        extra["temperature"] = tau = temperature(np.arange(n), cfg["beta"], cfg["floor"], offset=0)
        q = q * tau[:, None]
    kv = heads(c_kv @ w.linear(at + "kv_b_proj"), cfg["heads"])  # heads × n × (nope + v)
    k = np.concatenate([kv[..., : cfg["nope"]], np.repeat(k_rot, cfg["heads"], axis=0)], axis=-1)
    weights, z = attend(q, k, kv[..., cfg["nope"]:], allowed(n, "causal"), cfg["scale"])
    return Layer(x=None, h=h, q=q, k=k, v=kv[..., cfg["nope"]:], weights=weights,
                 out=side_by_side(z) @ w.linear(at + "o_proj"), source=i, extra=extra)


def layers(source, data: dict, ids: list[int], upto: int | None = None):
    """Each Layer of a Mistral 4 checkpoint on the token ids, 0 … upto (all by default)."""
    return blocks(source, read(data), ids, upto, attention, _mlp)


def _mlp(w, i: int, h, cfg: dict):
    """Layer i's feed-forward: a gated MLP on the first dense layers, routed experts after them."""
    at = f"layers.{i}.mlp."
    return gated(h, w, at, cfg["act"]) if i < cfg["first_dense"] else mistral4_moe(w, at, h, cfg["routing"], cfg["act"])
