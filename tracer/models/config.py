"""A checkpoint's config.json, read into the few numbers the forward needs, for GPT-2 and the
Llama family, whichever transformers version wrote it (old keys and new ones are both accepted)."""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from ..checks import kind
from ..errors import ScenarioError
from ..readfile import read_bounded

CONFIG_BYTES = 2**20            # a config is kilobytes

FAMILIES = {"gpt2": "gpt2", "llama": "llama", "mistral": "llama", "qwen2": "llama"}
GELU_TANH = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")   # the same curve, written three ways


@dataclass(frozen=True)
class Config:
    """What one block needs: sizes, norm epsilon, rotary base (None: learned positions)."""
    model_type: str
    family: str            # "gpt2" or "llama"
    d_model: int
    layers: int
    heads: int
    groups: int            # key/value heads (grouped-query when fewer than heads)
    head_dim: int
    positions: int         # longest text the model was built for
    eps: float
    activation: str        # "gelu_tanh", "gelu" or "silu"
    rope_theta: float | None
    sliding_window: int | None = None
    inner: int = 0         # the MLP's hidden width


def read_json(path: Path, limit: int, expected: str):
    """A JSON document of a checkpoint: a regular file within `limit` bytes, nesting bounded."""
    raw = read_bounded(path, limit, path.name, expected, str(path.parent))
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ScenarioError(path.name, f"is nested too deeply; expected {expected}", str(path.parent)) from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ScenarioError(path.name, f"cannot be read ({str(err).splitlines()[0][:120]}); expected {expected}",
                            str(path.parent)) from None


def read_config(folder: Path) -> Config:
    """The Config of the checkpoint in `folder`; an unsupported family or key is refused by name."""
    path = folder / "config.json"
    data = read_json(path, CONFIG_BYTES, "a JSON config (a checkpoint folder has config.json, "
                     "model.safetensors and tokenizer.json)")
    if not isinstance(data, dict):
        raise ScenarioError("config.json", f"expected a JSON object, got {kind(data)}", str(folder))
    try:
        return _parse(data)
    except ScenarioError as err:
        raise err.at(str(path)) from None


def _parse(data: dict) -> Config:
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise ScenarioError("model_type", f"{model_type!r} is not supported; expected one of "
                            f"{', '.join(FAMILIES)}")
    get = _Reader(data)
    if FAMILIES[model_type] == "gpt2":
        d_model, heads = get.positive("n_embd"), get.positive("n_head")
        activation = get.word("activation_function", "gelu_new", GELU_TANH + ("gelu",))
        for key, want in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False)):
            if data.get(key, want) is not want:
                raise ScenarioError(key, f"expected {str(want).lower()} (the only GPT-2 scaling supported)")
        return Config(model_type, "gpt2", d_model, get.positive("n_layer"), heads, heads, _per_head(d_model, heads),
                      get.positive("n_positions", get.positive("n_ctx", 1024)),
                      get.number("layer_norm_epsilon", 1e-5), "gelu_tanh" if activation in GELU_TANH else "gelu",
                      None, inner=get.positive("n_inner", 4 * d_model))
    d_model, heads = get.positive("hidden_size"), get.positive("num_attention_heads")
    groups = get.positive("num_key_value_heads", heads)
    if heads % groups:
        raise ScenarioError("num_key_value_heads", f"expected a divisor of num_attention_heads ({heads}), got {groups}")
    head_dim = get.int("head_dim", 0) or _per_head(d_model, heads)
    get.word("hidden_act", "silu", ("silu",))
    window = data.get("sliding_window") if data.get("use_sliding_window", True) else None
    return Config(model_type, "llama", d_model, get.positive("num_hidden_layers"), heads, groups, head_dim,
                  get.positive("max_position_embeddings", 2048), get.number("rms_norm_eps", 1e-6), "silu",
                  _rope_theta(data), window if isinstance(window, int) and window > 0 else None,
                  inner=get.positive("intermediate_size"))


def _rope_theta(data: dict) -> float:
    """The rotary base: top-level `rope_theta` (older writers) or `rope_parameters.rope_theta`
    (transformers 5); only the plain rotation is supported, not the long-context rescalings."""
    params = data.get("rope_parameters") or data.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ScenarioError("rope_parameters", f"expected an object, got {kind(params)}")
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        raise ScenarioError("rope_parameters.rope_type", f"{rope_type!r} is not supported; expected \"default\" "
                            "(plain rotary positions)")
    theta = params.get("rope_theta", data.get("rope_theta", 10000.0))
    if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not 1 < theta < math.inf:
        raise ScenarioError("rope_theta", f"expected a finite number > 1, got {kind(theta)}")
    return float(theta)


def _per_head(d_model: int, heads: int) -> int:
    if d_model % heads:
        raise ScenarioError("heads", f"expected the model width {d_model} to split evenly into {heads} heads")
    return d_model // heads


class _Reader:
    """Typed reads of config keys, each refusal naming the key."""

    def __init__(self, data: dict):
        self.data = data

    def int(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key, default)
        if value is None and default is not None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScenarioError(key, f"expected a whole number ≥ 0, got {kind(value)}")
        return value

    def positive(self, key: str, default: int | None = None) -> int:
        """A count that must be at least 1 (heads, layers, widths): 0 would divide by zero later."""
        value = self.int(key, default)
        if value < 1:
            raise ScenarioError(key, f"expected a whole number ≥ 1, got {value}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
            raise ScenarioError(key, f"expected a number between 0 and 1, got {kind(value)}")
        return float(value)

    def word(self, key: str, default: str, allowed: tuple) -> str:
        value = self.data.get(key, default)
        if value not in allowed:
            raise ScenarioError(key, f"{value!r} is not supported; expected one of {', '.join(allowed)}")
        return value
