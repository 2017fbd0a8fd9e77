"""From scores to weights: the powers, each query's sum of them, and the weights (or ReLU)."""
from __future__ import annotations

import math

from ..printing import divisor
from .base import Kind, register, said
from .scores import standard


def _softmax(ctx) -> bool:
    return ctx.arithmetic.normalize == "softmax" and standard(ctx)


def _base(arithmetic) -> str:
    return "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"


def _exp_formula(ctx) -> str:
    base = _base(ctx.arithmetic)
    if not ctx.arithmetic.stable:
        return f"{base}^s"
    return said("exp.formula", ctx, base) or f"{base}^(s − max)   (each query's max subtracted)"


def _exp_explain(cell) -> str:
    src = cell.rows(cell.step.inputs[0])
    s, f, base = src[cell.i, cell.j], cell.f, _base(cell.arithmetic)
    if not cell.arithmetic.stable:
        return f"= {base}^{f(s)} = {cell.fa(cell.value)}"
    row = src[cell.i]
    m, whose = said("exp.max", cell, row) or (row.max() if (row > -math.inf).any() else 0.0,
                                                           f"{cell.names()[0]}'s largest score")
    return f"= {base}^({f(s)} − {f(m)}) = {base}^{f(s - m)} = {cell.fa(cell.value)}   ({f(m)} is {whose})"


_EXP_WHY = ("Softmax raises a base to each score, which makes every number positive and stretches the "
            "gaps between them. Real code subtracts each query's largest score first: the same weights "
            "in the end, but no power can overflow. The by-hand arithmetic (softmax_base = 3) takes 3ˣ "
            "in place of eˣ to keep fractions simple.")


register(Kind(
    "exp", "Powers", ("query", "key"), "head",
    lambda ctx: _EXP_WHY + (said("exp.why", ctx) or ""),
    formula=_exp_formula, explain=_exp_explain,
    sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "exp")], present=_softmax,
    tip="a power: the base times itself that many times; a negative power is one over the power"))


def _sums_explain(cell) -> str:
    from .cell import MAX_TERMS
    e = cell.rows(cell.step.inputs[0])[cell.i]
    more = f" + … ({len(e) - MAX_TERMS} more)" if len(e) > MAX_TERMS else ""
    row = f"{' + '.join(cell.f(v) for v in e[:MAX_TERMS])}{more}"
    return said("sums.explain", cell, row) or f"= {row} = {cell.fa(cell.value)}"


def _sums_formula(ctx) -> str:
    line = "Σ of each column of powers" if ctx.columns else "Σ of each row of powers"
    return line + (said("sums.formula", ctx) or "")


def _sums_why(ctx) -> str:
    return (said("sums.why", ctx)
            or "Each query's powers are added up; dividing by this sum makes its weights add up to 1.")


register(Kind(
    "sums", "Sums of powers", ("query", "one"), "head", _sums_why,
    formula=_sums_formula,
    explain=_sums_explain,
    sources=lambda cell: {cell.step.inputs[0]: [(cell.i, m) for m in range(cell.rows(cell.step.inputs[0]).shape[1])]},
    inputs=lambda ctx, h: [ctx.sid("exp", h)], present=_softmax,
    tip="add up this query's powers; put fractions over one common denominator first"))


def _weights_explain(cell) -> str:
    if cell.arithmetic.normalize == "relu":
        s = cell.rows(cell.step.inputs[0])[cell.i, cell.j]
        return f"= max(0, {cell.f(s)}) = {cell.f(cell.value)}"
    e, total = cell.rows(cell.sid("exp"))[cell.i, cell.j], cell.rows(cell.sid("sums"))[cell.i, 0]
    if total == 0:
        return "= 0   (every key is masked for this query)"
    qname, kname = cell.names()
    told = said("weights.beside", cell)   # what dense attention would give, where an indexer chose the keys
    if told is not None:
        return f"= {cell.f(e)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}{told}"
    return f"= {cell.f(e)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}   (how much {qname} attends to {kname})"


def _weights_sources(cell) -> dict:
    if len(cell.step.inputs) == 1:
        return {cell.step.inputs[0]: [(cell.i, cell.j)]}
    return {cell.step.inputs[0]: [(cell.i, cell.j)], cell.step.inputs[1]: [(cell.i, 0)]}


def _weights_why(ctx) -> str:
    told = said("weights.why", ctx) if _softmax(ctx) else None
    return told or ("How much each query attends to each key: the powers divided by their sum, so each "
            "query's weights form a probability distribution (ReLU instead: max(0, score), unnormalised).")


register(Kind(
    "weights", "Attention weights", ("query", "key"), "head", _weights_why,
    formula=lambda ctx: "A = powers ÷ sums" if ctx.arithmetic.normalize == "softmax" else "A = max(0, s)",
    explain=_weights_explain, sources=_weights_sources,
    inputs=lambda ctx, h: ([ctx.sid("exp", h), ctx.sid("sums", h)] if _softmax(ctx)
                           else [ctx.latest(h, "logits", "weights")]), present=standard,
    tip="divide the power by its query's sum; dividing by a fraction is multiplying by its inverse"))
