"""DeepSeek's latent attention in a checkpoint (V2, V3; Kimi K2 and Moonlight share V3's layout):
its tensors, its float64 NumPy forward (the earlier blocks run it through forward.run_block; the
experts are deepseek_experts.py's), and the traced layer's [mla] arrays.

Latent attention: the normed stream h gives c_kv = RMSNorm(h·W_DKV), a small latent per token,
and k_pe = RoPE(h·W_KR), one rotary key shared by every head: the KV cache keeps only these two.
Head h rebuilds k_nope = c_kv·W_UK_h and v = c_kv·W_UV_h; its query is [q_nope, RoPE(q_pe)] from
h (or from the compressed, normed c_q = RMSNorm(h·W_DQ)); its scores q_nope·k_nopeᵀ + q_pe·k_peᵀ,
divided by √(nope + rope) and multiplied by yarn's mscale² when the config has one."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ScenarioError
from ..mechanisms.rotary.rotation import rotate
from .config import Config
from .ops import mask, norm
from .reading import linear, prefix
from .reading import norm as norm_spec
from .weights import Tensors


def attention_shapes(cfg: Config, p: str) -> dict[str, tuple]:
    """The tensors of block `p`'s latent attention (p: the block's prefix, `model.layers.3.`)."""
    m, d, h = cfg.mla, cfg.d_model, cfg.heads
    a = p + "self_attn."
    want = {a + "kv_a_layernorm.weight": (m["kv_rank"],), a + "kv_a_proj_with_mqa.weight": (m["kv_rank"] + m["rope"], d),
            a + "kv_b_proj.weight": (h * (m["nope"] + m["v"]), m["kv_rank"]), a + "o_proj.weight": (d, h * m["v"])}
    q_width = h * (m["nope"] + m["rope"])
    if m["q_rank"] is None:
        want[a + "q_proj.weight"] = (q_width, d)
    else:
        want.update({a + "q_a_proj.weight": (m["q_rank"], d), a + "q_a_layernorm.weight": (m["q_rank"],),
                     a + "q_b_proj.weight": (q_width, m["q_rank"])})
    return want


def read_attention(tensors: Tensors, cfg: Config, i: int) -> dict:
    """Block i's attention weights in the rows orientation (in × out), biases None unless saved."""
    pre = prefix(tensors, cfg)
    p = pre + cfg.family.block(i)
    a = p + "self_attn."
    w = dict(norm_in=norm_spec(tensors, cfg, p + "input_layernorm"), kv_norm=norm_spec(tensors, cfg, a + "kv_a_layernorm"))
    w["kv_a"], w["b_kv_a"] = linear(tensors, cfg, a + "kv_a_proj_with_mqa")
    w["kv_b"], _ = linear(tensors, cfg, a + "kv_b_proj")
    w["o"], w["bo"] = linear(tensors, cfg, a + "o_proj")
    if cfg.mla["q_rank"] is None:
        w["q"], w["bq"] = linear(tensors, cfg, a + "q_proj")
    else:
        w["q_a"], w["b_q_a"] = linear(tensors, cfg, a + "q_a_proj")
        w["q_norm"] = norm_spec(tensors, cfg, a + "q_a_layernorm")
        w["q_b"], _ = linear(tensors, cfg, a + "q_b_proj")
    return w


