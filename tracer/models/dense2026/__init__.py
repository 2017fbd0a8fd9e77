"""Standalone float64 NumPy forwards of the dense families of 2026 (CONTRACT §17), one decoder layer
at a time from a checkpoint's tensors, each checked against transformers' eager forward:
`run(tensors, config, ids, upto)` gives, for every layer up to `upto`, what its attention read and
did (common.Layer); `FORWARDS[model_type]` yields them one at a time. `tensors` maps full tensor
names to arrays (a folder's `Tensors`, a dict)."""
from __future__ import annotations

from . import gemma, llama4, mistral4, pre_norm
from .settings import text_config

FORWARDS = {"gemma4_text": gemma.layers, "gemma3n_text": gemma.layers, "llama4_text": llama4.layers,
            "glm4_moe": pre_norm.layers, "minimax_m2": pre_norm.layers, "olmo3": pre_norm.layers,
            "nanochat": pre_norm.layers, "mistral4": mistral4.layers}


def run(tensors, data: dict, ids: list[int], upto: int | None = None) -> list:
    """Layers 0 … upto of the checkpoint whose config.json is `data` (a multimodal wrapper's text
    model: gemma4, llama4, mistral3), on the token ids."""
    kind = text_config(data).get("model_type")
    if kind not in FORWARDS:
        raise KeyError(f"model_type {kind!r}: expected one of {', '.join(FORWARDS)}")
    return list(FORWARDS[kind](tensors, data, ids, upto))
