"""The scenario file's lightning indexer: `[sparse] topk = K` (and an optional `scale`, the index
scores' multiplier, a model's d_I^−½; 1 by hand) with `[weights] index_q`, `index_k` and the
optional `index_w`, written like the layer's projections (rows: d_model × width; columns: the
transpose). index_k's width is d_I; index_q holds H_I heads of d_I side by side; index_w one column
per index head (absent: a single index head of weight 1). Every refusal is one line naming the field.

A checkpoint's layer (models/dsa_layer.py) gives what its indexer computed instead of the weights:
`given = {q, k, w}` (token × H_I·d_I, token × d_I, token × H_I, with `rope = {dims, style}` saying
how they were turned), or, for a GLM-5 layer that reuses the choice of the layer before it,
`shared = {selected, layer}` (query × key, 0/1)."""
from __future__ import annotations

import math

import numpy as np

from ...checks import kind, matrix, number, unknown
from ...errors import ScenarioError

KEYS = ("topk", "scale", "given", "rope", "shared")
WEIGHTS = ("index_q", "index_k", "index_w")


def read(scenario, data: dict) -> dict:
    """{"sparse": the indexer's spec, or None without [sparse]}; refused in one line where a part
    is missing, misshapen or meaningless."""
    section, weights = data.get("sparse"), data.get("weights") or {}
    if section is None:
        stray = next((key for key in WEIGHTS if key in weights), None)
        if stray is not None:
            raise ScenarioError(f"weights.{stray}", "given without [sparse] (add [sparse] topk = K)")
        return {"sparse": None}
    if not isinstance(section, dict):
        raise ScenarioError("sparse", f"expected a table with topk (the keys each query keeps), got {kind(section)}")
    unknown(section, KEYS, "sparse.")
    made = "given" in section or "shared" in section
    if not made and ("index_q" not in weights or "index_k" not in weights):
        raise ScenarioError("sparse", "expected weights.index_q and weights.index_k with [sparse]")
    if not (isinstance(scenario.mask, str) and scenario.mask == "causal"):
        got = scenario.mask if isinstance(scenario.mask, str) else "a matrix"
        raise ScenarioError("mask", f"expected causal with [sparse] (the indexer is causal), got {got}")
    if scenario.context is not None:
        raise ScenarioError("sparse", "expected no context with it (the indexer chooses among the tokens of x)")
    if made and any(key in weights for key in WEIGHTS):
        raise ScenarioError(f"weights.{next(key for key in WEIGHTS if key in weights)}", "expected no index weights "
                            "beside sparse.given or sparse.shared (the indexer's parts come from one place)")
    spec = dict(topk=topk(section.get("topk"), "sparse.topk"), scale=_scale(section.get("scale", 1)),
                rope=_rope(section.get("rope")), shared=None, given=False)
    if "shared" in section:
        return {"sparse": {**spec, **_shared(section["shared"], scenario.n)}}
    if "given" in section:
        return {"sparse": {**spec, **_given(section["given"], scenario.n)}}
    return {"sparse": {**spec, **_matrices(weights, scenario.d_model, scenario.layout)}}


def _rope(rope) -> dict | None:
    """How a checkpoint's index queries and key were turned, in words: {dims, style}."""
    if rope is None:
        return None
    if not (isinstance(rope, dict) and set(rope) == {"dims", "style"} and isinstance(rope["dims"], int)
            and not isinstance(rope["dims"], bool) and rope["dims"] >= 0 and rope["style"] in ("half", "interleaved")):
        raise ScenarioError("sparse.rope", f"expected {{dims = r ≥ 0, style = \"half\" or \"interleaved\"}}, got "
                            f"{kind(rope)}")
    return dict(rope)


def _given(given, n: int) -> dict:
    """A checkpoint's index queries, key and head weights, as its indexer computed them (rows)."""
    if not isinstance(given, dict) or set(given) != {"q", "k", "w"}:
        raise ScenarioError("sparse.given", f"expected a table of q, k and w, got {kind(given)}")
    q, k, w = (np.asarray(matrix(given[key], f"sparse.given.{key}"), dtype=np.float64) for key in "qkw")
    if not (len(q) == len(k) == len(w) == n) or q.shape[1] != k.shape[1] * w.shape[1]:
        raise ScenarioError("sparse.given", f"expected q {n} × H·d_I, k {n} × d_I and w {n} × H; got "
                            f"{q.shape}, {k.shape}, {w.shape}")
    return dict(w_iq=None, w_ik=None, w_iw=None, heads=w.shape[1], d_index=k.shape[1], given=True,
                arrays={"idx.q": q, "idx.k": k, "idx.w": w})


