"""An additive mask: a number added to each scaled score before the softmax, −∞ hiding the key
(PyTorch's float `attn_mask` of scaled_dot_product_attention, T5's and ALiBi's biases written out).
A 0/1 mask is its special case, 0 or −∞; this one can differ per head and favour keys gently.

It lives in the `masked` step: masked = (the scores as the mask would see them) + M_h, −∞ where
the mask or M hides the key; kernels/stages.attend adds it before the mask, and the powers, sums,
weights and z follow from it as without it. Read here (`score_bias`, one matrix or one per head) and
explained here."""
from __future__ import annotations

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from .declaration import Mechanism

NAME = "score_bias"


def read(scenario, data: dict) -> dict:
    sc = scenario
    return {"score_bias": matrices(data.get(NAME), sc.heads, sc.n, sc.m, sc.layout)}


def matrices(value, heads: int, n: int, m: int, layout: str) -> np.ndarray | None:
    """heads × query × key (rows orientation) from one matrix for all heads or one per head,
    written like the layout's scores; numbers or −∞ (+∞ and NaN are refused)."""
    if value is None:
        return None
    try:
        a = np.asarray(value)
    except ValueError:   # ragged rows
        a = np.empty(0, object)
    axes = "query × key" if layout == "rows" else "key × query"
    want = (n, m) if layout == "rows" else (m, n)
    if a.dtype.kind not in "iuf" or a.ndim not in (2, 3):
        raise ScenarioError(NAME, f"expected a {want[0]} × {want[1]} matrix of numbers or -inf ({axes}), or one per "
                            f"head, got {kind(value)}" + ("; a 0/1 mask goes in mask" if a.dtype.kind == "b" else ""))
    a = a.astype(np.float64)
    stack = a[None] if a.ndim == 2 else a
    if stack.shape[1:] != want or stack.shape[0] not in (1, heads):
        raise ScenarioError(NAME, f"expected a {want[0]} × {want[1]} matrix ({axes}), or {heads} of them (one per "
                            f"head), got shape {a.shape}")
    bad = np.isnan(stack) | (stack == np.inf)
    if bad.any():
        at = "".join(f"[{i}]" for i in np.argwhere(bad)[0][-a.ndim:])
        raise ScenarioError(NAME + at, f"expected a number or -inf (which hides the key), got {a[tuple(np.argwhere(bad)[0][-a.ndim:])]}")
    rows = stack if layout == "rows" else stack.transpose(0, 2, 1)
    return np.ascontiguousarray(np.broadcast_to(rows, (heads, *rows.shape[1:])))


def hidden(trace, h: int) -> np.ndarray:
    """query × key: True where head h's query may not see the key (the mask, or M_h = −∞)."""
    bias = np.isneginf(trace.scenario.score_bias[h])
    return bias if trace.allowed is None else bias | ~trace.allowed


def formula(ctx) -> str:
    extra = ", and −∞ where the mask forbids the key" if not (isinstance(ctx.mask, str) and ctx.mask == "none") else ""
    return (f"S + M   (M: the additive mask, one number per query and key as SDPA's float attn_mask; "
            f"−∞ hides the key{extra})")


def explain(cell) -> str:
    s = cell.rows(cell.step.inputs[0])[cell.i, cell.j]
    b = float(cell.scenario.score_bias[cell.step.head][cell.i, cell.j])
    query, key = cell.token(cell.i), cell.key_token(cell.j)
    if cell.trace.allowed is not None and not cell.trace.allowed[cell.i, cell.j]:
        return f"= −∞   (key {key} is hidden by the mask from query {query}: masked)"
    if b == -np.inf:
        return f"= −∞   (the additive mask M is −∞ for query {query}, key {key}: masked)"
    return (f"= {cell.f(s)} + M[{query},{key}] = {cell.f(s)} + {cell.f(b)} = {cell.f(cell.value)}   "
            f"(the additive mask's number for this query and key)").replace("+ −", "− ").replace("+ -", "− ")


# an additive mask (one matrix or one per head, −∞ hiding a key): given, per head (its numbers are
# the trace's input); its step is the mask's (steps/scores.masked)
DECLARATION = Mechanism(
    NAME, "an additive mask", field=NAME, label=NAME, keys=(NAME,), read=read, arguments={NAME: NAME},
    describe=lambda sc: True, fused=False, online=False, decode=False, hides=hidden,
    texts={"masked.formula": formula, "masked.explain": explain})
