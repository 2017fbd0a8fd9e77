"""The chunked mask: key j is allowed for the query at position p iff j ≤ p and ⌊j/C⌋ = ⌊p/C⌋.
Unlike a sliding window, the keys a query sees do not slide: the first query of a chunk sees
only itself, the last one C keys, and the next chunk starts again from one."""
from __future__ import annotations

import numpy as np


def chunk_start(p, chunk: int):
    """The first position of p's chunk, C·⌊p/C⌋ (works on whole arrays of positions too)."""
    return (np.asarray(p) // chunk) * chunk


def keys_seen(p, chunk: int):
    """How many keys the query at position p attends: p − C·⌊p/C⌋ + 1, from 1 to C."""
    return np.asarray(p) - chunk_start(p, chunk) + 1


def allowed(n: int, chunk: int, m: int | None = None) -> np.ndarray:
    """query × key booleans (True: may attend) for n queries that are the last n of m positions
    (m = n when not given; a decoded token is n = 1 over the m keys of the cache)."""
    m = n if m is None else m
    if chunk < 1 or not 1 <= n <= m:
        raise ValueError(f"expected a chunk ≥ 1 and 1 ≤ n ≤ m, got C = {chunk}, n = {n}, m = {m}")
    p = np.arange(m - n, m)[:, None]          # each query's position
    j = np.arange(m)[None, :]
    return (j <= p) & (j // chunk == p // chunk)
