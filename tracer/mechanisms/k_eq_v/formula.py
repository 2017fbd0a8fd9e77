"""K = V on Gemma 4's global layers: a layer with `attention_k_eq_v` has no W_V. One product
x·W_K gives both:

    k = turn(RMS-norm(x·W_K)·g_k)        (its norm with a gain, then its position)
    v = RMS-norm(x·W_K)                  (the same product, the gainless `v_norm`, no position)

so the key and the value of a token share a direction before the key is turned: a head weighs
the values by how well the query matches the very vectors it then reads. The weights saved are
W_K's only (W_V's d_model × d_k numbers are gone); a cache still keeps k and v apart, because
after the norms and the rotation they are different numbers."""
from __future__ import annotations

import numpy as np


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def keys_and_values(x: np.ndarray, w_k: np.ndarray, gain: np.ndarray, eps: float, turn) -> tuple:
    """(k, v) of one key/value head: x (n × d_model), w_k (d_model × d_k, rows orientation), the
    k-norm's gain (d_k), ε, and `turn`, the rotation of n × d_k rows by their positions."""
    raw = x @ w_k                          # n × d_k: the one projection
    k = turn(_rms(raw, eps) * gain)        # normed with its gain, then turned
    v = _rms(raw, eps)                     # the same rows, gainless norm, never turned
    return k, v
