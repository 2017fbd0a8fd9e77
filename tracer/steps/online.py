"""The online softmax of FlashAttention, block by block: the keys in blocks of B, each query's
running max and running sums, and a running output rescaled whenever the max grows."""
from __future__ import annotations

import math

import numpy as np

from ..ids import parse, step_id
from ..printing import divisor
from .base import Kind, register
from .cell import MAX_TERMS
from .softmax import _base


def online(ctx) -> bool:
    return ctx.arithmetic.online


def blocks(keys: int, block: int) -> list[tuple[int, int]]:
    """(first key, keys in it) of each block: the last one is shorter when B does not divide m."""
    return [(j0, min(block, keys - j0)) for j0 in range(0, keys, block)]


def _prev(cell, kind: str) -> str | None:
    """The same kind one block earlier (None in block 0)."""
    ref = parse(cell.step.id)
    return None if ref.block == 0 else step_id(kind, ref.head, block=ref.block - 1, token=ref.token,
                                               prefill=ref.prefill)


def _at(cell, kind: str, col: int = 0) -> float:
    """This query's value in another step of the same block (or of the previous one, `prev.…`)."""
    sid = cell.sid(kind) if not kind.startswith("prev.") else _prev(cell, kind[5:])
    if sid is None:
        return {"max": -math.inf, "sums": 0.0, "acc": 0.0}[kind[5:]]
    return cell.rows(sid)[cell.i, col]


def _inputs(*kinds: str):
    """The ids a block step reads: kinds of this block, `prev.` kinds of the block before, q, k, v."""
    def inputs(ctx, h, j) -> list[str]:
        got = []
        for kind in kinds:
            if kind in ("q", "k", "v"):
                got.append(ctx.latest(h, {"q": "query", "k": "key", "v": "value"}[kind], "blk_scores"))
            elif kind.startswith("prev."):
                got += [step_id(kind[5:], h, block=j - 1)] if j > 0 else []
            else:
                got.append(step_id(kind, h, block=j))
        return got
    return inputs


def _block_kind(name: str, title: str, axes, why: str, formula, explain, sources, inputs) -> Kind:
    return register(Kind(f"blk_{name}", title, axes, "block", why, formula, explain, sources, inputs,
                         present=online, short=name))


def _scores_explain(cell) -> str:
    q, k = cell.step.inputs[:2]
    key = cell.starts[1] + cell.j
    raw = float(np.dot(cell.rows(q)[cell.i].astype(np.float64), cell.rows(k)[key].astype(np.float64)))
    qn, kn = cell.names()
    if cell.value == -math.inf:
        return f"= −∞   (query {qn} may not see key {kn}: masked)"
    a, f = cell.arithmetic, cell.f
    c = a.scale_divisor(cell.scenario.d_k)
    dot = f"{qn}·{kn} = {f(raw)}"
    if c is None:
        return f"= {dot}"
    if a.scale == "floor":
        return f"= ⌊{qn}·{kn} ÷ {c:g}⌋ = ⌊{f(raw)} ÷ {c:g}⌋ = {f(cell.value)}"
    return f"= {dot}, ÷ {c:.4g} = {f(cell.value)}"


_block_kind(
    "scores", "Block scores", ("query", "key"),
    "Online softmax never forms the whole score matrix: the keys come in blocks of B, and each "
    "block's scores (scaled and masked as usual) are used and forgotten before the next.",
    lambda ctx: ("⌊Kᵀ_blk·Q ÷ c⌋, masked" if ctx.arithmetic.scale == "floor" else "Kᵀ_blk·Q, scaled and masked")
    if ctx.columns else ("⌊Q·K_blkᵀ ÷ c⌋, masked" if ctx.arithmetic.scale == "floor" else "Q·K_blkᵀ, scaled and masked"),
    _scores_explain,
    lambda cell: {cell.step.inputs[0]: [(cell.i, m) for m in range(cell.rows(cell.step.inputs[0]).shape[1])],
                  cell.step.inputs[1]: [(cell.starts[1] + cell.j, m)
                                        for m in range(cell.rows(cell.step.inputs[1]).shape[1])]},
    _inputs("q", "k"))


