"""DeepSeek V4's steps before the heads: how x mixed the residual streams (`hc.pre`), the compressed
queries (`q_a`, `c_q`) and, on sparse layers, the indexer over the entries (`idx.q`, `idx.k`,
`idx.w`, then `idx.scores` and `idx.selected`: query × entry); and the words that name an entry's
tokens, which the other steps use too. The pooled entries themselves: entries.py."""
from __future__ import annotations

import numpy as np

from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from ..indexer import scores, topk


def on(ctx) -> bool:
    return ctx.dims.of("compressed") is not None


def _pooling(ctx) -> bool:
    return on(ctx) and ctx.dims.of("compressed").entries > 0


def section(cell) -> dict:
    return cell.scenario.compressed


def pooled(cell, e: int) -> str:
    """`entry 2 pools tokens a…h (series a of a…d, series b of e…h)`, from its slots' tokens."""
    src, name = section(cell)["sources"][e], cell.token
    real = src[src >= 0]
    words = f"entry {e} pools tokens {name(real[0])}…{name(real[-1])}"
    if len(src) == len(real) * 2:   # entry 0 of the overlapping kind: its first half is empty
        return words + " (series b of its own window; entry 0 has no window before it)"
    if len(src) % 2 == 0 and section(cell)["kind"] == "compressed_sparse_attention":
        half = len(src) // 2
        return words + (f" (series a of tokens {name(src[0])}…{name(src[half - 1])}, series b of tokens "
                        f"{name(src[half])}…{name(src[-1])})")
    return words


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
    "q_a", "Queries, squeezed", ("token", "q_rank"), "input",
    "DeepSeek V4 first squeezes each token's normed input through a low-rank W_QA (far fewer numbers than the heads' "
    "queries together).",
    formula=lambda ctx: "Q_A = N·W_QA" if ctx.has("norm_in") else "Q_A = X·W_QA",
    inputs=lambda ctx, h: [ctx.source()],
    explain=lambda cell: cell.project(cell.rows(cell.step.inputs[0]), section(cell)["w_qa"], "W_QA",
                                      f"{cell.step.inputs[0]}({cell.token(cell.i)})"),
    sources=lambda cell: whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1]),
    present=on, tip=PRODUCTS), after="norm_in")


def _c_q_explain(cell) -> str:
    row, g, eps = cell.rows("q_a")[cell.i], section(cell)["q_gain"][cell.j], section(cell)["eps"]
    return (f"= {cell.f(row[cell.j])} ÷ √({float(np.mean(row * row)):.4g} + {eps:g})·{cell.f(g)} = "
            f"{cell.f(cell.value)}   (token {cell.token(cell.i)}'s compressed query, which every head reads)")


register(Kind(
    "compressed_c_q", "Compressed queries", ("token", "q_rank"), "input",
    "The squeezed queries are RMS-normed with a learned gain: every head's query is read from this c_q.",
    formula=lambda ctx: "C_Q = RMSNorm(Q_A)·g", explain=_c_q_explain,
    sources=lambda cell: whole_row("q_a", cell.i, cell.rows("q_a").shape[1]), inputs=lambda ctx, h: ["q_a"],
    present=on, short="c_q", tip="divide by the root of the mean of the row's squares plus ε, times the gain"),
    after="q_a")

def _indexed(ctx) -> bool:
    return _pooling(ctx) and ctx.dims.of("compressed").indexed


def _index_given(what: str):
    def explain(cell) -> str:
        return f"= {cell.f(cell.value)}   ({what.format(t=cell.token(cell.i), i=cell.i, j=cell.j)})"
    return explain


