"""The query temperature's reader, its NumPy step and its two steps: `tau` (token × one: τ of each
token's position) and `h{h}.q_temp` (the head's queries times their token's τ)."""
from __future__ import annotations

import numbers

import numpy as np

from ...checks import kind, number, unknown
from ...errors import ScenarioError
from ...steps.base import Kind, register
from ...steps.cell import whole_row
from .formula import first_warm, temperature

KEYS = ("scale", "floor", "shift")


def read(scenario, data: dict) -> dict:
    """`[rope] temperature = { scale = β, floor = F, shift = o }`, with the queries' positions."""
    rope = data.get("rope")
    value = rope.get("temperature") if isinstance(rope, dict) else None
    if value is None:
        return {"q_temp": None}
    if not isinstance(value, dict):
        raise ScenarioError("rope.temperature", f"expected a table with scale and floor, got {kind(value)}")
    unknown(value, KEYS, "rope.temperature.")
    for key in ("scale", "floor"):
        if key not in value:
            raise ScenarioError(f"rope.temperature.{key}", "missing; expected scale = β and floor = F "
                                "(τ(p) = 1 + β·ln(1 + ⌊(p + 1)/F⌋))")
    scale, floor = number(value["scale"], "rope.temperature.scale"), number(value["floor"], "rope.temperature.floor")
    if not np.isfinite(scale) or scale < 0:
        raise ScenarioError("rope.temperature.scale", f"expected a finite number ≥ 0, got {kind(value['scale'])}")
    if not np.isfinite(floor) or floor <= 0:
        raise ScenarioError("rope.temperature.floor", f"expected a number > 0, got {kind(value['floor'])}")
    shift = value.get("shift", 1)
    if isinstance(shift, bool) or not isinstance(shift, numbers.Integral) or shift < 0:
        raise ScenarioError("rope.temperature.shift", f"expected a whole number ≥ 0, got {kind(shift)}")
    where = rope.get("positions")
    positions = tuple(int(p) for p in where) if where is not None else \
        tuple(range(int(rope.get("offset", 0)), int(rope.get("offset", 0)) + scenario.n))
    return {"q_temp": {"scale": scale, "floor": floor, "shift": int(shift), "positions": positions}}


def taus(spec: dict) -> np.ndarray:
    """τ of each token (n)."""
    return temperature(spec["positions"], spec["scale"], spec["floor"], spec["shift"])


def warm(spec: dict, q: np.ndarray) -> np.ndarray:
    """The queries (… × n × d_k) times their token's τ."""
    return q * taus(spec)[:, None].astype(q.dtype)


# ------------------------------------------------------------------ the steps

def _curve(spec: dict, p: int) -> str:
    inside = f"(p + {spec['shift']})" if spec["shift"] else "p"
    return (f"1 + {spec['scale']:g}·ln(1 + ⌊{inside.replace('p', str(p))}/{spec['floor']:g}⌋)")


def _tau_explain(cell) -> str:
    spec, f = cell.scenario.q_temp, cell.f
    p = spec["positions"][cell.at]
    steps = int(np.floor((p + spec["shift"]) / spec["floor"]))
    out = f"= {_curve(spec, p)} = 1 + {spec['scale']:g}·ln {1 + steps} = {f(cell.value)}   (τ({p})"
    first = first_warm(spec["scale"], spec["floor"], spec["shift"])
    if not steps:
        return out + (f" = 1: no position below {first} is warmed)" if first > 0 else ")")
    return out + f" > 1: the queries of position {p} are warmed)"


def _query_cell(cell) -> tuple[str, int]:
    """Where the cell's query number comes from: (step id, column). Under latent attention the
    warmed query is [q_nope | q_pe] side by side, each part warmed alike (Mistral 4)."""
    src = cell.step.inputs[0]
    if len(cell.step.inputs) == 3 and cell.j >= cell.rows(src).shape[1]:   # latent: the rotary part
        return cell.step.inputs[1], cell.j - cell.rows(src).shape[1]
    return src, cell.j


def _warm_explain(cell) -> str:
    f, (src, j) = cell.f, _query_cell(cell)
    q, tau = cell.rows(src)[cell.i, j], cell.rows("tau")[cell.i, 0]
    spec = cell.scenario.q_temp
    whose = f"{src}[{cell.token(cell.i)}, {j}]" if len(cell.step.inputs) == 3 else f"the query of {cell.token(cell.i)}"
    return (f"= {f(q)} × τ({spec['positions'][cell.at]}) = {f(q)} × {f(tau)} = {f(cell.value)}   ({whose} "
            f"times its position's τ, from tau)").replace("-", "−")


def _warm_sources(cell) -> dict:
    src, j = _query_cell(cell)
    return {src: [(cell.i, j)], "tau": [(cell.i, 0)]}


def _warm_inputs(ctx, h) -> list:
    """The query's last stage and tau; under latent attention its two parts (q_nope, q_pe), both warmed."""
    if ctx.dims.latent:
        return [ctx.sid("q_nope", h), ctx.sid("q_pe", h), "tau"]
    return [ctx.latest(h, "query", "q_temp"), "tau"]


def _on(ctx) -> bool:
    return ctx.dims.of("q_temp") is not None


def _formula(ctx) -> str:
    scale, floor, shift = ctx.dims.of("q_temp")
    inside = f"(p + {shift})" if shift else "p"
    return f"τ(p) = 1 + {scale:g}·ln(1 + ⌊{inside}/{floor:g}⌋), p the token's position"


register(Kind(
    "tau", "Query temperature τ", ("token", "one"), "input",
    "Far into a long text a query has many keys to share its weight among, and its softmax flattens. "
    "Llama 4 warms the queries of its layers without positions by a factor that grows, slowly (a "
    "logarithm), once every F tokens: τ = 1 for the first F − 1 positions, then a little more.",
    formula=_formula, explain=_tau_explain, sources=lambda cell: {}, inputs=lambda ctx, h: [], present=_on,
    tip="add the shift to the position, divide by the floor and round down; 1 plus β times the log of 1 more"),
    after="freqs")
register(Kind(
    "q_temp", "Queries, warmed", ("token", "d_k"), "head",
    "Each query is multiplied by its position's τ (step tau): the scores of a far query grow, and its "
    "softmax stays as sharp as a near one's.",
    formula=lambda ctx: "[q_nope | q_pe] · τ(p), per token" if ctx.dims.latent else "q · τ(p), per token",
    explain=_warm_explain, sources=_warm_sources, inputs=_warm_inputs, present=_on, chain="query",
    tip="multiply the query's number by its token's τ"), after="q_norm_after_rope")