def _max_explain(cell) -> str:
    if not cell.arithmetic.stable:
        return "= 0   (stable=false: no max is subtracted, so the powers never need rescaling)"
    row, old, f = cell.rows(cell.sid("scores"))[cell.i], _at(cell, "prev.max"), cell.f
    shown = ", ".join(f(v) for v in row[:MAX_TERMS]) + (", …" if len(row) > MAX_TERMS else "")
    return f"= max(m_old {f(old)}, {shown}) = {f(cell.value)}   (the largest score {cell.names()[0]} has met so far)"


_block_kind(
    "max", "Running max", ("query", "one"),
    "Each query keeps the largest score seen so far. Powers are taken relative to it, so none "
    "can overflow; when a later block brings a larger score, everything summed so far is rescaled.",
    lambda ctx: "m ← max(m_old, max of the block's scores)" if ctx.arithmetic.stable else "0   (stable=false)",
    _max_explain,
    lambda cell: {**({_prev(cell, "max"): [(cell.i, 0)]} if _prev(cell, "max") else {}),
                  cell.sid("scores"): [(cell.i, m) for m in range(cell.rows(cell.sid("scores")).shape[1])]},
    _inputs("scores", "prev.max"))


def _rescale_explain(cell) -> str:
    if not cell.arithmetic.stable:
        return "= 1   (stable=false: the max stays 0, nothing to rescale)"
    old, new, f, base = _at(cell, "prev.max"), _at(cell, "max"), cell.f, _base(cell.arithmetic)
    if old == new:
        return f"= 1   (the max did not change: {f(new)})"
    if old == -math.inf:
        return f"= {base}^(−∞ − {f(new)}) = 0   (no key seen before: nothing to rescale)"
    return (f"= {base}^(m_old − m_new) = {base}^({f(old)} − {f(new)}) = {cell.fa(cell.value)}   "
            "(what the sums and output so far are multiplied by)")


_block_kind(
    "rescale", "Rescale factor", ("query", "one"),
    "When the running max grows from m_old to m_new, every power summed so far was taken relative to "
    "the old max and is too large by base^(m_new − m_old): multiplying by base^(m_old − m_new) fixes it.",
    lambda ctx: f"{_base(ctx.arithmetic)}^(m_old − m_new)" if ctx.arithmetic.stable else "1   (stable=false)",
    _rescale_explain,
    lambda cell: {**({_prev(cell, "max"): [(cell.i, 0)]} if _prev(cell, "max") else {}), cell.sid("max"): [(cell.i, 0)]},
    _inputs("max", "prev.max"))


def _powers_explain(cell) -> str:
    s, m, f, base = cell.rows(cell.sid("scores"))[cell.i, cell.j], _at(cell, "max"), cell.f, _base(cell.arithmetic)
    if s == -math.inf:
        return f"= {base}^−∞ = 0   (masked)"
    if not cell.arithmetic.stable:
        return f"= {base}^{f(s)} = {cell.fa(cell.value)}"
    return f"= {base}^(s − m) = {base}^({f(s)} − {f(m)}) = {cell.fa(cell.value)}"


_block_kind(
    "powers", "Block powers", ("query", "key"),
    "The block's scores raised to the base, relative to the running max (raw powers when stable=false).",
    lambda ctx: f"{_base(ctx.arithmetic)}^(s − m)" if ctx.arithmetic.stable else f"{_base(ctx.arithmetic)}^s",
    _powers_explain,
    lambda cell: {cell.sid("scores"): [(cell.i, cell.j)], cell.sid("max"): [(cell.i, 0)]},
    _inputs("scores", "max"))


def _terms(values, f) -> str:
    return " + ".join(f(v) for v in values[:MAX_TERMS]) + (" + …" if len(values) > MAX_TERMS else "")


