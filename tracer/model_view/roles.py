"""What a head does, as TransformerLens's head detector measures it ("mul" error measure, nothing
excluded): a detection pattern D of 0s and 1s over query × key, and the score Σ A⊙D / Σ A over
every query row, the share of the head's weight A that falls where D expects it.

    previous    D[i, i−1] = 1: the key just before the query
    first       D[i, 0] = 1: the first key (where heads park weight they do not need)
    duplicate   D[i, j] = 1 for j < i with token j = token i: the earlier copies of the query's token
    induction   D[i, j] = 1 for 0 < j ≤ i with token j−1 = token i: the key after each earlier copy

(TransformerLens has no `first`; its other three patterns are these, lower triangular.) A is the
layer's attention weights (rows sum to 1, or 1 − sink with gpt-oss's sinks), or, for a layer
without softmax, its implicit matrix; the same formula reads both.
"""
from __future__ import annotations

import numpy as np

ROLES = ("previous", "first", "duplicate", "induction")


def patterns(ids) -> dict[str, np.ndarray]:
    """Each role's detection pattern for the token ids of the text (n × n, 0 or 1)."""
    ids = np.asarray(ids)
    n = len(ids)
    previous = np.eye(n, k=-1)
    first = np.zeros((n, n))
    first[:, 0] = 1.0
    duplicate = np.tril(ids[:, None] == ids[None, :], k=-1).astype(np.float64)
    induction = np.zeros((n, n))
    induction[:, 1:] = duplicate[:, :-1]       # the key one to the right of each earlier copy
    return {"previous": previous, "first": first, "duplicate": duplicate, "induction": np.tril(induction)}


def scores(a: np.ndarray, found: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each role's score for every head of a (heads × n × n): Σ A⊙D / Σ A per head (0 for a head
    whose weights sum to 0)."""
    total = a.sum(axis=(1, 2))
    safe = np.where(total != 0, total, 1.0)
    return {role: np.where(total != 0, np.einsum("hij,ij->h", a, found[role]) / safe, 0.0) for role in ROLES}
