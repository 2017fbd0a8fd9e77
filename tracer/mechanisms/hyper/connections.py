"""Manifold-constrained hyper-connections (DeepSeek V4): the residual is N streams X_1 … X_N a
token, not one vector. Before a block (attention, or the MLP), a one-layer perceptron of the
flattened, RMS-normed streams gives three mixes per token:

    [p̃, q̃, C̃] = RMSNorm(X_1 ‖ … ‖ X_N)·Fᵀ                 (F: (2N + N²) × N·d)
    pre_j  = σ(s_pre·p̃_j + b_j) + ε                          how much stream j enters the block
    post_k = 2·σ(s_post·q̃_k + b_k)                            how much of the block's output stream k gets
    comb   = Sinkhorn(softmax_rows(s_comb·C̃ + B) + ε)         N × N, rows and columns summing to ≈ 1

    x      = Σ_j pre_j·X_j                                    what the block reads (the traced `x`)
    X'_k   = post_k·block(x) + Σ_j comb_jk·X_j                the streams after it

Sinkhorn-Knopp: divide by the column sums, then t − 1 times by the row sums and the column sums
(each sum + ε), so that the mixing of the streams neither grows nor shrinks them."""
from __future__ import annotations

import numpy as np


def _sigmoid(u: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(u / 2))


def sinkhorn(c: np.ndarray, iters: int, eps: float) -> np.ndarray:
    """… × N × N made nearly doubly stochastic: columns, then (rows, columns) iters − 1 times."""
    c = c / (c.sum(axis=-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(axis=-1, keepdims=True) + eps)
        c = c / (c.sum(axis=-2, keepdims=True) + eps)
    return c


def mixes(streams: np.ndarray, fn: np.ndarray, base: np.ndarray, scale: np.ndarray, iters: int, eps: float,
          norm_eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pre (token × N), post (token × N), comb (token × N × N)) for streams (token × N × d) and a
    hyper-connection's F ((2N + N²) × N·d), biases (2N + N²) and three scales."""
    n, N, d = streams.shape
    if fn.shape != ((2 + N) * N, N * d) or base.shape != ((2 + N) * N,) or scale.shape != (3,):
        raise ValueError(f"hyper-connections: {N} streams of {d} need F {((2 + N) * N, N * d)}, base "
                         f"{((2 + N) * N,)} and 3 scales; got {fn.shape}, {base.shape}, {scale.shape}")
    flat = streams.reshape(n, N * d)
    flat = flat / np.sqrt(np.mean(flat ** 2, axis=-1, keepdims=True) + norm_eps)
    u = flat @ fn.T
    pre = _sigmoid(u[:, :N] * scale[0] + base[:N]) + eps
    post = 2 * _sigmoid(u[:, N:2 * N] * scale[1] + base[N:2 * N])
    logits = u[:, 2 * N:].reshape(n, N, N) * scale[2] + base[2 * N:].reshape(N, N)
    comb = np.exp(logits - logits.max(axis=-1, keepdims=True))
    comb = comb / comb.sum(axis=-1, keepdims=True) + eps
    return pre, post, sinkhorn(comb, iters, eps)


def collapse(streams: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """x = Σ_j pre_j·X_j (token × d)."""
    return np.einsum("tj,tjd->td", pre, streams)


def expand(streams: np.ndarray, out: np.ndarray, post: np.ndarray, comb: np.ndarray) -> np.ndarray:
    """X'_k = post_k·out + Σ_j comb_jk·X_j (token × N × d)."""
    return post[:, :, None] * out[:, None, :] + np.einsum("tjk,tjd->tkd", comb, streams)
