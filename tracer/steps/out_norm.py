"""A norm of the attention's output (Gemma 2 and 3, OLMo 2): each token's output divided by its
root mean square and multiplied by a learned gain before the residual adds it to x."""
from __future__ import annotations

import numpy as np

from .base import Kind, register
from .cell import whole_row
from .output import _last_head_output


def _explain(cell) -> str:
    spec, f = cell.scenario.out_norm, cell.f
    row = cell.rows(cell.step.inputs[0])[cell.i].astype(np.float64)
    ms = float((row * row).mean())
    plus = f" + {spec['eps']:g}" if spec["eps"] else ""
    return (f"= {f(row[cell.j])} ÷ √({f(ms)}{plus}) × {f(spec['gain'][0, cell.j])} = {f(cell.value)}   (the mean of "
            f"{cell.token(cell.at)}'s {len(row)} squares; the gain of feature {cell.j})").replace("-", "−")


register(Kind(
    "out_norm", "Output, normed", ("token", "d_out"), "layer",
    "Gemma and OLMo 2 normalise what attention adds before adding it: each token's output is divided by "
    "its root mean square and scaled by a learned gain, so the residual stream grows by a controlled amount.",
    formula=lambda ctx: "O ÷ RMS(O)·g, per token",
    explain=_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [ctx.latest(None, "output", "out_norm") or _last_head_output(ctx)],
    present=lambda ctx: ctx.dims.out_norm, chain="output"), after="out")