def _sums_explain(cell) -> str:
    p, f = cell.rows(cell.sid("powers"))[cell.i], cell.f
    new = f"({_terms(p, f)})"
    if _prev(cell, "sums") is None:
        return f"= Σ this block's powers = {new} = {cell.fa(cell.value)}"
    r, old = _at(cell, "rescale"), _at(cell, "prev.sums")
    return f"= rescale × sums_old + Σ powers = {f(r)} × {f(old)} + {new} = {cell.fa(cell.value)}"


def _carry_sources(kind: str):
    def sources(cell) -> dict:
        width = cell.rows(cell.sid("powers")).shape[1]
        got = {cell.sid("rescale"): [(cell.i, 0)]}
        if _prev(cell, kind):
            got[_prev(cell, kind)] = [(cell.i, 0 if kind == "sums" else cell.j)]
        got[cell.sid("powers")] = [(cell.i, m) for m in range(width)]
        if kind == "acc":
            v, j0 = cell.step.inputs[-1], _first_key(cell)
            got[v] = [(j0 + m, cell.j) for m in range(width)]
        return got
    return sources


def _first_key(cell) -> int:
    return parse(cell.step.id).block * cell.arithmetic.block


_block_kind(
    "sums", "Running sums", ("query", "one"),
    "Each query's sum of powers so far, shrunk by the rescale factor whenever the max grew, plus "
    "this block's powers. After the last block it is the softmax denominator.",
    lambda ctx: "ℓ ← rescale × ℓ_old + Σ powers",
    _sums_explain, _carry_sources("sums"), _inputs("rescale", "prev.sums", "powers"))


def _acc_explain(cell) -> str:
    p, f = cell.rows(cell.sid("powers"))[cell.i], cell.f
    j0 = _first_key(cell)
    v = cell.rows(cell.step.inputs[-1])[j0:j0 + len(p), cell.j]
    base = _base(cell.arithmetic)
    new = f"({cell.dot(p, v)})"
    if _prev(cell, "acc") is None:
        return f"= powers·V_blk[:, {cell.j}] = {new} = {cell.fa(cell.value)}"
    r, old, m_old, m_new = _at(cell, "rescale"), _at(cell, "prev.acc", cell.j), _at(cell, "prev.max"), _at(cell, "max")
    scale = f"{base}^({f(m_old)} − {f(m_new)})" if cell.arithmetic.stable else "1"
    return (f"acc ← acc·{base}^(m_old − m_new) + powers·V_blk = {f(old)}·{scale} + {new} = "
            f"{f(old)}·{f(r)} + {f(float(np.dot(p, v)))} = {cell.fa(cell.value)}")


_block_kind(
    "acc", "Running output", ("query", "d_v"),
    "The output so far, not yet divided by the sums: rescaled like the sums, plus this block's powers "
    "times this block's values. No weight matrix is ever stored.",
    lambda ctx: "acc ← rescale × acc_old + powers·V_blk" if not ctx.columns else "acc ← rescale × acc_old + V_blk·powers",
    _acc_explain, _carry_sources("acc"), _inputs("rescale", "prev.acc", "powers", "v"))


# ---------------------------------------------------------------- z under online

def z_inputs(ctx, h) -> list[str]:
    last = len(blocks(ctx.dims.keys, ctx.arithmetic.block)) - 1
    return [step_id("acc", h, block=last), step_id("sums", h, block=last)]


def z_explain(cell) -> str:
    acc, sums = (cell.rows(sid) for sid in cell.step.inputs)
    a, s = acc[cell.i, cell.j], sums[cell.i, 0]
    if s == 0:
        return "= 0   (every key is masked for this query)"
    return f"= acc ÷ sums = {cell.f(a)} ÷ {divisor(cell.f(s))} = {cell.fa(cell.value)}   (the same as A·V, never forming A)"


def z_sources(cell) -> dict:
    acc, sums = cell.step.inputs
    return {acc: [(cell.i, cell.j)], sums: [(cell.i, 0)]}
