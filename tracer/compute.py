"""How a trace's numbers are computed: stage by stage with the readable kernels (small scenarios),
or fused, every head and block of queries at once (large ones). Both return the same arrays, by
step id and in the rows orientation; recording them is the trace's business.

Nothing here imports numba until a kernel is needed, so `import tracer` stays quick.
"""
from __future__ import annotations

import sys

import numpy as np

from . import kernels, mechanisms
from .ids import step_id
from .kernels import pool
from .kernels import matmul
from .projections import key_values, latest, project_one, projections, textbook
from .masks import kernel_mask, mask_kind, mask_matrix
from .mechanisms import out_norm, output_gate, qk_norm
from .mechanisms.q_temp import steps as q_temp
from .mechanisms.rotary import frequencies
from .mechanisms.rotary.rotation import rotate_one

FUSED_CELLS = 1 << 20   # heads · n² from which the fused kernels pay for their compile time
LARGE_COPY = 1 << 20     # numbers from which the heads' outputs are joined by NumPy alone
THREADED_MACS = 1 << 24  # a product this large runs on numba's threads (see large)
TINY_CELLS = 1 << 12    # heads · n² up to which the stage kernels may run uncompiled (see stages)
BLOCK = 128             # queries per fused task (larger blocks: better use of each matrix product)
_compiled: list = []    # set once the compiled stage kernels are in use


def engine_for(scenario, engine: str = "auto") -> str:
    """`stages` (one kernel per step, the reference), `fused`, or `numpy` (a cold kernel cache, for
    the plain layer). The fused n × n blocks need as many keys as queries: cross-attention with
    another length runs stage by stage, and so does a layer with a mechanism the fused kernels do not
    run (their declarations say which)."""
    if scenario.m != scenario.n or not mechanisms.fused(scenario):
        return "stages"
    if engine in ("stages", "fused"):
        return engine
    cells = scenario.heads * scenario.n ** 2
    if (cells > TINY_CELLS or "numba" in sys.modules) and textbook(scenario):
        from .kernels import warm   # kernels not cached yet: NumPy, never the compiler (kernels/warm.py)
        if warm.use_numpy():
            return "numpy"
    return "fused" if cells >= FUSED_CELLS else "stages"


def fused_heads(run, heads: list[int]) -> tuple[dict, list[int]]:
    """Every step of consecutive heads `heads` in one parallel call: (arrays by id, heads whose
    values left the dtype's range)."""
    if run.engine == "numpy":   # head by head on the NumPy twins of the stage kernels
        got = [stage_head(run, h) for h in heads]
        return {k: a for arrays, _ in got for k, a in arrays.items()}, [h for h, (_, ok) in zip(heads, got) if not ok]
    from .kernels import fused as F
    sc, ar, dt, n = run.scenario, run.arithmetic, run.dtype, run.scenario.n
    q, k, v, extra = projections(run, heads)
    if ar.online:
        return _online_heads(run, heads, q, k, v, extra)
    rule = kernels.rule(ar, kernel_mask(run), sc.d_k)
    kinds = ["scores"] + (["scaled"] if ar.scale_divisor(sc.d_k) is not None else [])
    kinds += (["masked"] if rule.mask != F.MASK_NONE else [])
    kinds += ["exp", "weights"] if rule.norm == F.NORM_SOFTMAX else ["weights"]
    slot = {kind: i for i, kind in enumerate(kinds)}
    slot.setdefault("scaled", slot["scores"])   # scale `none`: the scaled step is the scores
    record = F.Record(pool.empty((len(kinds), len(heads), n, n), dt),
                      tuple(slot.get(kind, -1) for kind in ("scores", "scaled", "masked", "exp", "weights")),
                      np.zeros((len(heads), n, 1), dt), pool.empty((len(heads), n, sc.d_v), dt),
                      np.zeros(len(heads), np.int8))
    kernels.trace_heads(q, k, v, record, rule, mask_matrix(run), BLOCK)
    out, bad = dict(extra), []
    for i, h in enumerate(heads):
        ids = run.plan_ids(h)
        got = {latest(ids, "query"): q[i], "z": record.z[i]}
        if textbook(sc):
            got.update(k=k[i], v=v[i])
        got.update({kind: record.grid[slot[kind], i] for kind in slot})
        if "exp" in slot:
            got["sums"] = record.sums[i]
        out.update({ids[kind]: a for kind, a in got.items()})
        if record.bad[i] or not (np.isfinite(record.z[i]).all() and np.isfinite(record.sums[i]).all()):
            bad.append(h)
    return out, bad


