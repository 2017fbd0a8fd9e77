"""Mixtures of experts in the earlier blocks. Each family's is declared once, an `Experts` record in
the family table: where config.json gives its sizes, how its router chooses (which experts a token
goes to, with what share), what its tensors are called and how one expert runs. One general sum
runs the chosen experts one at a time, so a layer's experts are never all in memory at once.
Qwen3-MoE's and gpt-oss's are here; DeepSeek's (grouped routing, shared experts) in deepseek_experts.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from .ops import silu


@dataclass(frozen=True)
class Experts:
    """A family's mixture of experts, declared."""
    read: Callable        # (config.json, layers, model_type) → Config.moe: the counts, the widths, the
    #                       switches, and `sparse`: which layers have experts (the others a dense MLP)
    route: Callable       # (logits, Config.moe, correction bias or None) → (chosen, shares), tokens × top_k
    shapes: Callable      # (Config, "…mlp.") → {tensor: shape} of a sparse layer, checked before any arithmetic
    tensors: Callable     # (tensors, Config, "…mlp.") → {router (d × experts), b_router, bias, expert(e) →
    #                       its matrices, shared (always-on experts' MLP) or None}
    run: Callable         # (rows, an expert's matrices, Config) → the expert's output on those rows
    expert_shapes: Callable = lambda cfg, m, e: {}   # expert e's tensors, checked when it is read
    dense_inner: bool = False   # config.json must give intermediate_size (its dense layers' width) too


def mixture(h: np.ndarray, chosen: np.ndarray, shares: np.ndarray, expert) -> np.ndarray:
    """Σ over each token's chosen experts of share × expert(h): `expert(e, rows)` runs expert e
    on the rows of the tokens that chose it; experts no token chose are never read. Any router
    (softmax, sigmoid, grouped) hands its choice here."""
    out = np.zeros_like(h)
    for e in np.unique(chosen):
        tokens, slot = np.nonzero(chosen == e)      # a token chooses an expert at most once
        out[tokens] += shares[tokens, slot, None] * expert(int(e), h[tokens])
    return out


def whole(data: dict, key: str) -> int:
    value = data.get(key)
    if value is None:
        raise ScenarioError(key, "is missing; expected the experts' count and size of a mixture-of-experts config")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioError(key, f"expected a whole number ≥ 1, got {kind(value)}")
    return value


def _sizes(data: dict, count: str, inner: str) -> dict:
    moe = {key: whole(data, name) for key, name in (("experts", count), ("top_k", "num_experts_per_tok"),
                                                    ("inner", inner))}
    if moe["top_k"] > moe["experts"]:
        raise ScenarioError("num_experts_per_tok", f"expected at most the {moe['experts']} experts, got {moe['top_k']}")
    return moe


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's k largest, by index (their order does not matter: the shares are summed)."""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k]


# ------------------------------------------------------------------ Qwen3-MoE

def _qwen3_read(data: dict, layers: int, model_type: str) -> dict:
    """Which layers have experts: not mlp_only_layers, and every decoder_sparse_step-th."""
    # Qwen3-MoE's checkpoints say num_experts; transformers 5 writes num_local_experts
    moe = _sizes(data, "num_experts" if "num_experts" in data else "num_local_experts", "moe_intermediate_size")
    step = data.get("decoder_sparse_step", 1)
    dense = data.get("mlp_only_layers") or []
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ScenarioError("decoder_sparse_step", f"expected a whole number ≥ 1, got {kind(step)}")
    if not isinstance(dense, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense):
        raise ScenarioError("mlp_only_layers", f"expected a list of layer numbers, got {kind(dense)}")
    moe.update(norm_topk=data.get("norm_topk_prob", False) is True,
               sparse=[i not in dense and (i + 1) % step == 0 for i in range(layers)])
    return moe


