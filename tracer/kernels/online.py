"""The online softmax (FlashAttention's forward pass) on numba's threads: one task is one head and
one block of queries, walking the keys in blocks with a running max, running sums and output.

It records each block's max, rescale and sums (small: queries × blocks) and, when asked (`keep`),
the block's scores, powers and running output, so that the trace can recompute a head's tiles with
the very same arithmetic. The row helpers are the fused kernels' (scale, mask, powers, sum).

numba's disk cache is keyed by this file alone: a change to the fused kernels' row helpers it inlines
(the by-hand floor that takes a quotient within rounding of a whole number as that number, since
QK-norm; a row's max in sixteen running maxima, ÷2^k as a product, the masked keys' values by
loops of unsigned indices and the weights divided up to the last key attended, since issue 38) must
come with a change here, or a stale compiled copy keeps the old code.
"""
import math

import numpy as np
from numba import njit, prange

from .fused import MASK_CAUSAL, MASK_NONE, POWER_E, SCALE_NONE, _copy, _fill, _finite, _max, _powers, _scale, _total


@njit
def _rescale(old, new, rule):
    """base^(old − new): 1 when the max did not move (also −∞ to −∞), 0 from −∞ (nothing seen)."""
    if new == old:
        return 1.0
    if old == -np.inf:
        return 0.0
    return math.exp(old - new) if rule.power == POWER_E else rule.base ** (old - new)


@njit(inline="always")
def _row(a, i, j0, rule, allowed, m, keep_scores, keep):
    """One query's block scores (a, in place: scaled, masked, then powers), the masked scores copied
    into keep_scores when kept; returns (new max, rescale, sum of the block's powers, whether the
    scores were finite). Inlined: as a call it counted a reference to each of its three arrays in
    and out, atomically, for every query and block (a tenth of the kernel's time on 2 threads)."""
    w = a.shape[0]
    if rule.scale != SCALE_NONE:
        _scale(a, rule.scale, rule.c)
    ok = _finite(a)
    end = w
    if rule.mask == MASK_CAUSAL:
        end = min(max(i + 1 - j0, 0), w)
        _fill(a, end, -np.inf)
    elif rule.mask != MASK_NONE:
        for j in range(w):
            if not allowed[i, j0 + j]:
                a[j] = -np.inf
    if keep:
        _copy(keep_scores, a)
    new, r = 0.0, 1.0
    if rule.stable:
        new = max(m, _max(a, end)) if end > 0 else m
        r = _rescale(m, new, rule)
    shift = new if new > -np.inf else 0.0
    _powers(a, end, shift, rule.power, rule.base)
    return new, r, _total(a, end), ok


@njit(parallel=True, cache=True)
def online_heads(qkv, state, z, tiles, bad, rule, allowed, block, rows_per_task, keep):
    """state[0|1|2, h, i, j]: query i's max, rescale and sums after key block j of head h; z: the
    heads' outputs; tiles (when keep): scores and powers (heads × n × m) and acc (heads × n × blocks·d_v)."""
    q, k, v = qkv
    heads, n, m_keys, d_v = q.shape[0], q.shape[1], k.shape[1], v.shape[2]
    nb = (m_keys + block - 1) // block
    qblocks = (n + rows_per_task - 1) // rows_per_task
    for t in prange(heads * qblocks):
        h, r0 = t // qblocks, (t % qblocks) * rows_per_task
        r1 = min(n, r0 + rows_per_task)
        rows = r1 - r0
        m = np.full(rows, -np.inf if rule.stable else 0.0, dtype=q.dtype)
        total = np.zeros(rows, dtype=q.dtype)
        acc = np.zeros((rows, d_v), dtype=q.dtype)
        flat = np.empty(rows * block, dtype=q.dtype)
        pv = np.empty((rows, d_v), dtype=q.dtype)
        spare = np.empty(block, dtype=q.dtype)
        for j in range(nb):
            j0 = j * block
            w = min(block, m_keys - j0)
            s = flat[:rows * w].reshape((rows, w))
            hidden = rule.mask == MASK_CAUSAL and j0 > r1 - 1   # every query of the task is before the block
            if hidden:
                if keep:   # the block's powers, recorded: zeros (a block past every query of the task)
                    s[:, :] = 0.0
            else:
                np.dot(q[h, r0:r1], k[h, j0:j0 + w].T, s)
            for r in range(rows):
                i = r0 + r
                if hidden:
                    if keep:
                        tiles[0][h, i, j0:j0 + w] = -np.inf
                    new, rs, part, ok = m[r], 1.0, 0.0, True
                elif keep:
                    new, rs, part, ok = _row(s[r], i, j0, rule, allowed, m[r], tiles[0][h, i, j0:j0 + w], True)
                else:
                    new, rs, part, ok = _row(s[r], i, j0, rule, allowed, m[r], spare, False)
                if not ok:
                    bad[h] = 1
                total[r] = rs * total[r] + part
                if rs != 1.0:   # the max moved (× 1 changes nothing: most blocks after the first few)
                    for c in range(d_v):
                        acc[r, c] = rs * acc[r, c]
                m[r] = new
                state[0, h, i, j], state[1, h, i, j], state[2, h, i, j] = new, rs, total[r]
                if keep:
                    tiles[1][h, i, j0:j0 + w] = s[r]
            if not hidden:
                np.dot(s, v[h, j0:j0 + w], pv)
                acc += pv
            if keep:
                tiles[2][h, r0:r1, j * d_v:(j + 1) * d_v] = acc
        for r in range(rows):
            for c in range(d_v):
                z[h, r0 + r, c] = acc[r, c] / total[r] if total[r] > 0 else 0.0