def _online_heads(run, heads: list[int], q, k, v, extra: dict) -> tuple[dict, list[int]]:
    """fused_heads() under the online algorithm: the projections, then the compiled online kernel
    (each block's max, rescale and sums, and z; the tiles are recomputed when asked)."""
    from . import online
    if k.shape[0] < q.shape[0]:   # whole groups (grouped-query): the online kernel reads one key head per query head
        per = q.shape[0] // k.shape[0]
        k, v = np.repeat(k, per, axis=0), np.repeat(v, per, axis=0)
    got, bad = online.fused(run, heads, q, k, v)
    out = {**extra, **got}
    for i, h in enumerate(heads):
        ids = run.plan_ids(h)
        out[ids[latest(ids, "query")]] = q[i]
        if textbook(run.scenario):
            out.update({ids["k"]: k[i], ids["v"]: v[i]})
    return out, bad


def stages(run):
    """The per-stage kernels, chosen once per trace: compiled, except for a tiny scenario while numba
    is not loaded yet, which runs their NumPy twins (the textbook layer) or the kernels' own Python
    (today's parts): its few dozen numbers take microseconds either way, while loading numba and
    its cached machine code takes ≈0.4 s (a one-shot `attnsim show` would spend most of its life
    on it). Same arithmetic, same steps."""
    if run.kernels is None:
        run.kernels = _choose(run)
    return run.kernels


def _choose(run):
    sc = run.scenario
    if run.engine == "numpy":
        from .numpy_engine import KERNELS
        return KERNELS
    if not _compiled and run.may_interpret and "numba" not in sys.modules and sc.heads * sc.n ** 2 <= TINY_CELLS:
        if textbook(sc):   # the same arithmetic, vectorised: a few µs where Python loops take tens
            from .numpy_engine import KERNELS
            return KERNELS
        return kernels.stage_kernels(compiled=False)
    _compiled.append(True)
    return kernels.stage_kernels(compiled=True)


def inputs(run) -> dict:
    """The steps before the heads: the context of cross-attention, a real model's norm_in, the
    rotary frequencies."""
    sc, dt, got = run.scenario, run.dtype, {}
    if sc.rope is not None:
        d = 2 * sc.dims().pairs
        got["freqs"] = np.ascontiguousarray(frequencies.frequencies(sc.rope, d)[:, None], dtype=dt)
    if sc.shared_kv is not None and sc.shared_kv["x"] is not None:   # shared KV: the source layer's input
        got["kv_x"] = np.ascontiguousarray(sc.shared_kv["x"], dtype=dt)
    if sc.q_temp is not None:                                        # the query temperature
        got["tau"] = np.ascontiguousarray(q_temp.taus(sc.q_temp)[:, None], dtype=dt)
    if sc.context is not None:
        got["context"] = np.ascontiguousarray(sc.context, dtype=dt)
    if sc.norm_in is not None:
        K, spec = stages(run), sc.norm_in
        gain, bias = (np.ascontiguousarray(spec[key], dtype=dt) for key in ("gain", "bias"))
        with np.errstate(all="ignore"):
            y = K.rms_norm(run.x, gain, spec["eps"]) if spec["kind"] == "rms" else \
                K.add_row(K.layer_norm(run.x, spec["eps"]) * gain, bias)
            got["norm_in"] = K.add_row(y, bias) if spec["kind"] == "rms" and spec["bias"].any() else y
    if sc.mla is not None:   # latent attention's shared parts: c_q, c_kv, k_pe
        from .mechanisms.latent import compute as latent
        with np.errstate(all="ignore"):
            got.update(latent.inputs(run, stages(run), got))
    if sc.compressed is not None:   # DeepSeek V4: the streams, c_q, the pooled entries, the indexer's choice
        from .mechanisms.compressed import compute as compressed
        got.update(compressed.inputs(run, got))
    if sc.sparse is not None:   # the lightning indexer: its scores and each query's choice of keys
        from .mechanisms.indexer import compute as indexer
        got.update(indexer.inputs(run, got))
    return got


