"""The per-stage kernels, one per attention stage and per variant: the readable reference.

Plain Python over NumPy arrays, written for numba: `@kernel` (jit.py) compiles each with
njit(cache=True) on first use (at most twice: float64, float32), and a tiny trace may run them as
they are (see compute.py).
Every kernel works in the *rows* orientation (one row per token / per query) on C-contiguous
float arrays; the tracer transposes at the boundary for the columns layout. No tracing, I/O or
globals in here.
"""
import math

import numpy as np

from .jit import kernel

WHOLE64, WHOLE32 = 1e-12, 4e-6   # relative distance to a whole number taken as rounding (float64: ≈4500 ulps,
#                                 float32: ≈34): far below the gap to any fraction a worksheet holds


@kernel
def project(x, w):
    """x·W: (n × d_in)·(d_in × d_out), e.g. Q = X·W_Q."""
    return np.dot(x, w)


@kernel
def scores(q, k):
    """S = Q·Kᵀ: one row per query, one column per key; S[i, j] = q_i·k_j."""
    return np.dot(q, k.T)


@kernel
def divide(s, c):
    """s ÷ c (the ÷√d_k rule, or any constant)."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = s[i, j] / c
    return out


@kernel
def floor_divide(s, c):
    """⌊s ÷ c⌋: the by-hand stand-in for ÷√d_k that keeps every number an integer. A quotient within
    rounding of a whole number is that number (a normed q·k of exactly 4 may come out 3.9999999999999996,
    whose floor would be 3): the floor is of the value a person computes, not of its rounding."""
    out = np.empty_like(s)
    tol = WHOLE64 if s.itemsize == 8 else WHOLE32
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            v = s[i, j] / c
            r = np.rint(v)
            out[i, j] = r if abs(v - r) <= tol * max(1.0, abs(v)) else np.floor(v)
    return out


@kernel
def soft_cap(s, cap):
    """C·tanh(s ÷ C): scores squashed smoothly into (−C, C), nearly unchanged well inside (Gemma 2)."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = cap * math.tanh(float(s[i, j]) / cap)
    return out


@kernel
def linear_bias(s, slope):
    """ALiBi: s − slope·(i − j) for query i and key j, a penalty growing with the key's distance."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = float(s[i, j]) - slope * float(i - j)
    return out


@kernel
def mask(s, allowed):
    """Keep s where a query may attend a key, −∞ elsewhere (so its power is exactly 0)."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = s[i, j] if allowed[i, j] else -np.inf
    return out


@kernel
def row_max(s):
    """Each query's largest score (0 for a query whose keys are all masked, to avoid −∞ − −∞)."""
    out = np.empty((s.shape[0], 1), dtype=s.dtype)
    for i in range(s.shape[0]):
        m = -np.inf
        for j in range(s.shape[1]):
            if s[i, j] > m:
                m = s[i, j]
        out[i, 0] = m if m > -np.inf else 0.0
    return out


@kernel
def exp_powers(s, shift):
    """e^(s − shift), shift being each query's max (stable) or 0 (raw powers), with libm's float64
    exp plain or compiled (bit for bit in float64). In float32, LLVM computes exp of a widened
    float32 with float32 precision, so plain and compiled differ by ≤ 2 ulp (README, tested)."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            d = float(s[i, j] - shift[i, 0])
            out[i, j] = math.exp(d) if d < 709.78 else np.exp(np.float64(d))   # inf, not OverflowError, plain
    return out


@kernel
def base_powers(s, shift, base):
    """base^(s − shift) with pow, so that small integer powers (3² = 9) come out exact."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = np.float64(base) ** np.float64(s[i, j] - shift[i, 0])   # libm's pow; inf on overflow
    return out


@kernel
def row_sums(p):
    """Each query's sum of powers, as an n × 1 column."""
    out = np.zeros((p.shape[0], 1), dtype=p.dtype)
    for i in range(p.shape[0]):
        total = 0.0
        for j in range(p.shape[1]):
            total += float(p[i, j])   # a float64 sum plain or compiled (0.0 + float32 is float32 in NumPy 2)
        out[i, 0] = total
    return out


