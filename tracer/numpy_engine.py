"""The per-stage kernels again, as vectorised NumPy: what a trace runs on while numba's compiled
kernels are not in the cache yet (see kernels/warm.py), so that nobody waits for the compiler.

Each function has the name, the arguments and the arithmetic of its kernel in kernels/stages.py
(rows orientation, one dtype); only the order of additions in a sum may differ (rounding).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def project(x, w):
    return np.dot(x, w)


def scores(q, k):
    return np.dot(q, k.T)


def divide(s, c):
    return s / s.dtype.type(c)


def floor_divide(s, c):
    return whole_floor(s / s.dtype.type(c))


def whole_floor(v):
    """⌊v⌋, a value within rounding of a whole number taken as that number (kernels.stages.floor_divide)."""
    from .kernels.stages import WHOLE32, WHOLE64
    tol = WHOLE64 if v.dtype.itemsize == 8 else WHOLE32
    r = np.rint(v)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(v - r) <= tol * np.maximum(1.0, np.abs(v)), r, np.floor(v)).astype(v.dtype, copy=False)


def mask(s, allowed):
    return np.where(allowed, s, s.dtype.type(-np.inf))


def row_max(s):
    # 0 for a query whose keys are all masked, as the kernel (avoids −∞ − −∞)
    m = s.max(axis=1, keepdims=True) if s.shape[1] else np.full((s.shape[0], 1), -np.inf, s.dtype)
    return np.where(m > -np.inf, m, s.dtype.type(0))


def exp_powers(s, shift):
    # a float64 exp rounded once to s's dtype, as the kernel takes it (float32 exps differ by an ulp)
    return np.exp((s - shift).astype(np.float64, copy=False)).astype(s.dtype, copy=False)


def base_powers(s, shift, base):
    # float64 pow like the kernel's `base ** x` (small integer powers such as 3² come out exact)
    return np.power(np.float64(base), s - shift).astype(s.dtype, copy=False)


def row_sums(p):
    # in float64, as the kernel's accumulator (numba's `0.0`)
    return p.sum(axis=1, keepdims=True, dtype=np.float64).astype(p.dtype, copy=False)


def softmax_weights(p, sums):
    if sums.all():   # every query has something to attend: a plain division
        return p / sums
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums > 0, p / sums, p.dtype.type(0))


def relu_weights(s):
    return np.where(s > 0, s, s.dtype.type(0))


def weighted_sum(a, v):
    return np.dot(a, v)


def concat(zs):
    heads, n, d_v = zs.shape
    return np.ascontiguousarray(zs.transpose(1, 0, 2)).reshape(n, heads * d_v)


def finite(a):
    return bool(np.isfinite(a).all())


def add(a, b):
    return a + b


def add_row(y, b):
    """y + b, the same row b (1 × d) added to every row: the output projection's bias."""
    return y + b


def layer_norm(r, eps):
    # as the kernel: float64 sums, a row beyond ±1 divided by its largest value first
    big = np.maximum(np.abs(r).max(axis=1, keepdims=True).astype(np.float64), 1.0)
    y = r.astype(np.float64) / big
    centred = y - y.mean(axis=1, keepdims=True)
    var = (centred ** 2).mean(axis=1, keepdims=True)
    return (centred / np.sqrt(var + eps / big / big)).astype(r.dtype, copy=False)


def soft_cap(s, cap):
    return (cap * np.tanh(s.astype(np.float64) / cap)).astype(s.dtype, copy=False)


def linear_bias(s, slope):
    i, j = np.arange(s.shape[0], dtype=np.float64)[:, None], np.arange(s.shape[1], dtype=np.float64)[None, :]
    return (s.astype(np.float64) - slope * (i - j)).astype(s.dtype, copy=False)


def row_max_with(s, floor):
    # the larger of each query's largest score and the floor (a sink's logit)
    m = s.max(axis=1, keepdims=True) if s.shape[1] else np.full((s.shape[0], 1), -np.inf, s.dtype)
    return np.maximum(m, s.dtype.type(floor))


def sink_powers(shift, logit, base_e, base):
    d = logit - shift.astype(np.float64)
    return (np.exp(d) if base_e else np.power(np.float64(base), d)).astype(shift.dtype, copy=False)


def attend(q, k, v, allowed, bias, rule):
    """kernels.attend, composed of the functions above, with one check of the results' range: a
    finite sum has no inf or NaN in it (only when it is not are the cells looked at)."""
    scale, c, softmax, base_e, base, stable, masked, cap, alibi, slope, added, sink, logit = rule
    s = scores(q, k)
    scaled = s if scale == 0 else (divide(s, c) if scale == 1 else floor_divide(s, c))
    capped = soft_cap(scaled, cap) if cap > 0 else scaled
    biased = linear_bias(capped, slope) if alibi else capped
    m = biased + bias if added else biased
    m = mask(m, allowed) if masked else m
    share = np.zeros((m.shape[0], 1), dtype=m.dtype)
    if softmax:
        if stable:
            shift = row_max_with(m, logit) if sink else row_max(m)
            e = exp_powers(m, shift) if base_e else base_powers(m, shift, base)
        else:   # raw powers: nothing to subtract
            shift = np.zeros((m.shape[0], 1), m.dtype)
            e = np.exp(m) if base_e else np.power(np.float64(base), m).astype(m.dtype, copy=False)
        sums = row_sums(e)
        if sink:   # the sink's power joins each query's sum
            own = sink_powers(shift, logit, base_e, base)
            sums = sums + own
            share = softmax_weights(own, sums)
        weights = softmax_weights(e, sums)
    else:
        e, sums = m, np.zeros((m.shape[0], 1), dtype=m.dtype)
        weights = relu_weights(m)
    z = weighted_sum(weights, v)
    # (run under np.errstate: an overflowing sum only means "look closer"; a −∞ score, masked or
    # overflowed, leaves the powers, sums and z finite, so the scores themselves are summed too;
    # a cap turns an infinite scaled score into a finite one: then the scaled ones are looked at)
    hidden = biased.sum() + (scaled.sum() if cap > 0 else 0.0)
    ok = bool(np.isfinite(z.sum() + sums.sum() + hidden)) or \
        (finite(scaled) and finite(biased) and finite(z) and finite(sums))
    return s, scaled, capped, biased, m, e, sums, share, weights, z, ok


def textbook_head(x, w_q, w_k, w_v, allowed, bias, rule):
    """kernels.textbook_head: the projections, then attend."""
    q, k, v = project(x, w_q), project(x, w_k), project(x, w_v)
    return (q, k, v, *attend(q, k, v, allowed, bias, rule))


NAMES = ("project", "scores", "divide", "floor_divide", "soft_cap", "linear_bias", "mask", "row_max", "row_max_with",
         "exp_powers", "base_powers", "sink_powers", "row_sums", "softmax_weights", "relu_weights", "weighted_sum", "concat", "finite", "add",
         "add_row", "layer_norm", "attend", "textbook_head")
KERNELS = SimpleNamespace(**{name: globals()[name] for name in NAMES})
