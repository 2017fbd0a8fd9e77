"""What a checkpoint's linear layer puts around the recurrence, as stages of the queries, keys and
values and as its head output: SiLU of the projection (`h{h}.q_act`, `h{h}.k_act`, `h{h}.v_act`,
where `[linear] act = "silu"`: MiniMax's lightning layers), the short causal convolution with its
SiLU (`h{h}.q_conv`, `h{h}.k_conv`, `h{h}.v_conv`, where `[linear] conv` gives kernels), the L2 norm
of q and k (`h{h}.q_unit`, `h{h}.k_unit`, where `l2 = true`: each row ÷ √(Σx² + 1e-6), its length,
not the root mean square of mechanisms/l2_norm), and z as the gated RMS norm RMSNorm(o)·act(x·W_Z)·g
(where `[linear] norm` gives W_Z, the gain, eps and the activation; scope "all": the RMS of every
head's o at the token together, MiniMax's). The formulas are gates.py's and formula.py's."""
from __future__ import annotations

import numpy as np

from ...kernels import matmul
from ...steps.base import Kind, register
from ...steps.cell import whole_row
from .formula import L2_EPS, l2norm
from .gates import causal_conv, gated_rms_norm, sigmoid, silu

_CHAIN = {"q": "query", "k": "key", "v": "value"}


def conv_of(sc, which: str, index: int) -> np.ndarray | None:
    """Head (group) `index`'s kernels of q, k or v: d × K (a slice of heads: stacked), or None without one."""
    conv = sc.linear.get("conv")
    return None if conv is None else conv[which][index]


def staged(sc, which: str, index: int, a: np.ndarray, compiled: bool = False) -> dict:
    """q, k or v of one head (group) through its stages: {kind: array}; `index` a slice and `a` stacked
    (heads × n × d): those heads' at once, by the compiled kernels where `compiled`."""
    got, dt = {}, a.dtype
    if sc.linear.get("act") == "silu":
        a = got[f"{which}_act"] = silu(a)
    w = conv_of(sc, which, index)
    if w is not None:
        if compiled:   # the kernel's taps side by side: heads × K × channels
            taps = np.ascontiguousarray(w.transpose(0, 2, 1), dtype=np.float64)
            a = got[f"{which}_conv"] = _fused("conv", a, taps, _act("silu"))
        else:
            a = got[f"{which}_conv"] = causal_conv(a.astype(np.float64), w).astype(dt)
    if which != "v" and sc.linear["l2"]:
        got[f"{which}_unit"] = _fused("norm_rows", a, np.ones(a.shape[-1]), L2_EPS, False, a, _act(None)) if compiled else \
            l2norm(a.astype(np.float64)).astype(dt)
    return got


def gated_z(run, h: int, o: np.ndarray, ids: dict, compiled: bool = False) -> np.ndarray:
    """z = RMSNorm(o)·g·act(source·W_Z) under a checkpoint's gated norm, else o; `h` a slice of heads
    and `o` stacked (heads × n × d_v): those heads' at once. In the run's dtype, as the projections."""
    norm = run.scenario.linear.get("norm")
    if norm is None:
        return o.copy()
    dt = o.dtype
    source = run.held(run.step(ids["q"]).inputs[0])
    if norm["scope"] == "all":   # o holds every head: one RMS over them all a token, each head its share of the gain
        gate = np.matmul(source, norm["w_z"][h].astype(dt))
        act = silu(gate) if norm["act"] == "silu" else sigmoid(gate)
        rms = np.sqrt((o.astype(np.float64) ** 2).mean(axis=(0, 2)) + norm["eps"])[None, :, None]
        return (o / rms * norm["gain"][h][:, None, :] * act).astype(dt, copy=False)
    if compiled:
        gate = matmul(source, run.scenario.cast(norm["w_z"], dt) if h == slice(0, len(norm["w_z"])) else
                      np.ascontiguousarray(norm["w_z"][h], dtype=dt))
        gain = np.ascontiguousarray(norm["gain"], dtype=np.float64)
        return _fused("norm_rows", o, gain, float(norm["eps"]), True, gate, _act(norm["act"]))
    gate = np.matmul(source, norm["w_z"][h].astype(dt))
    return gated_rms_norm(o, gate, norm["gain"].astype(dt), dt.type(norm["eps"]), norm["act"]).astype(dt, copy=False)


