"""A checkpoint's config.json, read into the numbers the forward needs, for every family of
families.py, whichever transformers version wrote it (old keys and new ones are both accepted)."""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..checks import kind, positive
from ..errors import ScenarioError
from ..masks import MAX_WINDOW
from ..readfile import CONFIG_BYTES, checkpoint_json
from .families import ACTIVATIONS, FAMILIES, SWITCHES, Family
from ..mechanisms.latent.checkpoint import latent_sizes
from ..mechanisms.rotary.checkpoint import LAYER_TYPES, label, rope_spec

UNBOUNDED = 2**31 - 1           # ALiBi's families name no longest text


@dataclass(frozen=True)
class LayerKind:
    """What sets one layer's attention apart: its window (None: every earlier key) and its rotary
    positions (None: none, as in NoPE layers and ALiBi or learned-position families)."""
    window: int | None
    rope: dict | None

    def label(self, position: str = "rotary") -> str:
        """"global, rope", "sliding 4096, rope", "global, NoPE", "global, ALiBi"…; nothing for a
        layer whose family has one kind only (GPT-2's: learned positions, every key)."""
        where = "global" if self.window is None else f"sliding {self.window}"
        if position == "rotary":
            return f"{where}, {label(self.rope)}"
        if position == "learned":
            return "" if self.window is None else where
        return f"{where}, ALiBi"


@dataclass(frozen=True)
class Config:
    """What one block needs: sizes, norm epsilon, activation, and each layer's kind."""
    model_type: str
    family: Family
    d_model: int
    layers: int
    heads: int
    groups: int            # key/value heads (grouped-query when fewer than heads)
    head_dim: int
    positions: int         # longest text the model was built for
    eps: float
    activation: str        # ops.activate's: "silu", "gelu", "gelu_tanh", "gelu_fast", "gelu_bloom" or "relu2"
    inner: int             # the MLP's hidden width
    kinds: tuple = ()      # one LayerKind per layer
    parts: dict = field(default_factory=dict)   # what config.json says of each mechanism the family has (soft-capping's C …),
    #                                             by the mechanism's name (tracer/mechanisms: each reads its own keys)
    scale: float | None = None        # the scores' divisor when it is not √head_dim
    embed_scale: float = 1.0
    mla: dict | None = None           # DeepSeek: latent attention's sizes (mechanisms/latent/checkpoint.py)
    moe: dict | None = None           # the experts' sizes and switches (the family's Experts.read), if any


def read_config(folder: Path) -> Config:
    """The Config of the checkpoint in `folder`; an unsupported family or key is refused by name.
    Its tensors' names bound the layer count (see parse)."""
    from .weights import Tensors
    data = config_json(folder)
    return config_of(folder, data, Tensors(folder).names)


def config_json(folder: Path) -> dict:
    """config.json's object, read first of a checkpoint's files (a folder that is no checkpoint is
    named by it)."""
    data = checkpoint_json(folder / "config.json", CONFIG_BYTES, "a JSON config (a checkpoint folder has config.json, "
                     "model.safetensors and tokenizer.json)")
    if not isinstance(data, dict):
        raise ScenarioError("config.json", f"expected a JSON object, got {kind(data)}", str(folder))
    return data


def config_of(folder: Path, data: dict, names) -> Config:
    """parse() of config.json's `data` against the checkpoint's tensor `names`, errors naming the file."""
    try:
        return parse(data, names)
    except ScenarioError as err:
        raise err.at(str(folder / "config.json")) from None


