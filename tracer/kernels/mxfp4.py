"""MXFP4 dequantization (gpt-oss's experts): each byte holds two 4-bit e2m1 codes, the low nibble
first; each block of 32 weights shares one power of two. One pass, rows in parallel, each weight
written once as float64 (a NumPy version makes a look-up array, a product and then the copy a
consumer needs: four passes over a matrix of a few hundred MB)."""
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def dequantize_rows(blocks, scales, pairs, powers, out):
    """blocks: rows × groups × 16 (uint8), scales: rows × groups (uint8); pairs: 256 × 2, a byte's
    two values; powers: 256, the scale byte's power of two; out: rows × groups·32 float64."""
    rows, groups = scales.shape
    for r in prange(rows):
        for g in range(groups):
            s = powers[scales[r, g]]
            at = g * 32
            for b in range(16):
                code = blocks[r, g, b]
                out[r, at + 2 * b] = pairs[code, 0] * s
                out[r, at + 2 * b + 1] = pairs[code, 1] * s
