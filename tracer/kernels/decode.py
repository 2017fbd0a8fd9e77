"""One decoded token against the KV cache, every head in turn: its scores
against the t + 1 cached keys, scaled, powered, summed, normalised, and applied to the cached values.

One thread: a token's work is small, and a parallel region between the token's BLAS products
would leave its threads spinning against BLAS's own. Each step is written into one packed row per head (`grid[slot, h, off:off + t + 1]`), so a decode
of a thousand tokens makes four arrays, not a hundred thousand; the trace takes views of them.

numba's disk cache is keyed by this file alone: a change to the fused kernels' row helpers it inlines
(the by-hand floor that takes a quotient within rounding of a whole number as that number, since
QK-norm; a row's max in sixteen running maxima, ÷2^k as a product, the masked keys' values by
loops of unsigned indices and the weights divided up to the last key attended, since issue 38) must
come with a change here, or a stale compiled copy keeps the old code.
"""
import numpy as np
from numba import njit

from .fused import NORM_SOFTMAX, SCALE_NONE, _copy, _divide, _relu, _scale, _softmax_powers

SCORES, SCALED, EXP, WEIGHTS = range(4)


@njit(cache=True)
def attend_token(t, off, q, kbuf, vbuf, grid, sums, z, rule, per):
    """Token t (query rows q: heads × d_k) against cache rows 0..t of its head's group; the steps
    go to grid[:, h, off:off + t + 1], sums[h, t, 0] and z[h, t]. Returns 0, or 1 when a score
    or a sum left the dtype's range."""
    heads, width = q.shape[0], t + 1
    bad = np.zeros(heads, np.int8)
    for h in range(heads):
        g = h // per
        s = grid[SCORES, h, off:off + width]
        np.dot(kbuf[g, :width], q[h], s)
        a = grid[SCALED, h, off:off + width]
        _copy(a, s)
        if rule.scale != SCALE_NONE:
            _scale(a, rule.scale, rule.c)
        w = grid[WEIGHTS, h, off:off + width]
        if rule.norm == NORM_SOFTMAX:
            e = grid[EXP, h, off:off + width]
            _copy(e, a)
            sums[h, t, 0] = _softmax_powers(e, width, rule)
            _copy(w, e)
            _divide(w, width, sums[h, t, 0])
            if not np.isfinite(sums[h, t, 0]):
                bad[h] = 1
        else:
            _copy(w, a)
            _relu(w)
        if not np.isfinite(a).all():
            bad[h] = 1
        np.dot(w, vbuf[g, :width], z[h, t])
    return bad.max()
