"""The lightning indexer's scores (DeepSeek-V3.2 paper, eq. 1):

    I_{t,s} = Σ_h w_{t,h} · ReLU(q_{t,h} · k_s) · scale

q_{t,h}: query t's index head h (token × index heads·d_I, `idx.q`); k_s: key s's one index key,
shared by every index head (token × d_I, `idx.k`; DeepSeek V4: one per compressed entry);
w_{t,h}: how much query t trusts head h (token × index heads, `idx.w`, x·W_w·H_I^−½); scale:
d_I^−½. A head that finds a key irrelevant contributes 0, never a negative vote (the ReLU), and
the weights w, which can be negative, decide how heads combine. Keys a query may not see score −∞.
"""
from __future__ import annotations

import numpy as np


def head_weights(x: np.ndarray, w_proj: np.ndarray) -> np.ndarray:
    """idx.w = x·W_wᵀ·H_I^−½ (W_w as saved, index heads × d_model): the per-head weights with the
    1/√H_I that transformers multiplies in, so that the scores are a plain weighted sum."""
    heads = w_proj.shape[0]
    return (x @ w_proj.T) * heads ** -0.5


def per_head(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """ReLU(q_{t,h}·k_s)·scale for every index head: q is token × heads × d_I, k key × d_I;
    returns heads × token × key (each head's vote before its weight)."""
    return np.maximum(q.transpose(1, 0, 2) @ k.T, 0.0) * scale   # matmul: BLAS, where einsum is not


def index_scores(q: np.ndarray, k: np.ndarray, w: np.ndarray, scale: float, allowed: np.ndarray) -> np.ndarray:
    """I (query × key): Σ_h w_{t,h}·ReLU(q_{t,h}·k_s)·scale where `allowed` (query × key, bool)
    is true, −∞ elsewhere (later tokens, entries not yet complete)."""
    if q.ndim != 3 or q.shape[2] != k.shape[1] or w.shape != q.shape[:2]:
        raise ValueError(f"indexer: expected q token × heads × d_I, k key × d_I and w token × heads; got "
                         f"{q.shape}, {k.shape}, {w.shape}")
    s = np.einsum("th,hts->ts", w, per_head(q, k, scale))
    return np.where(allowed, s, -np.inf)


def causal(n: int, keys: int | None = None) -> np.ndarray:
    """Query t may see keys 0 … t (the tokens' own indexer)."""
    return np.tri(n, n if keys is None else keys, dtype=bool)


def story(q: np.ndarray, k: np.ndarray, w: np.ndarray, scale: float, t: int, s: int, f=lambda v: f"{v:.4g}") -> str:
    """How idx.scores[t, s] was computed, with its numbers: each index head's dot product, its
    ReLU and its weight, then the scale (`f` writes a number)."""
    dots = [float(q[t, h] @ k[s]) for h in range(q.shape[1])]
    terms = " + ".join(f"{f(w[t, h])}·ReLU({f(d)})" for h, d in enumerate(dots))
    kept = " + ".join(f"{f(w[t, h] * max(d, 0.0))}" for h, d in enumerate(dots))
    total = sum(w[t, h] * max(d, 0.0) for h, d in enumerate(dots))
    tail = "" if scale == 1 else f", × {f(scale)} = {f(total * scale)}"
    cut = [h for h, d in enumerate(dots) if d < 0]
    many = len(cut) > 1
    why = (f"   (index head{'s' if many else ''} {', '.join(map(str, cut))} disagree{'' if many else 's'}: cut to 0, "
           "not a vote against)") if cut else ""
    return f"= {terms} = {kept} = {f(total)}{tail}{why}"
