"""DeepSeek V4's compressed entries as steps (the formula: pool.py): every m tokens of normed input
become one entry, a softmax pooling of their projections feature by feature.

    pool.c = N·W_C, pool.z = N·W_Z              (token × width: 2D on the sparse kind, series a | b)
    pool.weights[e·S + s] = softmax_s(Z + B)    (per feature, over the S slots of entry e)
    pool.sum[e] = Σ_s W ⊙ C,  pool.norm = RMSNorm(pool.sum)·g,  pool.k = pool.norm turned at e·m"""
from __future__ import annotations

import numpy as np

from ...steps.base import Kind, register
from ...steps.cell import whole_row
from ...steps.inputs import PRODUCTS
from .before import on, pooled, section
from .steps import pair_cells, turn_story


def _pooling(ctx) -> bool:
    return on(ctx) and ctx.dims.of("compressed").entries > 0


def _slots(cell, e: int) -> list[tuple[int, int, int]]:
    """(slot, token, column of C and Z) of entry e's filled slots, for the cell's feature: the sparse kind's
    first m slots read series a (the first D columns) of the window before, the others series b (the last D)."""
    c, d = section(cell), cell.scenario.d_k
    m = c["m"]
    return [(s, int(t), cell.j + (d if c["overlap"] and s >= m else 0))
            for s, t in enumerate(c["sources"][e]) if t >= 0]


def _project(w_key: str, w_name: str):
    def explain(cell) -> str:
        src = cell.step.inputs[0]
        return cell.project(cell.rows(src), section(cell)["pool"][w_key], w_name, f"{src}({cell.token(cell.i)})")
    return explain


def _row(cell) -> dict:
    return whole_row(cell.step.inputs[0], cell.i, cell.rows(cell.step.inputs[0]).shape[1])


for word, w_key, w_name, what in (("pool.c", "w_c", "W_C", "what each token gives its entries (series a | b)"),
                                  ("pool.z", "w_z", "W_Z", "how strongly, feature by feature (series a | b)")):
    register(Kind(
        word, f"Pooled projections: {what.split(' (')[0]}", ("token", "pool_width"), "input",
        f"Every m tokens of a compressed layer become one entry; each token first projects {what}.",
        formula=lambda ctx, w=w_name, word=word: f"{word[5:].upper()} = N·{w}", explain=_project(w_key, w_name),
        sources=_row, inputs=lambda ctx, h: [ctx.source()], present=_pooling, tip=PRODUCTS),
        after="compressed_c_q" if word == "pool.c" else "pool.c")


def _weights_explain(cell) -> str:
    c = section(cell)
    e, slot = divmod(cell.i, c["sources"].shape[1])
    if c["sources"][e, slot] < 0:
        return f"= 0   (slot {slot} of entry {e} is empty: entry 0 has no window before it)"
    z, bias = cell.rows("pool.z"), c["pool"]["bias"]
    logits = {s: float(z[t, col] + bias[s % c["m"], col]) for s, t, col in _slots(cell, e)}
    top, mine = max(logits.values()), logits[slot]
    total = sum(np.exp(v - top) for v in logits.values())
    return (f"= e^({cell.f(mine)} − {cell.f(top)}) ÷ {cell.f(total)} = {cell.f(cell.value)}   (Z + B of slot "
            f"{slot}, token {cell.token(c['sources'][e, slot])}, against the {len(logits)} slots of entry {e}: "
            f"{pooled(cell, e)})").replace("-", "−")


def _weights_sources(cell) -> dict:
    e, slot = divmod(cell.i, section(cell)["sources"].shape[1])
    return {"pool.z": [(t, col) for _, t, col in _slots(cell, e)]} if section(cell)["sources"][e, slot] >= 0 else {}


register(Kind(
    "pool.weights", "Pooling weights", ("entry_slot", "d_k"), "input",
    "A softmax over an entry's slots, feature by feature, says how much each token's projection counts in it. "
    "Row e·S + s is slot s of entry e; the weights of one entry and one feature sum to 1.",
    formula=lambda ctx: "W[e,s] = softmax over the slots s of Z[e,s] + B[s], per feature",
    explain=_weights_explain,
    sources=_weights_sources,
    inputs=lambda ctx, h: ["pool.z"], present=_pooling,
    tip="e to the slot's Z + B minus the largest, over the sum of those powers"), after="pool.z")


def _sum_parts(cell):
    e, slots = cell.i, section(cell)["sources"].shape[1]
    got = _slots(cell, e)
    return ([(e * slots + s, cell.j) for s, _, _ in got], [(t, col) for _, t, col in got])


def _sum_explain(cell) -> str:
    w_cells, c_cells = _sum_parts(cell)
    w, c = cell.rows("pool.weights"), cell.rows("pool.c")
    return (f"= Σ_s W·C = {cell.dot([w[r, k] for r, k in w_cells], [c[r, k] for r, k in c_cells])} = "
            f"{cell.f(cell.value)}   ({pooled(cell, cell.i)})")


register(Kind(
    "pool.sum", "Entries, pooled", ("entry", "d_k"), "input",
    "Each entry adds its slots' projections C, weighted by the pooling weights: one vector for m tokens.",
    formula=lambda ctx: "pool.sum[e] = Σ_s W[e,s] ⊙ C[e,s]", explain=_sum_explain,
    sources=lambda cell: dict(zip(("pool.weights", "pool.c"), _sum_parts(cell))),
    inputs=lambda ctx, h: ["pool.weights", "pool.c"], present=_pooling,
    tip="multiply each slot's weight by its C, then add the products"), after="pool.weights")


def _norm_explain(cell) -> str:
    row, c = cell.rows("pool.sum")[cell.i], section(cell)
    return (f"= {cell.f(row[cell.j])} ÷ √({float(np.mean(row * row)):.4g} + {c['eps']:g})·"
            f"{cell.f(c['pool']['gain'][cell.j])} = {cell.f(cell.value)}   (RMS-normed, times the learned gain)")


register(Kind(
    "pool.norm", "Entries, normed", ("entry", "d_k"), "input",
    "Each entry is RMS-normed with a learned gain, as the tokens' keys are.",
    formula=lambda ctx: "pool.sum ÷ √(mean(pool.sum²) + ε)·g", explain=_norm_explain,
    sources=lambda cell: whole_row("pool.sum", cell.i, cell.rows("pool.sum").shape[1]),
    inputs=lambda ctx, h: ["pool.sum"], present=_pooling), after="pool.sum")

register(Kind(
    "pool.k", "Compressed entries", ("entry", "d_k"), "input",
    "The entries are keys (and values) beside the tokens': their last r features turn at the entry's first "
    "token, as a token's key turns at its own position.",
    formula=lambda ctx: "pool.k[e] = RoPE_last r(pool.norm[e]), at position e·m",
    explain=lambda cell: turn_story(cell, cell.rows("pool.norm")[cell.i], 1, section(cell)["pool"]["theta"][cell.i],
                                    cell.i * section(cell)["m"]),
    sources=lambda cell: {"pool.norm": pair_cells(cell)}, inputs=lambda ctx, h: ["pool.norm"], present=_pooling,
    tip="a·cos − b·sin for the first of a pair, b·cos + a·sin for the second"), after="pool.norm")
