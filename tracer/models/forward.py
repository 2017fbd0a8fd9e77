"""The earlier blocks of a model, run in float64 NumPy to give the residual stream entering the
traced layer: one forward for every family (DeepSeek's included), each family's norms where it puts
them, its attention with its own mechanisms (QK-norm, scaled rotary frequencies or none,
soft-capping, ALiBi, sinks, windows; or latent attention), its MLP or its experts. One commented
line per mechanism, each calling that mechanism's NumPy formula (tracer/mechanisms)."""
from __future__ import annotations

import math

import numpy as np

from ..kernels.blas import one_thread
from ..mechanisms import alibi, qk_norm, softcap, v_norm
from ..mechanisms.rotary.rotation import rotate
from ..mechanisms.sinks import powers
from . import experts
from .blocks import Block
from .config import Config, LayerKind
from .deepseek import latent_parts
from .ops import mask, mlp, norm


def attention(h: np.ndarray, blk: Block, cfg: Config, kind: LayerKind, seen: dict | None = None) -> np.ndarray:
    """Multi-head attention of the normed stream h (n × d_model), through W_O and its bias; the
    weights (heads × n × n) are left in `seen["weights"]` when a dict is given (the model view)."""
    q, k, v = _heads(h, blk, cfg, kind)
    share = q.shape[0] // k.shape[0]                  # query head h reads group h // share
    with one_thread():   # many small products per head: one BLAS thread each beats two that wait
        w = weights(q, np.repeat(k, share, axis=0), cfg, kind, blk.sinks)
        if seen is not None:
            seen["weights"] = w
        z = (w @ np.repeat(v, share, axis=0)).transpose(1, 0, 2).reshape(h.shape[0], -1)   # heads side by side
    out = z @ blk.o
    return out if blk.bo is None else out + blk.bo


def _heads(h: np.ndarray, blk: Block, cfg: Config, kind: LayerKind) -> tuple:
    """q, k and v, heads (or groups) × n × head_dim: one product each for every head, then
    QK-norm and the rotation where the layer has them."""
    def split(w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
        m = h @ w if b is None else h @ w + b
        return m.reshape(h.shape[0], -1, cfg.head_dim).transpose(1, 0, 2)
    q, k, v = split(blk.q, blk.bq), split(blk.k, blk.bk), split(blk.v, blk.bv)
    if "v_norm" in cfg.parts:                                        # the values' norm (no gain)
        v = v_norm.rows(v, cfg.eps)
    if blk.q_norm is not None:                                       # QK-norm
        q, k = (qk_norm.rows(m, g, cfg.eps, cfg.family.qk_norm) for m, g in ((q, blk.q_norm), (k, blk.k_norm)))
    if kind.rope is not None:                                        # rotary positions
        q, k = rotate(q, kind.rope), rotate(k, kind.rope)
    return q, k, v


def weights(q: np.ndarray, k: np.ndarray, cfg: Config, kind: LayerKind, sinks: np.ndarray | None = None) -> np.ndarray:
    """Each head's attention weights: scaled scores, soft-capped, ALiBi's penalty, the mask, softmax
    (each head's sink logit one more key with no value: the tokens' shares sum to 1 − sink)."""
    n, position = q.shape[1], cfg.family.position
    s = np.einsum("hid,hjd->hij", q, k, optimize=True) / (cfg.scale or math.sqrt(q.shape[-1]))
    if "softcap" in cfg.parts:                                       # soft-capping
        s = softcap.capped(s, cfg.parts["softcap"])
    if position.startswith("alibi"):                                 # ALiBi (Falcon's: before ÷√d_k)
        slopes = alibi.alibi_slopes(q.shape[0]) / (math.sqrt(q.shape[-1]) if position == "alibi_unscaled" else 1.0)
        s = alibi.penalised(s, slopes)
    np.copyto(s, -np.inf, where=mask(n, kind.window))             # the mask (a boolean index was 4 × slower)
    sink = -np.inf if sinks is None else sinks[:, None, None]      # a sink (none: a key of weight 0)
    e, own, _ = powers(s, sink)
    return e / (e.sum(axis=-1, keepdims=True) + own)


def moe(h: np.ndarray, blk: Block, cfg: Config) -> np.ndarray:
    """A mixture of experts as the family declares it (experts.Experts): the router's choice for each
    token, then the chosen experts, read and run one at a time, and the shared experts (DeepSeek's)
    on every token."""
    m, declared = blk.moe, cfg.family.experts
    logits = h @ m["router"] if m["b_router"] is None else h @ m["router"] + m["b_router"]
    chosen, shares = declared.route(logits, cfg.moe, m["bias"])
    out = experts.mixture(h, chosen, shares, lambda e, rows: declared.run(rows, m["expert"](e), cfg))
    return out if m["shared"] is None else out + mlp(h, m["shared"], cfg.activation)


def run_block(x: np.ndarray, blk: Block, cfg: Config, layer: int, seen: dict | None = None) -> np.ndarray:
    """The residual stream after block `layer`: x + attention, then + MLP (or experts), each between
    the norms its family puts around it; Falcon adds both to the same x (side by side). A dict
    `seen` receives the attention's weights (heads × n × n), for the model view."""
    h = norm(x, blk.norm_in)
    if blk.latent is not None:                                       # multi-head latent attention (DeepSeek)
        parts = latent_parts(h, blk.latent, cfg, layer)
        a = parts["out"]
        if seen is not None:
            seen["weights"] = parts["weights"]
    else:
        a = attention(h, blk, cfg, cfg.kinds[layer], seen)
    a = norm(a, blk.out_norm)
    if cfg.family.parallel:
        return x + a + mlp(norm(x, blk.norm_mlp), blk.mlp, cfg.activation)
    x = x + a
    h = norm(x, blk.norm_mlp)
    return x + norm(moe(h, blk, cfg) if blk.moe else mlp(h, blk.mlp, cfg.activation), blk.mlp_out)