def _act(name: str | None) -> int:
    """The compiled kernels' code for an activation (None, "silu" or "sigmoid")."""
    from ...kernels import linear
    return linear.ACTS[name]


def _fused(name: str, a: np.ndarray, *args) -> np.ndarray:
    """kernels/linear.py's `name` over stacked heads a (heads × n × d), into a new array of a's dtype."""
    from ...kernels import linear
    out = np.empty_like(a)
    getattr(linear, name)(np.ascontiguousarray(a), *args, out)
    return out


# ------------------------------------------------------------------ the stages' steps

def _conv_explain(cell) -> str:
    which = cell.step.kind[0]
    index = cell.step.group if cell.step.group is not None else cell.step.head
    w = conv_of(cell.scenario, which, index)[cell.j]
    K, t, f = len(w), cell.at, cell.f
    col = cell.rows(cell.step.inputs[0])[:, cell.j].astype(np.float64)
    xs = [col[s] if s >= 0 else 0.0 for s in range(t - K + 1, t + 1)]
    u = float(np.dot(w, xs))
    terms = " + ".join(f"{f(a)}×{f(b)}" for a, b in zip(w, xs))
    return (f"= SiLU({terms}) = SiLU({f(u)}) = {f(cell.value)}   (the short convolution over {cell.token(t)} and the "
            f"{K - 1} tokens before it, channel {cell.j}; before the first token it reads 0)").replace("-", "−")


def _width(cell) -> int:
    index = cell.step.group if cell.step.group is not None else cell.step.head
    return conv_of(cell.scenario, cell.step.kind[0], index).shape[1]


def _l2_explain(cell) -> str:
    row = cell.rows(cell.step.inputs[0])[cell.i].astype(np.float64)
    total = float(row @ row)
    return (f"= {cell.f(row[cell.j])} ÷ √({cell.f(total)} + {L2_EPS:g}) = {cell.f(cell.value)}   (the row's length: "
            "√ of the sum of squares, not their mean)").replace("-", "−")


def _stage(which: str, kind: str, title: str, why: str, formula: str, explain, sources, present, after: str) -> None:
    scope = "head" if which == "q" else "kv"
    axes = ("token", "d_v" if which == "v" else "d_k")
    register(Kind(kind, title, axes, scope, why, formula=lambda ctx: formula, explain=explain, sources=sources,
                  inputs=lambda ctx, h: [ctx.latest(h, _CHAIN[which], kind)], present=present, chain=_CHAIN[which],
                  tip="see the formula"), after=after)


def _has(part: int):
    return lambda ctx: bool((ctx.dims.of("linear") or (None, False, 0, None, False))[part])


def _act_explain(cell) -> str:
    u = float(cell.rows(cell.step.inputs[0])[cell.i, cell.j])
    return f"= SiLU({cell.f(u)}) = {cell.f(u)} × σ({cell.f(u)}) = {cell.f(cell.value)}".replace("-", "−")


_ACT_WHY = ("MiniMax's lightning layer passes q, k and v through SiLU as projected, before the state: SiLU keeps a "
            "positive feature nearly as it is and squashes a negative one to at most 0.28 below zero.")
for _which in "qkv":
    _stage(_which, f"{_which}_act", {"q": "Queries", "k": "Keys", "v": "Values"}[_which] + ", SiLU", _ACT_WHY,
           f"SiLU({_which.upper()}) = {_which.upper()}·σ({_which.upper()}), per feature", _act_explain,
           lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]}, _has(4), after=_which)

