"""KV-cache decoding's numbers: the prompt at once (a causal run of its P tokens, recorded under
`prefill.` ids), then each later token alone: its own query, key and value, the key and value
appended to the cache, and one row of attention against the whole cache.

A token's steps are views of a few packed arrays (the cache is one buffer per key/value head that
grows by a row), made when a step is asked for; the per-token arithmetic is kernels/decode.py's,
or the NumPy twin below for small traces.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from .ids import parse
from .numpy_engine import layer_norm
from .online import _power, _scaled

SLOTS = {"scores": 0, "scaled": 1, "exp": 2, "weights": 3}
LAYER = ("concat", "out", "residual", "norm")


def offset(t: int, prompt: int) -> int:
    """Where token t's row starts in a packed array: the rows of tokens P … t−1 come first."""
    return (t * (t + 1) - prompt * (prompt + 1)) // 2


class Decoded:
    """The packed arrays of one decode (rows orientation) and the view each step id stands for."""

    def __init__(self, sc, dt, rope: bool):
        n, heads, groups, p = sc.n, sc.heads, sc.groups, sc.decode
        self.prompt, self.per = p, heads // groups
        self.k = np.zeros((groups, n, sc.d_k), dt)       # the caches: row t is written when t arrives
        self.v = np.zeros((groups, n, sc.d_v), dt)
        self.q = np.zeros((heads, n, sc.d_k), dt)
        self.q_rot = np.zeros((heads, n, sc.d_k), dt) if rope else self.q
        self.grid = np.zeros((4, heads, offset(n, p)), dt)
        self.sums = np.zeros((heads, n, 1), dt)
        self.z = np.zeros((heads, n, sc.d_v), dt)
        self.clock = np.zeros(n)                         # when each token was done (perf_counter), for benchmarks
        self.layer = {kind: np.zeros((n, width), dt) for kind, width in
                      (("concat", heads * sc.d_v), ("out", sc.d_out), ("residual", sc.d_model), ("norm", sc.d_model))}

    def view(self, sid: str) -> np.ndarray:
        ref = parse(sid)
        t, kind = ref.token, ref.kind
        if kind in LAYER:
            return self.layer[kind][t:t + 1]
        if kind in ("k_cache", "v_cache"):
            g = ref.group if ref.group is not None else ref.head // self.per
            return (self.k if kind == "k_cache" else self.v)[g, :t + 1]
        h = ref.head
        if kind in SLOTS:
            off = offset(t, self.prompt)
            return self.grid[SLOTS[kind], h, off:off + t + 1][None, :]
        return {"q": self.q, "q_rot": self.q_rot, "sums": self.sums, "z": self.z}[kind][h, t:t + 1]


