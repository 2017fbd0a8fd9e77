"""Why multi-head latent attention exists, in numbers: what one layer's KV cache holds per token
under each kind of attention (DeepSeek-V2's table), and the absorbed form of the scores, in
which W_UK is folded into the queries so that they read the cached latent directly."""
from __future__ import annotations

import numpy as np


def cache_per_token(heads: int, head_dim: int, groups: int, kv_rank: int, rope_dims: int) -> dict[str, int]:
    """Elements one token adds to one layer's cache: MHA keeps every head's key and value
    (2·n_h·d_h), GQA every group's (2·n_g·d_h), MQA one pair (2·d_h), MLA the latent c_kv and
    the shared rotary key k_pe (d_c + d_h^R)."""
    return {"MHA": 2 * heads * head_dim, "GQA": 2 * groups * head_dim, "MQA": 2 * head_dim,
            "MLA": kv_rank + rope_dims}


def absorbed_scores(q_nope: np.ndarray, w_uk: np.ndarray, c_kv: np.ndarray) -> np.ndarray:
    """One head's no-position scores from the latent: (q_nope·W_UKᵀ)·c_kvᵀ, where W_UK (rank ×
    nope, rows orientation: k_nope = c_kv·W_UK) rebuilds the keys. Equal to q_nope·k_nopeᵀ by
    associativity; a decoder computes q_nope·W_UKᵀ once per query and never rebuilds a key."""
    return (q_nope @ w_uk.T) @ c_kv.T


def rebuilt_scores(q_nope: np.ndarray, w_uk: np.ndarray, c_kv: np.ndarray) -> np.ndarray:
    """The same scores the textbook way: rebuild each key k_nope = c_kv·W_UK, then q_nope·k_nopeᵀ."""
    return q_nope @ (c_kv @ w_uk).T
