"""A checkpoint's rotary positions: the base and any long-context scaling of the frequencies, read
from config.json however it is spelled (a top-level `rope_theta` and `rope_scaling` as older
transformers write them, `rope_parameters` as newer ones do, one per layer type for Gemma 3)."""
from __future__ import annotations

import math
import numbers

from ...checks import kind
from ...errors import ScenarioError

TYPES = ("default", "linear", "llama3", "yarn")
LAYER_TYPES = ("full_attention", "sliding_attention")


def rope_spec(data: dict, layer_type: str, head_dim: int, default_base: float = 10000.0,
              local_base: str | None = None) -> dict:
    """{"base", "style", "offset"}, "dims" when only the first features rotate, and "scaling" when
    the frequencies are rescaled (the Scenario's form: type, factor and that type's keys, yarn's
    attention factor worked out). `local_base` names the key that gives sliding layers their own
    base (Gemma 3's). tracer.rope computes the frequencies from it."""
    params, where = _params(data, layer_type, local_base is not None)
    base = params.get("rope_theta")
    if base is None:
        base = data.get(local_base) if local_base and layer_type == "sliding_attention" else data.get("rope_theta")
    base = default_base if base is None else base
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not 1 < base < math.inf:
        raise ScenarioError("rope_theta", f"expected a finite number > 1, got {kind(base)}")
    partial = params.get("partial_rotary_factor", data.get("partial_rotary_factor", 1.0))
    fraction = isinstance(partial, numbers.Real) and not isinstance(partial, bool) and 0 < partial <= 1   # NaN too
    dims = int(head_dim * partial) if fraction else 0
    if not 2 <= dims <= head_dim or dims % 2:
        raise ScenarioError("partial_rotary_factor", f"expected a number from 0 to 1 that leaves an even number "
                            f"of the {head_dim} features of a head to rotate, got {kind(partial)}")
    spec = dict(base=float(base), style="half", offset=0)
    if dims < head_dim:   # Phi-4-mini: the first 3/4 of each head's features turn, the rest pass
        spec["dims"] = dims
    scaling = _scaling(params, where, data)
    if scaling is not None:
        spec["scaling"] = scaling
    return spec


def _params(data: dict, layer_type: str, local: bool) -> tuple[dict, str]:
    """The rope parameters that apply to layers of `layer_type`, and the key they came from: a
    non-empty `rope_scaling` wins over `rope_parameters`, as in transformers; with `local`
    (Gemma 3) an older config's `rope_scaling` is the global layers' only."""
    for key in ("rope_scaling", "rope_parameters"):
        params = data.get(key)
        if not params:
            continue
        if not isinstance(params, dict):
            raise ScenarioError(key, f"expected an object, got {kind(params)}")
        if any(t in params for t in LAYER_TYPES):   # one set per layer type (Gemma 3, transformers 5)
            params = params.get(layer_type) or {}
            key = f"{key}.{layer_type}"
            if not isinstance(params, dict):
                raise ScenarioError(key, f"expected an object, got {kind(params)}")
        elif key == "rope_scaling" and local and layer_type == "sliding_attention":
            return {}, key
        return params, key
    return {}, "rope_parameters"


def _scaling(params: dict, where: str, data: dict) -> dict | None:
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in TYPES:
        raise ScenarioError(f"{where}.rope_type", f"{rope_type!r} is not supported; expected one of "
                            f"{', '.join(TYPES)}")
    if rope_type == "default":
        return None

    def number(key: str, value=None, low: float = 0.0, field: str | None = None) -> float:
        value, field = params.get(key) if value is None else value, field or f"{where}.{key}"
        if value is None:
            raise ScenarioError(field, f"missing; expected a number (rope type {rope_type} needs it)")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not low < value < math.inf:
            raise ScenarioError(field, f"expected a finite number > {low:g}, got {kind(value)}")
        return float(value)

    out = dict(type=rope_type, factor=number("factor"))
    if rope_type == "linear":
        return out
    # Phi-3 keeps the pretraining length at the top level, and then it wins (as in transformers);
    # a length given as 0 is refused by its key, never replaced by the next one
    places = (("original_max_position_embeddings", data.get("original_max_position_embeddings")),
              (f"{where}.original_max_position_embeddings", params.get("original_max_position_embeddings")),
              ("max_position_embeddings", data.get("max_position_embeddings")))
    field, original = next(((f, v) for f, v in places if v is not None), places[1])
    length = number("original_max_position_embeddings", original, field=field)
    out["original_max_position_embeddings"] = int(length) if length.is_integer() else length
    if rope_type == "llama3":
        out.update(low_freq_factor=number("low_freq_factor"), high_freq_factor=number("high_freq_factor"))
        if out["high_freq_factor"] <= out["low_freq_factor"]:
            raise ScenarioError(f"{where}.high_freq_factor", f"expected more than low_freq_factor "
                                f"({out['low_freq_factor']:g}), got {out['high_freq_factor']:g}")
        return out
    if not isinstance(params.get("truncate", True), bool):
        raise ScenarioError(f"{where}.truncate", f"expected true or false, got {kind(params['truncate'])}")
    if params.get("truncate", True) is False:   # gpt-oss: the ramp's ends not rounded to whole pairs
        out["truncate"] = False
    out.update(beta_fast=number("beta_fast", params.get("beta_fast") or 32.0),   # falsy: the default, as
               beta_slow=number("beta_slow", params.get("beta_slow") or 1.0))   # transformers reads them
    if params.get("attention_factor") is not None:
        out["attention_factor"] = number("attention_factor")
    else:
        mscale, every = params.get("mscale"), params.get("mscale_all_dim")
        strength = (lambda m: 1.0 if out["factor"] <= 1 else 0.1 * m * math.log(out["factor"]) + 1.0)  # noqa: E731
        out["attention_factor"] = strength(number("mscale")) / strength(number("mscale_all_dim")) \
            if mscale and every else strength(1.0)
    return out


def label(spec: dict | None) -> str:
    """The layer's positions in a few words: "NoPE", "rope", "rope llama3 ×8"."""
    if spec is None:
        return "NoPE"
    s = spec.get("scaling")
    return "rope" if s is None else f"rope {s['type']} ×{s['factor']:g}"
