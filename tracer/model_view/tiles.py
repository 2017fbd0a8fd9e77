"""A head's matrix made small enough to draw as a tile (the TUI's mini heatmaps, the model view's
figure and HTML): blocks of rows and columns reduced to one value each, so that a sharp pattern
(a diagonal, a first column) survives at any size."""
from __future__ import annotations

import numpy as np

SIDE = 32   # a tile's rows and columns at most, as the model view keeps them


def shrink(a: np.ndarray, rows: int = SIDE, cols: int = SIDE, signed: bool = False) -> np.ndarray:
    """At most rows × cols: each block's largest value (non-finite values as 0); `signed`, for a
    matrix with both signs (a linear layer's implicit matrix), the value farthest from 0, sign kept."""
    a = np.where(np.isfinite(a), a, 0.0).astype(np.float64)
    r_edges = np.linspace(0, a.shape[0], min(rows, a.shape[0]) + 1).astype(int)[:-1]
    c_edges = np.linspace(0, a.shape[1], min(cols, a.shape[1]) + 1).astype(int)[:-1]
    if not signed:
        return np.maximum.reduceat(np.maximum.reduceat(a, r_edges, axis=0), c_edges, axis=1)
    high = np.maximum.reduceat(np.maximum.reduceat(a, r_edges, axis=0), c_edges, axis=1)
    low = np.minimum.reduceat(np.minimum.reduceat(a, r_edges, axis=0), c_edges, axis=1)
    return np.where(high >= -low, high, low)
