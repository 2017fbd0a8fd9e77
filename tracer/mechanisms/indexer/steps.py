"""The lightning indexer's steps, before the heads: idx.q, idx.k, idx.w, idx.scores and
idx.selected; and what the heads' masked scores and weights say about a key it dropped (the
weight a dense head would have given it, the share the kept keys held)."""
from __future__ import annotations

import numpy as np

from ...printing import divisor
from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from . import scores, topk
from .compute import k_of, row_parts, source


def _on(ctx) -> bool:
    return ctx.dims.of("indexer") is not None


def _indexed(ctx) -> bool:
    """An indexer of the layer's own (not a GLM-5 layer reusing the choice before it)."""
    return _on(ctx) and ctx.dims.of("indexer").mode != "shared"


def _given(ctx) -> bool:
    return ctx.dims.of("indexer").mode == "given"


def _turn(ctx) -> str:
    """`RoPE (first 4 features, half pairs) of ` a checkpoint's indexer, "" when it does not turn."""
    shape = ctx.dims.of("indexer")
    return f"RoPE (first {shape.rope_dims} features, {shape.rope_style} pairs) of " if shape.rope_dims else ""


def _q_source(ctx) -> str:
    """What index queries read: a checkpoint's compressed c_q (latent attention's), else x or N."""
    return "c_q" if _given(ctx) and ctx.has("c_q") else source(ctx.present)


def _x(ctx) -> str:
    return {"x": "X", "norm_in": "N"}[source(ctx.present)]


def _product(w: str):
    return lambda ctx: f"{w}·{_x(ctx)}" if ctx.columns else f"{_x(ctx)}·{w}"


def _project(w_key: str, w_name: str, tail=lambda cell: ""):
    def explain(cell) -> str:
        w = cell.scenario.sparse[w_key]
        if w is None:   # a checkpoint's: computed with the earlier blocks, its formula in the step's
            return f"= {cell.f(cell.value)}   (the checkpoint's indexer: {cell.step.formula}){tail(cell)}"
        return cell.project(cell.rows(cell.step.inputs[0]), w, w_name, cell.token(cell.i)) + tail(cell)
    return explain


def _row(cell) -> dict:
    src = cell.step.inputs[0]
    return whole_row(src, cell.i, cell.rows(src).shape[1])


def _feature(cell) -> str:
    d = cell.scenario.sparse["d_index"]
    return f"   (index head {cell.j // d}, feature {cell.j % d})"


register(Kind(
    "idx.q", "Index queries", ("token", "index_feature"), "input",
    "The lightning indexer (DeepSeek V3.2, GLM-5) is a small, cheap attention of its own that decides which "
    "keys each query will read. Its queries: a few index heads of d_I numbers per token, side by side.",
    formula=lambda ctx: (f"idx.q = {_turn(ctx)}C_Q·W_IQ" if _given(ctx) else f"idx.q = {_product('W_IQ')(ctx)}"),
    explain=_project("w_iq", "W_IQ", _feature),
    sources=_row, inputs=lambda ctx, h: [_q_source(ctx)], present=_indexed, tip=PRODUCTS), after="k_pe")

register(Kind(
    "idx.k", "Index keys", ("token", "d_index"), "input",
    "One index key per token, shared by every index head (like multi-query attention's single key).",
    formula=lambda ctx: (f"idx.k = {_turn(ctx)}LayerNorm({_product('W_IK')(ctx)})" if _given(ctx)
                         else f"idx.k = {_product('W_IK')(ctx)}"), explain=_project("w_ik", "W_IK"),
    sources=_row, inputs=lambda ctx, h: [source(ctx.present)], present=_indexed, tip=PRODUCTS), after="idx.q")


def _w_tail(cell) -> str:
    return (f"   (how much query {cell.token(cell.i)} trusts index head {cell.j}; negative: that head's votes, "
            "never negative themselves after the ReLU, count against the key)")


register(Kind(
    "idx.w", "Index head weights", ("token", "index_head"), "input",
    "Each query weighs its index heads: the indexer's score of a key is the heads' votes added with these weights.",
    formula=lambda ctx: (f"idx.w = {_product('W_w')(ctx)} ÷ √H_I" if _given(ctx) else f"idx.w = {_product('W_w')(ctx)}"),
    explain=_project("w_iw", "W_w", _w_tail), sources=_row, inputs=lambda ctx, h: [source(ctx.present)],
    present=lambda ctx: _indexed(ctx) and ctx.dims.of("indexer").weighted, tip=PRODUCTS), after="idx.k")


def _scores_explain(cell) -> str:
    t, s = cell.i, cell.j
    if s > t:
        return f"= −∞   (key {cell.key_token(s)} comes after query {cell.token(t)}: the indexer is causal)"
    q, k, w = row_parts(cell.trace)
    told = scores.story(q, k, w, cell.scenario.sparse["scale"], t, s, cell.f).replace("-", "−")
    index, top = cell.rows("idx.scores").astype(np.float64), k_of(cell.trace)
    if np.isfinite(index[t]).sum() <= top:
        return told + f"   (kept: query {cell.token(t)} sees no more than k = {top} keys)"
    bar = topk.kth_best(index[t:t + 1], top)[0]
    fate = "kept" if cell.rows("idx.selected")[t, s] else "dropped"
    return told + f"   ({fate}: the {topk.nth(top)} best of query {cell.token(t)} is {cell.f(bar)})"


