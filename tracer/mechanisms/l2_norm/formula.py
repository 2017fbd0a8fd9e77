"""The weightless "L2" norm of Llama 4 (its `Llama4TextL2Norm`), taken over each head's d_k
features of one token:

    x ÷ √(mean(x²) + ε)

It is called an L2 norm but divides by the root mean square, not by the length: with ε = 0 every
row comes out with length √d_k (not 1), and a score q·k of two normed rows lies between −d_k and
d_k before the ÷√d_k. It has no gain, so nothing learned can sharpen the head afterwards: the
sharpness left is the angle between q and k. The same arithmetic is nanochat's QK-norm
(`F.rms_norm` without a weight) and Gemma's `v_norm`: one formula, three uses."""
from __future__ import annotations

import numpy as np


def l2_norm(x: np.ndarray, eps: float) -> np.ndarray:
    """x ÷ √(mean(x²) + ε) over the last axis (each token's row of one head)."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def length(d_k: int) -> float:
    """The length of a normed row when ε = 0: √d_k."""
    return float(np.sqrt(d_k))
