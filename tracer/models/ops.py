"""The NumPy pieces every block of the earlier blocks is made of, in float64: its norms, the causal
window, each family's activation and the MLP (gated or plain); the experts' MLPs are these too."""
from __future__ import annotations

import math

import numpy as np

from ..rms import rms_rows


def norm(x: np.ndarray, spec: dict | None) -> np.ndarray:
    """LayerNorm ((x − mean) ÷ √(var + eps) · gain + bias) or RMSNorm (x ÷ √(mean x² + eps) · gain,
    rms.rms_rows); x itself where the family has no norm (spec None)."""
    if spec is None:
        return x
    if spec["kind"] == "rms":
        y = rms_rows(x, spec["gain"], spec["eps"])
    else:
        x = x - x.mean(axis=-1, keepdims=True)
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + spec["eps"]) * spec["gain"]
    return y if spec.get("bias") is None else y + spec["bias"]


def mask(n: int, window: int | None) -> np.ndarray:
    """True where key j is hidden from query i: later keys, and those W or more back."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    hidden = j > i
    return hidden | (i - j >= window) if window is not None else hidden


def silu(u: np.ndarray) -> np.ndarray:
    return u * 0.5 * (1 + np.tanh(u / 2))             # u·sigmoid(u), without exp overflowing


def activate(u: np.ndarray, activation: str) -> np.ndarray:
    """silu, gelu (erf), gelu_tanh, or BLOOM's gelu (which writes √(2/π) as 0.79788456)."""
    if activation == "silu":
        return silu(u)
    if activation in ("gelu_tanh", "gelu_bloom"):
        c = 0.79788456 if activation == "gelu_bloom" else math.sqrt(2 / math.pi)
        return 0.5 * u * (1 + np.tanh(c * (u + 0.044715 * u ** 3)))
    from scipy.special import erf
    return 0.5 * u * (1 + erf(u / math.sqrt(2)))


def mlp(h: np.ndarray, m: dict, activation: str) -> np.ndarray:
    """Gated (m has a gate): down(act(gate h) ⊙ up h); plain: down(act(up h)); each with its bias if any."""
    def lin(x, w, b):
        return x @ m[w] if m.get(b) is None else x @ m[w] + m[b]

    u = activate(lin(h, "gate" if "gate" in m else "up", "b_gate" if "gate" in m else "b_up"), activation)
    if "gate" in m:
        u = u * lin(h, "up", "b_up")
    return lin(u, "down", "b_down")
