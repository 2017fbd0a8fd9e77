"""The projections of the layer, before any score: queries, keys and values (biases, groups,
QK-norm, rotary positions included), for one head with the stage kernels or for many heads at once
on numba's threads (the fused path). What is computed is returned by id; recording is the trace's."""
from __future__ import annotations

import numpy as np

from .ids import step_id
from .kernels import matmul_side, pool
from .mechanisms import v_norm
from .mechanisms.qk_norm import normed_all, normed_one
from .mechanisms.q_temp import steps as q_temp
from .mechanisms.rotary.rotation import rotate, rotate_one
from .steps.base import KINDS

def latest(arrays: dict, chain: str) -> str:
    """The kind of the last stage of `chain` among `arrays`' kinds, which are in computation order
    (q_rot, else q_norm, else q; q_norm when QK-norm comes after the rotation)."""
    chains = {kind.word: kind.chain for kind in KINDS.values()}
    found = [kind for kind in arrays if chains.get(kind) == chain]
    return found[-1] if found else None


def textbook(sc) -> bool:
    """A 2017 layer (its projections need none of today's parts)."""
    return sc.dims().textbook


def stacked_weights(sc, w, heads: list[int], dtype) -> np.ndarray:
    """The selected heads' weight matrices (of scenario sc's `w`) as one C-contiguous array in dtype:
    all of them cast once per scenario (Scenario.cast), a few each time."""
    if len(heads) == w.shape[0]:
        return sc.cast(w, dtype)
    return np.ascontiguousarray(w[heads[0]:heads[-1] + 1], dtype=dtype)


def projected(sc, x, arrays: tuple, heads: list[int], dt) -> list[np.ndarray]:
    """x·W[h] for each W of `arrays` (scenario sc's, each heads × d × m) and consecutive heads
    `heads`, each heads × n × m: the arrays of one width m are views of one wide product
    (kernels.matmul_side)."""
    out = [None] * len(arrays)
    for m in dict.fromkeys(a.shape[2] for a in arrays):
        which = [i for i, a in enumerate(arrays) if a.shape[2] == m]
        joined = sc.joined(tuple(arrays[i] for i in which), slice(heads[0], heads[-1] + 1), dt)
        for i, part in zip(which, np.split(matmul_side(x, joined, len(which) * len(heads)), len(which))):
            out[i] = part
    return out


def projections(run, heads: list[int]):
    """q, k, v (each heads × n × d) for consecutive heads `heads` (the rotated ones, under RoPE;
    each head's group's, under grouped-query), and the other arrays to record, by id."""
    sc, dt, x = run.scenario, run.dtype, run.x
    if not textbook(sc):
        return _batched(run, heads)
    if sc.w_v_down is None:
        return *projected(sc, x, (sc.w_q, sc.w_k, sc.w_v), heads, dt), {}
    q, k, v_down = projected(sc, x, (sc.w_q, sc.w_k, sc.w_v_down), heads, dt)
    v = np.matmul(v_down, stacked_weights(sc, sc.w_v_up, heads, dt),
                  out=pool.empty((len(heads), sc.n, sc.d_v), dt))
    return q, k, v, {step_id("v_down", h): v_down[i] for i, h in enumerate(heads)}