register(Kind(
    "entry_idx_q", "Index queries", ("token", "index_feature"), "input",
    "On a compressed sparse layer a lightning indexer decides which entries each query reads. Its queries: a few "
    "index heads of d_I numbers per token, side by side (from c_q, the last features turned).",
    formula=lambda ctx: "idx.q = RoPE_last r(C_Q·W_IQ)", explain=_index_given("query {t}'s index feature {j}"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=_indexed, short="idx.q"), after="compressed_c_q")

register(Kind(
    "entry_idx_k", "Index keys of the entries", ("entry", "d_index"), "input",
    "The indexer pools the tokens into entries of its own (d_I wide, the same windows): one index key an entry.",
    formula=lambda ctx: "idx.k[e] = RoPE_last r(RMSNorm(Σ_s W_I[e,s] ⊙ C_I[e,s])·g), at position e·m",
    explain=_index_given("entry {i}'s index key, feature {j}"), sources=lambda cell: {}, inputs=lambda ctx, h: [],
    present=_indexed, short="idx.k"), after="entry_idx_q")

register(Kind(
    "entry_idx_w", "Index head weights", ("token", "index_head"), "input",
    "Each query weighs its index heads: an entry's index score is the heads' votes added with these weights.",
    formula=lambda ctx: "idx.w = N·W_w ÷ √H_I", explain=_index_given("how much query {t} trusts index head {j}"),
    sources=lambda cell: {}, inputs=lambda ctx, h: [], present=_indexed, short="idx.w"), after="entry_idx_k")


def _reason(cell) -> str:
    """Why query i kept or dropped entry j, or why it could not see it."""
    i, e = cell.i, cell.j
    index, kept = cell.rows("idx.scores").astype(np.float64), cell.rows("idx.selected") != 0
    if not np.isfinite(index[i, e]):
        return f"{pooled(cell, e)}, and query {cell.token(i)} has seen only up to token {cell.token(i)}: not complete"
    return topk.reason(index, kept, section(cell)["topk"], i, e, cell.f, "entry")


def _scores_explain(cell) -> str:
    c, i, e = section(cell), cell.i, cell.j
    if not np.isfinite(cell.value):
        return f"= −∞   ({_reason(cell)})"
    q, k, w = (cell.rows(sid).astype(np.float64) for sid in ("idx.q", "idx.k", "idx.w"))
    told = scores.story(q.reshape(len(q), w.shape[1], -1), k, w, c["index"]["scale"], i, e, cell.f)
    return told.replace("-", "−") + f"   ({_reason(cell)})"


def _scores_sources(cell) -> dict:
    if not np.isfinite(cell.value):
        return {}
    return {sid: [(row, col) for col in range(cell.rows(sid).shape[1])]
            for sid, row in (("idx.q", cell.i), ("idx.k", cell.j), ("idx.w", cell.i))}


register(Kind(
    "entry_scores", "Index scores of the entries", ("query", "entry"), "input",
    "The indexer scores every complete entry for every query: each index head compares the query with the entry's "
    "index key (a head that dislikes it gives 0, the ReLU), and the votes are added with the query's weights.",
    formula=lambda ctx: "I[t,e] = Σ_h w[t,h]·ReLU(q[t,h]·k[e])·scale, for the entries complete at t (else −∞)",
    explain=_scores_explain, sources=_scores_sources, inputs=lambda ctx, h: ["idx.q", "idx.k", "idx.w"],
    present=_indexed, short="idx.scores",
    tip="for each index head: the dot product of query and key, 0 if negative, times the head's weight; add them"),
    after="entry_idx_w")

register(Kind(
    "entry_selected", "Entries selected", ("query", "entry"), "input",
    "Each query keeps the k entries its index scores rank best; the heads' masks hide the others (weight exactly 0).",
    formula=lambda ctx: "1 for the k best index scores of each query (all while it sees k or fewer), else 0",
    explain=lambda cell: f"= {int(cell.value)}   ({_reason(cell)})",
    sources=lambda cell: {"idx.scores": [(cell.i, cell.j)]}, inputs=lambda ctx, h: ["idx.scores"],
    present=_indexed, short="idx.selected",
    tip="compare this entry's index score with the k-th best of the row"), after="entry_scores")
