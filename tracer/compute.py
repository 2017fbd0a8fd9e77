"""How a trace's numbers are computed: stage by stage with the readable kernels (small scenarios),
or fused, every head and block of queries at once (large ones). Both record the same steps.

Nothing here imports numba until a kernel is needed, so `import tracer` stays quick.
"""
from __future__ import annotations

import sys

import numpy as np

from . import _pool

FUSED_CELLS = 1 << 20   # heads · n² from which the fused kernels pay for their compile time
TINY_CELLS = 1 << 12    # heads · n² up to which the stage kernels may run uncompiled (see stages)
_jit: list = []         # the compiled kernels' module, once loaded
BLOCK = 128             # queries per fused task (larger blocks: better use of each matrix product)


def engine_for(scenario, engine: str = "auto") -> str:
    """`stages` (one kernel per step, the reference) or `fused`."""
    if engine in ("stages", "fused"):
        return engine
    return "fused" if scenario.heads * scenario.n ** 2 >= FUSED_CELLS else "stages"


def rule_for(arithmetic, mask_kind: str) -> tuple:
    """The arithmetic as the fused kernels' small integer codes (see fused.py)."""
    from . import fused as F
    scale = {"none": F.SCALE_NONE, "floor": F.SCALE_FLOOR}.get(arithmetic.scale, F.SCALE_DIVIDE)
    mask = {"none": F.MASK_NONE, "causal": F.MASK_CAUSAL}.get(mask_kind, F.MASK_MATRIX)
    norm = F.NORM_SOFTMAX if arithmetic.normalize == "softmax" else F.NORM_RELU
    power = F.POWER_E if arithmetic.softmax_base == "e" else F.POWER_BASE
    return (scale, mask, norm, power, int(arithmetic.stable))


def mask_kind(trace) -> str:
    m = trace.mask
    return m if isinstance(m, str) else "matrix"


def _heads(w, heads: list[int], dtype) -> np.ndarray:
    """The selected heads' weight matrices as one C-contiguous array (a view when possible)."""
    sel = w if len(heads) == w.shape[0] else w[heads[0]:heads[-1] + 1]
    return np.ascontiguousarray(sel, dtype=dtype)


