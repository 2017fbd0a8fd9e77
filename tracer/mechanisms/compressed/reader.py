"""The `compressed` section of a DeepSeek V4 layer (from_arrays' `compressed` keyword; a checkpoint's
layer fills it from models/deepseek_v4_layer.py): the layer's weights and what the earlier blocks
give it, checked once here.

    kind      sliding_attention | compressed_sparse_attention | heavily_compressed_attention
    window    W: each query reads the last W tokens        m: tokens an entry pools (compressed kinds)
    topk      the entries the indexer keeps (sparse kind)   streams, pre: N and how x mixed them (n × N)
    x_streams, post, comb   optional: the streams entering ((n·N) × d_model), the hyper-connection's post
              (n × N) and comb (n × N × N), which give the streams after the attention
    w_qa      d_model × q_rank, and q_gain (q_rank): c_q = RMSNorm(h·W_QA)·g
    w_qb      heads × q_rank × D (each head's W_QB)
    eps       the RMS norms' ε (the queries', without a gain, and the keys')
    w_kv      d_model × D, the tokens' keys = values         kv_gain: D, the gain of their RMS norm
    pool      the compressed kinds' pooling: {"w_c": d_model × width (C = h·W_C), "w_z": d_model × width
              (Z = h·W_Z), "bias": m × width (B), "gain": D, "theta": E × r/2 (p·θ at each entry's first
              token)}, width = 2D on the sparse kind (its overlapping windows), D on the heavy one; the
              entries are E = ⌊n/m⌋ (the engine pools them: pool.weights, pool.sum, pool.norm, pool.k)
    theta     n × r/2, p·θ of every position (the turn of the last r features)
    groups, w_a, w_b   the grouped output projection (as saved: W_a (groups·d_g) × (heads·D/groups), W_b)
    index     for the sparse kind, its lightning indexer over the entries: {"q": n × (H_I·d_I), "k": E × d_I,
              "w": n × H_I, "scale"} (the engine scores the complete entries and keeps each query's top k)

The mask follows from them (the window, the entries complete, the entries the indexer keeps). The
layer's W_Q, W_K and W_V are empty (d_model × 0): its projections are these."""
from __future__ import annotations

import numpy as np

from ...checks import choice, kind, number, unknown
from ...errors import ScenarioError
from . import pool

KINDS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")
SPARSE = "compressed_sparse_attention"
SECTION_KEYS = ("kind", "window", "m", "topk", "streams", "pre", "x_streams", "post", "comb", "w_qa", "q_gain", "w_qb",
                "eps", "w_kv", "kv_gain",
                "pool", "theta", "groups", "w_a", "w_b", "index")


def _array(section: dict, key: str, shape: tuple, at: str = "compressed.") -> np.ndarray:
    """section[key] as float64 with `shape` (a number: that size; a word: any size, named so in a
    refusal); `at` names the section in a refusal."""
    value = section.get(key)
    try:
        a = None if value is None else np.asarray(value, dtype=np.float64)
    except (ValueError, TypeError):
        a = None
    if a is None or a.ndim != len(shape) or any(isinstance(w, int) and w != s for w, s in zip(shape, a.shape)):
        got = "nothing" if value is None else kind(value) if a is None or not a.ndim else \
            "an array " + " × ".join(map(str, a.shape))
        raise ScenarioError(at + key, f"expected an array {' × '.join(map(str, shape))}, got {got}")
    return a


def _count(section: dict, key: str, low: int = 1) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ScenarioError(f"compressed.{key}", f"expected a whole number ≥ {low}, got {kind(value)}")
    return int(value)


def sizes(section, n: int) -> tuple[int, int, int]:
    """(heads, D, entries) of a section on n tokens, before the rest is checked: the layer's shape
    depends on them (E = ⌊n/m⌋ entries on a compressed kind, none on a sliding one)."""
    if not isinstance(section, dict):
        raise ScenarioError("compressed", f"expected a table (kind, window, w_qa, w_qb, w_kv, pool …), got "
                            f"{kind(section)}")
    unknown(section, SECTION_KEYS, "compressed.")
    w_qb = _array(section, "w_qb", ("heads", "q_rank", "D"))
    compressed = choice(section, "kind", KINDS, None, "compressed.kind") != KINDS[0]
    return w_qb.shape[0], w_qb.shape[2], n // _count(section, "m") if compressed else 0


def weights(section, n: int) -> dict:
    """The Scenario's projections for build(): empty (the section's W_QB and W_KV are the layer's), one
    key/value head whose values are its keys."""
    heads, d, _ = sizes(section, n)
    w_k = np.zeros((1, 0, d))
    return {"w_q": np.zeros((heads, 0, d)), "w_k": w_k, "w_v": w_k, "v_is_k": True}


