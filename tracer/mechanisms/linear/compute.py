"""A linear layer's numbers in a trace: the projections and their stages (the convolution, the L2
norm), the decay and β the section gives, every token's state, the outputs, the implicit weights,
and z; every head at once where the trace keeps them all, else the head asked for. heads.py chooses
the NumPy twin (a tiny layer) or the compiled kernel; nothing here forms scores."""
from __future__ import annotations

import math

import numpy as np

from ... import memory
from ...projections import group_kv, key_values, latest, project_one, projected, stacked
from .heads import all_heads, compiles
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


def gates(sc, h, dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """Head h's decay (n × 1, or n × d_k under kda) and β (n entries, None under the decay rule), or
    those of a slice of heads, stacked; a decode's prompt (the scenario cut to its first tokens) takes
    the first rows."""
    lin, n = sc.linear, sc.n
    beta = lin["beta"]
    return (np.ascontiguousarray(lin["alpha"][h, :n], dtype=dtype),
            None if beta is None else np.ascontiguousarray(beta[h, :n], dtype=dtype))


def head(run, h: int, K) -> tuple[dict, bool]:
    """Head h's steps of a linear layer by id, and whether they stayed finite. Every head at once, at
    the first one asked for, in one compiled call (numba's threads run the heads side by side), each
    head then handed its share; head h alone in a lazy trace whose heads' steps together (their
    states and implied weights apart, built when first read) would not be small."""
    refuse_run(run)
    held = run.memo.setdefault("linear", {})
    if h not in held:
        held.clear()
        sc = run.scenario
        small = sc.heads * sc.n * (sc.d_k + sc.d_v) * 8 * run.dtype.itemsize <= memory.EAGER_BYTES
        every = (sc.linear.get("norm") or {}).get("scope") == "all"   # one norm over every head's o
        heads = list(range(sc.heads)) if every or not run.lazy or (small and compiles(sc.heads, sc.n, sc.d_k, sc.d_v)) \
            else [h]
        held.update(zip(heads, _heads(run, heads, K)))
    return held.pop(h)


def _projected(run, heads: list[int], groups: list[int], K, compiled: bool) -> tuple[np.ndarray, list[dict]]:
    """q of `heads` (stacked) and each group's keys and values by kind: batched on numba's threads
    (projections.py) for a layer the kernel runs, one product at a time by the stage kernels for a
    tiny one (which need not load numba)."""
    sc, dt = run.scenario, run.dtype
    src = run.held(run.step(run.plan_ids(heads[0])["q"]).inputs[0])
    if not compiled:
        q = np.stack([project_one(K, src, sc.w_q[h], None if sc.b_q is None else sc.b_q[h], dt) for h in heads])
        return q, [key_values(run, g * (sc.heads // sc.groups), K) for g in groups]
    q = projected(sc, src, (sc.w_q,), heads, dt)[0]
    if sc.b_q is not None:
        q += sc.b_q[heads[0]:heads[-1] + 1, None, :].astype(dt)
    return q, group_kv(run, groups, run.plan_ids(heads[0]), sc.heads // sc.groups)


def _stages(sc, which: str, index: slice, raw: np.ndarray, chain: str, compiled: bool) -> tuple[dict, np.ndarray]:
    """The stages of q, k or v (stacked) of consecutive heads (groups) at once: ({kind: stacked}, the latest)."""
    got = staged(sc, which, index, raw, compiled)
    return got, got[latest(got, chain)] if got else raw


def _heads(run, heads: list[int], K) -> list[tuple[dict, bool]]:
    """Each of consecutive `heads`' steps by id, and whether they stayed finite."""
    sc, dt, n = run.scenario, run.dtype, run.scenario.n
    per = sc.heads // sc.groups
    groups = list(range(heads[0] // per, heads[-1] // per + 1))
    compiled = compiles(len(heads), n, sc.d_k, sc.d_v)
    q, kv = _projected(run, heads, groups, K, compiled)
    got_q, q_in = _stages(sc, "q", slice(heads[0], heads[-1] + 1), q, "query", compiled)
    got_q["q"] = q
    by_group = slice(groups[0], groups[-1] + 1)
    got_k, k = _stages(sc, "k", by_group, stacked([g[latest(g, "key")] for g in kv]), "key", compiled)
    got_v, v = _stages(sc, "v", by_group, stacked([g[latest(g, "value")] for g in kv]), "value", compiled)
    mine = [h // per - groups[0] for h in heads]   # each head's group, as the kernel reads it
    alpha, beta = gates(sc, slice(heads[0], heads[-1] + 1), dt)
    by_head = (lambda a: a) if mine == list(range(len(k))) else (lambda a: a[mine])   # each head's group
    parts = (np.ascontiguousarray(scaled(q_in, run.arithmetic, sc.d_k), dtype=dt),
             np.ascontiguousarray(by_head(k), dtype=dt), np.ascontiguousarray(by_head(v), dtype=dt), alpha, beta)
    # compiled (a layer of real size), the outputs now; every token's state and the implied weights,
    # far larger, when first read, head by head (tracer.Trace.rows)
    got = all_heads(*parts, sc.linear["rule"], states=not compiled, implicit=not compiled, compiled=compiled)
    z = gated_z(run, slice(heads[0], heads[-1] + 1), got.o, run.plan_ids(heads[0]), compiled)
    # what left the range reaches o and z (a state's ∞ too: o_t = S_tᵀ·q̂_t, and ∞·0 is NaN)
    finite = _finite(got.o, compiled) & _finite(z, compiled)
    out = []
    for i, h in enumerate(heads):
        g = mine[i]
        arrays = {**kv[g], **{kind: a[i] for kind, a in got_q.items()}, **{kind: a[g] for kind, a in got_k.items()},
                  **{kind: a[g] for kind, a in got_v.items()}, "decay": alpha[i], "o": got.o[i], "z": z[i]}
        if compiled:
            arrays |= {kind: _later(parts, i, sc.linear["rule"], kind) for kind in ("state", "implicit")}
        else:
            arrays |= {"state": got.states[i].reshape(n * sc.d_k, sc.d_v), "implicit": got.implicit[i]}
        if beta is not None:
            arrays["beta"] = beta[i][:, None]
        ids = run.plan_ids(h)
        out.append(({ids[kind]: a for kind, a in arrays.items() if kind in ids}, bool(finite[i])))
    return out


def _finite(a: np.ndarray, compiled: bool) -> np.ndarray:
    """Per head (a's first axis): whether it holds no ∞ nor NaN."""
    if not compiled:
        return np.isfinite(a).all(axis=tuple(range(1, a.ndim)))
    from ...kernels.linear import finite_heads
    ok = np.empty(a.shape[0], np.bool_)
    finite_heads(np.ascontiguousarray(a), ok)
    return ok


def _later(parts: tuple, i: int, rule: str, kind: str):
    """What builds head i's (of `parts`, all_heads' stacked arguments) stacked states or implied
    weights when first read: the compiled kernel again, for that head alone."""
    def build() -> np.ndarray:
        one = [None if a is None else a[i:i + 1] for a in parts]
        got = all_heads(*one, rule, states=kind == "state", implicit=kind == "implicit", compiled=True)
        return got.implicit[0] if kind == "implicit" else got.states[0].reshape(-1, got.states.shape[-1])
    return build
