"""Linear attention for every head at once, compiled: the state after each token, the outputs, and
the implicit weights (see tracer/mechanisms/linear/formula.py, the readable twin used for tiny inputs).

One task is one value head (numba prange over heads; each writes only its own slots). q and k hold
the key heads, read by heads/key_heads value heads in turn, as transformers repeats them. α is
heads × n × 1 (one decay a token) or heads × n × d_k (kda: one a key channel); β is heads × n. A
recorded array with no rows (states or implicit shaped heads × 0 × …) is not computed.
"""
from __future__ import annotations

import numpy as np

from . import cache

cache.preload_blas()  # before numba: see there
from numba import njit, prange  # noqa: E402

cache.listen()  # compile notices for a front end (tracer.on_compile)

from .fastexp import exp64  # noqa: E402
from .fused import _copy_rows, _finite  # noqa: E402


@njit(inline="always", fastmath={"reassoc", "contract"})
def _four(St, j, a, k, q, ahead, w, o, error, next_v, zero):
    """Rows j … j + 3 of Sᵀ decayed and written, and their reads (into o) and next errors."""
    w0, w1, w2, w3 = w[j], w[j + 1], w[j + 2], w[j + 3]
    read0, read1, read2, read3 = zero, zero, zero, zero
    pred0, pred1, pred2, pred3 = zero, zero, zero, zero
    for i in range(St.shape[1]):
        ai, ki, qi, ci = a[i], k[i], q[i], ahead[i]
        s0 = St[j, i] * ai + ki * w0
        s1 = St[j + 1, i] * ai + ki * w1
        s2 = St[j + 2, i] * ai + ki * w2
        s3 = St[j + 3, i] * ai + ki * w3
        St[j, i], St[j + 1, i], St[j + 2, i], St[j + 3, i] = s0, s1, s2, s3
        read0, read1, read2, read3 = read0 + s0 * qi, read1 + s1 * qi, read2 + s2 * qi, read3 + s3 * qi
        pred0, pred1, pred2, pred3 = pred0 + s0 * ci, pred1 + s1 * ci, pred2 + s2 * ci, pred3 + s3 * ci
    o[j], o[j + 1], o[j + 2], o[j + 3] = read0, read1, read2, read3
    error[j], error[j + 1] = next_v[j] - pred0, next_v[j + 1] - pred1
    error[j + 2], error[j + 3] = next_v[j + 2] - pred2, next_v[j + 3] - pred3


@njit(cache=True, fastmath={"reassoc", "contract"})
def _recur(q, k, v, alpha, beta, delta, states, o):
    """One head: S decays (α per token or per key channel), then takes the write (the delta rule:
    β·k·(v − Sᵀk)ᵀ; the decay rule: k·vᵀ); o_t = S_tᵀ·q_t; S_t copied into states[t] when kept.

    S is held transposed (Sᵀ, a row per value channel): each column of S evolves on its own (its
    error is its own value's), so one pass over a row of Sᵀ decays and writes it, and sums both what
    reads it (o_t = S_tᵀ·q_t) and the next token's prediction S_tᵀ·(α_{t+1}⊙k_{t+1}) as dot products
    of the row, four rows at a time (their loads of k, q shared). The machine's fused multiply-add
    rounds each write once (S·α + k·w) and the sums in another order than the steps one after the
    other: the differences stay within the dtype's rounding (tests/test_linear_kernel.py)."""
    n, d_k = k.shape
    d_v = v.shape[1]
    keep = states.shape[0] == n
    St = np.zeros((d_v, d_k), dtype=o.dtype)
    zero = St[0, 0]                             # 0 in the dtype: the sums stay in it
    w = np.empty(d_v, dtype=o.dtype)            # what token t writes under its key: β·(v − Sᵀk), or v
    error = v[0].copy()                         # the delta rule's v_t − S_{t−1}ᵀ·(α_t⊙k_t)
    a = np.empty(d_k, dtype=o.dtype)            # α_t on each key channel
    ahead = np.zeros(d_k, dtype=o.dtype)        # α_{t+1}⊙k_{t+1} (zeros: nothing to predict)
    per_channel = alpha.shape[1] > 1
    for t in range(n):
        for j in range(d_v):
            w[j] = error[j] * beta[t] if delta else v[t, j]
        for i in range(d_k):
            a[i] = alpha[t, i] if per_channel else alpha[t, 0]
        if delta and t + 1 < n:
            for i in range(d_k):
                ahead[i] = (alpha[t + 1, i] if per_channel else alpha[t + 1, 0]) * k[t + 1, i]
        next_v = v[min(t + 1, n - 1)]
        for j in range(0, d_v - 3, 4):   # (a bound of d_v − d_v % 4 ran 4× slower)
            _four(St, j, a, k[t], q[t], ahead, w, o[t], error, next_v, zero)
        for j in range(d_v - d_v % 4, d_v):
            read, pred = zero, zero
            for i in range(d_k):
                s = St[j, i] * a[i] + k[t, i] * w[j]
                St[j, i] = s
                read += s * q[t, i]
                pred += s * ahead[i]
            o[t, j] = read
            error[j] = next_v[j] - pred
        if keep:
            _copy_rows(states[t], St.T)


