"""The experts of the 2026 families, each as transformers runs it, in float64 NumPy: which experts
a token goes to (its router) and how their outputs are mixed. GLM-4.5 and MiniMax-M2 route by
sigmoid scores with a correction bias (DeepSeek-V3's router); Llama 4 sends the token, scaled by
σ(logit), to its top experts and adds a shared expert; Gemma 4 runs its experts beside its MLP;
Mistral 4 routes by softmax scores within groups."""
from __future__ import annotations

import numpy as np

from ..deepseek_experts import route
from .common import Weights, activation, gated


def _mix(x: np.ndarray, chosen: np.ndarray, shares: np.ndarray, expert) -> np.ndarray:
    """Σ over each token's chosen experts of share × expert(e, the token's row)."""
    out = np.zeros_like(x)
    for e in np.unique(chosen):
        rows, slot = np.nonzero(chosen == e)
        out[rows] += shares[rows, slot][:, None] * expert(int(e), x[rows])
    return out


def _stacked(w: Weights, at: str, act, inward: bool):
    """An expert of stacked tensors: gate_up (experts × 2I × d, or × d × 2I when `inward`, as
    Llama 4 saves it) and down, gate first."""
    gate_up, down = w[at + "experts.gate_up_proj"], w[at + "experts.down_proj"]

    def expert(e: int, rows: np.ndarray) -> np.ndarray:
        gu = rows @ (gate_up[e] if inward else gate_up[e].T)
        half = gu.shape[-1] // 2
        return (act(gu[:, :half]) * gu[:, half:]) @ (down[e] if inward else down[e].T)
    return expert


def gemma4_experts(w: Weights, at: str, h: np.ndarray, x: np.ndarray, cfg: dict) -> np.ndarray:
    """Gemma 4's experts on h (pre_feedforward_layernorm_2 of x), routed from x itself: softmax of
    (RMS(x)·scale ÷ √d)·W over all experts, the top k renormalised to 1, × per_expert_scale."""
    r = at + "router."
    z = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + cfg["eps"]) * w[r + "scale"] * cfg["d_model"] ** -0.5
    logits = z @ w.linear(r + "proj")
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    chosen = np.argsort(-p, axis=-1, kind="stable")[:, : cfg["moe"]["top_k"]]
    shares = np.take_along_axis(p, chosen, axis=-1)
    shares = shares / shares.sum(axis=-1, keepdims=True) * w[r + "per_expert_scale"][chosen]
    return _mix(h, chosen, shares, _stacked(w, at, activation(cfg["act"]), inward=False))


def llama4_moe(w: Weights, at: str, h: np.ndarray, top_k: int, act) -> np.ndarray:
    """Llama 4: the top k experts by router logit; each gets the token times σ(its logit) (the
    input is scaled, not the output); plus the shared expert on the token itself."""
    logits = h @ w.linear(at + "router")
    chosen = np.argsort(-logits, axis=-1, kind="stable")[:, :top_k]
    gate = 1.0 / (1.0 + np.exp(-np.take_along_axis(logits, chosen, axis=-1)))
    expert = _stacked(w, at, act, inward=True)
    out = np.zeros_like(h)
    for e in np.unique(chosen):
        rows, slot = np.nonzero(chosen == e)
        out[rows] += expert(int(e), h[rows] * gate[rows, slot][:, None])
    return out + gated(h, w, at + "shared_expert.", act)


def sigmoid_routed(w: Weights, at: str, h: np.ndarray, routing: dict, act) -> np.ndarray:
    """GLM-4.5 (`mlp.gate`, `mlp.experts.{e}.gate_proj…`, shared experts) and MiniMax-M2
    (`block_sparse_moe.gate`, `…experts.{e}.w1/w3/w2`, none shared), as saved."""
    minimax = at + "block_sparse_moe.gate.weight" in w
    m = at + ("block_sparse_moe." if minimax else "mlp.")
    bias = w.get(m + ("e_score_correction_bias" if minimax else "gate.e_score_correction_bias"))
    chosen, shares = route(h @ w[m + "gate.weight"].T, routing, bias)

    def expert(e: int, rows: np.ndarray) -> np.ndarray:
        x = f"{m}experts.{e}."
        if minimax:
            return (act(rows @ w.linear(x + "w1")) * (rows @ w.linear(x + "w3"))) @ w.linear(x + "w2")
        return gated(rows, w, x, act)
    out = _mix(h, chosen, shares, expert)
    return out if minimax else out + gated(h, w, m + "shared_experts.", act)


def mistral4_moe(w: Weights, at: str, h: np.ndarray, routing: dict, act) -> np.ndarray:
    """Mistral 4: softmax scores; the best `topk_group` of `n_group` groups (each rated by its two
    best), the top k within them, renormalised when `norm_topk_prob`, × routed_scaling_factor;
    stacked experts, plus the shared experts."""
    logits = h @ w.linear(at + "gate")
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    n, e = p.shape
    groups = routing["n_group"]
    rating = np.sort(p.reshape(n, groups, e // groups), axis=-1)[..., -2:].sum(axis=-1)
    best = np.argsort(-rating, axis=-1, kind="stable")[:, : routing["topk_group"]]
    keep = np.zeros((n, groups), dtype=bool)
    np.put_along_axis(keep, best, True, axis=-1)
    choice = np.where(np.repeat(keep, e // groups, axis=-1), p, 0.0)
    chosen = np.argsort(-choice, axis=-1, kind="stable")[:, : routing["top_k"]]
    shares = np.take_along_axis(p, chosen, axis=-1)
    if routing["norm_topk_prob"]:
        shares = shares / (shares.sum(axis=-1, keepdims=True) + 1e-20)
    shares = shares * routing["routed_scaling_factor"]
    out = _mix(h, chosen, shares, _stacked(w, at, act, inward=False))
    return out + gated(h, w, at + "shared_experts.", act)
