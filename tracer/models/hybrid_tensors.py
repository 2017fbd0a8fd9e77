"""A hybrid checkpoint's tensors for one block, put into the rows orientation (X·W) and into one
layout for every family, whichever way they were saved: the published files (OLMo-Hybrid's
`attention_layer_norm`, Kimi's `block_sparse_moe` and per-expert w1/w2/w3, q/k/v convolutions
saved apart) or a model's state dict in memory (fused `conv1d`, stacked `experts.gate_up_proj`)."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError
from .hybrid_config import Hybrid, lightning_slopes

# the module name transformers uses, then the names published checkpoints save under
ALIASES = {"input_layernorm": ("attention_layer_norm",), "post_attention_layernorm": ("feedforward_layer_norm",),
           "mlp": ("block_sparse_moe",)}


def prefix(t) -> str:
    """What comes before `embed_tokens.weight` (`model.`, or `model.language_model.` for Qwen3.5's
    multimodal checkpoints)."""
    tail = "embed_tokens.weight"
    for name in t.names:
        if name == tail or name.endswith("." + tail):
            return name[: -len(tail)]
    raise ScenarioError(tail, "is missing; expected the token embeddings of a hybrid checkpoint", str(t.folder))


def block(t, i: int) -> str:
    return f"{prefix(t)}layers.{i}."


def first(t, at: str, *names: str) -> str:
    """The first of `at` + name (and the published aliases of its first part) held by the checkpoint."""
    tried = []
    for name in names:
        head, _, rest = name.partition(".")
        for spelled in (head,) + ALIASES.get(head, ()):
            full = at + (spelled + "." + rest if rest else spelled)
            if full in t:
                return full
            tried.append(full)
    raise ScenarioError(tried[0], "is missing from the checkpoint's tensors; expected it for this block", str(t.folder))


def weight(t, at: str, *names: str) -> np.ndarray:
    """A linear map in the rows orientation (in × out), nn.Linear's (out × in) transposed."""
    return t[first(t, at, *(n + ".weight" for n in names))].T


def gain(t, at: str, name: str, cfg: Hybrid) -> np.ndarray:
    return t[first(t, at, name + ".weight")] + cfg.family.gain_offset


def _shaped(t, name: str, shape: tuple) -> np.ndarray:
    got = t.shape(name)
    if tuple(got) != tuple(shape):
        raise ScenarioError(name, f"has shape {tuple(got)}; expected {tuple(shape)}, as config.json's sizes give",
                            str(t.folder))
    return t[name]


def conv(t, at: str, channels: int, size: int) -> np.ndarray:
    """The depthwise kernels, channels × K, in q|k|v order: one `conv1d` or three saved apart (only
    their concatenation is meaningful: transformers splits them unevenly when it saves)."""
    if at + "conv1d.weight" in t:
        w = _shaped(t, at + "conv1d.weight", (channels, 1, size))
    else:
        parts = [t[first(t, at, f"{x}_conv1d.weight")] for x in "qkv"]
        w = np.concatenate(parts)
        if w.shape != (channels, 1, size):
            raise ScenarioError(at + "q_conv1d.weight", f"with k_conv1d and v_conv1d has {w.shape[0]} channels of "
                                f"{w.shape[-1]}; expected {channels} of {size}", str(t.folder))
    return np.ascontiguousarray(w[:, 0, :])


