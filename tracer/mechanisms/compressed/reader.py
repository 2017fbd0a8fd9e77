"""The `compressed` section of a DeepSeek V4 layer (from_arrays' `compressed` keyword; a checkpoint's
layer fills it from models/deepseek_v4_layer.py): what the heads read, computed by the layer's own
formulas before them, checked once here.

    kind      sliding_attention | compressed_sparse_attention | heavily_compressed_attention
    window    W: each query reads the last W tokens        m: tokens an entry pools (compressed kinds)
    topk      the entries the indexer keeps (sparse kind)   streams, pre: N and how x mixed them (n × N)
    q         heads × n × D, the queries turned             q_norm: the same before the turn
    kv        n × D, the tokens' keys = values, turned      entries: E × D, the pooled keys (`pool.k`)
    pool_weights  E × S × D                                 sources: E × S, the token of each slot (−1: none)
    theta     n × r/2, p·θ of every position (the turn of the last r features)
    groups, w_a, w_b   the grouped output projection (as saved: W_a (groups·d_g) × (heads·D/groups), W_b)
    index     for the sparse kind: {"scores": n × E, "selected": n × E}, the indexer's over the entries

No projection matrix of the layer is multiplied in the trace: W_Q, W_K and W_V are empty (d_model × 0)."""
from __future__ import annotations

import numpy as np

from ...checks import kind
from ...errors import ScenarioError

KINDS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")
SPARSE = "compressed_sparse_attention"


def _array(section: dict, key: str, shape: tuple, at: str = "compressed.") -> np.ndarray:
    """section[key] as float64 with `shape` (None: any size there); `at` names the section in a refusal."""
    a = np.asarray(section.get(key), dtype=np.float64) if section.get(key) is not None else None
    if a is None or a.ndim != len(shape) or any(w is not None and w != s for w, s in zip(shape, a.shape)):
        want = " × ".join("?" if w is None else str(w) for w in shape)
        raise ScenarioError(at + key, f"expected an array {want}, got "
                            f"{'nothing' if a is None else ' × '.join(map(str, a.shape))}")
    return a


def _count(section: dict, key: str, low: int = 1) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ScenarioError(f"compressed.{key}", f"expected a whole number ≥ {low}, got {kind(value)}")
    return int(value)


def sizes(section) -> tuple[int, int, int]:
    """(heads, D, entries) of a section, before the rest is checked: the layer's shape depends on them."""
    if not isinstance(section, dict):
        raise ScenarioError("compressed", f"expected a table (kind, window, q, kv, entries …), got {kind(section)}")
    q = _array(section, "q", (None, None, None))
    return q.shape[0], q.shape[2], len(_array(section, "entries", (None, q.shape[2])))


def weights(section) -> dict:
    """The Scenario's projections for build(): empty (no matrix is multiplied), one key/value head
    whose values are its keys."""
    heads, d, _ = sizes(section)
    w_k = np.zeros((1, 0, d))
    return {"w_q": np.zeros((heads, 0, d)), "w_k": w_k, "w_v": w_k, "v_is_k": True}


def read(scenario, data: dict) -> dict:
    """The section, every array checked against the layer's sizes (n tokens, H heads of D)."""
    section = data.get("compressed")
    if section is None:
        return {}
    heads, d, entries = sizes(section)
    n = scenario.n
    layer_kind = section.get("kind")
    if layer_kind not in KINDS:
        raise ScenarioError("compressed.kind", f"expected one of {', '.join(KINDS)}, got {kind(layer_kind)}")
    out = {"kind": layer_kind, "window": _count(section, "window"), "groups": _count(section, "groups")}
    out["m"] = _count(section, "m") if layer_kind != KINDS[0] else None
    out["topk"] = _count(section, "topk") if layer_kind == SPARSE else None
    out["streams"] = _count(section, "streams")
    out["pre"] = _array(section, "pre", (n, out["streams"]))
    out["q"], out["q_norm"] = (_array(section, key, (heads, n, d)) for key in ("q", "q_norm"))
    out["kv"], out["entries"] = _array(section, "kv", (n, d)), _array(section, "entries", (entries, d))
    out["theta"] = _array(section, "theta", (n, None))
    if 2 * out["theta"].shape[1] > d:
        raise ScenarioError("compressed.theta", f"expected at most {d // 2} angles a position, got {out['theta'].shape[1]}")
    out["pool_weights"] = _array(section, "pool_weights", (entries, None, d))
    out["sources"] = _array(section, "sources", (entries, out["pool_weights"].shape[1])).astype(np.int64)
    if heads * d % out["groups"] or heads % out["groups"]:
        raise ScenarioError("compressed.groups", f"expected a number of groups that divides {heads} heads")
    out["w_a"] = _array(section, "w_a", (None, heads * d // out["groups"]))
    if len(out["w_a"]) % out["groups"]:
        raise ScenarioError("compressed.w_a", f"expected rows in {out['groups']} equal groups, got {len(out['w_a'])}")
    out["w_b"] = _array(section, "w_b", (None, len(out["w_a"])))
    out["index"] = None
    if layer_kind == SPARSE:
        index = section.get("index") or {}
        out["index"] = {key: _array(index, key, (n, entries), "compressed.index.") for key in ("scores", "selected")}
        out["index"]["selected"] = out["index"]["selected"] != 0
    return {"compressed": out}
