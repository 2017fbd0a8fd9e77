"""DeepSeek V4's steps: how x mixed the residual streams (`hc.pre`), the pooled entries (`pool.weights`,
`pool.k`) and, on sparse layers, the indexer's scores and choice over them (`idx.scores`,
`idx.selected`: query × entry) before the heads; each head's queries (`q_rot`, turned), the one
key/value head (`k`: the tokens', then the entries'); after the weights, z_rot = A·V (still turned)
and z (its last r features turned back at the query's position); after the heads, the grouped
output projection (`o_groups`, then `out`). The steps between (scores … weights, the sink) are the
layer's own, over n + E keys."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from ...steps.output import _z_explain, _z_sources, last_head_output
from ..indexer import topk


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


def shape(c: dict) -> Shape:
    e, s, _ = c["pool_weights"].shape
    return Shape(c["kind"], e, s, c["streams"], c["groups"], len(c["w_a"]) // c["groups"], 2 * c["theta"].shape[1],
                 c["index"] is not None, c["w_qb"].shape[1])


def axes(dims) -> dict:
    """The sizes of its steps' own axes (0 without it)."""
    s = dims.of("compressed")
    if s is None:
        return dict(entry=0, entry_slot=0, stream=0, group_feature=0, q_rank=0)
    return dict(entry=s.entries, entry_slot=s.entries * s.slots, stream=s.streams, group_feature=s.groups * s.group_rank,
                q_rank=s.q_rank)


def on(ctx) -> bool:
    return ctx.dims.of("compressed") is not None


def _pooling(ctx) -> bool:
    return on(ctx) and ctx.dims.of("compressed").entries > 0


def _c(cell) -> dict:
    return cell.scenario.compressed


def pooled(cell, e: int) -> str:
    """`entry 2 pools tokens a…h (series a of a…d, series b of e…h)`, from its slots' tokens."""
    src, name = _c(cell)["sources"][e], cell.token
    real = src[src >= 0]
    words = f"entry {e} pools tokens {name(real[0])}…{name(real[-1])}"
    if len(src) == len(real) * 2:   # entry 0 of the overlapping kind: its first half is empty
        return words + " (series b of its own window; entry 0 has no window before it)"
    if len(src) % 2 == 0 and _c(cell)["kind"] == "compressed_sparse_attention":
        half = len(src) // 2
        return words + (f" (series a of tokens {name(src[0])}…{name(src[half - 1])}, series b of tokens "
                        f"{name(src[half])}…{name(src[-1])})")
    return words


def _turn(cell, before: np.ndarray, sign: int) -> str:
    """A turned feature's story: a·cos(±pθ) ∓ b·sin(±pθ) from the row `before` the turn."""
    d, theta, j = before.size, _c(cell)["theta"][cell.at], cell.j
    r = 2 * theta.size
    if j < d - r:
        return f"= {cell.f(before[j])}   (the first {d - r} features carry no position: not turned)"
    k = (j - (d - r)) // 2
    a, b, angle = before[d - r + 2 * k], before[d - r + 2 * k + 1], f"{sign * theta[k]:.4g}".replace("-", "−")
    parts = (f"{cell.f(a)}·cos({angle}) − {cell.f(b)}·sin({angle})" if j % 2 == (d - r) % 2 else
             f"{cell.f(b)}·cos({angle}) + {cell.f(a)}·sin({angle})")
    return f"= {parts} = {cell.f(cell.value)}   (pair {k} of the last {r} features, position {cell.at})"


# ------------------------------------------------------------------ before the heads

