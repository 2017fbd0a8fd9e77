"""Fused kernels for large scenarios: one task is one head and one block of queries, whose scores
come from BLAS and are scaled, masked, powered and normalised row by row while still in cache.

`trace_heads` writes every step (the trace); `attend_heads` only the output, keeping the block's
scores in a scratch buffer and, under a causal mask, never computing the masked triangle. One
compiled kernel serves every arithmetic (the `rule` codes), so each compiles once per dtype; the
readable per-stage kernels in `kernels.py` stay the reference, used for small scenarios.
"""

import math
from collections import namedtuple

import numpy as np

from . import cache

cache.preload_blas()  # before numba: see there
import numba  # noqa: E402
from numba import njit, prange  # noqa: E402

from .fastexp import exp_row  # noqa: E402
from .simd import fence as _fence, max_row as _max_row, stream as _stream  # noqa: E402
from .stages import WHOLE32, WHOLE64  # noqa: E402

cache.listen()  # compile notices for a front end (tracer.on_compile)

# The arithmetic as small integer codes plus the divisor c and the base; what a kernel records into.
Rule = namedtuple("Rule", "scale mask norm power stable c base")
Record = namedtuple("Record", "grid slots sums z bad")
SCALE_NONE, SCALE_DIVIDE, SCALE_FLOOR = 0, 1, 2
MASK_NONE, MASK_CAUSAL, MASK_MATRIX = 0, 1, 2
NORM_SOFTMAX, NORM_RELU = 0, 1
POWER_E, POWER_BASE = 0, 1
# where each n × n step sits in the grid passed to trace_heads (-1: not recorded)
SCORES, SCALED, MASKED, EXP, WEIGHTS = range(5)

# Row helpers work in place on one row `a` (a copy first when the step is recorded): with a
# separate source the compiler cannot rule out overlap and may fall back to scalar code.

@njit(inline="always")
def _fill(a, start, value):
    """a[start:] = value. A loop, not a[start:]: a view per row costs two atomic counts; its
    indices unsigned, so that it carries no check for a negative index and vectorises (a signed
    loop from `start` took twice as long as the copy of the row)."""
    for j in range(np.uintp(start), np.uintp(a.shape[0])):
        a[j] = value


@njit(inline="always")
def _copy(a, src):
    """a[:] = src[:len(a)]. A loop, not a slice assignment: numba compiles every slice assignment's
    message for mismatched shapes (str, join, repr: 14 s of a cold compile of each dtype's
    kernels); its indices unsigned, as in _fill."""
    for j in range(np.uintp(a.shape[0])):
        a[j] = src[j]


@njit(inline="always")
def _copy_rows(a, src):
    """a[:, :] = src for two matrices of one shape (see _copy)."""
    for i in range(a.shape[0]):
        for j in range(np.uintp(a.shape[1])):
            a[i, j] = src[i, j]


@njit
def _powers(a, end, shift, power, base):
    """a = power^(a − shift) on the first `end` keys, 0 past them (masked: −∞ gives 0 anyway)."""
    if power == POWER_E:
        exp_row(a, end, shift)
    else:  # pow, so that small integer powers (3² = 9) come out exact, as in kernels.base_powers
        for j in range(end):
            a[j] = base ** (a[j] - shift)
    _fill(a, end, 0.0)


@njit(fastmath={"reassoc"})
def _total(a, end):
    total = 0.0
    for j in range(end):
        total += a[j]
    return total


@njit
def _max(a, end):
    """max(a[:end]), −∞ for none. A plain max loop does not vectorise: a short row (an online block
    of 64 keys) keeps sixteen running maxima, which the compiler packs into vector registers; a long
    one takes four vectors at a time (simd.max_row; it took a copied row of lanes before, whose
    copy cost more than a short row itself)."""
    if end <= 256:
        return _max16(a, end)
    return _max_row(a, end)