def parse(data: dict, names=None) -> Config:
    """The Config that config.json's `data` describes. Given the checkpoint's tensor `names`, a
    layer count beyond the blocks they hold is refused before anything is built per layer."""
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        got = repr(model_type) if isinstance(model_type, str) else kind(model_type)
        if model_type == "deepseek_v4":   # traced from its folder only (models/deepseek_v4_layer.py)
            raise ScenarioError("model_type", "'deepseek_v4' is traced from its folder (tracer.from_model, `attnsim "
                                f"show --model`), not from a model in memory; expected one of {', '.join(FAMILIES)}")
        raise ScenarioError("model_type", f"{got} is not supported; expected one of {', '.join(FAMILIES)}")
    fam = FAMILIES[model_type]
    fam = SWITCHES[model_type](fam, data) if model_type in SWITCHES else fam
    _refuse(model_type, data)
    get = _Reader(data, fam.keys)
    d_model, heads = get.positive("d_model"), get.positive("heads")
    groups = {"one": 1, "all": heads}.get(fam.groups) or get.positive("groups", heads)
    if heads % groups:
        raise ScenarioError(get.name("groups"), f"expected a divisor of the {heads} query heads, got {groups}")
    head_dim = get.int("head_dim", 0) or _per_head(d_model, heads)
    layers = get.positive("layers")
    if names is not None:
        _held(layers, names, fam, get.name("layers"))
    activation = get.word("activation", fam.activation, tuple(ACTIVATIONS))
    gated = fam.gated() and (fam.experts is None or fam.experts.dense_inner)
    extra = {}
    if fam.latent:
        extra = dict(mla=latent_sizes(data, model_type))
    return Config(model_type, fam, d_model, layers, heads, groups, head_dim,
                  get.positive("positions", UNBOUNDED), get.number("eps", 1e-6 if fam.norm == "rms" else 1e-5),
                  ACTIVATIONS[activation],
                  get.positive("inner") if gated else get.positive("inner", 4 * d_model),
                  kinds=tuple(_kinds(data, fam, layers, head_dim)),
                  parts=_parts(data, fam), scale=_scale(data, fam.scale),
                  embed_scale=math.sqrt(d_model) if fam.embed_scale else 1.0,
                  moe=fam.experts.read(data, layers, model_type) if fam.experts else None, **extra)


def _held(layers: int, names, fam: Family, key: str) -> None:
    """A config claiming more layers than the checkpoint has blocks is refused here: each layer's
    window, rotary positions and experts are lists (10^7 layers took 35 s and 1.8 GB to build)."""
    block = re.compile(rf"(?:^|\.){re.escape(fam.blocks)}\.(\d+)\.")
    held = len({m.group(1) for name in names if (m := block.search(name))})
    if layers > held:
        raise ScenarioError(key, f"says {layers} layers, but the checkpoint's tensors hold the blocks of {held} "
                            f"({fam.blocks}.0., {fam.blocks}.1., …); expected at most {held}")