def stage_head(run, h: int) -> tuple[dict, bool]:
    """Head h's steps, one kernel per step (the readable reference path): (arrays by id, finite)."""
    K = stages(run)   # compiled kernels raise no FP warnings; NumPy's (small traces too) would
    with np.errstate(all="ignore"):  # inf and NaN are reported as errors, not as warnings
        return _stage_head(run, h, K)


_ONE = np.ones((1, 1), np.bool_)   # the mask argument when nothing is masked


def head_weights(sc, h: int, dt) -> tuple:
    """W_Q, W_K, W_V of head h as C-contiguous arrays of the run's dtype, made once per scenario."""
    memo = sc.__dict__.setdefault("_head_weights", {})
    key = (h, dt)
    if sc.w_q[h].size > 1 << 16:   # large weights: not worth holding a second copy
        return tuple(np.ascontiguousarray(w[h], dtype=dt) for w in (sc.w_q, sc.w_k, sc.w_v))
    if key not in memo:
        memo[key] = tuple(np.ascontiguousarray(w[h], dtype=dt) for w in (sc.w_q, sc.w_k, sc.w_v))
    return memo[key]


def _rule(run, h: int = 0) -> tuple:
    """The arithmetic, and head h's mechanisms of the scores, as kernels.attend takes them."""
    a, sc = run.arithmetic, run.scenario
    c = a.scale_divisor(sc.d_k)
    return (0 if c is None else 2 if a.scale == "floor" else 1, 1.0 if c is None else c,
            a.normalize == "softmax", a.softmax_base == "e", a.base, a.stable, run.allowed is not None,
            0.0 if sc.softcap is None else float(sc.softcap),                          # soft-capping: C
            sc.alibi is not None, 0.0 if sc.alibi is None else float(sc.alibi[h]),     # ALiBi: the head's slope
            sc.score_bias is not None,                                                 # an additive mask: _bias
            sc.sinks is not None, 0.0 if sc.sinks is None else float(sc.sinks[h]))     # a sink: the head's logit


def _bias(run, h: int) -> np.ndarray:
    """Head h's additive mask M_h in the run's dtype (query × key), or a 1 × 1 stand-in without one."""
    sc = run.scenario
    if sc.score_bias is None:
        return np.zeros((1, 1), run.dtype)
    return np.ascontiguousarray(sc.score_bias[h], dtype=run.dtype)


_ATTEND = ("scores", "scaled", "capped", "biased", "masked", "exp", "sums", "sink", "weights", "z")   # attend's


def _stage_head(run, h: int, K) -> tuple[dict, bool]:
    sc, dt, ids = run.scenario, run.dtype, run.plan_ids(h)
    allowed = _ONE if run.allowed is None else run.allowed
    if sc.w_v_down is None and textbook(sc) and not run.arithmetic.online:   # one call for the whole head
        *arrays, finite = K.textbook_head(run.x, *head_weights(sc, h, dt), allowed, _bias(run, h), _rule(run))
        return {ids[kind]: arr for kind, arr in zip(("q", "k", "v", *_ATTEND), arrays) if kind in ids}, finite
    if sc.mla is not None:   # latent attention: its own projections, then the same attend
        return _latent_head(run, h, K, ids, allowed)
    if sc.compressed is not None:                                    # DeepSeek V4: keys over tokens, then entries
        from .mechanisms.compressed import compute as compressed
        return compressed.head(run, h, K, ids, allowed, _bias(run, h), _rule(run, h), _ATTEND)
    if sc.linear is not None:                                        # linear attention: a state, no scores
        from .mechanisms.linear import compute as linear
        return linear.head(run, h, K)
    kv = key_values(run, h, K)
    got = {"q": project_one(K, run.held(run.step(ids["q"]).inputs[0]), sc.w_q[h], None if sc.b_q is None else sc.b_q[h], dt)}
    if sc.q_norm is not None and not sc.qk_norm_after_rope:         # QK-norm
        got["q_norm"] = qk_norm.normed_one(K, run, "q", h, got["q"])
    if sc.rope is not None:                                          # rotary positions
        got["q_rot"] = rotate_one(K, sc.rope, got[latest(got, "query")], dt)
    if sc.qk_norm_after_rope:                                        # QK-norm after the rotation
        got["q_norm"] = qk_norm.normed_one(K, run, "q", h, got["q_rot"])
    if sc.q_temp is not None:                                        # the query temperature
        got["q_temp"] = q_temp.warm(sc.q_temp, got[latest(got, "query")])
    out = {ids[kind]: arr for kind, arr in {**got, **kv}.items()}
    q, k = got[latest(got, "query")], kv[latest(kv, "key")]
    if run.arithmetic.online:   # the keys in blocks (tracer/online.py) instead of the whole score matrix
        from . import online
        out.update(online.stage_head(run, h, kv, q))
        return out, bool(np.isfinite(out[step_id("z", h)]).all())
    *arrays, finite = K.attend(q, k, kv[latest(kv, "value")], allowed, _bias(run, h), _rule(run, h))
    out.update({ids[kind]: arr for kind, arr in zip(_ATTEND, arrays) if kind in ids})
    if sc.w_gate is not None:                                        # the output gate
        out.update(output_gate.head(run, h, ids, out[ids["z"]]))
    return out, finite


