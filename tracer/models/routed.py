"""A mixture of experts applied as routed: each expert that some token chose is read, applied to
its tokens (a gated MLP) and let go before the next is read, so that a layer's experts are never
in memory at once; its output joins each token's sum with that token's weight for it."""
from __future__ import annotations

from typing import Callable

import numpy as np


def apply_experts(h: np.ndarray, weights: np.ndarray, experts: np.ndarray, read: Callable[[int], dict],
                  mlp: Callable[[np.ndarray, dict], np.ndarray]) -> np.ndarray:
    """Σ_k weights[t, k]·expert_{experts[t, k]}(h[t]) for every token t. `read(e)` gives expert e's
    weights (the dict `mlp` takes), `mlp(rows, w)` applies them to some rows of h."""
    out = np.zeros_like(h)
    for e in np.unique(experts):
        tokens, slot = np.nonzero(experts == e)
        w = read(int(e))
        out[tokens] += mlp(h[tokens], w) * weights[tokens, slot][:, None]
        del w
    return out