def _refuse(model_type: str, data: dict) -> None:
    """Switches that change the arithmetic in ways attnsim does not follow, refused by name."""
    wrong = {("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True),
             ("apply_residual_connection_post_layernorm", True), ("use_bidirectional_attention", True)}
    for key, value in sorted(wrong):
        if data.get(key) is value:
            raise ScenarioError(key, f"{str(value).lower()} is not supported; expected {str(not value).lower()}")


def _parts(data: dict, fam: Family) -> dict:
    """Each mechanism's reading of config.json (what it sets in a traced layer: its `checkpoint`)."""
    from ..mechanisms import MECHANISMS
    said = {m.name: m.config(data, fam) for m in MECHANISMS.values()}
    return {name: value for name, value in said.items() if value is not None}


def _scale(data: dict, key: str | None) -> float | None:
    """The scores' divisor from config.json (Gemma's query_pre_attn_scalar s: √s), or None."""
    value = positive(data, key, 256.0)
    return None if value is None else math.sqrt(value) if key == "query_pre_attn_scalar" else value


def _kinds(data: dict, fam: Family, layers: int, head_dim: int) -> list[LayerKind]:
    """Each layer's window and rotary positions, from layer_types (and no_rope_layers) where
    config.json has them, else from the family's pattern."""
    rotates = [True] * layers
    if fam.nope is not None:
        every = _count(data, "no_rope_layer_interval", 4, low=1)
        rotates = _flags(data, fam.nope, layers, [int((i + 1) % every != 0) for i in range(layers)])
    types = data.get("layer_types")
    if types is None:
        types = [_default_type(data, fam, i, rotates[i]) for i in range(layers)]
    elif fam.indexer and isinstance(types, list):   # DeepSeek Sparse Attention's layers attend globally
        types = ["full_attention" if t == "indexed_attention" else t for t in types]
    if not isinstance(types, list) or len(types) != layers or any(t not in LAYER_TYPES for t in types):
        raise ScenarioError("layer_types", f"expected a list of {layers} of {' or '.join(LAYER_TYPES)}, "
                            f"got {kind(types)}")
    window = data.get("sliding_window")
    if "sliding_attention" in types and (isinstance(window, bool) or not isinstance(window, int)
                                         or not 1 <= window <= MAX_WINDOW):
        raise ScenarioError("sliding_window", f"expected a whole number ≥ 1 and at most {MAX_WINDOW} (layer_types "
                            f"has sliding layers), got {kind(window)}")
    if fam.position != "rotary":
        return [LayerKind(window if t == "sliding_attention" else None, None) for t in types]
    specs = {t: rope_spec(data, t, head_dim, fam.default_base, fam.local_base) for t in sorted(set(types))}
    return [LayerKind(window if t == "sliding_attention" else None, specs[t] if rotates[i] else None)
            for i, t in enumerate(types)]


def _default_type(data: dict, fam: Family, i: int, rotates: bool) -> str:
    """transformers' own rule for the family (its defaults too: Qwen and SmolLM3 slide only when
    use_sliding_window is true; Gemma 2 every other layer, Gemma 3 five of six)."""
    window = data.get("sliding_window")
    on = data.get("use_sliding_window", False) is True and window is not None
    if fam.sliding == "from":
        sliding = on and i >= _count(data, "max_window_layers", 28)
    elif fam.sliding == "pattern":
        sliding = (i + 1) % _count(data, "sliding_window_pattern", fam.pattern, low=1) != 0
    else:
        sliding = {"none": False, "all": window is not None, "nope": on and not rotates}[fam.sliding]
    return "sliding_attention" if sliding else "full_attention"


def _count(data: dict, key: str, default: int, low: int = 0) -> int:
    value = data.get(key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ScenarioError(key, f"expected a whole number ≥ {low}, got {kind(value)}")
    return value


def _flags(data: dict, key: str, layers: int, default: list) -> list[bool]:
    value = data.get(key, default)
    if not isinstance(value, list) or len(value) != layers or any(v not in (0, 1) for v in value):
        raise ScenarioError(key, f"expected a list of {layers} flags (1 or 0), got {kind(value)}")
    return [bool(v) for v in value]


def _per_head(d_model: int, heads: int) -> int:
    if d_model % heads:
        raise ScenarioError("heads", f"expected the model width {d_model} to split evenly into {heads} heads")
    return d_model // heads


class _Reader:
    """Typed reads of config keys by size name (the family says which keys spell it), each
    refusal naming the key."""

    def __init__(self, data: dict, keys: dict):
        self.data, self.keys = data, keys

    def name(self, size: str) -> str:
        spellings = self.keys.get(size, (size,))
        return next((k for k in spellings if k in self.data), spellings[0])

    def get(self, size: str, default):
        value = self.data.get(self.name(size)) if size in self.keys else None
        return default if value is None else value

    def int(self, size: str, default: int | None = None) -> int:
        value = self.get(size, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScenarioError(self.name(size), f"expected a whole number ≥ 0, got {kind(value)}")
        return value

    def positive(self, size: str, default: int | None = None) -> int:
        """A count that must be at least 1 (heads, layers, widths): 0 would divide by zero later."""
        value = self.int(size, default)
        if value < 1:
            raise ScenarioError(self.name(size), f"expected a whole number ≥ 1, got {value}")
        return value

    def number(self, size: str, default: float) -> float:
        value = self.get(size, default)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
            raise ScenarioError(self.name(size), f"expected a number between 0 and 1, got {kind(value)}")
        return float(value)

    def word(self, size: str, default: str, allowed: tuple) -> str:
        value = self.get(size, default)
        if value not in allowed:
            raise ScenarioError(self.name(size), f"{value!r} is not supported; expected one of {', '.join(allowed)}")
        return value