def _lin(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return x @ w if b is None else x @ w + b


def latent_parts(h: np.ndarray, w: dict, cfg: Config, layer: int) -> dict:
    """Every intermediate of the layer's latent attention on the normed stream h (n × d_model):
    c_q (when queries are compressed), c_kv, k_pe, and per head (heads × n × …) q_nope, q_pe,
    k_nope, v, weights, z; and `out`, after W_O. The scores use the rebuilt keys."""
    m, heads, n = cfg.mla, cfg.heads, h.shape[0]
    spec = dict(cfg.kinds[layer].rope, style=m["style"])
    parts = {}
    if m["q_rank"] is None:
        q = _lin(h, w["q"], w.get("bq"))
    else:
        parts["c_q"] = norm(_lin(h, w["q_a"], w.get("b_q_a")), w["q_norm"])
        q = parts["c_q"] @ w["q_b"]
    q = q.reshape(n, heads, m["nope"] + m["rope"]).transpose(1, 0, 2)
    kv = _lin(h, w["kv_a"], w.get("b_kv_a"))
    parts["c_kv"] = norm(kv[:, : m["kv_rank"]], w["kv_norm"])
    parts["k_pe"] = rotate(kv[:, m["kv_rank"]:], spec)
    parts["q_nope"], parts["q_pe"] = q[..., : m["nope"]], rotate(q[..., m["nope"]:], spec)
    up = (parts["c_kv"] @ w["kv_b"]).reshape(n, heads, m["nope"] + m["v"]).transpose(1, 0, 2)
    parts["k_nope"], parts["v"] = up[..., : m["nope"]], up[..., m["nope"]:]
    s = (np.einsum("hid,hjd->hij", parts["q_nope"], parts["k_nope"])
         + np.einsum("hid,jd->hij", parts["q_pe"], parts["k_pe"])) * scale(cfg)
    s[:, mask(n, cfg.kinds[layer].window)] = -np.inf
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    parts["weights"] = e / e.sum(axis=-1, keepdims=True)
    parts["z"] = parts["weights"] @ parts["v"]
    parts["out"] = _lin(parts["z"].transpose(1, 0, 2).reshape(n, -1), w["o"], w.get("bo"))
    return parts


def scale(cfg: Config) -> float:
    """What the scores are multiplied by: 1/√(nope + rope), times yarn's mscale² (DeepSeek's)."""
    m = cfg.mla
    return m.get("mscale", 1.0) / math.sqrt(m["nope"] + m["rope"])


def layer_arrays(tensors: Tensors, cfg: Config, layer: int) -> dict:
    """The traced layer's latent attention as `from_arrays` keywords (rows orientation): the norm
    before it, [mla]'s matrices split per head, W_O, the rotary spec and DeepSeek's scale."""
    w, m, heads = read_attention(tensors, cfg, layer), cfg.mla, cfg.heads
    biased = next((key for key in ("b_kv_a", "bq", "b_q_a") if w.get(key) is not None), None)
    if biased is not None:
        raise ScenarioError("attention_bias", "expected false for a traced latent attention layer (its "
                            "projections' biases are not steps here), got true", str(tensors.folder))

    def per_head(a: np.ndarray, parts: tuple[int, ...]) -> list[list[np.ndarray]]:
        """in × (heads·Σparts) → for each head, its parts side by side split apart."""
        a = a.reshape(a.shape[0], heads, sum(parts))
        cuts = np.cumsum(parts)[:-1]
        return [[np.ascontiguousarray(p) for p in np.split(a[:, h], cuts, axis=1)] for h in range(heads)]

    q = per_head(w["q"] if m["q_rank"] is None else w["q_b"], (m["nope"], m["rope"]))
    up = per_head(w["kv_b"], (m["nope"], m["v"]))
    mla = dict(down=w["kv_a"][:, : m["kv_rank"]], rope_k=w["kv_a"][:, m["kv_rank"]:], kv_norm=w["kv_norm"]["gain"],
               up_k=[u[0] for u in up], up_v=[u[1] for u in up], q=[p[0] for p in q], rope_q=[p[1] for p in q],
               norm_eps=cfg.eps)
    if m["q_rank"] is not None:
        mla.update(q_down=w["q_a"], q_norm=w["q_norm"]["gain"])
    spec = dict(cfg.kinds[layer].rope, style=m["style"])
    out = dict(mla=mla, o=w["o"], bo=w.get("bo"), norm_in=w["norm_in"], residual=dict(norm="none"), layout="rows",
               rope=spec, mask="causal")
    if m.get("mscale", 1.0) != 1.0:   # yarn's mscale² multiplies the scores: the divisor shrinks by it
        out["defaults"] = {"scale": math.sqrt(m["nope"] + m["rope"]) / m["mscale"]}
    return {key: value for key, value in out.items() if value is not None}
