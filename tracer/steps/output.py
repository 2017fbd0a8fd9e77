"""After the weights: each head's output, the heads side by side, the output projection, and the
residual connection with its norm."""
from __future__ import annotations

from . import online
from .base import Kind, register
from .cell import whole_row
from .inputs import PRODUCTS


def _z_explain(cell) -> str:
    if cell.arithmetic.online:
        return online.z_explain(cell)
    i, j, tok = cell.i, cell.j, cell.token(cell.at)
    w, v = cell.rows(cell.step.inputs[0])[i], cell.rows(cell.step.inputs[1])[:, j]
    if cell.trace.columns:
        return f"= Σ v[{j}, k]·A[k, {tok}] = {cell.dot(v, w)} = {cell.fa(cell.value)}"
    return f"= Σ A[{tok}, k]·v[k, {j}] = {cell.dot(w, v)} = {cell.fa(cell.value)}"


def _z_sources(cell) -> dict:
    if cell.arithmetic.online:
        return online.z_sources(cell)
    weights, v = cell.step.inputs
    m = cell.rows(weights).shape[1]
    return {weights: [(cell.i, k) for k in range(m)], v: [(k, cell.j) for k in range(m)]}


register(Kind(
    "z", "Head output", ("token", "d_v"), "head",
    "Each token's output is the average of all the values, weighted by its attention: a token "
    "takes in what the tokens it attends to carry.",
    formula=lambda ctx: "Z = acc ÷ sums (last block)" if ctx.arithmetic.online else "Z = V·A" if ctx.columns else "Z = A·V",
    explain=_z_explain, sources=_z_sources,
    inputs=lambda ctx, h: (online.z_inputs(ctx, h) if ctx.arithmetic.online
                           else [ctx.sid("weights", h), ctx.latest(h, "value", "z")]),
    # a linear layer's z: mechanisms/linear/steps.py; DeepSeek V4's, turned back: mechanisms/compressed/steps.py
    present=lambda ctx: ctx.dims.of("linear") is None and ctx.dims.of("compressed") is None,
    tip="multiply each value by its weight, then add the products"))


def _head_of(cell) -> tuple[int, int]:
    return divmod(cell.j, cell.scenario.d_v)


def head_output(ctx, h: int) -> str:
    """What concat joins of head h: its z, or z ⊙ gate under an output gate (mechanisms/output_gate.py)."""
    return ctx.sid("gated" if ctx.has("gated") else "z", h)


def _concat_explain(cell) -> str:
    h, c = _head_of(cell)
    return f"= {cell.step.inputs[h]}[{cell.token(cell.at)}, {c}] = {cell.f(cell.value)}"


def _concat_sources(cell) -> dict:
    h, c = _head_of(cell)
    return {cell.step.inputs[h]: [(cell.i, c)]}


register(Kind(
    "concat", "Heads side by side", ("token", "d_v"), "layer",
    "Several heads run in parallel, each with its own W_Q, W_K, W_V, so each can learn a "
    "different relation (who did what, what refers to what); their outputs are joined.",
    formula=lambda ctx: f"the {ctx.dims.heads} heads' Z {'stacked' if ctx.columns else 'side by side'}",
    explain=_concat_explain, sources=_concat_sources,
    inputs=lambda ctx, h: [head_output(ctx, g) for g in range(ctx.dims.heads)],
    present=lambda ctx: ctx.dims.heads > 1, width=lambda d: d.heads * d.d_v))


def last_head_output(ctx) -> str:
    return ctx.sid("concat") if ctx.has("concat") else head_output(ctx, 0)


def _out_formula(ctx) -> str:
    y = "concat" if ctx.has("concat") else "Z"
    plus = " + b_O" if "o" in ctx.dims.biases else ""
    return f"O = W_O·{y}{plus}" if ctx.columns else f"O = {y}·W_O{plus}"


def _out_explain(cell) -> str:
    src, b = cell.step.inputs[0], cell.scenario.b_o
    return cell.project(cell.rows(src), cell.scenario.w_o, "W_O", f"{src}({cell.token(cell.at)})",
                        None if b is None else b[0])


register(Kind(
    "out", "Output projection", ("token", "d_out"), "layer",
    "W_O mixes the joined heads back into one vector per token, of the width the next layer expects.",
    formula=_out_formula, explain=_out_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [last_head_output(ctx)], present=lambda ctx: ctx.dims.output, chain="output",
    tip=PRODUCTS))


def _attention_output(ctx) -> str:
    """What the residual adds to x: the latest stage of the layer's output (out, its norm), or the
    heads' outputs as they are."""
    return ctx.latest(None, "output", "residual") or last_head_output(ctx)


def _residual_explain(cell) -> str:
    other = cell.step.inputs[1]
    x, o = cell.rows("x")[cell.at, cell.j], cell.rows(other)[cell.i, cell.j]
    return f"= x + {other} = {cell.f(x)} + {cell.f(o)} = {cell.f(cell.value)}"


register(Kind(
    "residual", "Residual", ("token", "d_model"), "layer",
    "The attention output is added to the input rather than replacing it: the layer only "
    "has to learn a change, and the original signal survives deep stacks.",
    formula=lambda ctx: "R = X + " + {"out": "O", "concat": "concat", "out_norm": "RMSNorm(O)"}.get(
        _attention_output(ctx), "Z"),
    explain=_residual_explain,
    sources=lambda cell: {"x": [(cell.at, cell.j)], cell.step.inputs[1]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: ["x", _attention_output(ctx)], present=lambda ctx: ctx.dims.residual is not None))


def _norm_explain(cell) -> str:
    r = cell.rows(cell.step.inputs[0])[cell.i]
    mean, var = r.mean(), r.var()
    return (f"= ({cell.f(r[cell.j])} − {mean:.4g}) ÷ √({var:.4g} + {cell.scenario.residual['eps']:g}) = "
            f"{cell.value:.4g}   (mean and variance of this token's row)").replace("-", "−")


register(Kind(
    "norm", "Layer norm", ("token", "d_model"), "layer",
    "Each token's vector is shifted to mean 0 and scaled to variance 1, keeping numbers in a "
    "steady range from layer to layer (learned gain and bias left out).",
    formula=lambda ctx: "(r − mean) ÷ √(variance + ε), per token",
    explain=_norm_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: ["residual"], present=lambda ctx: ctx.dims.residual == "layer"))