CHUNK = 64   # tokens per block of the implicit weights: the blocks off the diagonal are BLAS products


@njit(cache=True, fastmath={"reassoc", "contract"})
def _scale(x, alpha, r, per_channel):
    """x ← diag(α_r)·x on the key channels (x: … × d_k)."""
    for t in range(x.shape[0]):
        for i in range(x.shape[1]):
            x[t, i] *= alpha[r, i] if per_channel else alpha[r, 0]


@njit(cache=True, fastmath={"reassoc", "contract"})
def _erase(x, k, b):
    """x ← x − b·(x·k)·kᵀ for every row: the rows times (I − b·k·kᵀ), which is symmetric."""
    for t in range(x.shape[0]):
        c = 0.0
        for i in range(k.shape[0]):
            c += x[t, i] * k[i]
        c *= b
        for i in range(k.shape[0]):
            x[t, i] -= c * k[i]


@njit(cache=True, fastmath={"reassoc", "contract"})
def _diagonal(u, k, alpha, beta, delta, A, c0, c1):
    """The block of A inside one chunk, by the backward walk of formula.implicit restricted to it; leaves
    u[t] = (M_t⋯M_{c0})ᵀ·q_t, the query carried to the chunk's start (M_r = (I − β_r·k_r·k_rᵀ)·diag(α_r)
    as there)."""
    per_channel = alpha.shape[1] > 1
    for s in range(c1 - 1, c0 - 1, -1):
        b = beta[s] if delta else 1.0
        for t in range(s, c1):
            c = 0.0
            for i in range(k.shape[1]):
                c += u[t, i] * k[s, i]
            A[t, s] = b * c
        if delta:
            _erase(u[s:c1], k[s], b)
        _scale(u[s:c1], alpha, s, per_channel)


@njit(cache=True, fastmath={"reassoc", "contract"})
def _carried(k, alpha, beta, delta, c0, c1):
    """(keys, Tᵀ): each key of the chunk carried to its end, K̃_s = M_{c1−1}⋯M_{s+1}·β_s·k_s (rows),
    and the transpose of the chunk's whole transition T = M_{c1−1}⋯M_{c0}, from the keys in one
    product: unrolling M_s = D_s − β_s·k_s·k_sᵀ·D_s from the left gives T = D − Σ_s K̃_s·y_sᵀ with
    y_s = D_s⋯D_{c0}·k_s and D the whole chunk's decay (the decay rule: T = D)."""
    d_k = k.shape[1]
    per_channel = alpha.shape[1] > 1
    keys = k[c0:c1].copy()
    y = k[c0:c1].copy()
    decay = np.ones(d_k, dtype=k.dtype)
    for s in range(c0, c1):
        b = beta[s] if delta else 1.0
        for i in range(d_k):
            keys[s - c0, i] *= b
        _scale(keys[: s - c0], alpha, s, per_channel)     # the keys before s pass through M_s
        if delta:
            _erase(keys[: s - c0], k[s], b)
        for i in range(d_k):
            decay[i] *= alpha[s, i] if per_channel else alpha[s, 0]
            y[s - c0, i] *= decay[i]
    T = np.diag(decay)
    if delta:
        T -= y.T @ keys
    return keys, T


@njit(cache=True)
def _implicit(q, k, alpha, beta, delta, A):
    """One head's A (query × key), o = A·v: inside each chunk of CHUNK tokens by the backward walk;
    before it, in one product a chunk: A[chunk i, s] = Q̃_i·G_s, with the chunk's queries carried to
    its start (Q̃) and every earlier key carried there too (G_s = M_{c_i − 1}⋯M_{s+1}·β_s·k_s: the
    previous chunk's keys K̃, the older ones moved on by that chunk's transition T)."""
    n = k.shape[0]
    chunks = (n + CHUNK - 1) // CHUNK
    u = q.copy()
    keys = np.empty_like(k)
    T = np.empty((chunks, k.shape[1], k.shape[1]), dtype=k.dtype)
    for m in range(chunks):
        c0, c1 = m * CHUNK, min(n, (m + 1) * CHUNK)
        _diagonal(u, k, alpha, beta, delta, A, c0, c1)
        carried, transition = _carried(k, alpha, beta, delta, c0, c1)
        _copy_rows(keys[c0:c1], carried)
        _copy_rows(T[m], transition)
    G = np.empty_like(k)                        # rows: the earlier keys, carried to chunk i's start
    moved = np.empty_like(k)
    for i in range(1, chunks):
        i0, i1 = i * CHUNK, min(n, (i + 1) * CHUNK)
        if i > 1:                               # through chunk i − 1: rows times Tᵀ
            np.dot(G[: i0 - CHUNK], T[i - 1], moved[: i0 - CHUNK])
            G, moved = moved, G
        _copy_rows(G[i0 - CHUNK: i0], keys[i0 - CHUNK: i0])
        _copy_rows(A[i0:i1, :i0], u[i0:i1] @ G[:i0].T)


