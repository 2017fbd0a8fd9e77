"""Why multi-head latent attention exists, in numbers: what one layer's KV cache holds per token
under each kind of attention (DeepSeek-V2's table), and the absorbed form of the scores, in
which W_UK is folded into the queries so that they read the cached latent directly."""
from __future__ import annotations

import numpy as np

from ...rms import refuse_zero_rows
from ..rotary.rotation import rotate_one, turn


def cache_per_token(heads: int, head_dim: int, groups: int, kv_rank: int, rope_dims: int) -> dict[str, int]:
    """Elements one token adds to one layer's cache: MHA keeps every head's key and value
    (2·n_h·d_h), GQA every group's (2·n_g·d_h), MQA one pair (2·d_h), MLA the latent c_kv and
    the shared rotary key k_pe (d_c + d_h^R)."""
    return {"MHA": 2 * heads * head_dim, "GQA": 2 * groups * head_dim, "MQA": 2 * head_dim,
            "MLA": kv_rank + rope_dims}


def absorbed_scores(q_nope: np.ndarray, w_uk: np.ndarray, c_kv: np.ndarray) -> np.ndarray:
    """One head's no-position scores from the latent: (q_nope·W_UKᵀ)·c_kvᵀ, where W_UK (rank ×
    nope, rows orientation: k_nope = c_kv·W_UK) rebuilds the keys. Equal to q_nope·k_nopeᵀ by
    associativity; a decoder computes q_nope·W_UKᵀ once per query and never rebuilds a key."""
    return (q_nope @ w_uk.T) @ c_kv.T


def rebuilt_scores(q_nope: np.ndarray, w_uk: np.ndarray, c_kv: np.ndarray) -> np.ndarray:
    """The same scores the textbook way: rebuild each key k_nope = c_kv·W_UK, then q_nope·k_nopeᵀ."""
    return q_nope @ (c_kv @ w_uk).T


def cache_sizes(scenario) -> dict[str, int]:
    """cache_per_token() for a scenario with [mla]: its heads, the values' width as d_h, and for
    grouped-query attention the 8 key/value heads of Llama-3-style models (half the heads, at
    least one, when there are 8 heads or fewer)."""
    m, heads = scenario.mla, scenario.heads
    return cache_per_token(heads, scenario.d_v, gqa_groups(heads), m["rank"], m["rope"])


def gqa_groups(heads: int) -> int:
    return 8 if heads > 8 else max(1, heads // 2)


def inputs(run, K, got: dict) -> dict:
    """What every head shares, computed once: the compressed queries c_q (when the scenario has
    them), the latent c_kv and the rotary key k_pe (the two a decoder caches)."""
    dt, m = run.dtype, run.scenario.mla
    src = got.get("norm_in", run.x)
    out = {}
    if m["w_dq"] is not None:
        out["c_q"] = _normed(K, K.project(src, _c(m["w_dq"], dt)), m["q_norm"], m["eps"], dt, "c_q", run)
    out["c_kv"] = _normed(K, K.project(src, _c(m["w_dkv"], dt)), m["kv_norm"], m["eps"], dt, "c_kv", run)
    out["k_pe"] = rotate_one(K, run.scenario.rope, K.project(src, _c(m["w_kr"], dt)), dt)
    return out


def stage_head(run, h: int, K) -> dict:
    """Head h's own steps before its scores, by kind: q_nope, q_pe (rotated), k_nope and v rebuilt
    from the latent; then the query and the key the scores are the dot product of, side by side
    ([q_nope | q_pe] and [k_nope | k_pe]: q_nope·k_nopeᵀ + q_pe·k_peᵀ in one product)."""
    sc, dt, nope = run.scenario, run.dtype, run.scenario.mla["nope"]
    c_kv, k_pe = run.held("c_kv"), run.held("k_pe")
    src = run.held("c_q") if sc.mla["w_dq"] is not None else run.held("norm_in") if sc.norm_in is not None else run.x
    w = sc.w_q[h]
    got = {"q_nope": K.project(src, _c(w[:, :nope], dt)), "q_pe": rotate_one(K, sc.rope, K.project(src, _c(w[:, nope:], dt)), dt),
           "k_nope": K.project(c_kv, _c(sc.w_k[h], dt)), "v": K.project(c_kv, _c(sc.w_v[h], dt))}
    q = np.ascontiguousarray(np.concatenate([got["q_nope"], got["q_pe"]], axis=1))
    k = np.ascontiguousarray(np.concatenate([got["k_nope"], k_pe], axis=1))
    return got, q, k


def absorbed(run, h: int, got: dict) -> dict:
    """The absorbed form of head h's scores, computed as a decoder would: q_latent = q_nope·W_UKᵀ
    (the query moved into the latent's space), then q_latent·c_kvᵀ + q_pe·k_peᵀ from the cache
    (q_nope and q_pe warmed by τ first when the scenario has a query temperature)."""
    sc, dt, nope = run.scenario, run.dtype, run.scenario.mla["nope"]
    q = got.get("q_temp")   # warmed by a query temperature (Mistral 4): both parts from it
    q_nope, q_pe = (got["q_nope"], got["q_pe"]) if q is None else (q[:, :nope], q[:, nope:])
    q_latent = (q_nope.astype(np.float64) @ sc.w_k[h].T).astype(dt)
    scores = q_latent.astype(np.float64) @ run.held("c_kv").T.astype(np.float64) + \
        q_pe.astype(np.float64) @ run.held("k_pe").T.astype(np.float64)
    return {"q_latent": q_latent, "absorbed": scores.astype(dt)}


def _c(a: np.ndarray, dt) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dt)


