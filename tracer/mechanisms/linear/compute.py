"""A linear layer's numbers for one head, once its queries, keys and values are projected: the
decay and β the section gives, every token's state, the outputs, the implicit weights, and z.
heads.py chooses the NumPy twin (a tiny layer) or the compiled kernel; nothing here forms scores."""
from __future__ import annotations

import math

import numpy as np

from ...projections import latest
from .formula import uses_beta
from .heads import all_heads
from .reader import refuse_run
from .stages import gated_z, staged


def scaled(q: np.ndarray, arithmetic, d_k: int) -> np.ndarray:
    """q̂: the queries scaled as the arithmetic's `scale` says (a softmax layer scales the scores
    instead; here o = Sᵀ·q̂ is linear in q, so the same ÷√d_k lands on q): `floor` is ⌊q ÷ round(√d_k)⌋."""
    c = arithmetic.scale_divisor(d_k)
    if c is None:
        return q
    return np.floor(q / c) if arithmetic.scale == "floor" else q / q.dtype.type(c)


def scale_words(arithmetic, d_k: int) -> str:
    """How q̂ was made from q, for the explanations: `q̂ = ⌊q ÷ 1⌋ (by hand, d_k = 2)`."""
    c = arithmetic.scale_divisor(d_k)
    if c is None:
        return "q̂ = q (scale none)"
    if arithmetic.scale == "floor":
        return f"q̂ = ⌊q ÷ {c:g}⌋ (by hand, d_k = {d_k})"
    if arithmetic.scale == "sqrt":
        return f"q̂ = q ÷ √{d_k}" + ("" if math.isqrt(d_k) ** 2 != d_k else f" = q ÷ {math.isqrt(d_k)}")
    return f"q̂ = q ÷ {c:g}"


def gates(sc, h: int, dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """Head h's decay (n × 1, or n × d_k under kda) and β (n entries, None under the decay rule); a
    decode's prompt (the scenario cut to its first tokens) takes the first rows."""
    lin, n = sc.linear, sc.n
    beta = lin["beta"]
    return (np.ascontiguousarray(lin["alpha"][h][:n], dtype=dtype),
            None if beta is None else np.ascontiguousarray(beta[h][:n], dtype=dtype))


def head(run, h: int, q: np.ndarray, kv: dict, ids: dict) -> tuple[dict, bool]:
    """Head h's steps of a linear layer by id, and whether they stayed finite."""
    refuse_run(run)
    sc, dt = run.scenario, run.dtype
    g = h // (sc.heads // sc.groups)
    kv = {**kv, **staged(sc, "k", g, kv["k"]), **staged(sc, "v", g, kv["v"])}   # the convolution, the L2 norm
    got_q = {"q": q, **staged(sc, "q", h, q)}
    q, k, v = got_q[latest(got_q, "query")], kv[latest(kv, "key")], kv[latest(kv, "value")]
    alpha, beta = gates(sc, h, dt)
    rule = sc.linear["rule"]
    q_hat = np.ascontiguousarray(scaled(q, run.arithmetic, sc.d_k), dtype=dt)
    got = all_heads(q_hat[None], np.ascontiguousarray(k, dtype=dt)[None], np.ascontiguousarray(v, dtype=dt)[None],
                    alpha[None], None if beta is None else beta[None], rule)
    n, d_k, d_v = sc.n, sc.d_k, sc.d_v
    arrays = {**got_q, **kv, "decay": alpha, "state": got.states[0].reshape(n * d_k, d_v), "o": got.o[0],
              "implicit": got.implicit[0], "z": gated_z(run, h, got.o[0], ids)}
    if uses_beta(rule):
        arrays["beta"] = beta[:, None]
    out = {ids[kind]: a for kind, a in arrays.items() if kind in ids}
    return out, all(np.isfinite(a).all() for a in out.values())