register(Kind(
    "hc.pre", "Streams mixed into x", ("token", "stream"), "input",
    "DeepSeek V4 carries N residual streams a token, not one. Before the attention, a hyper-connection weighs "
    "them: x, the attention's input, is Σ_j pre_j·X_j.",
    formula=lambda ctx: "pre = σ(s_pre·(RMSNorm(X_1‖…‖X_N)·F_pre) + b_pre) + ε;  x = Σ_j pre_j·X_j",
    explain=lambda cell: (f"= {cell.f(cell.value)}   (how much stream {cell.j} of token {cell.token(cell.i)} "
                          "enters x)"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=on), after="x")

register(Kind(
    "compressed_c_q", "Compressed queries", ("token", "q_rank"), "input",
    "DeepSeek V4 squeezes each token's normed input through a low-rank W_QA and RMS-norms it (with a gain): every "
    "head's query is read from this c_q.",
    formula=lambda ctx: "C_Q = RMSNorm(N·W_QA)·g",
    explain=lambda cell: f"= {cell.f(cell.value)}   (token {cell.token(cell.i)}'s compressed query, for every head)",
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=on, short="c_q"), after="norm_in")

register(Kind(
    "pool.weights", "Pooling weights", ("entry_slot", "d_k"), "input",
    "Every m tokens become one compressed entry: a softmax over its slots, feature by feature, says how much "
    "each token's projection counts in it. Row e·S + s is slot s of entry e.",
    formula=lambda ctx: "W[e,s] = softmax over the slots s of Z[e,s] + B[s], per feature  (Z = h·W_Z, B learned)",
    explain=lambda cell: _slot(cell), sources=lambda cell: {}, inputs=lambda ctx, h: [], present=_pooling),
    after="compressed_c_q")


def _slot(cell) -> str:
    c = _c(cell)
    e, s = divmod(cell.i, c["pool_weights"].shape[1])
    t = c["sources"][e, s]
    if t < 0:
        return f"= 0   (slot {s} of entry {e} is empty: entry 0 has no window before it)"
    return (f"= {cell.f(cell.value)}   (slot {s} of entry {e}: token {cell.token(t)}; {pooled(cell, e)}; "
            "an entry's weights of one feature sum to 1)")


register(Kind(
    "pool.k", "Compressed entries", ("entry", "d_k"), "input",
    "The compressed entries are keys (and values) too: each sums its tokens' projections C with the pooling "
    "weights, then is RMS-normed and turned at its window's first token.",
    formula=lambda ctx: "pool.k[e] = RoPE_last r(RMSNorm(Σ_s W[e,s] ⊙ C[e,s])·g), at position e·m",
    explain=lambda cell: (f"= {cell.f(cell.value)}   ({pooled(cell, cell.i)}: Σ weight·C over its slots, "
                          f"normed, turned at position {cell.i * _c(cell)['m']})"),
    sources=lambda cell: {"pool.weights": [(cell.i * _c(cell)["pool_weights"].shape[1] + s, cell.j)
                                           for s in range(_c(cell)["pool_weights"].shape[1])]},
    inputs=lambda ctx, h: ["pool.weights"], present=_pooling), after="pool.weights")


def _index_story(cell) -> str:
    c, i, e = _c(cell), cell.i, cell.j
    scores = c["index"]["scores"]
    if not np.isfinite(scores[i, e]):
        return (f"= −∞   ({pooled(cell, e)}, and query {cell.token(i)} has seen only up to token "
                f"{cell.token(i)}: the entry is not complete)")
    why = topk.reason(scores, c["index"]["selected"], c["topk"], i, e, cell.f, "entry")
    return f"= {cell.f(cell.value)}   ({why})"


register(Kind(
    "entry_scores", "Index scores of the entries", ("query", "entry"), "input",
    "On a compressed sparse layer a lightning indexer (its own pool of entries, its own small heads) scores every "
    "complete entry for every query; each query then reads only its top k entries.",
    formula=lambda ctx: "I[t,e] = Σ_h w[t,h]·ReLU(q[t,h]·k[e])·scale, for the entries complete at t (else −∞)",
    explain=_index_story, sources=lambda cell: {}, inputs=lambda ctx, h: [],
    present=lambda ctx: _pooling(ctx) and ctx.dims.of("compressed").indexed, short="idx.scores"), after="pool.k")

register(Kind(
    "entry_selected", "Entries selected", ("query", "entry"), "input",
    "Each query keeps the k entries its index scores rank best; the heads' masks hide the others (weight exactly 0).",
    formula=lambda ctx: "1 for the k best index scores of each query (all while it sees k or fewer), else 0",
    explain=lambda cell: f"= {int(cell.value)}   ({_index_story(cell).partition('(')[2].rstrip(')')})",
    sources=lambda cell: {"idx.scores": [(cell.i, cell.j)]}, inputs=lambda ctx, h: ["idx.scores"],
    present=lambda ctx: _pooling(ctx) and ctx.dims.of("compressed").indexed, short="idx.selected",
    tip="compare this entry's index score with the k-th best of the row"), after="entry_scores")


# ------------------------------------------------------------------ the heads

register(Kind(
    "compressed_q_proj", "Queries", ("token", "d_k"), "head",
    "A query is what a token is looking for: its compressed query c_q through the head's W_QB.",
    formula=lambda ctx: "Q = C_Q·W_QB,h", inputs=lambda ctx, h: ["c_q"],
    explain=lambda cell: cell.project(cell.rows("c_q"), _c(cell)["w_qb"][cell.step.head], "W_QB",
                                      f"c_q({cell.token(cell.i)})"),
    sources=lambda cell: whole_row("c_q", cell.i, cell.rows("c_q").shape[1]), present=on, short="q", chain="query",
    tip=PRODUCTS), after="q")


def _norm_explain(cell) -> str:
    row = cell.rows(cell.step.inputs[0])[cell.i]
    return (f"= {cell.f(row[cell.j])} ÷ √({float(np.mean(row * row)):.4g} + {_c(cell)['eps']:g}) = "
            f"{cell.f(cell.value)}   (the root mean square of the head's query, no gain)")


register(Kind(
    "compressed_q_norm", "Queries, normed", ("token", "d_k"), "head",
    "Each head's query is RMS-normed without a gain: its scale is set before the turn and the scores.",
    formula=lambda ctx: "q ÷ √(mean(q²) + ε), per token", explain=_norm_explain,
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    inputs=lambda ctx, h: [ctx.sid("compressed_q_proj", h)], present=on, short="q_norm", chain="query",
    tip="divide by the root of the mean of the row's squares plus ε"), after="compressed_q_proj")


def _pair(cell) -> list[tuple[int, int]]:
    """The cells a turned feature reads: its pair (or itself, past the turned ones)."""
    d, r, j = cell.scenario.d_k, 2 * _c(cell)["theta"].shape[1], cell.j
    if j < d - r:
        return [(cell.i, j)]
    first = j - (j - (d - r)) % 2
    return [(cell.i, first), (cell.i, first + 1)]


register(Kind(
    "compressed_q", "Queries, turned", ("token", "d_k"), "head",
    "The last r features of each query turn by the token's position (interleaved pairs), as the keys' do: a "
    "score then depends on how far apart the tokens are.",
    formula=lambda ctx: "RoPE_last r(q_norm): pair i turned by p·θ_i",
    explain=lambda cell: _turn(cell, cell.rows(cell.step.inputs[0])[cell.i], 1),
    sources=lambda cell: {cell.step.inputs[0]: _pair(cell)},
    inputs=lambda ctx, h: [ctx.sid("compressed_q_norm", h)], present=on, short="q_rot", chain="query",
    tip="a·cos − b·sin for the first of a pair, b·cos + a·sin for the second"), after="compressed_q_norm")


def _key_explain(cell) -> str:
    n = cell.scenario.n
    if cell.i < n:
        return (f"= {cell.f(cell.value)}   (token {cell.token(cell.i)}'s key and value: RMSNorm(h·W_KV)·g, its "
                f"last features turned at position {cell.i})")
    return f"= pool.k[{cell.i - n}, {cell.j}] = {cell.f(cell.value)}   ({pooled(cell, cell.i - n)})"


register(Kind(
    "compressed_k", "Keys: the tokens', then the entries'", ("key", "d_k"), "kv",
    "One key/value head serves every query head: the window's tokens (RMSNorm(h·W_KV)·g, turned), then the "
    "compressed entries. The values are these keys.",
    formula=lambda ctx: "K = [RoPE_last r(RMSNorm(h·W_KV)·g); pool.k]   (tokens, then entries)",
    explain=_key_explain,
    sources=lambda cell: ({"pool.k": [(cell.i - cell.scenario.n, cell.j)]}
                          if cell.i >= cell.scenario.n and "pool.k" in cell.step.inputs else {}),
    inputs=lambda ctx, h: ["pool.k"] if ctx.has("pool.k") else [], present=on, short="k", chain="key"),
    after="k")

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
    explain=lambda cell: _turn(cell, cell.rows(cell.step.inputs[0])[cell.i], -1),
    sources=lambda cell: {cell.step.inputs[0]: _pair(cell)},
    inputs=lambda ctx, h: [ctx.sid("z_rot", h)], present=on, short="z"), after="z_rot")


