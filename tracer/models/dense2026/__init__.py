"""Standalone float64 NumPy forwards of the dense families of 2026 (CONTRACT §17), one decoder layer
at a time from a checkpoint's tensors, each checked against transformers' eager forward:
`run(tensors, config, ids, upto)` gives, for every layer up to `upto`, what its attention read and
did (common.Layer). `tensors` maps full tensor names to arrays (a folder's `Tensors`, a dict)."""
from __future__ import annotations

from . import gemma, llama4, mistral4, pre_norm
from .settings import text_config

FORWARDS = {"gemma4_text": gemma.run, "gemma3n_text": gemma.run, "llama4_text": llama4.run,
            "glm4_moe": pre_norm.run, "minimax_m2": pre_norm.run, "olmo3": pre_norm.run,
            "nanochat": pre_norm.run, "mistral4": mistral4.run}


def run(tensors, data: dict, ids: list[int], upto: int | None = None) -> list:
    """Layers 0 … upto of the checkpoint whose config.json is `data` (a multimodal wrapper's text
    model: gemma4, llama4, mistral3), on the token ids."""
    kind = text_config(data).get("model_type")
    if kind not in FORWARDS:
        raise KeyError(f"model_type {kind!r}: expected one of {', '.join(FORWARDS)}")
    return FORWARDS[kind](tensors, data, ids, upto)
