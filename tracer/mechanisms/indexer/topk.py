"""Each query keeps the k keys its index scores rank best (`idx.selected`), and the attention then
reads only those: the others are masked like later tokens, so their weights are exactly 0.

A query that can see k keys or fewer keeps them all (transformers' top-k then picks masked keys
too, which the causal mask hides anyway). Equal scores are broken towards the earlier key;
torch.topk leaves that order unspecified, so a real tie at the k-th place is reported by `ties`.
"""
from __future__ import annotations

import numpy as np


def select(scores: np.ndarray, k: int) -> np.ndarray:
    """query × key, True for the (at most) k best finite scores of each row."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"topk: expected a whole number k ≥ 1, got {k!r}")
    # stable sort of −score: the best first, equal scores in key order; −∞ (not allowed) last
    order = np.argsort(-scores, axis=-1, kind="stable")[..., :k]
    keep = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    return keep & np.isfinite(scores)


def kth_best(scores: np.ndarray, k: int) -> np.ndarray:
    """Each query's k-th best finite score: the bar a key must reach to be kept (−∞ where the
    query sees k keys or fewer: then every key it sees is kept)."""
    finite = np.where(np.isfinite(scores), scores, -np.inf)
    if k > scores.shape[-1]:
        return np.full(scores.shape[:-1], -np.inf)
    bar = -np.partition(-finite, k - 1, axis=-1)[..., k - 1]
    seen = np.isfinite(scores).sum(axis=-1)
    return np.where(seen > k, bar, -np.inf)


def ties(scores: np.ndarray, k: int) -> np.ndarray:
    """Queries whose k-th and (k+1)-th best scores are equal: their choice depends on how ties
    are broken (here: the earlier key wins)."""
    if k >= scores.shape[-1]:
        return np.zeros(scores.shape[:-1], dtype=bool)
    top = -np.sort(-np.where(np.isfinite(scores), scores, -np.inf), axis=-1)[..., k - 1:k + 1]
    return np.isfinite(top[..., 1]) & (top[..., 0] == top[..., 1])


def nth(k: int) -> str:
    """1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st."""
    tail = "th" if k % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{tail}"


def reason(scores: np.ndarray, keep: np.ndarray, k: int, i: int, j: int, f=lambda v: f"{v:.4g}",
           what: str = "key") -> str:
    """Why query i kept or dropped key j (`what`: "key", or "entry" for DeepSeek V4's compressed
    entries), with the numbers: its index score against the k-th best."""
    s, row = scores[i, j], scores[i]
    seen, many = int(np.isfinite(row).sum()), "entries" if what == "entry" else what + "s"
    if not np.isfinite(s):
        return f"not a candidate: query {i} may not see {what} {j}"
    rank = int((row > s).sum() + ((row == s) & (np.arange(row.size) < j)).sum()) + 1
    if seen <= k:
        return (f"kept: query {i} sees {seen} {many if seen != 1 else what}, no more than k = {k}, "
                f"so it keeps them all (index score {f(s)})")
    bar = kth_best(scores[i:i + 1], k)[0]
    tied = s == bar and bool(ties(scores[i:i + 1], k)[0])
    if keep[i, j]:
        tie = f" (a tie at the bar, broken towards the earlier {many})" if tied else ""
        return (f"kept: index score {f(s)} ranks {rank} of {seen}, within the top k = {k} (the {nth(k)} best is "
                f"{f(bar)}){tie}")
    if tied:
        return (f"dropped: index score {f(s)} ties with the {nth(k)} best, and earlier {many} took the places "
                f"(ties go to the earlier {what}); its weight is 0 in every head")
    return (f"dropped: index score {f(s)} ranks {rank} of {seen}, below the {nth(k)} best, {f(bar)}; "
            f"its weight is 0 in every head")
