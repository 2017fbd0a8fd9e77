"""Soft-capping (Gemma 2): each scaled score squashed into (−C, C) by C·tanh(s / C), before the
mask, so that no single key can take all of a query's attention however large its score."""
from __future__ import annotations

import math

from .base import Kind, register
from .scores import standard


def _explain(cell) -> str:
    cap, f = cell.scenario.softcap, cell.f
    s = float(cell.rows(cell.step.inputs[0])[cell.i, cell.j])
    t = s / cap
    where = ("nearly unchanged: tanh is almost a straight line near 0" if abs(t) < 0.3
             else f"squashed toward {'−' if s < 0 else ''}{cap:g}" if abs(t) > 1.5 else "bent toward the cap")
    return (f"= {cap:g}·tanh({f(s)} ÷ {cap:g}) = {cap:g}·tanh({t:.4g}) = {cap:g}·{math.tanh(t):.4g} = "
            f"{cell.value:.4g}   ({where})").replace("-", "−")


register(Kind(
    "capped", "Soft-capped scores", ("query", "key"), "head",
    "Gemma 2 caps its scores smoothly: C·tanh(s / C) is close to s when s is small and never beyond ±C. "
    "A key whose score runs away cannot take all of a query's weight, which keeps training stable; "
    "the order of the scores is unchanged.",
    formula=lambda ctx: f"{ctx.dims.softcap:g}·tanh(s ÷ {ctx.dims.softcap:g})   (C = {ctx.dims.softcap:g})",
    explain=_explain, sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "capped")],
    present=lambda ctx: ctx.dims.softcap is not None and standard(ctx), chain="logits"), after="scaled")
