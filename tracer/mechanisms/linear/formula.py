"""The recurrences of linear attention for one head, in plain NumPy: the states after every token,
the outputs, and the weights the layer implies but never builds.

Plain arithmetic only (+, −, ×), so the same code runs on float64, float32 and object arrays of
Python Fractions: rational q, k, v, α and β give rational states, outputs and weights, exactly.
Shapes: q and k are n × d_k (q already scaled as the arithmetic says), v is n × d_v, α is n × 1
(one decay a token) or n × d_k (one a key channel: kda), β has n entries (delta and kda only).
tracer/kernels/linear.py computes the same for every head at once, compiled, for long inputs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

RULES = ("delta", "decay", "kda")
L2_EPS = 1e-6   # √(Σx² + 1e-6), as transformers' torch fallbacks and FLA's kernels norm q and k


def uses_beta(rule: str) -> bool:
    """Whether the rule overwrites (delta, kda: β and the error) or only adds (decay)."""
    if rule not in RULES:
        raise ValueError(f"unknown linear attention rule {rule!r}; expected one of {', '.join(RULES)}")
    return rule != "decay"


class Update(NamedTuple):
    """One token's update of the state, every intermediate kept (the explain texts read them)."""
    decayed: np.ndarray            # diag(α_t)·S_{t−1}: what survives of the state
    prediction: np.ndarray | None  # decayedᵀ·k_t: what the state already returns for k_t (delta rule)
    error: np.ndarray | None       # v_t − prediction
    write: np.ndarray              # β_t·k_t·errorᵀ (delta rule), k_t·v_tᵀ (decay rule)
    state: np.ndarray              # S_t = decayed + write


def update(S: np.ndarray, k: np.ndarray, v: np.ndarray, a: np.ndarray, b, delta: bool) -> Update:
    """S_t from S_{t−1} (d_k × d_v) for one token: decay a (1 or d_k entries), then the write; under
    the delta rule only β times the error between v and what the decayed state predicts for k."""
    decayed = a[:, None] * S
    if not delta:
        write = np.outer(k, v)
        return Update(decayed, None, None, write, decayed + write)
    prediction = decayed.T @ k
    error = v - prediction
    write = np.outer(k, b * error)
    return Update(decayed, prediction, error, write, decayed + write)


def _dtype(*arrays) -> np.dtype:
    return np.result_type(*(np.asarray(a) for a in arrays if a is not None))


def _betas(beta, n: int, delta: bool):
    return beta if delta else [1] * n


def recur(q: np.ndarray, k: np.ndarray, v: np.ndarray, alpha: np.ndarray, beta, rule: str,
          initial: np.ndarray | None = None):
    """(states, o): states is n × d_k × d_v, S_t after token t, from S_{−1} = `initial` (0 when None:
    a decoded token continues from the state the earlier ones left); o is n × d_v, o_t = S_tᵀ·q_t."""
    delta = uses_beta(rule)
    n, d_k = k.shape
    dtype = _dtype(q, k, v, alpha, beta if delta else None, initial)
    states = np.zeros((n, d_k, v.shape[1]), dtype=dtype)
    o = np.zeros((n, v.shape[1]), dtype=dtype)
    S = np.zeros((d_k, v.shape[1]), dtype=dtype) if initial is None else initial.astype(dtype)
    for t, b in enumerate(_betas(beta, n, delta)):
        S = update(S, k[t], v[t], alpha[t], b, delta).state
        states[t], o[t] = S, S.T @ q[t]
    return states, o


def implicit(q: np.ndarray, k: np.ndarray, alpha: np.ndarray, beta, rule: str) -> np.ndarray:
    """A (query × key) with o = A·v exactly. Unrolling the recurrence, S_t = Σ_{s≤t} M_t⋯M_{s+1}·β_s·k_s·v_sᵀ
    with M_r = (I − β_r·k_r·k_rᵀ)·diag(α_r) (the decay rule: M_r = diag(α_r), and β = 1), so

        A[t, s] = q_tᵀ·M_t⋯M_{s+1}·β_s·k_s   (s ≤ t; 0 above the diagonal)

    Computed backwards, every query at once: u_t starts as q_t; at key s each u (t ≥ s) gives
    A[t, s] = β_s·(k_s·u), then becomes M_sᵀ·u = diag(α_s)·(u − β_s·k_s·(k_s·u)). O(n²·d_k)."""
    delta = uses_beta(rule)
    n = len(q)
    dtype = _dtype(q, k, alpha, beta if delta else None)
    A = np.zeros((n, n), dtype=dtype)
    u = q.astype(dtype, copy=True)
    betas = _betas(beta, n, delta)
    for s in range(n - 1, -1, -1):
        c = u[s:] @ k[s]                 # k_s·u for every query t ≥ s
        A[s:, s] = betas[s] * c
        if delta:
            u[s:] = u[s:] - np.outer(betas[s] * c, k[s])
        u[s:] = u[s:] * alpha[s]
    return A


def l2norm(x: np.ndarray, eps: float = L2_EPS) -> np.ndarray:
    """Each row divided by √(Σx² + eps)."""
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + eps)
