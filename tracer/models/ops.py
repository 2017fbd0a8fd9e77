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
    """u·sigmoid(u) = u ÷ (1 + e^−u), as PyTorch computes it (e^−u overflows to ∞ for u < −709, where
    the quotient is −0, as it should be)."""
    a = np.negative(u)
    with np.errstate(over="ignore"):
        np.exp(a, out=a)
    a += 1
    return np.divide(u, a, out=a)


# u·c·(1 + 0.044715·u²) inside the tanh, as transformers writes these two (c rounded as they round it)
TANH_FACTOR = {"gelu_fast": 0.7978845608, "gelu_bloom": 0.79788456}


def activate(u: np.ndarray, activation: str) -> np.ndarray:
    """silu, relu2, gelu (erf), gelu_tanh (√(2/π)·(u + 0.044715·u³) inside the tanh, as gelu_new and
    PyTorch's tanh GELU write it), gelu_fast or BLOOM's gelu: each on one temporary, in place, in the
    order of transformers' formula (an MLP's activation is a few million numbers a block; NumPy's
    u ** 3 calls pow() for each, 40 × slower than u·u·u, which is what PyTorch's pow(u, 3) does)."""
    if activation == "silu":
        return silu(u)
    if activation == "relu2":   # max(u, 0)², squared in place
        a = np.maximum(u, 0.0)
        return np.multiply(a, a, out=a)
    if activation == "gelu_tanh":
        a = u * u
        a *= u
        a *= 0.044715
        a += u
        a *= math.sqrt(2 / math.pi)
    elif activation in TANH_FACTOR:
        a = u * 0.044715
        a *= u
        a += 1
        a *= u * TANH_FACTOR[activation]
    else:
        from scipy.special import erf
        return _half_u_times(u, erf(u / math.sqrt(2)))
    return _half_u_times(u, np.tanh(a, out=a))


def _half_u_times(u: np.ndarray, a: np.ndarray) -> np.ndarray:
    """½u·(1 + a), a overwritten."""
    a += 1
    out = u * 0.5
    out *= a
    return out


def mlp(h: np.ndarray, m: dict, activation: str) -> np.ndarray:
    """Gated (m has a gate): down(act(gate h) ⊙ up h); plain: down(act(up h)); each with its bias if any."""
    def lin(x, w, b):
        return x @ m[w] if m.get(b) is None else x @ m[w] + m[b]

    u = activate(lin(h, "gate" if "gate" in m else "up", "b_gate" if "gate" in m else "b_up"), activation)
    if "gate" in m:
        u = u * lin(h, "up", "b_up")
    return lin(u, "down", "b_down")
