"""A head's two circuits as Elhage et al. (2021) read them off the weights, rows orientation:
QK = W_Q,h·W_K,g(h)ᵀ (d_model × d_model: which residual directions attend to which) and
OV = W_V,g(h)·W_O,h (d_model × d_model: what is written back for what is read), g(h) the head's
own key/value group (h // (heads ÷ groups) under grouped-query attention). Only their largest
singular values are kept: how strong each circuit is and how many directions it uses.

Both products have rank ≤ head_dim, so they are never formed: for A·Bᵀ with A, B of d × r,
A = Q_A·R_A and B = Q_B·R_B give A·Bᵀ = Q_A·(R_A·R_Bᵀ)·Q_Bᵀ, whose singular values are those of
the r × r matrix R_A·R_Bᵀ (Q_A, Q_B have orthonormal columns). R is read off the Cholesky factor
of the small Gram matrix AᵀA = R_AᵀR_A (20 × faster than a QR of A here; the largest singular
values keep their precision), with a QR where A's columns are dependent. Norms, biases and
rotations between the matrices are left out, as TransformerLens's FactoredMatrix leaves them.
"""
from __future__ import annotations

import numpy as np

TOP = 3   # singular values kept per circuit


def top_singular(a: np.ndarray, b: np.ndarray, top: int = TOP) -> np.ndarray:
    """The `top` largest singular values of a[h]·b[h]ᵀ for each h (a: heads × d × r, b: heads × d × r'),
    heads × min(top, r, r') (largest first)."""
    return _top(_r(a), _r(b), top)


def _top(ra: np.ndarray, rb: np.ndarray, top: int = TOP) -> np.ndarray:
    """top_singular from the R factors of a and b."""
    s = np.linalg.svd(ra @ np.swapaxes(rb, -1, -2), compute_uv=False)
    return s[:, :top]


def _r(a: np.ndarray) -> np.ndarray:
    """An R with a = Q·R (Q with orthonormal columns) for each matrix of the stack a (… × d × r)."""
    try:
        return np.swapaxes(np.linalg.cholesky(np.swapaxes(a, -1, -2) @ a), -1, -2)
    except np.linalg.LinAlgError:   # dependent columns: the Gram matrix is singular
        return np.linalg.qr(a, mode="r")


def per_head(w: np.ndarray, count: int) -> np.ndarray:
    """d × (count·width) → count × d × width: head (or group) c's columns c·width … (c+1)·width."""
    return w.reshape(w.shape[0], count, -1).transpose(1, 0, 2)


def grouped(q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray, heads: int, groups: int) -> tuple:
    """(qk, ov) singular values (heads × TOP) of a softmax layer's weights in the rows orientation
    (q: d × heads·hd, k and v: d × groups·hd, o: heads·hd × d); head h reads group h // (heads ÷ groups)."""
    g = np.arange(heads) // (heads // groups)
    rq, ro = _r(per_head(q, heads)), _r(per_head(o.T, heads))   # W_O,h's rows, as d × hd: OV = W_V·(W_Oᵀ)ᵀ
    rk, rv = _r(per_head(k, groups))[g], _r(per_head(v, groups))[g]   # once a group, not once a head
    return _top(rq, rk), _top(rv, ro)


def latent(w: dict, mla: dict, heads: int) -> tuple:
    """(qk, ov) of a latent attention layer (DeepSeek's read_attention matrices): head h's query
    [W_Q,nope | W_Q,rope] (through W_DQ·W_UQ when queries are compressed) against its rebuilt key
    [W_DKV·W_UK,h | W_KR] (the rotary key is every head's), and OV = W_DKV·W_UV,h·W_O,h. The
    RMS norms of the latents are left out."""
    rank, nope, rope, width = mla["kv_rank"], mla["nope"], mla["rope"], mla["v"]
    wq = w["q"] if "q" in w else w["q_a"] @ w["q_b"]                        # d × heads·(nope + rope)
    wq = per_head(wq, heads)
    down, k_rope = w["kv_a"][:, :rank], w["kv_a"][:, rank:]                 # d × rank, d × rope
    up = per_head(w["kv_b"], heads)                                         # heads × rank × (nope + v)
    keys = np.concatenate([down @ up[..., :nope], np.broadcast_to(k_rope, (heads,) + k_rope.shape)], axis=-1)
    values = down @ up[..., nope:nope + width]                              # heads × d × v
    return top_singular(wq, keys), top_singular(values, per_head(w["o"].T, heads))
