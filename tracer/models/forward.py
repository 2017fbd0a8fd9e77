"""The earlier blocks of a model, run in float64 NumPy to give the residual stream entering the
traced layer: each family's norms where it puts them, its attention with its own mechanisms
(QK-norm, scaled rotary frequencies or none, soft-capping, ALiBi, windows), its MLP."""
from __future__ import annotations

import math

import numpy as np

from ..mechanisms import alibi, qk_norm, softcap
from ..mechanisms.rotary.rotation import rotate
from ..mechanisms.sinks import powers
from ..rms import rms_rows
from ..kernels.blas import one_thread
from . import experts
from .blocks import Block
from .config import Config, Kind


def norm(x: np.ndarray, spec: dict | None) -> np.ndarray:
    """LayerNorm ((x − mean) ÷ √(var + eps) · gain + bias) or RMSNorm (x ÷ √(mean x² + eps) · gain,
    rms.rms_rows); x itself where the family has no norm (spec None)."""
    if spec is None:
        return x
    if spec["kind"] == "rms":
        y = rms_rows(x, spec["gain"], spec["eps"])
    else:
        x = x - x.mean(axis=-1, keepdims=True)
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + spec["eps"]) * spec["gain"]
    return y if spec.get("bias") is None else y + spec["bias"]


def mask(n: int, window: int | None) -> np.ndarray:
    """True where key j is hidden from query i: later keys, and those W or more back."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    hidden = j > i
    return hidden | (i - j >= window) if window is not None else hidden


def attention(h: np.ndarray, blk: Block, cfg: Config, kind: Kind) -> np.ndarray:
    """Multi-head attention of the normed stream h (n × d_model), through W_O and its bias."""
    q, k, v = _heads(h, blk, cfg, kind)
    share = q.shape[0] // k.shape[0]                  # query head h reads group h // share
    with one_thread():   # many small products per head: one BLAS thread each beats two that wait
        w = weights(q, np.repeat(k, share, axis=0), cfg, kind, blk.sinks)
        z = (w @ np.repeat(v, share, axis=0)).transpose(1, 0, 2).reshape(h.shape[0], -1)   # heads side by side
    out = z @ blk.o
    return out if blk.bo is None else out + blk.bo


def _heads(h: np.ndarray, blk: Block, cfg: Config, kind: Kind) -> tuple:
    """q, k and v, heads (or groups) × n × head_dim: one product each for every head, then
    QK-norm and the rotation where the layer has them."""
    def split(w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        m = h @ w if b is None else h @ w + b
        return m.reshape(h.shape[0], -1, cfg.head_dim).transpose(1, 0, 2)
    q, k, v = split(blk.q, blk.bq), split(blk.k, blk.bk), split(blk.v, blk.bv)
    if blk.q_norm is not None:                                       # QK-norm
        q, k = (qk_norm.rows(m, g, cfg.eps, cfg.family.qk_norm) for m, g in ((q, blk.q_norm), (k, blk.k_norm)))
    if kind.rope is not None:                                        # rotary positions
        q, k = rotate(q, kind.rope), rotate(k, kind.rope)
    return q, k, v


def weights(q: np.ndarray, k: np.ndarray, cfg: Config, kind: Kind, sinks: np.ndarray | None = None) -> np.ndarray:
    """Each head's attention weights: scaled scores, soft-capped, ALiBi's penalty, the mask, softmax
    (with each head's sink logit as one more column, dropped after: the tokens' shares sum to 1 − sink)."""
    n, position = q.shape[1], cfg.family.position
    s = np.einsum("hid,hjd->hij", q, k, optimize=True) / (cfg.scale or math.sqrt(q.shape[-1]))
    if "softcap" in cfg.parts:                                       # soft-capping
        s = softcap.capped(s, cfg.parts["softcap"])
    if position.startswith("alibi"):                                 # ALiBi (Falcon's before ÷√d_k)
        s = alibi.penalised(s, alibi.alibi_slopes(q.shape[0]) / (math.sqrt(q.shape[-1]) if position == "alibi_unscaled"
                                                                 else 1.0))
    s[:, mask(n, kind.window)] = -np.inf
    if sinks is not None:                                            # a sink: one more key, with no value
        e, own, _ = powers(s, sinks[:, None, None])
        return e / (e.sum(axis=-1, keepdims=True) + own)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w


def mlp(h: np.ndarray, blk: Block, activation: str) -> np.ndarray:
    """Gated: down(act(gate h) ⊙ up h); plain: down(act(up h)); each with its bias if any."""
    m = blk.mlp

    def lin(x, w, b):
        return x @ m[w] if m.get(b) is None else x @ m[w] + m[b]

    u = lin(h, "gate" if "gate" in m else "up", "b_gate" if "gate" in m else "b_up")
    if activation == "silu":
        u = u * 0.5 * (1 + np.tanh(u / 2))             # u·sigmoid(u), without exp overflowing
    elif activation in ("gelu_tanh", "gelu_bloom"):    # BLOOM writes √(2/π) as 0.79788456
        c = 0.79788456 if activation == "gelu_bloom" else math.sqrt(2 / math.pi)
        u = 0.5 * u * (1 + np.tanh(c * (u + 0.044715 * u ** 3)))
    else:
        from scipy.special import erf
        u = 0.5 * u * (1 + erf(u / math.sqrt(2)))
    if "gate" in m:
        u = u * lin(h, "up", "b_up")
    return lin(u, "down", "b_down")


def moe(h: np.ndarray, blk: Block, cfg: Config) -> np.ndarray:
    """A mixture of experts: the router's choice for each token, then the chosen experts, read and
    run one at a time (gpt-oss: biases and the clamped SwiGLU; Qwen3-MoE: SiLU-gated, no biases)."""
    logits = h @ blk.moe["router"] if blk.moe["b_router"] is None else h @ blk.moe["router"] + blk.moe["b_router"]
    style = cfg.family.experts
    chosen, shares = experts.route(logits, cfg.moe, style)

    def expert(e: int, rows: np.ndarray) -> np.ndarray:
        w = blk.moe["expert"](e)
        if style == "gpt_oss":
            u = experts.swiglu_clamped(rows @ w["gate_up"] + w["b_gate_up"], cfg.moe["alpha"], cfg.moe["limit"])
            return u @ w["down"] + w["b_down"]
        return (experts.silu(rows @ w["gate"]) * (rows @ w["up"])) @ w["down"]
    return experts.mixture(h, chosen, shares, expert)


def run_block(x: np.ndarray, blk: Block, cfg: Config, layer: int) -> np.ndarray:
    """The residual stream after block `layer`: x + attention, then + MLP, each between the norms
    its family puts around it; Falcon adds both to the same x (side by side)."""
    a = norm(attention(norm(x, blk.norm_in), blk, cfg, cfg.kinds[layer]), blk.out_norm)
    if cfg.family.parallel:
        return x + a + mlp(norm(x, blk.norm_mlp), blk, cfg.activation)
    x = x + a
    h = norm(x, blk.norm_mlp)
    return x + norm(moe(h, blk, cfg) if blk.moe else mlp(h, blk, cfg.activation), blk.mlp_out)
