"""The classic mistakes of attention homework, each recognised by what it does to the numbers.

A mistake is a variant of the computation: the scenario or arithmetic changed (no scale, another
mask, the other rotary pairing, W_V = W_K, …) and traced again by attnsim, or the softmax done
another way (over the queries, after the mask, with 0 for −∞) and the layer finished in NumPy from
there. A student's step that equals a variant's, where the variant differs from the right one,
names the mistake. Arrays here are in the rows orientation (query/token first)."""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .ids import parse
from .steps import KINDS
from .steps.base import stages
from .mechanisms.rotary.frequencies import pairs, rotary_dims

# the kinds of a layer in the order a mistake carries forward (the registry's, the computation's):
# one made at a kind shows at the later ones
CHAIN = tuple(KINDS)
LOGITS = tuple(reversed(stages("logits")))   # what a softmax reads: the latest present (masked … scores)


@dataclass(frozen=True)
class Mistake:
    key: str                  # stable, for graders (`--json`'s "cause")
    says: str                 # what the numbers show, {…} filled from the trace
    fix: str
    first: str                # the earliest kind where it shows
    variant: Callable         # trace → (step id → rows array or None), or None where it cannot happen


def _rerun(trace, scenario=None, **changes):
    """The trace again with the scenario or arithmetic keys changed: step id → rows array."""
    from .trace import run
    a = trace.arithmetic
    keys = {name: getattr(a, name) for name in ("scale", "softmax_base", "normalize", "stable", "dtype", "algorithm",
                                                "block")}
    keys.update(layout=trace.layout, **({"mask": a.mask} if a.mask is not None else {}))
    keys.update(changes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alt = run(scenario or trace.scenario, a.preset, lazy=True, **keys)   # a head computed when read
    return lambda sid: alt.rows(sid) if sid in alt else None


def _replace(trace, **fields):
    return _rerun(trace, dataclasses.replace(trace.scenario, **fields))


def _layout(trace, allowed: np.ndarray):
    """A query × key matrix as the layout's mask is written."""
    return allowed.T.copy() if trace.columns else allowed


def _causal(trace) -> bool:
    n, m = trace.scenario.n, trace.scenario.m
    return trace.allowed is not None and trace.allowed.shape == (n, m) and \
        np.array_equal(trace.allowed, np.tril(np.ones((n, m), bool)))


def _mask_variant(offset: int | None):
    """Causal masks off by one: the diagonal hidden too (offset −1), the next key seen (+1), or
    the triangle the wrong way round (None: the past hidden, the future seen)."""
    def make(trace):
        if not _causal(trace):
            return None
        n, m = trace.scenario.n, trace.scenario.m
        allowed = np.triu(np.ones((n, m), bool)) if offset is None else np.tril(np.ones((n, m), bool), offset)
        return _rerun(trace, mask=_layout(trace, allowed))
    return make


def _window(delta: int):
    def make(trace):
        mask = trace.mask
        if not (isinstance(mask, str) and mask.startswith("sliding:")) or int(mask[8:]) + delta < 1:
            return None
        return _rerun(trace, mask=f"sliding:{int(mask[8:]) + delta}")
    return make


def _scale(divisor):
    def make(trace):
        c = divisor(trace.scenario)
        here = trace.arithmetic.scale_divisor(trace.scenario.d_k)
        if c is None or here is None or math.isclose(c, here):
            return None
        return _rerun(trace, scale=c)
    return make


def _unscaled(trace):
    return None if trace.arithmetic.scale_divisor(trace.scenario.d_k) is None else _rerun(trace, scale="none")


def _sqrt_where_none(trace):
    """÷√d_k where the model divides by nothing (Gemma 4's scale 1)."""
    return _rerun(trace, scale="sqrt") if trace.arithmetic.scale == "none" else None


def _chunks_as_causal(trace):
    mask = trace.mask
    return _rerun(trace, mask="causal") if isinstance(mask, str) and mask.startswith("chunked:") else None


def _no_temperature(trace):
    """The queries not warmed: τ = 1 everywhere (a temperature of scale 0)."""
    spec = trace.scenario.q_temp
    return None if spec is None or not spec["scale"] else _replace(trace, q_temp={**spec, "scale": 0.0})


def _rotary(sc) -> bool:
    return sc.rope is not None and sc.mla is None


def _rope_pairs(trace):
    """The other pairing: (2i, 2i + 1) for (i, i + d/2), or the reverse."""
    sc = trace.scenario
    if not _rotary(sc):
        return None
    return _replace(trace, rope={**sc.rope, "style": "interleaved" if sc.rope["style"] == "half" else "half"})


def _rope_sign(trace):
    """The rotation's opposite sign: R(−a) = P·R(a)·P with P negating the second feature of each
    pair, so W_Q·P and W_K·P turn the scores as a reversed rotation would (and the rotated q and k
    are the variant's times P)."""
    sc = trace.scenario
    if not _rotary(sc):
        return None
    flip = np.ones(sc.d_k)
    flip[pairs(rotary_dims(sc.rope, sc.d_k), sc.rope["style"])[1]] = -1.0
    b = {name: getattr(sc, name) * flip for name in ("b_q", "b_k") if getattr(sc, name) is not None}
    alt = _replace(trace, w_q=sc.w_q * flip, w_k=sc.w_k * flip, **b)
    turned = ("q", "k", "q_norm", "k_norm", "q_rot", "k_rot")
    return lambda sid: None if alt(sid) is None else alt(sid) * flip if parse(sid).kind in turned else alt(sid)


def _repeated(trace):
    """Head h reading group h mod G (k.repeat) instead of h // (H/G) (repeat_interleave)."""
    sc = trace.scenario
    if sc.groups in (1, sc.heads):
        return None
    pick = [h % sc.groups for h in range(sc.heads)]
    fields = {name: getattr(sc, name)[pick] for name in ("w_k", "w_v", "w_v_down", "w_v_up", "b_k", "b_v", "k_norm")
              if getattr(sc, name) is not None}
    return _replace(trace, **fields)


def _values_from(name: str):
    def make(trace):
        sc = trace.scenario
        w = getattr(sc, f"w_{name}")
        if sc.v_is_k or sc.w_v is None or w.shape != sc.w_v.shape or sc.mla is not None:
            return None
        return _replace(trace, w_v=w, b_v=getattr(sc, f"b_{name}"))
    return make


def _transposed(*names: str):
    def make(trace):
        sc = trace.scenario
        ws = {f"w_{name}": getattr(sc, f"w_{name}") for name in names}
        if any(w is None or w.shape[-1] != w.shape[-2] for w in ws.values()) or sc.mla is not None or \
                ("v" in names and sc.v_is_k):
            return None
        return _replace(trace, **{key: np.swapaxes(w, -1, -2).copy() for key, w in ws.items()})
    return make


def _without_w_o(trace):
    sc = trace.scenario
    if sc.w_o is None or sc.w_o.shape[0] != sc.w_o.shape[1]:
        return None
    return _replace(trace, w_o=np.eye(sc.w_o.shape[0]), b_o=None)


def _without_b_o(trace):
    return None if trace.scenario.b_o is None else _replace(trace, b_o=None)


def _softmax(m: np.ndarray, base: float, axis: int) -> np.ndarray:
    """base^(m − max) ÷ its sum along `axis` in float64; a line with nothing visible: zeros."""
    m = m.astype(np.float64)
    top = m.max(axis=axis, keepdims=True)
    e = np.power(base, m - np.where(np.isfinite(top), top, 0.0))
    sums = e.sum(axis=axis, keepdims=True)
    return np.divide(e, sums, out=np.zeros_like(e), where=sums > 0)


def _replayed(how: str):
    """The softmax done another way, and the layer finished from there in NumPy: `columns` (over
    the queries), `after` (the mask applied to the weights, not the scores), `zero` (0 for −∞).
    A head is replayed when one of its steps (or the layer's) is asked for."""
    def make(trace):
        sc, a = trace.scenario, trace.arithmetic
        if a.normalize != "softmax" or a.online or sc.sinks is not None or sc.mla is not None or sc.decode is not None \
                or (how != "columns" and trace.allowed is None):
            return None
        heads: dict = {}

        def head(h: int) -> dict:
            if h not in heads:
                heads[h] = _replay_head(trace, h, how)
            return heads[h]

        def get(sid: str):
            ref = parse(sid)
            if ref.head is not None:
                return head(ref.head).get(sid)
            if ref.kind in ("concat", "out", "residual", "norm") and ref.token is None and not ref.prefill:
                return _tail(trace, [head(h)[trace.plan_ids(h)["z"]] for h in range(sc.heads)]).get(sid)
            return None
        return get
    return make


def _replay_head(trace, h: int, how: str) -> dict:
    ids, base = trace.plan_ids(h), trace.arithmetic.base
    logits = trace.rows(ids[next(k for k in LOGITS if k in ids)])
    got = {}
    if how == "columns":
        w = _softmax(logits, base, axis=0)
    elif how == "after":
        w = _softmax(trace.rows(trace.step(ids["masked"]).inputs[0]), base, axis=1) * trace.allowed
    else:
        got[ids["masked"]] = m = np.where(trace.allowed, trace.rows(trace.step(ids["masked"]).inputs[0]), 0.0)
        w = _softmax(m, base, axis=1)
    got[ids["weights"]] = w
    got[ids["z"]] = w @ trace.rows(trace.step(ids["z"]).inputs[-1]).astype(np.float64)
    return got


def _tail(trace, zs: list) -> dict:
    """concat, out, residual and norm from the heads' outputs (an output norm: not followed)."""
    from .numpy_engine import layer_norm
    sc, got = trace.scenario, {}
    y = got["concat"] = np.hstack(zs)
    if sc.w_o is not None:
        y = got["out"] = y @ sc.w_o + (0.0 if sc.b_o is None else sc.b_o)
    if sc.out_norm is not None:
        return got
    if sc.residual:
        y = got["residual"] = sc.x + y
        if sc.residual["norm"] == "layer":
            got["norm"] = layer_norm(y, sc.residual["eps"])
    return got


TABLE = (
    Mistake("no_scale", "your scores are not scaled: they are the scaled ones × {c} (q·k as it is)",
            "divide q·k by √d_k = {c}", "scaled", _unscaled),
    Mistake("scale_d_k", "your scores are divided by d_k = {d_k}, not by √d_k", "divide by √d_k = {c}", "scaled",
            _scale(lambda sc: float(sc.d_k))),
    Mistake("scale_times", "your scores are multiplied by √d_k instead of divided", "divide by √d_k = {c}", "scaled",
            _scale(lambda sc: 1 / math.sqrt(sc.d_k))),
    Mistake("scale_d_model", "your scores are divided by √d_model = √{d_model} (the model's width), not √d_k (a "
            "head's)", "divide by √d_k = {c}", "scaled", _scale(lambda sc: math.sqrt(sc.d_model))),
    Mistake("scale_where_none", "your scores are divided by √d_k, but this model divides by nothing (scale 1: its "
            "QK-norm bounds them)", "leave q·k as it is", "scaled", _sqrt_where_none),
    Mistake("softmax_axis", "your weights' columns sum to 1, not their rows: the softmax ran over the queries",
            "normalise each query's row: softmax(…, dim=-1)", "weights", _replayed("columns")),
    Mistake("mask_diagonal", "the diagonal is masked too: each query is hidden from its own key (a mask off by one)",
            "let query i see keys j ≤ i: torch.tril(…, diagonal=0), or triu(…, diagonal=1) for what to hide",
            "masked", _mask_variant(-1)),
    Mistake("mask_ahead", "each query sees the next key too (a mask off by one)",
            "let query i see keys j ≤ i only: torch.tril(…, diagonal=0)", "masked", _mask_variant(1)),
    Mistake("mask_reversed", "the mask is the wrong way round: the earlier keys are hidden and the later ones seen",
            "keep the lower triangle (tril), hide the upper", "masked", _mask_variant(None)),
    Mistake("no_mask", "no mask was applied: queries see every key", "set the hidden scores to −∞ before the softmax",
            "masked", lambda t: None if t.allowed is None else _rerun(t, mask="none")),
    Mistake("mask_zero", "the hidden scores are 0, not −∞ (masked_fill with 0): a hidden key still gets weight",
            "fill with −∞ (float('-inf')), whose power is 0", "masked", _replayed("zero")),
    Mistake("mask_after", "the mask was applied to the weights after the softmax: rows no longer sum to 1",
            "mask the scores (−∞) before the softmax", "weights", _replayed("after")),
    Mistake("chunks_as_causal", "your mask is causal: each query also sees the keys of earlier chunks",
            "keep key j for query i only when j ≤ i and ⌊j/C⌋ = ⌊i/C⌋", "masked", _chunks_as_causal),
    Mistake("no_temperature", "your queries are not warmed: τ(p) is missing (q_temp = q)",
            "multiply each query by its position's τ (step tau)", "q_temp", _no_temperature),
    Mistake("window_short", "the sliding window is one key too short", "keep keys i − W < j ≤ i", "masked", _window(-1)),
    Mistake("window_long", "the sliding window is one key too long", "keep keys i − W < j ≤ i", "masked", _window(1)),
    Mistake("rope_pairs", "your rotation pairs the other features: {other}", "pair features as {style}", "q_rot",
            _rope_pairs),
    Mistake("rope_sign", "your rotation turns the other way: by −p·θ_i (a sign of sin swapped)",
            "x1·cos − x2·sin for the first of a pair, x1·sin + x2·cos for the second", "q_rot", _rope_sign),
    Mistake("gqa_repeat", "your query heads read the wrong group: head h read group h mod {groups} (k.repeat), not "
            "h // {per} (k.repeat_interleave, PyTorch's enable_gqa)", "repeat each key/value head {per} times in a row: "
            "repeat_interleave(…, {per}, dim=heads)", "scores", _repeated),
    Mistake("values_from_keys", "your values are the keys: V = X·W_K", "project the values with W_V", "v",
            _values_from("k")),
    Mistake("values_from_queries", "your values are the queries: V = X·W_Q", "project the values with W_V", "v",
            _values_from("q")),
    Mistake("transposed_w_q", "W_Q was used transposed (x·W_Qᵀ, as nn.Linear stores a weight: out × in)",
            "multiply by W_Q as the scenario writes it", "q", _transposed("q")),
    Mistake("transposed_w_k", "W_K was used transposed (x·W_Kᵀ, as nn.Linear stores a weight: out × in)",
            "multiply by W_K as the scenario writes it", "k", _transposed("k")),
    Mistake("transposed_w_v", "W_V was used transposed (x·W_Vᵀ, as nn.Linear stores a weight: out × in)",
            "multiply by W_V as the scenario writes it", "v", _transposed("v")),
    Mistake("transposed_w_qkv", "W_Q, W_K and W_V were used transposed (x·Wᵀ, as nn.Linear stores a weight: out × "
            "in)", "multiply by each W as the scenario writes it", "q", _transposed("q", "k", "v")),
    Mistake("transposed_w_o", "W_O was used transposed", "multiply by W_O as the scenario writes it", "out",
            _transposed("o")),
    Mistake("no_w_o", "W_O is missing: your out is the heads' outputs side by side (concat)",
            "multiply concat by W_O (and add b_O)", "out", _without_w_o),
    Mistake("no_b_o", "the output bias b_O is missing", "add b_O to concat·W_O", "out", _without_b_o),
)


def words(trace) -> dict:
    """What a mistake's sentences are filled with."""
    sc = trace.scenario
    c = trace.arithmetic.scale_divisor(sc.d_k)
    style = (sc.rope or {}).get("style", "half")
    said = {"half": "i with i + d/2 (rotate-half, Llama/NeoX)", "interleaved": "2i with 2i + 1 (interleaved, GPT-J/RoFormer)"}
    return dict(c="none" if c is None else f"{c:.4g}", d_k=sc.d_k, d_model=sc.d_model, groups=sc.groups,
                per=sc.heads // sc.groups, style=said[style],
                other=said["interleaved" if style == "half" else "half"])