def rows_per_task(n: int, heads: int) -> int:
    """Rows per matmul task: whole heads when there are enough of them, else a few blocks each."""
    import numba
    want = -(-n * heads // (4 * numba.config.NUMBA_NUM_THREADS))   # about 4 tasks per thread
    return min(n, max(BLOCK, -(-want // BLOCK) * BLOCK))


def matmul(x, w) -> np.ndarray:
    """x·w[h] for every head h (w: heads × d × m) into one heads × n × m array, on numba's threads."""
    from . import _blas, fused as F
    out = _pool.empty((w.shape[0], x.shape[0], w.shape[2]), x.dtype)
    with _blas.one_thread():
        F.matmul_heads(x, w, out, rows_per_task(x.shape[0], w.shape[0]))
    return out


def projections(trace, heads: list[int]):
    """q, k, v (each heads × n × d), and v↓ or None, for consecutive heads `heads`."""
    sc, dt, x, n = trace.scenario, trace.dtype, trace._x, trace.scenario.n
    q, k = matmul(x, _heads(sc.w_q, heads, dt)), matmul(x, _heads(sc.w_k, heads, dt))
    if sc.w_v_down is None:
        return q, k, matmul(x, _heads(sc.w_v, heads, dt)), None
    v_down = matmul(x, _heads(sc.w_v_down, heads, dt))
    v = np.matmul(v_down, _heads(sc.w_v_up, heads, dt), out=_pool.empty((len(heads), n, sc.d_v), dt))
    return q, k, v, v_down


def fused_heads(trace, heads: list[int]) -> None:
    """Computes and records every step of consecutive heads `heads` in one parallel call."""
    import numba
    from . import _blas, fused as F
    sc, ar, dt, n = trace.scenario, trace.arithmetic, trace.dtype, trace.scenario.n
    q, k, v, v_down = projections(trace, heads)
    rule = rule_for(ar, mask_kind(trace))
    c = ar.scale_divisor(sc.d_k)
    kinds = ["scores"] + (["scaled"] if c is not None else []) + (["masked"] if rule[1] else [])
    kinds += ["exp", "weights"] if rule[2] == F.NORM_SOFTMAX else ["weights"]
    grid = _pool.empty((len(kinds), len(heads), n, n), dt)
    slot = {kind: i for i, kind in enumerate(kinds)}
    slot.setdefault("scaled", slot["scores"])   # scale `none`: the scaled step is the scores
    slots = tuple(slot.get(kind, -1) for kind in ("scores", "scaled", "masked", "exp", "weights"))
    sums = np.zeros((len(heads), n, 1), dt)
    z = _pool.empty((len(heads), n, sc.d_v), dt)
    bad = np.zeros(len(heads), np.int8)
    allowed = trace.allowed if rule[1] == F.MASK_MATRIX else np.ones((1, 1), np.bool_)
    with _blas.one_thread():
        F.trace_heads(q, k, v, grid, slots, sums, z, bad, rule, 1.0 if c is None else c, ar.base,
                      allowed, BLOCK, numba.config.NUMBA_NUM_THREADS)
    for i, h in enumerate(heads):
        p = f"h{h}."
        trace._record(p + "q", q[i])
        trace._record(p + "k", k[i])
        if v_down is not None:
            trace._record(p + "v_down", v_down[i])
        trace._record(p + "v", v[i])
        for kind in kinds:
            trace._record(p + kind, grid[slot[kind], i])
        if c is None:
            trace._record(p + "scaled", grid[slot["scores"], i])
        if "exp" in slot:
            trace._record(p + "sums", sums[i])
        trace._record(p + "z", z[i])
        if bad[i] or not (np.isfinite(z[i]).all() and np.isfinite(sums[i]).all()):
            trace._overflow([s for s in trace.steps if s.head == h])
        if "exp" in slot:
            _underflow(trace, h, sums[i])


def _underflow(trace, h: int, sums: np.ndarray) -> None:
    """Raw powers that are all 0 for a query that may attend something would pass for a masked
    query (zero weights) when they are really 0 ÷ 0: an error naming the step instead."""
    if trace.arithmetic.stable or sums.all():
        return
    may = np.ones(len(sums), bool) if trace.allowed is None else trace.allowed.any(axis=1)
    lost = np.flatnonzero((sums[:, 0] == 0) & may)
    if lost.size:
        from .errors import ScenarioError
        raise ScenarioError(f"h{h}.exp", f"every raw power of query {trace.scenario.tokens[lost[0]]} underflows to 0 "
                            f"in {trace.dtype.name}, so its weights would be 0 ÷ 0; expected stable=true "
                            "(subtract each query's max first) or larger scores", trace.scenario.source)


def stages(trace):
    """The per-stage kernels: compiled (jit.py), except for a tiny scenario while numba is not
    loaded yet, which runs them as plain Python: its few dozen numbers take ≈30 µs either way,
    while loading numba and its cached machine code takes ≈0.4 s (a one-shot `attnsim show`
    would spend most of its life on it). Same code, same order of operations, same steps."""
    if _jit:
        return _jit[0]
    sc = trace.scenario
    if trace.may_interpret and "numba" not in sys.modules and sc.heads * sc.n ** 2 <= TINY_CELLS:
        from . import kernels
        return kernels
    from . import jit
    _jit.append(jit)
    return jit


def stage_head(trace, h: int) -> None:
    """Computes and records head h's steps one kernel per step (the readable reference path)."""
    K = stages(trace)
    if K is not _jit_or_none():
        with np.errstate(all="ignore"):  # inf and NaN are reported as errors, not as warnings
            return _stage_head(trace, h, K)
    return _stage_head(trace, h, K)


def _jit_or_none():
    return _jit[0] if _jit else None


def _stage_head(trace, h: int, K) -> None:
    sc, a, dt, rec = trace.scenario, trace.arithmetic, trace.dtype, trace._record
    p = f"h{h}."
    x = trace._x
    q = rec(p + "q", K.project(x, np.ascontiguousarray(sc.w_q[h], dtype=dt)))
    k = rec(p + "k", K.project(x, np.ascontiguousarray(sc.w_k[h], dtype=dt)))
    if sc.w_v_down is not None:
        v_down = rec(p + "v_down", K.project(x, np.ascontiguousarray(sc.w_v_down[h], dtype=dt)))
        v = K.project(v_down, np.ascontiguousarray(sc.w_v_up[h], dtype=dt))
    else:
        v = K.project(x, np.ascontiguousarray(sc.w_v[h], dtype=dt))
    rec(p + "v", v)
    s = rec(p + "scores", K.scores(q, k))
    c = a.scale_divisor(q.shape[1])
    if c is None:
        scaled = s  # same values: recorded under its id without a copy
    else:
        scaled = (K.floor_divide if a.scale == "floor" else K.divide)(s, c)
    m = rec(p + "scaled", scaled)
    if trace.allowed is not None:
        m = rec(p + "masked", K.mask(m, trace.allowed))
    sums = None
    if a.normalize == "softmax":
        shift = K.row_max(m) if a.stable else np.zeros((m.shape[0], 1), dtype=dt)
        e = rec(p + "exp", K.exp_powers(m, shift) if a.softmax_base == "e" else K.base_powers(m, shift, a.base))
        sums = rec(p + "sums", K.row_sums(e))
        weights = rec(p + "weights", K.softmax_weights(e, sums))
    else:
        weights = rec(p + "weights", K.relu_weights(m))
    z = rec(p + "z", K.weighted_sum(weights, v))
    # any inf or NaN shows in one of these: scores and scaled in scaled (a −∞ score would
    # otherwise become a quiet 0 weight), overflowing powers in sums, the rest in z
    if not (K.finite(scaled) and K.finite(z) and (sums is None or K.finite(sums))):
        trace._overflow([step for step in trace.steps if step.head == h])
    if sums is not None:
        _underflow(trace, h, sums)


def tail(trace, zs: list[np.ndarray]) -> None:
    """concat, out, residual and norm from the heads' outputs (rows orientation)."""
    if trace.engine == "stages":
        K = stages(trace)
    else:
        from . import jit as K
    with np.errstate(all="ignore"):
        _tail(trace, zs, K)


def _tail(trace, zs: list[np.ndarray], K) -> None:
    sc, dt = trace.scenario, trace.dtype
    y = zs[0]
    if sc.heads > 1:
        if trace.engine == "fused":
            y = np.concatenate(zs, axis=1, out=_pool.empty((sc.n, sc.heads * sc.d_v), dt))
        else:
            y = K.concat(np.stack(zs))
        trace._record("concat", y)
    if sc.w_o is not None:
        w_o = np.ascontiguousarray(sc.w_o, dtype=dt)
        y = matmul(y, w_o[None])[0] if trace.engine == "fused" else K.project(y, w_o)
        trace._record("out", y)
    if sc.residual:
        y = trace._record("residual", K.add(trace._x, y))
        if sc.residual["norm"] == "layer":
            y = trace._record("norm", K.layer_norm(y, sc.residual["eps"]))
    if not np.isfinite(y).all():
        trace._overflow([s for s in trace.steps if s.head is None and s.id != "x"])
