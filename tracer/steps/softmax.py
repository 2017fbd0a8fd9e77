"""From scores to weights: the powers, each query's sum of them, and the weights (or ReLU)."""
from __future__ import annotations

import math

from ..printing import divisor
from .base import Kind, register
from .scores import standard


def _softmax(ctx) -> bool:
    return ctx.arithmetic.normalize == "softmax" and standard(ctx)


def _base(arithmetic) -> str:
    return "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"


def _exp_formula(ctx) -> str:
    base = _base(ctx.arithmetic)
    if not ctx.arithmetic.stable:
        return f"{base}^s"
    if ctx.dims.of("sinks") is not None:   # gpt-oss subtracts the largest of the scores and the sink's logit
        return f"{base}^(s − max)   (max: the largest of each query's scores and the head's sink logit)"
    return f"{base}^(s − max)   (each query's max subtracted)"


def _exp_explain(cell) -> str:
    src = cell.rows(cell.step.inputs[0])
    s, f, base = src[cell.i, cell.j], cell.f, _base(cell.arithmetic)
    if not cell.arithmetic.stable:
        return f"= {base}^{f(s)} = {cell.fa(cell.value)}"
    row = src[cell.i]
    m = row.max() if (row > -math.inf).any() else 0.0
    whose = f"{cell.names()[0]}'s largest score"
    if cell.scenario.sinks is not None and float(cell.scenario.sinks[cell.step.head]) > row.max():
        m = float(cell.scenario.sinks[cell.step.head])
        whose = f"the head's sink logit, above every score of {cell.names()[0]}"
    return f"= {base}^({f(s)} − {f(m)}) = {base}^{f(s - m)} = {cell.fa(cell.value)}   ({f(m)} is {whose})"


_EXP_WHY = ("Softmax raises a base to each score, which makes every number positive and stretches the "
            "gaps between them. Real code subtracts each query's largest score first: the same weights "
            "in the end, but no power can overflow. The by-hand arithmetic (softmax_base = 3) takes 3ˣ "
            "in place of eˣ to keep fractions simple.")
_SINK_POWER = (" The head's sink has a power too (base^sink), which has no column here: it is added "
               "to each query's sum (see sums).")


register(Kind(
    "exp", "Powers", ("query", "key"), "head",
    lambda ctx: _EXP_WHY + (_SINK_POWER if ctx.dims.of("sinks") is not None else ""),
    formula=_exp_formula, explain=_exp_explain,
    sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "exp")], present=_softmax,
    tip="a power: the base times itself that many times; a negative power is one over the power"))


def _sums_explain(cell) -> str:
    from .cell import MAX_TERMS
    e = cell.rows(cell.step.inputs[0])[cell.i]
    more = f" + … ({len(e) - MAX_TERMS} more)" if len(e) > MAX_TERMS else ""
    row = f"{' + '.join(cell.f(v) for v in e[:MAX_TERMS])}{more}"
    if cell.scenario.sinks is None:
        return f"= {row} = {cell.fa(cell.value)}"
    from ..mechanisms.sinks import sink_power_text   # the sink's power, which h{h}.exp has no column for
    power, own = sink_power_text(cell)
    return (f"= {row} + {cell.f(own)} = {cell.fa(cell.value)}   (the {cell.sid('exp')} "
            f"{'column' if cell.trace.columns else 'row'}, plus the sink's power {power} = {cell.f(own)}, "
            f"which {cell.sid('exp')} has no cell for)")


def _sums_formula(ctx) -> str:
    line = "Σ of each column of powers" if ctx.columns else "Σ of each row of powers"
    return line + " + the sink's power" if ctx.dims.of("sinks") is not None else line


def _sums_why(ctx) -> str:
    if ctx.dims.of("sinks") is not None:
        return ("Each query's powers are added up, and the head's sink's power with them: dividing by this "
                "sum gives the tokens' weights, which add up to 1 − the sink's share (the sink takes the rest).")
    return "Each query's powers are added up; dividing by this sum makes its weights add up to 1."


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
    if cell.scenario.sparse is not None:   # beside what dense attention would give (mechanisms/indexer)
        from ..mechanisms.indexer.steps import dense
        told = dense(cell)
        if told:
            return f"= {cell.f(e)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}{told}"
    return f"= {cell.f(e)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}   (how much {qname} attends to {kname})"


def _weights_sources(cell) -> dict:
    if len(cell.step.inputs) == 1:
        return {cell.step.inputs[0]: [(cell.i, cell.j)]}
    return {cell.step.inputs[0]: [(cell.i, cell.j)], cell.step.inputs[1]: [(cell.i, 0)]}


def _weights_why(ctx) -> str:
    if ctx.dims.of("sinks") is not None and _softmax(ctx):
        return ("How much each query attends to each key: the powers divided by their sum, which holds the "
                "sink's power too, so each query's weights add up to 1 − the sink's share (the sink step): "
                "the part of its attention that goes to no token.")
    return ("How much each query attends to each key: the powers divided by their sum, so each "
            "query's weights form a probability distribution (ReLU instead: max(0, score), unnormalised).")


register(Kind(
    "weights", "Attention weights", ("query", "key"), "head", _weights_why,
    formula=lambda ctx: "A = powers ÷ sums" if ctx.arithmetic.normalize == "softmax" else "A = max(0, s)",
    explain=_weights_explain, sources=_weights_sources,
    inputs=lambda ctx, h: ([ctx.sid("exp", h), ctx.sid("sums", h)] if _softmax(ctx)
                           else [ctx.latest(h, "logits", "weights")]), present=standard,
    tip="divide the power by its query's sum; dividing by a fraction is multiplying by its inverse"))
