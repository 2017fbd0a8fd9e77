"""A norm of the attention's output (Gemma 2 and 3, OLMo 2): each token's output divided by its
root mean square and multiplied by a learned gain before the residual adds it to x.

A scenario file writes `[out_norm]` with `kind = "rms"`, `gain` (one number per feature of the
output, default 1) and `eps` (default 1e-6)."""
from __future__ import annotations

import numpy as np

from ..checks import choice, kind, number, unknown, vectors
from ..errors import ScenarioError
from ..rms import mean_square, refuse_zero_rows
from ..steps.base import Kind, register
from ..steps.cell import whole_row
from ..steps.output import last_head_output
from .declaration import Mechanism


def read(scenario, data: dict) -> dict:
    """[out_norm]: an RMS norm of each token's attention output, before the residual adds it to x."""
    value, d_out = data.get("out_norm"), scenario.d_out
    if value is None:
        return {"out_norm": None}
    if not isinstance(value, dict):
        raise ScenarioError("out_norm", f"expected a table with kind, gain and eps, got {kind(value)}")
    unknown(value, ("kind", "gain", "eps"), "out_norm.")
    eps = number(value.get("eps", 1e-6), "out_norm.eps")
    if not 0 <= eps < 1:
        raise ScenarioError("out_norm.eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    gain = value.get("gain")
    return {"out_norm": {"kind": choice(value, "kind", ("rms",), "rms", "out_norm.kind"), "eps": eps,
                         "gain": np.ones((1, d_out)) if gain is None else vectors(gain, "out_norm.gain", 1, d_out, "d_out")}}


def normed(K, run, y: np.ndarray) -> np.ndarray:
    """The layer's output y (tokens × d_out) normed by the stage kernel; a row of zeros under eps 0 refused."""
    sc = run.scenario
    spec = sc.out_norm
    refuse_zero_rows(y, spec["eps"], "out_norm.eps", lambda t: f"the output of token {t} ({sc.tokens[t]!r})", sc.source)
    return K.rms_norm(np.ascontiguousarray(y), np.ascontiguousarray(spec["gain"], dtype=run.dtype), spec["eps"])


# ------------------------------------------------------------------ the step

def _explain(cell) -> str:
    spec, f = cell.scenario.out_norm, cell.f
    row = cell.rows(cell.step.inputs[0])[cell.i].astype(np.float64)
    ms = mean_square(row)
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
    inputs=lambda ctx, h: [ctx.latest(None, "output", "out_norm") or last_head_output(ctx)],
    present=lambda ctx: ctx.dims.of("out_norm") is not None, chain="output",
    tip="square each number of the row, take the mean and its square root; divide, then multiply by the gain"),
    after="out")


# ------------------------------------------------------------------ the declaration

DECLARATION = Mechanism(
    "out_norm", "an output norm", field="out_norm", label="out_norm", keys=("out_norm",), read=read,
    arguments={"out_norm": "out_norm"},
    arrays=lambda sc: {"out_norm.gain": sc.out_norm["gain"]},
    describe=lambda sc: {"kind": sc.out_norm["kind"], "eps": sc.out_norm["eps"]},
    given=lambda trace: [("out_norm.gain", ("one", "d_out"), np.atleast_2d(trace.scenario.out_norm["gain"]))],
    decode=False,
    checkpoint=lambda blk, cfg, layer: {} if blk.out_norm is None else
    {"out_norm": dict(kind="rms", gain=blk.out_norm["gain"], eps=blk.out_norm["eps"])},
    said=lambda arrays: "out_norm normalises the output before the residual adds it" if "out_norm" in arrays else None)
