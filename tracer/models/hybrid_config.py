"""The hybrid families' config.json (linear attention layers beside softmax ones), read into the
numbers their blocks need: which layers are linear, the linear heads' sizes and rule, the softmax
layers' kind, the experts, MiniMax's residual factors and its lightning layers' slopes. Qwen3.5's
multimodal checkpoints nest the text model's config under `text_config`; Kimi Linear's published
configs put the linear sizes under `linear_attn_config`."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from ..mechanisms.linear.footprint import Footprint, footprint, kv_per_token, latent_per_token
from ..mechanisms.rotary.checkpoint import rope_spec


@dataclass(frozen=True)
class HybridFamily:
    """What sets a hybrid family apart; the block code reads these, never the model_type."""
    attention: str            # the softmax layers: "gated" (Qwen: output gate, QK-norm per head,
    #                           partial rotary), "olmo" (QK-norm over the width, norms after), "latent" (Kimi),
    #                           "plain" (MiniMax: q, k, v, o and rotary positions, nothing else)
    projections: str          # the linear layer's inputs: "qkvz" (Qwen3-Next: fused per key head),
    #                           "qkv_z" (Qwen3.5: q|k|v then z), "separate" (OLMo-Hybrid, Kimi),
    #                           "lightning" (MiniMax: SiLU(h·W_QKV), q|k|v per head, no convolution)
    rule: str = "delta"       # "delta" (Gated DeltaNet), "kda" (a decay per key channel), "decay" (MiniMax)
    gate: str = "silu"        # the gated norm's activation on the gate: "silu" or "sigmoid" (Kimi, MiniMax)
    gate_eps: float | None = None   # the gated norm's eps; None: rms_norm_eps (OLMo-Hybrid's is 1e-5)
    gain_offset: float = 0.0  # added to stored norm gains (Qwen: zero-centred, 1 + w)
    mixer: str = "linear_attn"       # the linear layer's module name (Kimi: self_attn)
    experts: str | None = None       # "qwen3_next" (softmax router, shared expert), "kimi" (sigmoid, groups)
    #                                  or "minimax" (softmax router, no shared expert, every layer)


HYBRIDS = {
    "qwen3_next": HybridFamily("gated", "qkvz", gain_offset=1.0, experts="qwen3_next"),
    "qwen3_5_text": HybridFamily("gated", "qkv_z", gain_offset=1.0),
    "olmo_hybrid": HybridFamily("olmo", "separate", gate_eps=1e-5),
    "kimi_linear": HybridFamily("latent", "separate", rule="kda", gate="sigmoid", mixer="self_attn", experts="kimi"),
    "minimax": HybridFamily("plain", "lightning", rule="decay", gate="sigmoid", mixer="self_attn", experts="minimax"),
}
FACTORS = ("linear_attn_alpha_factor", "linear_attn_beta_factor", "full_attn_alpha_factor", "full_attn_beta_factor",
           "mlp_alpha_factor", "mlp_beta_factor")
NESTED = {"qwen3_5": "text_config"}   # multimodal checkpoints whose text model is a hybrid


@dataclass(frozen=True)
class Hybrid:
    model_type: str           # the text model's (qwen3_5's is qwen3_5_text)
    family: HybridFamily
    d_model: int
    layers: int
    eps: float
    linear: tuple             # True where layer i is linear
    heads: int                # softmax layers: query heads, key/value heads, head width
    kv_heads: int
    head_dim: int
    rope: dict | None         # the softmax layers' rotary spec (partial: "dims"), None: no positions
    k_heads: int              # linear layers: key heads, value heads, their widths, conv kernel
    v_heads: int
    d_k: int
    d_v: int
    conv: int
    beta_max: float           # β = beta_max·σ(b): 2 where OLMo-Hybrid allows negative eigenvalues
    inner: int                # the dense MLP's width
    sparse: tuple = ()        # True where layer i's MLP is a mixture of experts
    moe: dict | None = None   # experts, top_k, inner, shared inner, routing switches
    mla: dict = field(default_factory=dict)   # Kimi's latent attention: kv_rank, q_rank, nope, rope, v
    factors: dict = field(default_factory=dict)   # MiniMax's residual: FACTORS by name (empty: x + mixer, x + MLP)

    def footprint(self) -> Footprint:
        """A linear layer's state against a softmax layer's cache (Kimi's: the latent and k_pe)."""
        per = latent_per_token(self.mla["kv_rank"], self.mla["rope"]) if self.mla else \
            kv_per_token(self.kv_heads, self.head_dim)
        return footprint(self.v_heads, self.d_k, self.d_v, per)


def hybrid_of(data: dict) -> Hybrid:
    """The Hybrid that config.json's `data` describes (the text model's, when nested)."""
    model_type = data.get("model_type")
    if model_type in NESTED:
        inner = data.get(NESTED[model_type])
        if not isinstance(inner, dict):
            raise ScenarioError(NESTED[model_type], f"expected the text model's config (an object), got {kind(inner)}")
        data, model_type = inner, inner.get("model_type", model_type + "_text")
    if model_type not in HYBRIDS:
        raise ScenarioError("model_type", f"{model_type!r} is not a hybrid family; expected one of "
                            f"{', '.join(list(HYBRIDS) + list(NESTED))}")
    fam = HYBRIDS[model_type]
    flat = {**data, **_kimi_linear_keys(data)} if model_type == "kimi_linear" else data
    layers, d_model = _whole(flat, "num_hidden_layers"), _whole(flat, "hidden_size")
    heads = _whole(flat, "num_attention_heads")
    kv_heads = _whole(flat, "num_key_value_heads", heads)
    head_dim = _whole(flat, "head_dim", d_model // heads) if model_type != "kimi_linear" else 0
    k_heads, v_heads, d_k, d_v = _linear_sizes(flat, model_type, d_model, heads)
    linear = _layer_kinds(flat, model_type, layers)
    moe, sparse = _experts(flat, fam, layers)
    beta_max = 2.0 if model_type == "olmo_hybrid" and flat.get("linear_allow_neg_eigval", True) is True else 1.0
    return Hybrid(model_type, fam, d_model, layers, _eps(flat), linear, heads, kv_heads, head_dim,
                  _rope(flat, fam, head_dim), k_heads, v_heads, d_k, d_v, _whole(flat, "linear_conv_kernel_dim", 4),
                  beta_max, _whole(flat, "intermediate_size"), sparse, moe,
                  _latent(flat) if fam.attention == "latent" else {}, _factors(flat) if model_type == "minimax" else {})


def lightning_slopes(cfg: Hybrid, layer: int) -> np.ndarray:
    """MiniMax's slope of each head (transformers' get_slope_rate): ALiBi's geometric slopes 2^(−8(h+1)/H),
    shrunk linearly with depth, so later layers forget more slowly."""
    H = cfg.v_heads
    depth = 1 - layer / (cfg.layers - 1 + 1e-5) + 1e-5
    return (1 / 2 ** (8 / H)) ** np.arange(1, H + 1) * depth


def _whole(data: dict, key: str, default: int | None = None, low: int = 1) -> int:
    value = data.get(key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ScenarioError(key, f"expected a whole number ≥ {low}, got {kind(value)}")
    return value


def _eps(data: dict) -> float:
    eps = data.get("rms_norm_eps", 1e-6)
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < 1:
        raise ScenarioError("rms_norm_eps", f"expected a number between 0 and 1, got {kind(eps)}")
    return float(eps)


def _kimi_linear_keys(data: dict) -> dict:
    """Kimi's published `linear_attn_config` (heads, head_dim, kernel, 1-based layer lists) in the
    flat keys transformers writes."""
    sub = data.get("linear_attn_config") or {}
    if not isinstance(sub, dict):
        raise ScenarioError("linear_attn_config", f"expected an object, got {kind(sub)}")
    out = {}
    for key, flat in (("num_heads", "linear_num_heads"), ("head_dim", "linear_head_dim"),
                      ("short_conv_kernel_size", "linear_conv_kernel_dim")):
        if key in sub and flat not in data:
            out[flat] = sub[key]
    if data.get("layer_types") is None and "full_attn_layers" in sub:
        full = sub["full_attn_layers"]
        if not isinstance(full, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in full):
            raise ScenarioError("linear_attn_config.full_attn_layers", f"expected layer numbers, got {kind(full)}")
        count = data.get("num_hidden_layers", 0)
        out["layer_types"] = ["full_attention" if i + 1 in full else "linear_attention" for i in range(count)]
    return out


def _linear_sizes(data: dict, model_type: str, d_model: int, heads: int) -> tuple[int, int, int, int]:
    if model_type == "kimi_linear":
        h, d = _whole(data, "linear_num_heads", 32), _whole(data, "linear_head_dim", 128)
        return h, h, d, d
    if model_type == "minimax":   # the lightning layers' heads are the softmax layers' query heads
        d = _whole(data, "head_dim", d_model // heads)
        return heads, heads, d, d
    k_heads = _whole(data, "linear_num_key_heads", heads if model_type == "olmo_hybrid" else 16)
    v_heads = _whole(data, "linear_num_value_heads", heads if model_type == "olmo_hybrid" else 32)
    d_k = _whole(data, "linear_key_head_dim", int(0.75 * d_model / k_heads) if model_type == "olmo_hybrid" else 128)
    d_v = _whole(data, "linear_value_head_dim", 2 * d_k if model_type == "olmo_hybrid" else 128)
    if v_heads % k_heads:
        raise ScenarioError("linear_num_value_heads", f"expected a multiple of the {k_heads} key heads, got {v_heads}")
    return k_heads, v_heads, d_k, d_v


def _layer_kinds(data: dict, model_type: str, layers: int) -> tuple:
    """True for each linear layer: layer_types, else the family's default pattern."""
    types = data.get("layer_types")
    if types is None:
        every = _whole(data, "full_attention_interval", 4)
        if model_type == "kimi_linear":
            types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]
        elif model_type == "minimax":   # transformers' default: softmax at even layers
            types = ["full_attention" if i % 2 == 0 else "linear_attention" for i in range(layers)]
        else:
            types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
            if model_type == "olmo_hybrid" and "full_attention" not in types:
                types[-1] = "full_attention"
    allowed = ("linear_attention", "full_attention")
    if not isinstance(types, list) or len(types) != layers or any(t not in allowed for t in types):
        raise ScenarioError("layer_types", f"expected a list of {layers} of {' or '.join(allowed)}, got {kind(types)}")
    return tuple(t == "linear_attention" for t in types)


def _rope(data: dict, fam: HybridFamily, head_dim: int) -> dict | None:
    """The softmax layers' rotary spec; None for Kimi's latent layers (no positions) and for an
    OLMo-Hybrid whose rope_theta is null (its released checkpoints)."""
    if fam.attention == "latent":
        return None
    params = data.get("rope_parameters") or {}
    if fam.attention == "olmo" and (not isinstance(params, dict) or params.get("rope_theta") is None) \
            and data.get("rope_theta") is None:
        return None
    return rope_spec(data, "full_attention", head_dim)


def _experts(data: dict, fam: HybridFamily, layers: int) -> tuple[dict | None, tuple]:
    """The mixture's sizes and routing, and which layers have it (Qwen3-Next: not mlp_only_layers,
    every decoder_sparse_step-th, when num_experts > 0; Kimi: after first_k_dense_replace, or as
    mlp_layer_types says)."""
    if fam.experts is None or not data.get("num_experts", data.get("num_local_experts")):
        return None, (False,) * layers
    count = _whole(data, "num_experts" if "num_experts" in data else "num_local_experts")
    top = "num_experts_per_tok" if "num_experts_per_tok" in data else "num_experts_per_token"
    inner = "intermediate_size" if fam.experts == "minimax" else "moe_intermediate_size"
    moe = dict(experts=count, top_k=_whole(data, top), inner=_whole(data, inner))
    if moe["top_k"] > count:
        raise ScenarioError(top, f"expected at most the {count} experts, got {moe['top_k']}")
    if fam.experts == "minimax":   # Mixtral's: softmax, top k, renormalised; in every layer
        moe.update(shared=0, scoring="softmax", method="greedy", norm_topk_prob=True, routed_scaling_factor=1.0)
        return moe, (True,) * layers
    if fam.experts == "qwen3_next":
        step, dense = _whole(data, "decoder_sparse_step", 1), data.get("mlp_only_layers") or []
        moe.update(shared=_whole(data, "shared_expert_intermediate_size", 0, low=0), scoring="softmax",
                   method="greedy", norm_topk_prob=data.get("norm_topk_prob", True) is True, routed_scaling_factor=1.0)
        return moe, tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
    norm = data.get("moe_renormalize", data.get("norm_topk_prob", True))
    moe.update(shared=moe["inner"] * _whole(data, "num_shared_experts", data.get("n_shared_experts", 1), low=0),
               scoring="sigmoid", norm_topk_prob=norm is True,
               routed_scaling_factor=float(data.get("routed_scaling_factor", 1.0)),
               n_group=_whole(data, "num_expert_group", data.get("n_group", 1)),
               topk_group=_whole(data, "topk_group", 1))
    types = data.get("mlp_layer_types")
    if types is None:
        first = _whole(data, "first_k_dense_replace", 1, low=0)
        types = ["dense" if i < first else "sparse" for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers or any(t not in ("dense", "sparse") for t in types):
        raise ScenarioError("mlp_layer_types", f"expected a list of {layers} of dense or sparse, got {kind(types)}")
    return moe, tuple(t == "sparse" for t in types)


def _latent(data: dict) -> dict:
    q_rank = data.get("q_lora_rank")
    return dict(kv_rank=_whole(data, "kv_lora_rank"), q_rank=None if q_rank is None else _whole(data, "q_lora_rank"),
                nope=_whole(data, "qk_nope_head_dim"), rope=_whole(data, "qk_rope_head_dim"),
                v=_whole(data, "v_head_dim"))


def _factors(data: dict) -> dict:
    """MiniMax's residual factors (each 1 unless config.json says): a block adds α·RMSNorm(x) + β·mixer."""
    out = {}
    for key in FACTORS:
        value = data.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ScenarioError(key, f"expected a finite number, got {kind(value)}")
        out[key] = float(value)
    if data.get("sliding_window") is not None:
        raise ScenarioError("sliding_window", "expected null: attnsim traces MiniMax's softmax layers over every "
                            "earlier token")
    return out
