"""Rotary positions on a slice of the features, as the sparse families place them: the indexer of
DeepSeek V3.2 turns its first r features in half pairs (i, i + r/2), GLM-5's its first r in
interleaved pairs (2i, 2i + 1), DeepSeek V4 the last r of every head (and of the output, backwards).

The features keep their order: transformers' interleaved code writes the turned pairs as all
evens then all odds, a permutation of the same numbers that leaves every dot product unchanged."""
from __future__ import annotations

import numpy as np

from ..rotary import frequencies as rope


def angles(spec: dict, positions, r: int) -> np.ndarray:
    """p·θ_i for every position p (rows) and pair i of r rotated features (columns): θ from the
    rotary spec ({"base", "scaling"} as tracer.rope reads it, yarn's ramp included)."""
    return np.outer(np.asarray(positions, dtype=np.float64), rope.frequencies(spec, r))


def turn(m: np.ndarray, theta: np.ndarray, style: str, where: str = "first", factor: float = 1.0) -> np.ndarray:
    """m (… × n × d) with r = 2·theta.shape[-1] of its features turned: the `first` r or the `last`
    r, paired `half` or `interleaved`; theta is n × r/2 (negate it to turn back). `factor` scales
    the turned features (yarn's attention factor, which transformers folds into cos and sin)."""
    r = 2 * theta.shape[-1]
    d = m.shape[-1]
    if r > d:
        raise ValueError(f"rotary: {r} features to turn, but rows of {d}")
    at = slice(0, r) if where == "first" else slice(d - r, d)
    part = m[..., at]
    a_idx, b_idx = rope.pair_slices(r, style)
    a, b = part[..., a_idx], part[..., b_idx]
    cos, sin = np.cos(theta) * factor, np.sin(theta) * factor
    out = np.array(m, dtype=np.float64, copy=True)
    turned = out[..., at]
    turned[..., a_idx] = a * cos - b * sin
    turned[..., b_idx] = b * cos + a * sin
    return out