def linear_mixer(t, cfg: Hybrid, i: int) -> dict:
    """The linear layer's weights: qkv (d × (2·key_dim + value_dim), the conv's channel order: every
    q head, every k head, every v head), z and its optional down-projection z_down (the gated
    norm's gate), b (β's logits), a and a_down (the decay's input), a_log and dt_bias, conv, norm, out."""
    a = block(t, i) + cfg.family.mixer + "."
    if cfg.family.projections == "lightning":
        return dict(_lightning(t, a, cfg), slope=lightning_slopes(cfg, i))
    kd, vd = cfg.k_heads * cfg.d_k, cfg.v_heads * cfg.d_v
    w = dict(conv=conv(t, a, 2 * kd + vd, cfg.conv), out=weight(t, a, "out_proj", "o_proj"),
             norm=t[first(t, a, "norm.weight", "o_norm.weight")], z_down=None, a_down=None)
    style = cfg.family.projections
    if style == "qkvz":
        w.update(_qwen3_next(t, a, cfg))
    elif style == "qkv_z":
        w.update(qkv=weight(t, a, "in_proj_qkv"), z=weight(t, a, "in_proj_z"), b=weight(t, a, "in_proj_b"),
                 a=weight(t, a, "in_proj_a"))
    else:
        w["qkv"] = np.concatenate([weight(t, a, x + "_proj") for x in "qkv"], axis=1)
        w["b"] = weight(t, a, "b_proj")
        if cfg.family.rule == "kda":   # Kimi: low-rank gate and decay, forget gate's tensors
            w.update(z_down=weight(t, a, "g_a_proj"), z=weight(t, a, "g_b_proj"),
                     a_down=weight(t, a, "f_a_proj", "forget_gate.f_a_proj"),
                     a=weight(t, a, "f_b_proj", "forget_gate.f_b_proj"))
        else:
            w.update(z=weight(t, a, "g_proj"), a=weight(t, a, "a_proj"))
    per = cfg.v_heads * (cfg.d_k if cfg.family.rule == "kda" else 1)
    w["a_log"] = t[first(t, a, "A_log", "forget_gate.A_log")].reshape(-1)
    w["dt_bias"] = t[first(t, a, "dt_bias", "forget_gate.dt_bias")].reshape(-1)
    if w["dt_bias"].shape != (per,) or w["a_log"].shape != (cfg.v_heads,):
        raise ScenarioError(a + "dt_bias", f"has {w['dt_bias'].size} entries and A_log {w['a_log'].size}; expected "
                            f"{per} and {cfg.v_heads}", str(t.folder))
    if w["qkv"].shape != (cfg.d_model, 2 * kd + vd):
        raise ScenarioError(a + "q_proj", f"q, k, v project to {w['qkv'].shape[1]} features; expected {2 * kd + vd}",
                            str(t.folder))
    return w


def _lightning(t, a: str, cfg: Hybrid) -> dict:
    """MiniMax's lightning layer: qkv_proj's rows are, per head, [q_h, k_h, v_h] (put here in the
    layout of every family: every q head, every k head, every v head); z is output_gate (σ's gate on
    the normed output of all heads), norm its gain over heads·d_v; no convolution, no decay tensors."""
    H, d = cfg.v_heads, cfg.d_k
    qkv = weight(t, a, "qkv_proj")
    if qkv.shape != (cfg.d_model, 3 * H * d):
        raise ScenarioError(a + "qkv_proj.weight", f"projects to {qkv.shape[1]} features; expected {3 * H * d}",
                            str(t.folder))
    qkv = qkv.reshape(cfg.d_model, H, 3, d).transpose(0, 2, 1, 3).reshape(cfg.d_model, -1)
    return dict(qkv=qkv, z=weight(t, a, "output_gate"), out=weight(t, a, "out_proj"),
                norm=_shaped(t, a + "norm.weight", (H * d,)), conv=None, z_down=None, a_down=None)


def _qwen3_next(t, a: str, cfg: Hybrid) -> dict:
    """Qwen3-Next's fused projections, grouped by key head g: in_proj_qkvz's rows are [q_g, k_g, the
    group's values, the group's z], in_proj_ba's [the group's b, the group's a]."""
    g, r, dk, dv = cfg.k_heads, cfg.v_heads // cfg.k_heads, cfg.d_k, cfg.d_v
    qkvz = weight(t, a, "in_proj_qkvz").reshape(cfg.d_model, g, 2 * dk + 2 * r * dv)
    ba = weight(t, a, "in_proj_ba").reshape(cfg.d_model, g, 2 * r)
    cut = np.cumsum([dk, dk, r * dv])
    q, k, v, z = (part.reshape(cfg.d_model, -1) for part in np.split(qkvz, cut, axis=2))
    return dict(qkv=np.concatenate([q, k, v], axis=1), z=z, b=ba[:, :, :r].reshape(cfg.d_model, -1),
                a=ba[:, :, r:].reshape(cfg.d_model, -1))


