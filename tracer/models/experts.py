"""Mixtures of experts in the earlier blocks: what config.json says of them, each family's router
(which experts a token goes to, and with what share) and its experts, and one general sum that
runs the chosen experts one at a time, so a layer's experts are never all in memory at once."""
from __future__ import annotations

import numpy as np

from ..checks import kind
from ..errors import ScenarioError


def read_moe(data: dict, style: str, layers: int) -> dict:
    """The experts' sizes and switches from config.json (style "qwen3_moe" or "gpt_oss"); which
    layers have experts (Qwen3-MoE: not mlp_only_layers, and every decoder_sparse_step-th)."""
    # Qwen3-MoE's checkpoints say num_experts; transformers 5 writes num_local_experts for both
    count = "num_experts" if style == "qwen3_moe" and "num_experts" in data else "num_local_experts"
    inner = "moe_intermediate_size" if style == "qwen3_moe" else "intermediate_size"
    moe = {key: _whole(data, name) for key, name in (("experts", count), ("top_k", "num_experts_per_tok"),
                                                     ("inner", inner))}
    if moe["top_k"] > moe["experts"]:
        raise ScenarioError("num_experts_per_tok", f"expected at most the {moe['experts']} experts, got {moe['top_k']}")
    if style == "gpt_oss":
        moe.update(alpha=float(data.get("swiglu_alpha", 1.702)), limit=float(data.get("swiglu_limit", 7.0)),
                   sparse=[True] * layers)
        return moe
    step = data.get("decoder_sparse_step", 1)
    dense = data.get("mlp_only_layers") or []
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ScenarioError("decoder_sparse_step", f"expected a whole number ≥ 1, got {kind(step)}")
    if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
        raise ScenarioError("mlp_only_layers", f"expected a list of layer numbers, got {kind(dense)}")
    moe.update(norm_topk=data.get("norm_topk_prob", False) is True,
               sparse=[i not in dense and (i + 1) % step == 0 for i in range(layers)])
    return moe


def _whole(data: dict, key: str) -> int:
    value = data.get(key)
    if value is None:
        raise ScenarioError(key, "is missing; expected the experts' count and size of a mixture-of-experts config")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioError(key, f"expected a whole number ≥ 1, got {kind(value)}")
    return value


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's k largest, by index (their order does not matter: the shares are summed)."""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k]


def route(logits: np.ndarray, moe: dict, style: str) -> tuple[np.ndarray, np.ndarray]:
    """(chosen experts, their shares), tokens × top_k. Qwen3-MoE: softmax over every expert, the
    top k kept (renormalised to sum 1 when norm_topk_prob); gpt-oss: the top k logits, softmax
    over those alone."""
    chosen = _top(logits, moe["top_k"])
    picked = np.take_along_axis(logits, chosen, axis=-1)
    if style == "gpt_oss":
        return chosen, _softmax(picked)
    shares = np.take_along_axis(_softmax(logits), chosen, axis=-1)
    return chosen, shares / shares.sum(axis=-1, keepdims=True) if moe["norm_topk"] else shares


def mixture(h: np.ndarray, chosen: np.ndarray, shares: np.ndarray, expert) -> np.ndarray:
    """Σ over each token's chosen experts of share × expert(h): `expert(e, rows)` runs expert e
    on the rows of the tokens that chose it; experts no token chose are never read. Any router
    (softmax, sigmoid, grouped) hands its choice here."""
    out = np.zeros_like(h)
    for e in np.unique(chosen):
        tokens, slot = np.nonzero(chosen == e)      # a token chooses an expert at most once
        out[tokens] += shares[tokens, slot, None] * expert(int(e), h[tokens])
    return out


def silu(u: np.ndarray) -> np.ndarray:
    return u * 0.5 * (1 + np.tanh(u / 2))             # u·sigmoid(u), without exp overflowing


def swiglu_clamped(gate_up: np.ndarray, alpha: float, limit: float) -> np.ndarray:
    """gpt-oss's gated unit: gate and up interleaved (even and odd columns), gate capped above at
    the limit and up clamped to ±limit; (up + 1) · gate · sigmoid(alpha · gate)."""
    gate, up = np.minimum(gate_up[:, ::2], limit), np.clip(gate_up[:, 1::2], -limit, limit)
    return (up + 1) * gate * 0.5 * (1 + np.tanh(alpha * gate / 2))