_CONV_WHY = ("Before the recurrence a checkpoint's linear layer mixes each channel with the same channel of the few "
             "tokens before it (a short causal convolution, then SiLU): the only place it sees its neighbours "
             "directly, since it has no positions.")
_L2_WHY = ("q and k are divided by their length, so that every key writes into the state with the same strength "
           "and β alone says how much; a delta-rule write with |k| = 1 and β = 1 replaces what k read exactly.")
for _which in "qkv":
    _stage(_which, f"{_which}_conv", {"q": "Queries", "k": "Keys", "v": "Values"}[_which] + ", convolved", _CONV_WHY,
           f"SiLU(Σ_j w_j ⊙ {_which.upper()}_(t−K+1+j)), per channel", _conv_explain,
           lambda cell: {cell.step.inputs[0]: [(s, cell.j) for s in range(max(0, cell.i + 1 - _width(cell)), cell.i + 1)]},
           _has(2), after=f"{_which}_act")
for _which in "qk":
    _stage(_which, f"{_which}_unit", ("Queries" if _which == "q" else "Keys") + ", L2-normed", _L2_WHY,
           f"{_which} ÷ √(Σ{_which}² + 1e-6), per token", _l2_explain,
           lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
           _has(1), after=f"{_which}_conv")


def z_explain(cell) -> str:
    """The z step's story: o as it is, or its gated norm with the numbers."""
    norm, o_id = cell.scenario.linear.get("norm"), cell.step.inputs[0]
    o = cell.rows(o_id)[cell.i].astype(np.float64)
    if norm is None:
        return f"= o[{cell.token(cell.at)}, {cell.j}] = {cell.f(cell.value)}"
    src = cell.rows(cell.trace.step(cell.sid("q")).inputs[0])[cell.at].astype(np.float64)
    u = float(src @ norm["w_z"][cell.step.head][:, cell.j])
    act = (silu if norm["act"] == "silu" else sigmoid)(np.array(u))
    rms = float(np.sqrt((o * o).mean() + norm["eps"]))
    name = "SiLU" if norm["act"] == "silu" else "σ"
    if norm["scope"] == "all":
        return _z_all_explain(cell, o[cell.j], u, float(act), name)
    return (f"= o ÷ RMS(o)·g·{name}(x·W_Z) = {cell.f(o[cell.j])} ÷ {cell.f(rms)} × {cell.f(norm['gain'][cell.j])} × "
            f"{name}({cell.f(u)}) = {cell.f(o[cell.j])} ÷ {cell.f(rms)} × {cell.f(norm['gain'][cell.j])} × "
            f"{cell.f(float(act))} = {cell.f(cell.value)}   (the gated norm: RMS over the head's {len(o)} outputs, "
            "the gate from the token's own x)").replace("-", "−")


def _z_all_explain(cell, o: float, u: float, act: float, name: str) -> str:
    """The z step's story under MiniMax's norm over every head's outputs at the token."""
    from ...ids import step_id
    norm, heads = cell.scenario.linear["norm"], cell.scenario.heads
    every = np.concatenate([cell.rows(step_id("o", g))[cell.i].astype(np.float64) for g in range(heads)])
    rms = float(np.sqrt((every * every).mean() + norm["eps"]))
    g = norm["gain"][cell.step.head][cell.j]
    f = cell.f
    return (f"= o ÷ RMS(every head's o)·g·{name}(x·W_Z) = {f(o)} ÷ {f(rms)} × {f(g)} × {name}({f(u)}) = "
            f"{f(o)} ÷ {f(rms)} × {f(g)} × {f(act)} = {f(cell.value)}   (one norm over the {len(every)} outputs "
            f"of all {heads} heads at {cell.token(cell.at)}, the gate from the token's own x)").replace("-", "−")