@njit(parallel=True, cache=True)
def linear_heads(q, k, v, alpha, beta, delta, states, o, implicit):
    """Every value head h (reading key head h·key_heads // heads): states[h] (n × d_k × d_v, when
    kept), o[h] (n × d_v), implicit[h] (n × n, when kept; zeros above the diagonal are the caller's)."""
    heads = v.shape[0]
    for h in prange(heads):
        g = h * k.shape[0] // heads
        _recur(q[g], k[g], v[h], alpha[h], beta[h], delta, states[h], o[h])
        if implicit.shape[1] == q.shape[1]:
            _implicit(q[g], k[g], alpha[h], beta[h], delta, implicit[h])


@njit(parallel=True, cache=True)
def finite_heads(a, ok):
    """ok[h] = whether a[h] holds no ∞ nor NaN (a: heads × n × d), by the fused kernels' row check
    (x·0 summed), where np.isfinite(a[h]).all() builds a boolean array a head. This file's cache
    keeps a compiled copy of that check: a change to it comes with a change here."""
    for h in prange(a.shape[0]):
        ok[h] = _finite(a[h].reshape(-1))


# ------------------------------------------------------------------ around the recurrence
# The sums of mechanisms/linear/gates.py and formula.py, one pass a row, in float64, the activation
# on that float64 sum, rounded once into `out` (the run's dtype), as the NumPy twins do. e^x is
# fastexp's, which vectorises (numba's math.exp is one library call a number). NumPy's error model:
# Python's would test every quotient for a zero divisor and raise, and a loop that may raise does not
# vectorise (SiLU's quotient: 2.0 against 1.3 ns a number); a zero divisor gives ∞ or NaN, as in NumPy.

ACT_NONE, ACT_SILU, ACT_SIGMOID = 0, 1, 2
ACTS = {None: ACT_NONE, "silu": ACT_SILU, "sigmoid": ACT_SIGMOID}


@njit(fastmath={"contract"}, error_model="numpy")
def _activate(acc, act):
    """acc ← act(acc) in place (a float64 row), in one loop that vectorises (e^−acc is ∞ for
    acc < −709: SiLU's u/∞ = −0 and σ's 1/∞ = 0, their limits)."""
    if act == ACT_SILU:
        for c in range(acc.shape[0]):
            acc[c] = acc[c] / (1.0 + exp64(-acc[c]))
    elif act == ACT_SIGMOID:
        for c in range(acc.shape[0]):
            acc[c] = 1.0 / (1.0 + exp64(-acc[c]))


TOKENS = 64   # tokens per task of the kernels below (their scratch rows made once a task)


@njit(parallel=True, cache=True, error_model="numpy")
def conv(x, w, act, out):
    """out[h, t] = act(Σ_j w[h, j] ⊙ x[h, t − K + 1 + j]) (no tokens before the first): x, out heads ×
    n × channels, w heads × K × channels (each tap's weights side by side), act an ACT_ code."""
    heads, n, channels = x.shape
    K = w.shape[1]
    blocks = (n + TOKENS - 1) // TOKENS
    for task in prange(heads * blocks):
        h, t0 = task // blocks, (task % blocks) * TOKENS
        acc = np.empty(channels)
        for t in range(t0, min(n, t0 + TOKENS)):
            acc[:] = 0.0
            for j in range(max(0, K - 1 - t), K):
                for c in range(channels):
                    acc[c] += w[h, j, c] * x[h, t - K + 1 + j, c]
            _activate(acc, act)
            for c in range(channels):
                out[h, t, c] = acc[c]


@njit(parallel=True, cache=True, error_model="numpy")
def norm_rows(x, gain, eps, mean, gate, act, out):
    """out[h, t] = x[h, t] ÷ √(Σ x[h, t]² + eps) ⊙ gain (the L2 norm), or ÷ √(mean x[h, t]² + eps)
    where `mean` (the RMS norm); times act(gate[h, t]) where act is not ACT_NONE (the gated norm:
    gate heads × n × d, else unread)."""
    heads, n, d = x.shape
    blocks = (n + TOKENS - 1) // TOKENS
    for task in prange(heads * blocks):
        h, t0 = task // blocks, (task % blocks) * TOKENS
        row = np.ones(d)
        for t in range(t0, min(n, t0 + TOKENS)):
            total = 0.0
            for c in range(d):
                total += np.float64(x[h, t, c]) * x[h, t, c]
            r = 1.0 / np.sqrt((total / d if mean else total) + eps)
            if act != ACT_NONE:
                for c in range(d):
                    row[c] = gate[h, t, c]
                _activate(row, act)
            for c in range(d):
                out[h, t, c] = x[h, t, c] * r * gain[c] * row[c]