@njit
def _max16(a, end):
    """max(a[:end]) in sixteen running maxima (no copy, no call), then the few keys left over."""
    m = -np.inf
    if end < 16:
        for j in range(end):
            m = max(m, a[j])
        return m
    m0, m1, m2, m3, m4, m5, m6, m7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    n0, n1, n2, n3, n4, n5, n6, n7 = a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]
    stop = end - end % 16
    for j in range(16, stop, 16):
        m0, m1, m2, m3 = max(m0, a[j]), max(m1, a[j + 1]), max(m2, a[j + 2]), max(m3, a[j + 3])
        m4, m5, m6, m7 = max(m4, a[j + 4]), max(m5, a[j + 5]), max(m6, a[j + 6]), max(m7, a[j + 7])
        n0, n1, n2, n3 = max(n0, a[j + 8]), max(n1, a[j + 9]), max(n2, a[j + 10]), max(n3, a[j + 11])
        n4, n5, n6, n7 = max(n4, a[j + 12]), max(n5, a[j + 13]), max(n6, a[j + 14]), max(n7, a[j + 15])
    for j in range(stop, end):
        m0 = max(m0, a[j])
    m0, m1, m2, m3 = max(m0, n0), max(m1, n1), max(m2, n2), max(m3, n3)
    m4, m5, m6, m7 = max(m4, n4), max(m5, n5), max(m6, n6), max(m7, n7)
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@njit
def _scale(a, mode, c):
    if mode == SCALE_DIVIDE:
        if math.frexp(c)[0] == 0.5:   # c = 2^k (√64 = 8): x·2^-k is x/c exactly, and a product is far quicker
            inv = 1.0 / c
            for j in range(a.shape[0]):
                a[j] = a[j] * inv
        else:
            for j in range(a.shape[0]):
                a[j] = a[j] / c
    elif mode == SCALE_FLOOR:   # as kernels.stages.floor_divide: a quotient within rounding of a whole number is it
        tol = WHOLE64 if a.itemsize == 8 else WHOLE32
        for j in range(a.shape[0]):
            v = a[j] / c
            r = np.rint(v)
            a[j] = r if abs(v - r) <= tol * max(1.0, abs(v)) else np.floor(v)  # a float (math.floor: ±inf an integer)


@njit
def _mask(a, i, mode, allowed):
    """−∞ where query i may not attend; returns how many leading keys may be non-zero
    (i + 1 under a causal mask, all of them otherwise)."""
    if mode == MASK_CAUSAL:
        end = min(i + 1, a.shape[0])
        _fill(a, end, -np.inf)
        return end
    if mode == MASK_MATRIX:
        for j in range(a.shape[0]):
            a[j] = a[j] if allowed[i, j] else -np.inf
    return a.shape[0]


@njit
def _softmax_powers(a, end, rule):
    """The powers of a row (in place), shifted by its max when stable; returns their sum."""
    shift = 0.0
    if rule.stable:
        shift = _max(a, end)
        if shift == -np.inf:  # every key masked: 0, to avoid −∞ − −∞
            shift = 0.0
    _powers(a, end, shift, rule.power, rule.base)
    return _total(a, end)


@njit
def _divide(a, end, total):
    """Weights = powers ÷ the sum, the first `end` of them: past them the powers are 0 and stay 0
    (0 ÷ a sum > 0 is 0); a query with nothing to attend (sum 0, or NaN) gets zeros."""
    if total > 0:
        for j in range(end):
            a[j] = a[j] / total
    else:
        a[:] = 0.0


@njit
def _relu(a):
    for j in range(a.shape[0]):
        a[j] = a[j] if a[j] > 0 else 0.0


@njit(fastmath={"reassoc"})
def _finite(a):
    """No inf or NaN in a (x·0 is NaN exactly for those): a hidden −∞ score would otherwise
    become a 0 weight without a word. online.py and linear.py (a head's outputs) inline it in
    kernels cached by their own files: a change here comes with one there."""
    t = 0.0
    for j in range(a.shape[0]):
        t += a[j] * 0.0
    return t == 0.0


@njit
def _zigzag(r, blocks):
    """Block order 0, last, 1, last-1, …: under a causal mask late blocks cost more, and the
    static split of a parallel loop then gives every thread a fair share."""
    return r // 2 if r % 2 == 0 else blocks - 1 - r // 2


@njit(parallel=True, cache=True)
def trace_heads(qkv, rec, rule, allowed, block, threads):
    """Every step of every head: q (qkv) is heads × n × d, k and v are the same or fewer heads (a
    group's, read by heads/groups query heads in turn); rec.grid holds the n × n steps
    (rec.slots say where: scores, scaled, masked, exp, weights), rec.sums is heads × n × 1, rec.z
    heads × n × d_v; rec.bad[h] becomes 1 when head h's scores or scaled scores hold an inf or NaN;
    threads: numba's thread count (one scratch block each; asked here, it would stop caching).

    A row is worked in a scratch row of its thread, each step in place, and each step's values go
    out to the grid by streaming stores (simd.py): the grid is written once and never read here."""
    q, k, v = qkv
    grid, slots, sums, z, bad = rec
    c = rule.c
    heads, n = q.shape[0], q.shape[1]
    blocks = (n + block - 1) // block
    causal = rule.mask == MASK_CAUSAL
    scratch = np.empty((threads, block * n + n), dtype=q.dtype)
    for t in prange(heads * blocks):
        h = t // blocks
        g = h * k.shape[0] // q.shape[0]   # the key/value head it reads (grouped-query)
        b0 = _zigzag(t % blocks, blocks) * block
        b1 = min(n, b0 + block)
        width = b1 if causal else n              # keys any query of the block may attend
        buf = scratch[numba.get_thread_id()]
        a = buf[block * n:]                      # the row being worked
        s = buf[:(b1 - b0) * n].reshape((b1 - b0, n))
        np.dot(q[h, b0:b1], k[g].T, s)
        # the weights for BLAS, contiguous (zeros past the diagonal): row r overwrites only rows ≤ r of s
        p = buf[:(b1 - b0) * width].reshape((b1 - b0, width))
        for i in range(b0, b1):
            _copy(a, s[i - b0])
            _stream(grid[slots[SCORES], h, i], a)
            if rule.scale != SCALE_NONE:
                _scale(a, rule.scale, c)
                _stream(grid[slots[SCALED], h, i], a)
            if not _finite(a):   # the scaled scores (÷ c > 0, finite): an inf or NaN score stays one
                bad[h] = 1
            end = n
            if rule.mask != MASK_NONE:
                end = _mask(a, i, rule.mask, allowed)
                _stream(grid[slots[MASKED], h, i], a)
            if rule.norm == NORM_SOFTMAX:
                sums[h, i, 0] = _softmax_powers(a, end, rule)
                _stream(grid[slots[EXP], h, i], a)
                _divide(a, end, sums[h, i, 0])
            else:
                _relu(a)
            _stream(grid[slots[WEIGHTS], h, i], a)
            _copy(p[i - b0], a)
        np.dot(p, v[g, :width], z[h, b0:b1])
        _fence()