# ------------------------------------------------------------------ after the heads

def _group_explain(cell) -> str:
    c = _c(cell)
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
                          f"{cell.dot(cell.rows('o_groups')[cell.i], _c(cell)['w_b'][cell.j])} = {cell.f(cell.value)}"),
    sources=lambda cell: whole_row("o_groups", cell.i, cell.rows("o_groups").shape[1]),
    inputs=lambda ctx, h: ["o_groups"], present=on, short="out", chain="output", tip=PRODUCTS), after="o_groups")


# ------------------------------------------------------------------ the mask's words

def hidden(cell) -> str | None:
    """h{h}.masked's story of a hidden key: outside the window, an entry not complete, or not selected."""
    i, j, n, c = cell.i, cell.j, cell.scenario.n, _c(cell)
    if cell.trace.allowed[i, j]:
        return None
    if j < n:
        where = "comes after the query" if j > i else f"is outside the window of the last {c['window']} tokens"
        return f"= −∞   (token {cell.token(j)} {where} {cell.token(i)}: masked)"
    e = j - n
    if (i + 1) // c["m"] <= e:
        return (f"= −∞   ({pooled(cell, e)}, and query {cell.token(i)} has seen only up to token "
                f"{cell.token(i)}: not complete)")
    why = topk.reason(c["index"]["scores"], c["index"]["selected"], c["topk"], i, e, cell.f, "entry")
    return f"= −∞   (the indexer dropped entry {e} for query {cell.token(i)}: {why.removeprefix('dropped: ')})"


def masked_formula(ctx) -> str:
    s = ctx.dims.of("compressed")
    more = "" if s.kind == "sliding_attention" else ", on entries not complete yet"
    more += " and on entries the indexer did not keep (idx.selected)" if s.indexed else ""
    return f"S, with −∞ outside the window of the last tokens (sliding){more}"
