"""Fine-grained FP8, as DeepSeek-V3, Kimi K2 and the "-FP8" releases of Qwen3 publish their linear
layers: each weight a float8 e4m3 number (1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits;
no infinities, 0x7F and 0xFF are NaN), and beside it `weight_scale_inv`, one float per block of
weights (128 × 128 unless config.json's quantization_config says otherwise) that it is multiplied by.
Dequantized in NumPy as read, into float64 like every other weight."""
from __future__ import annotations

import math

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from ..readfile import CONFIG_BYTES, checkpoint_json

DTYPE = "F8_E4M3"
SCALE = "_scale_inv"      # `….weight` → `….weight_scale_inv`


def _e4m3() -> np.ndarray:
    """Every code's value: (−1)^s · 2^(e − 7) · (1 + m/8), or 2^−6 · m/8 when e = 0."""
    code = np.arange(256)
    sign = np.where(code & 0x80, -1.0, 1.0)
    e, m = (code >> 3) & 0x0F, code & 0x07
    value = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * np.ldexp(1.0, e - 7))
    value = sign * value
    value[(code & 0x7F) == 0x7F] = np.nan
    return value


E4M3 = _e4m3()


def scale_name(name: str) -> str:
    return name + SCALE


def block(tensors) -> tuple[int, int]:
    """quantization_config.weight_block_size of the folder's config.json (default 128 × 128);
    another quantization method or format is refused by name."""
    kept = getattr(tensors, "_fp8_block", None)
    if kept is None:
        kept = tensors._fp8_block = _block(tensors.folder)
    return kept


def _block(folder) -> tuple[int, int]:
    data = checkpoint_json(folder / "config.json", CONFIG_BYTES, "a JSON config") if hasattr(folder, "joinpath") else {}
    q = data.get("quantization_config") if isinstance(data, dict) else None
    if q is None:
        return 128, 128
    where = str(folder / "config.json")
    if not isinstance(q, dict) or q.get("quant_method", "fp8") != "fp8" or q.get("fmt", "e4m3") != "e4m3":
        raise ScenarioError("quantization_config", f"expected fp8 with fmt e4m3 (fine-grained FP8 blocks), got "
                            f"{kind(q)}", where)
    size = q.get("weight_block_size", [128, 128])
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(s, int) and not isinstance(s, bool)
                                                            and s >= 1 for s in size)):
        raise ScenarioError("quantization_config.weight_block_size", f"expected two whole numbers ≥ 1, got "
                            f"{kind(size)}", where)
    return size[0], size[1]


def check(tensors, name: str, shape: tuple) -> None:
    """An FP8 matrix `name` of `shape` (out × in as stored) with its scales beside it, their
    shape one per block: refused by name when they are missing or disagree."""
    scales = scale_name(name)
    if scales not in tensors:
        raise ScenarioError(name, f"has dtype {DTYPE} but no {scales} beside it; expected fine-grained FP8 "
                            "(a scale per block of weights)", tensors.where(name))
    if len(shape) != 2:
        raise ScenarioError(name, f"has dtype {DTYPE} and shape {shape}; expected a matrix", tensors.where(name))
    rows, cols = block(tensors)
    want = (math.ceil(shape[0] / rows), math.ceil(shape[1] / cols))
    if tuple(tensors.shape(scales)) != want:
        raise ScenarioError(scales, f"has shape {tuple(tensors.shape(scales))}; expected {want} (one scale per "
                            f"{rows} × {cols} block of {name}'s {shape[0]} × {shape[1]})", tensors.where(scales))


def scales(tensors, name: str) -> np.ndarray:
    """The block scales of FP8 matrix `name`, each finite (as every tensor read) and > 0: a scale
    of 0 would zero its block and a negative one flip it, so either is refused by tensor and place."""
    key = scale_name(name)
    s = tensors[key]
    if not (s > 0).all():
        at = [int(i) for i in np.argwhere(~(s > 0))[0]]
        raise ScenarioError(key, f"holds {s[tuple(at)]:g} at {at}; expected block scales > 0 (each multiplies a block "
                            f"of {name}; the file may be corrupt)", tensors.where(key))
    return s


def dequantize(codes: np.ndarray, scales: np.ndarray, size: tuple[int, int], ids=None) -> np.ndarray:
    """codes (rows × in, uint8; the rows `ids` of the matrix when given) × their blocks' scales
    → float64."""
    rows = np.arange(codes.shape[0]) if ids is None else np.asarray(ids)
    out = E4M3[codes]
    out *= scales[rows // size[0]][:, np.arange(codes.shape[1]) // size[1]]
    return out
