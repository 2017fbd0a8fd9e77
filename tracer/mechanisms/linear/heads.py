"""Every head of a linear layer at once: the states, outputs and implicit weights, from the NumPy
twin (formula.py) for a tiny layer while numba is not loaded yet (microseconds, where loading numba
takes ≈0.4 s), else from the compiled kernel (tracer/kernels/linear.py). Same arithmetic, same arrays."""
from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np

from .formula import implicit as implicit_weights
from .formula import recur, uses_beta

TINY_CELLS = 1 << 12   # heads · n · (n + d_k·d_v) up to which the twin runs (as compute.TINY_CELLS)


class Heads(NamedTuple):
    states: np.ndarray | None     # heads × n × d_k × d_v
    o: np.ndarray                 # heads × n × d_v
    implicit: np.ndarray | None   # heads × n × n (query × key)


def all_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray, alpha: np.ndarray, beta: np.ndarray | None,
              rule: str, *, states: bool = True, implicit: bool = True, compiled: bool | None = None) -> Heads:
    """q, k: key_heads × n × d_k (q already scaled); v: heads × n × d_v, value head h reading key head
    h·key_heads // heads; alpha: heads × n × 1 or heads × n × d_k; beta: heads × n (None: decay rule).
    One float dtype throughout. `compiled` None chooses as described above."""
    delta = uses_beta(rule)
    heads, n, d_v = v.shape
    g, _, d_k = k.shape
    _check(q, k, v, alpha, beta, delta)
    if compiled is None:
        compiled = compiles(heads, n, d_k, d_v)
    if not compiled:
        return _twin(q, k, v, alpha, beta, rule, states, implicit)
    from ...kernels import blas, pool
    from ...kernels.linear import linear_heads
    dt = v.dtype
    kept = np.empty((heads, n if states else 0, d_k, d_v), dt)   # every cell written
    A = np.zeros((heads, n if implicit else 0, n), dt)
    o = pool.empty((heads, n, d_v), dt)   # every cell written
    b = beta if delta else np.zeros((heads, n), dt)
    with blas.one_thread():   # the kernel's threads each call BLAS (the implicit weights' blocks)
        linear_heads(*map(_read_only, (q, k, v, alpha, np.ascontiguousarray(b))), delta, kept, o, A)
    return Heads(kept if states else None, o, A if implicit else None)


def _read_only(a: np.ndarray) -> np.ndarray:
    """a, as a read-only view: numba compiles a kernel anew (≈9 s) for each mix of read-only and
    writable arguments (a scenario's gates are read-only, a computed beta is not): all read-only,
    it is compiled once per dtype."""
    view = a.view()
    view.flags.writeable = False
    return view


def compiles(heads: int, n: int, d_k: int, d_v: int) -> bool:
    """Whether all_heads() runs the compiled kernel for a layer of these sizes (see above)."""
    return "numba" in sys.modules or heads * n * (n + d_k * d_v) > TINY_CELLS


def _twin(q, k, v, alpha, beta, rule, states: bool, implicit: bool) -> Heads:
    heads, g = v.shape[0], k.shape[0]
    out = [recur(q[h * g // heads], k[h * g // heads], v[h], alpha[h], None if beta is None else beta[h], rule)
           for h in range(heads)]
    A = [implicit_weights(q[h * g // heads], k[h * g // heads], alpha[h], None if beta is None else beta[h], rule)
         for h in range(heads)] if implicit else None
    return Heads(np.stack([s for s, _ in out]) if states else None, np.stack([o for _, o in out]),
                 None if A is None else np.stack(A))


def _check(q, k, v, alpha, beta, delta: bool) -> None:
    """Shapes and one float dtype, before a compiled kernel sees them (there a mismatch is a crash
    or a silent recompile, not an error)."""
    heads, n, _ = v.shape
    g, _, d_k = k.shape
    want = {"q": (g, n, d_k), "k": (g, n, d_k), "alpha": (heads, n, alpha.shape[-1])}
    if delta:
        want["beta"] = (heads, n)
    arrays = dict(q=q, k=k, v=v, alpha=alpha, beta=beta)
    for name, shape in want.items():
        if arrays[name].shape != shape:
            raise ValueError(f"linear heads: {name} has shape {arrays[name].shape}; expected {shape}")
    if heads % g or alpha.shape[-1] not in (1, d_k):
        raise ValueError(f"linear heads: expected value heads a multiple of key heads and α of width 1 or "
                         f"d_k, got {heads} over {g} and width {alpha.shape[-1]}")
    for name, a in arrays.items():
        if a is not None and (a.dtype != v.dtype or a.dtype.kind != "f" or not a.flags.c_contiguous):
            raise ValueError(f"linear heads: {name} must be C-contiguous {v.dtype} like v, got {a.dtype}")
