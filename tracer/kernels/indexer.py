"""Compiled kernels of attention that chooses its keys: the lightning indexer's n × n scores and
each query's top k (`index_topk`), and latent attention over the chosen keys only (`attend_chosen`).

`index_topk`: one task is a block of queries; the block's queries of every index head are one
BLAS product against the keys they may see ((rows·heads) × d by d × keys), and each row's
Σ_h w_h·ReLU(·)·scale is summed while it is still in cache, then its k best found by a partition
(O(keys), not a sort) with equal scores broken towards the earlier key, as
tracer/mechanisms/indexer/topk.py does (the readable reference). `attend_chosen`: per query,
the chosen keys are gathered once and read by every head (latent attention in its absorbed
form shares one key and one value a token across heads: the cached c_kv ‖ k_pe and c_kv).
"""
from __future__ import annotations

import numpy as np

from . import cache

cache.preload_blas()  # before numba: see there
import numba  # noqa: E402
from numba import njit, prange  # noqa: E402

from .fused import _copy, _zigzag  # noqa: E402

cache.listen()  # compile notices for a front end (tracer.on_compile)
SCRATCH = 2**21   # numbers of one task's block of per-head scores (16 MiB in float64)


@njit(cache=True)
def _best(row, end, top, out):
    """out[:top] = the indices of the `top` best of row[:end], ascending (−1 past `end` keys);
    equal scores at the bar go to the earlier keys."""
    if end <= top:
        for j in range(top):
            out[j] = j if j < end else -1
        return
    bar = _kth_largest(row, end, top - 1)
    room = top
    for j in range(end):
        if row[j] > bar:
            room -= 1
    c = 0
    for j in range(end):
        v = row[j]
        if v > bar or (v == bar and room > 0):
            if v == bar:
                room -= 1
            out[c] = j
            c += 1


@njit(cache=True)
def _kth_largest(row, end, kth):
    """The kth largest (from 0) of row[:end] that is not NaN, or NaN past them: what
    −np.partition(−row[:end], kth)[kth] gives. A quickselect of a copy, split three ways around a
    median of three (rows of equal scores are common); np.partition's compile took 8 s of the first
    run, this one's under one."""
    a = np.empty(end, dtype=row.dtype)
    m = 0
    for j in range(end):
        if not np.isnan(row[j]):
            a[m] = row[j]
            m += 1
    if kth >= m:
        return np.nan
    lo, hi = 0, m - 1
    while lo < hi:
        x, y, z = a[lo], a[(lo + hi) >> 1], a[hi]
        pivot = max(min(x, y), min(max(x, y), z))
        above, i, below = lo, lo, hi      # a[lo:above] > pivot, a[above:i] == pivot, a[below + 1:hi + 1] < pivot
        while i <= below:
            v = a[i]
            if v > pivot:
                a[i], a[above] = a[above], v
                above += 1
                i += 1
            elif v < pivot:
                a[i], a[below] = a[below], v
                below -= 1
            else:
                i += 1
        if kth < above:
            hi = above - 1
        elif kth > below:
            lo = below + 1
        else:
            return pivot
    return a[lo]


@njit(parallel=True, cache=True)
def _index_topk(q, k, w, visible, top, scale, scores, chosen, block, threads):
    """q: n × heads × d; k: keys × d; w: n × heads; visible[t]: how many leading keys query t may
    see (non-decreasing); scores: n × keys, written (−∞ past visible), or 0 × 0 (not kept);
    chosen: n × top."""
    n, heads, d = q.shape
    keys = k.shape[0]
    blocks = (n + block - 1) // block
    keep = scores.shape[0] == n
    prods = np.empty((threads, block * heads * keys), dtype=q.dtype)
    rowbuf = np.empty((threads, block * keys), dtype=q.dtype)
    for task in prange(blocks):
        t0 = _zigzag(task, blocks) * block
        t1 = min(n, t0 + block)
        rows, width, me = t1 - t0, visible[t1 - 1], numba.get_thread_id()
        acc = scores[t0:t1] if keep else rowbuf[me, :rows * keys].reshape((rows, keys))
        s = prods[me, :rows * heads * width].reshape((rows * heads, width))
        if width > 0:
            np.dot(q[t0:t1].reshape((rows * heads, d)), k[:width].T, s)
        for r in range(rows):
            t = t0 + r
            a, end = acc[r], visible[t]
            a[:end] = 0.0
            for h in range(heads):
                wt, sr = w[t, h] * scale, s[r * heads + h]
                for j in range(end):
                    a[j] += wt * max(sr[j], 0.0)
            a[end:] = -np.inf
            _best(a, end, top, chosen[t])


