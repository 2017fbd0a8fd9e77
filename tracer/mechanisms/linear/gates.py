"""What a real hybrid model puts around the recurrence, in plain NumPy: the short causal convolution
over the projected q, k, v (and its SiLU), the decay α and the overwrite strength β from the
checkpoint's tensors, the gated RMS norm of each head's output, and the softmax layers' output gate.
Each as transformers computes it (its eager forward on CPU is the reference in the tests)."""
from __future__ import annotations

import numpy as np


def sigmoid(u: np.ndarray, base: float | None = None) -> np.ndarray:
    """σ(u) = 1/(1 + e^−u), without exp overflowing; with a base b > 1, 1/(1 + b^−u) = b^u/(b^u + 1),
    the softmax of (u, 0) under that base (the by-hand preset's 3: σ(1) = 3/4)."""
    if base is not None:
        return 1.0 / (1.0 + np.power(float(base), -np.asarray(u, dtype=float)))
    return 0.5 * (1.0 + np.tanh(np.asarray(u) / 2))


def silu(u: np.ndarray) -> np.ndarray:
    """u·σ(u) = h + h·tanh(h) with h = u/2: the same number in two temporaries, not five (a layer's
    convolved q, k and v are millions of them)."""
    h = 0.5 * np.asarray(u)
    t = np.tanh(h)
    t *= h
    t += h
    return t


def softplus(u: np.ndarray) -> np.ndarray:
    """log(1 + e^u), exact for large u (torch's threshold of 20 differs by under e^−20)."""
    return np.logaddexp(0.0, u)


def causal_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Depthwise causal convolution, then SiLU: x is n × channels, w channels × K (the kernel of
    channel c is w[c]); out[t, c] = SiLU(Σ_j w[c, j]·x[t − K + 1 + j, c]), tokens before the first zero.
    Leading axes (heads: x heads × n × channels, w heads × channels × K) are taken one by one."""
    n, K = x.shape[-2], w.shape[-1]
    padded = np.concatenate([np.zeros((*x.shape[:-2], K - 1, x.shape[-1]), dtype=x.dtype), x], axis=-2)
    out = sum(padded[..., j:j + n, :] * w[..., None, :, j] for j in range(K))
    return silu(out)


def gated_decay(a: np.ndarray, a_log: np.ndarray, dt_bias: np.ndarray) -> np.ndarray:
    """α = exp(−exp(A_log)·softplus(a + dt_bias)) ∈ (0, 1): Mamba's discretised decay, as Gated
    DeltaNet and Kimi Delta Attention compute it from the projection a (per head or per channel)."""
    return np.exp(-np.exp(a_log) * softplus(a + dt_bias))


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """x ÷ √(mean x² + eps) · gain, over the last axis."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gain


def gated_rms_norm(o: np.ndarray, z: np.ndarray, gain: np.ndarray, eps: float, gate: str = "silu") -> np.ndarray:
    """A head's output after its gated norm: RMSNorm(o)·act(z), act SiLU (Gated DeltaNet: Qwen3-Next,
    Qwen3.5, OLMo-Hybrid) or σ (Kimi Delta Attention). The gain is used as stored (1-centred)."""
    act = silu(z) if gate == "silu" else sigmoid(z)
    return rms_norm(o, gain, eps) * act


def output_gate(z: np.ndarray, logits: np.ndarray, base: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(gate, gated): a softmax layer's output gate σ(x·W_G) (Qwen3-Next, Qwen3.5: the second half
    of each head's q_proj rows) and z ⊙ gate, what concat joins."""
    gate = sigmoid(logits, base)
    return gate, z * gate
