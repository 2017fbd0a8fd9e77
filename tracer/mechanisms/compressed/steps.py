"""DeepSeek V4's steps from the heads on (those before them: before.py): each head's queries (`q`,
`q_norm`, `q_rot`), the one key/value head (`kv`, `kv_norm`, `kv_rot`, then `k`: the tokens', then
the entries'); after the weights, z_rot = A·V (still turned) and z (its last r features turned back
at the query's position); after the heads, the grouped output projection (`o_groups`, then `out`).
The steps between (scores … weights, the sink) are the layer's own, over n + E keys."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from ...steps.output import _z_explain, _z_sources, last_head_output
from ..indexer import topk
from .before import on, pooled, section


class Shape(NamedTuple):
    """What a plan depends on of a V4 layer."""
    kind: str
    entries: int
    slots: int
    streams: int
    groups: int
    group_rank: int
    rope: int          # r: the last r features of a head turn
    indexed: bool
    q_rank: int        # c_q's width
    streamed: bool     # the streams entering and the hyper-connection's post and comb are given
    index_heads: int   # the indexer's heads and their width (0 without one)
    d_index: int
    pool_width: int    # C's and Z's columns (2D with overlapping windows; 0 on a sliding layer)


def shape(c: dict) -> Shape:
    e, s = c["entries"], c["sources"].shape[1]
    return Shape(c["kind"], e, s, c["streams"], c["groups"], len(c["w_a"]) // c["groups"], 2 * c["theta"].shape[1],
                 c["index"] is not None, c["w_qb"].shape[1], c["x_streams"] is not None,
                 *((c["index"]["w"].shape[1], c["index"]["k"].shape[1]) if c["index"] is not None else (0, 0)),
                 0 if c["pool"] is None else c["pool"]["w_c"].shape[1])


def axes(dims) -> dict:
    """The sizes of its steps' own axes (0 without it), and its indexer's."""
    s = dims.of("compressed")
    if s is None:
        return dict(entry=0, entry_slot=0, stream=0, group_feature=0, q_rank=0, token_stream=0, pool_width=0)
    got = dict(entry=s.entries, entry_slot=s.entries * s.slots, stream=s.streams, pool_width=s.pool_width,
               group_feature=s.groups * s.group_rank, q_rank=s.q_rank, token_stream=dims.n * s.streams)
    if s.indexed:   # its indexer's axes (those of V3.2's when it has none)
        got.update(index_feature=s.index_heads * s.d_index, d_index=s.d_index, index_head=s.index_heads)
    return got


def turn_story(cell, before: np.ndarray, sign: int, theta: np.ndarray | None = None,
               position: int | None = None) -> str:
    """A turned feature's story: a·cos(±pθ) ∓ b·sin(±pθ) from the row `before` the turn, at the cell's
    token (or at `position`, by the angles `theta`: an entry's first token)."""
    theta = section(cell)["theta"][cell.at] if theta is None else theta
    position = cell.at if position is None else position
    d, j = before.size, cell.j
    r = 2 * theta.size
    if j < d - r:
        return f"= {cell.f(before[j])}   (the first {d - r} features carry no position: not turned)"
    k = (j - (d - r)) // 2
    a, b, angle = before[d - r + 2 * k], before[d - r + 2 * k + 1], f"{sign * theta[k]:.4g}".replace("-", "−")
    f = lambda v: f"({cell.f(v)})" if v < 0 else cell.f(v)  # noqa: E731  (a − (−b), not a − −b)
    parts = (f"{cell.f(a)}·cos({angle}) − {f(b)}·sin({angle})" if j % 2 == (d - r) % 2 else
             f"{cell.f(b)}·cos({angle}) + {f(a)}·sin({angle})")
    return f"= {parts} = {cell.f(cell.value)}   (pair {k} of the last {r} features, position {position})"


# ------------------------------------------------------------------ the heads

register(Kind(
    "compressed_q_proj", "Queries", ("token", "d_k"), "head",
    "A query is what a token is looking for: its compressed query c_q through the head's W_QB.",
    formula=lambda ctx: "Q = C_Q·W_QB,h", inputs=lambda ctx, h: ["c_q"],
    explain=lambda cell: cell.project(cell.rows("c_q"), section(cell)["w_qb"][cell.step.head], "W_QB",
                                      f"c_q({cell.token(cell.i)})"),
    sources=lambda cell: whole_row("c_q", cell.i, cell.rows("c_q").shape[1]), present=on, short="q", chain="query",
    tip=PRODUCTS), after="q")


def _norm_explain(cell) -> str:
    row = cell.rows(cell.step.inputs[0])[cell.i]
    return (f"= {cell.f(row[cell.j])} ÷ √({float(np.mean(row * row)):.4g} + {section(cell)['eps']:g}) = "
            f"{cell.f(cell.value)}   (the root mean square of the head's query, no gain)")


register(Kind(
    "compressed_q_norm", "Queries, normed", ("token", "d_k"), "head",
    "Each head's query is RMS-normed without a gain: its scale is set before the turn and the scores.",
    formula=lambda ctx: "q ÷ √(mean(q²) + ε), per token", explain=_norm_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [ctx.sid("compressed_q_proj", h)], present=on, short="q_norm", chain="query",
    tip="divide by the root of the mean of the row's squares plus ε"), after="compressed_q_proj")


def pair_cells(cell) -> list[tuple[int, int]]:
    """The cells a turned feature reads: its pair (or itself, past the turned ones)."""
    d, r, j = cell.scenario.d_k, 2 * section(cell)["theta"].shape[1], cell.j
    if j < d - r:
        return [(cell.i, j)]
    first = j - (j - (d - r)) % 2
    return [(cell.i, first), (cell.i, first + 1)]


def _turned(kind: str, title: str, scope: str, why: str, source: str, short: str, **more) -> None:
    """A step that turns the last r features of its input by the token's position (queries, keys)."""
    register(Kind(
        kind, title, ("token", "d_k"), scope, why,
        formula=lambda ctx: f"RoPE_last r({source.removeprefix('compressed_')}): pair i turned by p·θ_i",
        explain=lambda cell: turn_story(cell, cell.rows(cell.step.inputs[0])[cell.i], 1),
        sources=lambda cell: {cell.step.inputs[0]: pair_cells(cell)},
        inputs=lambda ctx, h: [ctx.sid(source, h)], present=on, short=short, **more), after=source)


_turned("compressed_q", "Queries, turned", "head",
        "The last r features of each query turn by the token's position (interleaved pairs), as the keys' do: a "
        "score then depends on how far apart the tokens are.", "compressed_q_norm", "q_rot", chain="query",
        tip="a·cos − b·sin for the first of a pair, b·cos + a·sin for the second")


register(Kind(
    "compressed_kv", "Keys of the tokens", ("token", "d_k"), "kv",
    "One key/value head serves every query head: each token's normed input through W_KV.",
    formula=lambda ctx: "KV = N·W_KV", inputs=lambda ctx, h: [ctx.source()],
    explain=lambda cell: cell.project(cell.rows(cell.step.inputs[0]), section(cell)["w_kv"], "W_KV",
                                      f"{cell.step.inputs[0]}({cell.token(cell.i)})"),
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    present=on, short="kv", tip=PRODUCTS), after="k")


def _kv_norm_explain(cell) -> str:
    row, g = cell.rows(cell.step.inputs[0])[cell.i], section(cell)["kv_gain"][cell.j]
    ms, eps = float(np.mean(row * row)), section(cell)["eps"]
    return (f"= {cell.f(row[cell.j])} ÷ √({ms:.4g} + {eps:g})·{cell.f(g)} = {cell.f(cell.value)}   (the token's "
            "key over its root mean square, times the learned gain)")


register(Kind(
    "compressed_kv_norm", "Keys, normed", ("token", "d_k"), "kv",
    "The key is RMS-normed with a learned gain before its turn.",
    formula=lambda ctx: "KV ÷ √(mean(KV²) + ε)·g, per token", explain=_kv_norm_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [ctx.sid("compressed_kv", h)], present=on, short="kv_norm"), after="compressed_kv")

_turned("compressed_kv_rot", "Keys, turned", "kv",
        "The key's last r features turn by its token's position, as the queries' do; the values, being the keys, "
        "carry the turn too.", "compressed_kv_norm", "kv_rot")


def _key_explain(cell) -> str:
    n = cell.scenario.n
    if cell.i < n:
        return (f"= {cell.step.inputs[0]}[{cell.key_token(cell.i)}, {cell.j}] = {cell.f(cell.value)}   (a token's key "
                "and value)")
    return f"= pool.k[{cell.i - n}, {cell.j}] = {cell.f(cell.value)}   ({pooled(cell, cell.i - n)})"


def _key_sources(cell) -> dict:
    rot, n = cell.step.inputs[0], cell.scenario.n
    return {rot: [(cell.i, cell.j)]} if cell.i < n else {"pool.k": [(cell.i - n, cell.j)]}


register(Kind(
    "compressed_k", "Keys: the tokens', then the entries'", ("key", "d_k"), "kv",
    "The keys every head reads: the tokens' (the window hides all but the last few), then the compressed "
    "entries. The values are these keys.",
    formula=lambda ctx: "K = [kv_rot; pool.k]   (tokens, then entries)", explain=_key_explain, sources=_key_sources,
    inputs=lambda ctx, h: [ctx.sid("compressed_kv_rot", h)] + (["pool.k"] if ctx.has("pool.k") else []),
    present=on, short="k", chain="key"), after="compressed_kv_rot")

register(Kind(
    "z_rot", "Head output, still turned", ("token", "d_v"), "head",
    "Each token's output is the average of the values (the keys) weighted by its attention; the values carried "
    "their keys' turn, so its last r features are still turned.",
    formula=lambda ctx: "Z_rot = A·V", explain=_z_explain, sources=_z_sources,
    inputs=lambda ctx, h: [ctx.sid("weights", h), ctx.sid("v", h)], present=on,
    tip="multiply each value by its weight, then add the products"), after="z")

register(Kind(
    "z_back", "Head output, turned back", ("token", "d_v"), "head",
    "The values carried their keys' turn; turning the output's last r features back by the query's own position "
    "leaves what each key contributed a function of its distance only.",
    formula=lambda ctx: "Z = RoPE_last r(Z_rot, −p·θ)   (turned back at the query's position)",
    explain=lambda cell: turn_story(cell, cell.rows(cell.step.inputs[0])[cell.i], -1),
    sources=lambda cell: {cell.step.inputs[0]: pair_cells(cell)},
    inputs=lambda ctx, h: [ctx.sid("z_rot", h)], present=on, short="z"), after="z_rot")


# ------------------------------------------------------------------ after the heads

def _group_explain(cell) -> str:
    c = section(cell)
    rank, src = len(c["w_a"]) // c["groups"], cell.step.inputs[0]
    g, width = cell.j // rank, c["w_a"].shape[1]
    row = cell.rows(src)[cell.i, g * width:(g + 1) * width]
    heads = cell.scenario.heads // c["groups"]
    return (f"= Σ {src}[{cell.token(cell.i)}, group {g}]·W_a[{cell.j}] = {cell.dot(row, c['w_a'][cell.j])} = "
            f"{cell.f(cell.value)}   (group {g} projects its own {heads} heads only)")


register(Kind(
    "o_groups", "Output, group by group", ("token", "group_feature"), "layer",
    "DeepSeek V4's W_O is grouped: each group of heads is projected on its own (W_a), a block-diagonal matrix, "
    "before W_b mixes the groups.",
    formula=lambda ctx: f"group g: concat[heads of g]·W_a,gᵀ, for the {ctx.dims.of('compressed').groups} groups",
    explain=_group_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [last_head_output(ctx)], present=on, tip=PRODUCTS), after="concat")

register(Kind(
    "grouped_out", "Output projection", ("token", "d_model"), "layer",
    "W_b mixes the groups' projections back into one vector per token, as wide as x.",
    formula=lambda ctx: "O = o_groups·W_bᵀ",
    explain=lambda cell: (f"= Σ o_groups[{cell.token(cell.i)}]·W_b[{cell.j}] = "
                          f"{cell.dot(cell.rows('o_groups')[cell.i], section(cell)['w_b'][cell.j])} = "
                          f"{cell.f(cell.value)}"),
    sources=lambda cell: whole_row("o_groups", cell.i, cell.rows("o_groups").shape[1]),
    inputs=lambda ctx, h: ["o_groups"], present=on, short="out", chain="output", tip=PRODUCTS), after="o_groups")


# ------------------------------------------------------------------ the mask's words

def hidden(cell) -> str | None:
    """h{h}.masked's story of a hidden key: outside the window, an entry not complete, or not selected."""
    i, j, n, c = cell.i, cell.j, cell.scenario.n, section(cell)
    if cell.trace.allowed[i, j]:
        return None
    if j < n:
        where = "comes after the query" if j > i else f"is outside the window of the last {c['window']} tokens"
        return f"= −∞   (token {cell.token(j)} {where} {cell.token(i)}: masked)"
    e = j - n
    if (i + 1) // c["m"] <= e:
        return (f"= −∞   ({pooled(cell, e)}, and query {cell.token(i)} has seen only up to token "
                f"{cell.token(i)}: not complete)")
    why = topk.reason(cell.rows("idx.scores").astype(np.float64), cell.rows("idx.selected") != 0, c["topk"], i, e,
                      cell.f, "entry")
    return f"= −∞   (the indexer dropped entry {e} for query {cell.token(i)}: {why.removeprefix('dropped: ')})"


def masked_formula(ctx) -> str:
    s = ctx.dims.of("compressed")
    more = "" if s.kind == "sliding_attention" else ", on entries not complete yet"
    more += " and on entries the indexer did not keep (idx.selected)" if s.indexed else ""
    return f"S, with −∞ outside the window of the last tokens (sliding){more}"
