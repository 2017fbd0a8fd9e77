"""A linear layer's steps, after each head's queries, keys and values (CONTRACT §16): `h{h}.decay`,
`h{h}.beta`, `h{h}.state` (every token's d_k × d_v state, stacked), `h{h}.o`, `h{h}.implicit` and
`h{h}.z`. No scores, no softmax: the softmax steps are absent in a linear layer (steps/scores.standard).
Each explanation recomputes its token's update with formula.update on the trace's own numbers."""
from __future__ import annotations

import numpy as np

from ...ids import parse, step_id
from ...steps.base import Kind, register
from ...steps.cell import whole_row
from .compute import scale_words, scaled
from .formula import update, uses_beta
from .stages import z_explain


def _on(ctx) -> bool:
    return ctx.dims.of("linear") is not None


def _rule(ctx) -> str:
    return ctx.dims.of("linear")[0]


def _vec(cell, xs) -> str:
    return "(" + ", ".join(cell.f(x) for x in xs) + ")"


def _qkv(ctx, h) -> list[str]:
    return [ctx.latest(h, "query", "decay"), ctx.latest(h, "key", "decay"), ctx.latest(h, "value", "decay")]


def _decoded(cell) -> int | None:
    """The token of a [decode] run's per-token step (its arrays hold that token alone), else None."""
    return parse(cell.step.id).token


def _parts(cell, t: int):
    """Token t's q̂, k, v, α and β (β 1 under the decay rule) from the trace's own steps."""
    sc, head = cell.scenario, cell.step.head
    q_id, k_id, v_id = _qkv_ids(cell)
    r = 0 if _decoded(cell) is not None else t   # a decoded token's steps are its row alone
    q = scaled(cell.rows(q_id)[r].astype(np.float64), cell.arithmetic, sc.d_k)
    alpha = cell.rows(cell.sid("decay"))[r].astype(np.float64)
    beta = float(cell.rows(cell.sid("beta"))[r, 0]) if uses_beta(sc.linear["rule"]) else 1.0
    return q, cell.rows(k_id)[r].astype(np.float64), cell.rows(v_id)[r].astype(np.float64), alpha, beta, head


def _qkv_ids(cell) -> list[str]:
    """The ids of the queries (o's second input), keys and values (the state's first two) a head reads."""
    state, o = cell.trace.step(cell.sid("state")), cell.trace.step(cell.sid("o"))
    return [o.inputs[1], *state.inputs[:2]]


def _previous(cell, t: int) -> np.ndarray:
    """S_{t−1}: the state before token t (a decoded token's: the previous token's, or the prompt's last)."""
    sc = cell.scenario
    if t == 0:
        return np.zeros((sc.d_k, sc.d_v))
    if _decoded(cell) is None:
        return cell.rows(cell.sid("state"))[(t - 1) * sc.d_k:t * sc.d_k].astype(np.float64)
    h = cell.step.head
    earlier = step_id("state", h, prefill=True) if t == sc.decode else step_id("state", h, token=t - 1)
    return cell.rows(earlier)[-sc.d_k:].astype(np.float64)


# ------------------------------------------------------------------ decay and beta

def _decay_explain(cell) -> str:
    tok, a = cell.token(cell.at), cell.value
    what = "all" if a == 1 else f"{cell.f(a)}"
    channel = f" in key channel {cell.j}" if cell.step.shape[1] > 1 and cell.scenario.d_k > 1 else ""
    return (f"= {cell.f(a)}   (α as [linear] decay gives it: {what} of the state survives token {tok}{channel} "
            "before it writes)")


def _beta_explain(cell) -> str:
    tok, b = cell.token(cell.at), cell.value
    k = _parts(cell, cell.at)[1]
    size = float(k @ k)
    return (f"= {cell.f(b)}   (β as [linear] beta gives it: {tok} writes {cell.f(b)} of its error under its key; "
            f"β·|k|² = {cell.f(b)} × {cell.f(size)} = {cell.f(b * size)}"
            + (": it replaces exactly what its key read)" if b * size == 1 else
               ": above 1 the state overshoots along k)" if b * size > 1 else ")"))


register(Kind(
    "decay", "Decay", lambda ctx: ("token", "d_k" if _rule(ctx) == "kda" else "one"), "head",
    "How much of the state survives each token: α_t multiplies everything the earlier tokens wrote before "
    "token t writes. α = 1 keeps all of it (plain linear attention); smaller α forgets, as a learned, "
    "token-dependent fade.",
    formula=lambda ctx: "α_t, one a key channel (kda)" if _rule(ctx) == "kda" else "α_t, one a token",
    explain=_decay_explain, sources=lambda cell: {}, inputs=lambda ctx, h: [], present=_on,
    tip="read it from the [linear] section"), after="weights")

