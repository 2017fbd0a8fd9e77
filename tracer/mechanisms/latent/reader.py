"""[mla]: multi-head latent attention (DeepSeek-V2/V3) as a scenario file writes it.

    [mla]
    down   = W_DKV   d_model × rank       the latent c_kv = X·W_DKV (then RMS-normed by kv_norm, if given)
    rope_k = W_KR    d_model × rope       the one rotary key k_pe = RoPE(X·W_KR), shared by every head
    up_k   = [W_UK]  rank × nope, a head  each head's keys rebuilt from the latent
    up_v   = [W_UV]  rank × d_v, a head   each head's values rebuilt from the latent
    q      = [W_UQ]  q_src × nope, a head each head's queries without positions
    rope_q = [W_QR]  q_src × rope, a head each head's rotary queries
    q_down = W_DQ    d_model × q_rank     optional: queries from the compressed c_q = X·W_DQ (q_src = q_rank)
    kv_norm, q_norm: RMS gains of the latents (optional), norm_eps (default 1e-6)

The scenario keeps the heads' matrices where the rest of the system looks for them: w_q is
[W_UQ | W_QR] (so d_k = nope + rope, the width the scores are scaled by), w_k is W_UK and w_v
is W_UV, read from the latent; the shared parts are in `Scenario.mla`."""
from __future__ import annotations

import numpy as np

from ...checks import Shapes, kind, matrix, number, per_head, unknown, vectors
from ...errors import ScenarioError

MLA_KEYS = ("down", "rope_k", "up_k", "up_v", "q", "rope_q", "q_down", "kv_norm", "q_norm", "norm_eps")
KEPT = ("o", "bo", "sinks")   # what [weights] may still hold beside [mla]


def weights(value, given, shapes: Shapes, layout: str) -> dict:
    """The scenario's weight fields from [mla] (and W_O from [weights]): w_q, w_k, w_v, the `mla`
    dict, w_o and b_o."""
    if not isinstance(value, dict):
        raise ScenarioError("mla", f"expected a table with down, rope_k, up_k, up_v, q and rope_q, got {kind(value)}")
    unknown(value, MLA_KEYS, "mla.")
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise ScenarioError("weights", f"expected a table (with [mla]: only o, bo and sinks), got {kind(given)}")
    extra = next((key for key in given if key not in KEPT), None)
    if extra is not None:
        raise ScenarioError(f"weights.{extra}", "expected only o, bo and sinks in [weights] with [mla] (the "
                            "latent attention's own matrices are in [mla])")
    for key in ("down", "rope_k", "up_k", "up_v", "q", "rope_q"):
        if key not in value:
            raise ScenarioError(f"mla.{key}", f"missing; expected {_WHAT[key]}")
    orient = (lambda m: m) if layout == "rows" else (lambda m: m.T)

    def one(key: str, dims: tuple[str, str]) -> np.ndarray:
        m = matrix(value[key], f"mla.{key}")
        shapes.check(f"mla.{key}", m.shape, dims)
        return orient(m).astype(np.float64)

    def each(key: str, dims: tuple[str, str], heads: int | None) -> np.ndarray:
        mats = per_head(value[key], f"mla.{key}")
        if heads is not None and len(mats) != heads:
            raise ScenarioError(f"mla.{key}", f"expected {heads} matrices (one per head, as mla.q), got {len(mats)}")
        for h, m in enumerate(mats):
            shapes.check(f"mla.{key}" + (f"[{h}]" if len(mats) > 1 else ""), np.shape(m), dims)
        return np.stack([orient(np.asarray(m, dtype=np.float64)) for m in mats])

    down = one("down", ("d_model", "rank"))
    rope_k = one("rope_k", ("d_model", "rope"))
    if rope_k.shape[1] % 2:
        raise ScenarioError("mla.rope_k", f"expected an even number of rotary features (RoPE turns pairs), got "
                            f"{rope_k.shape[1]}")
    q_down = one("q_down", ("d_model", "q_rank")) if "q_down" in value else None
    src = "q_rank" if q_down is not None else "d_model"
    w_uq = each("q", (src, "nope"), None)
    heads = w_uq.shape[0]
    w_qr = each("rope_q", (src, "rope"), heads)
    w_uk = each("up_k", ("rank", "nope"), heads)
    w_uv = each("up_v", ("rank", "d_v"), heads)
    eps = number(value.get("norm_eps", 1e-6), "mla.norm_eps")
    if not 0 <= eps < 1:
        raise ScenarioError("mla.norm_eps", f"expected a number from 0 to 1 (added to the mean square), got {eps:g}")
    if "q_norm" in value and q_down is None:
        raise ScenarioError("mla.q_norm", "expected only with mla.q_down (it norms the compressed queries c_q)")
    mla = dict(rank=down.shape[1], rope=rope_k.shape[1], nope=w_uk.shape[2], eps=eps, w_dkv=down, w_kr=rope_k,
               q_rank=None if q_down is None else q_down.shape[1], w_dq=q_down,
               kv_norm=_gain(value, "kv_norm", down.shape[1], "rank"),
               q_norm=None if q_down is None else _gain(value, "q_norm", q_down.shape[1], "q_rank"))
    out = dict(w_q=np.concatenate([w_uq, w_qr], axis=2), w_k=w_uk, w_v=w_uv, mla=mla)
    return {**out, **_output(given, heads * w_uv.shape[2], shapes, orient)}


def _output(given: dict, width: int, shapes: Shapes, orient) -> dict:
    """W_O (heads·d_v × d_out) and its bias from [weights], when given."""
    if "o" not in given:
        if "bo" in given:
            raise ScenarioError("weights.bo", "expected an output projection o for its bias")
        return {}
    shapes.sizes["heads·d_v"], shapes.origin["heads·d_v"] = width, "mla.up_v"
    w_o = matrix(given["o"], "weights.o")
    shapes.check("weights.o", w_o.shape, ("heads·d_v", "d_out"))
    out = {"w_o": orient(w_o)}
    if "bo" in given:
        out["b_o"] = vectors(given["bo"], "weights.bo", 1, out["w_o"].shape[1])
    return out


_WHAT = {"down": "W_DKV (d_model × rank), which squeezes each token into the cached latent",
         "rope_k": "W_KR (d_model × rotary features), the one rotary key every head shares",
         "up_k": "W_UK, one rank × nope matrix per head (the keys rebuilt from the latent)",
         "up_v": "W_UV, one rank × d_v matrix per head (the values rebuilt from the latent)",
         "q": "W_UQ, one matrix per head (the queries without positions)",
         "rope_q": "W_QR, one matrix per head (the rotary queries)"}


def _gain(value: dict, key: str, width: int, size: str) -> np.ndarray | None:
    """An RMS norm's gain (one number per feature of the latent), or None without the norm."""
    got = value.get(key)
    if got is None or got is False:
        return None
    if got is True:
        return np.ones(width)
    return vectors(got, f"mla.{key}", 1, width, size)[0]


def refuse_beside(scenario, data: dict) -> None:
    """What latent attention does not combine with here, refused by field."""
    if scenario.mla is None:
        return
    for key, why in (("context", "self-attention (the latent caches the sequence's own tokens)"),
                     ("alibi", "rotary positions (latent attention's k_pe), not ALiBi")):
        if data.get(key) not in (None, False):
            raise ScenarioError(key, f"expected no {key} with [mla]: {why}")
    if (data.get("rope") or {}).get("dims") is not None:
        raise ScenarioError("rope.dims", "expected no dims with [mla] (mla.rope_k's width says how many "
                            "features rotate)")