@njit(parallel=True, cache=True)
def attend_heads(qkv, out, rule, allowed, block, threads):
    """The heads' outputs only, side by side in out (n × heads·d_v); nothing else is kept.

    Two shortcuts the trace cannot take (its steps must hold their own values): ÷c is applied to
    the block's queries before the product ((q/c)·k, within a rounding of (q·k)/c), and each
    output row is divided by its sum of powers once (d_v numbers) instead of every weight."""
    q, k, v = qkv
    c = rule.c
    heads, n, d_k, d_v = q.shape[0], q.shape[1], q.shape[2], v.shape[2]
    blocks = (n + block - 1) // block
    causal = rule.mask == MASK_CAUSAL
    scratch = np.empty((threads, block * (n + d_v + d_k + 1)), dtype=q.dtype)
    for t in prange(heads * blocks):
        h = t // blocks
        g = h * k.shape[0] // q.shape[0]   # the key/value head it reads (grouped-query)
        b0 = _zigzag(t % blocks, blocks) * block
        b1 = min(n, b0 + block)
        rows, width = b1 - b0, (b1 if causal else n)   # causal: keys past the block never count
        buf = scratch[numba.get_thread_id()]
        s = buf[:rows * width].reshape((rows, width))
        used = rows * width
        zb = buf[used:used + rows * d_v].reshape((rows, d_v))
        used += rows * d_v
        qb = buf[used:used + rows * d_k].reshape((rows, d_k))
        sums = buf[used + rows * d_k:used + rows * (d_k + 1)]
        _copy_rows(qb, q[h, b0:b1])
        if rule.scale == SCALE_DIVIDE:
            for r in range(rows):
                for j in range(d_k):
                    qb[r, j] = qb[r, j] / c
        np.dot(qb, k[g, :width].T, s)
        for r in range(rows):
            a = s[r]
            if rule.scale == SCALE_FLOOR:
                _scale(a, rule.scale, c)
            end = _mask(a, b0 + r, rule.mask, allowed)
            if rule.norm == NORM_SOFTMAX:
                sums[r] = _softmax_powers(a, end, rule)
            else:
                _relu(a)
        np.dot(s, v[g, :width], zb)
        if rule.norm == NORM_SOFTMAX:
            for r in range(rows):
                _divide(zb[r], d_v, sums[r])
        _copy_rows(out[b0:b1, h * d_v:(h + 1) * d_v], zb)


@njit(parallel=True, cache=True)
def matmul_heads(x, w, out, block):
    """out[h] = x·w[h] for every h, in tasks of `block` rows: the projections (and W_O, as one
    'head') on the same threads as the attention kernels, whose idle threads would otherwise
    spin against a second thread pool."""
    heads, n = w.shape[0], x.shape[0]
    blocks = (n + block - 1) // block
    for t in prange(heads * blocks):
        h = t // blocks
        b0 = (t % blocks) * block
        b1 = min(n, b0 + block)
        np.dot(x[b0:b1], w[h], out[h, b0:b1])


@njit(parallel=True, cache=True)
def matmul_side(x, w, out, scratch, block):
    """out[h] = x·w[:, h·m:(h+1)·m] for every h (w: every head's matrix side by side, d × heads·m),
    in tasks of `block` rows: one wide product into the thread's scratch rows, dealt out to the
    heads. BLAS makes better use of one 2304-wide matrix than of 36 that are 64 wide (a fifth
    faster for GPT-2 small's q, k and v); the sums are the same, in the same order."""
    heads, n, m = out.shape
    blocks = (n + block - 1) // block
    for t in prange(blocks):
        b0 = t * block
        b1 = min(n, b0 + block)
        s = scratch[numba.get_thread_id(), :b1 - b0]
        np.dot(x[b0:b1], w, s)
        for h in range(heads):
            _copy_rows(out[h, b0:b1], s[:, h * m:(h + 1) * m])
