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
    key = cell.starts[1] + cell.j
    d = cell.at - key
    qn, kn = cell.names()
    head = f"head {cell.step.head}'s slope {f(m)}"
    tokens = f"{abs(d)} token{'s' if abs(d) != 1 else ''}"
    if d >= 0:
        why = f"{kn} is {tokens} back from {qn}; {head}"
    elif cell.trace.allowed is not None and not cell.trace.allowed[cell.at, key]:   # masked next
        why = (f"{kn} comes {tokens} after {qn}: −m·(i − j) is a bonus here, not a penalty, but the mask "
               f"removes this key next, so it never counts; {head}")
    else:
        why = (f"{kn} comes {tokens} after {qn} and no mask hides it: a bonus, as BLOOM computes it "
               f"(the paper's models never see a later key); {head}")
    return (f"= {f(s)} − {f(m)}·({cell.at} − {key}) = {f(s)} − {f(m * d)} = {f(cell.value)}   ({why})"
            ).replace("-", "−").replace("− −", "+ ")


def _formula(ctx) -> str:
    later = "; a later key gains, and is masked next" if ctx.masked else ""
    return f"S − m_h·(i − j)   (query i, key j; the head's slope m_h{later})"


register(Kind(
    "biased", "Scores with distance penalty", ("query", "key"), "head",
    "ALiBi gives attention a sense of distance without position vectors: each score loses m_h for every "
    "token between the query and the key. A steep head (m = 1/2) looks at its neighbours; a gentle one "
    "(m = 1/256) reads far back. Nothing is learned, so it extends to texts longer than training's. "
    "A key after the query (j > i) gains m_h·(j − i) instead: models with ALiBi are causal, and the mask "
    "removes those keys in the next step (BLOOM adds m_h·j to every score, the same weights).",
    formula=_formula, explain=_explain, sources=lambda cell: {cell.step.inputs[0]: [(cell.i, cell.j)]},
    inputs=lambda ctx, h: [ctx.latest(h, "logits", "biased")],
    present=lambda ctx: ctx.dims.alibi and standard(ctx), chain="logits"), after="capped")