def _qwen3_route(logits: np.ndarray, moe: dict, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """Softmax over every expert, the top k kept (renormalised to sum 1 when norm_topk_prob)."""
    chosen = _top(logits, moe["top_k"])
    shares = np.take_along_axis(_softmax(logits), chosen, axis=-1)
    return chosen, shares / shares.sum(axis=-1, keepdims=True) if moe["norm_topk"] else shares


def _qwen3_shapes(cfg, m: str) -> dict:
    """One nn.Linear per expert and matrix."""
    d, n, e = cfg.d_model, cfg.moe["inner"], cfg.moe["experts"]
    want = {m + "gate.weight": (e, d)}
    for j in range(e):
        want.update({f"{m}experts.{j}.gate_proj.weight": (n, d), f"{m}experts.{j}.up_proj.weight": (n, d),
                     f"{m}experts.{j}.down_proj.weight": (d, n)})
    return want


def _qwen3_tensors(tensors, cfg, m: str) -> dict:
    def linear(e: int) -> dict:
        return {w: tensors[f"{m}experts.{e}.{w}_proj.weight"].T for w in ("gate", "up", "down")}
    return dict(router=tensors[m + "gate.weight"].T, b_router=None, bias=None, expert=linear, shared=None)


QWEN3_MOE = Experts(read=_qwen3_read, route=_qwen3_route, shapes=_qwen3_shapes, tensors=_qwen3_tensors,
                    run=lambda rows, w, cfg: (silu(rows @ w["gate"]) * (rows @ w["up"])) @ w["down"])


# ------------------------------------------------------------------ gpt-oss

def swiglu_clamped(gate_up: np.ndarray, alpha: float, limit: float) -> np.ndarray:
    """gpt-oss's gated unit: gate and up interleaved (even and odd columns), gate capped above at
    the limit and up clamped to ±limit; (up + 1) · gate · sigmoid(alpha · gate)."""
    gate, up = np.minimum(gate_up[:, ::2], limit), np.clip(gate_up[:, 1::2], -limit, limit)
    return (up + 1) * gate * 0.5 * (1 + np.tanh(alpha * gate / 2))


def _gpt_oss_read(data: dict, layers: int, model_type: str) -> dict:
    moe = _sizes(data, "num_local_experts", "intermediate_size")
    moe.update(alpha=float(data.get("swiglu_alpha", 1.702)), limit=float(data.get("swiglu_limit", 7.0)),
               sparse=[True] * layers)
    return moe


def _gpt_oss_route(logits: np.ndarray, moe: dict, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """The top k logits, softmax over those alone."""
    chosen = _top(logits, moe["top_k"])
    return chosen, _softmax(np.take_along_axis(logits, chosen, axis=-1))


def _gpt_oss_shapes(cfg, m: str) -> dict:
    """Stacked experts × in × out tensors (gate and up interleaved), with biases."""
    d, n, e, x = cfg.d_model, cfg.moe["inner"], cfg.moe["experts"], m + "experts."
    return {m + "router.weight": (e, d), m + "router.bias": (e,), x + "gate_up_proj": (e, d, 2 * n),
            x + "gate_up_proj_bias": (e, 2 * n), x + "down_proj": (e, n, d), x + "down_proj_bias": (e, d)}


def _gpt_oss_tensors(tensors, cfg, m: str) -> dict:
    x = m + "experts."

    def stacked(e: int) -> dict:      # experts × in × out, saved or MXFP4, with biases
        return dict(gate_up=tensors.expert(x + "gate_up_proj", e), b_gate_up=tensors.rows(x + "gate_up_proj_bias", [e])[0],
                    down=tensors.expert(x + "down_proj", e), b_down=tensors.rows(x + "down_proj_bias", [e])[0])
    return dict(router=tensors[m + "router.weight"].T, b_router=tensors[m + "router.bias"], bias=None, expert=stacked,
                shared=None)


def _gpt_oss_run(rows: np.ndarray, w: dict, cfg) -> np.ndarray:
    u = swiglu_clamped(rows @ w["gate_up"] + w["b_gate_up"], cfg.moe["alpha"], cfg.moe["limit"])
    return u @ w["down"] + w["b_down"]


GPT_OSS = Experts(read=_gpt_oss_read, route=_gpt_oss_route, shapes=_gpt_oss_shapes, tensors=_gpt_oss_tensors,
                  run=_gpt_oss_run)