register(Kind(
    "beta", "Write strength", ("token", "one"), "head",
    "How strongly each token overwrites what its key already holds: the delta rule writes β times the error "
    "between its value and what the state predicts for its key.",
    formula=lambda ctx: "β_t, one a token", explain=_beta_explain, sources=lambda cell: {},
    inputs=lambda ctx, h: [], present=lambda ctx: _on(ctx) and _rule(ctx) != "decay",
    tip="read it from the [linear] section"), after="decay")


# ------------------------------------------------------------------ the state

def _state_formula(ctx) -> str:
    return {"delta": "S_t = (I − β_t·k_t·k_tᵀ)·α_t·S_{t−1} + β_t·k_t·v_tᵀ   (rows t·d_k …: S_t)",
            "kda": "S_t = (I − β_t·k_t·k_tᵀ)·diag(α_t)·S_{t−1} + β_t·k_t·v_tᵀ   (rows t·d_k …: S_t)",
            "decay": "S_t = α_t·S_{t−1} + k_t·v_tᵀ   (rows t·d_k …: S_t)"}[_rule(ctx)]


def _state_explain(cell) -> str:
    d_k, token = cell.scenario.d_k, _decoded(cell)
    t, r = (cell.i // d_k, cell.i % d_k) if token is None else (token, cell.i)
    j, f = cell.j, cell.f
    q, k, v, alpha, beta, _ = _parts(cell, t)
    delta = uses_beta(cell.scenario.linear["rule"])
    u = update(_previous(cell, t), k, v, alpha, beta, delta)
    tok = cell.token(t)
    a = alpha[r if len(alpha) > 1 else 0]
    text = (f"= decayed + write = {f(u.decayed[r, j])} + {f(u.write[r, j])} = {f(cell.value)}   (row {r} of the state "
            f"after {tok}. Decayed: α·S[{r}, {j}] = {f(a)} × {f(_previous(cell, t)[r, j])} = {f(u.decayed[r, j])}.")
    if not delta:
        return text + f" The write k[{r}]·v[{j}] = {f(k[r])} × {f(v[j])} = {f(u.write[r, j])}.)"
    return (text + f" {tok}'s key {_vec(cell, k)} reads the prediction Sᵀk = {_vec(cell, u.prediction)} from the "
            f"decayed state; the error v − Sᵀk = {_vec(cell, v)} − {_vec(cell, u.prediction)} = "
            f"{_vec(cell, u.error)}; the write β·k[{r}]·error[{j}] = {f(beta)} × {f(k[r])} × {f(u.error[j])} = "
            f"{f(u.write[r, j])}.)").replace("-", "−")


def _state_sources(cell) -> dict:
    d_k = cell.scenario.d_k
    t = cell.i // d_k if _decoded(cell) is None else 0
    q_id, k_id, v_id = _qkv_ids(cell)
    a = cell.i % d_k if cell.rows(cell.sid("decay")).shape[1] > 1 else 0   # kda: the row's key channel
    got = {**whole_row(k_id, t, d_k), v_id: [(t, cell.j)], cell.sid("decay"): [(t, a)]}
    if len(cell.step.inputs) > 3:   # β (the previous state's rows are the step's own, above this one)
        got[cell.step.inputs[3]] = [(t, 0)]
    return got


register(Kind(
    "state", "State", ("token·d_k", "d_v"), "head",
    "A linear layer keeps no weights and no cache: a d_k × d_v state that every token first decays, then "
    "corrects under its key. Rows t·d_k to t·d_k + d_k − 1 hold the state after token t: step through them "
    "to watch it being written.",
    formula=_state_formula, explain=_state_explain, sources=_state_sources,
    inputs=lambda ctx, h: [*_qkv(ctx, h)[1:], ctx.sid("decay", h)] + ([ctx.sid("beta", h)] if _rule(ctx) != "decay"
                                                                      else []),
    present=_on, tip="decay the previous state, then add the write (β times the error, under the key)"),
    after="beta")


# ------------------------------------------------------------------ what the state returns

def _o_explain(cell) -> str:
    d_k, j, f = cell.scenario.d_k, cell.j, cell.f
    t = cell.i if _decoded(cell) is None else _decoded(cell)
    q = _parts(cell, t)[0]
    S = cell.rows(cell.sid("state"))[(t if _decoded(cell) is None else 0) * d_k:][:d_k].astype(np.float64)
    terms = " + ".join(f"S[{r}, {j}]·q̂[{r}]" for r in range(d_k))
    return (f"= Sᵀ·q̂ = {terms} = {cell.dot(S[:, j], q)} = {cell.fa(cell.value)}   (the state after "
            f"{cell.token(t)}; {scale_words(cell.arithmetic, d_k)})").replace("-", "−")


register(Kind(
    "o", "State read by the query", ("token", "d_v"), "head",
    "Each token reads the state it has just written with its query: o_t = S_tᵀ·q̂_t. Nothing of the earlier "
    "tokens is kept but the state.",
    formula=lambda ctx: "o_t = S_tᵀ·q̂_t   (q̂: q scaled as the arithmetic's scale)", explain=_o_explain,
    sources=lambda cell: {**whole_row(_qkv_ids(cell)[0], cell.i, cell.scenario.d_k),
                          cell.sid("state"): [(cell.i * cell.scenario.d_k + r, cell.j)
                                              for r in range(cell.scenario.d_k)]},   # decoded: i = 0
    inputs=lambda ctx, h: [ctx.sid("state", h), _qkv(ctx, h)[0]], present=_on,
    tip="multiply each row of the state by the query's number, then add"), after="state")


def _carried(cell, t: int, s: int) -> np.ndarray:
    """M_t⋯M_{s+1}·β_s·k_s: key s's write direction as the later tokens' updates leave it."""
    _, k, _, _, beta, _ = _parts(cell, s)
    w = beta * k
    delta = uses_beta(cell.scenario.linear["rule"])
    for r in range(s + 1, t + 1):
        _, k_r, _, a_r, b_r, _ = _parts(cell, r)
        w = a_r * w
        if delta:
            w = w - b_r * k_r * (k_r @ w)
    return w


def _implicit_explain(cell) -> str:
    t, s, f = cell.i, cell.j, cell.f
    qn, kn = cell.token(t), cell.token(s)
    if s > t:
        return f"= 0   ({kn} comes after {qn}: the state {qn} reads holds nothing of it yet)"
    w = _carried(cell, t, s)
    q = _parts(cell, t)[0]
    total = cell.rows(cell.step.id)[t, :t + 1].sum()
    return (f"= q̂ᵀ·M_t⋯M_(s+1)·β_s·k_s = {_vec(cell, q)}·{_vec(cell, w)} = {cell.fa(cell.value)}   ({kn}'s value "
            f"reaches {qn}'s output with this weight; M_r = (I − β_r·k_r·k_rᵀ)·α_r is each later token's update. "
            f"{qn}'s row sums to {f(total)}: nothing normalises these weights)").replace("-", "−")


register(Kind(
    "implicit", "Implicit weights", ("query", "key"), "head",
    "The weights the layer implies but never builds: o = A·v exactly, because the state is linear in the "
    "values. Rows need not sum to 1 and a weight can be negative: a later key that overlaps an earlier one "
    "erases part of what it wrote.",
    formula=lambda ctx: "A[t, s] = q̂_tᵀ·M_t⋯M_(s+1)·β_s·k_s, M_r = (I − β_r·k_r·k_rᵀ)·α_r   (o = A·v)",
    explain=_implicit_explain,
    sources=lambda cell: {_qkv_ids(cell)[0]: [(cell.i, c) for c in range(cell.scenario.d_k)]},
    inputs=lambda ctx, h: [_qkv(ctx, h)[0], _qkv(ctx, h)[1], ctx.sid("decay", h)], present=_on,
    tip="carry key s's write through each later token's update, then dot it with the query"), after="o")

def _z_formula(scope) -> str:
    if scope == "all":
        return "Z = O ÷ RMS(O of every head, per token)·g ⊙ σ(X·W_Z)   (one norm over all heads, then the gate)"
    return "Z = RMSNorm(O)·g ⊙ act(X·W_Z)   (the gated norm)" if scope else "Z = O"


register(Kind(
    "linear_z", "Head output", ("token", "d_v"), "head",
    "The head's output that concat joins: what the state returned to the query (a checkpoint's layer "
    "norms and gates it first).",
    formula=lambda ctx: _z_formula(ctx.dims.of("linear")[3]),
    explain=z_explain, sources=lambda cell: {cell.sid("o"): [(cell.i, c) for c in range(cell.scenario.d_v)]},
    inputs=lambda ctx, h: [ctx.sid("o", h)], present=_on, short="z",
    tip="copy the state's output"), after="implicit")


def token_state(cell, t: int) -> dict:
    """Token t's update of the state of `cell`'s head (a cell of its `state` step in a whole-layer
    trace), as the explanations tell it: {update (formula.Update), alpha, beta, k, v}."""
    _, k, v, alpha, beta, _ = _parts(cell, t)
    u = update(_previous(cell, t), k, v, alpha, beta, uses_beta(cell.scenario.linear["rule"]))
    return dict(update=u, alpha=alpha, beta=beta, k=k, v=v)