def _batched(run, heads: list[int]):
    """projections() for the parts of today's layers (biases, groups, RoPE, a norm first): every
    head's queries in one product, every group's keys and values once."""
    sc, dt, extra = run.scenario, run.dtype, {}
    ids = [run.plan_ids(h) for h in heads]
    q = projected(sc, run.held(run.step(ids[0]["q"]).inputs[0]), (sc.w_q,), heads, dt)[0]
    if sc.b_q is not None:
        q += sc.b_q[heads[0]:heads[-1] + 1, None, :].astype(dt)
    after = sc.qk_norm_after_rope
    if sc.q_norm is not None and not after:
        extra.update({i["q"]: q[n] for n, i in enumerate(ids)})
        q = normed_all(run, "q", heads, q)
    per = sc.heads // sc.groups
    groups = list(range(heads[0] // per, heads[-1] // per + 1))
    kv = group_kv(run, groups, ids[0], per)
    for g, got in zip(groups, kv):
        extra.update({run.plan_ids(g * per)[kind]: a for kind, a in got.items()})
    if sc.rope is not None:
        extra.update({i["q" if sc.q_norm is None or after else "q_norm"]: q[n] for n, i in enumerate(ids)})
        q = rotate(q, sc.rope, dt)
    if after:                                     # QK-norm after the rotation (nanochat, Llama 4)
        extra.update({i["q_rot"]: q[n] for n, i in enumerate(ids)})
        q = normed_all(run, "q", heads, q)
    if sc.q_temp is not None:                     # the query temperature
        before = latest({kind: sid for kind, sid in ids[0].items() if kind != "q_temp"}, "query")
        extra.update({i[before]: q[n] for n, i in enumerate(ids)})
        q = q_temp.warm(sc.q_temp, q)
    # the fused kernels read group h·G/H for head h: whole groups are passed as they are
    aligned = heads[0] % per == 0 and len(heads) % per == 0
    pick = range(len(groups)) if aligned else [h // per - groups[0] for h in heads]
    k = np.stack([kv[g][latest(kv[g], "key")] for g in pick])
    v = np.stack([kv[g][latest(kv[g], "value")] for g in pick])
    return q, k, v, extra


def group_kv(run, groups: list[int], first_ids: dict, per: int) -> list[dict]:
    """Each group's keys and values (and rotated keys), reused when a trace already holds them."""
    sc, dt = run.scenario, run.dtype
    held = [run.plan_ids(g * per) for g in groups]
    if all(run.held(i["k"]) is not None for i in held):
        return [{kind: run.held(sid) for kind, sid in i.items() if kind in KV_KINDS} for i in held]
    src = run.held(run.step(first_ids["k"]).inputs[0])
    values = None if sc.v_is_k else sc.w_v if sc.w_v_down is None else sc.w_v_down
    k, *v = projected(sc, src, (sc.w_k,) if values is None else (sc.w_k, values), groups, dt)
    if sc.b_k is not None:
        k += sc.b_k[groups[0]:groups[-1] + 1, None, :].astype(dt)
    if sc.v_is_k:
        v, v_down = k, None
    elif sc.w_v_down is not None:
        v_down = v[0]
        v = np.matmul(v_down, stacked_weights(sc, sc.w_v_up, groups, dt))
    else:
        v, v_down = v[0], None
        if sc.b_v is not None:
            v += sc.b_v[groups[0]:groups[-1] + 1, None, :].astype(dt)
    normed_v = v_norm.normed(run, groups, v) if sc.v_norm is not None else None   # the values' norm
    after = sc.qk_norm_after_rope
    k_norm = normed_all(run, "k", groups, k) if sc.k_norm is not None and not after else None
    k_rot = rotate(k if k_norm is None else k_norm, sc.rope, dt) if sc.rope is not None else None
    stages = [("k_norm", k_norm), ("k_rot", k_rot)]
    if after:                                     # QK-norm after the rotation
        stages = [("k_rot", k_rot), ("k_norm", normed_all(run, "k", groups, k_rot))]
    out = []
    for n in range(len(groups)):
        got = {"k": k[n], "v": v[n]}
        for kind, a in (("v_down", v_down), ("v_norm", normed_v), *stages):
            if a is not None:
                got[kind] = a[n]
        out.append(got)
    return out


def stacked(parts: list[np.ndarray]) -> np.ndarray:
    """Arrays of one shape and dtype as one (len(parts) × …), to be read: a view where they lie one
    after another in memory (group_kv hands out each group's share of one product so: a real layer's
    keys and values, 8 MiB each, need no copy), else a new stack. (Writeable like its parts, so that
    a compiled kernel reading it needs no second compilation for read-only arrays.)"""
    first = parts[0]
    if first.base is not None and all(p.base is first.base and p.flags.c_contiguous and p.dtype == first.dtype
                                      and p.shape == first.shape and p.ctypes.data == first.ctypes.data + i * first.nbytes
                                      for i, p in enumerate(parts)):
        return np.lib.stride_tricks.as_strided(first, (len(parts), *first.shape), (first.nbytes, *first.strides))
    return np.stack(parts)


KV_KINDS = ("k", "v", "k_norm", "k_rot", "v_down", "v_norm")   # what a query head reads of its group


def project_one(K, src, w, b, dt):
    y = K.project(src, np.ascontiguousarray(w, dtype=dt))
    return y if b is None else K.add_row(y, np.ascontiguousarray(b[None, :], dtype=dt))


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
    if sc.v_norm is not None:                                       # the values' norm
        got["v_norm"] = v_norm.normed(run, [g], got["v"], K)
    after = sc.qk_norm_after_rope
    if sc.k_norm is not None and not after:
        got["k_norm"] = normed_one(K, run, "k", g, got["k"])
    if sc.rope is not None:
        got["k_rot"] = rotate_one(K, sc.rope, got[latest(got, "key")], dt)
    if after:                                                       # QK-norm after the rotation
        got["k_norm"] = normed_one(K, run, "k", g, got["k_rot"])
    return got


