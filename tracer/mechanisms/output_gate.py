"""The output gate of the softmax layers of Qwen3-Next and Qwen3.5 (CONTRACT §16): each token computes
from its own x a gate σ(x·W_G + b_G) between 0 and 1 for each feature of every head's output, and
concat joins z ⊙ gate. A head can so switch itself off for a token instead of parking its weight on
some other token.

A scenario file writes `[weights] gate` (W_G: one d_model × d_v matrix, or one per head) and
optionally `bgate` (b_G, one vector or one per head). Its steps are `h{h}.gate` and `h{h}.gated`
after `h{h}.z`; under a numeric softmax_base b the sigmoid is the softmax of (u, 0) in that base,
b^u/(b^u + 1) (by hand, σ₃(1) = 3/4)."""
from __future__ import annotations

import numpy as np

from ..checks import per_head, vectors
from ..errors import ScenarioError
from ..steps.base import Kind, register
from ..steps.cell import whole_row
from .declaration import Mechanism
from .linear.gates import sigmoid


def read(scenario, data: dict) -> dict:
    """W_G per head (rows orientation: heads × d_model × d_v) and b_G (heads × d_v or None)."""
    weights = data["weights"]
    if weights.get("gate") is None:
        if weights.get("bgate") is not None:
            raise ScenarioError("weights.bgate", "expected a gate (weights.gate) for its bias")
        return {"w_gate": None, "b_gate": None}
    heads, d_model, d_v = scenario.heads, scenario.d_model, scenario.d_v
    mats = per_head(weights["gate"], "weights.gate")
    if len(mats) not in (1, heads):
        raise ScenarioError("weights.gate", f"expected one matrix or {heads} (one per head), got {len(mats)}")
    want = (d_model, d_v) if scenario.layout == "rows" else (d_v, d_model)
    for h, m in enumerate(mats):
        if m.shape != want:
            raise ScenarioError("weights.gate", f"expected {want[0]} × {want[1]} (" + ("d_model × d_v" if
                                scenario.layout == "rows" else "d_v × d_model") + f"), got {m.shape[0]} × {m.shape[1]}")
    stacked = np.stack([m if scenario.layout == "rows" else m.T for m in mats]).astype(np.float64)
    bias = weights.get("bgate")
    return {"w_gate": np.ascontiguousarray(np.broadcast_to(stacked, (heads, d_model, d_v))),
            "b_gate": None if bias is None else vectors(bias, "weights.bgate", heads, d_v, "d_v")}


def logits(sc, h: int, source: np.ndarray) -> np.ndarray:
    """x·W_G + b_G for head h, in float64 (source: x, or the normed x a checkpoint's layer reads)."""
    u = source.astype(np.float64) @ sc.w_gate[h]
    return u if sc.b_gate is None else u + sc.b_gate[h]


def base(arithmetic) -> float | None:
    """The sigmoid's base: None for e, else the softmax's numeric base (by hand: 3)."""
    return None if arithmetic.softmax_base == "e" else arithmetic.base


def head(run, h: int, ids: dict, z: np.ndarray) -> dict:
    """Head h's gate and gated output by id."""
    sc = run.scenario
    source = run.held(run.step(ids["gate"]).inputs[0])
    gate = sigmoid(logits(sc, h, source), base(run.arithmetic)).astype(run.dtype)
    return {ids["gate"]: gate, ids["gated"]: (z * gate).astype(run.dtype)}


# ------------------------------------------------------------------ the steps

def _gate_explain(cell) -> str:
    sc, h, f = cell.scenario, cell.step.head, cell.f
    src = cell.rows(cell.step.inputs[0])[cell.at].astype(np.float64)
    u = float(logits(sc, h, src[None])[0, cell.j])
    b = base(cell.arithmetic)
    sig = "σ" if b is None else f"σ_{b:g}"
    how = "1/(1 + e^−u)" if b is None else f"{b:g}^u/({b:g}^u + 1), the softmax of (u, 0) in base {b:g}"
    return (f"= {sig}(x·W_G[:, {cell.j}]{' + b_G' if sc.b_gate is not None else ''}) = {sig}({f(u)}) = "
            f"{cell.fa(cell.value)}   ({cell.token(cell.at)}'s own gate for feature {cell.j}; {how})").replace("-", "−")


def _gated_explain(cell) -> str:
    z, g = (cell.rows(s)[cell.i, cell.j] for s in cell.step.inputs)
    return f"= z ⊙ gate = {cell.f(z)} × {cell.f(g)} = {cell.fa(cell.value)}".replace("-", "−")


def _on(ctx) -> bool:
    return ctx.dims.of("output_gate") is not None


register(Kind(
    "gate", "Output gate", ("token", "d_v"), "head",
    "Qwen3-Next and Qwen3.5 multiply every head's output by a gate the token computes from its own x: "
    "σ(x·W_G), between 0 and 1 for each feature. A head can so switch itself off for a token instead of "
    "parking its weight on some other token, as heads without a gate learn to do with the first one.",
    formula=lambda ctx: "G = σ(X·W_G + b_G)" if ctx.dims.of("output_gate") == "bias" else "G = σ(X·W_G)",
    explain=_gate_explain, sources=lambda cell: whole_row(cell.step.inputs[0], cell.at, cell.scenario.d_model),
    inputs=lambda ctx, h: [ctx.source()], present=_on,
    tip="multiply x by the gate's column, then take the sigmoid"), after="z")

register(Kind(
    "gated", "Gated head output", ("token", "d_v"), "head",
    "The head's output times its gate, feature by feature: what concat joins.",
    formula=lambda ctx: "Z ⊙ G", explain=_gated_explain,
    sources=lambda cell: {s: [(cell.i, cell.j)] for s in cell.step.inputs},
    inputs=lambda ctx, h: [ctx.sid("z", h), ctx.sid("gate", h)], present=_on,
    tip="multiply each output by its gate"), after="gate")


DECLARATION = Mechanism(
    "output_gate", "an output gate", field="w_gate", label="weights.gate", weight_keys=("gate", "bgate"), read=read,
    arguments={"gate": "weights.gate", "b_gate": "weights.bgate"},
    dims=lambda sc: "bias" if sc.b_gate is not None else "gate",
    arrays=lambda sc: {"weights.gate": sc.w_gate, "weights.bgate": sc.b_gate},
    describe=lambda sc: {"bias": sc.b_gate is not None},
    unfillable=lambda sc: None, fused=False, online=False, decode=False, per_head={"gate": "head", "b_gate": "head"},
    said=lambda arrays: "gate multiplies each head's output by σ(x·W_G), the token's own gate" if arrays.get("gate")
    is not None else None)
