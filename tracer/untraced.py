"""The layer's output without recording anything: `tracer.attention(scenario)`, for speed
(benchmarks, or checking a trace's result against it). Same arithmetic, same answer as the trace.
"""
from __future__ import annotations

import numpy as np

from . import _pool, compute
from .trace import run


def attention(scenario, arithmetic: str | None = None, *, engine: str = "auto", **overrides) -> np.ndarray:
    """The last step of the trace (norm, residual, out, concat or h0.z, whichever comes last),
    in the scenario's layout, computed without keeping any intermediate. Large scenarios use the
    fused kernel, which under a causal mask never computes the masked triangle."""
    trace = run(scenario, arithmetic, lazy=True, engine=engine, **overrides)  # plans; computes nothing
    last = trace.steps[-1].id
    if trace.engine == "stages":
        return np.array(trace[last])
    import numba
    from . import _blas, fused as F
    from . import jit as K
    sc, ar, dt = trace.scenario, trace.arithmetic, trace.dtype
    x = trace._x
    q, k, v, _ = compute.projections(trace, list(range(sc.heads)))
    rule = compute.rule_for(ar, compute.mask_kind(trace))
    c = ar.scale_divisor(sc.d_k)
    allowed = trace.allowed if rule[1] == F.MASK_MATRIX else np.ones((1, 1), np.bool_)
    y = _pool.empty((sc.n, sc.heads * sc.d_v), dt)   # every head's z, side by side
    with _blas.one_thread():
        F.attend_heads(q, k, v, y, rule, 1.0 if c is None else c, ar.base, allowed, compute.BLOCK,
                       numba.config.NUMBA_NUM_THREADS)
    del q, k, v
    if sc.w_o is not None:
        y = compute.matmul(y, np.ascontiguousarray(sc.w_o, dtype=dt)[None])[0]
    if sc.residual:
        y = K.add(x, y)
        if sc.residual["norm"] == "layer":
            y = K.layer_norm(y, sc.residual["eps"])
    if not np.isfinite(y).all():
        trace.compute_all()  # names the step whose values left the dtype's range
    return y.T if trace.columns else y