def _shared(shared, n: int) -> dict:
    """A layer without an indexer of its own: the choice of layer `layer` (query × key, 0/1)."""
    if not isinstance(shared, dict) or set(shared) != {"selected", "layer"}:
        raise ScenarioError("sparse.shared", f"expected a table of selected and layer, got {kind(shared)}")
    m = matrix(shared["selected"], "sparse.shared.selected")
    if m.shape != (n, n) or not np.isin(m, (0, 1)).all():
        raise ScenarioError("sparse.shared.selected", f"expected a {n} × {n} matrix of 0/1 (query × key)")
    layer = shared["layer"]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or layer < 0:
        raise ScenarioError("sparse.shared.layer", f"expected the layer whose choice it reuses (≥ 0), got {kind(layer)}")
    return dict(w_iq=None, w_ik=None, w_iw=None, heads=0, d_index=0, shared=dict(selected=m.astype(bool), layer=int(layer)))


def run_check(scenario, k: int | None, mask) -> None:
    """A run's `topk` (from --set) needs a [sparse] scenario, and an indexer needs the causal mask."""
    if scenario.sparse is None:
        if k is not None:
            raise ScenarioError("topk", "the scenario has no [sparse] section (no indexer chooses its keys)")
        return
    if not (isinstance(mask, str) and mask == "causal"):
        got = mask if isinstance(mask, str) else "a matrix"
        raise ScenarioError("mask", f"expected causal with [sparse] (the indexer is causal), got {got}")
    if k is not None and scenario.sparse["shared"] is not None:
        raise ScenarioError("topk", f"this layer has no indexer: it reuses the choice of layer "
                            f"{scenario.sparse['shared']['layer']}")


def topk(value, field: str) -> int:
    """K ≥ 1, a whole number (not a boolean, not 2.5)."""
    whole = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not whole or value < 1:
        got = "nothing" if value is None else kind(value) if not whole else str(value)
        raise ScenarioError(field, f"expected a whole number ≥ 1 (the keys each query keeps), got {got}")
    return int(value)


def _scale(value) -> float:
    c = number(value, "sparse.scale")
    if not (math.isfinite(c) and c > 0):
        raise ScenarioError("sparse.scale", f"expected a finite number > 0 (the index scores' multiplier), got {c:g}")
    return c


def _matrices(weights: dict, d_model: int, layout: str) -> dict:
    """W_IQ, W_IK and W_w in the rows orientation, their shapes checked against each other."""
    rows = layout == "rows"
    side = "rows" if rows else "columns"

    def read(key: str) -> np.ndarray:
        m = matrix(weights[key], f"weights.{key}")
        m = m if rows else m.T
        if m.shape[0] != d_model:
            raise ScenarioError(f"weights.{key}", f"expected {d_model} {side} (d_model), got {m.shape[0]}")
        return np.asarray(m, dtype=np.float64)

    w_ik = read("index_k")
    w_iq = read("index_q")
    d_index = w_ik.shape[1]
    if w_iq.shape[1] % d_index:
        shown = f"{w_iq.shape[0]} × {w_iq.shape[1]}" if rows else f"{w_iq.shape[1]} × {w_iq.shape[0]}"
        other = "columns" if rows else "rows"
        raise ScenarioError("weights.index_q", f"expected {d_model} {side} (d_model) and a multiple of d_I = {d_index} "
                            f"(index_k's width) {other}, got {shown}")
    heads = w_iq.shape[1] // d_index
    w_iw = read("index_w") if "index_w" in weights else None
    if w_iw is not None and w_iw.shape[1] != heads:
        want = f"{d_model} × {heads}" if rows else f"{heads} × {d_model}"
        got = f"{w_iw.shape[0]} × {w_iw.shape[1]}" if rows else f"{w_iw.shape[1]} × {w_iw.shape[0]}"
        raise ScenarioError("weights.index_w", f"expected {want} (one {'column' if rows else 'row'} per index head: "
                            f"index_q holds {heads} head{'s' if heads != 1 else ''} of {d_index}), got {got}")
    if w_iw is None and heads != 1:
        raise ScenarioError("weights.index_w", f"missing; expected one weight {'column' if rows else 'row'} per index "
                            f"head ({heads}: index_q holds {heads} heads of {d_index})")
    return dict(w_iq=w_iq, w_ik=w_ik, w_iw=w_iw, heads=heads, d_index=d_index)
