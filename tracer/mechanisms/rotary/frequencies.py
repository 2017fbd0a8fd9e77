"""Rotary positions (RoPE): which features form a pair, each pair's frequency (after any scaling
for long contexts: linear, llama3, yarn) and the angle the pair of the token at position p turns
by, p·θ_i. Shared by the computation and the explanations."""
from __future__ import annotations

import functools
import math

import numpy as np

SCALINGS = ("linear", "llama3", "yarn", "proportional")


def rotary_dims(spec: dict, d_k: int) -> int:
    """How many of a head's d_k features rotate: all, or the first `dims` (partial rotary)."""
    return spec.get("dims") or d_k


def pairs(d_k: int, style: str) -> tuple[np.ndarray, np.ndarray]:
    """The two feature indices of each pair i of the d_k rotated features: (i, i + d_k/2) in the
    `half` style of Llama and NeoX code, (2i, 2i + 1) in the `interleaved` style of RoFormer and GPT-J."""
    i = np.arange(d_k // 2)
    return (i, i + d_k // 2) if style == "half" else (2 * i, 2 * i + 1)


def pair_slices(d_k: int, style: str) -> tuple[slice, slice]:
    """pairs() as slices, for rotating whole arrays at once (views, no gathering)."""
    half = d_k // 2
    return (slice(0, half), slice(half, d_k)) if style == "half" else (slice(0, d_k, 2), slice(1, d_k, 2))


def pair_of(feature: int, d_k: int, style: str) -> int | None:
    """The pair a feature belongs to (None past the rotated ones, under partial rotary)."""
    if feature >= d_k:
        return None
    return feature % (d_k // 2) if style == "half" else feature // 2


def plain(d_k: int, base: float) -> np.ndarray:
    """θ_i = base^(−2i/d_k): pair 0 turns fastest, the last pair slowest."""
    return base ** (-2.0 * np.arange(d_k // 2) / d_k)


def plain32(d_k: int, base: float) -> np.ndarray:
    """θ_i as PyTorch models form it, `1.0 / base ** (torch.arange(0, d, 2).float() / d)`: the exponent
    and the quotient in float32 (the power rounded to float32 from float64; PyTorch's own power is
    within an ulp of it: 1 pair in 64 may differ by one ulp)."""
    e = np.arange(0, d_k, 2, dtype=np.float32)[: d_k // 2] / np.float32(d_k)
    power = (np.float64(np.float32(base)) ** e.astype(np.float64)).astype(np.float32)
    return (np.float32(1.0) / power).astype(np.float64)


def frequencies(spec: dict, d_k: int) -> np.ndarray:
    """Each pair's frequency after the spec's scaling (d_k: the rotated features); with angles
    "float32", θ in float32 as PyTorch forms it (a scaling's factor applied to it, rounded again).

    linear divides every θ by the factor; llama3 divides the slow pairs (wavelength 2π/θ beyond
    original ÷ low_freq_factor), keeps the fast ones (below original ÷ high_freq_factor) and blends
    in between by how many turns the pair makes in the original context; yarn blends each pair from
    θ ÷ factor to θ along a ramp over the pairs that turn between beta_slow and beta_fast times in it."""
    single = spec.get("angles") == "float32"
    theta = plain32(d_k, spec["base"]) if single else plain(d_k, spec["base"])
    s = spec.get("scaling")
    if s is not None and s["type"] == "proportional":   # Gemma 4's global layers: the first pairs turn, the rest stand
        theta = np.where(np.arange(d_k // 2) < turning(spec, d_k), theta / s["factor"], 0.0)
    elif s is not None:
        theta = theta * (1 - (1 - 1 / s["factor"]) * slowed(spec, d_k))
        theta = theta.astype(np.float32).astype(np.float64) if single else theta
    return theta * spec.get("sign", 1)   # sign −1: turned the other way (nanochat)


def turning(spec: dict, d_k: int) -> int:
    """Proportional rotary: how many pairs turn, ⌊f·d_k/2⌋ (θ over the whole head: base^(−2i/d_k))."""
    return int(spec["scaling"]["fraction"] * d_k // 2)


def angles(spec: dict, p, theta):
    """p·θ: in float64, or (angles "float32") rounded to float32 as PyTorch's float32 product is
    (its error grows with the position: about p·2⁻²⁴ rad)."""
    if spec.get("angles") == "float32":
        return (np.asarray(p, np.float32) * np.asarray(theta, np.float32)).astype(np.float64)
    return np.asarray(p, np.float64) * theta


def slowed(spec: dict, d_k: int) -> np.ndarray:
    """How far each pair is moved from θ to θ ÷ factor: 0 (kept) … 1 (divided by the factor)."""
    s, theta = spec["scaling"], plain(d_k, spec["base"])
    if s["type"] == "linear":
        return np.ones_like(theta)
    original = s["original_max_position_embeddings"]
    if s["type"] == "llama3":
        turns = original * theta / (2 * math.pi)     # original ÷ wavelength
        low, high = s["low_freq_factor"], s["high_freq_factor"]
        return 1 - np.clip((turns - low) / (high - low), 0.0, 1.0)
    low, high = yarn_range(spec, d_k)
    return np.clip((np.arange(d_k // 2) - low) / ((high - low) or 0.001), 0.0, 1.0)


def yarn_range(spec: dict, d_k: int) -> tuple[int, int]:
    """The pairs where yarn's ramp starts and ends: the pair that turns beta_fast times in the
    original context (rounded down) and the one that turns beta_slow times (rounded up); gpt-oss
    (truncate false) keeps them fractional."""
    s, base = spec["scaling"], spec["base"]
    original = s["original_max_position_embeddings"]

    def pair(turns: float) -> float:
        ratio = original / (turns * 2 * math.pi)
        if 0 < ratio < math.inf:   # transformers' own expression, kept bit for bit where it is finite
            return d_k * math.log(ratio) / (2 * math.log(base))
        # β·2π (or the ratio) beyond float64, as for β = 1e308: the same logarithm, taken apart
        return d_k * (math.log(original) - math.log(turns) - math.log(2 * math.pi)) / (2 * math.log(base))
    low, high = pair(s["beta_fast"]), pair(s["beta_slow"])
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, d_k - 1)


def attention_factor(spec: dict | None) -> float:
    """What yarn multiplies cos and sin by (so q_rot and k_rot carry it, their scores its square):
    the given attention_factor, else 0.1·ln(factor) + 1 (Peng et al.); 1 for the other types."""
    s = (spec or {}).get("scaling")
    if not s or s["type"] != "yarn":
        return 1.0
    if s.get("attention_factor") is not None:
        return float(s["attention_factor"])
    return 0.1 * math.log(s["factor"]) + 1.0 if s["factor"] > 1 else 1.0


def positions(spec: dict, count: int) -> np.ndarray:
    """The positions of the first `count` tokens: the spec's own list, or offset, offset + 1, …"""
    if spec.get("positions") is not None:
        return np.asarray(spec["positions"][:count], dtype=np.float64)
    return spec["offset"] + np.arange(count, dtype=np.float64)


def tables(count: int, d_k: int, spec: dict, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every token's angle for every pair (times yarn's attention factor):
    count × pairs each (remembered: every head of a layer turns by the same angles)."""
    return _tables(count, rotary_dims(spec, d_k), freeze(spec), np.dtype(dtype).name)


def freeze(spec: dict) -> tuple:
    """The spec as a hashable, sorted tuple (the scaling's table too)."""
    return tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v) for k, v in spec.items()))


def thaw(frozen: tuple) -> dict:
    return {k: dict(v) if k == "scaling" and v is not None else v for k, v in frozen}


@functools.lru_cache(maxsize=8)
def _tables(count: int, d_k: int, frozen: tuple, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    spec = thaw(frozen)
    angle = angles(spec, positions(spec, count)[:, None], frequencies(spec, d_k)[None, :])
    a = attention_factor(spec)
    return np.ascontiguousarray(np.cos(angle) * a, dtype=dtype), np.ascontiguousarray(np.sin(angle) * a, dtype=dtype)
