"""The two orders of rotary positions and QK-norm. Most families norm first and rotate second
(Qwen3, Gemma); nanochat ("RoPE -> Norm") and Llama 4 rotate first and norm second.

A rotation keeps a row's length, so a norm without a gain gives the same numbers either way (up to
rounding); with a gain g per feature the order matters, because the rotation mixes feature i with
feature i + d/2 and the gain weights them differently: norm(turn(x))·g ≠ turn(norm(x)·g).
`angles` is n × (rotated pairs) (p·θ_i for token p, negative for nanochat, whose rotation turns
the other way); pairs are (i, i + r/2) among the first r = 2·pairs features (the `half` style)."""
from __future__ import annotations

import numpy as np


def turn(x: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """x (… × n × d) with the pair (i, i + r/2) of token p turned by angles[p, i]; features past
    r = 2·pairs pass unchanged."""
    half = angles.shape[-1]
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., :half], x[..., half:2 * half]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., 2 * half:]], axis=-1)


def rms_norm(x: np.ndarray, eps: float, gain: np.ndarray | None = None) -> np.ndarray:
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y if gain is None else y * gain


def norm_then_rotate(x, angles, eps: float, gain=None) -> np.ndarray:
    """Qwen3's and Gemma's order: turn(norm(x)·g)."""
    return turn(rms_norm(x, eps, gain), angles)


def rotate_then_norm(x, angles, eps: float, gain=None) -> np.ndarray:
    """nanochat's and Llama 4's order: norm(turn(x))·g."""
    return rms_norm(turn(x, angles), eps, gain)
