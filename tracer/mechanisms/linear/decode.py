"""[decode] of a linear layer (CONTRACT §16): the prompt at once (decode.prefill), then each later
token alone, carrying the state: token t's q, k, v (1 × d), its decay and β, the state S_t
(d_k × d_v) from the carried S_{t−1}, o, z, and the layer's rows. The d_k × d_v state is the whole
cache: no k_cache, no v_cache, no implicit weights (nothing n × n is formed)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...ids import step_id
from ...steps.base import KINDS
from .compute import gates, scaled
from .formula import l2norm, update, uses_beta

_STATE = ("S_t = (I − β_t·k_t·k_tᵀ)·α_t·S_{t−1} + β_t·k_t·v_tᵀ from the carried S_{t−1}: this d_k × d_v state "
          "is the whole cache (nothing else of the earlier tokens is kept)")


def plan_token(ctx, t: int, add, layer) -> None:
    """Token t's steps in the plan (`add` as plan/decode.py's, `layer` its layer-wide steps)."""
    dims, src = ctx.dims, ctx.source()
    rule, l2 = dims.of("linear")[:2]
    per, kv, zs = dims.heads // dims.kv_heads, {}, []
    formula = lambda kind: KINDS[kind].formula(ctx)   # noqa: E731
    for h in range(dims.heads):
        scope = dict(group=h // per) if dims.grouped else dict(head=h)
        if not dims.grouped or h % per == 0:
            kv = {w: add(w, [src], **scope, formula=f"{w}_t = {src}_t·W_{w.upper()}") for w in ("k", "v")}
            if l2:
                kv["k"] = add("k_unit", [kv["k"]], **scope, formula=formula("k_unit"))
        q = add("q", [src], h, formula=f"q_t = {src}_t·W_Q")
        if l2:
            q = add("q_unit", [q], h, formula=formula("q_unit"))
        gated = [add("decay", [], h, formula=formula("decay"))]
        if rule != "decay":
            gated.append(add("beta", [], h, formula=formula("beta")))
        state = add("state", [kv["k"], kv["v"], *gated], h, formula=_STATE if rule != "decay" else
                    "S_t = α_t·S_{t−1} + k_t·v_tᵀ from the carried S_{t−1}: the whole cache")
        o = add("o", [state, q], h, formula=formula("o"))
        zs.append(add("linear_z", [o], h, formula=formula("linear_z")))
    layer(ctx, zs, add)


def decode(run, run_trace) -> tuple[dict, object, bool]:
    """The prefill's arrays and every decoded token's, by id (rows orientation), a viewer of them,
    and whether every value stayed finite."""
    from ...decode import layer_row, prefill
    sc, dt, p = run.scenario, run.dtype, run.scenario.decode
    arrays, pre = prefill(run, run_trace)
    states = [pre.rows(pre.plan_ids(h)["state"])[-sc.d_k:].astype(dt) for h in range(sc.heads)]
    src = run.held("norm_in") if sc.norm_in is not None else run.x
    w_o = None if sc.w_o is None else sc.w_o.astype(dt)
    b_o = None if sc.b_o is None else sc.b_o.astype(dt)[0]
    per, delta, ok = sc.heads // sc.groups, uses_beta(sc.linear["rule"]), True
    with np.errstate(all="ignore"):
        for t in range(p, sc.n):
            zs = []
            for h in range(sc.heads):
                got = _token(run, h, t, src[t], states[h], delta)
                states[h] = got["state"]
                g = h // per
                arrays.update({step_id(kind, None if kind in ("k", "v", "k_unit") and sc.groups < sc.heads else h,
                                       group=g if kind in ("k", "v", "k_unit") and sc.groups < sc.heads else None,
                                       token=t): a if a.ndim == 2 else a[None, :] for kind, a in got.items()})
                zs.append(got["z"])
                ok = ok and all(np.isfinite(a).all() for a in got.values())
            arrays.update({step_id(kind, token=t): row[None, :]
                           for kind, row in layer_row(run, np.stack(zs), t, w_o, b_o).items()})
    return arrays, SimpleNamespace(view=arrays.__getitem__), ok


def _token(run, h: int, t: int, x_t: np.ndarray, S: np.ndarray, delta: bool) -> dict:
    """Head h's rows for token t from the carried state S (d_k × d_v)."""
    sc, dt = run.scenario, run.dtype
    g = h // (sc.heads // sc.groups)
    bias = lambda b, i: 0 if b is None else b[i]   # noqa: E731
    wv = sc.w_k if sc.v_is_k else sc.w_v if sc.w_v is not None else [sc.w_v_down[i] @ sc.w_v_up[i] for i in range(sc.groups)]
    got = {"q": (x_t @ sc.w_q[h] + bias(sc.b_q, h)).astype(dt), "k": (x_t @ sc.w_k[g] + bias(sc.b_k, g)).astype(dt),
           "v": (x_t @ wv[g] + bias(sc.b_v, g)).astype(dt)}
    q, k = got["q"], got["k"]
    if sc.linear["l2"]:
        q, k = got["q_unit"], got["k_unit"] = l2norm(q[None])[0].astype(dt), l2norm(k[None])[0].astype(dt)
    alpha, beta = gates(sc, h, dt)
    u = update(S, k, got["v"], alpha[t], None if beta is None else beta[t], delta)
    got.update(decay=alpha[t], state=u.state.astype(dt), o=(u.state.T @ scaled(q, run.arithmetic, sc.d_k)).astype(dt))
    if beta is not None:
        got["beta"] = beta[t:t + 1]
    got["z"] = got["o"]
    return got
