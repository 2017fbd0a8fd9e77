"""The optional parts of a layer, each read and checked on its own: biases, rotary positions (and
their scaling), the pre-attention norm, the context of cross-attention, the residual connection,
and the mechanisms of today's checkpoints (QK-norm, soft-capping, ALiBi, a norm of the output)."""
from __future__ import annotations

import numpy as np

from ..checks import choice, kind, labels, matrix, number, quoted, suggest, unknown
from ..errors import ScenarioError

from ..rope import SCALINGS

# each scaling's keys: (required, optional with its default; None: no default)
SCALING_KEYS = {"linear": (("factor",), {}),
                "llama3": (("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"), {}),
                "yarn": (("factor", "original_max_position_embeddings"),
                         {"beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": None})}
ALL_SCALING_KEYS = tuple(dict.fromkeys(k for req, opt in SCALING_KEYS.values() for k in (*req, *opt)))
ROPE_KEYS = ("base", "style", "offset", "dims", "scaling", *ALL_SCALING_KEYS)
NORM_KEYS = ("kind", "gain", "bias", "eps")


def vectors(value, name: str, count: int, width: int, size: str = "") -> np.ndarray:
    """One bias vector for all `count` heads, or a list of one per head: count × width (`size`:
    the width's name, for the message)."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value[None, :]
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (list, tuple, np.ndarray)):
        value = [value]
    rows = matrix(value, name)
    if rows.shape[1] != width:
        raise ScenarioError(name, f"expected vectors of {width} numbers{f' ({size})' if size else ''}, got {rows.shape[1]}")
    if rows.shape[0] == 1:
        return np.repeat(rows, count, axis=0)
    if rows.shape[0] != count:
        raise ScenarioError(name, f"expected one vector for all heads or {count} (one per head), got {rows.shape[0]}")
    return rows


EXACT = 2**53   # float64 holds every whole number up to here: beyond, neighbouring positions merge


def rope(value, d_k: int, n: int = 1) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("rope", f"expected a table with base, style and offset, got {kind(value)}")
    unknown(value, ROPE_KEYS, "rope.")
    if "scaling" not in value or value["scaling"] is None:
        for key in ALL_SCALING_KEYS:
            if key in value:
                raise ScenarioError(f"rope.{key}", f"expected only with scaling = {quoted(SCALINGS)} (a key of "
                                    "the frequencies' scaling)")
    base = number(value.get("base", 10000.0), "rope.base")
    if base <= 1:
        raise ScenarioError("rope.base", f"expected a number > 1, got {kind(value.get('base'))}")
    style = choice(value, "style", ("half", "interleaved"), "half", "rope.style")
    offset = value.get("offset", 0)
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ScenarioError("rope.offset", f"expected a whole number ≥ 0 (the first token's position), got {kind(offset)}")
    if offset + n - 1 > EXACT:   # the angles are position × frequency in float64
        raise ScenarioError("rope.offset", f"expected at most {EXACT - n + 1} for {n} tokens (positions beyond 2^53 "
                            f"can no longer be told apart in float64), got {offset}")
    dims = value.get("dims")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, (int, np.integer)) or dims % 2
                             or not 2 <= dims <= d_k):
        raise ScenarioError("rope.dims", f"expected an even whole number from 2 to d_k = {d_k} (the features of "
                            f"each head that rotate, the first ones), got {kind(dims)}")
    if dims is None and d_k % 2:
        raise ScenarioError("rope", f"expected an even d_k (RoPE rotates pairs of features), got d_k = {d_k}")
    out = {"base": base, "style": style, "offset": int(offset), "scaling": scaling(value)}
    if dims is not None and dims < d_k:
        out["dims"] = int(dims)
    return out


def scaling(rope: dict) -> dict | None:
    """[rope] scaling: a type with its keys beside it (`scaling = "llama3"`, `factor = 8`, …), or a
    table with `type` and the keys (`[rope.scaling]`, or from_arrays); None without scaling."""
    value = rope.get("scaling")
    if value is None:
        return None
    if isinstance(value, dict):
        table, where, kind_ = value, "rope.scaling.", value.get("type")
        field = "rope.scaling.type"
        unknown(table, ("type", *ALL_SCALING_KEYS), where)
        beside = next((key for key in ALL_SCALING_KEYS if key in rope), None)
        if beside:
            raise ScenarioError(f"rope.{beside}", "expected inside the scaling table (it is given as a table)")
    else:
        table, where, kind_, field = rope, "rope.", value, "rope.scaling"
    if not isinstance(kind_, str) or kind_ not in SCALINGS:
        raise ScenarioError(field, f"expected {quoted(SCALINGS)} (how the rotary frequencies are "
                            f"scaled for long contexts), got {kind(kind_)}{suggest(kind_, SCALINGS)}")
    required, optional = SCALING_KEYS[kind_]
    out = {"type": kind_}
    for key in ALL_SCALING_KEYS:
        if key in table and key not in required and key not in optional:
            raise ScenarioError(where + key, f"expected no {key} with scaling \"{kind_}\" (its keys: "
                                f"{', '.join((*required, *optional))})")
    for key in required:
        if table.get(key) is None:
            raise ScenarioError(where + key, f"missing; scaling \"{kind_}\" needs {', '.join(required)}")
        out[key] = _positive(table[key], where + key)
    for key, default in optional.items():
        got = table.get(key, default)
        if got is not None:
            out[key] = _positive(got, where + key)
    if kind_ == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise ScenarioError(where + "high_freq_factor", f"expected more than low_freq_factor "
                            f"({out['low_freq_factor']:g}), got {out['high_freq_factor']:g}")
    return out


def _positive(value, field: str) -> float:
    got = number(value, field)
    if got <= 0:
        raise ScenarioError(field, f"expected a number > 0, got {kind(value)}")
    return got


def norm_in(value, d_model: int) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("norm_in", f"expected a table with kind, gain, bias and eps, got {kind(value)}")
    unknown(value, NORM_KEYS, "norm_in.")
    out = {"kind": choice(value, "kind", ("layer", "rms"), "layer", "norm_in.kind"),
           "eps": number(value.get("eps", 1e-5), "norm_in.eps")}
    for key, default in (("gain", 1.0), ("bias", 0.0)):
        got = value.get(key)
        out[key] = (np.full((1, d_model), default) if got is None
                    else vectors(got, f"norm_in.{key}", 1, d_model))
    if not 0 < out["eps"] < 1:
        raise ScenarioError("norm_in.eps", f"expected a number between 0 and 1, got {out['eps']:g}")
    return out


def context(data: dict, layout: str, shapes) -> tuple[np.ndarray | None, list[str] | None]:
    """Cross-attention's context (M × d_context, rows orientation) and its token labels."""
    if "context" not in data:
        if "context_tokens" in data:
            raise ScenarioError("context_tokens", "expected a context to label (cross-attention needs `context`)")
        return None, None
    c = matrix(data["context"], "context")
    shapes.check("context", c.shape, ("context", "d_context"))
    c = c if layout == "rows" else c.T
    names = labels(data.get("context_tokens", [f"c{i + 1}" for i in range(c.shape[0])]), c.shape[0],
                   "context_tokens")
    return c, names


