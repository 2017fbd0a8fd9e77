"""DeepSeek V4's attention over the window's tokens, then the compressed entries:

    A_h = softmax over (tokens, entries, sink_h) of q_h·[K; C]ᵀ/√D     (the sink's share dropped)
    z_h = A_h·[K; C], then its last r features turned back by −p·θ    (`h{h}.z`)
    out = concat_g(z_group g · W_a,gᵀ) · W_bᵀ                          (the grouped W_O)

One key/value head: the keys are the values (K = V = RMSNorm(x·W_KV), turned), and every query
head reads them. Rotary positions turn the last r features of q, k and each entry (at its
window's first token); since the values carry that turn too, the output's turned part is turned
back at the query's own position, leaving what each key contributed a function of the distance.
The weights are query × (tokens, then entries), as transformers returns them; a row sums to
1 − the sink's share."""
from __future__ import annotations

import numpy as np


def sliding(n: int, window: int) -> np.ndarray:
    """query × token: key j allowed iff i − W < j ≤ i (transformers' sliding window)."""
    i, j = np.indices((n, n))
    return (j <= i) & (j > i - window)


def weights_with_sinks(scores: np.ndarray, allowed: np.ndarray, sinks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(weights (heads × query × key), sink's share (heads × query)) from scaled scores (heads ×
    query × key), allowed (query × key) and one sink logit per head: one softmax over the allowed
    keys and the sink together."""
    s = np.where(allowed, scores, -np.inf)
    sink = sinks[:, None, None] * np.ones(s.shape[:2] + (1,))
    top = np.maximum(s.max(axis=-1, keepdims=True), sink)
    e, e_sink = np.exp(s - top), np.exp(sink - top)
    total = e.sum(axis=-1, keepdims=True) + e_sink
    return e / total, (e_sink / total)[..., 0]


def grouped_output(z: np.ndarray, w_a: np.ndarray, w_b: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(per-group projections (token × groups·d_g), out (token × d_model)) from the heads' outputs
    side by side (token × heads·D); W_a as saved, (groups·d_g) × (heads·D/groups): group g's
    rows project its own heads only (a block-diagonal W_O, then W_b mixes the groups)."""
    n, width = z.shape
    if width % groups or w_a.shape[1] * groups != width or w_a.shape[0] % groups:
        raise ValueError(f"grouped output: {width} features in {groups} groups do not fit W_a of {w_a.shape}")
    blocks = w_a.reshape(groups, w_a.shape[0] // groups, w_a.shape[1])          # g × d_g × (heads·D/g)
    per = np.einsum("tgi,goi->tgo", z.reshape(n, groups, width // groups), blocks).reshape(n, -1)
    return per, per @ w_b.T