@kernel
def softmax_weights(p, sums):
    """A = powers ÷ their query's sum; a query with nothing to attend (sum 0) gets zeros."""
    out = np.empty_like(p)
    for i in range(p.shape[0]):
        for j in range(p.shape[1]):
            out[i, j] = p[i, j] / sums[i, 0] if sums[i, 0] > 0 else 0.0
    return out


@kernel
def relu_weights(s):
    """A = max(0, s): the ReLU alternative to softmax (not normalised; −∞ becomes 0)."""
    out = np.empty_like(s)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            out[i, j] = s[i, j] if s[i, j] > 0 else 0.0
    return out


@kernel
def weighted_sum(a, v):
    """Z = A·V: each query's output is its weights applied to the values."""
    return np.dot(a, v)


@kernel
def concat(zs):
    """The heads' outputs side by side: (heads, n, d_v) → (n, heads·d_v)."""
    heads, n, d_v = zs.shape
    out = np.empty((n, heads * d_v), dtype=zs.dtype)
    for h in range(heads):
        for i in range(n):
            for j in range(d_v):
                out[i, h * d_v + j] = zs[h, i, j]
    return out


@kernel
def finite(a):
    """True when a holds no inf and no NaN (the tracer's check that nothing overflowed)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if not math.isfinite(a[i, j]):
                return False
    return True


@kernel
def add(a, b):
    """The residual connection: a + b, cell by cell."""
    return a + b


@kernel
def layer_norm(r, eps):
    """Each token's row shifted to mean 0 and scaled to variance 1 (no learned gain or bias).
    A row beyond ±1 is divided by its largest value first (var(r) = big²·var(r/big)), so that a
    row of 1e200s or float32's 3e19s has a variance that fits; sums are float64 plain or compiled."""
    out = np.empty_like(r)
    d = r.shape[1]
    for i in range(r.shape[0]):
        big = _largest(r, i)
        mean = 0.0
        for j in range(d):
            mean += float(r[i, j]) / big
        mean /= d
        var = 0.0
        for j in range(d):
            var += (float(r[i, j]) / big - mean) ** 2
        var /= d
        inv = 1.0 / math.sqrt(var + eps / big / big)
        for j in range(d):
            out[i, j] = (float(r[i, j]) / big - mean) * inv
    return out


@kernel
def _largest(r, i):
    """The largest |value| of row i, or 1 when none is beyond ±1 (then nothing is divided)."""
    big = 1.0
    for j in range(r.shape[1]):
        big = max(big, abs(float(r[i, j])))
    return big


@kernel
def add_row(y, b):
    """y + b, the same row b (1 × d) added to every row: a bias, or a norm's shift."""
    out = np.empty_like(y)
    for i in range(y.shape[0]):
        for j in range(y.shape[1]):
            out[i, j] = y[i, j] + b[0, j]
    return out


@kernel
def rms_norm(r, gain, eps):
    """Each token's row divided by its root mean square, times the learned gain (RMSNorm). As in
    layer_norm, a huge row is divided by its largest value first (its squares must not overflow);
    with eps = 0 every row is (the scale then cancels exactly), so that a row of tiny values does
    not square to a mean of 0. A row of zeros with eps = 0 is 0 ÷ 0: NaN, as PyTorch gives (the
    trace refuses it before, naming the eps: layer.refuse_zero_rows)."""
    out = np.empty_like(r)
    d = r.shape[1]
    for i in range(r.shape[0]):
        big = _largest(r, i) if eps > 0 else _peak(r, i)
        ms = 0.0
        for j in range(d):
            ms += (float(r[i, j]) / big) ** 2
        root = math.sqrt(ms / d + eps / big / big)
        inv = 1.0 / root if root > 0 else math.nan
        for j in range(d):
            out[i, j] = float(r[i, j]) / big * inv * gain[0, j]
    return out


@kernel
def _peak(r, i):
    """The largest |value| of row i, or 1 for a row of zeros."""
    big = 0.0
    for j in range(r.shape[1]):
        big = max(big, abs(float(r[i, j])))
    return big if big > 0 else 1.0


