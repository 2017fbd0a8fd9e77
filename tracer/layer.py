"""The projections of the layer, before any score: queries, keys and values (biases, groups,
QK-norm, rotary positions included), for one head with the stage kernels or for many heads at once
on numba's threads (the fused path). What is computed is returned by id; recording is the trace's."""
from __future__ import annotations

import numpy as np

from . import kernels, rope
from .errors import ScenarioError
from .ids import step_id
from .kernels import pool
from .steps.base import latest_stage

BLOCK = 128             # rows per matmul task


def latest(arrays: dict, chain: str) -> str:
    """The kind of the last stage of `chain` among `arrays`' kinds (q_rot, else q_norm, else q)."""
    return latest_stage(arrays, chain)


def textbook(sc) -> bool:
    """A 2017 layer (its projections need none of today's parts)."""
    return sc.dims().textbook


def _heads(w, heads: list[int], dtype) -> np.ndarray:
    """The selected heads' weight matrices as one C-contiguous array (a view when possible)."""
    sel = w if len(heads) == w.shape[0] else w[heads[0]:heads[-1] + 1]
    return np.ascontiguousarray(sel, dtype=dtype)


def rows_per_task(n: int, heads: int) -> int:
    """Rows per matmul task: whole heads when there are enough of them, else a few blocks each."""
    want = -(-n * heads // (4 * kernels._threads()))   # about 4 tasks per thread
    return min(n, max(BLOCK, -(-want // BLOCK) * BLOCK))


def matmul(x, w) -> np.ndarray:
    """x·w[h] for every head h (w: heads × d × m) into one heads × n × m array, on numba's threads."""
    out = pool.empty((w.shape[0], x.shape[0], w.shape[2]), x.dtype)
    kernels.matmul_heads(x, w, out, rows_per_task(x.shape[0], w.shape[0]))
    return out


def projections(run, heads: list[int]):
    """q, k, v (each heads × n × d) for consecutive heads `heads` (the rotated ones, under RoPE;
    each head's group's, under grouped-query), and the other arrays to record, by id."""
    sc, dt, x = run.scenario, run.dtype, run.x
    if not textbook(sc):
        return _batched(run, heads)
    q, k = matmul(x, _heads(sc.w_q, heads, dt)), matmul(x, _heads(sc.w_k, heads, dt))
    if sc.w_v_down is None:
        return q, k, matmul(x, _heads(sc.w_v, heads, dt)), {}
    v_down = matmul(x, _heads(sc.w_v_down, heads, dt))
    v = np.matmul(v_down, _heads(sc.w_v_up, heads, dt), out=pool.empty((len(heads), sc.n, sc.d_v), dt))
    return q, k, v, {step_id("v_down", h): v_down[i] for i, h in enumerate(heads)}


def _batched(run, heads: list[int]):
    """projections() for the parts of today's layers (biases, groups, RoPE, a norm first): every
    head's queries in one product, every group's keys and values once."""
    sc, dt, extra = run.scenario, run.dtype, {}
    ids = [run.plan_ids(h) for h in heads]
    q = matmul(run.held(run.step(ids[0]["q"]).inputs[0]), _heads(sc.w_q, heads, dt))
    if sc.b_q is not None:
        q += sc.b_q[heads[0]:heads[-1] + 1, None, :].astype(dt)
    if sc.q_norm is not None:
        extra.update({i["q"]: q[n] for n, i in enumerate(ids)})
        q = normed_all(run, "q", heads, q)
    per = sc.heads // sc.groups
    groups = list(range(heads[0] // per, heads[-1] // per + 1))
    kv = _group_kv(run, groups, ids[0], per)
    for g, got in zip(groups, kv):
        extra.update({run.plan_ids(g * per)[kind]: a for kind, a in got.items()})
    if sc.rope is not None:
        extra.update({i["q" if sc.q_norm is None else "q_norm"]: q[n] for n, i in enumerate(ids)})
        q = rotate_all(q, run)
    # the fused kernels read group h·G/H for head h: whole groups are passed as they are
    aligned = heads[0] % per == 0 and len(heads) % per == 0
    pick = range(len(groups)) if aligned else [h // per - groups[0] for h in heads]
    k = np.stack([kv[g][latest(kv[g], "key")] for g in pick])
    v = np.stack([kv[g]["v"] for g in pick])
    return q, k, v, extra


def _group_kv(run, groups: list[int], first_ids: dict, per: int) -> list[dict]:
    """Each group's keys and values (and rotated keys), reused when a trace already holds them."""
    sc, dt = run.scenario, run.dtype
    held = [run.plan_ids(g * per) for g in groups]
    if all(run.held(i["k"]) is not None for i in held):
        return [{kind: run.held(i[kind]) for kind in KV_KINDS if kind in i} for i in held]
    src = run.held(run.step(first_ids["k"]).inputs[0])
    k = matmul(src, _heads(sc.w_k, groups, dt))
    if sc.b_k is not None:
        k += sc.b_k[groups[0]:groups[-1] + 1, None, :].astype(dt)
    if sc.v_is_k:
        v, v_down = k, None
    elif sc.w_v_down is not None:
        v_down = matmul(src, _heads(sc.w_v_down, groups, dt))
        v = np.matmul(v_down, _heads(sc.w_v_up, groups, dt))
    else:
        v, v_down = matmul(src, _heads(sc.w_v, groups, dt)), None
        if sc.b_v is not None:
            v += sc.b_v[groups[0]:groups[-1] + 1, None, :].astype(dt)
    k_norm = normed_all(run, "k", groups, k) if sc.k_norm is not None else None
    k_rot = rotate_all(k if k_norm is None else k_norm, run) if sc.rope is not None else None
    out = []
    for n in range(len(groups)):
        got = {"k": k[n], "v": v[n]}
        for kind, a in (("v_down", v_down), ("k_norm", k_norm), ("k_rot", k_rot)):
            if a is not None:
                got[kind] = a[n]
        out.append(got)
    return out


KV_KINDS = ("k", "v", "k_norm", "k_rot", "v_down")   # what a query head reads of its group


def rms_rows(a: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """Each row (last axis) divided by its root mean square, times the gain: kernels.rms_norm on a
    stack at once (float64 sums; a row divided by its largest value first, as there)."""
    peak = np.abs(a).max(axis=-1, keepdims=True).astype(np.float64)
    big = np.maximum(peak, 1.0) if eps > 0 else np.where(peak > 0, peak, 1.0)
    y = a.astype(np.float64) / big
    with np.errstate(divide="ignore", invalid="ignore"):   # a row of zeros with eps = 0: NaN, refused before
        inv = 1.0 / np.sqrt((y * y).mean(axis=-1, keepdims=True) + eps / big / big)
        return (y * inv * gain).astype(a.dtype, copy=False)


def refuse_zero_rows(a: np.ndarray, eps: float, field: str, what, source: str | None) -> None:
    """With eps = 0, a row of zeros has no root mean square to divide by (0 ÷ 0; PyTorch gives NaN):
    refused in one line naming the eps, the row and the scenario's file. `what(*place)` words the
    row at `place` (its index in `a` without the last axis: (token,) or (head, token))."""
    if eps > 0:
        return
    zero = ~np.asarray(a).any(axis=-1)
    if zero.any():
        place = [int(i) for i in np.argwhere(zero)[0]]
        raise ScenarioError(field, f"is 0, and {what(*place)} is all zeros: its root mean square is 0, and 0 ÷ 0 "
                            f"has no value (PyTorch gives NaN); expected {field} > 0 (models use 1e-6) or no row of zeros",
                            source)


def _token(labels: list[str], t: int) -> str:
    return f"token {t} ({labels[t]!r})"


def refuse_zero_qk(run, which: str, index: list[int], a: np.ndarray) -> None:
    """refuse_zero_rows for QK-norm: `a` the queries (which = "q") of heads `index`, or the keys of
    those groups (heads × tokens × d_k, or tokens × d_k for one); under scope "all" tokens × every
    head's features side by side (index: every head, or group)."""
    sc = run.scenario
    labels = sc.tokens if which == "q" else sc.key_tokens
    group = "head" if which == "q" or sc.groups == sc.heads else "key/value group"
    what = {"q": "query", "k": "key"}[which]
    if sc.qk_norm_scope == "all":
        words = lambda t: f"every {group}'s {what} of {_token(labels, t)}"   # noqa: E731
    elif a.ndim == 2:
        words = lambda t: f"{group} {index[0]}'s {what} of {_token(labels, t)}"   # noqa: E731
    else:
        words = lambda i, t: f"{group} {index[i]}'s {what} of {_token(labels, t)}"   # noqa: E731
    refuse_zero_rows(a, sc.qk_norm_eps, "weights.norm_eps", words, sc.source)


def normed_all(run, which: str, index: list[int], a: np.ndarray) -> np.ndarray:
    """QK-norm of the queries (which = "q") of consecutive heads `index`, or of the keys of those
    groups (a: … × tokens × d_k): each head's row over its own d_k, or (scope "all") each token's
    row of every head together, sliced."""
    sc = run.scenario
    gain = (sc.q_norm if which == "q" else sc.k_norm)[index[0]:index[-1] + 1, None, :]
    if sc.qk_norm_scope == "head":
        refuse_zero_qk(run, which, index, a)
        return rms_rows(a, gain, sc.qk_norm_eps)
    return shared(run, which)[index[0]:index[-1] + 1]


def shared(run, which: str) -> np.ndarray:
    """Scope "all" (OLMo 2): every head's q (every group's k) side by side, normed per token over
    the whole width, as heads (groups) × tokens × d_k; computed once per trace."""
    key = f"{which}_norm"
    if key not in run.memo:
        sc, dt = run.scenario, run.dtype
        src = run.held(run.step(run.plan_ids(0)[which]).inputs[0])
        w, b = (sc.w_q, sc.b_q) if which == "q" else (sc.w_k, sc.b_k)
        a = matmul(src, np.ascontiguousarray(w, dtype=dt))
        if b is not None:
            a += b[:, None, :].astype(dt)
        count, n, d = a.shape
        flat = a.transpose(1, 0, 2).reshape(n, count * d)
        gain = (sc.q_norm if which == "q" else sc.k_norm).reshape(1, -1)
        refuse_zero_qk(run, which, list(range(count)), flat)
        run.memo[key] = np.ascontiguousarray(rms_rows(flat, gain, sc.qk_norm_eps).reshape(n, count, d).transpose(1, 0, 2))
    return run.memo[key]


def normed_one(K, run, which: str, index: int, a: np.ndarray) -> np.ndarray:
    """normed_all() for one head (group), with the stage kernel where the norm is the head's own."""
    sc = run.scenario
    if sc.qk_norm_scope == "all":
        return np.ascontiguousarray(shared(run, which)[index])
    gain = (sc.q_norm if which == "q" else sc.k_norm)[index]
    refuse_zero_qk(run, which, [index], a)
    return K.rms_norm(a, np.ascontiguousarray(gain[None, :], dtype=run.dtype), sc.qk_norm_eps)


def rotate_all(a: np.ndarray, run) -> np.ndarray:
    """RoPE on a stack of matrices (… × tokens × d_k) at once, as kernels.rotate does one."""
    spec = run.scenario.rope
    d = rope.rotary_dims(spec, a.shape[-1])
    cos, sin = rope.tables(a.shape[-2], a.shape[-1], spec, run.dtype)
    first, second = rope.pair_slices(d, spec["style"])
    out = pool.empty(a.shape, a.dtype)
    if d < a.shape[-1]:   # partial rotary: the features past the first d stay as they are
        out[..., d:] = a[..., d:]
    x1, x2, o1, o2 = a[..., first], a[..., second], out[..., first], out[..., second]
    np.multiply(x1, cos, out=o1)       # o1 = x1·cos − x2·sin, o2 = x1·sin + x2·cos, without temporaries
    o1 -= x2 * sin
    np.multiply(x1, sin, out=o2)
    o2 += x2 * cos
    return out


def project_one(K, src, w, b, dt):
    y = K.project(src, np.ascontiguousarray(w, dtype=dt))
    return y if b is None else K.add_row(y, np.ascontiguousarray(b[None, :], dtype=dt))


def rotate_one(K, run, a):
    spec = run.scenario.rope
    cos, sin = rope.tables(a.shape[0], a.shape[1], spec, run.dtype)
    first, second = rope.pairs(rope.rotary_dims(spec, a.shape[1]), spec["style"])
    return K.rotate(a, cos, sin, first, second)


def key_values(run, h: int, K) -> dict:
    """The keys and values query head h reads, by kind: its group's, computed once (held arrays
    are reused) — under grouped-query attention several heads share them."""
    sc, dt, plan = run.scenario, run.dtype, run.plan_ids(h)
    if run.held(plan["k"]) is not None:
        return {kind: run.held(sid) for kind, sid in plan.items() if kind in KV_KINDS}
    g = h // (sc.heads // sc.groups)
    src = run.held(run.step(plan["k"]).inputs[0])
    got = {"k": project_one(K, src, sc.w_k[g], None if sc.b_k is None else sc.b_k[g], dt)}
    if sc.v_is_k:
        got["v"] = got["k"]
    elif sc.w_v_down is not None:
        got["v_down"] = K.project(src, np.ascontiguousarray(sc.w_v_down[g], dtype=dt))
        got["v"] = K.project(got["v_down"], np.ascontiguousarray(sc.w_v_up[g], dtype=dt))
    else:
        got["v"] = project_one(K, src, sc.w_v[g], None if sc.b_v is None else sc.b_v[g], dt)
    if sc.k_norm is not None:
        got["k_norm"] = normed_one(K, run, "k", g, got["k"])
    if sc.rope is not None:
        got["k_rot"] = rotate_one(K, run, got[latest(got, "key")])
    return got


