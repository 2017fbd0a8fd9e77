"""MXFP4, the format gpt-oss publishes its experts in: each block of 32 weights is 16 bytes of
4-bit e2m1 numbers (two a byte, the low nibble first) sharing one 8-bit power of two (bias 127).
Dequantized in NumPy as read, one expert at a time."""
from __future__ import annotations

import numpy as np

from ..errors import ScenarioError

# e2m1: a sign, two exponent bits and one mantissa bit; codes 0-7 positive, 8-15 their negatives
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
BLOCK = 32          # weights sharing one scale
BIAS = 127
PAIRS = np.stack([E2M1[np.arange(256) & 0x0F], E2M1[np.arange(256) >> 4]], axis=1)   # a byte → its two values


NAN = 255           # the scale byte that is NaN in the OCP MX spec (E8M0 has no 2^128)
POWERS = np.ldexp(1.0, np.arange(256) - BIAS)   # a scale byte → its power of two (exact in float64)
POWERS[NAN] = np.nan


def check_scales(scales: np.ndarray, name: str, e: int, where: str) -> None:
    """Expert e's scale bytes of tensor `name`: a 255 (NaN in the spec, once read as 2^128) is
    refused by tensor and place."""
    if (scales == NAN).any():
        at = [e, *(int(i) for i in np.argwhere(scales == NAN)[0])]
        raise ScenarioError(name, f"holds the scale byte 255 at {at}, which is NaN in the OCP MX format; expected "
                            "bytes 0 to 254, the powers 2^(b − 127) (the file may be corrupt)", where)


def dequantize(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """blocks (… × out × groups × 16 uint8) and scales (… × out × groups uint8) → … × in × out
    float64 (in = groups·32), transposed as the module stores the matrix (a view of out × in)."""
    from ..kernels.mxfp4 import dequantize_rows
    lead, groups = blocks.shape[:-2], blocks.shape[-2]
    rows = int(np.prod(lead, dtype=np.int64))
    out = np.empty((rows, groups * BLOCK), np.float64)
    dequantize_rows(np.ascontiguousarray(blocks).reshape(rows, groups, BLOCK // 2),
                    np.ascontiguousarray(scales).reshape(rows, groups), PAIRS, POWERS, out)
    return np.swapaxes(out.reshape(lead + (groups * BLOCK,)), -1, -2)


def check(tensors, name: str, shape: tuple) -> None:
    """`name` stored as name_blocks and name_scales, for a module matrix of `shape` (… × in × out):
    uint8 both, blocks … × out × in/32 × 16 and scales … × out × in/32, else refused by name."""
    *lead, inp, out = shape
    want = {name + "_blocks": tuple(lead) + (out, inp // BLOCK, BLOCK // 2),
            name + "_scales": tuple(lead) + (out, inp // BLOCK)}
    for part, expected in want.items():
        if part not in tensors:
            raise ScenarioError(part, f"is missing; expected it beside {name}_blocks (MXFP4 stores blocks and scales)",
                                str(tensors.folder))
        if tensors.dtype(part) != "U8":
            raise ScenarioError(part, f"has dtype {tensors.dtype(part)}; expected U8 (MXFP4)", tensors.where(part))
        if inp % BLOCK or tensors.shape(part) != expected:
            raise ScenarioError(part, f"has shape {tensors.shape(part)}; expected {expected} (MXFP4 of a "
                                f"{'×'.join(map(str, shape))} matrix, blocks and scales agreeing)", tensors.where(part))