@kernel
def rotate(q, cos, sin, first, second):
    """RoPE: pair p of row t, features (first[p], second[p]), turned by the angle whose cos and sin
    are cos[t, p], sin[t, p]."""
    out = q.copy()
    for t in range(q.shape[0]):
        for p in range(first.shape[0]):
            a, b = q[t, first[p]], q[t, second[p]]
            out[t, first[p]] = a * cos[t, p] - b * sin[t, p]
            out[t, second[p]] = a * sin[t, p] + b * cos[t, p]
    return out


@kernel
def row_max_with(s, floor):
    """Each query's largest score, or `floor` (a head's sink logit) where that is larger: what is
    subtracted when the sink joins the softmax (a query whose keys are all masked: the floor)."""
    out = np.empty((s.shape[0], 1), dtype=s.dtype)
    for i in range(s.shape[0]):
        m = floor
        for j in range(s.shape[1]):
            if s[i, j] > m:
                m = s[i, j]
        out[i, 0] = m
    return out


@kernel
def sink_powers(shift, logit, base_e, base):
    """The sink's power for each query, base^(logit − shift): one more key's, with no value."""
    out = np.empty_like(shift)
    for i in range(shift.shape[0]):
        d = logit - float(shift[i, 0])
        if base_e:
            out[i, 0] = math.exp(d) if d < 709.78 else np.exp(np.float64(d))   # inf, not OverflowError, plain
        else:
            out[i, 0] = np.float64(base) ** np.float64(d)
    return out


@kernel
def attend(q, k, v, allowed, bias, rule):
    """A head's steps from its queries, keys and values: the kernels above, in the order the trace
    records them (one dispatch instead of ten, which is most of a small trace's time).
    rule = (scale: 0 none, 1 ÷c, 2 ⌊÷c⌋; c; softmax; base e; base; stable; masked; cap C, 0 for none;
    ALiBi; its slope; an additive mask (`bias`, query × key, added before the mask); a sink; its
    logit). Returns the scores, scaled, capped, biased, masked, powers, sums, the sink's share,
    weights, z (a step the layer does not have is its input, unchanged; no sink: zeros), and
    whether nothing left the dtype's range."""
    scale, c, softmax, base_e, base, stable, masked, cap, alibi, slope, added, sink, logit = rule
    s = scores(q, k)
    scaled = s if scale == 0 else (divide(s, c) if scale == 1 else floor_divide(s, c))
    capped = soft_cap(scaled, cap) if cap > 0 else scaled
    biased = linear_bias(capped, slope) if alibi else capped
    m = add(biased, bias) if added else biased
    m = mask(m, allowed) if masked else m
    share = np.zeros((m.shape[0], 1), dtype=m.dtype)
    if softmax:
        if stable:
            shift = row_max_with(m, logit) if sink else row_max(m)
        else:
            shift = np.zeros((m.shape[0], 1), dtype=m.dtype)
        e = exp_powers(m, shift) if base_e else base_powers(m, shift, base)
        sums = row_sums(e)
        if sink:   # the sink's power joins each query's sum: the tokens' weights add up to 1 − its share
            own = sink_powers(shift, logit, base_e, base)
            sums = add(sums, own)
            share = softmax_weights(own, sums)
        weights = softmax_weights(e, sums)
    else:
        e, sums = m, np.zeros((m.shape[0], 1), dtype=m.dtype)
        weights = relu_weights(m)
    z = weighted_sum(weights, v)
    # any inf or NaN shows in one of these: scores and scaled in scaled (a −∞ score would
    # otherwise become a quiet 0 weight), overflowing powers in sums, the rest in z
    ok = finite(scaled) and finite(biased) and finite(z) and finite(sums)
    return s, scaled, capped, biased, m, e, sums, share, weights, z, ok


@kernel
def textbook_head(x, w_q, w_k, w_v, allowed, bias, rule):
    """Every step of one head of the 2017 layer in one call: its projections, then attend."""
    q, k, v = project(x, w_q), project(x, w_k), project(x, w_v)
    s, scaled, capped, biased, m, e, sums, share, weights, z, ok = attend(q, k, v, allowed, bias, rule)
    return q, k, v, s, scaled, capped, biased, m, e, sums, share, weights, z, ok
