"""Why this weight: a score cell q·k written as its exact parts. Without rotation a part is one
feature's product q_i·k_i; with rotary positions it is one pair's q_a·k_a + q_b·k_b (the pair
turned by p·θ in the query and in the key, so its part depends on how far apart the two tokens
are, not on where), and a feature past the rotated ones (partial rotary) is a part of its own.

Up to MAX_TERMS features (or pairs) every part is written; beyond, the SHOWN largest (by size,
largest first) and then "(N more parts, summing to S)", so that what is written still adds up
to the cell: the parts are the products as computed, their sum the cell's value (to the last
bit in whole-number arithmetic, to float rounding otherwise).
"""
from __future__ import annotations

import math

import numpy as np

from .mechanisms.rotary import frequencies as rope
from .ids import parse
from .steps.cell import MAX_TERMS

SHOWN = 6   # parts written when there are more than MAX_TERMS


def parts(q: np.ndarray, k: np.ndarray, spec: dict | None) -> list[tuple[str, list[int], float]]:
    """(label, features, value) of each part of q·k: one per feature, or, with the rotary spec, one
    per rotated pair and one per feature past the rotated ones; the values sum to q·k."""
    q, k, d = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64), len(q)
    if spec is None:
        return [(f"feature {i}", [i], float(q[i] * k[i])) for i in range(d)]
    r = rope.rotary_dims(spec, d)
    first, second = rope.pairs(r, spec["style"])
    out = [(f"pair {i}", [int(a), int(b)], float(q[a] * k[a] + q[b] * k[b]))
           for i, (a, b) in enumerate(zip(first, second))]
    return out + [(f"feature {i}", [i], float(q[i] * k[i])) for i in range(r, d)]


def explain(cell) -> str:
    """The score cell's story: q(a)·k(b) = its parts = the value."""
    q_id, k_id = cell.step.inputs[:2]
    q, k = cell.rows(q_id)[cell.i], cell.rows(k_id)[cell.j]
    qname, kname = cell.names()
    rotated = parse(q_id).kind == "q_rot" and cell.scenario.rope is not None
    what = f"k({kname})·q({qname})" if cell.trace.columns else f"q({qname})·k({kname})"
    if not rotated and len(q) <= MAX_TERMS:   # every product written: each is a part
        pair = cell.dot(k, q) if cell.trace.columns else cell.dot(q, k)
        return f"= {what} = {pair} = {cell.f(cell.value)}"
    found = parts(q, k, cell.scenario.rope if rotated else None)
    return f"= {what} = {_written(cell, q, k, found)} = {cell.f(cell.value)}{_why(cell, found, rotated)}"


def _written(cell, q, k, found) -> str:
    f = cell.f
    def one(label, feats, value):
        products = " + ".join(f"{f(q[i])}×{f(k[i])}" for i in feats)
        return f"{f(value)} ({label}: {products})" if len(found) > MAX_TERMS else \
            (f"({products})" if len(feats) > 1 else products)
    if len(found) <= MAX_TERMS:
        return " + ".join(one(*p) for p in found) + " = " + " + ".join(f(p[2]) for p in found)
    order = sorted(range(len(found)), key=lambda n: -abs(found[n][2]))
    shown, rest = order[:SHOWN], order[SHOWN:]
    rest_sum = math.fsum(found[n][2] for n in rest)
    return " + ".join(one(*found[n]) for n in shown) + f" + ({len(rest)} more parts, summing to {f(rest_sum)})"


def _why(cell, found, rotated: bool) -> str:
    count = len(found)
    if rotated:
        spec = cell.scenario.rope
        how = "(i, i + d/2)" if spec["style"] == "half" else "(2i, 2i + 1)"
        said = f"one part per rotary pair {how}, each turned by p·θ in q and in k: its part depends on the tokens' distance"
    else:
        said = "one part per feature, q_i·k_i"
    largest = f"; the {SHOWN} largest of {count} written first" if count > MAX_TERMS else ""
    return f"   ({said}{largest})"
