"""QK-norm (Qwen3, Gemma 3, OLMo 2): each token's query and key divided by their root mean square
and multiplied by a learned gain, before the rotation, so that no score can grow without bound."""
from __future__ import annotations

import numpy as np

from .base import Kind, register

_WHY = ("Without it, a query and a key can grow as long as training pushes them, and a few scores "
        "then dwarf the rest (softmax all-or-nothing). Dividing each token's {what} by its root mean "
        "square puts it on a fixed scale; a learned gain per feature then sets how sharp the head may be.")


def _formula(name: str):
    def formula(ctx) -> str:
        over = "its head's d_k" if ctx.dims.qk_norm == "head" else "every head's, side by side"
        return f"{name} ÷ RMS({name})·g, per token (RMS over {over})"
    return formula


def _which(cell) -> str:
    return "q" if cell.step.kind == "q_norm" else "k"


def _index(cell) -> int:
    return cell.step.group if cell.step.group is not None else cell.step.head


def _row_ids(cell) -> list[str]:
    """The steps whose rows the root mean square is taken over: this head's, or (scope "all")
    every head's queries (every group's keys), this one's first."""
    own = cell.sid(_which(cell))
    return [own] + [sid for sid in cell.step.inputs if sid != own]


def _explain(cell) -> str:
    sc, f, i, j = cell.scenario, cell.f, cell.i, cell.j
    rows = [cell.rows(sid)[i].astype(np.float64) for sid in _row_ids(cell)]
    whole = np.concatenate(rows)
    ms, eps = float((whole * whole).mean()), sc.qk_norm_eps
    gain = (sc.q_norm if _which(cell) == "q" else sc.k_norm)[_index(cell), j]
    src = cell.rows(cell.step.inputs[0])[i, j]
    who = cell.key_token(i) if _which(cell) == "k" else cell.token(i)
    over = (f"the mean of {who}'s {len(whole)} squares" if len(rows) == 1
            else f"the mean of {who}'s {len(whole)} squares over all {len(rows)} {'heads' if _which(cell) == 'q' else 'groups'}")
    plus = f" + {eps:g}" if eps else ""
    return (f"= {f(src)} ÷ √({f(ms)}{plus}) × {f(gain)} = {f(cell.value)}   "
            f"({over}; the gain of feature {j})").replace("-", "−")


def _sources(cell) -> dict:
    width = cell.scenario.d_k
    return {sid: [(cell.i, m) for m in range(width)] for sid in _row_ids(cell)}


def _inputs(kind: str):
    """This head's (group's) q or k, or under scope "all" every head's q (every group's k)."""
    def inputs(ctx, h) -> list[str]:
        if ctx.dims.qk_norm == "head":
            return [ctx.sid(kind, h)]
        step = 1 if kind == "q" else ctx.dims.heads // ctx.dims.kv_heads
        return list(dict.fromkeys(ctx.sid(kind, g) for g in range(0, ctx.dims.heads, step)))
    return inputs


register(Kind("q_norm", "Queries, normed", ("token", "d_k"), "head", _WHY.format(what="query"),
              _formula("q"), _explain, _sources, inputs=_inputs("q"),
              present=lambda ctx: ctx.dims.qk_norm is not None, chain="query"), after="q")
register(Kind("k_norm", "Keys, normed", lambda ctx: ("context", "d_k") if ctx.cross else ("token", "d_k"), "kv",
              _WHY.format(what="key"), _formula("k"), _explain, _sources, inputs=_inputs("k"),
              present=lambda ctx: ctx.dims.qk_norm is not None, chain="key"), after="k")
