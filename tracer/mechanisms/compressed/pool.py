"""Compressed entries (DeepSeek-V4 paper §2.3): every m tokens become one entry, a softmax pooling
of their projections, feature by feature:

    C_e = Σ_{slots s of entry e} softmax_s(Z_s + B_s) ⊙ C_s          (`pool.k` after norm and turn)

C = x·W_KV (what is pooled), Z = x·W_Z (how strongly, per feature) and B a learned bias per slot
(`ape`). The heavily compressed kind pools its m tokens (m = 128) side by side. The sparse kind
(m = 4) pools 2m slots with overlapping windows: each token projects two series, a (its share of
the next entry) and b (of its own), and entry e pools series a of window e − 1 with series b of
window e; entry 0 has no window before it, and those m slots weigh 0. Only whole windows make
an entry: the last n mod m tokens wait for the next ones (the sliding window covers them).

`pool.weights` is (entry·slot) × feature: rows e·S … e·S + S − 1 hold entry e's weights over its
S slots (each column of them sums to 1); `sources` names the token behind every slot."""
from __future__ import annotations

import numpy as np


def slots(m: int, overlap: bool) -> int:
    return 2 * m if overlap else m


def sources(entries: int, m: int, overlap: bool) -> np.ndarray:
    """entry × slot: the token each slot pools (−1: entry 0's empty first half)."""
    e = np.arange(entries)[:, None]
    if not overlap:
        return e * m + np.arange(m)[None, :]
    s = np.arange(2 * m)[None, :]
    src = np.where(s < m, (e - 1) * m + s, e * m + s - m)
    return np.where(src < 0, -1, src)


def pool(c: np.ndarray, z: np.ndarray, bias: np.ndarray, m: int, overlap: bool) -> tuple[np.ndarray, np.ndarray]:
    """(entries (E × d), weights (E × slot × d)) from C and Z (token × width) and B (m × width);
    width is d, or 2d with overlap (series a in the first d features, b in the last d)."""
    n, width = c.shape
    if z.shape != c.shape or bias.shape != (m, width) or (overlap and width % 2):
        raise ValueError(f"pool: expected C and Z token × width and B {m} × width, got {c.shape}, {z.shape}, "
                         f"{bias.shape}")
    e = n // m
    c = c[: e * m].reshape(e, m, width)
    logits = z[: e * m].reshape(e, m, width) + bias
    if overlap:
        d = width // 2
        c_slots = np.zeros((e, 2 * m, d))
        g_slots = np.full((e, 2 * m, d), -np.inf)
        c_slots[:, m:], g_slots[:, m:] = c[..., d:], logits[..., d:]          # series b: its own window
        c_slots[1:, :m], g_slots[1:, :m] = c[:-1, :, :d], logits[:-1, :, :d]  # series a: the window before
        c, logits = c_slots, g_slots
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    w = w / w.sum(axis=1, keepdims=True)
    return (w * c).sum(axis=1), w


def visible(n: int, entries: int, m: int) -> np.ndarray:
    """query × entry: token t may read entry e once its window is complete, e < ⌊(t + 1)/m⌋
    (the entry's last token is at most t)."""
    t = np.arange(n)[:, None]
    return np.arange(entries)[None, :] < (t + 1) // m


def stacked(weights: np.ndarray) -> np.ndarray:
    """pool.weights as a step: (entry·slot) × feature."""
    e, s, d = weights.shape
    return weights.reshape(e * s, d)