def _normed(K, a: np.ndarray, gain, eps: float, dt, name: str, run) -> np.ndarray:
    """An RMS norm of each row with its gain, or the rows as they are when there is no norm."""
    if gain is None:
        return a
    refuse_zero_rows(a, eps, "mla.norm_eps", lambda t: f"the latent {name} of token {t} ({run.scenario.tokens[t]!r})",
                     run.scenario.source)
    return K.rms_norm(a, _c(gain[None, :], dt), eps)



def decode(run, run_trace) -> tuple[dict, object, bool]:
    """[decode] under latent attention: the prompt at once (as decode.prefill), then each later
    token alone. The cache is c_kv and k_pe (computed for every token before the heads, each row
    once: a token's row is appended when it arrives); a head's scores come from it absorbed,
    q_latent·C_cacheᵀ + q_pe·K_PE_cacheᵀ, and its values are rebuilt from it. Returns the arrays
    by id (every decoded step, rows orientation), a viewer of them, and whether all stayed finite."""
    from types import SimpleNamespace

    from ...decode import layer_row, prefill
    from ...ids import step_id
    sc, dt, p = run.scenario, run.dtype, run.scenario.decode
    arrays, _ = prefill(run, run_trace)
    w_o = None if sc.w_o is None else sc.w_o.astype(dt)
    b_o = None if sc.b_o is None else sc.b_o.astype(dt)[0]
    ok = True
    with np.errstate(all="ignore"):
        for t in range(p, sc.n):
            at = lambda kind, h=None: step_id(kind, h, token=t)  # noqa: E731
            arrays[at("ckv_cache")], arrays[at("kpe_cache")] = run.held("c_kv")[: t + 1], run.held("k_pe")[: t + 1]
            heads = [_decoded_head(run, h, t) for h in range(sc.heads)]
            for h, (got, finite) in enumerate(heads):
                arrays.update({at(kind, h): arr for kind, arr in got.items()})
                ok = ok and finite
            zs = np.concatenate([got["z"] for got, _ in heads])
            arrays.update({at(kind): row[None, :] for kind, row in layer_row(run, zs, t, w_o, b_o).items()})
    return arrays, SimpleNamespace(view=arrays.__getitem__), ok


def _decoded_head(run, h: int, t: int) -> tuple[dict, bool]:
    """Head h's steps for decoded token t (each one row): its query's parts, the absorbed query,
    its scores straight from the cache, the softmax (decode.row_weights), the values rebuilt, z."""
    from ...decode import row_weights
    from ..rotary.frequencies import tables
    sc, dt, m = run.scenario, run.dtype, run.scenario.mla
    src = run.held("c_q") if m["w_dq"] is not None else run.held("norm_in") if sc.norm_in is not None else run.x
    c_kv, k_pe = run.held("c_kv")[: t + 1], run.held("k_pe")[: t + 1]
    cos, sin = tables(sc.n, m["rope"], sc.rope, dt)
    w = sc.w_q[h].astype(dt)
    q_nope, raw = src[t : t + 1] @ w[:, :m["nope"]], src[t : t + 1] @ w[:, m["nope"]:]
    q_pe = turn(raw, cos[t], sin[t], sc.rope["style"], m["rope"])   # turned by its own position t
    q_latent = q_nope @ sc.w_k[h].T.astype(dt)
    s = q_latent @ c_kv.T + q_pe @ k_pe.T
    scaled, e, total, weights = row_weights(s, run.arithmetic, sc.d_k)
    got = dict(q_nope=q_nope, q_pe=q_pe, q_latent=q_latent, scores=s, scaled=scaled, weights=weights.astype(dt))
    if e is not None:
        got.update(exp=e, sums=np.array([[total]], dt))
    v = got["v"] = c_kv @ sc.w_v[h].astype(dt)
    z = got["z"] = got["weights"] @ v
    finite = bool(np.isfinite(scaled).all() and np.isfinite(z).all()) and (total is None or bool(np.isfinite(total)))
    return got, finite