@njit(parallel=True, cache=True)
def _attend_chosen(q, k, v, chosen, scale, out):
    """q: n × heads × d_k; k: keys × d_k and v: keys × d_v, shared by every head; chosen: n × top
    (−1: none); out: n × heads × d_v = softmax(q·k_chosenᵀ·scale)·v_chosen, per head."""
    n, heads, dk = q.shape
    top, dv = chosen.shape[1], v.shape[1]
    for t in prange(n):
        m = 0
        while m < top and chosen[t, m] >= 0:
            m += 1
        if m == 0:                                          # nothing to read: zeros, as a masked row
            out[t] = 0.0
            continue
        kt, vt = np.empty((m, dk), dtype=q.dtype), np.empty((m, dv), dtype=q.dtype)
        for a in range(m):
            _copy(kt[a], k[chosen[t, a]])
            _copy(vt[a], v[chosen[t, a]])
        s = np.dot(q[t], kt.T) * scale                      # heads × m
        for h in range(heads):
            row = s[h]
            top_score = row.max()
            for j in range(m):
                row[j] = np.exp(row[j] - top_score)
            row /= row.sum()
        np.dot(s, vt, out[t])                               # into the output's rows: no temporary


def _threads() -> int:
    return numba.config.NUMBA_NUM_THREADS


def index_topk(q, k, w, visible, top: int, scale: float, keep_scores: bool = True):
    """(scores (n × keys, or None), chosen (n × top, int64; −1 where a query sees fewer)) for the
    indexer's queries q (n × heads × d), keys k (keys × d), head weights w (n × heads) and the
    count of leading keys each query may see (causal: t + 1; V4's entries: ⌊(t + 1)/m⌋)."""
    from . import blas
    n, heads, d = q.shape
    visible = np.ascontiguousarray(visible, dtype=np.int64)
    if k.ndim != 2 or k.shape[1] != d or w.shape != (n, heads) or visible.shape != (n,):
        raise ValueError(f"index_topk: expected q n × heads × d, k keys × d, w n × heads, visible n; got "
                         f"{q.shape}, {k.shape}, {w.shape}, {visible.shape}")
    if top < 1 or (n and (visible.min() < 0 or visible.max() > k.shape[0] or (np.diff(visible) < 0).any())):
        raise ValueError("index_topk: expected k ≥ 1 and visible counts rising from 0 to at most the keys")
    for a in (q, k, w):
        if a.dtype != q.dtype or not a.flags.c_contiguous:
            raise ValueError(f"index_topk: expected C-contiguous arrays of one dtype ({q.dtype})")
    keys = k.shape[0]
    scores = np.empty((n, keys) if keep_scores else (0, 0), dtype=q.dtype)
    chosen = np.empty((n, top), dtype=np.int64)
    block = max(1, min(64, SCRATCH // max(1, heads * keys)))
    with blas.one_thread():
        _index_topk(q, k, w, visible, int(top), q.dtype.type(scale), scores, chosen, block, _threads())
    return (scores if keep_scores else None), chosen


def attend_chosen(q, k, v, chosen, scale: float):
    """Every head's output (n × heads × d_v) over each query's chosen keys only."""
    from . import blas
    if k.shape[0] != v.shape[0] or q.shape[2] != k.shape[1] or chosen.shape[0] != q.shape[0]:
        raise ValueError(f"attend_chosen: shapes {q.shape}, {k.shape}, {v.shape}, {chosen.shape} disagree")
    out = np.empty((q.shape[0], q.shape[1], v.shape[1]), dtype=q.dtype)
    with blas.one_thread():
        _attend_chosen(q, k, v, np.ascontiguousarray(chosen, dtype=np.int64), q.dtype.type(scale), out)
    return out


def selected(chosen, keys: int):
    """chosen (n × top, −1 for none) as a query × key mask (idx.selected)."""
    mask = np.zeros((chosen.shape[0], keys), dtype=bool)
    rows, cols = np.nonzero(chosen >= 0)
    mask[rows, chosen[rows, cols]] = True
    return mask
