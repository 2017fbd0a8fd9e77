"""The online softmax's numbers: a head's keys in blocks with a running max, running sums and a
running output. Plain NumPy for small traces (every step at once); the compiled kernel for large
ones, which keeps only each block's max, rescale and sums and recomputes the tiles when asked.

Conventions (the same in both): before any visible key the running max is −∞ (so the first
rescale is base^(−∞) = 0); an unchanged max rescales by 1; with stable=false the max is 0 throughout.
"""
from __future__ import annotations

import numpy as np

from .ids import step_id
from .numpy_engine import whole_floor
from .steps.online import blocks


def _scaled(s: np.ndarray, arithmetic, d_k: int) -> np.ndarray:
    c = arithmetic.scale_divisor(d_k)
    if c is None:
        return s
    return whole_floor(s / s.dtype.type(c)) if arithmetic.scale == "floor" else s / s.dtype.type(c)


def _power(x: np.ndarray, arithmetic) -> np.ndarray:
    if arithmetic.softmax_base == "e":
        return np.exp(x)
    # float64 pow, so that small integer powers (3² = 9) come out exact
    return np.power(np.float64(arithmetic.base), x.astype(np.float64)).astype(x.dtype, copy=False)


def head_numpy(q, k, v, allowed, arithmetic, d_k: int) -> tuple[list[dict], np.ndarray]:
    """Every block's steps of one head (rows orientation, allowed: query × key or None), and z."""
    dt, a = q.dtype, arithmetic
    n = q.shape[0]
    m = np.full((n, 1), -np.inf if a.stable else 0.0, dt)
    total, acc = np.zeros((n, 1), dt), np.zeros((n, v.shape[1]), dt)
    steps = []
    with np.errstate(all="ignore"):
        for j0, w in blocks(k.shape[0], a.block):
            s = _scaled(q @ k[j0:j0 + w].T, a, d_k)
            if allowed is not None:
                s = np.where(allowed[:, j0:j0 + w], s, dt.type(-np.inf))
            if a.stable:
                new = np.maximum(m, s.max(axis=1, keepdims=True))
                rescale = np.where(new == m, dt.type(1), _power(m - new, a))
            else:
                new, rescale = m, np.ones((n, 1), dt)
            shift = np.where(new > -np.inf, new, dt.type(0))   # a query that has seen nothing: −∞ powers, 0
            p = _power(s - shift, a)
            total = rescale * total + p.sum(axis=1, keepdims=True, dtype=np.float64).astype(dt)
            acc = rescale * acc + p @ v[j0:j0 + w]
            steps.append(dict(scores=s, max=new, rescale=rescale, powers=p, sums=total, acc=acc))
            m = new
        z = np.where(total > 0, acc / np.where(total > 0, total, dt.type(1)), dt.type(0))
    return steps, z


def stage_head(run, h: int, kv: dict, q: np.ndarray) -> dict:
    """Head h's block steps and z by id, on NumPy (q: the rotated queries under RoPE)."""
    sc = run.scenario
    from .projections import latest
    steps, z = head_numpy(q, kv[latest(kv, "key")], kv[latest(kv, "value")], run.allowed, run.arithmetic, sc.d_k)
    out = {step_id(kind, h, block=j): a for j, got in enumerate(steps) for kind, a in got.items()}
    out[step_id("z", h)] = z
    return out


# ---------------------------------------------------------------- the compiled path

def fused(run, heads: list[int], q, k, v, keep: bool = False) -> tuple[dict, list[int]]:
    """Heads `heads` (q, k, v: heads × n × d) on the compiled kernel: z and each block's max,
    rescale and sums (views of one array per kind); with keep, also the scores, powers and acc."""
    from . import kernels
    from .kernels import ROWS
    from .masks import mask_matrix, mask_kind
    sc, a, dt = run.scenario, run.arithmetic, run.dtype
    n, m_keys, d_v = q.shape[1], k.shape[1], v.shape[2]
    nb = len(blocks(m_keys, a.block))
    state = np.empty((3, len(heads), n, nb), dt)           # max, rescale, sums
    z = np.empty((len(heads), n, d_v), dt)
    shape = (len(heads), n, m_keys) if keep else (1, 1, 1)
    tiles = (np.empty(shape, dt), np.empty(shape, dt),
             np.empty((len(heads), n, nb * d_v) if keep else (1, 1, 1), dt))
    rule = kernels.rule(a, mask_kind(run.mask), sc.d_k)
    bad = np.zeros(len(heads), np.int8)
    kernels.online_heads(q, k, v, state, z, tiles, bad, rule, mask_matrix(run), min(a.block, m_keys), ROWS, keep)
    out = {}
    for i, h in enumerate(heads):
        out[step_id("z", h)] = z[i]
        for j, (j0, w) in enumerate(blocks(m_keys, a.block)):
            ids = {kind: step_id(kind, h, block=j) for kind in ("max", "rescale", "sums", "scores", "powers", "acc")}
            out.update({ids[kind]: state[s, i, :, j:j + 1] for s, kind in enumerate(("max", "rescale", "sums"))})
            if keep:
                out.update({ids["scores"]: tiles[0][i, :, j0:j0 + w], ids["powers"]: tiles[1][i, :, j0:j0 + w],
                            ids["acc"]: tiles[2][i, :, j * d_v:(j + 1) * d_v]})
    return out, [h for i, h in enumerate(heads) if bad[i] or not np.isfinite(z[i]).all()]


def tiles(run, h: int) -> dict:
    """Head h's scores, powers and acc of every block, recomputed by the same kernel from its q, k
    and v (as FlashAttention's backward pass recomputes its tiles from the saved statistics)."""
    from .projections import latest
    ids = run.plan_ids(h)
    q = run.rows(ids[latest(ids, "query")])[None]
    k, v = run.rows(ids[latest(ids, "key")])[None], run.rows(ids[latest(ids, "value")])[None]
    got, _ = fused(run, [h], *(np.ascontiguousarray(a) for a in (q, k, v)), keep=True)
    return {sid: a for sid, a in got.items() if run.step(sid).key in ("blk_scores", "blk_powers", "blk_acc")}
