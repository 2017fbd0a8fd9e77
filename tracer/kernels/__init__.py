"""Every numba kernel of attnsim lives in this package, and only here: the per-stage kernels
(stages.py, declared with @kernel), the fused per-head kernels (fused.py), the vectorised exp.

The wrappers below check what they are given before a compiled kernel sees it (a wrong shape or
dtype inside numba is a crash or a silent recompile, not an error). Importing this package does not
import numba; the first call of a compiled kernel does.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import namespace as stage_kernels

__all__ = ["attend_heads", "attend_token", "matmul", "matmul_heads", "matmul_side", "online_heads", "rule",
           "stage_kernels", "trace_heads"]
ROWS = 128   # rows per matmul task, at least; queries per task of the online kernel
SIDE_ROWS = 512   # rows per task of a wide product, at most (its scratch is threads × this × width)


def _fused():
    from . import fused
    return fused


def _threads() -> int:
    import numba
    return numba.config.NUMBA_NUM_THREADS


def _check(name: str, *arrays) -> None:
    dtype = arrays[0].dtype
    for a in arrays:
        if a.dtype != dtype or not a.flags.c_contiguous:
            raise ValueError(f"{name}: expected C-contiguous arrays of one dtype ({dtype})")


def rule(arithmetic, mask_kind: str, d_k: int):
    """The arithmetic as the fused kernels' codes (fused.Rule)."""
    F = _fused()
    scale = {"none": F.SCALE_NONE, "floor": F.SCALE_FLOOR}.get(arithmetic.scale, F.SCALE_DIVIDE)
    mask = {"none": F.MASK_NONE, "causal": F.MASK_CAUSAL}.get(mask_kind, F.MASK_MATRIX)
    norm = F.NORM_SOFTMAX if arithmetic.normalize == "softmax" else F.NORM_RELU
    power = F.POWER_E if arithmetic.softmax_base == "e" else F.POWER_BASE
    c = arithmetic.scale_divisor(d_k)
    return F.Rule(scale, mask, norm, power, int(arithmetic.stable), 1.0 if c is None else float(c),
                  float(arithmetic.base))


def trace_heads(q, k, v, record, rule, allowed, block: int) -> None:
    """Every n × n step of the heads in q, k, v (heads × n × d) into `record` (fused.Record)."""
    from . import blas
    _check("trace_heads", q, k, v, record.grid, record.sums, record.z)
    assert q.shape[0] % k.shape[0] == 0 and k.shape[:2] == v.shape[:2], "trace_heads: groups"
    assert q.shape[1] == k.shape[1] and q.shape[:2] == record.z.shape[:2], "trace_heads: shapes"
    with blas.one_thread():
        _fused().trace_heads((q, k, v), record, rule, _mask_matrix(rule, allowed), block, _threads())


def attend_heads(q, k, v, out, rule, allowed, block: int) -> None:
    """Only the heads' outputs, side by side in out (n × heads·d_v)."""
    from . import blas
    _check("attend_heads", q, k, v, out)
    assert out.shape == (q.shape[1], q.shape[0] * v.shape[2]), "attend_heads: shapes"
    with blas.one_thread():
        _fused().attend_heads((q, k, v), out, rule, _mask_matrix(rule, allowed), block, _threads())


def matmul_heads(x, w, out, block: int) -> None:
    """out[h] = x·w[h] for every head h, on numba's threads."""
    from . import blas
    _check("matmul_heads", x, w, out)
    assert out.shape == (w.shape[0], x.shape[0], w.shape[2]) and x.shape[1] == w.shape[1], "matmul_heads: shapes"
    with blas.one_thread():
        _fused().matmul_heads(x, w, out, block)


def rows_per_task(n: int, heads: int) -> int:
    """Rows per matmul task: each head in the fewest blocks that make the tasks a whole number of
    rounds of the threads (12 heads on 2 threads: whole heads; on 16: 4 blocks each, 3 rounds; one
    "head", W_O: a block a thread). Each task packs its head's whole weight matrix for BLAS, so more,
    smaller tasks only repeat that (W_O of 1024 × 2048 on 2 threads took 26 ms in 8 tasks, 20 in 2)."""
    threads = _threads()
    blocks = threads // math.gcd(heads, threads)
    return min(n, max(ROWS, -(-n // blocks)))


def matmul(x, w) -> np.ndarray:
    """x·w[h] for every head h (w: heads × d × m) into one heads × n × m array, on numba's threads."""
    from . import pool
    out = pool.empty((w.shape[0], x.shape[0], w.shape[2]), x.dtype)
    matmul_heads(x, w, out, rows_per_task(x.shape[0], w.shape[0]))
    return out


def matmul_side(x, w, heads: int) -> np.ndarray:
    """x·w for w holding `heads` matrices side by side (d × heads·m) as one heads × n × m array, on
    numba's threads: a block of rows a task (at most SIDE_ROWS), each one wide product."""
    from . import blas, pool
    _check("matmul_side", x, w)
    n, width = x.shape[0], w.shape[1]
    assert x.shape[1] == w.shape[0] and width % heads == 0, "matmul_side: shapes"
    block = max(1, min(SIDE_ROWS, -(-n // _threads())))
    out = pool.empty((heads, n, width // heads), x.dtype)
    scratch = pool.empty((_threads(), block, width), x.dtype)
    with blas.one_thread():
        _fused().matmul_side(x, w, out, scratch, block)
    return out


def online_heads(q, k, v, state, z, tiles, bad, rule, allowed, block: int, rows: int, keep: bool) -> None:
    """The online softmax of the heads in q, k, v (heads × n × d): see kernels/online.py."""
    from . import blas
    from .online import online_heads as run
    _check("online_heads", q, k, v, state, z, *tiles)
    assert q.shape[0] == k.shape[0] == v.shape[0] == z.shape[0] and k.shape[1] == v.shape[1], "online_heads: shapes"
    with blas.one_thread():
        run((q, k, v), state, z, tiles, bad, rule, _mask_matrix(rule, allowed), int(block), int(rows), bool(keep))


def attend_token(t: int, off: int, q, kbuf, vbuf, grid, sums, z, rule, per: int) -> bool:
    """One decoded token, every head, against the cache (kernels/decode.py); False when a value
    left the dtype's range. The caller holds BLAS to one thread (blas.one_thread) for the loop."""
    from .decode import attend_token as run
    return not run(t, off, q, kbuf, vbuf, grid, sums, z, rule, per)


def _mask_matrix(rule, allowed):
    return allowed if rule.mask == _fused().MASK_MATRIX else np.ones((1, 1), np.bool_)
