"""DeepSeek Sparse Attention's blocks (DeepSeek V3.2, GLM-5's `glm_moe_dsa`), run in float64 NumPy
from the checkpoint's tensors: V3's latent attention and experts, plus a lightning indexer that
picks each query's top-k keys; the attention then reads only those (the others weigh exactly 0).

The indexer reads what the attention reads: its queries come from the compressed, normed c_q
(idx.q = RoPE(c_q·W_IQ)), its one key per token from the normed stream (idx.k = RoPE(LayerNorm(
h·W_IK))), its head weights from the stream too (idx.w = h·W_w/√H_I). Its rotary positions turn
the first qk_rope_head_dim features of each index head, with the layer's own frequencies and
yarn factor, in half pairs (V3.2) or interleaved ones (GLM), where the latent attention turns
interleaved pairs at the end of each head. GLM's "shared" layers have no indexer and reuse the
choice of the full layer before them."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..mechanisms.rotary import frequencies as rope
from ..errors import ScenarioError
from ..mechanisms.indexer import rotary, scores, topk
from ..readfile import CONFIG_BYTES, checkpoint_json
from .deepseek_experts import route
from .experts import silu
from .experts import mixture
from .sparse_config import read_dsa
from .weights import Tensors

LATENT_EPS = 1e-6   # the latent norms (q_a_layernorm, kv_a_layernorm) and the indexer's LayerNorm: fixed


def rms(x: np.ndarray, gain: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if gain is None else y * gain


def layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    c = x - x.mean(axis=-1, keepdims=True)
    return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + eps) * gain + bias


def open_checkpoint(folder) -> tuple[Tensors, object, str]:
    """(tensors, sizes, the prefix before `layers.`) of a DeepSeek V3.2 or GLM-5 checkpoint."""
    folder = Path(folder)
    c = read_dsa(checkpoint_json(folder / "config.json", CONFIG_BYTES, "the model's config.json"))
    t = Tensors(folder)
    return t, c, ("model." if "model.embed_tokens.weight" in t else "")


def read_layer(t: Tensors, c, pre: str, i: int) -> dict:
    """Block i's attention and indexer tensors, as saved (out × in), each checked against the
    shape config.json implies: a disagreement is refused naming the tensor."""
    a, m, H, d = f"{pre}layers.{i}.self_attn.", c.mla, c.heads, c.d_model
    want = dict(q_a=("q_a_proj.weight", (m["q_rank"], d)), q_norm=("q_a_layernorm.weight", (m["q_rank"],)),
                q_b=("q_b_proj.weight", (H * (m["nope"] + m["rope"]), m["q_rank"])),
                kv_a=("kv_a_proj_with_mqa.weight", (m["kv_rank"] + m["rope"], d)),
                kv_norm=("kv_a_layernorm.weight", (m["kv_rank"],)),
                kv_b=("kv_b_proj.weight", (H * (m["nope"] + m["v"]), m["kv_rank"])),
                o=("o_proj.weight", (d, H * m["v"])))
    if c.index["types"][i] == "full":
        HI, dI = c.index["heads"], c.index["dim"]
        want.update(idx_q=("indexer.wq_b.weight", (HI * dI, m["q_rank"])), idx_k=("indexer.wk.weight", (dI, d)),
                    idx_gain=("indexer.k_norm.weight", (dI,)), idx_bias=("indexer.k_norm.bias", (dI,)),
                    idx_w=("indexer.weights_proj.weight", (HI, d)))
    w = {"norm_in": t[f"{pre}layers.{i}.input_layernorm.weight"]}
    for key, (name, shape) in want.items():
        if t.shape(a + name) != shape:
            raise ScenarioError(a + name, f"has shape {t.shape(a + name)}; expected {shape} (from config.json: "
                                f"index_n_heads {c.index['heads']}, index_head_dim {c.index['dim']}, q_lora_rank "
                                f"{m['q_rank']}, hidden_size {d}, {H} heads)", str(t.folder))
        w[key] = t[a + name]
    return w


def index_inputs(h: np.ndarray, c_q: np.ndarray, w: dict, c, theta: np.ndarray) -> dict:
    """idx.q (token × heads·d_I), idx.k (token × d_I) and idx.w (token × heads): what the lightning
    indexer of one layer scores with (a trace of that layer scores and chooses itself)."""
    H, d = c.index["heads"], c.index["dim"]
    f = rope.attention_factor(c.rope)
    q = (c_q @ w["idx_q"].T).reshape(-1, H, d)
    q = rotary.turn(q.transpose(1, 0, 2), theta, c.index["style"], "first", f).transpose(1, 0, 2)
    k = rotary.turn(layer_norm(h @ w["idx_k"].T, w["idx_gain"], w["idx_bias"], LATENT_EPS), theta,
                    c.index["style"], "first", f)
    return {"idx.q": q.reshape(len(h), H * d), "idx.k": k, "idx.w": scores.head_weights(h, w["idx_w"])}


def indexer(h: np.ndarray, c_q: np.ndarray, w: dict, c, theta: np.ndarray) -> dict:
    """index_inputs, then idx.scores (query × key, causal) and idx.selected (query × key, bool):
    the lightning indexer of one layer."""
    p = index_inputs(h, c_q, w, c, theta)
    q = p["idx.q"].reshape(len(h), c.index["heads"], c.index["dim"])
    s = scores.index_scores(q, p["idx.k"], p["idx.w"], c.index["dim"] ** -0.5, scores.causal(len(h)))
    return {**p, "idx.scores": s, "idx.selected": topk.select(s, c.index["topk"])}


def compressed_query(h: np.ndarray, w: dict) -> np.ndarray:
    """c_q = RMSNorm(h·W_DQ): the normed latent query both the attention and the indexer read."""
    return rms(h @ w["q_a"].T, w["q_norm"], LATENT_EPS)


def latent(h: np.ndarray, w: dict, c, theta: np.ndarray) -> dict:
    """V3's latent attention up to its scores, on the normed stream h: c_q, c_kv, k_pe and per head
    (heads × token × …) q_nope, q_pe (turned), k_nope and v rebuilt from the latent."""
    m, H, n = c.mla, c.heads, len(h)
    f = rope.attention_factor(c.rope)
    p = {"c_q": compressed_query(h, w)}
    q = (p["c_q"] @ w["q_b"].T).reshape(n, H, m["nope"] + m["rope"]).transpose(1, 0, 2)
    kv = h @ w["kv_a"].T
    p["c_kv"] = rms(kv[:, : m["kv_rank"]], w["kv_norm"], LATENT_EPS)
    p["k_pe"] = rotary.turn(kv[:, m["kv_rank"]:], theta, m["style"], "first", f)
    p["q_nope"], p["q_pe"] = q[..., : m["nope"]], rotary.turn(q[..., m["nope"]:], theta, m["style"], "first", f)
    up = (p["c_kv"] @ w["kv_b"].T).reshape(n, H, m["nope"] + m["v"]).transpose(1, 0, 2)
    p["k_nope"], p["v"] = up[..., : m["nope"]], up[..., m["nope"]:]
    return p


def attend(p: dict, w: dict, c, selected: np.ndarray | None) -> dict:
    """scores = (q_nope·k_nopeᵀ + q_pe·k_peᵀ)·mscale²/√(nope + rope) over the keys each query may
    read (earlier and `selected`; None: every earlier key), softmax, z = weights·v, out = z·W_O."""
    m, n = c.mla, p["c_kv"].shape[0]
    s = p["q_nope"] @ p["k_nope"].transpose(0, 2, 1) + p["q_pe"] @ p["k_pe"].T   # matmul: BLAS, where einsum is not
    s = s * m["mscale"] / math.sqrt(m["nope"] + m["rope"])
    allowed = scores.causal(n) if selected is None else scores.causal(n) & selected
    s = np.where(allowed, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    out = {"weights": e / e.sum(axis=-1, keepdims=True)}
    out["z"] = out["weights"] @ p["v"]
    out["out"] = out["z"].transpose(1, 0, 2).reshape(n, -1) @ w["o"].T
    return out


def _gated(h: np.ndarray, t: Tensors, at: str) -> np.ndarray:
    g = h @ t[at + "gate_proj.weight"].T
    return (silu(g) * (h @ t[at + "up_proj.weight"].T)) @ t[at + "down_proj.weight"].T


def mlp(h: np.ndarray, t: Tensors, c, pre: str, i: int) -> np.ndarray:
    """Block i's MLP on the normed stream: dense, or V3's routed and shared experts."""
    at = f"{pre}layers.{i}.mlp."
    if c.mlp[i] == "dense":
        return _gated(h, t, at)
    bias = at + "gate.e_score_correction_bias"
    chosen, shares = route(h @ t[at + "gate.weight"].T, c.experts, t[bias] if bias in t else None)
    out = mixture(h, chosen, shares, lambda e, rows: _gated(rows, t, f"{at}experts.{e}."))
    return out + _gated(h, t, at + "shared_experts.") if c.experts["shared"] else out


def layer(x: np.ndarray, t: Tensors, c, pre: str, i: int, shared: np.ndarray | None = None) -> dict:
    """Every intermediate of block i's attention for the residual x entering it: `x`, `norm_in`,
    the indexer's steps (or the shared layer's reused `idx.selected`), the attention's parts."""
    w = read_layer(t, c, pre, i)
    h = rms(x, w["norm_in"], c.eps)
    theta = rotary.angles(c.rope, np.arange(len(x)), c.mla["rope"])
    p = {"x": x, "norm_in": h, **latent(h, w, c, theta)}
    p.update(indexer(h, p["c_q"], w, c, theta) if c.index["types"][i] == "full" else {"idx.selected": shared})
    p.update(attend(p, w, c, p["idx.selected"]))
    return p


def traced_indexer(x: np.ndarray, t: Tensors, c, pre: str, i: int) -> dict:
    """What a trace of block i takes of its indexer for the residual x entering it: idx.q, idx.k and
    idx.w only (the trace computes the scores, the choice and the attention itself)."""
    w = read_layer(t, c, pre, i)
    h = rms(x, w["norm_in"], c.eps)
    return index_inputs(h, compressed_query(h, w), w, c, rotary.angles(c.rope, np.arange(len(x)), c.mla["rope"]))


def run(folder, ids: list[int], upto: int) -> list[dict]:
    """Every layer 0 … upto on the tokens `ids`: each layer's intermediates (layer()), the
    residual after its attention (`residual`), the MLPs run in between."""
    t, c, pre = open_checkpoint(folder)
    x = t.rows(pre + "embed_tokens.weight", list(ids))
    out, chosen = [], None
    for i in range(upto + 1):
        p = layer(x, t, c, pre, i, chosen)
        chosen = p["idx.selected"]
        p["residual"] = x = x + p["out"]
        out.append(p)
        if i < upto:
            x = x + mlp(rms(x, t[f"{pre}layers.{i}.post_attention_layernorm.weight"], c.eps), t, c, pre, i)
    return out