def prefill(run, run_trace) -> tuple[dict, object]:
    """The first P tokens as one causal run (by `run_trace`, i.e. tracer.run), by `prefill.` id
    (rows orientation), and that trace."""
    from .errors import AttentionWarning
    sc, a, p = run.scenario, run.arithmetic, run.scenario.decode
    sub = replace(sc, x=sc.x[:p], tokens=sc.tokens[:p], mask="causal", decode=None, defaults={}, source=sc.source)
    keys = dict(scale=a.scale, softmax_base=a.softmax_base, normalize=a.normalize, stable=a.stable, dtype=a.dtype,
                layout=run.layout, mask="causal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AttentionWarning)
        pre = run_trace(sub, a.preset, lazy=False, **keys)
    return {replace(parse(s.id), prefill=True).id: pre.rows(s.id) for s in pre.steps if s.spec.scope != "input"}, pre


def _stacked(sc, dt) -> tuple[np.ndarray, np.ndarray]:
    """Every head's W_Q, then every group's W_K and W_V side by side (d_model × all), with the
    biases likewise: a token's projections are one vector-matrix product."""
    heads, groups = range(sc.heads), range(sc.groups)
    wv = (sc.w_k if sc.v_is_k else [sc.w_v_down[g] @ sc.w_v_up[g] for g in groups] if sc.w_v is None else sc.w_v)
    bv = sc.b_k if sc.v_is_k else sc.b_v
    w = np.concatenate([sc.w_q[h] for h in heads] + [sc.w_k[g] for g in groups] + [wv[g] for g in groups], axis=1)
    zeros = lambda count, d: np.zeros((count, d))  # noqa: E731
    b = np.concatenate([(zeros(sc.heads, sc.d_k) if sc.b_q is None else sc.b_q).ravel(),
                        (zeros(sc.groups, sc.d_k) if sc.b_k is None else sc.b_k).ravel(),
                        (zeros(sc.groups, sc.d_v) if bv is None else bv).ravel()])
    return np.ascontiguousarray(w, dtype=dt), b.astype(dt)


def row_weights(s: np.ndarray, arithmetic, d_k: int) -> tuple:
    """One decoded query's row of scores against the cache: (scaled, powers, their float64 sum,
    weights); relu's has no powers and no sum (None). The decode loops' one softmax (NumPy)."""
    scaled = _scaled(s, arithmetic, d_k)
    if arithmetic.normalize != "softmax":
        return scaled, None, None, np.where(scaled > 0, scaled, 0)
    shift = scaled.max() if arithmetic.stable else 0.0
    e = _power(scaled - scaled.dtype.type(shift), arithmetic)
    total = e.sum(dtype=np.float64)
    return scaled, e, total, e / total if total > 0 else np.zeros_like(e)


def layer_row(run, zs: np.ndarray, t: int, w_o, b_o) -> dict:
    """A decoded token's rows after its heads (each 1-D): concat, out, residual and norm, from its
    heads' outputs zs (heads × d_v), as the layer has them."""
    sc, got = run.scenario, {}
    y = zs[0]
    if sc.heads > 1:
        y = got["concat"] = zs.reshape(-1)
    if w_o is not None:
        y = got["out"] = y @ w_o if b_o is None else y @ w_o + b_o
    if sc.residual is not None:
        y = got["residual"] = run.x[t] + y
        if sc.residual["norm"] == "layer":
            got["norm"] = layer_norm(y[None, :], sc.residual["eps"])[0]
    return got


def attend_numpy(t, off, q, kbuf, vbuf, grid, sums, z, arithmetic, d_k: int, per: int) -> bool:
    """kernels/decode.attend_token in NumPy: token t, every head, against cache rows 0..t."""
    width, ok = t + 1, True
    with np.errstate(all="ignore"):
        for h in range(q.shape[0]):
            g = h // per
            grid[0, h, off:off + width] = kbuf[g, :width] @ q[h]
            a, e, total, w = row_weights(grid[0, h, off:off + width], arithmetic, d_k)
            grid[1, h, off:off + width], grid[3, h, off:off + width] = a, w
            if e is not None:
                grid[2, h, off:off + width], sums[h, t, 0] = e, total
                ok = ok and bool(np.isfinite(total))
            ok = ok and bool(np.isfinite(a).all())
            z[h, t] = w @ vbuf[g, :width]
    return ok


def compute(run, run_trace) -> tuple[dict, Decoded, bool]:
    """The prefill's arrays by id, the decode's packed arrays, and whether every value stayed finite."""
    from . import kernels
    from .mechanisms.rotary.frequencies import rotary_dims, tables
    from .mechanisms.rotary.rotation import turn
    sc, a, dt, p = run.scenario, run.arithmetic, run.dtype, run.scenario.decode
    arrays, pre = prefill(run, run_trace)
    d = Decoded(sc, dt, sc.rope is not None)
    for g in range(sc.groups):   # the cache starts as the prompt's keys (turned) and values
        ids = pre.plan_ids(g * d.per)
        d.k[g, :p], d.v[g, :p] = pre.rows(ids.get("k_rot", ids["k"])), pre.rows(ids["v"])
    src = run.held("norm_in") if sc.norm_in is not None else run.x
    w, b = _stacked(sc, dt)
    heads, groups, d_k = sc.heads, sc.groups, sc.d_k
    if sc.rope is not None:
        cos, sin = tables(sc.n, d_k, sc.rope, dt)
        turned = lambda a, t: turn(a, cos[t], sin[t], sc.rope["style"], rotary_dims(sc.rope, d_k))  # noqa: E731
    w_o = None if sc.w_o is None else np.ascontiguousarray(sc.w_o, dtype=dt)
    b_o = None if sc.b_o is None else np.asarray(sc.b_o, dtype=dt)[0]
    compiled = run.engine == "fused"
    rule = kernels.rule(a, "none", d_k) if compiled else None
    ok = True
    for t in range(p, sc.n):
        row = src[t] @ w + b                                  # this token's q, k, v: one product
        q = row[:heads * d_k].reshape(heads, d_k)
        k = row[heads * d_k:(heads + groups) * d_k].reshape(groups, d_k)
        d.q[:, t] = q
        if sc.rope is not None:                               # turned by its own position t
            q = d.q_rot[:, t] = turned(q, t)
            k = turned(k, t)
        d.k[:, t], d.v[:, t] = k, row[(heads + groups) * d_k:].reshape(groups, sc.d_v)   # appended
        off = offset(t, p)
        if compiled:
            ok &= kernels.attend_token(t, off, np.ascontiguousarray(q), d.k, d.v, d.grid, d.sums, d.z, rule, d.per)
        else:
            ok &= attend_numpy(t, off, q, d.k, d.v, d.grid, d.sums, d.z, a, d_k, d.per)
        for kind, row in layer_row(run, d.z[:, t], t, w_o, b_o).items():
            d.layer[kind][t] = row
        d.clock[t] = time.perf_counter()
    return arrays, d, bool(ok)
