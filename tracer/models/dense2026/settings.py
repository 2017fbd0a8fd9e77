"""config.json's keys for the 2026 families, read into plain numbers: the text model's part of a
multimodal config, the rotary parameters of each layer type (Gemma 4's proportional rotary, the
scalings attnsim already knows, MiniMax's legacy `rotary_dim`), each layer's type."""
from __future__ import annotations

import numpy as np

from ...mechanisms.rotary import frequencies as rope
from ...errors import ScenarioError
from ...mechanisms.rotary.checkpoint import rope_spec

WRAPPERS = {"gemma4": "gemma4_text", "llama4": "llama4_text", "mistral3": "mistral4"}


def text_config(data: dict) -> dict:
    """The text model's config: `text_config` of a multimodal checkpoint (gemma4, llama4, and
    Mistral Small 4's mistral3 wrapper around mistral4), else config.json itself."""
    if data.get("model_type") in WRAPPERS:
        inner = data.get("text_config")
        if not isinstance(inner, dict):
            raise ScenarioError("text_config", f"expected the text model's config (a {data['model_type']} "
                                "checkpoint keeps it there)")
        return {"model_type": WRAPPERS[data["model_type"]], **inner}
    return data


def rope_params(data: dict, layer_type: str | None = None, sliding_theta=None) -> dict:
    """The rotary parameters for layers of `layer_type`: `rope_parameters` (one set per type in
    Gemma's and OLMo 3's configs), else an older config's `rope_theta` and `rope_scaling`, which
    (as transformers reads them) scale the global layers only: sliding layers then turn unscaled
    with base `sliding_theta` (Gemma 3n's `rope_local_base_freq`; for OLMo 3 its default 500000,
    whatever rope_theta says, because transformers hands rope_theta to the global layers alone)."""
    params = data.get("rope_parameters") or {}
    if layer_type is not None and layer_type in params:
        params = params[layer_type] or {}
    if not params and layer_type == "sliding_attention" and sliding_theta is not None:
        params = {"rope_theta": sliding_theta}
    elif not params:
        params = {"rope_theta": data.get("rope_theta"), **(data.get("rope_scaling") or {})}
    params = {k: v for k, v in params.items() if v is not None}
    if "rotary_dim" in data and "partial_rotary_factor" not in params:   # MiniMax-M2 as published
        params["partial_rotary_factor"] = data["rotary_dim"] / data.get("head_dim", 1)
    return params


def rotary(params: dict, head_dim: int, default_theta: float) -> tuple[np.ndarray, float]:
    """(θ of each rotated pair, the factor on cos and sin). `proportional` (Gemma 4's global
    layers): the first ⌊f·d/2⌋ pairs turn with θ_i = base^(−2i/d) over the WHOLE head width d,
    the other pairs not at all (θ = 0), every θ divided by `factor`; the others as tracer.rope."""
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "proportional":
        base = params.get("rope_theta", default_theta)
        turning = int(params.get("partial_rotary_factor", 1.0) * head_dim // 2)
        theta = base ** (-np.arange(0, 2 * turning, 2, dtype=np.float64) / head_dim)
        theta = np.concatenate([theta, np.zeros(head_dim // 2 - turning)])
        return theta / params.get("factor", 1.0), 1.0
    spec = rope_spec({"rope_parameters": params}, "full_attention", head_dim, default_theta)
    dims = rope.rotary_dims(spec, head_dim)
    return rope.frequencies(spec, dims), rope.attention_factor(spec)


def layer_types(data: dict, layers: int, default) -> list[str]:
    """config.json's layer_types, else transformers' rule for the family (`default(i)`)."""
    types = data.get("layer_types")
    if types is None:
        return [default(i) for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers:
        raise ScenarioError("layer_types", f"expected a list of {layers} layer types")
    return list(types)


def number(data: dict, key: str, default=None):
    value = data.get(key, default)
    if value is None:
        raise ScenarioError(key, "missing; expected a number")
    return value
