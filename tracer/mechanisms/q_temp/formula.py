"""The NoPE query temperature: the query at position p is multiplied by

    τ(p) = 1 + β·ln(1 + ⌊(p + o)/F⌋)

β = `attn_scale`, F = `floor_scale`, o = 1 in Llama 4 (its layers without rotary positions, when
`attn_temperature_tuning`); Mistral 4 and Ministral 3 multiply every layer's queries by the same
curve with o = 0, β = rope_parameters' `llama_4_scaling_beta` and F its
`original_max_position_embeddings`. τ is 1 for the first F − o positions and steps up once every F
tokens, by less each time (a logarithm): the scores of a far query are warmed by τ, never cooled."""
from __future__ import annotations

import numpy as np


def temperature(positions, scale: float, floor: float, offset: int = 1) -> np.ndarray:
    """τ for each position (an array of whole positions ≥ 0)."""
    p = np.asarray(positions, dtype=np.float64)
    return 1.0 + scale * np.log1p(np.floor((p + offset) / floor))


def warmed(q: np.ndarray, positions, scale: float, floor: float, offset: int = 1) -> np.ndarray:
    """The queries (… × n × d_k, one row per position) times their τ."""
    return q * temperature(positions, scale, floor, offset)[:, None]


def first_warm(scale: float, floor: float, offset: int = 1) -> int:
    """The first position whose τ exceeds 1 (F − o, rounded up): where the lesson's numbers change;
    −1 when β = 0 (no position is warmed)."""
    return max(0, int(np.ceil(floor - offset))) if scale else -1
