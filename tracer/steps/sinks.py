"""Attention sinks (gpt-oss): a learned logit per head joins each query's softmax as one more,
valueless key. `sink` is its share of each query's weight; the tokens share the rest."""
from __future__ import annotations

from ..numbers import divisor
from .base import Kind, register
from .scores import standard


def logit(cell) -> float:
    return float(cell.scenario.sinks[cell.step.head])


def _base(arithmetic) -> str:
    return "e" if arithmetic.softmax_base == "e" else f"{arithmetic.base:g}"


def sink_power_text(cell) -> tuple[str, float]:
    """The head's sink's power for the cell's query, written (`3^1`, `e^(0.5 − 2)`), and its value."""
    from ..sinks import sink_power
    f, s = cell.f, float(cell.scenario.sinks[cell.step.head])
    row = cell.rows(cell.trace.step(cell.sid("exp")).inputs[0])[cell.i]
    own, shift = sink_power(s, row, cell.arithmetic)
    base = _base(cell.arithmetic)
    return (f"{base}^({f(s)} − {f(shift)})" if cell.arithmetic.stable else f"{base}^{f(s)}"), own


def _explain(cell) -> str:
    f = cell.f
    power, own = sink_power_text(cell)
    s = logit(cell)
    total = cell.rows(cell.sid("sums"))[cell.i, 0]
    rest = 1 - cell.value
    return (f"= {power} ÷ {divisor(cell.f(total))} = {f(own)} ÷ {divisor(cell.f(total))} = {cell.fa(cell.value)}   "
            f"(head {cell.step.head}'s sink logit is {f(s)}; the keys {cell.names()[0]} sees share the other {f(rest)})")


register(Kind(
    "sink", "Sink's share", ("query", "one"), "head",
    "gpt-oss gives each head one learned logit, the score of a key that is not a token and has no "
    "value. It joins every query's softmax: its power is added to the sum, so the tokens' weights "
    "add up to 1 − sink. A head with nothing useful to read can park its weight there instead of "
    "on some token (StreamingLLM found models learn to use the first token for this).",
    formula=lambda ctx: (f"{_base(ctx.arithmetic)}^(sink − max) ÷ sums   (the max over the tokens and the sink)"
                         if ctx.arithmetic.stable else f"{_base(ctx.arithmetic)}^sink ÷ sums"),
    explain=_explain,
    sources=lambda cell: {cell.step.inputs[1]: [(cell.i, 0)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "exp"), ctx.sid("sums", h)],
    present=lambda ctx: ctx.dims.sinks and ctx.arithmetic.normalize == "softmax" and standard(ctx)), after="sums")
