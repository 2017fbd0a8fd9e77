"""DeepSeek's experts (V2, V3; Kimi K2 and Moonlight share V3's), declared as the family table's
`Experts`: config.json's counts and routing keys, the routers, the tensors (routed experts read one
at a time, shared experts on every token), after the first `first_k_dense_replace` dense layers.

The routers: which experts each token goes to and with what weight. V3: sigmoid scores; the choice
adds a learned correction bias (load balancing without a loss) and is limited to the best
`topk_group` of `n_group` groups, each group rated by its two best; the weights are the plain sigmoid
scores of the chosen, renormalised when `norm_topk_prob`, times `routed_scaling_factor`. V2: softmax
scores over every expert, the top k greedily or within the groups whose best expert is best
(`group_limited_greedy`)."""
from __future__ import annotations

import numbers

import numpy as np

from ..checks import kind
from ..errors import ScenarioError
from ..mechanisms.latent.checkpoint import whole
from .experts import Experts
from .ops import mlp


def route(logits: np.ndarray, r: dict, bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(experts, weights), both tokens × top_k, for the router's logits (tokens × experts). r holds
    the config's routing keys."""
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
    return experts, weights * r["routed_scaling_factor"]


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


def expert_sizes(data: dict, layers: int, model_type: str) -> dict:
    """The experts' counts and routing: routed and shared experts, top k, their width, the dense
    layers before them, groups, scoring (V3 sigmoid, V2 softmax) and the weights' scaling."""
    why, v2 = " (the experts' counts)", model_type == "deepseek_v2"   # the others route as V3 does
    experts = whole(data, "n_routed_experts", need=why)
    out = dict(experts=experts, top_k=whole(data, "num_experts_per_tok", need=why),
               inner=whole(data, "moe_intermediate_size", need=why),
               shared=whole(data, "n_shared_experts", 0, low=0),
               dense=whole(data, "first_k_dense_replace", 0, low=0),
               scoring="softmax" if v2 else "sigmoid",
               method=data.get("topk_method") or ("greedy" if v2 else "noaux_tc"),
               # transformers' V2 router never renormalises, whatever config.json says
               norm_topk_prob=not v2 and data.get("norm_topk_prob", True) is True,
               n_group=data.get("n_group"), topk_group=data.get("topk_group"))
    if out["top_k"] > experts:
        raise ScenarioError("num_experts_per_tok", f"expected at most n_routed_experts ({experts}), got {out['top_k']}")
    factor = data.get("routed_scaling_factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or not factor > 0:
        raise ScenarioError("routed_scaling_factor", f"expected a number > 0, got {kind(factor)}")
    out["routed_scaling_factor"] = float(factor)
    if v2 and out["method"] not in ("greedy", "group_limited_greedy"):
        raise ScenarioError("topk_method", f"{out['method']!r} is not supported; expected greedy or "
                            "group_limited_greedy")
    grouped = out["scoring"] == "sigmoid" or out["method"] == "group_limited_greedy"
    if grouped and out["n_group"] not in (None, 1):
        groups = whole(data, "n_group")
        if experts % groups or not 1 <= whole(data, "topk_group", need=" (with n_group)") <= groups:
            raise ScenarioError("n_group", f"expected a divisor of the {experts} experts with topk_group ≤ it, got "
                                f"n_group {groups}, topk_group {data.get('topk_group')}")
        if out["scoring"] == "sigmoid" and experts // groups < 2:
            raise ScenarioError("n_group", f"expected groups of at least 2 experts (each is rated by its best "
                                f"two), got {experts} experts in {groups} groups")
    if data.get("moe_layer_freq", 1) != 1:
        raise ScenarioError("moe_layer_freq", f"{data.get('moe_layer_freq')!r} is not supported; expected 1 (every "
                            "layer after first_k_dense_replace has experts)")
    out["sparse"] = [i >= out["dense"] for i in range(layers)]
    return out


def _gated(cfg, at: str, width: int) -> dict:
    """A gated MLP's three nn.Linear weights as saved."""
    d = cfg.d_model
    return {at + "gate_proj.weight": (width, d), at + "up_proj.weight": (width, d), at + "down_proj.weight": (d, width)}


def _shapes(cfg, m: str) -> dict:
    """The router, the first expert (the others are checked as each is read), the correction bias
    (sigmoid scoring) and the shared experts."""
    e = cfg.moe
    want = {m + "gate.weight": (e["experts"], cfg.d_model), **_gated(cfg, m + "experts.0.", e["inner"])}
    if e["scoring"] == "sigmoid":
        want[m + "gate.e_score_correction_bias"] = (e["experts"],)
    if e["shared"]:
        want.update(_gated(cfg, m + "shared_experts.", e["inner"] * e["shared"]))
    return want


def _tensors(tensors, cfg, m: str) -> dict:
    def gated(at: str) -> dict:
        return {w: tensors[f"{at}{w}_proj.weight"].T for w in ("gate", "up", "down")}
    bias = m + "gate.e_score_correction_bias"
    return dict(router=tensors[m + "gate.weight"].T, b_router=None, bias=tensors[bias] if bias in tensors else None,
                expert=lambda e: gated(f"{m}experts.{e}."),
                shared=gated(m + "shared_experts.") if cfg.moe["shared"] else None)


DEEPSEEK = Experts(read=expert_sizes, route=route,
                   shapes=_shapes, tensors=_tensors, run=lambda rows, w, cfg: mlp(rows, w, cfg.activation),
                   expert_shapes=lambda cfg, m, e: _gated(cfg, f"{m}experts.{e}.", cfg.moe["inner"]),
                   dense_inner=True)