def _scores_formula(ctx) -> str:
    heads = ctx.dims.of("indexer").heads
    w = "w[t,h]·" if ctx.dims.of("indexer").weighted else ""
    return (f"I[t,s] = Σ_h {w}ReLU(q[t,h]·k[s])·scale over the {heads} index head{'s' if heads != 1 else ''}, "
            "for s ≤ t (−∞ for a later key)")


def _scores_sources(cell) -> dict:
    ids = cell.step.inputs
    got = {ids[0]: [(cell.i, c) for c in range(cell.rows(ids[0]).shape[1])],
           ids[1]: [(cell.j, c) for c in range(cell.rows(ids[1]).shape[1])]}
    if len(ids) > 2:
        got[ids[2]] = [(cell.i, c) for c in range(cell.rows(ids[2]).shape[1])]
    return got if cell.j <= cell.i else {}


register(Kind(
    "idx.scores", "Index scores", ("query", "key"), "input",
    "How much the indexer wants each query to read each earlier key: every index head compares the query with "
    "the key, a head that dislikes the key gives 0 (the ReLU), never a vote against, and the heads' votes are "
    "added with the query's weights.",
    formula=_scores_formula, explain=_scores_explain, sources=_scores_sources,
    inputs=lambda ctx, h: ["idx.q", "idx.k"] + (["idx.w"] if ctx.dims.of("indexer").weighted else []),
    present=_indexed,
    tip="for each index head: the dot product of query and key, 0 if negative, times the head's weight; add them"),
    after="idx.w")


def _selected_explain(cell) -> str:
    shared = cell.scenario.sparse["shared"]
    if shared is not None:
        return (f"= {int(cell.value)}   (chosen by layer {shared['layer']}'s indexer: this layer has none and "
                "reuses its choice)")
    index = cell.rows("idx.scores").astype(np.float64)
    keep = cell.rows("idx.selected") != 0
    return f"= {int(cell.value)}   ({topk.reason(index, keep, k_of(cell.trace), cell.i, cell.j, cell.f)})"


register(Kind(
    "idx.selected", "Keys selected", ("query", "key"), "input",
    "Each query keeps the k keys its index scores rank best (all of them while it sees k or fewer); the heads "
    "then read only those: every other key is masked like a later token, so its weight is exactly 0.",
    formula=lambda ctx: "1 for the k best index scores of each query (all of them when it sees k or fewer), "
                        "else 0; equal scores go to the earlier key",
    explain=_selected_explain, sources=lambda cell: {sid: [(cell.i, c) for c in range(cell.scenario.n)]
                                                     for sid in cell.step.inputs},
    inputs=lambda ctx, h: ["idx.scores"] if _indexed(ctx) else [], present=_on,
    tip="compare this key's index score with the k-th best of the row"), after="idx.scores")


# ------------------------------------------------------------------ what the heads say of it

def dropped(cell) -> str | None:
    """h{h}.masked's story of a key the causal mask lets the query see but the indexer dropped."""
    i, j = cell.i, cell.j
    if j > i or cell.rows("idx.selected")[i, j]:
        return None
    shared = cell.scenario.sparse["shared"]
    if shared is not None:
        return (f"= −∞   (layer {shared['layer']}'s indexer dropped key {cell.key_token(j)} for query "
                f"{cell.token(i)}, and this layer reuses its choice; its weight will be exactly 0)")
    index = cell.rows("idx.scores").astype(np.float64)
    why = topk.reason(index, cell.rows("idx.selected") != 0, k_of(cell.trace), i, j, cell.f)
    return (f"= −∞   (the indexer dropped key {cell.key_token(j)} for query {cell.token(i)}: "
            f"{why.removeprefix('dropped: ')})").replace("its weight is 0 in every head", "its weight will be exactly 0")


def dense(cell) -> str:
    """What a dense head would have given this cell: the weight over every key the causal mask
    lets the query see, and the share of those powers the kept keys held ("" when nothing was dropped)."""
    i, j = cell.i, cell.j
    keep = cell.rows("idx.selected")[i] != 0
    seen = np.arange(keep.size) <= i
    if keep[seen].all():
        return ""
    logits = cell.rows(cell.trace.step(cell.sid("masked")).inputs[0])[i].astype(np.float64)
    powers = np.where(seen, cell.arithmetic.base ** (logits - logits[seen].max()), 0.0)
    weight, share = powers[j] / powers.sum(), powers[keep].sum() / powers.sum()
    if not keep[j]:
        return f"   (dropped by the indexer: dense attention would give {cell.f(weight)})"
    many = int(keep.sum())
    return (f"   (dense attention would give {cell.f(weight)}: the {many} kept key{'s' if many != 1 else ''} held "
            f"{cell.f(share)} of the powers, and now share all of it: {cell.f(weight)} ÷ {divisor(cell.f(share))})")
