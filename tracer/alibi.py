"""ALiBi (Press et al., "Train short, test long"): no rotary positions; instead each head subtracts
m_h·(i − j) from the score of query i and key j, a penalty that grows with the distance. The slopes
are a geometric sequence, one per head."""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import memory
from .checks import kind
from .errors import ScenarioError


def alibi_slopes(heads: int) -> np.ndarray:
    """The paper's slopes: 2^(−8(h+1)/H) for H a power of two (8 heads: 1/2, 1/4, …, 1/256);
    otherwise the slopes of the power of two P below H, then every other slope of 2P's sequence
    (2P's odd-numbered ones, which fall between P's) until there are H."""
    if isinstance(heads, bool) or not isinstance(heads, numbers.Integral) or heads < 1:
        raise ScenarioError("heads", f"expected a whole number ≥ 1 (one slope per head), got {kind(heads)}")
    if not memory.fits(24 * int(heads)):   # the slopes of P and of 2P
        raise ScenarioError("heads", f"{heads} slopes {memory.shortfall(24 * int(heads))}")
    heads = int(heads)

    def geometric(count: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, count + 1) / count)
    below = 2 ** int(math.floor(math.log2(heads)))
    return np.concatenate([geometric(below), geometric(2 * below)[0::2][:heads - below]])


def distances(n: int, m: int) -> np.ndarray:
    """i − j for query i and key j (n × m): how far back each key is (negative: ahead)."""
    return np.arange(n, dtype=np.float64)[:, None] - np.arange(m, dtype=np.float64)[None, :]
