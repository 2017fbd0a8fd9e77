"""ALiBi (BLOOM, some Falcons): no rotary positions; each head subtracts m_h·(i − j) from the score
of query i and key j, a penalty that grows with the distance, steep in some heads and gentle in others."""
from __future__ import annotations

from .base import Kind, register
from .scores import standard


def _slope(cell) -> float:
    return float(cell.scenario.alibi[cell.step.head])


def _explain(cell) -> str:
    f, m = cell.f, _slope(cell)
    s = cell.rows(cell.step.inputs[0])[cell.i, cell.j]
    d = cell.at - (cell.starts[1] + cell.j)
    qn, kn = cell.names()
    ahead = "; the key comes after the query: the mask usually hides it" if d < 0 else ""
    return (f"= {f(s)} − {f(m)}·({cell.at} − {cell.starts[1] + cell.j}) = {f(s)} − {f(m * d)} = {f(cell.value)}   "
            f"({kn} is {d} token{'s' if abs(d) != 1 else ''} back from {qn}; head {cell.step.head}'s slope "
            f"{f(m)}{ahead})").replace("-", "−").replace("− −", "+ ")


def _formula(ctx) -> str:
    return "S − m_h·(i − j)   (query i, key j; the head's slope m_h)"


register(Kind(
    "biased", "Scores with distance penalty", ("query", "key"), "head",
    "ALiBi gives attention a sense of distance without position vectors: each score loses m_h for every "
    "token between the query and the key. A steep head (m = 1/2) looks at its neighbours; a gentle one "
    "(m = 1/256) reads far back. Nothing is learned, so it extends to texts longer than training's.",
    formula=_formula, explain=_explain, sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "biased")],
    present=lambda ctx: ctx.dims.alibi and standard(ctx), chain="logits"), after="capped")