def read(scenario, data: dict) -> dict:
    """The section, every array checked against the layer's sizes (n tokens, H heads of D)."""
    section = data.get("compressed")
    if section is None:
        return {}
    n = scenario.n
    heads, d, entries = sizes(section, n)
    layer_kind = choice(section, "kind", KINDS, None, "compressed.kind")
    out = {"kind": layer_kind, "window": _count(section, "window"), "groups": _count(section, "groups")}
    out["m"] = _count(section, "m") if layer_kind != KINDS[0] else None
    out["overlap"] = layer_kind == SPARSE   # its entries pool overlapping windows: 2m slots
    out["topk"] = _count(section, "topk") if layer_kind == SPARSE else None
    out["streams"] = _count(section, "streams")
    out["pre"] = _array(section, "pre", (n, out["streams"]))
    out["x_streams"] = out["post"] = out["comb"] = None
    if section.get("x_streams") is not None:
        out["x_streams"] = _array(section, "x_streams", (n * out["streams"], scenario.d_model))
        out["post"] = _array(section, "post", (n, out["streams"]))
        out["comb"] = _array(section, "comb", (n, out["streams"], out["streams"]))
    out["w_qb"] = _array(section, "w_qb", (heads, "q_rank", d))
    out["w_qa"] = _array(section, "w_qa", (scenario.d_model, out["w_qb"].shape[1]))
    out["q_gain"] = _array(section, "q_gain", (out["w_qb"].shape[1],))
    out["eps"] = number(section.get("eps", 1e-6), "compressed.eps")
    if not 0 < out["eps"] < 1:
        raise ScenarioError("compressed.eps", f"expected a number between 0 and 1, got {out['eps']:g}")
    out["w_kv"], out["kv_gain"] = _array(section, "w_kv", (scenario.d_model, d)), _array(section, "kv_gain", (d,))
    out["entries"], out["pool"] = entries, _pool(section, out, scenario.d_model, d, entries)
    out["theta"] = _array(section, "theta", (n, "r/2"))
    if 2 * out["theta"].shape[1] > d:
        raise ScenarioError("compressed.theta", f"expected at most {d // 2} angles a position, got "
                            f"{out['theta'].shape[1]}")
    out["sources"] = pool.sources(entries, out["m"], out["overlap"]) if entries else np.zeros((0, 1), int)
    if heads * d % out["groups"] or heads % out["groups"]:
        raise ScenarioError("compressed.groups", f"expected a number of groups that divides {heads} heads")
    out["w_a"] = _array(section, "w_a", ("groups·d_g", heads * d // out["groups"]))
    if len(out["w_a"]) % out["groups"]:
        raise ScenarioError("compressed.w_a", f"expected rows in {out['groups']} equal groups, got {len(out['w_a'])}")
    out["w_b"] = _array(section, "w_b", ("d_model", len(out["w_a"])))
    out["index"] = None
    if layer_kind == SPARSE:
        index = section.get("index") or {}
        if not isinstance(index, dict):
            raise ScenarioError("compressed.index", f"expected a table with q, k, w and scale, got {kind(index)}")
        at = "compressed.index."
        w = _array(index, "w", (n, "index heads"), at)
        k = _array(index, "k", (entries, "d_I"), at)
        q = _array(index, "q", (n, w.shape[1] * k.shape[1]), at)
        out["index"] = {"q": q, "k": k, "w": w, "scale": number(index.get("scale", k.shape[1] ** -0.5), at + "scale")}
    return {"compressed": out, "mask": _mask(scenario, out)}


def _pool(section: dict, out: dict, d_model: int, d: int, entries: int) -> dict | None:
    """The pooling's weights of a compressed kind (None on a sliding one)."""
    if out["m"] is None:
        return None
    value, at = section.get("pool"), "compressed.pool."
    if not isinstance(value, dict):
        raise ScenarioError("compressed.pool", "expected a table with w_c, w_z, bias, gain and theta, got "
                            f"{kind(value)}")
    unknown(value, ("w_c", "w_z", "bias", "gain", "theta"), at)
    width = 2 * d if out["kind"] == SPARSE else d
    got = {key: _array(value, key, (d_model, width), at) for key in ("w_c", "w_z")}
    got.update(bias=_array(value, "bias", (out["m"], width), at), gain=_array(value, "gain", (d,), at),
               theta=_array(value, "theta", (entries, "r/2"), at))
    return got


def _mask(scenario, c: dict) -> np.ndarray:
    """query × (tokens, entries): the window, the entries complete at the query, those its indexer keeps;
    a mask the scenario gives must be this one (the steps' words name these three reasons)."""
    from . import attention
    from .compute import index
    n = scenario.n
    entries = pool.visible(n, c["entries"], c["m"]) if c["m"] is not None else np.zeros((n, 0), bool)
    if c["index"] is not None:
        entries = entries & index(c, n)["idx.selected"]
    allowed = np.concatenate([attention.sliding(n, c["window"]), entries], axis=1)
    given = scenario.mask
    if not (isinstance(given, str) and given == "none") and not np.array_equal(given, allowed):
        raise ScenarioError("mask", f"expected none, or the layer's own ({n} × {allowed.shape[1]}: the last "
                            f"{c['window']} tokens, then the entries complete at the query that its indexer keeps)")
    return allowed