def residual(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("residual", f"expected a table with norm and eps, got {kind(value)}")
    unknown(value, ("norm", "eps"), "residual.")
    norm = choice(value, "norm", ("layer", "none"), "layer", "residual.norm")
    eps = value.get("eps", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1):
        raise ScenarioError("residual.eps", f"expected a number between 0 and 1, got {kind(eps)}")
    return {"norm": norm, "eps": float(eps)}


def decode(value, n: int, mask, cross: bool) -> int | None:
    """[decode] prompt = P: the tokens processed at once before the rest arrive one by one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError("decode", f"expected a table with prompt, got {kind(value)}")
    unknown(value, ("prompt",), "decode.")
    prompt = value.get("prompt")
    if isinstance(prompt, (bool, np.bool_)) or not isinstance(prompt, (int, np.integer)) or not 1 <= prompt <= n:
        raise ScenarioError("decode.prompt", f"expected a whole number from 1 to {n} (the tokens of x), got {kind(prompt)}")
    if cross:
        raise ScenarioError("decode", "expected self-attention (a decoder caches its own keys), not a context")
    if not (isinstance(mask, str) and mask == "causal"):
        raise ScenarioError("mask", "expected causal with [decode] (a token never sees the ones after it), got "
                            + (mask if isinstance(mask, str) else "a matrix"))
    return int(prompt)
