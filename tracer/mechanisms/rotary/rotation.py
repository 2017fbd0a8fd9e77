"""The rotation itself, once in NumPy (`turn`: any stack of rows at once) beside its kernel
(kernels/stages.rotate, one matrix): each pair (x1, x2) of a row turned by its angle, x1·cos − x2·sin
and x1·sin + x2·cos, the features past the rotated ones (partial rotary) kept. The trace, the decode
loop, latent attention and the earlier blocks of a checkpoint all turn their queries and keys here."""
from __future__ import annotations

import numpy as np

from ...kernels import pool
from .frequencies import pair_slices, pairs, rotary_dims, tables


def turn(a: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str, d: int) -> np.ndarray:
    """The rotation of rows a (… × d_k) by cos and sin (broadcast against each row's pairs: one row
    of angles per token), the first d features in pairs of `style`, the rest kept."""
    first, second = pair_slices(d, style)
    out = pool.empty(a.shape, a.dtype)
    if d < a.shape[-1]:   # partial rotary: the features past the first d stay as they are
        out[..., d:] = a[..., d:]
    x1, x2, o1, o2 = a[..., first], a[..., second], out[..., first], out[..., second]
    np.multiply(x1, cos, out=o1)       # o1 = x1·cos − x2·sin, o2 = x1·sin + x2·cos, without temporaries
    o1 -= x2 * sin
    np.multiply(x1, sin, out=o2)
    o2 += x2 * cos
    return out


def rotate(a: np.ndarray, spec: dict, dtype=None) -> np.ndarray:
    """RoPE on a stack of matrices (… × tokens × d_k) at once, token t at the spec's t-th position."""
    cos, sin = tables(a.shape[-2], a.shape[-1], spec, a.dtype if dtype is None else dtype)
    return turn(a, cos, sin, spec["style"], rotary_dims(spec, a.shape[-1]))


def rotate_one(K, spec: dict, a: np.ndarray, dtype) -> np.ndarray:
    """RoPE on one matrix (tokens × d_k) by the stage kernel."""
    cos, sin = tables(a.shape[0], a.shape[1], spec, dtype)
    first, second = pairs(rotary_dims(spec, a.shape[1]), spec["style"])
    return K.rotate(a, cos, sin, first, second)