def _latent_head(run, h: int, K, ids: dict, allowed) -> tuple[dict, bool]:
    from .mechanisms.latent import compute as latent
    got, q, k = latent.stage_head(run, h, K)
    if run.scenario.q_temp is not None:                              # the query temperature, on both parts
        q = got["q_temp"] = q_temp.warm(run.scenario.q_temp, q)
    *arrays, finite = K.attend(q, k, got["v"], allowed, _bias(run, h), _rule(run, h))
    got.update(zip(_ATTEND, arrays))
    got.update(latent.absorbed(run, h, got))
    return {ids[kind]: arr for kind, arr in got.items() if kind in ids}, finite


def tail(run, zs: list[np.ndarray]) -> dict:
    """concat, out, residual and norm from the heads' outputs (rows orientation)."""
    K = stages(run) if run.engine != "fused" else kernels.stage_kernels(compiled=True)
    sc = run.scenario
    with np.errstate(all="ignore"):
        if sc.heads == 1:
            return after_heads(run, zs[0], K)
        if run.engine == "fused" or sc.n * sc.heads * sc.d_v >= LARGE_COPY:   # one copy, not a stack and a copy
            y = np.concatenate(zs, axis=1, out=pool.empty((sc.n, sc.heads * sc.d_v), run.dtype))
        else:
            y = K.concat(np.stack(zs))
        return {"concat": y, **after_heads(run, y, K)}


def large(x: np.ndarray, w: np.ndarray) -> bool:
    """Whether x·w is worth numba's threads (BLAS held to one thread in each) over one BLAS call: a
    threaded BLAS call leaves its own threads spinning for a while after it returns, and they take
    cycles from numba's threads in whatever parallel kernel runs next."""
    return x.shape[0] * x.shape[1] * w.shape[-1] >= THREADED_MACS


def after_heads(run, y: np.ndarray, K) -> dict:
    """out, residual and norm from the heads' outputs side by side (the one tail: the trace's
    and tracer.attention's)."""
    sc, dt, got = run.scenario, run.dtype, {}
    if sc.w_o is not None:
        w_o = sc.cast(sc.w_o, dt)
        threaded = run.engine == "fused" or run.engine == "stages" and large(y, w_o)   # not the NumPy engine's
        y = matmul(y, w_o[None])[0] if threaded else K.project(y, w_o)
        y = got["out"] = y if sc.b_o is None else K.add_row(y, np.ascontiguousarray(sc.b_o, dtype=dt))
    if sc.compressed is not None:                                    # DeepSeek V4's grouped W_O
        from .mechanisms.compressed import compute as compressed
        got.update(compressed.output(run, y))
    if sc.out_norm is not None:                                      # the output's norm
        y = got["out_norm"] = out_norm.normed(K, run, y)
    if sc.residual:
        y = got["residual"] = K.add(run.x, y)
        if sc.residual["norm"] == "layer":
            got["norm"] = K.layer_norm(y, sc.residual["eps"])
    return got
