"""DeepSeek's routers: which experts each token goes to and with what weight, as config.json says.
V3 (and Kimi K2, Moonlight): sigmoid scores; the choice adds a learned correction bias (load
balancing without a loss) and is limited to the best `topk_group` of `n_group` groups, each group
rated by its two best; the weights are the plain sigmoid scores of the chosen, renormalised when
`norm_topk_prob`, times `routed_scaling_factor`. V2: softmax scores over every expert, the top k
greedily or within the groups whose best expert is best (`group_limited_greedy`)."""
from __future__ import annotations

import numpy as np


def route(h: np.ndarray, gate: np.ndarray, r: dict, bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(weights, experts), both tokens × top_k, for the normed stream h (tokens × d_model) and the
    router's matrix gate (experts × d_model, as saved). r holds the config's routing keys."""
    logits = h @ gate.T
    if r["scoring"] == "sigmoid":
        scores = 0.5 * (1.0 + np.tanh(logits / 2))       # σ(logits), without exp overflowing
        choice = scores + (0.0 if bias is None else bias)
        choice = _within_groups(choice, r, lambda g: np.sort(g, axis=-1)[..., -2:].sum(axis=-1), -np.inf)
    else:
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        scores = e / e.sum(axis=-1, keepdims=True)
        choice = scores
        if r["method"] == "group_limited_greedy":
            scores = choice = _within_groups(scores, r, lambda g: g.max(axis=-1), 0.0)
    experts = np.argsort(-choice, axis=-1, kind="stable")[:, : r["top_k"]]
    weights = np.take_along_axis(scores, experts, axis=-1)
    if r["norm_topk_prob"]:
        weights = weights / (weights.sum(axis=-1, keepdims=True) + 1e-20)
    return weights * r["routed_scaling_factor"], experts


def _within_groups(choice: np.ndarray, r: dict, rate, hidden: float) -> np.ndarray:
    """The scores with every expert outside each token's best `topk_group` groups set to `hidden`;
    unchanged when the config has no groups."""
    groups = r.get("n_group")
    if not groups or groups <= 1 or not r.get("topk_group"):
        return choice
    n, e = choice.shape
    rating = rate(choice.reshape(n, groups, e // groups))
    best = np.argsort(-rating, axis=-1, kind="stable")[:, : r["topk_group"]]
    keep = np.zeros((n, groups), dtype=bool)
    np.put_along_axis(keep, best, True, axis=-1)
    return np.where(np.repeat(keep, e // groups, axis=-1), choice, hidden)
