"""A gainless RMS norm of the values (Gemma 4, CONTRACT §17): each token's value divided by its root
mean square, v ÷ √(mean(v²) + eps), before the weights mix them, so that every token hands over a
value of the same size; no gain is learned.

A scenario file writes `[weights] v_norm = true`; the eps is QK-norm's (`[weights] norm_eps`,
default 1e-6). Its step is `h{h}.v_norm` after `h{h}.v` (`kv{g}.v_norm` when grouped)."""
from __future__ import annotations

import numpy as np

from ..checks import kind, number
from ..errors import ScenarioError
from ..rms import mean_square, refuse_zero_rows, rms_rows
from ..steps.base import Kind, register
from ..steps.cell import whole_row
from .declaration import Mechanism


def read(scenario, data: dict) -> dict:
    """`v_norm = true`: the values normed, with the eps of `norm_eps`; false or absent: not."""
    weights = data["weights"]
    on = weights.get("v_norm", False)
    if not isinstance(on, (bool, np.bool_)):
        raise ScenarioError("weights.v_norm", f"expected true or false (a gainless RMS norm of each token's value), "
                            f"got {kind(on)}")
    if not on:
        return {"v_norm": None}
    eps = number(weights.get("norm_eps", 1e-6), "weights.norm_eps")
    if not 0 <= eps < 1:
        raise ScenarioError("weights.norm_eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    return {"v_norm": eps}


def rows(v: np.ndarray, eps: float) -> np.ndarray:
    """The formula in NumPy (… × tokens × d_v, every row at once): rms.rms_rows with a gain of 1."""
    return rms_rows(v, 1.0, eps)


def normed(run, index: list[int], v: np.ndarray, K=None) -> np.ndarray:
    """The values of key/value heads `index` normed (v: tokens × d_v for one, or a stack of them):
    by the stage kernel when K is given, else in NumPy; a row of zeros under eps 0 is refused
    naming the eps and the row."""
    sc = run.scenario
    group = "head" if sc.groups == sc.heads else "key/value group"
    token = lambda t: f"token {t} ({sc.key_tokens[t]!r})"   # noqa: E731
    words = (lambda t: f"{group} {index[0]}'s value of {token(t)}") if v.ndim == 2 else \
        (lambda i, t: f"{group} {index[i]}'s value of {token(t)}")
    refuse_zero_rows(v, sc.v_norm, "weights.norm_eps", words, sc.source)
    if K is None:
        return rows(v, sc.v_norm)
    return K.rms_norm(np.ascontiguousarray(v), np.ones((1, v.shape[1]), run.dtype), sc.v_norm)


# ------------------------------------------------------------------ the step

def _explain(cell) -> str:
    eps, f = cell.scenario.v_norm, cell.f
    row = cell.rows(cell.step.inputs[0])[cell.i].astype(np.float64)
    plus = f" + {eps:g}" if eps else ""
    return (f"= {f(row[cell.j])} ÷ √({f(mean_square(row))}{plus}) = {f(cell.value)}   (the mean of "
            f"{cell.key_token(cell.i)}'s {len(row)} squares; no gain)").replace("-", "−")


register(Kind(
    "v_norm", "Values, normed", lambda ctx: ("context", "d_v") if ctx.cross else ("token", "d_v"), "kv",
    "Gemma 4 normalises each token's value before the weights mix them: every token then hands over a "
    "value of the same size, and no token's value can dominate the output by its length alone. There is "
    "no learned gain: the projection W_V sets the values' scale.",
    formula=lambda ctx: "V ÷ RMS(V), per token (no gain)",
    explain=_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [ctx.latest(h, "value", "v_norm")],
    present=lambda ctx: ctx.dims.of("v_norm") is not None, chain="value",
    tip="square each number of the row, take the mean and its square root, then divide (no gain)"), after="v")


# ------------------------------------------------------------------ the declaration

DECLARATION = Mechanism(
    "v_norm", "a norm of the values", field="v_norm", label="weights.v_norm", weight_keys=("v_norm",), read=read,
    arguments={"v_norm": "weights.v_norm"}, describe=lambda sc: {"eps": sc.v_norm},
    given_words=lambda sc: f"the values' norm's eps {sc.v_norm:g} under the root",
    unfillable=lambda sc: "a norm of the values divides by a square root, which is not a fraction",
    decode=False,
    config=lambda data, family: True if family.v_norm else None,
    checkpoint=lambda blk, cfg, layer: {"v_norm": True, "qk_norm_eps": cfg.eps} if cfg.parts.get("v_norm") else {},
    said=lambda arrays: "v_norm divides each token's value by its root mean square (no gain)" if arrays.get("v_norm")
    else None)