def attention(t, cfg: Hybrid, i: int) -> dict:
    """A softmax layer's weights: q, k, v, o (and their biases when saved), the gate's W_G (Qwen's
    q_proj holds, per head, the query's rows then the gate's), the QK-norm gains; Kimi: its latent
    attention's matrices."""
    a = block(t, i) + "self_attn."
    if cfg.family.attention == "latent":
        return _latent(t, a, cfg)
    w = {x: weight(t, a, x + "_proj") for x in "qkvo"}
    w.update({"b" + x: t[a + x + "_proj.bias"] if a + x + "_proj.bias" in t else None for x in "qkvo"})
    if cfg.family.attention == "plain":   # MiniMax: no QK-norm
        return w
    w["q_norm"], w["k_norm"] = (gain(t, a, x + "_norm", cfg) for x in "qk")
    if cfg.family.attention == "gated":
        q = w["q"].reshape(cfg.d_model, cfg.heads, 2, cfg.head_dim)
        w["q"], w["gate"] = (q[:, :, j].reshape(cfg.d_model, -1) for j in (0, 1))
        if w["bq"] is not None:
            bq = w["bq"].reshape(cfg.heads, 2, cfg.head_dim)
            w["bq"], w["bgate"] = bq[:, 0].reshape(-1), bq[:, 1].reshape(-1)
    return w


def _latent(t, a: str, cfg: Hybrid) -> dict:
    m = cfg.mla
    w = dict(kv_a=weight(t, a, "kv_a_proj_with_mqa"), kv_norm=t[a + "kv_a_layernorm.weight"],
             kv_b=weight(t, a, "kv_b_proj"), o=weight(t, a, "o_proj"))
    if m["q_rank"] is None:
        w["q"] = weight(t, a, "q_proj")
    else:
        w.update(q_a=weight(t, a, "q_a_proj"), q_norm=t[a + "q_a_layernorm.weight"], q_b=weight(t, a, "q_b_proj"))
    return w


def norms(t, cfg: Hybrid, i: int) -> dict:
    """The block's norms by role: before the mixer, after it, before the MLP, after it (None where
    the family has none there; OLMo-Hybrid's softmax layers norm after, its linear layers before)."""
    p = block(t, i)
    if cfg.family.attention == "olmo" and not cfg.linear[i]:
        return dict(before=None, after=gain(t, p, "post_attention_layernorm", cfg), mlp_before=None,
                    mlp_after=gain(t, p, "post_feedforward_layernorm", cfg))
    return dict(before=gain(t, p, "input_layernorm", cfg), after=None,
                mlp_before=gain(t, p, "post_attention_layernorm", cfg), mlp_after=None)


def dense(t, at: str, module: str = "mlp") -> dict:
    """A gated MLP's gate, up and down (rows orientation), under `at` + module."""
    return {x: weight(t, at, f"{module}.{x}_proj") for x in ("gate", "up", "down")}


def mixture(t, at: str) -> str:
    """Where block `at`'s experts are: `…mlp.` (or Kimi's published `…block_sparse_moe.`)."""
    return first(t, at, "mlp.gate.weight")[: -len("gate.weight")]


def router(t, at: str) -> dict:
    """The router's matrix (experts × d_model, as saved), Kimi's correction bias, and the shared
    expert(s) with Qwen3-Next's sigmoid gate on them (d_model × 1)."""
    m = mixture(t, at)
    bias = m + "gate.e_score_correction_bias"
    shared = next((s for s in ("shared_expert", "shared_experts") if f"{m}{s}.gate_proj.weight" in t), None)
    return dict(gate=t[m + "gate.weight"], bias=t[bias] if bias in t else None,
                shared=None if shared is None else dense(t, m, shared),
                shared_gate=weight(t, m, "shared_expert_gate") if m + "shared_expert_gate.weight" in t else None)


def expert(t, at: str, e: int) -> dict:
    """Expert e's gate, up and down: saved one per expert (Qwen3-Next's gate/up/down_proj, Kimi's
    w1/w3/w2) or stacked in memory (experts.gate_up_proj: gate rows then up rows; experts.down_proj)."""
    m = mixture(t, at)
    if m + "experts.gate_up_proj" in t:
        gate_up, down = t.rows(m + "experts.gate_up_proj", [e])[0], t.rows(m + "experts.down_proj", [e])[0]
        half = gate_up.shape[0] // 2
        return dict(gate=gate_up[:half].T, up=gate_up[half:].T, down=down.T)
    if f"{m}experts.{e}.w1.weight" in t:
        return dict(gate=weight(t, m, f"experts.{e}.w1"), up=weight(t, m, f"experts.{e}.w3"),
                    down=weight(t, m, f"experts.{e}.w2"))
    return dense(t, m, f"experts.{e}")
