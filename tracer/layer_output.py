"""The layer's output without recording anything: `tracer.attention(scenario)`, for speed
(benchmarks, or checking a trace's result against it). Same arithmetic, same answer as the trace.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import compute, kernels
from .kernels import pool
from .masks import kernel_mask, mask_matrix
from .scenario import Scenario, load_scenario
from .trace import run


def attention(scenario, arithmetic: str | None = None, *, engine: str = "auto", **overrides) -> np.ndarray:
    """The last step of the trace (norm, residual, out, concat or h0.z, whichever comes last),
    in the scenario's layout, computed without keeping any intermediate. Large scenarios use the
    fused kernel, which under a causal mask never computes the masked triangle. A [decode]
    scenario gives every token's output, as decoding them one by one does (the causal layer's)."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    if scenario.decode is not None:
        scenario = replace(scenario, decode=None, mask="causal")
    trace = run(scenario, arithmetic, lazy=True, engine=engine, **overrides)  # plans; computes nothing
    last = trace.steps[-1].id
    if trace.engine in ("stages", "numpy"):
        return np.array(trace[last])
    K = kernels.stage_kernels(compiled=True)
    sc, ar, dt = trace.scenario, trace.arithmetic, trace.dtype
    q, k, v, _ = compute.projections(trace, list(range(sc.heads)))
    rule = kernels.rule(ar, kernel_mask(trace), sc.d_k)
    y = pool.empty((sc.n, sc.heads * sc.d_v), dt)   # every head's z, side by side
    kernels.attend_heads(q, k, v, y, rule, mask_matrix(trace), compute.BLOCK)
    del q, k, v
    with np.errstate(all="ignore"):
        after = compute.after_heads(trace, y, K)
    y = after[trace.steps[-1].id] if after else y
    if not np.isfinite(y).all():
        trace.compute_all()  # names the step whose values left the dtype's range
    return y.T if trace.columns else y
